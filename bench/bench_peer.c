/* bench/bench_peer.c — sluice-bench peer {redis|nats}: one peer's produce,
 * consume and end-to-end figures alone (the suite runs them next to Sluice's;
 * bench/peer.h says what each measures).
 *
 * Results last on stdout as rows "<peer> <metric> <value>"; progress on
 * stderr. Exit 0, 1 on a failure (the server missing, wrong records), 2 bad
 * usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"
#include "bench/peer.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-bench peer {redis|nats} [--records N] [--size BYTES] [--rate R]\n"
		"                         [--seconds S]\n"
		"\n"
		"Starts the peer's server (redis-server with appendonly yes, appendfsync everysec;\n"
		"nats-server with JetStream and a file-backed stream) on a free loopback port, then:\n"
		"produce N records (default 1M) of BYTES (default 100, at least 16) acknowledged,\n"
		"consume them back (each checked), and an end-to-end run at R records/s (default\n"
		"20000) for S seconds (default 5; 0 skips it). The server's directory is under\n"
		"$SLUICE_TEST_DIR or /var/tmp and removed afterwards.\n"
		"\n"
		"SLUICE_NATS_SERVER: the nats-server binary to run (default: nats-server on PATH,\n"
		"else /usr/bin/nats-server or /usr/sbin/nats-server).\n"
		"SLUICE_REDIS_SERVER=PATH runs that redis-server instead of the one on $PATH\n"
		"(else /usr/bin/redis-server).\n");
}

int bench_peer(int argc, char **argv)
{
	struct peer_params p = { .records = 1000000, .size = 100, .rate = 20000, .e2e_seconds = 5 };
	struct peer_result *r;
	int (*run)(const struct peer_params *, struct peer_result *);
	const char *which;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	which = argv[1];
	if (!strcmp(which, "redis"))
		run = peer_redis_run;
	else if (!strcmp(which, "nats"))
		run = peer_nats_run;
	else
		return bad_option("peer", which, "expects redis or nats");
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t v;

		if (!val)
			return bad_option("peer", a, "needs a value (or is unknown)");
		i++;
		if (!strcmp(a, "--records")) {
			if (parse_count(val, &p.records) < 0 || !p.records || p.records > 1000000000)
				return bad_option("peer", a, "expects a count in [1, 1G]");
		} else if (!strcmp(a, "--size")) {
			if (parse_count(val, &v) < 0 || v < 16 || v > 900000)
				return bad_option("peer", a, "expects bytes in [16, 900000]");
			p.size = (int)v;
		} else if (!strcmp(a, "--rate")) {
			if (parse_count(val, &p.rate) < 0 || !p.rate || p.rate > 10000000)
				return bad_option("peer", a, "expects records/s in [1, 10M]");
		} else if (!strcmp(a, "--seconds")) {
			char *end;

			p.e2e_seconds = strtod(val, &end);
			if (end == val || *end || p.e2e_seconds < 0 || p.e2e_seconds > 3600)
				return bad_option("peer", a, "expects seconds in [0, 3600]");
		} else {
			return bad_option("peer", a, "unknown option");
		}
	}
	p.dir = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR") : "/var/tmp";
	r = calloc(1, sizeof(*r));
	if (!r)
		return 1;
	rc = run(&p, r);
	if (rc < 0) {
		fprintf(stderr, "peer %s: %s\n", which, r->error[0] ? r->error : strerror(-rc));
		free(r);
		return 1;
	}
	printf("# sluice-bench peer %s: %s %s (%s), %d-byte records; MB = 10^6 bytes of record values; "
	       "latency in ms\n", which, r->name, r->version, r->durability, p.size);
	printf("%s produce_records %" PRIu64 "\n", which, r->produce_records);
	printf("%s produce_records_per_s %.0f\n", which,
	       r->produce_seconds > 0 ? (double)r->produce_records / r->produce_seconds : 0);
	printf("%s produce_MB_per_s %.1f\n", which,
	       r->produce_seconds > 0 ? (double)r->produce_records * p.size / r->produce_seconds / 1e6 : 0);
	printf("%s produce_ack_p99_ms %.3f\n", which, (double)hist_percentile(&r->produce_lat, 99) / 1e6);
	printf("%s consume_records %" PRIu64 "\n", which, r->consume_records);
	printf("%s consume_records_per_s %.0f\n", which,
	       r->consume_seconds > 0 ? (double)r->consume_records / r->consume_seconds : 0);
	if (p.e2e_seconds > 0) {
		printf("%s e2e_records %" PRIu64 "\n", which, r->e2e_records);
		printf("%s e2e_p50_ms %.3f\n", which, (double)hist_percentile(&r->e2e, 50) / 1e6);
		printf("%s e2e_p99_ms %.3f\n", which, (double)hist_percentile(&r->e2e, 99) / 1e6);
		printf("%s e2e_p99.9_ms %.3f\n", which, (double)hist_percentile(&r->e2e, 99.9) / 1e6);
	}
	printf("%s server_peak_rss_MiB %.0f\n", which, (double)r->server_rss_kb / 1024);
	free(r);
	return 0;
}
