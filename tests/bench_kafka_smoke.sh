#!/usr/bin/env bash
# tests/bench_kafka_smoke.sh — `sluice-bench produce --records 20000`,
# `produce --records 2000 --transactional 100` (20 transactions through a
# librdkafka transactional producer, commit latency rows),
# `consume --records 20000`, `produce --client wide`, `consume --client
# wide --partitions 600` and `e2e --client wide`, `produce --client-set` (a client property
# taken and shown, an unknown one refused), `produce --compare-mock 2`
# (also with `--client wide`)
# (librdkafka's in-process mock cluster and the broker, alternating), `security --quick` (PLAINTEXT, SSL and SASL_SSL
# listeners of one broker, certificates made with openssl: produce, consume
# and handshake rows for each, the TLS record layer, the ACL rows from a
# second broker with the authorizer on; ~5 s), `native --records 20000 --compare` (libsluice_native
# over DPDK net_memif — as root, else SKIPPED and said — and over the
# kernel's UDP, with 16 and 64 KiB batches, then librdkafka over TCP, a
# broker each), `rebalance --quick` and `commit --quick` each
# start their own broker, drive it through librdkafka, exit 0, print their
# result rows with numeric figures and leave no run directory behind (a run
# whose broker died keeps its directory, with sluiced.log, and fails here).
# The figures themselves are not checked; the group runs must show no
# overlapping assignment, no skipped offset and no refused or wrong commit
# in the commit bench (the bench exits 1 on those too).
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
# run directories go to a directory of this run's own: other runs of
# sluice-bench on the machine come and go under /var/tmp meanwhile
base=${SLUICE_TEST_DIR:-/var/tmp}
SLUICE_TEST_DIR=$(mktemp -d "$base/sluice-bench-smoke-XXXXXX") || exit 1
export SLUICE_TEST_DIR
# kept when a run left its directory (with sluiced.log) behind
trap 'rmdir "$SLUICE_TEST_DIR" 2>/dev/null' EXIT

# bench_run command...: runs it (at most 120 s); its stdout in $out, its
# exit status in $rc, its stderr in the file $err (judge removes it)
out='' rc='' err=''
bench_run() {
  err=$(mktemp)
  out=$(timeout 120 "$@" 2>"$err")
  rc=$?
}

