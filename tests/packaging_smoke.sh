#!/usr/bin/env bash
# tests/packaging_smoke.sh — `make deb` (packaging/build-deb) from this
# build, then its packages: what each holds (the binaries, the conffile,
# the units, man pages, completion, the client library's .pc, profiles,
# docs), Depends computed from the linked libraries, lintian with no error,
# systemd-analyze verify on the units (and with the DPDK drop-ins), the
# capabilities each leaves (systemd-analyze security: none in the base
# units, CAP_IPC_LOCK alone with dpdk.conf, CAP_NET_ADMIN alone with
# dpdk-tap.conf), an
# installation into a throwaway root (dpkg --root, the maintainer scripts
# run chrootless on DPKG_ROOT: this machine's /etc, users and /var are not
# touched, which the test checks) with its removal and purge (the data kept
# unless SLUICE_PURGE_DATA=yes), and the installed sluiced started with the
# installed /etc/sluice/sluiced.properties (on a free port, a temp data
# directory, as a user with no privilege) up to its ready line and stopped
# cleanly. Needs root (dpkg
# --root chowns the data directory to the root's sluice user).
set -u
cd "$(dirname "$0")/.."
base=${SLUICE_TEST_DIR:-/var/tmp}
tmp=$(mktemp -d "$base/sluice-packaging-XXXXXX") || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "packaging: FAIL: $*"; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }

if [ "$(id -u)" -ne 0 ]; then
	echo "packaging: SKIP: needs root (dpkg --root)"
	exit 0
fi
build=${BUILD:-build}

# what this machine holds before, to show nothing of it changed
host_state() {
	md5sum /etc/passwd /etc/group /etc/shadow 2>/dev/null
	ls -ld /etc/sluice /var/lib/sluice 2>&1
	dpkg-query -W -f='${Package} ${Status}\n' sluice 2>&1
}
host_before=$(host_state)

