/* bench/peer_redis.c — the Redis Streams peer (bench/peer.h): starts its own
 * redis-server, measures produce, consume and e2e through hiredis, stops it.
 *
 * The server: $SLUICE_REDIS_SERVER, else redis-server on $PATH, else
 * /usr/bin/redis-server; on a free 127.0.0.1 port, in a fresh directory
 * under params->dir (removed at the end; kept, and its path named, when the
 * server died or never got ready), with appendonly yes, appendfsync
 * everysec, save "" (no RDB snapshots), its log in DIR/redis.log. Ready when PING answers and INFO
 * names our process; stopped with SIGTERM (SIGKILL after REDIS_STOP_TIMEOUT s).
 * The server gets PR_SET_PDEATHSIG: a killed bench leaves no server running.
 *
 * produce  XADD to one stream key, one field "v" of params->size bytes,
 *          pipelined with at most WINDOW commands (and WINDOW_BYTES of
 *          values) outstanding; each reply checked; ack latency = reply
 *          time - the time its command's batch was written.
 * consume  XREAD COUNT READ_COUNT (at most READ_BYTES) from id 0 until every
 *          record is read, each checked: length, index in bytes 0..7 in
 *          order, the pattern.
 * e2e      a fresh key; a reader thread (its own connection) follows it with
 *          XREAD BLOCK 100 from the last id it had before the first send,
 *          while this thread sends at params->rate records/s, pipelined,
 *          draining replies as they come (never waiting on one).
 *
 * Thread: the caller's; e2e adds the reader. SIGPIPE is ignored while it
 * runs (a dead server is an EPIPE, reported as such).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"
#include "bench/peer.h"

/* Outstanding XADDs in produce. Measured here (2 cores, 1M records of 100
 * bytes): 500, 1000, 2000 and 4000 all give 710-740k records/s, while the
 * ack p99 grows with the window (1.0, 2.6, 4-7, 10 ms): 1000, the smallest
 * of the suggested 1000-4000, is as fast and keeps the latency low. */
#define WINDOW         1000
#define WINDOW_BYTES   (16 << 20)  /* and at most this many bytes of values */
#define READ_COUNT     10000   /* XREAD COUNT, consume and e2e */
#define READ_BYTES     (64 << 20)  /* and at most this many bytes a reply */
#define REDIS_READY_TIMEOUT  30      /* s for the server to answer PING */
#define REDIS_STOP_TIMEOUT   10      /* s for the server to exit after SIGTERM */
#define REPLY_TIMEOUT  30      /* s without a reply: a failure */
#define TAIL_TIMEOUT   10      /* s for the e2e reader to get the tail */
#define NS             1000000000ull

static const char STREAM_KEY[] = "sluice-bench";
static const char E2E_KEY[] = "sluice-bench-e2e";

struct server {
	pid_t pid;
	int port;
	int keep;                   /* died or never got ready: keep dir */
	char dir[PATH_MAX];
	char log[PATH_MAX + 16];
	uint64_t *peak_rss_kb;
};

/* A failure: the message into r->error, and -err back. */
static int fail(struct peer_result *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	return -err;
}

/* At most max records, and (at least one) of at most bytes in all. */
static int bounded(int max, int bytes, int size)
{
	int n = bytes / size;

	return n < 1 ? 1 : n < max ? n : max;
}

static double rate_of(uint64_t n, uint64_t ns)
{
	return ns ? (double)n * 1e9 / (double)ns : 0;
}

/* ---- the server --------------------------------------------------------- */

static uint64_t sample_rss(struct server *s)
{
	uint64_t kb = s->pid > 0 ? proc_rss_kb(s->pid) : 0;

	if (kb > *s->peak_rss_kb)
		*s->peak_rss_kb = kb;
	return kb;
}

/* The binary: $SLUICE_REDIS_SERVER, else redis-server on $PATH, else
 * /usr/bin/redis-server. */
