/* bench/bench_main.c — `sluice-bench <command> [options]`. */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

/* One row per subcommand; the usage text is generated from this table. */
static const struct bench_cmd bench_cmds[] = {
	{ "storage", "append/recovery throughput of the log vs raw O_DIRECT io_uring", bench_storage },
	{ "disk", "the disk alone, paced as e2e paces the broker: a record's wait for its O_DIRECT write", bench_disk },
	{ "codec", "Kafka codec: decode+encode Produce request / Fetch response, GB/s", bench_codec },
	{ "produce", "broker via librdkafka: produce records/s, MB/s, ack latency", bench_produce },
	{ "consume", "broker via librdkafka: consume records/s, MB/s (after a pre-produce)", bench_consume },
	{ "e2e", "broker via librdkafka: end-to-end latency at a fixed produce rate", bench_e2e },
	{ "idle", "broker RSS and disk with 10,000 idle partitions, RSS under load", bench_idle },
	{ "rebalance", "consumer groups: gaps and recovery when a member leaves and joins", bench_rebalance },
	{ "commit", "consumer groups: OffsetCommit commits/s and latency", bench_commit },
	{ "scrape", "admin endpoint: produce with /metrics every 100 ms vs none; scrape time/size, 10k partitions", bench_scrape },
	{ "security", "TLS, SASL_SSL vs PLAINTEXT: produce/consume ratios, handshakes/s; ACL check cost", bench_security },
	{ "native", "native protocol over the kernel's UDP vs librdkafka over TCP: records/s, CPU", bench_native },
	{ "peer", "a peer alone (redis: Redis Streams, nats: NATS JetStream): produce, consume, e2e", bench_peer },
	{ "suite", "named scenarios against hardware profiles and peers: report.md, results.json, plots", bench_suite },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-bench <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(bench_cmds) / sizeof(bench_cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", bench_cmds[i].name, bench_cmds[i].help);
	fprintf(f, "\n`sluice-bench <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(bench_cmds) / sizeof(bench_cmds[0]); i++)
		if (!strcmp(argv[1], bench_cmds[i].name))
			return bench_cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "sluice-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