# ---- make deb -------------------------------------------------------------
# gzip: five times faster than xz, the default
if DEB_COMPRESS=gzip make --no-print-directory BUILD="$build" deb >"$tmp/deb.log" 2>&1; then ok
else bad "make deb"; cat "$tmp/deb.log"; exit 1; fi
ver=$(tr -d ' \n' <VERSION); ver=${ver//-/\~}
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb=$build/deb/sluice_${ver}_$arch.deb
lib=$build/deb/libsluice-native1_${ver}_$arch.deb
dev=$build/deb/libsluice-native-dev_${ver}_$arch.deb
bench=$build/deb/sluice-bench_${ver}_$arch.deb
for f in "$deb" "$bench" "$lib" "$dev"; do check '[ -f "$f" ]' "no $f"; done

# ---- what the packages hold ------------------------------------------------
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/sluice.list"
for d in "$lib" "$dev"; do dpkg-deb --contents "$d"; done | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/lib.list"
dpkg-deb --contents "$bench" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/bench.list"
for f in /usr/bin/sluiced /usr/bin/sluicectl /etc/sluice/sluiced.properties \
	/lib/systemd/system/sluiced.service /lib/systemd/system/sluiced@.service \
	/usr/share/sluice/systemd/dpdk.conf /usr/share/sluice/systemd/dpdk-tap.conf \
	/usr/lib/sysusers.d/sluice.conf /usr/lib/tmpfiles.d/sluice.conf \
	/usr/share/man/man1/sluiced.1.gz /usr/share/man/man1/sluicectl.1.gz \
	/usr/share/bash-completion/completions/sluicectl /usr/share/sluice/tools/sluicefault/drill.py \
	/usr/share/sluice/hw-profiles/commodity-2026.conf /usr/share/doc/sluice/install.md \
	/usr/share/doc/sluice/configuration.md /usr/share/doc/sluice/README.md /usr/share/doc/sluice/copyright; do
	check 'grep -qx "$f" "$tmp/sluice.list"' "sluice lacks $f"
done
# the benchmarks are a package of their own: the broker's does not pull the
# client libraries they link
for f in /usr/bin/sluice-bench /usr/share/man/man1/sluice-bench.1.gz /usr/share/doc/sluice-bench/copyright; do
	check 'grep -qx "$f" "$tmp/bench.list"' "sluice-bench lacks $f"
done
check '! grep -q sluice-bench "$tmp/sluice.list"' "sluice holds sluice-bench's files: $(grep sluice-bench "$tmp/sluice.list")"
for f in "/usr/lib/$ma/libsluice_native.so.1" "/usr/lib/$ma/libsluice_native.so" "/usr/lib/$ma/libsluice_native.a" \
	"/usr/lib/$ma/pkgconfig/sluice_native.pc" /usr/include/sluice_native.h; do
	check 'grep -qx "$f" "$tmp/lib.list"' "the library packages lack $f"
done
check '[ "$(dpkg-deb --info "$deb" conffiles)" = /etc/sluice/sluiced.properties ]' \
	"conffiles is not /etc/sluice/sluiced.properties: $(dpkg-deb --info "$deb" conffiles 2>&1)"
depends=$(dpkg-deb --field "$deb" Depends)
for p in libc6 liburing2 libssl3 libraft2; do
	check 'echo "$depends" | grep -q "\<$p\>"' "Depends (dpkg-shlibdeps) lacks $p: $depends"
done
check 'dpkg-deb --field "$lib" Depends | grep -q libisal2' "libsluice-native1's Depends lacks libisal2"
for p in librdkafka1 libhiredis0.14 libnats3.4; do
	check '! echo "$depends" | grep -q "\<$p\>"' "sluice Depends on $p, which only the benchmarks link: $depends"
	check 'dpkg-deb --field "$bench" Depends | grep -q "\<$p\>"' "sluice-bench's Depends lacks $p"
done
check 'dpkg-deb --field "$bench" Depends | grep -q "sluice (= $ver)"' \
	"sluice-bench does not depend on its sluice: $(dpkg-deb --field "$bench" Depends)"

# ---- lintian: no error -----------------------------------------------------
# its scratch files (MLDBM databases) in our directory, not in /tmp
mkdir -p "$tmp/lintian-tmp"
TMPDIR="$tmp/lintian-tmp" lintian --tag-display-limit 0 "$deb" "$bench" "$lib" "$dev" >"$tmp/lintian.log" 2>&1
grep '^W:' "$tmp/lintian.log"
check '! grep -q "^E:" "$tmp/lintian.log"' "lintian errors: $(grep '^E:' "$tmp/lintian.log")"

# ---- the units: systemd-analyze verify -----------------------------------
# a root with the package unpacked, this machine's units (the targets the
# service names) and /bin/kill (ExecReload); man:sluiced(1) found in it
vroot=$tmp/verify
mkdir -p "$vroot/lib/systemd/system" "$vroot/bin"
cp -a /lib/systemd/system/. "$vroot/lib/systemd/system/"
cp /bin/kill "$vroot/bin/kill"
dpkg-deb -x "$deb" "$vroot"
verify() {   # what to call it, units...
	local what=$1; shift
	if out=$(MANPATH=$vroot/usr/share/man systemd-analyze verify --root="$vroot" "$@" 2>&1) && [ -z "$out" ]; then ok
	else bad "systemd-analyze verify ($what): $out"; fi
}
verify "the units" sluiced.service sluiced@test.service
# the capabilities each unit leaves the broker, as systemd's own analysis
# counts them ("- CapabilityBoundingSet=~CAP_..." lines in the C locale,
# "✗ ..." in a UTF-8 one): none in the base
# units, exactly what each DPDK drop-in says it adds
caps() {
	LC_ALL=C systemd-analyze security --offline=yes --root="$vroot" "$1" 2>/dev/null |
		sed -n 's/^- CapabilityBoundingSet=~\(CAP_[A-Z_*|()]*\).*/\1/p' | sort | tr '\n' ' '
}
for u in sluiced.service sluiced@test.service; do
	c=$(caps "$u")
	check '[ -z "$c" ]' "$u leaves capabilities: $c"
done
mkdir -p "$vroot/etc/systemd/system/sluiced.service.d" "$vroot/etc/systemd/system/sluiced@test.service.d"
cp "$vroot/usr/share/sluice/systemd/dpdk.conf" "$vroot/etc/systemd/system/sluiced.service.d/"
cp "$vroot/usr/share/sluice/systemd/dpdk-tap.conf" "$vroot/etc/systemd/system/sluiced@test.service.d/"
verify "with the DPDK drop-ins" sluiced.service sluiced@test.service
c=$(caps sluiced.service)
check '[ "$c" = "CAP_IPC_LOCK " ]' "sluiced.service with dpdk.conf: capabilities '$c', not CAP_IPC_LOCK alone"
c=$(caps sluiced@test.service)
check '[ "$c" = "CAP_NET_ADMIN " ]' "sluiced@test.service with dpdk-tap.conf: capabilities '$c', not CAP_NET_ADMIN alone"
check 'LC_ALL=C systemd-analyze security --offline=yes --root="$vroot" sluiced.service 2>/dev/null | grep -q "^- PrivateDevices="' \
	"dpdk.conf does not give the devices back"
# and it would say so: a unit whose ExecStart is missing fails
sed 's|^ExecStart=/usr/bin/sluiced|ExecStart=/usr/bin/sluiced-missing|' "$vroot/lib/systemd/system/sluiced.service" \
	>"$vroot/lib/systemd/system/sluiced-broken.service"
check '! systemd-analyze verify --man=no --root="$vroot" sluiced-broken.service >/dev/null 2>&1' \
	"systemd-analyze verify passed a unit whose binary is missing"
check 'grep -q "^Type=notify" "$vroot/lib/systemd/system/sluiced.service"' "sluiced.service is not Type=notify"

# ---- install into a throwaway root, remove, purge ----------------------------
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
: >"$root/var/lib/dpkg/status"
: >"$root/var/lib/dpkg/available"
# its libraries are this machine's, not the empty root's: --force-depends
dpk() { dpkg --root="$root" --force-script-chrootless --force-depends --log="$tmp/dpkg.log" "$@"; }
if dpk -i "$deb" "$bench" "$lib" "$dev" >"$tmp/install.log" 2>&1; then ok
else bad "dpkg --root -i"; cat "$tmp/install.log"; fi
check 'grep -q "^sluice:x:[0-9]*:[0-9]*:.*:/var/lib/sluice:/usr/sbin/nologin$" "$root/etc/passwd"' \
	"no sluice system user in the root's /etc/passwd: $(cat "$root/etc/passwd" 2>&1)"
uid=$(awk -F: '$1 == "sluice" {print $3}' "$root/etc/passwd")
gid=$(awk -F: '$1 == "sluice" {print $3}' "$root/etc/group")
check '[ "$(stat -c "%u:%g %a" "$root/var/lib/sluice" 2>&1)" = "$uid:$gid 750" ]' \
	"/var/lib/sluice is not the sluice user's (0750): $(stat -c '%u:%g %a' "$root/var/lib/sluice" 2>&1)"
check '[ -x "$root/usr/bin/sluiced" ] && [ -f "$root/etc/sluice/sluiced.properties" ]' "the root lacks sluiced or its config"
check 'bash -c "source \"$root/usr/share/bash-completion/completions/sluicectl\" && complete -p sluicectl" >/dev/null 2>&1' \
	"the bash completion does not register sluicectl"
check 'PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root/usr/lib/$ma/pkgconfig" pkg-config --libs sluice_native | grep -q lsluice_native' \
	"pkg-config finds no sluice_native in the root"

# the installed broker with the installed configuration, as the unit runs
# it: as a user with no privilege (nobody here, sluice there; only the
# data directory and the ports are the test's)
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkfifo "$tmp/out"
chmod 711 "$tmp"
mkdir -m 750 "$tmp/data"
chown 65534:65534 "$tmp/data"
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
	"$root/usr/bin/sluiced" --config "$root/etc/sluice/sluiced.properties" --data-dir "$tmp/data" \
	--listen "127.0.0.1:$port" --set admin.listen=127.0.0.1:0 >"$tmp/out" 2>"$tmp/sluiced.log" &
pid=$!
exec 3<"$tmp/out"
ready=
while IFS= read -r -t 30 line <&3; do
	case $line in *"listening on 127.0.0.1:$port"*) ready=1; break ;; esac
