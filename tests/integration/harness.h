/* tests/integration/harness.h — a real sluiced process for integration
 * tests: start, stop (SIGTERM), kill (SIGKILL), restart; a free loopback
 * port; a temporary directory; librdkafka confs; raw Kafka frames over a
 * plain socket (big-endian helpers) for the bad-input suite.
 *
 * Thread: the test's own (Criterion forks one process per test). Owns the
 * broker child, its temporary directory (under $SLUICE_TEST_DIR or
 * /var/tmp) and a socket that keeps the port reserved for the broker's
 * whole life, restarts included (bound with SO_REUSEPORT and SO_REUSEADDR,
 * never listening, so the broker's port probe and bind accept it and no
 * other test's port search picks it).
 * Errors: the start/stop helpers fail the current test with cr_assert, so
 * they return only on success; raw socket helpers return 0/count or
 * -errno.
 *
 * Readiness is the broker's "listening on HOST:PORT" line on its stdout,
 * read from a pipe: no sleeps. The broker gets PR_SET_PDEATHSIG, so a test
 * that crashes or times out does not leave it running.
 */
#ifndef SLUICE_ITEST_HARNESS_H
#define SLUICE_ITEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <librdkafka/rdkafka.h>

#define BROKER_MAX_ARGS 16

struct broker_proc {
	pid_t pid;                   /* 0 when not running */
	int port;
	int reserve_fd;              /* keeps the port ours across restarts */
	char dir[256];               /* temporary directory (removed at cleanup) */
	char data_dir[300];          /* dir/data: the broker's log.dirs */
	char log_path[300];          /* dir/broker.log: the broker's stderr */
	char bootstrap[64];          /* "127.0.0.1:PORT" */
	const char *extra[BROKER_MAX_ARGS];   /* extra arguments, NULL-ended (borrowed) */
	int nextra;
	int last_status;             /* waitpid status of the last stop/kill */
};

/* Make a temporary directory and reserve a free port; does not start.
 * extra: further sluiced arguments ("--set", "k=v", ...), NULL-ended, or
 * NULL; the strings must outlive b. */
void broker_init(struct broker_proc *b, const char *const *extra);

/* fork+exec build/sluiced --data-dir --listen --shards 2 + extra; wait for
 * its "listening on" line. */
void broker_start(struct broker_proc *b);

/* broker_init + broker_start. */
void broker_launch(struct broker_proc *b, const char *const *extra);

/* SIGTERM and wait; asserts a clean exit (status 0). */
void broker_stop(struct broker_proc *b);

/* SIGKILL and wait. */
void broker_kill(struct broker_proc *b);

/* Wait (up to timeout_ms, else fail the test) until no listener is left
 * on b's port, probing as sluiced does at start-up. Returns the number of
 * 1 ms waits. */
int broker_wait_port_free(const struct broker_proc *b, int timeout_ms);

/* Stop with sig (SIGTERM: clean, asserting exit 0; SIGKILL), wait for the
 * old listeners to go (broker_wait_port_free), then start again on the
 * same port and data directory. */
void broker_restart(struct broker_proc *b, int sig);

/* Stop if running (SIGTERM, asserting exit 0 unless already killed),
 * release the port, rm -rf the directory. */
void broker_cleanup(struct broker_proc *b);

/* Print the tail of the broker's stderr (on a failure). */
void broker_dump_log(const struct broker_proc *b);

/* ---- fault-injecting proxy (tests/integration/faultproxy.c) --------- */

struct proxy_proc {
	pid_t pid;                   /* 0 when not running */
	int port;
	void *out;                   /* FILE * of its stdout (the stats line) */
	char bootstrap[64];          /* "127.0.0.1:PORT" */
	char advertised[96];         /* "advertised.listeners=PLAINTEXT://127.0.0.1:PORT" */
	char stats[1024];            /* its "faultproxy stats:" line, after proxy_stop */
};

/* fork+exec build/itests/faultproxy --target 127.0.0.1:target_port
 * --listen 127.0.0.1:0 + args (NULL-ended or NULL: "--drop-pct", "3",
 * "--seed", "7", ...); wait for its "listening on" line. The proxy gets
 * PR_SET_PDEATHSIG. */
void proxy_start(struct proxy_proc *p, int target_port, const char *const *args);

/* Turn its faults on or off (SIGUSR2 / SIGUSR1; takes effect at its next
 * poll, not synchronously). */
void proxy_faults(const struct proxy_proc *p, int on);

/* SIGTERM, read its stats line into p->stats, wait; asserts exit 0. */
void proxy_stop(struct proxy_proc *p);

/* A counter from p->stats (after proxy_stop), -1 if absent. */
long proxy_stat(const struct proxy_proc *p, const char *key);

/* broker_init(b, extra), a proxy in front of b's port (proxy_start with
 * proxy_args), then broker_start with advertised.listeners set to the
 * proxy, so that clients that bootstrap from p->bootstrap (or from
 * b->bootstrap) talk to the broker only through the proxy. extra may hold
 * at most BROKER_MAX_ARGS - 3 arguments. */
void broker_launch_proxied(struct broker_proc *b, struct proxy_proc *p, const char *const *extra,
			   const char *const *proxy_args);

