/* bench/bench_storage.c — placeholder until the storage engine lands. */
#include <stdio.h>
#include "bench/bench.h"

int bench_storage(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "sluice-bench storage: not built yet\n");
	return 1;
}
