/* bench/groups.h — what the consumer-group benchmarks share (internal to
 * bench/, defined in bench_groups.c): their options and the start of a
 * run, for `sluice-bench rebalance` (bench_rebalance.c) and `sluice-bench
 * commit` (bench_commit.c), the broker they run against, a group's starting
 * commit, two small time helpers.
 *
 * Thread: the benchmark's main thread; a struct gopts is filled once by the
 * options and only read after that (by the benchmark's threads too).
 * Errors: open_gbroker 0 or -errno; bench_groups an exit status (0 ok, 1
 * failure, 2 bad usage).
 */
#ifndef SLUICE_BENCH_GROUPS_H
#define SLUICE_BENCH_GROUPS_H

#include <stdint.h>
#include <time.h>

#include "bench/kafka.h"

#define MAX_MEMBERS    32
#define MAX_STRATS     4
#define MAX_RUNS       8
#define GP_MAX_PARTS   4096

enum gmode { G_REBALANCE, G_COMMIT };

struct gopts {
	enum gmode mode;
	const char *cmd;
	const char *bootstrap;
	int shards;
	int partitions;
	int members;
	uint64_t rate;
	int size;
	int heartbeat_ms;
	int session_ms;
	int periodic_commit_ms;       /* 0: only the revoke callback commits */
	const char *strategies[MAX_STRATS];
	int nstrats;
	double steady_s, settle_s, timeout_s;
	int caught_up_ms;
	int no_jitter;
	/* commit */
	double seconds;
	int consumers[MAX_RUNS];
	int nruns;
	int commit_parts;
	struct opts bo;             /* for broker_start: the --set list */
};

static inline double gms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static inline void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

/* o->bootstrap, or a broker of our own (broker_start with o->bo's --set
 * list); broker_stop it unless o->bootstrap. */
int open_gbroker(const struct gopts *o, struct broker *br);

/* Commit every partition of topic at its log end for group, which has no
 * members yet (see bench_groups.c): 0 or -errno. */
int commit_log_end(const char *bootstrap, const char *group, const char *topic, int partitions);

/* `sluice-bench rebalance|commit`: parse the options (--help, a bad one:
 * the exit status), install the signal handlers, then run(o), the
 * benchmark's body (bench_rebalance.c, bench_commit.c); its exit status. */
int bench_groups(enum gmode mode, const char *cmd, int argc, char **argv, int (*run)(const struct gopts *o));

#endif