/* ---- librdkafka ---------------------------------------------------- */

/* A conf with bootstrap.servers set, quiet logs, and each KEY=VALUE pair
 * of kv (NULL-ended, alternating key and value) applied; any failure to
 * set one fails the test. */
rd_kafka_conf_t *harness_conf(const struct broker_proc *b, const char *const *kv);

/* A producer from harness_conf(kv) with dr_msg_cb installed (may be
 * NULL). */
rd_kafka_t *harness_producer(const struct broker_proc *b, const char *const *kv,
			     void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
			     void *opaque);

/* A consumer for the simple (legacy, no group) API with
 * enable.partition.eof=true. */
rd_kafka_t *harness_consumer(const struct broker_proc *b, const char *const *kv);

/* A high-level (subscribing) consumer of topic in group: manual commits
 * (enable.auto.commit and auto offset store off), from the earliest offset
 * when the group has none, 6 s sessions, 500 ms heartbeats; kv (may be
 * NULL) overrides these. rd_kafka_poll_set_consumer done. */
rd_kafka_t *harness_group_consumer(const struct broker_proc *b, const char *group, const char *topic,
				   const char *const *kv);

/* Create a topic through the Admin API (rd_kafka_CreateTopics) and
 * assert success. */
void harness_create_topic(rd_kafka_t *rk, const char *topic, int partitions);

/* ---- raw Kafka over a plain socket ---------------------------------- */

/* A byte buffer with big-endian writers. */
struct rawbuf {
	uint8_t *p;
	size_t len, cap;
};

void rb_init(struct rawbuf *r);
void rb_free(struct rawbuf *r);
void rb_bytes(struct rawbuf *r, const void *src, size_t n);
void rb_i8(struct rawbuf *r, int8_t v);
void rb_i16(struct rawbuf *r, int16_t v);
void rb_i32(struct rawbuf *r, int32_t v);
void rb_i64(struct rawbuf *r, int64_t v);
void rb_str(struct rawbuf *r, const char *s);          /* int16 length; NULL = -1 */
void rb_blob(struct rawbuf *r, const void *p, int32_t n); /* int32 length; n < 0 = null */
/* Start a frame: size placeholder + request header v1. */
void rb_request(struct rawbuf *r, int16_t key, int16_t version, int32_t corr);
/* Backpatch the size prefix of the frame started at 0. */
void rb_finish(struct rawbuf *r);

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/* A read cursor over a response. Reads past the end set bad and return 0. */
struct rawcur {
	const uint8_t *p, *end;
	int bad;
};

int8_t rc_i8(struct rawcur *c);
int16_t rc_i16(struct rawcur *c);
int32_t rc_i32(struct rawcur *c);
int64_t rc_i64(struct rawcur *c);
/* Skip an int16-length string; returns its length (-1 null). */
int rc_skip_str(struct rawcur *c);
/* Copy an int16-length string into out (NUL-terminated, truncated to
 * cap - 1; "" for null); returns its wire length (-1 null). */
int rc_str(struct rawcur *c, char *out, size_t cap);
/* Take n bytes (NULL and bad if fewer are left). */
const uint8_t *rc_take(struct rawcur *c, size_t n);

/* Connect to the broker (blocking TCP). Returns the fd or -errno. */
int raw_connect(const struct broker_proc *b);
/* Send all of buf. 0 or -errno. */
int raw_send(int fd, const void *buf, size_t n);
/* Receive one response frame into a malloc'ed buffer (*out, body after
 * the size prefix, *len bytes). Returns 0, -ECONNRESET on EOF/reset
 * before a whole frame, or -errno. */
int raw_recv_frame(int fd, uint8_t **out, size_t *len);
/* 1 if the peer closed the connection (EOF or reset) without sending
 * anything more, 0 if bytes arrived instead. Blocks until one happens. */
int raw_closed(int fd);

/* ApiVersions v0 round trip on a new connection: asserts error 0, the
 * correlation id, and that Produce (0) and Fetch (1) are listed. */
void raw_api_versions_ok(const struct broker_proc *b);

/* Metadata v1 for one topic (auto-creates it with the broker's default
 * partition count); asserts the topic comes back without error. */
void raw_create_topic(const struct broker_proc *b, const char *topic);

/* Produce v7, acks=-1, one topic/partition with the given records blob
 * (already framed batches). Returns the partition's error code; *base
 * gets the base offset. Asserts a well-formed response. */
int16_t raw_produce(int fd, int32_t corr, const char *topic, int32_t partition,
		    const void *records, size_t len, int64_t *base);
/* raw_produce with a transactional id (NULL: none, as raw_produce). */
int16_t raw_produce_txn(int fd, int32_t corr, const char *txn_id, const char *topic, int32_t partition,
			const void *records, size_t len, int64_t *base);

/* Fetch v4 of one partition from offset, max_wait 0; returns the error
 * code, *hw the high watermark, *records (*rlen bytes) a malloc'ed copy of the
 * records blob. */
int16_t raw_fetch(int fd, int32_t corr, const char *topic, int32_t partition, int64_t offset,
		  int64_t *hw, uint8_t **records, size_t *rlen);

#endif
