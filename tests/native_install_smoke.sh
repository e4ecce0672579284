#!/usr/bin/env bash
# tests/native_install_smoke.sh — `make install DESTDIR=...` puts the native
# client library where a program finds it: the header compiles on its own
# (C99 -pedantic and C++), a program links against the shared library and
# against the static one through the installed pkg-config file, runs, and
# gets -ETIMEDOUT from a port where no broker listens and -EINVAL naming
# dpdk_address from the DPDK transport (built in, links DPDK); the shared
# library exports the sluice_* API and nothing else.
set -u
cd "$(dirname "$0")/.."
base=${SLUICE_TEST_DIR:-/var/tmp}
tmp=$(mktemp -d "$base/sluice-native-install-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "native install: FAIL: $*"; }

if make --no-print-directory install DESTDIR="$tmp/root" PREFIX=/usr/local >"$tmp/make.log" 2>&1; then ok
else bad "make install"; cat "$tmp/make.log"; fi
for f in include/sluice_native.h lib/libsluice_native.a lib/libsluice_native.so lib/libsluice_native.so.1 \
         lib/pkgconfig/sluice_native.pc; do
  [ -e "$tmp/root/usr/local/$f" ] && ok || bad "missing /usr/local/$f"
done

cat >"$tmp/prog.c" <<'PROG'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sluice_native.h>

int main(void)
{
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	char err[256] = "";
	int rc;

	sluice_config_init(&cfg);
	cfg.connect_timeout_ms = 300;
	rc = sluice_connect("127.0.0.1:9", &cfg, &c, err, sizeof(err));
	if (rc != -ETIMEDOUT || c) {
		fprintf(stderr, "sluice_connect: %d (%s)\n", rc, err);
		return 1;
	}
	/* the DPDK transport is built in: its configuration is checked
	 * before the EAL starts, and a bad one is named */
	cfg.transport = SLUICE_TRANSPORT_DPDK;
	cfg.dpdk_address = "10.7.0.2";
	rc = sluice_connect("10.7.0.1:9", &cfg, &c, err, sizeof(err));
	if (rc != -EINVAL || !strstr(err, "dpdk_address") || c) {
		fprintf(stderr, "dpdk: %d (%s)\n", rc, err);
		return 1;
	}
	printf("%s\n", sluice_err_name(3));
	return 0;
}
PROG
export PKG_CONFIG_PATH="$tmp/root/usr/local/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
if gcc -std=c99 -pedantic -Wall -Wextra -Werror $(pkg-config --cflags sluice_native) "$tmp/prog.c" \
     $(pkg-config --libs sluice_native) -o "$tmp/prog-shared" 2>"$tmp/cc.log"; then ok
else bad "compile and link against the shared library"; cat "$tmp/cc.log"; fi
out=$(LD_LIBRARY_PATH="$tmp/root/usr/local/lib" "$tmp/prog-shared" 2>&1)
[ "$out" = UNKNOWN_TOPIC_OR_PARTITION ] && ok || bad "shared: $out"
if gcc -std=c99 $(pkg-config --cflags sluice_native) "$tmp/prog.c" "$tmp/root/usr/local/lib/libsluice_native.a" \
     $(pkg-config --static --libs sluice_native | sed 's/-lsluice_native//') -o "$tmp/prog-static" 2>"$tmp/cc.log"; then ok
else bad "link against the static library"; cat "$tmp/cc.log"; fi
out=$("$tmp/prog-static" 2>&1)
[ "$out" = UNKNOWN_TOPIC_OR_PARTITION ] && ok || bad "static: $out"
if printf '#include <sluice_native.h>\nint main(void) { struct sluice_config c; sluice_config_init(&c); return 0; }\n' |
     g++ -x c++ -Wall -Werror $(pkg-config --cflags sluice_native) - $(pkg-config --libs sluice_native) \
       -o "$tmp/prog-cxx" 2>"$tmp/cxx.log"; then ok
else bad "C++"; cat "$tmp/cxx.log"; fi
foreign=$(nm -D --defined-only "$tmp/root/usr/local/lib/libsluice_native.so" | awk '$2 ~ /[TDBR]/ {print $3}' |
          grep -v '^sluice_' || true)
[ -z "$foreign" ] && ok || bad "exported beyond sluice_*: $foreign"
echo "native install: $pass passed, $fail failed"
[ $fail -eq 0 ]
