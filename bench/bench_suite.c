/* bench/bench_suite.c — placeholder until the suite lands. */
#include <stdio.h>

#include "bench/bench.h"

int bench_suite(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "sluice-bench suite: not implemented yet\n");
	return 1;
}
