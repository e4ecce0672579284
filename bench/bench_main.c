/* bench/bench_main.c — `sluice-bench <command> [options]`. */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

/* One row per subcommand; the usage text is generated from this table. */
static const struct bench_cmd bench_cmds[] = {
	{ "storage", "append/recovery throughput of the log vs raw O_DIRECT io_uring", bench_storage },
	{ "codec", "Kafka codec: decode+encode Produce request / Fetch response, GB/s", bench_codec },
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