done
if [ -n "$ready" ]; then ok
else bad "the installed sluiced with the installed config was not ready within 30 s: $(tail -5 "$tmp/sluiced.log")"; fi
cat <&3 >/dev/null &
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
exec 3<&-
check '[ $rc -eq 0 ]' "the installed sluiced exited $rc after SIGTERM: $(tail -5 "$tmp/sluiced.log")"
check '[ -n "$(find "$tmp/data" -type f -uid 65534 | head -1)" ] && [ -z "$(find "$tmp/data" ! -uid 65534 | head -1)" ]' \
	"the broker's files are not all the unprivileged user's"

check '[ -x "$root/usr/bin/sluice-bench" ]' "the root lacks sluice-bench"
check '! dpk --no-force-depends -r sluice >"$tmp/remove0.log" 2>&1' "sluice removed while sluice-bench, which needs it, stays"
dpk -r sluice-bench >"$tmp/remove1.log" 2>&1 || bad "dpkg --root -r sluice-bench: $(cat "$tmp/remove1.log")"
check '[ ! -e "$root/usr/bin/sluice-bench" ]' "sluice-bench still there after remove"
echo data >"$root/var/lib/sluice/meta.properties"
dpk -r sluice >"$tmp/remove.log" 2>&1 || bad "dpkg --root -r sluice: $(cat "$tmp/remove.log")"
check '[ ! -e "$root/usr/bin/sluiced" ]' "sluiced still there after remove"
check '[ -f "$root/etc/sluice/sluiced.properties" ] && [ -f "$root/var/lib/sluice/meta.properties" ]' \
	"remove deleted the configuration or the data"