static int find_binary(char *out, size_t len, struct peer_result *r)
{
	const char *env = getenv("SLUICE_REDIS_SERVER"), *path = getenv("PATH");

	if (env && *env) {
		snprintf(out, len, "%s", env);
		if (access(out, X_OK) < 0)
			return fail(r, ENOENT, "redis-server %s (from SLUICE_REDIS_SERVER) is not an executable: "
				    "%s; point SLUICE_REDIS_SERVER at redis-server or unset it", env, strerror(errno));
		return 0;
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(out, len, "%.*s/redis-server", (int)n, path);
		if (n && access(out, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	snprintf(out, len, "/usr/bin/redis-server");
	if (access(out, X_OK) == 0)
		return 0;
	return fail(r, ENOENT, "no redis-server on PATH nor at /usr/bin/redis-server: scripts/setup installs "
		    "it (or set SLUICE_REDIS_SERVER to its path)");
}

/* The child: stdio to the log (what redis prints before it opens its
 * logfile, e.g. a bad option), die with the parent, exec. */
static void exec_server(const char *exe, const struct server *s)
{
	char port[16];
	int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(126);
	snprintf(port, sizeof(port), "%d", s->port);
	execl(exe, exe, "--port", port, "--bind", "127.0.0.1", "--dir", s->dir,
	      "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
	      "--daemonize", "no", "--logfile", s->log, (char *)NULL);
	fprintf(stderr, "redis: exec %s: %s\n", exe, strerror(errno));
	_exit(127);
}

/* Has the server exited? Reaps it and sets s->keep. */
static int server_gone(struct server *s, int *status)
{
	if (s->pid <= 0)
		return 1;
	if (waitpid(s->pid, status, WNOHANG) != s->pid)
		return 0;
	s->pid = 0;
	s->keep = 1;
	return 1;
}

/* A failed call on a connection: name the call and, if the server is gone,
 * say so and where its log is. */
static int conn_failed(struct server *s, struct peer_result *r, const char *what, const char *why)
{
	int st = 0;

	if (server_gone(s, &st))
		return fail(r, ECHILD, "%s: %s; redis-server exited (status 0x%x): see %s", what, why, st,
			    s->log);
	return fail(r, EIO, "%s: %s (the server's log: %s)", what, why, s->log);
}

static redisContext *connect_to(struct server *s, struct peer_result *r, int timeout_s)
{
	struct timeval tv = { timeout_s, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);

	if (!c || c->err) {
		conn_failed(s, r, "connecting to redis-server", c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

/* The value of "name:" in an INFO reply, into out. */
static int info_field(const redisReply *rep, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	const char *p = rep && rep->type == REDIS_REPLY_STRING ? rep->str : NULL;

	for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ':') {
			snprintf(out, len, "%.*s", (int)strcspn(p + n + 1, "\r\n"), p + n + 1);
			return 0;
		}
	return -1;
}

/* One try: connect, PING, and INFO server naming our pid (not another
 * server that took the port) and its version. 1 ready, 0 not yet. */
static int try_ready(struct server *s, struct peer_result *r)
{
	struct timeval tv = { 0, 200000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
	redisReply *ping = NULL, *info = NULL;
	char pid[32] = "";
	int ready = 0;

	if (c && !c->err && !redisSetTimeout(c, tv))
		ping = redisCommand(c, "PING");
	if (ping && ping->type == REDIS_REPLY_STATUS && !strcmp(ping->str, "PONG"))
		info = redisCommand(c, "INFO server");
	if (info && !info_field(info, "process_id", pid, sizeof(pid))) {
		if (strtol(pid, NULL, 10) != s->pid)
			ready = fail(r, EADDRINUSE, "another redis-server (pid %s) answers on port %d", pid,
				     s->port);
		else
			ready = info_field(info, "redis_version", r->version, sizeof(r->version)) ? 0 : 1;
	}
	freeReplyObject(info);
	freeReplyObject(ping);
	redisFree(c);
	return ready;
}

static int wait_ready(struct server *s, struct peer_result *r)
{
	uint64_t deadline = bench_now_ns() + REDIS_READY_TIMEOUT * NS;
	int st = 0, rc;

	while ((rc = try_ready(s, r)) == 0) {
		struct timespec ts = { 0, 10000000 };  /* 10 ms between tries */

		if (server_gone(s, &st))
			return fail(r, ECHILD, "redis-server exited before it was ready (status 0x%x): see %s",
				    st, s->log);
		if (bench_now_ns() > deadline) {
			s->keep = 1;
			return fail(r, ETIMEDOUT, "redis-server not ready after %d s: see %s", REDIS_READY_TIMEOUT,
				    s->log);
		}
		nanosleep(&ts, NULL);
	}
	return rc < 0 ? rc : 0;
}

static int server_start(struct server *s, const char *parent, struct peer_result *r)
{
	char exe[PATH_MAX];
	int rc;

	if ((rc = find_binary(exe, sizeof(exe), r)) < 0)
		return rc;
	snprintf(s->dir, sizeof(s->dir), "%s/sluice-peer-redis-XXXXXX", parent);
	if (!mkdtemp(s->dir)) {
		rc = errno;
		s->dir[0] = 0;
		return fail(r, rc, "mkdtemp under %s: %s (set SLUICE_TEST_DIR to a writable directory)", parent,
			    strerror(rc));
	}
	snprintf(s->log, sizeof(s->log), "%s/redis.log", s->dir);
	s->port = bench_free_port(SOCK_STREAM);
	if (s->port < 0)
		return fail(r, EADDRNOTAVAIL, "no free port on 127.0.0.1: %s", strerror(errno));
	fprintf(stderr, "redis: starting %s --port %d --dir %s --appendonly yes --appendfsync everysec "
		"--save \"\"\n", exe, s->port, s->dir);
	s->pid = fork();
	if (s->pid < 0) {
		rc = errno;
		s->pid = 0;
		return fail(r, rc, "fork: %s", strerror(rc));
	}
	if (s->pid == 0)
		exec_server(exe, s);
	if ((rc = wait_ready(s, r)) < 0)
		return rc;
	fprintf(stderr, "redis: redis-server %s ready, pid %d\n", r->version, (int)s->pid);
	return 0;
}

/* SIGTERM (redis flushes the AOF and exits), SIGKILL after REDIS_STOP_TIMEOUT;
 * the directory removed unless kept (s->keep: see DIR/redis.log). */
static void server_stop(struct server *s)
{
	uint64_t deadline = bench_now_ns() + REDIS_STOP_TIMEOUT * NS;
	int st = 0;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		while (waitpid(s->pid, &st, WNOHANG) == 0) {
			struct timespec ts = { 0, 10000000 };

			if (bench_now_ns() > deadline) {
				fprintf(stderr, "redis: pid %d did not exit %d s after SIGTERM; killing it\n",
					(int)s->pid, REDIS_STOP_TIMEOUT);
				kill(s->pid, SIGKILL);
				waitpid(s->pid, &st, 0);
				break;
			}
			nanosleep(&ts, NULL);
		}
		s->pid = 0;
	}
	if (!s->dir[0])
		return;
	if (s->keep)
		fprintf(stderr, "redis: redis-server died or never got ready; kept %s for inspection\n",
			s->dir);
	else
		bench_rmrf(s->dir, "redis");
}

/* ---- payload and checks ------------------------------------------------- */

/* Bytes 0..7: record index (little endian); 8..15: due time (e2e) or the
 * pattern; the rest the pattern 'a' + i % 26. */
static void fill_pattern(uint8_t *buf, int size)
{
	for (int i = 0; i < size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
}

/* One stream entry [id, ["v", value]]: its value, or NULL. */
static const redisReply *entry_value(const redisReply *e)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[1]->type != REDIS_REPLY_ARRAY ||
	    e->element[1]->elements != 2 || e->element[1]->element[1]->type != REDIS_REPLY_STRING)
		return NULL;
	return e->element[1]->element[1];
}

/* Record want's value v: length, index, and (check_ts: bytes 8..15 too) the
 * pattern; NULL when right, else what is wrong. */
static const char *check_record(const redisReply *v, uint64_t want, int size, const uint8_t *pat,
				int check_ts)
{
	uint64_t idx;

	if (!v)
		return "not a stream entry with one field";
	if (v->len != (size_t)size)
		return "wrong length";
	memcpy(&idx, v->str, 8);
	if (idx != want)
		return "wrong index (out of order, lost or duplicated)";
	if (check_ts && memcmp(v->str + 8, pat + 8, 8))
		return "wrong bytes 8..15";
	if (memcmp(v->str + 16, pat + 16, (size_t)size - 16))
		return "wrong pattern in bytes 16..";
	return NULL;
}

/* An XREAD reply's entries for our one key: *entries (NULL, 0 for nil). */
static int xread_entries(const redisReply *rep, const redisReply *const **entries, size_t *n)
{
	*entries = NULL;
	*n = 0;
	if (rep->type == REDIS_REPLY_NIL)
		return 0;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 1 ||
	    rep->element[0]->type != REDIS_REPLY_ARRAY || rep->element[0]->elements != 2 ||
	    rep->element[0]->element[1]->type != REDIS_REPLY_ARRAY)
		return -1;
	*entries = (const redisReply *const *)rep->element[0]->element[1]->element;
	*n = rep->element[0]->element[1]->elements;
	return 0;
}

/* The id of entry e into id (the next XREAD starts after it). */
static void entry_id(const redisReply *e, char *id, size_t len)
{
	if (e->type == REDIS_REPLY_ARRAY && e->elements && e->element[0]->type == REDIS_REPLY_STRING)
		snprintf(id, len, "%s", e->element[0]->str);
}

/* ---- progress ----------------------------------------------------------- */

struct ticker {
	const char *what;
	uint64_t t0, last_t, next, last_done, total;
};

static void ticker_start(struct ticker *t, const char *what, uint64_t total)
{
	t->what = what;
	t->t0 = t->last_t = bench_now_ns();
	t->next = t->t0 + NS;
	t->last_done = 0;
	t->total = total;
}

/* Once a second: "redis: produce: 3 s  600000/1000000  ..." on stderr. */
static void tick(struct ticker *t, struct server *s, uint64_t done, const char *extra)
{
	uint64_t now = bench_now_ns(), rss;

	if (now < t->next)
		return;
	rss = sample_rss(s);
	fprintf(stderr, "redis: %s: %.0f s  %" PRIu64 "/%" PRIu64 "  %.0f records/s now, %.0f avg%s%s"
		"  server RSS %.0f MiB\n", t->what, (double)(now - t->t0) / 1e9, done, t->total,
		rate_of(done - t->last_done, now - t->last_t), rate_of(done, now - t->t0),
		extra ? "  " : "", extra ? extra : "", (double)rss / 1024);
	t->last_done = done;
	t->last_t = now;
	while (t->next <= now)
		t->next += NS;
}

/* ---- produce ------------------------------------------------------------ */

static void append_xadd(redisContext *c, const char *key, const uint8_t *buf, int size)
{
	const char *argv[5] = { "XADD", key, "*", "v", (const char *)buf };
	size_t len[5] = { 4, strlen(key), 1, 1, (size_t)size };

	redisAppendCommandArgv(c, 5, argv, len);
}

/* An XADD reply: a stream id, or a failure naming the record. */
static int check_xadd(redisReply *rep, uint64_t idx, struct peer_result *r)
{
	int rc = 0;

	if (rep->type == REDIS_REPLY_ERROR)
		rc = fail(r, EIO, "XADD of record %" PRIu64 ": error reply: %s", idx, rep->str);
	else if (rep->type != REDIS_REPLY_STRING)
		rc = fail(r, EPROTO, "XADD of record %" PRIu64 ": reply of type %d, expected a stream id", idx,
			  rep->type);
	freeReplyObject(rep);
	return rc;
}

/* Write everything appended (the context blocks, with its timeout). */
static int flush(redisContext *c)
{
	int done = 0;

	while (!done)
		if (redisBufferWrite(c, &done) != REDIS_OK)
			return -1;
	return 0;
}

/* Fill the window: append up to WINDOW outstanding, write them; every
 * record of the batch sent at the time of the write. */
static int produce_fill(redisContext *c, const struct peer_params *p, uint8_t *buf, uint64_t *sent,
			uint64_t acked, uint64_t *sent_at)
{
	uint64_t first = *sent, now, window = (uint64_t)bounded(WINDOW, WINDOW_BYTES, p->size);

	while (*sent < p->records && *sent - acked < window) {
		memcpy(buf, sent, 8);
		append_xadd(c, STREAM_KEY, buf, p->size);
		(*sent)++;
	}
	now = bench_now_ns();
	for (uint64_t i = first; i < *sent; i++)
		sent_at[i % WINDOW] = now;
	return first == *sent ? 0 : flush(c);
}

static int run_produce(redisContext *c, struct server *s, const struct peer_params *p,
		       struct peer_result *r)
{
	uint64_t *sent_at = calloc(WINDOW, sizeof(*sent_at)), sent = 0, acked = 0, t0;
	uint8_t *buf = malloc((size_t)p->size);
	struct ticker t;
	int rc = 0;

	if (!sent_at || !buf) {
		rc = fail(r, ENOMEM, "produce: out of memory");
		goto out;
	}
	fill_pattern(buf, p->size);
	fprintf(stderr, "redis: produce: %" PRIu64 " records x %d bytes, XADD %s, %d outstanding\n",
		p->records, p->size, STREAM_KEY, bounded(WINDOW, WINDOW_BYTES, p->size));
	ticker_start(&t, "produce", p->records);
	t0 = t.t0;
	while (acked < p->records && !rc) {
		void *rep = NULL;

		if (produce_fill(c, p, buf, &sent, acked, sent_at) < 0 || redisGetReply(c, &rep) != REDIS_OK) {
			rc = conn_failed(s, r, "produce: XADD", c->errstr);
			break;
		}
		/* that one blocked; take the others already read, without waiting */
		do {
			uint64_t now = bench_now_ns();

			hist_add(&r->produce_lat, now - sent_at[acked % WINDOW]);
			rc = check_xadd(rep, acked, r);
			acked++;
			rep = NULL;
		} while (!rc && acked < sent && redisGetReplyFromReader(c, &rep) == REDIS_OK && rep);
		tick(&t, s, acked, NULL);
	}
	r->produce_seconds = (double)(bench_now_ns() - t0) / 1e9;
	r->produce_records = acked;
	sample_rss(s);
	if (!rc)
		fprintf(stderr, "redis: produce: %" PRIu64 " records acknowledged in %.2f s\n", acked,
			r->produce_seconds);
out:
	free(sent_at);
	free(buf);
	return rc;
}

/* ---- consume ------------------------------------------------------------ */

/* The entries of one XREAD reply, checked; *got advanced, *last their last
 * id. */
static int consume_batch(const redisReply *rep, uint64_t *got, char *last, size_t last_len,
			 const struct peer_params *p, const uint8_t *pat, struct peer_result *r)
{
	const redisReply *const *e;
	size_t n;

	if (rep->type == REDIS_REPLY_ERROR)
		return fail(r, EIO, "consume: XREAD: error reply: %s", rep->str);
	if (xread_entries(rep, &e, &n) < 0)
		return fail(r, EPROTO, "consume: XREAD: unexpected reply (type %d)", rep->type);
	if (!n)
		return fail(r, EIO, "consume: the stream ends after %" PRIu64 " of %" PRIu64 " records", *got,
			    p->records);
	for (size_t i = 0; i < n; i++, (*got)++) {
		const char *bad = *got < p->records ? check_record(entry_value(e[i]), *got, p->size, pat, 1) :
			"more records than produced";

		if (bad)
			return fail(r, EBADMSG, "consume: WRONG DATA: record %" PRIu64 " (entry %s): %s", *got,
				    e[i]->type == REDIS_REPLY_ARRAY && e[i]->elements ? e[i]->element[0]->str : "?",
				    bad);
	}
	entry_id(e[n - 1], last, last_len);
	return 0;
}

static int run_consume(redisContext *c, struct server *s, const struct peer_params *p,
		       struct peer_result *r)
{
	uint8_t *pat = malloc((size_t)p->size);
	char last[64] = "0-0";
	uint64_t got = 0;
	struct ticker t;
	int rc = 0, count = bounded(READ_COUNT, READ_BYTES, p->size);

	if (!pat)
		return fail(r, ENOMEM, "consume: out of memory");
	fill_pattern(pat, p->size);
	fprintf(stderr, "redis: consume: reading %" PRIu64 " records from %s, XREAD COUNT %d, each checked\n",
		p->records, STREAM_KEY, count);
	ticker_start(&t, "consume", p->records);
	while (got < p->records && !rc) {
		redisReply *rep = redisCommand(c, "XREAD COUNT %d STREAMS %s %s", count, STREAM_KEY, last);

		if (!rep) {
			rc = conn_failed(s, r, "consume: XREAD", c->errstr);
			break;
		}
		rc = consume_batch(rep, &got, last, sizeof(last), p, pat, r);
		freeReplyObject(rep);
		tick(&t, s, got, NULL);
	}
	r->consume_seconds = (double)(bench_now_ns() - t.t0) / 1e9;
	r->consume_records = got;
	sample_rss(s);
	if (!rc)
		fprintf(stderr, "redis: consume: %" PRIu64 " records in %.2f s, all checked\n", got,
			r->consume_seconds);
	free(pat);
	return rc;
}

/* ---- e2e ---------------------------------------------------------------- */

struct e2e_reader {
	redisContext *c;
	char last[64];              /* the id to read after */
	int size, count;            /* count: XREAD COUNT */
	uint64_t warm_until;        /* due before this: not counted (__atomic) */
	uint64_t got, counted;      /* got: read by the sender (__atomic) */
	struct hist lat;
	int stop;                   /* __atomic */
	int rc;                     /* the reader's failure (__atomic) */
	char error[200];
	uint8_t *pat;
};

/* One XREAD reply on the reader: check, time, count. */
static int reader_batch(struct e2e_reader *rd, const redisReply *rep)
{
	const redisReply *const *e;
	uint64_t now = bench_now_ns(), got = rd->got, ts;
	uint64_t warm_until = __atomic_load_n(&rd->warm_until, __ATOMIC_ACQUIRE);
	size_t n;

	if (rep->type == REDIS_REPLY_ERROR || xread_entries(rep, &e, &n) < 0) {
		snprintf(rd->error, sizeof(rd->error), "e2e: reader: XREAD: %s",
			 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
		return -EIO;
	}
	for (size_t i = 0; i < n; i++, got++) {
		const redisReply *v = entry_value(e[i]);
		const char *bad = check_record(v, got, rd->size, rd->pat, 0);

		if (bad) {
			snprintf(rd->error, sizeof(rd->error), "e2e: WRONG DATA: record %" PRIu64 ": %s", got, bad);
			return -EBADMSG;
		}
		memcpy(&ts, v->str + 8, 8);
		if (ts >= warm_until) {
			hist_add(&rd->lat, now > ts ? now - ts : 0);
			rd->counted++;
		}
	}
	if (n)
		entry_id(e[n - 1], rd->last, sizeof(rd->last));
	__atomic_store_n(&rd->got, got, __ATOMIC_RELEASE);
	return 0;
}

static void *reader_main(void *arg)
{
	struct e2e_reader *rd = arg;

	while (!__atomic_load_n(&rd->stop, __ATOMIC_ACQUIRE) && !rd->rc) {
		redisReply *rep = redisCommand(rd->c, "XREAD BLOCK 100 COUNT %d STREAMS %s %s", rd->count,
					       E2E_KEY, rd->last);

		int rc = rep ? reader_batch(rd, rep) : -EIO;

		if (!rep)
			snprintf(rd->error, sizeof(rd->error), "e2e: reader: XREAD: %s", rd->c->errstr);
		freeReplyObject(rep);
		__atomic_store_n(&rd->rc, rc, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* The reader's start: the key's last id (XREVRANGE + - COUNT 1), "0-0" on
 * a new key, so it sees every record sent after this. */
static int reader_position(redisContext *c, struct server *s, char *last, size_t len,
			   struct peer_result *r)
{
	redisReply *rep = redisCommand(c, "XREVRANGE %s + - COUNT 1", E2E_KEY);

	if (!rep)
		return conn_failed(s, r, "e2e: XREVRANGE", c->errstr);
	snprintf(last, len, "0-0");
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements)
		entry_id(rep->element[0], last, len);
	freeReplyObject(rep);
	return 0;
}

/* Take the XADD replies already here, without waiting (poll, then read
 * once); wait up to wait_ns for the first when wait_ns > 0. */
static int drain_replies(redisContext *c, struct server *s, uint64_t *acked, uint64_t wait_ns,
			 struct peer_result *r)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	struct timespec ts = { (time_t)(wait_ns / NS), (long)(wait_ns % NS) };
	void *rep = NULL;
	int rc = 0;

	if (ppoll(&pfd, 1, &ts, NULL) > 0 && redisBufferRead(c) != REDIS_OK)
		return conn_failed(s, r, "e2e: XADD", c->errstr);
	while (!rc && redisGetReplyFromReader(c, &rep) == REDIS_OK && rep) {
		rc = check_xadd(rep, *acked, r);
		(*acked)++;
		rep = NULL;
	}
	if (!rc && c->err)
		rc = conn_failed(s, r, "e2e: XADD", c->errstr);
	return rc;
}

/* Send what is due at p->rate since t0 (bytes 8..15: the time each was due,
 * so a late sender counts against latency) and write it. */
static int send_due(redisContext *c, const struct peer_params *p, uint8_t *buf, uint64_t t0,
		    uint64_t total, uint64_t *sent)
{
	/* record k is due at t0 + k / rate: those up to now, record 0 at t0 */
	uint64_t due = (uint64_t)((double)(bench_now_ns() - t0) * (double)p->rate / 1e9) + 1, first = *sent;

	if (due > total)
		due = total;
	for (; *sent < due; (*sent)++) {
		uint64_t ts = t0 + (uint64_t)((double)*sent * 1e9 / (double)p->rate);

		memcpy(buf, sent, 8);
		memcpy(buf + 8, &ts, 8);
		append_xadd(c, E2E_KEY, buf, p->size);
	}
	return *sent == first ? 0 : flush(c);
}

/* The sending loop: until total are sent, waiting on replies (not on any
 * one) until the next record is due. */
static int e2e_send(redisContext *c, struct server *s, const struct peer_params *p,
		    struct e2e_reader *rd, uint64_t total, uint64_t *sent, struct peer_result *r)
{
	uint64_t acked = 0, t0 = bench_now_ns(), next, now, wait;
	uint8_t *buf = malloc((size_t)p->size);
	struct ticker t;
	char extra[96];
	int rc = 0;

	if (!buf)
		return fail(r, ENOMEM, "e2e: out of memory");
	fill_pattern(buf, p->size);
	ticker_start(&t, "e2e", total);
	t.t0 = t.last_t = t0;
	__atomic_store_n(&rd->warm_until, t0 + NS, __ATOMIC_RELEASE);
	while (*sent < total && !rc && !__atomic_load_n(&rd->rc, __ATOMIC_ACQUIRE)) {
		if (send_due(c, p, buf, t0, total, sent) < 0) {
			rc = conn_failed(s, r, "e2e: XADD", c->errstr);
			break;
		}
		/* wait for replies until the next record is due (at most 10 ms) */
		next = t0 + (uint64_t)((double)*sent * 1e9 / (double)p->rate);
		now = bench_now_ns();
		wait = next > now ? next - now : 0;
		rc = drain_replies(c, s, &acked, wait < 10000000 ? wait : 10000000, r);
		snprintf(extra, sizeof(extra), "(sent %" PRIu64 ", acknowledged %" PRIu64 ")", *sent, acked);
		tick(&t, s, __atomic_load_n(&rd->got, __ATOMIC_ACQUIRE), extra);
	}
	while (!rc && acked < *sent) {
		void *rep = NULL;

		if (redisGetReply(c, &rep) != REDIS_OK)
			rc = conn_failed(s, r, "e2e: XADD", c->errstr);
		else
			rc = check_xadd(rep, acked++, r);
	}
	free(buf);
	return rc;
}

/* After the sends: wait up to TAIL_TIMEOUT s for the reader to have them. */
static int e2e_tail(struct e2e_reader *rd, uint64_t sent, struct peer_result *r)
{
	uint64_t deadline = bench_now_ns() + TAIL_TIMEOUT * NS;

	while (__atomic_load_n(&rd->got, __ATOMIC_ACQUIRE) < sent && bench_now_ns() < deadline &&
	       !__atomic_load_n(&rd->rc, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	if (__atomic_load_n(&rd->got, __ATOMIC_ACQUIRE) < sent && !__atomic_load_n(&rd->rc, __ATOMIC_ACQUIRE))
		return fail(r, EIO, "e2e: sent %" PRIu64 " records, the reader got %" PRIu64 " after %d s", sent,
			    __atomic_load_n(&rd->got, __ATOMIC_ACQUIRE), TAIL_TIMEOUT);
	return 0;
}

static int run_e2e(redisContext *c, struct server *s, const struct peer_params *p, struct peer_result *r)
{
	struct e2e_reader *rd = calloc(1, sizeof(*rd));
	uint64_t total = (uint64_t)((p->e2e_seconds + 1) * (double)p->rate), sent = 0;
	pthread_t th;
	int rc, started = 0;

	if (!rd || !(rd->pat = malloc((size_t)p->size))) {
		rc = fail(r, ENOMEM, "e2e: out of memory");
		goto out;
	}
	fill_pattern(rd->pat, p->size);
	hist_init(&rd->lat);
	rd->size = p->size;
	rd->count = bounded(READ_COUNT, READ_BYTES, p->size);
	rd->warm_until = UINT64_MAX;
	if ((rc = reader_position(c, s, rd->last, sizeof(rd->last), r)) < 0)
		goto out;
	if (!(rd->c = connect_to(s, r, 5))) {
		rc = -EIO;
		goto out;
	}
	if ((rc = pthread_create(&th, NULL, reader_main, rd))) {
		rc = fail(r, rc, "e2e: starting the reader thread: %s", strerror(rc));
		goto out;
	}
	started = 1;
	fprintf(stderr, "redis: e2e: %" PRIu64 " records/s for %.0f s (+1 s warm-up), %d bytes, XADD %s, "
		"reader XREAD BLOCK 100 after id %s\n", p->rate, p->e2e_seconds, p->size, E2E_KEY, rd->last);
	rc = e2e_send(c, s, p, rd, total, &sent, r);
	if (!rc)
		rc = e2e_tail(rd, sent, r);
out:
	if (started) {
		__atomic_store_n(&rd->stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		if (!rc && rd->rc)
			rc = fail(r, -rd->rc, "%s", rd->error);
		hist_merge(&r->e2e, &rd->lat);
		r->e2e_records = rd->counted;
		if (!rc)
			fprintf(stderr, "redis: e2e: %" PRIu64 " records sent and read back, %" PRIu64
				" counted after the warm-up\n", sent, rd->counted);
	}
	if (rd) {
		redisFree(rd->c);
		free(rd->pat);
	}
	free(rd);
	return rc;
}

/* ---- the run ------------------------------------------------------------ */

static int run_all(struct server *s, const struct peer_params *p, struct peer_result *r)
{
	redisContext *c;
	int rc;

	if ((rc = server_start(s, p->dir, r)) < 0)
		return rc;
	c = connect_to(s, r, REPLY_TIMEOUT);
	if (!c)
		return -EIO;
	rc = run_produce(c, s, p, r);
	if (!rc)
		rc = run_consume(c, s, p, r);
	if (!rc && p->e2e_seconds > 0)
		rc = run_e2e(c, s, p, r);
	sample_rss(s);
	redisFree(c);
	return rc;
}

int peer_redis_run(const struct peer_params *p, struct peer_result *r)
{
	struct server s = { .peak_rss_kb = &r->server_rss_kb };
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	int rc;

	snprintf(r->name, sizeof(r->name), "redis-streams");
	snprintf(r->durability, sizeof(r->durability), "appendonly yes, appendfsync everysec");
	hist_init(&r->produce_lat);
	hist_init(&r->e2e);
	if (p->size < 16)
		return fail(r, EINVAL, "records of %d bytes: at least 16 (index and due time)", p->size);
	sigaction(SIGPIPE, &ign, &old);
	rc = run_all(&s, p, r);
	server_stop(&s);
	sigaction(SIGPIPE, &old, NULL);
	return rc;
}
