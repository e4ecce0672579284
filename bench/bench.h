/* bench/bench.h — the sluice-bench harness: one subcommand per bench_*.c.
 *
 * Thread: the benchmark's own main thread. Progress goes to stderr while a
 * benchmark runs; results go last to stdout. Each subcommand returns a
 * process exit status (0 ok, 1 failure, 2 bad usage).
 */
#ifndef SLUICE_BENCH_H
#define SLUICE_BENCH_H

#include <stdint.h>
#include <time.h>

struct bench_cmd {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv);
};

int bench_storage(int argc, char **argv);
int bench_disk(int argc, char **argv);
int bench_codec(int argc, char **argv);
int bench_produce(int argc, char **argv);
int bench_consume(int argc, char **argv);
int bench_e2e(int argc, char **argv);
int bench_idle(int argc, char **argv);
int bench_rebalance(int argc, char **argv);
int bench_commit(int argc, char **argv);
int bench_native(int argc, char **argv);
int bench_security(int argc, char **argv);
int bench_scrape(int argc, char **argv);
int bench_peer(int argc, char **argv);
int bench_suite(int argc, char **argv);

/* A loopback port nobody holds (type SOCK_STREAM or SOCK_DGRAM; bound
 * without SO_REUSEPORT, so a port any socket holds is not returned), or -1. */
int bench_free_port(int type);
/* Remove a directory tree; a failure is reported on stderr as "who: ...". */
void bench_rmrf(const char *path, const char *who);
/* The repository's root: build/sluice-bench's directory's parent (".",
 * when /proc/self/exe cannot be read). */
void bench_repo_root(char *buf, size_t len);

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