check 'grep -q "^sluice:" "$root/etc/passwd"' "remove deleted the sluice user"
dpk -P sluice >"$tmp/purge.log" 2>&1 || bad "dpkg --root -P sluice: $(cat "$tmp/purge.log")"
check '[ ! -e "$root/etc/sluice" ]' "/etc/sluice still there after purge"
check '[ -f "$root/var/lib/sluice/meta.properties" ]' "purge deleted the data though nobody asked"
check 'grep -q "data in /var/lib/sluice is kept" "$tmp/purge.log"' "purge did not say the data is kept"
dpk -i "$deb" >"$tmp/install2.log" 2>&1 || bad "dpkg --root -i again: $(cat "$tmp/install2.log")"
SLUICE_PURGE_DATA=yes dpk -P sluice >"$tmp/purge2.log" 2>&1 || bad "dpkg --root -P (SLUICE_PURGE_DATA=yes)"
check '[ ! -e "$root/var/lib/sluice" ]' "SLUICE_PURGE_DATA=yes purge kept /var/lib/sluice"
dpk -P libsluice-native-dev libsluice-native1 >"$tmp/purge3.log" 2>&1 || bad "dpkg --root -P the library packages"
left=$(cd "$root" && find . -mindepth 1 ! -path './var/lib/dpkg*' ! -path ./var/lib ! -path ./var \
	! -path ./etc ! -path './etc/passwd*' ! -path './etc/group*' ! -path './etc/shadow*' ! -path './etc/gshadow*' \
	! -path ./etc/.pwd.lock)
check '[ -z "$left" ]' "left in the root after purging everything: $left"

check '[ "$(host_state)" = "$host_before" ]' "this machine's users, /etc/sluice or /var/lib/sluice changed"
echo "packaging: $pass passed, $fail failed"
[ $fail -eq 0 ]
