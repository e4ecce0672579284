/* bench/kafka.h — what the librdkafka benchmarks share: the broker a run
 * starts and stops (kafka_broker.c), client configuration, topic creation
 * and deletion (kafka_client.c), the loads kafka_produce, kafka_consume
 * and kafka_e2e (kafka_run.c), option parsing helpers (bench_kafka.c,
 * beside the options of produce|consume|e2e|idle). The consumer-group
 * benchmarks (bench_groups.c, bench_rebalance.c, bench_commit.c), the
 * suite and the other benchmarks use it.
 *
 * Thread: broker_start/stop/busy_cycles and create_topics from one thread
 * (the benchmark's main thread); broker_alive also from the thread that
 * runs a load; base_conf/conf_set/check_cluster from any thread.
 */
#ifndef SLUICE_BENCH_KAFKA_H
#define SLUICE_BENCH_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MAX_PARTS      100000
#define READY_TIMEOUT  30      /* s: broker start, topic creation */
#define STALL_TIMEOUT  30      /* s without progress: a failure */
#define STOP_TIMEOUT   30      /* s for the broker to exit after SIGTERM */

enum mode { M_PRODUCE, M_CONSUME, M_E2E, M_IDLE };

/* The options of produce/consume/e2e/idle; broker_start reads only sets. */
struct opts {
	enum mode mode;
	const char *cmd;
	const char *bootstrap;
	uint64_t records;
	int size;
	int partitions;
	int replication_factor;      /* of the topic produce/consume/e2e create */
	int topics;
	int acks;
	int shards;
	double seconds;
	uint64_t rate;
	const char *compression;
	int linger_ms;
	int compare_shards;
	int idempotent;              /* enable.idempotence=true (acks=all) */
	int compare_idempotent;      /* produce: plain vs idempotent, alternating */
	int transactional;           /* produce: records per transaction (0: none) */
	int compare_mock;            /* produce: rounds of librdkafka's mock cluster,
	                              * then our broker, alternating (0: off) */
	int compare_transactional;   /* produce: plain/idempotent/transactional with
	                              * this many records per transaction (0: off) */
	int broker_pid;
	const char *broker_dir;
	const char *sets[16];
	int nsets;
	/* --client-set: librdkafka properties of every client (client_props) */
	const char *client_sets[16];
	int nclient_sets;
	/* broker_start only: more arguments of sluiced (--add-scram ...) */
	const char *args[8];
	int nargs;
	/* broker_start only (the suite's --emulate, bench/emulate.h): run the
	 * broker in this network namespace (/var/run/netns/NAME), listening on
	 * listen_host (default 127.0.0.1), in this cgroup v2 directory (its
	 * cgroup.procs); NULL: none */
	const char *netns;
	const char *listen_host;
	const char *cgroup;
	/* kafka_produce: records/s to pace at (0: as fast as the client
	 * queues allow); kafka_consume: read only partitions p with
	 * p % part_mod == part_rem (part_mod 0 or 1: all) */
	uint64_t produce_rate;
	int part_mod, part_rem;
	/* kafka_consume: a group consumer (rd_kafka_subscribe) with
	 * librdkafka's default settings but group.id and
	 * auto.offset.reset=earliest, one rd_kafka_consumer_poll a record, as
	 * an application is written from librdkafka's example; 0: the simple
	 * consumer tuned for throughput (consumer_open's settings). All
	 * partitions: part_mod is ignored. */
	int group_defaults;
	/* kafka_produce: the raw client of kafka_wide.c (every ready
	 * partition in one ProduceRequest) instead of librdkafka */
	int client_wide;
};

#include "bench/hist.h"

/* One run's figures. live and stop are for a caller watching from another
 * thread (the suite): live counts records acknowledged (produce) or
 * received (consume) so far; *stop set ends the run early without an
 * error (produce stops sending and waits for what is in flight). */
struct run {
	uint64_t records, bytes, errors;
	double seconds;
	double reading_s;           /* kafka_consume: from its first record to its last (0: none) */
	struct hist lat;            /* ns */
	uint64_t peak_rss_kb;
	double broker_cpu_s;        /* the broker's CPU time over the run, when the caller sampled it (NaN: not) */
	double client_cpu_s;        /* and this process's (the clients'), likewise */
	/* --transactional: committed transactions, the time of each commit
	 * (ns, retries of a retriable error included) and those retries */
	uint64_t txns, commit_retries;
	struct hist commit;
	volatile uint64_t live;
	volatile int *stop;         /* set by the caller before the run; kept */
};

/* kafka_consume checks every record against a bitmap of record indexes
 * when it reads at most this many (an unbounded run the caller stops:
 * offsets only) */
#define KAFKA_CHECKED_MAX 4000000000ull

/* A broker this run started (pid > 0), or an external one. */
struct broker {
	pid_t pid;
	int out_fd;                 /* its stdout; kept open until it stops */
	char root[256];             /* the run directory (data/, sluiced.log) */
	char data[300];
	char bootstrap[300];
	char cluster_id[64];
	int shards;
	int died;                   /* exited on its own: keep root for inspection */
};

struct client_errs {
	int count;
	int fatal;
	char first[512];
};

/* Set by SIGINT/SIGTERM (on_signal); every loop checks it. */
extern volatile sig_atomic_t bench_interrupted;
void on_signal(int sig);

