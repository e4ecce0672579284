/* bench/suite.h — what `sluice-bench suite` (bench/bench_suite.c) measures
 * and bench/suite_report.c writes out: scenarios' rows, plots, the peers'
 * figures, and the run's settings.
 *
 * Thread: the suite's main thread.
 */
#ifndef SLUICE_BENCH_SUITE_H
#define SLUICE_BENCH_SUITE_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "bench/emulate.h"
#include "bench/kafka.h"
#include "control/hw_profile.h"

#define SUITE_ROWS    40
#define SUITE_POINTS  8192
#define K14_SIZE      100
#define K14_PARTS     6
#define SUITE_RUNS    2    /* each headline row is measured this many times, to show the run's noise */

/* ---- results ------------------------------------------------------------ */

/* One row of a scenario's table. Figures NAN when not measured. */
struct row {
	char label[80];
	double rps, mbps;            /* records/s; MB/s (10^6 bytes of values) */
	double p50, p99, p999;       /* ms */
	double limit_mbps;           /* what binds mbps; 0: not known */
	const char *binds;           /* "disk write", "NIC", ... */
	double ref_rps, ref_p50, ref_p99, ref_p999;   /* Kafka 2014's */
	double cpu_ns;               /* the broker's CPU (user + system, all its threads) per record, ns;
				      * NaN: not measured (the capacity planner's cost) */
	double client_cpu_ns;        /* the clients' (this process's threads), likewise */
	/* A headline row (the k14 rows, the peers) is measured SUITE_RUNS
	 * times: rps, mbps, p50, p99 and p999 are the runs' means, and each
	 * run's records/s and p99 are kept here; NaN: one run (the other rows) */
	double run_rps[SUITE_RUNS], run_p99[SUITE_RUNS];
	char note[200];
};

/* A plot's data: y1 (and y2 when named) against x. */
struct series {
	const char *xlabel, *y1label, *y2label;
	int logx;
	double y2limit;              /* a dashed line at this y2 (the MB/s limit), 0: none */
	const char *y2limit_what;
	int n;
	double x[SUITE_POINTS], y1[SUITE_POINTS], y2[SUITE_POINTS];
};

struct peer_fig {
	char name[32], version[64], durability[160];
	double prod_rps, cons_rps, p50, p99, p999;   /* the SUITE_RUNS runs' means */
	double run_prod[SUITE_RUNS], run_cons[SUITE_RUNS], run_p99[SUITE_RUNS];
	int ran;
	char error[256];
};

struct scenario;

struct result {
	const struct scenario *sc;
	int ran, rc;
	char error[300];
	double seconds;
	int nrows;
	struct row rows[SUITE_ROWS];
	char summary[600];
	struct series *plot;         /* NULL: none */
	char plot_file[64];
	struct peer_fig peers[3];    /* peers: Sluice, Redis Streams, NATS JetStream */
};

struct suite {
	struct hw_profile prof;
	char prof_path[1024];
	struct emulation em;
	int emulating;
	int quick;
	char out[1024];
	uint64_t records;            /* the k14 rows' record count */
	uint64_t peer_records;       /* the peers scenario's (Sluice's and theirs) */
	double seconds;              /* each timed point */
	uint64_t stored;             /* stored-data: bytes to write */
	uint64_t e2e_rate;           /* k14-latency and peers: records/s */
	double backlog_seconds;      /* backlog-drain: seconds of backlog */
	int shards;
	double nic_mbps, disk_w_mbps;   /* limits, MB/s (0: not known) */
	const char *nic_what;
	struct broker shared;        /* the broker most scenarios share */
	int shared_up;
	char filled_topic[64];       /* on shared: K14 records, for consumers */
	uint64_t filled;
	double k14_rps;              /* k14-producer's rate (backlog-drain's pace) */
	int topic_seq;
	char cmdline[1024];
	struct result res[16];
	int nres;
};

struct scenario {
	const char *name;
	const char *title;
	int (*run)(struct suite *s, struct result *r);
};

/* bench/suite_cluster.c: three nodes (scripts/cluster start 3 in dir, an
 * empty directory, with --shards shards; em non-NULL: --netns, each node's
 * link shaped to em's NIC rate, the nodes in em's disk cgroup). Their
 * bootstrap servers into bootstrap; k the namespaces' K (sluice<K>n<ID>,
 * "" without em). 0, or -errno with err saying what failed (stop it still). */
int suite_cluster_start(const char *dir, int shards, const struct emulation *em, char *bootstrap, size_t blen,
			char *k, size_t klen, char *err, size_t errlen);
/* scripts/cluster stop: SIGTERM the nodes, remove what is in dir (and the
 * namespaces). 0, or -errno with err its output. */