# judge status message: counts the run passed when status is 0; else
# failed, with the message, the run's output and the end of its stderr
judge() {
  if [ "$1" -eq 0 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "bench-kafka smoke: $2"
    printf '%s\n' "$out"
    tail -20 "$err"
  fi
  rm -f "$err"
}

check() {   # name (the bench's row prefix, then -variant), minimum number of
            # "<bench> <metric> <number>" rows, command...
  local name=$1 want=$2; shift 2
  local rows
  bench_run "$@"
  rows=$(printf '%s\n' "$out" | awk -v b="${name%%-*}" '
    $1 == b && NF >= 3 && $3 ~ /^[0-9]+(\.[0-9]+)?$/ { n++ }
    $1 == b && $2 == "records_per_s" && $3 + 0 > 0 { r = 1 }
    END { print (r ? n + 0 : 0) }')
  [ $rc -eq 0 ] && [ "$rows" -ge "$want" ]
  judge $? "$name: exit $rc, $rows result rows (want >= $want)"
}

# name, minimum number of "<bench> <metric> <number> <number>" rows (one
# column per strategy or per consumer count), rows that must read 0, command...
check_groups() {
  local name=$1 want=$2 zero=$3; shift 3
  local rows
  bench_run "$@"
  rows=$(printf '%s\n' "$out" | awk -v b="$name" -v zero="$zero" '
    BEGIN { nz = split(zero, z, ","); for (i = 1; i <= nz; i++) must[z[i]] = 1 }
    $1 == b && NF >= 4 && $3 ~ /^[0-9]+(\.[0-9]+)?$/ && $4 ~ /^[0-9]+(\.[0-9]+)?$/ {
      n++
      if ($2 in must && ($3 + 0 != 0 || $4 + 0 != 0)) bad = 1
      if ($2 in must) seen++
    }
    END { print (bad || seen != nz ? 0 : n + 0) }')
  [ $rc -eq 0 ] && [ "$rows" -ge "$want" ]
  judge $? "$name: exit $rc, $rows result rows (want >= $want, and 0 in $zero)"
}

check produce 8 build/sluice-bench produce --records 20000
check produce 16 build/sluice-bench produce --records 2000 --transactional 100
check consume 5 build/sluice-bench consume --records 20000
# --client wide: the raw client that packs every ready partition into one
# ProduceRequest; its records read back and checked one by one by
# librdkafka's consumer, over 600 partitions (a fetch answer of more
# iovecs than one sendmsg takes)
check produce 8 build/sluice-bench produce --client wide --partitions 100 --records 20000
check consume 5 build/sluice-bench consume --client wide --partitions 600 --records 30000
# e2e --client wide: that producer at linger.ms=0 and a raw Fetch reader
# (bench/kafka_fetch.c), which checks every record it reads
check e2e 5 build/sluice-bench e2e --client wide --rate 2000 --seconds 2 --linger-ms 0
# --client-set: a librdkafka property every client takes, named in the
# header; one librdkafka does not know fails the run naming it
check_client_set() {
  local bad=''
  bench_run build/sluice-bench produce --records 5000 --client-set socket.nagle.disable=true
  printf '%s\n' "$out" | grep -q '^# sluice-bench produce: .*, clients: socket.nagle.disable=true;' ||
    bad="no 'clients: socket.nagle.disable=true' in the header"
  [ $rc -eq 0 ] || bad="$bad exit $rc"
  rm -f "$err"
  bench_run build/sluice-bench produce --records 10 --client-set no.such.property=1
  [ $rc -ne 0 ] && grep -q 'no.such.property' "$err" || bad="$bad; an unknown property: exit $rc, not named"
  [ -z "$bad" ]
  judge $? "produce --client-set: $bad"
}
check_client_set
# produce --rate R paces the producer: 20,000 records at 10,000 a second
# take 2 s (no less: a paced sender cannot run ahead of its schedule)
check_paced() {
  local bad='' rps
  bench_run build/sluice-bench produce --records 20000 --rate 10000
  rps=$(printf '%s\n' "$out" | awk '$1 == "produce" && $2 == "records_per_s" { print $3 }')
  [ $rc -eq 0 ] || bad="exit $rc"
  awk -v r="${rps:-0}" 'BEGIN { exit !(r > 0 && r <= 10500) }' || bad="$bad records_per_s ${rps:-none}, want <= 10500"
  [ -z "$bad" ]
  judge $? "produce --rate 10000: $bad"
}
check_paced
# --compare-mock 2: two rounds against librdkafka's in-process mock cluster
# and the broker, alternating: a figure for each side of each round, the
# best row with its ratio; a mock option with consume is bad usage; again
# with --client wide (the raw client against both)
check_compare_mock() {
  local bad
  bench_run build/sluice-bench produce --compare-mock 2 --records 20000 "$@"
  bad=$(printf '%s\n' "$out" | awk '
    $1 ~ /^produce_records_per_s_round[12]$/ && $2 + 0 > 0 && $3 + 0 > 0 && $4 + 0 > 0 { r++ }
    $1 == "produce_records_per_s_best" && $2 + 0 > 0 && $3 + 0 > 0 && $4 + 0 > 0 { b = 1 }
    /^# sluice-bench produce: .*in-process mock cluster/ { h = 1 }
    END { if (r != 2) print "rounds " r + 0 " (want 2)"; if (!b) print "no best row"; if (!h) print "no header" }')
  local usage_rc
  build/sluice-bench consume --compare-mock 2 >/dev/null 2>&1
  usage_rc=$?
  [ $usage_rc -eq 2 ] || bad="$bad consume --compare-mock: exit $usage_rc (not 2)"
  [ $rc -eq 0 ] && [ -z "$bad" ]
  judge $? "produce --compare-mock $*: exit $rc; $bad"
}
check_compare_mock
check_compare_mock --client wide
check native-udp 33 build/sluice-bench native --transport udp --records 20000 --compare
if [ "$(id -u)" = 0 ]; then
  check native-memif 33 build/sluice-bench native --records 20000 --compare
else
  echo "bench-kafka smoke: native over net_memif SKIPPED: the DPDK EAL needs root here"
fi
# security --quick: every row, each with a figure per listener (or per
# authorizer state); the record layer named; the figures are not checked
check_security() {
  local bad
  bench_run build/sluice-bench security --quick
  bad=$(printf '%s\n' "$out" | awk '
    BEGIN { split("produce_100B_acks1_records_per_s produce_100B_acks1_MB_per_s consume_100B_records_per_s " \
                  "consume_100B_MB_per_s connections_per_s broker_cpu_us_per_connection", m3, " ")
            for (i in m3) want[m3[i]] = 5 }
    $1 == "security" && ($2 in want) && NF >= 7 && $3 + 0 > 0 && $4 + 0 > 0 && $5 + 0 > 0 { seen[$2] = 1 }
    $1 == "security" && $2 == "acl_produce_100B_records_per_s" && $3 + 0 > 0 && $4 + 0 > 0 { acl = 1 }
    $1 == "security" && $2 == "acl_overhead_pct" && $3 ~ /^-?[0-9]+(\.[0-9]+)?$/ { pct = 1 }
    $1 == "security" && $2 == "tls_record_layer" && ($3 == "openssl" || $3 == "ktls") { layer = 1 }
    $1 == "security" && $2 == "tls_cipher" && $3 ~ /^TLS/ { cipher = 1 }
    END { n = 0; for (k in want) if (!(k in seen)) { print "missing " k; n++ }
          if (!acl) print "missing acl_produce_100B_records_per_s"
          if (!pct) print "missing acl_overhead_pct"
          if (!layer) print "missing tls_record_layer"
          if (!cipher) print "missing tls_cipher" }')
  # a bad option is bad usage (exit 2), and runs nothing
  local usage_rc
  build/sluice-bench security --quick --no-such-option 1 >/dev/null 2>&1
  usage_rc=$?
  [ $usage_rc -eq 2 ] || bad="$bad exit $usage_rc (not 2) for --no-such-option"
  [ $rc -eq 0 ] && [ -z "$bad" ]
  judge $? "security --quick: exit $rc; $bad"
}
check_security

check_groups rebalance 25 overlapping_assignments,skipped build/sluice-bench rebalance --quick
check_groups commit 9 refused,wrong_committed_offsets build/sluice-bench commit --quick --consumers 1,2

left=$(ls -A "$SLUICE_TEST_DIR")
if [ -n "$left" ]; then
  fail=$((fail + 1))
  echo "bench-kafka smoke: run directories left behind in $SLUICE_TEST_DIR:"
  printf '%s\n' "$left"
else
  pass=$((pass + 1))
fi
echo "bench-kafka smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