uint64_t proc_rss_kb(pid_t pid);

/* Start build/sluiced next to this binary (o->sets as --set), wait for its
 * "listening on" line; broker_stop SIGTERMs it and removes the run
 * directory (kept when it died or did not exit 0: then -1). */
int broker_start(struct broker *br, int shards, const struct opts *o);
int broker_stop(struct broker *br);
/* The broker's shards' busy cycles so far (SIGUSR1, its "busy cycles"
 * line on stdout, within 5 s): 0, or -errno. */
int broker_busy_cycles(struct broker *br, uint64_t *cycles);
int broker_alive(struct broker *br);
void broker_log_tail(const struct broker *br);

/* librdkafka's in-process mock cluster (kafka_mock.c): one broker in
 * memory holding topic with partitions partitions; br its bootstrap (pid
 * 0: nothing to watch or stop). mock_open: 0, or -errno (said on
 * stderr). Main thread. */
struct mock {
	rd_kafka_t *rk;
	struct rd_kafka_mock_cluster_s *mc;
	struct broker br;
};
int mock_open(struct mock *m, const char *topic, int partitions);
void mock_close(struct mock *m);

int conf_set(rd_kafka_conf_t *c, const char *k, const char *v);
/* Client properties base_conf gives every client made after this call
 * (security.protocol, sasl.*, ssl.*: a listener's), n key/value pairs in
 * kv[2i], kv[2i+1], borrowed until the next call; n 0: none. Main thread,
 * while no client is being made. */
void client_security(const char *const *kv, int n);
/* Properties (KEY=VALUE, as --client-set gives them) set on every client
 * made from then on, after client_security's and before the benchmark's
 * own settings (which win); written by the main thread only while no
 * client is being made. */
void client_props(const char *const *kv, int n);
/* bootstrap.servers and an error callback counting into errs (the opaque;
 * a caller that sets its own opaque must keep errs its first member). */
rd_kafka_conf_t *base_conf(const char *bootstrap, struct client_errs *errs);
/* n topics "<prefix>-<i>" (or prefix itself if single) with p partitions;
 * waits until metadata shows them all with leaders. */
int create_topics(const char *bootstrap, const char *prefix, int n, int single, int p);
/* The same with rf replicas a partition; also waits until every partition's
 * ISR holds all rf (a cluster's acks=all is then answered from the start). */
int create_topics_rf(const char *bootstrap, const char *prefix, int n, int single, int p, int rf);
/* Delete one topic (its log files go with it): 0 or -errno. */
int delete_topic(const char *bootstrap, const char *name);
int check_cluster(rd_kafka_t *rk, const struct broker *br);

/* Produce records (at most; o->seconds bounds the time) to topic from one
 * librdkafka producer, partition = index % o->partitions; label prefixes
 * its progress lines. 0 or -errno (delivery failure, broker gone, stall). */
int kafka_produce(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label);
/* The same load from kafka_wide.c's raw client (o->client_wide): every
 * partition with records due in one ProduceRequest, as the Java client
 * sends them. acks 1 or -1, no compression, no idempotence. */
int kafka_produce_wide(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		       struct run *r, const char *label);
/* Read records back from the start of topic (o->part_mod: a share of its
 * partitions; o->group_defaults: through a default group consumer), every
 * record checked. 0 or -errno (-EBADMSG: wrong data). */
int kafka_consume(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label);
/* End-to-end latency at o->rate records/s for o->seconds (+1 s warm-up). */
int kafka_e2e(const struct opts *o, struct broker *br, const char *topic, struct run *r);
/* The same with light clients (o->client_wide): kafka_wide.c's producer,
 * one request as soon as a record is due at linger.ms=0, and the raw
 * Fetch reader below. */
int kafka_e2e_wide(const struct opts *o, struct broker *br, const char *topic, struct run *r);
/* kafka_wide.c: a TCP connection (TCP_NODELAY; O_NONBLOCK if nonblock) to
 * the first HOST:PORT of bootstrap, for the raw clients: its fd, or
 * -errno with err said. */
int kafka_connect(const char *bootstrap, int nonblock, char *err, size_t errlen);

/* kafka_fetch.c: a raw Fetch v4 reader on a thread of its own, every
 * partition of topic from offset 0, every record checked (offsets
 * contiguous, the value's length, index % partitions), each timed from
 * its due time (value bytes 8..15) once that is at or past warm_until.
 * The caller sets the first block, raw_reader_start starts the thread
 * (0, or -errno with err said), raw_reader_stop joins it (its rc: 0 or
 * -errno, err says). got, rc and warm_until are shared (__atomic
 * builtins); the rest is the reader's until raw_reader_stop returns. */
struct raw_reader {
	const char *bootstrap, *topic;
	int partitions, size;
	uint64_t warm_until;
	/* shared */
	uint64_t got;
	int rc, stop;
	/* the reader's */
	struct hist lat;
	uint64_t counted, fetches;
	char err[256];
	pthread_t th;
	int fd;
	int64_t *next_off;
	uint8_t *req, *in;
	size_t in_cap;
};
int raw_reader_start(struct raw_reader *rd);
int raw_reader_stop(struct raw_reader *rd);

int bad_option(const char *cmd, const char *opt, const char *why);
/* A count with an optional K/M/G suffix. */
int parse_count(const char *s, uint64_t *out);

#endif