int suite_cluster_stop(const char *dir, char *err, size_t errlen);

/* ---- the CPU a row used (bench/suite_cpu.c) ------------------------------- */

/* The CPU time so far, user and system, of the broker (all its threads,
 * /proc/PID/stat) and of this process, whose threads are the clients
 * (getrusage); NaN where it cannot be read. @thread main */
struct cpu_mark {
	double broker, clients;
};

struct cpu_mark cpu_mark(const struct broker *br);
/* The row's broker and clients' CPU per record from two marks around its
 * run (left NaN where a mark could not be read). */
void row_cpu(struct row *w, struct cpu_mark m0, struct cpu_mark m1, uint64_t records);
/* The same from what timed_produce sampled of a run (run->broker_cpu_s,
 * run->client_cpu_s). */
void row_cpu_run(struct row *w, const struct run *run);

/* ---- what the scenarios are built from (bench/suite_run.c) ------------------ */

/* A new row of r named by fmt, every figure NaN (not measured). */
struct row *suite_row_new(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* r failed (the first failure only is kept): rc (-errno; -EIO when not
 * negative) and the message, said on stderr naming the scenario. */
void suite_fail(struct result *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A run's records/s and MB/s into w. */
void suite_row_rate(struct row *w, uint64_t records, uint64_t bytes, double seconds);
/* A headline row's SUITE_RUNS runs into w: their means, and each run's
 * records/s kept (w->run_rps). */
void suite_row_rate_runs(struct row *w, const uint64_t *records, const uint64_t *bytes, const double *seconds);
/* The same for latency: lat[k] = run k's p50, p99, p99.9 (ms). */
void suite_row_lat_runs(struct row *w, const double (*lat)[3]);
/* The limit w's rate is a fraction of: produce on the slower of the NIC
 * and the disk's write (the NIC alone under memory durability), consume
 * on the NIC. */
void suite_produce_limit(const struct suite *s, struct row *w, int memory);
void suite_consume_limit(const struct suite *s, struct row *w);
/* s's limits from its profile (or its emulation). */
void suite_set_limits(struct suite *s);
/* The options every client and broker of the suite starts from. */
void suite_base_opts(const struct suite *s, struct opts *o);
/* A broker of the suite's, with one --set (or none). 0 or -errno. */
int suite_start_broker(struct suite *s, struct broker *br, const char *set);
/* The broker most scenarios share, started on first use; NULL (r failed). */
struct broker *suite_shared_broker(struct suite *s, struct result *r);
/* Stop br: 0, or -EIO (r failed: its directory is kept). */
int suite_stop_broker(struct broker *br, struct result *r);
/* A new topic of the scenario's on br into name: 0, or -errno (r failed). */
int suite_new_topic(struct suite *s, struct broker *br, struct result *r, int partitions, char *name, size_t len);
/* Delete a measured topic (said on stderr when it cannot be). */
void suite_drop_topic(struct broker *br, const char *topic);

/* A client on a thread of its own: a librdkafka producer or consumer. */
struct suite_client {
	pthread_t th;
	struct opts o;
	struct broker *br;
	char topic[64];
	char label[48];
	uint64_t records;
	int consume;
	struct run run;
	int rc;
};

/* The records of partitions p % mod == rem when record i went to i % parts. */
uint64_t suite_share_of(uint64_t records, int parts, int mod, int rem);
/* Run n clients at once: the records of all over the longest one's time.
 * 0, or -errno (r failed naming the client). */
int suite_run_clients(struct suite_client *c, int n, struct result *r, uint64_t *records, uint64_t *bytes,
		      double *secs);
void suite_client_init(struct suite_client *c, const struct suite *s, struct broker *br, const char *topic,
		       uint64_t records, int consume, const char *label);
/* Start one client's thread (the caller joins c->th): 0 or -errno. */
int suite_client_start(struct suite_client *c);

/* ---- the command line (bench/suite_args.c) --------------------------------- */

/* argv into s (its defaults first; s->stored 0: not given, the caller's
 * default) and want[k] = 1 for each scenario sc[k] named (all when none
 * is). -1: go on; 0 (--help) or 2 (bad usage, said on stderr): exit with
 * it. @thread main */
int suite_parse_args(struct suite *s, int argc, char **argv, int *want, const struct scenario *sc, int nsc);
/* mkdir -p path: 0 or -errno. */
int suite_mkdir_p(const char *path);

/* Write DIR/report.md, DIR/results.json and the plots (gnuplot; a plot
 * that cannot be drawn is said in the report, not an error). The report's
 * headline goes to stdout too. 0, or -errno when a file cannot be written. */
int suite_write(struct suite *s, double seconds);

#endif
