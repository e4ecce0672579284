#!/usr/bin/env bash
# tests/hwprobe_smoke.sh — `scripts/hwprobe --quick` (a few seconds) writes
# a profile in which every key is a number (description= aside), and every
# measured key is there: cores, clock_ghz, memory_gib, the disk's four and
# loopback_tcp_gbps. Fails if any probe fails. The memif keys may be absent
# only when the EAL could not start: the script's "absent" comment then
# gives the reason, which is printed as SKIPPED. nic_gbps and nic_queues are
# optional (a virtual NIC reports no line rate), but an absent one must say
# why. The figures themselves are not checked; the disk test files must be
# gone afterwards. Writes to a temporary file, never hw-profiles/local.conf.
# BUILD=dir takes the probes from another build.
set -u
cd "$(dirname "$0")/.."
base=${SLUICE_TEST_DIR:-/var/tmp}
tmp=$(mktemp -d "$base/sluice-hwprobe-smoke-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
conf=$tmp/profile.conf
fail=0
problem() { echo "hwprobe smoke: $*"; fail=1; }

start=$(date +%s)
scripts/hwprobe --quick --build "${BUILD:-build}" --dir "$tmp" --out "$conf" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -eq 0 ] || problem "scripts/hwprobe --quick exited $rc"
[ -s "$conf" ] || problem "no profile written at $conf"

if [ -s "$conf" ]; then
  # key=value lines: every value but description's a plain number
  while IFS= read -r line; do
    case "$line" in ''|\#*) continue ;; esac
    key=${line%%=*} val=${line#*=}
    [ "$key" = description ] && { [ -n "$val" ] || problem "empty description"; continue; }
    [[ $val =~ ^[0-9]+(\.[0-9]+)?$ ]] || problem "$key=$val is not a number"
  done <"$conf"
  has() { grep -qE "^$1=[0-9]" "$conf"; }
  why() { grep -E "^# $1= absent: ." "$conf" | head -1 | sed "s/^# $1= absent: //"; }
  for k in description cores clock_ghz memory_gib disk_write_mbps disk_read_mbps sync_write_us \
           sync_write_p99_us loopback_tcp_gbps; do
    grep -qE "^$k=." "$conf" || problem "$k missing"
  done
  for k in disk_write_mbps disk_read_mbps sync_write_us loopback_tcp_gbps; do
    awk -F= -v k="$k" '$1 == k && $2 + 0 > 0 { ok = 1 } END { exit !ok }' "$conf" || problem "$k is not above 0"
  done
  for k in nic_gbps nic_queues; do
    has "$k" || [ -n "$(why "$k")" ] || problem "$k neither measured nor explained"
  done
  if has memif_gbps && has memif_mpps; then
    :
  elif why memif_gbps | grep -q '^memif probe skipped: .'; then
    echo "SKIPPED: hwprobe memif: $(why memif_gbps | sed 's/^memif probe skipped: //')"
  else
    problem "memif keys neither measured nor skipped with a reason: $(why memif_gbps)"
  fi
fi
leftover=$(ls -A "$tmp" | grep -vxE 'profile.conf|stdout|stderr' || true)
[ -z "$leftover" ] || problem "the disk probe left files behind: $leftover"
secs=$(( $(date +%s) - start ))
[ $secs -le 20 ] || problem "took $secs s (more than 20)"

if [ $fail -ne 0 ]; then
  echo "--- profile"; cat "$conf" 2>/dev/null
  echo "--- stderr"; tail -40 "$tmp/stderr"
fi
echo "hwprobe smoke: $secs s, $([ $fail -eq 0 ] && echo '1 passed, 0 failed' || echo '0 passed, 1 failed')"
exit $fail
