/* bench/peer_nats.c — the NATS JetStream peer (bench/peer.h): starts its own
 * nats-server with JetStream, measures produce, consume and e2e through
 * libnats, stops the server and removes its directory.
 *
 * Server: $SLUICE_NATS_SERVER, else nats-server on PATH, else
 * /usr/bin/nats-server or /usr/sbin/nats-server; run as
 * `-js -sd DIR/js -a 127.0.0.1 -p PORT -m 0 -l DIR/nats-server.log` in a
 * fresh mkdtemp directory under params->dir (a free port found by binding
 * port 0; -m 0: no monitoring port). Ready when a client connects (retried
 * until a deadline); stopped with SIGTERM, SIGKILL after NATS_STOP_TIMEOUT s.
 *
 * Streams: file storage, 1 replica, no message/byte limits. The file store
 * acknowledges a publish once the message is in its write buffer / the OS
 * page cache and fsyncs its blocks periodically (sync interval, 2 min by
 * default): an acknowledged record survives a server crash, not
 * necessarily a machine crash.
 *
 * produce  js_PublishAsync in a window of WINDOW unacknowledged records;
 *          the context's AckHandler (libnats >= 3.4) sees every ack with the
 *          original message, whose bytes 0..7 give the record index and so
 *          its send time (a ring of send times, larger than the window).
 * consume  an ordered push consumer (js_SubscribeSync, Ordered, deliver
 *          all, no acks) read with natsSubscription_NextMsg: here 1.0-1.1M
 *          records/s against 0.76-0.81M for a pull consumer fetching
 *          batches of 5000 (1M x 100 B).
 * e2e      a second stream; an ordered push consumer delivering new
 *          messages, its callback on libnats's delivery thread, while this
 *          thread publishes at params->rate.
 *
 * libnats is opened (nats_Open) at the start of each run and closed with
 * nats_CloseAndWait once every object of the run is destroyed, so a
 * process can run the peer more than once.
 *
 * Thread: the caller's, plus libnats's threads (ack and e2e callbacks).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
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

#define NATS_READY_TIMEOUT 20        /* s: server accepting clients, stream created */
#define NATS_STOP_TIMEOUT  10        /* s: server exit after SIGTERM */
#define NATS_STALL_TIMEOUT 30        /* s: no ack, no record: the server stalled */
#define NATS_TAIL_TIMEOUT  10        /* s: e2e, waiting for the last records */
/* Unacknowledged publishes in flight. Measured here (2 cores, shared with
 * other runs; 1M x 100 B, records/s acknowledged): 2000-8000 alike within
 * the noise (160k-225k), 16000 and 30000 no faster and their ack p99 2-5x
 * higher; 4000 it is. */
#define WINDOW        4000
#define RING          8192      /* send times, a power of two > WINDOW */

#define SUBJ_PRODUCE  "bench.produce"
#define SUBJ_E2E      "bench.e2e"

/* ---- the server ----------------------------------------------------------- */

struct nats_srv {
	pid_t pid;
	int port;
	char root[PATH_MAX];        /* the mkdtemp directory */
	char log[PATH_MAX + 32];
	char url[64];
	uint64_t *peak_rss;
};

static const char *find_binary(char *buf, size_t len)
{
	const char *env = getenv("SLUICE_NATS_SERVER");
	const char *path = getenv("PATH");
	static const char *const fixed[] = { "/usr/bin/nats-server", "/usr/sbin/nats-server" };

	if (env && *env)
		return env;
	while (path && *path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);

		if (n && (size_t)snprintf(buf, len, "%.*s/nats-server", (int)n, path) < len &&
		    !access(buf, X_OK))
			return buf;
		path = colon ? colon + 1 : NULL;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!access(fixed[i], X_OK))
			return fixed[i];
	return "nats-server";
}

static void sample_rss(struct nats_srv *s)
{
	uint64_t kb = proc_rss_kb(s->pid);

	if (kb > *s->peak_rss)
		*s->peak_rss = kb;
}

/* The last lines of the server's log on stderr (after a failure). */
static void log_tail(const struct nats_srv *s)
{
	char buf[2048];
	FILE *f = fopen(s->log, "r");
	long at;
	size_t n;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	at = ftell(f);
	fseek(f, at > (long)sizeof(buf) - 1 ? at - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	fprintf(stderr, "nats: last lines of %s:\n%s%s", s->log, buf,
		n && buf[n - 1] != '\n' ? "\n" : "");
}

static void exec_server(const struct nats_srv *s, const char *bin)
{
	char port[16], sd[PATH_MAX + 8];
	int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int null = open("/dev/null", O_RDONLY);

	/* the server goes with us if the bench is killed */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (null >= 0)
		dup2(null, 0);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	snprintf(port, sizeof(port), "%d", s->port);
	snprintf(sd, sizeof(sd), "%s/js", s->root);
	execl(bin, bin, "-js", "-sd", sd, "-a", "127.0.0.1", "-p", port, "-m", "0",
	      "-l", s->log, (char *)NULL);
	fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
	_exit(127);
}

static int srv_stop(struct nats_srv *s)
{
	int st = 0, rc = 0;

	if (s->pid > 0) {
		uint64_t deadline = bench_now_ns() + NATS_STOP_TIMEOUT * 1000000000ull;

		sample_rss(s);
		kill(s->pid, SIGTERM);
		while (waitpid(s->pid, &st, WNOHANG) != s->pid) {
			if (bench_now_ns() > deadline) {
				fprintf(stderr, "nats: nats-server pid %d did not exit %d s after SIGTERM; "
					"killing it\n", (int)s->pid, NATS_STOP_TIMEOUT);
				kill(s->pid, SIGKILL);
				waitpid(s->pid, &st, 0);
				rc = -ETIMEDOUT;
				break;
			}
			usleep(10000);
		}
		s->pid = 0;
	}
	if (s->root[0])
		bench_rmrf(s->root, "nats");
	s->root[0] = 0;
	return rc;
}

/* Is the server still running? Says so, with its log, when it is not. */
static int srv_alive(struct nats_srv *s, struct peer_result *r)
{
	int st;

	if (s->pid > 0 && waitpid(s->pid, &st, WNOHANG) == s->pid) {
		s->pid = 0;
		log_tail(s);
		snprintf(r->error, sizeof(r->error), "nats-server exited (status 0x%x); its log is above",
			 st);
		return 0;
	}
	return 1;
}

static int srv_start(struct nats_srv *s, const char *parent, struct peer_result *r)
{
	char buf[PATH_MAX];
	const char *bin = find_binary(buf, sizeof(buf));

	if (!strchr(bin, '/') || access(bin, X_OK)) {
		snprintf(r->error, sizeof(r->error), "no nats-server at %.120s (%s): scripts/setup installs "
			 "it, or set SLUICE_NATS_SERVER to its path", bin,
			 strchr(bin, '/') ? strerror(errno) : "not on PATH");
		return -ENOENT;
	}
	if ((s->port = bench_free_port(SOCK_STREAM)) < 0) {
		snprintf(r->error, sizeof(r->error), "no free loopback port: %s", strerror(errno));
		return -errno;
	}
	snprintf(s->root, sizeof(s->root), "%s/sluice-nats-XXXXXX", parent);
	if (!mkdtemp(s->root)) {
		int e = errno;

		snprintf(r->error, sizeof(r->error), "mkdtemp %.120s: %s (set SLUICE_TEST_DIR to a writable "
			 "directory)", s->root, strerror(e));
		s->root[0] = 0;
		return -e;
	}
	snprintf(s->log, sizeof(s->log), "%s/nats-server.log", s->root);
	snprintf(s->url, sizeof(s->url), "nats://127.0.0.1:%d", s->port);
	fprintf(stderr, "nats: starting %s -js -sd %s/js -a 127.0.0.1 -p %d -m 0 -l %s\n", bin,
		s->root, s->port, s->log);
	s->pid = fork();
	if (s->pid < 0) {
		int e = errno;

		snprintf(r->error, sizeof(r->error), "fork: %s", strerror(e));
		s->pid = 0;
		return -e;
	}
	if (!s->pid)
		exec_server(s, bin);
	return 0;
}

/* The version the server logged at startup ("Version:  2.9.10"), else
 * what `BIN --version` prints. */
static void srv_version(const struct nats_srv *s, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(s->log, "r");
	const char *v;

	snprintf(out, len, "unknown");
	while (f && fgets(line, sizeof(line), f))
		if ((v = strstr(line, "Version:"))) {
			v += 8;
			v += strspn(v, " \t");
			snprintf(out, len, "%.*s", (int)strcspn(v, " \t\r\n"), v);
			break;
		}
	if (f)
		fclose(f);
}

/* ---- client ---------------------------------------------------------------- */

static int nats_fail(struct peer_result *r, const char *what, natsStatus st, jsErrCode jerr)
{
	const char *last = nats_GetLastError(NULL);
	char code[32] = "";

	if (jerr)
		snprintf(code, sizeof(code), " (JetStream error %d)", (int)jerr);
	snprintf(r->error, sizeof(r->error), "%s: %s%s%s%s", what, natsStatus_GetText(st),
		 last && *last ? ": " : "", last && *last ? last : "", code);
	return st == NATS_TIMEOUT ? -ETIMEDOUT : -EIO;
}

/* What the ack handler shares with the publishing thread. */
struct acks {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t done;              /* acked + failed (atomic) */
	uint64_t acked, failed;     /* written by the handler only */
	uint64_t wake_at;           /* the publisher sleeps on cv until done
				     * reaches this (0: not sleeping; atomic) */
	uint64_t sent_ns[RING];     /* send time of record i at i % RING */
	struct hist *lat;           /* NULL: no latency (e2e) */
	char first_err[200];
};

static void ack_handler(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
	struct acks *a = closure;
	uint64_t now = bench_now_ns(), idx = 0, done, wake;

	(void)js;
	if (msg && natsMsg_GetDataLength(msg) >= 8)
		memcpy(&idx, natsMsg_GetData(msg), 8);
	if (pa) {
		if (a->lat)
			hist_add(a->lat, now - a->sent_ns[idx % RING]);
		a->acked++;
	} else {
		if (!a->failed++)
			snprintf(a->first_err, sizeof(a->first_err), "record %" PRIu64 ": %s (%s, "
				 "jetstream error %d)", idx, pae && pae->ErrText ? pae->ErrText : "no text",
				 natsStatus_GetText(pae ? pae->Err : NATS_ERR), pae ? (int)pae->ErrCode : 0);
	}
	done = __atomic_add_fetch(&a->done, 1, __ATOMIC_SEQ_CST);
	wake = __atomic_load_n(&a->wake_at, __ATOMIC_SEQ_CST);
	if (wake && done >= wake) {
		pthread_mutex_lock(&a->mu);
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
	}
	natsMsg_Destroy(msg);
}

static uint64_t acks_done(struct acks *a)
{
	return __atomic_load_n(&a->done, __ATOMIC_SEQ_CST);
}

/* Wait (at most 100 ms) until fewer than max records are unacknowledged:
 * until an eighth of the window is free, so that the handler wakes this
 * thread once per max/8 acks rather than once per ack. */
static void acks_wait_below(struct acks *a, uint64_t sent, uint64_t max)
{
	uint64_t target = sent - max + 1 + max / 8;
	struct timespec ts;

	if (sent - acks_done(a) < max)
		return;
	if (target > sent)
		target = sent;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&a->mu);
	__atomic_store_n(&a->wake_at, target, __ATOMIC_SEQ_CST);
	while (acks_done(a) < target)
		if (pthread_cond_timedwait(&a->cv, &a->mu, &ts))
			break;
	__atomic_store_n(&a->wake_at, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&a->mu);
}

/* A new phase: nothing is outstanding (the last one waited for every ack). */
static void acks_reset(struct acks *a)
{
	pthread_mutex_lock(&a->mu);
	__atomic_store_n(&a->done, 0, __ATOMIC_SEQ_CST);
	a->acked = a->failed = 0;
	pthread_mutex_unlock(&a->mu);
}

struct client {
	natsConnection *nc;
	jsCtx *js;
	struct acks *acks;
};

static void client_close(struct client *c)
{
	if (c->js)
		jsCtx_Destroy(c->js);
	if (c->nc)
		natsConnection_Destroy(c->nc);
	c->js = NULL;
	c->nc = NULL;
}

/* Connect, retried until the server accepts (or dies, or the deadline). */
static int client_open(struct client *c, struct nats_srv *s, struct peer_result *r)
{
	uint64_t deadline = bench_now_ns() + NATS_READY_TIMEOUT * 1000000000ull;
	natsOptions *o = NULL;
	natsStatus st;
	jsOptions jo;
	int rc = 0;

	if ((st = natsOptions_Create(&o)) != NATS_OK || (st = natsOptions_SetURL(o, s->url)) != NATS_OK ||
	    (st = natsOptions_SetTimeout(o, 500)) != NATS_OK ||
	    (st = natsOptions_SetAllowReconnect(o, false)) != NATS_OK)
		return nats_fail(r, "options", st, 0);
	for (;;) {
		st = natsConnection_Connect(&c->nc, o);
		if (st == NATS_OK)
			break;
		if (!srv_alive(s, r)) {
			rc = -ECHILD;
			goto out;
		}
		if (bench_now_ns() > deadline) {
			log_tail(s);
			rc = nats_fail(r, "connect", st, 0);
			snprintf(r->error + strlen(r->error), sizeof(r->error) - strlen(r->error),
				 "; nats-server not accepting clients after %d s (log above)", NATS_READY_TIMEOUT);
			goto out;
		}
		usleep(20000);
	}
	jsOptions_Init(&jo);
	jo.Wait = NATS_READY_TIMEOUT * 1000;
	jo.PublishAsync.MaxPending = 2 * WINDOW;   /* ours is the window: never stall in libnats */
	jo.PublishAsync.AckHandler = ack_handler;
	jo.PublishAsync.AckHandlerClosure = c->acks;
	if ((st = natsConnection_JetStream(&c->js, c->nc, &jo)) != NATS_OK)
		rc = nats_fail(r, "JetStream context", st, 0);
out:
	natsOptions_Destroy(o);
	return rc;
}

static int add_stream(struct client *c, const char *name, const char *subj, int size,
		      struct peer_result *r)
{
	const char *subjects[1] = { subj };
	jsStreamConfig cfg;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus st;
	char what[96];

	jsStreamConfig_Init(&cfg);
	cfg.Name = name;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_FileStorage;
	cfg.Replicas = 1;
	cfg.MaxMsgs = -1;           /* no limits: room for every record */
	cfg.MaxBytes = -1;
	cfg.MaxMsgSize = size + 1024;
	st = js_AddStream(&si, c->js, &cfg, NULL, &jerr);
	jsStreamInfo_Destroy(si);
	if (st == NATS_OK)
		return 0;
	snprintf(what, sizeof(what), "creating stream %s (subject %s)", name, subj);
	return nats_fail(r, what, st, jerr);
}

/* ---- payload and progress ---------------------------------------------------- */

/* Bytes 0..7 the record index (LE), 8..15 the due time (e2e), then the
 * pattern 'a'..'z' set once in the buffer. */
static void fill_payload(uint8_t *buf, uint64_t idx, uint64_t t_ns)
{
	memcpy(buf, &idx, 8);
	memcpy(buf + 8, &t_ns, 8);
}

static uint8_t *new_payload(int size)
{
	uint8_t *buf = malloc((size_t)size);

	for (int i = 0; buf && i < size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	return buf;
}

struct progress {
	const char *what;
	uint64_t t0, last_t, last_done, next;
};

static void progress_start(struct progress *pg, const char *what)
{
	pg->what = what;
	pg->t0 = pg->last_t = bench_now_ns();
	pg->last_done = 0;
	pg->next = pg->t0 + 1000000000ull;
}

/* Once a second: "nats: produce: 3 s  600000/1000000  ..." (1 when printed). */
static int progress_tick(struct progress *pg, struct nats_srv *s, uint64_t done, uint64_t total,
			 const char *extra)
{
	uint64_t now = bench_now_ns();
	double dt = (double)(now - pg->last_t) / 1e9, t = (double)(now - pg->t0) / 1e9;

	if (now < pg->next)
		return 0;
	sample_rss(s);
	fprintf(stderr, "nats: %s: %.0f s  %" PRIu64 "/%" PRIu64 "  %.0f records/s now, %.0f avg%s%s"
		"  server RSS %.0f MiB\n", pg->what, t, done, total,
		dt > 0 ? (double)(done - pg->last_done) / dt : 0, t > 0 ? (double)done / t : 0,
		extra ? "  " : "", extra ? extra : "", (double)proc_rss_kb(s->pid) / 1024);
	pg->last_done = done;
	pg->last_t = now;
	while (pg->next <= now)
		pg->next += 1000000000ull;
	return 1;
}

/* ---- produce ------------------------------------------------------------------ */

/* Wait for the window, failing on a failed ack, a dead server or a stall. */
static int window_wait(struct client *c, struct nats_srv *s, struct progress *pg, uint64_t sent,
		       uint64_t max, uint64_t total, struct peer_result *r)
{
	struct acks *a = c->acks;
	uint64_t last = acks_done(a), last_t = bench_now_ns();
	char extra[64];

	while (sent - acks_done(a) >= max) {
		acks_wait_below(a, sent, max);
		if (__atomic_load_n(&a->done, __ATOMIC_SEQ_CST) != last) {
			last = acks_done(a);
			last_t = bench_now_ns();
		}
		snprintf(extra, sizeof(extra), "(%" PRIu64 " sent)", sent);
		if (pg && progress_tick(pg, s, a->acked, total, extra) && !srv_alive(s, r))
			return -ECHILD;
		if (bench_now_ns() - last_t > NATS_STALL_TIMEOUT * 1000000000ull) {
			snprintf(r->error, sizeof(r->error), "no publish ack for %d s (%" PRIu64
				 " sent, %" PRIu64 " acked): nats-server stalled (its log: %.120s)",
				 NATS_STALL_TIMEOUT, sent, acks_done(a), s->log);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static int acks_check(struct acks *a, const char *what, struct peer_result *r)
{
	pthread_mutex_lock(&a->mu);     /* the handler's writes, seen whole */
	pthread_mutex_unlock(&a->mu);
	if (!__atomic_load_n(&a->failed, __ATOMIC_SEQ_CST))
		return 0;
	snprintf(r->error, sizeof(r->error), "%s: publish failed: %s (%" PRIu64 " failed)", what,
		 a->first_err, a->failed);
	return -EIO;
}

static int run_produce(struct client *c, struct nats_srv *s, const struct peer_params *p,
		       struct peer_result *r)
{
	struct acks *a = c->acks;
	uint8_t *buf = new_payload(p->size);
	struct progress pg;
	uint64_t sent = 0;
	natsStatus st;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	acks_reset(a);
	a->lat = &r->produce_lat;
	fprintf(stderr, "nats: produce: %" PRIu64 " records x %d bytes to %s, js_PublishAsync, "
		"window %d\n", p->records, p->size, SUBJ_PRODUCE, WINDOW);
	progress_start(&pg, "produce");
	while (sent < p->records) {
		if ((rc = window_wait(c, s, &pg, sent, WINDOW, p->records, r)) < 0)
			goto out;
		if ((rc = acks_check(a, "produce", r)) < 0)
			goto out;
		fill_payload(buf, sent, 0);
		a->sent_ns[sent % RING] = bench_now_ns();
		st = js_PublishAsync(c->js, SUBJ_PRODUCE, buf, p->size, NULL);
		if (st != NATS_OK) {
			rc = nats_fail(r, "js_PublishAsync", st, 0);
			goto out;
		}
		sent++;
		if (!(sent & 1023) && progress_tick(&pg, s, a->acked, p->records, NULL) && !srv_alive(s, r)) {
			rc = -ECHILD;
			goto out;
		}
	}
	/* every ack: the window down to nothing outstanding */
	if ((rc = window_wait(c, s, &pg, sent, 1, p->records, r)) < 0)
		goto out;
	r->produce_seconds = (double)(bench_now_ns() - pg.t0) / 1e9;
	if ((rc = acks_check(a, "produce", r)) < 0)
		goto out;
	r->produce_records = a->acked;
	sample_rss(s);
	fprintf(stderr, "nats: produce: %" PRIu64 " records acknowledged in %.2f s\n", a->acked,
		r->produce_seconds);
out:
	a->lat = NULL;
	free(buf);
	return rc;
}

/* ---- consume ------------------------------------------------------------------ */

/* Length and index in order; -EBADMSG with the first bad record named. */
static int check_record(natsMsg *m, uint64_t want, int size, const char *what, struct peer_result *r)
{
	int len = natsMsg_GetDataLength(m);
	uint64_t idx = UINT64_MAX;

	if (len >= 8)
		memcpy(&idx, natsMsg_GetData(m), 8);
	if (len == size && idx == want)
		return 0;
	snprintf(r->error, sizeof(r->error), "%s: WRONG DATA: record %" PRIu64 " (stream sequence "
		 "%" PRIu64 "): %d bytes, index %" PRIu64 " (want %d bytes, index %" PRIu64 ")", what,
		 want, want + 1, len, idx, size, want);
	return -EBADMSG;
}

static int run_consume(struct client *c, struct nats_srv *s, const struct peer_params *p,
		       struct peer_result *r)
{
	natsSubscription *sub = NULL;
	jsSubOptions so;
	jsErrCode jerr = 0;
	struct progress pg;
	uint64_t got = 0, t0 = bench_now_ns(), idle_t = t0;
	natsStatus st;
	int rc = 0;

	jsSubOptions_Init(&so);
	so.Ordered = true;
	so.Config.DeliverPolicy = js_DeliverAll;
	fprintf(stderr, "nats: consume: %" PRIu64 " records from %s, ordered push consumer\n",
		p->records, SUBJ_PRODUCE);
	st = js_SubscribeSync(&sub, c->js, SUBJ_PRODUCE, NULL, &so, &jerr);
	if (st != NATS_OK)
		return nats_fail(r, "consume: js_SubscribeSync (ordered consumer)", st, jerr);
	/* flow control bounds what the server sends; no client-side drops */
	natsSubscription_SetPendingLimits(sub, -1, -1);
	progress_start(&pg, "consume");
	pg.t0 = t0;
	while (got < p->records) {
		natsMsg *m = NULL;

		st = natsSubscription_NextMsg(&m, sub, 100);
		if (st == NATS_OK) {
			rc = check_record(m, got, p->size, "consume", r);
			natsMsg_Destroy(m);
			if (rc < 0)
				goto out;
			got++;
			idle_t = 0;
		} else if (st != NATS_TIMEOUT) {
			rc = nats_fail(r, "consume: natsSubscription_NextMsg", st, 0);
			goto out;
		} else if (!idle_t) {
			idle_t = bench_now_ns();
		} else if (bench_now_ns() - idle_t > NATS_STALL_TIMEOUT * 1000000000ull) {
			snprintf(r->error, sizeof(r->error), "consume: nothing received for %d s (%"
				 PRIu64 " of %" PRIu64 " records)", NATS_STALL_TIMEOUT, got, p->records);
			rc = -ETIMEDOUT;
			goto out;
		}
		if ((!(got & 1023) || st != NATS_OK) && progress_tick(&pg, s, got, p->records, NULL) &&
		    !srv_alive(s, r)) {
			rc = -ECHILD;
			goto out;
		}
	}
	r->consume_seconds = (double)(bench_now_ns() - t0) / 1e9;
	r->consume_records = got;
	sample_rss(s);
	fprintf(stderr, "nats: consume: %" PRIu64 " records in %.2f s, all checked\n", got,
		r->consume_seconds);
out:
	natsSubscription_Unsubscribe(sub);
	natsSubscription_Destroy(sub);
	return rc;
}

/* ---- e2e ------------------------------------------------------------------------ */

struct e2e_reader {
	pthread_mutex_t mu;         /* held by the callback; stop under it */
	int stop;
	uint64_t got, counted;      /* got: atomic */
	uint64_t warm_until;        /* records due before this: not counted */
	int size, bad;
	struct hist lat;
	char first_bad[256];
};

static void e2e_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
	struct e2e_reader *rd = closure;
	uint64_t now = bench_now_ns(), idx = UINT64_MAX, due = 0;
	int len = natsMsg_GetDataLength(m);

	(void)nc; (void)sub;
	pthread_mutex_lock(&rd->mu);
	if (len >= 16) {
		memcpy(&idx, natsMsg_GetData(m), 8);
		memcpy(&due, natsMsg_GetData(m) + 8, 8);
	}
	if (rd->stop) {
		/* late: ignored */
	} else if (len != rd->size || idx != rd->got) {
		if (!rd->bad++)
			snprintf(rd->first_bad, sizeof(rd->first_bad), "record %" PRIu64 ": %d bytes, "
				 "index %" PRIu64 " (want %d bytes, index %" PRIu64 ")", rd->got, len, idx,
				 rd->size, rd->got);
	} else {
		if (due >= rd->warm_until) {
			hist_add(&rd->lat, now > due ? now - due : 0);
			rd->counted++;
		}
		__atomic_add_fetch(&rd->got, 1, __ATOMIC_SEQ_CST);
	}
	pthread_mutex_unlock(&rd->mu);
	natsMsg_Destroy(m);
}

/* Paced publishing: every record due by now, then a 50 us nap. */
static int e2e_send(struct client *c, struct nats_srv *s, const struct peer_params *p,
		    struct e2e_reader *rd, uint64_t total, uint64_t *sentp, struct peer_result *r)
{
	uint8_t *buf = new_payload(p->size);
	struct progress pg;
	uint64_t sent = 0, t0;
	natsStatus st;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	progress_start(&pg, "e2e");
	t0 = pg.t0;
	__atomic_store_n(&rd->warm_until, t0 + 1000000000ull, __ATOMIC_SEQ_CST);
	while (sent < total) {
		uint64_t now = bench_now_ns();
		/* record k is due at k / rate: it goes once that time has come */
		uint64_t due = (uint64_t)((double)(now - t0) * (double)p->rate / 1e9) + 1;
		struct timespec nap = { 0, 50000 };
		char extra[96];

		if (due > total)
			due = total;
		while (sent < due) {
			/* the time this record was due: a late producer counts */
			uint64_t ts = t0 + (uint64_t)((double)sent * 1e9 / (double)p->rate);

			if ((rc = window_wait(c, s, NULL, sent, WINDOW, total, r)) < 0)
				goto out;
			fill_payload(buf, sent, ts);
			st = js_PublishAsync(c->js, SUBJ_E2E, buf, p->size, NULL);
			if (st != NATS_OK) {
				rc = nats_fail(r, "e2e: js_PublishAsync", st, 0);
				goto out;
			}
			sent++;
		}
		snprintf(extra, sizeof(extra), "(sent %" PRIu64 ", received %" PRIu64 ")", sent,
			 __atomic_load_n(&rd->got, __ATOMIC_SEQ_CST));
		if (progress_tick(&pg, s, __atomic_load_n(&rd->got, __ATOMIC_SEQ_CST), total, extra) &&
		    !srv_alive(s, r)) {
			rc = -ECHILD;
			goto out;
		}
		if ((rc = acks_check(c->acks, "e2e", r)) < 0 || __atomic_load_n(&rd->bad, __ATOMIC_SEQ_CST))
			goto out;
		nanosleep(&nap, NULL);
	}
out:
	*sentp = sent;
	free(buf);
	return rc;
}

static int run_e2e(struct client *c, struct nats_srv *s, const struct peer_params *p,
		   struct e2e_reader *rd, struct peer_result *r)
{
	uint64_t total = (uint64_t)((p->e2e_seconds + 1) * (double)p->rate), sent = 0, end;
	natsSubscription *sub = NULL;
	jsSubOptions so;
	jsErrCode jerr = 0;
	natsStatus st;
	int rc;

	if ((rc = add_stream(c, "BENCH_E2E", SUBJ_E2E, p->size, r)) < 0)
		return rc;
	acks_reset(c->acks);
	rd->size = p->size;
	rd->warm_until = UINT64_MAX;
	jsSubOptions_Init(&so);
	so.Ordered = true;
	so.Config.DeliverPolicy = js_DeliverNew;
	st = js_Subscribe(&sub, c->js, SUBJ_E2E, e2e_cb, rd, NULL, &so, &jerr);
	if (st != NATS_OK)
		return nats_fail(r, "e2e: js_Subscribe (ordered consumer)", st, jerr);
	natsSubscription_SetPendingLimits(sub, -1, -1);
	fprintf(stderr, "nats: e2e: %" PRIu64 " records/s for %.0f s (+1 s warm-up), %d bytes, ordered "
		"push consumer\n", p->rate, p->e2e_seconds, p->size);
	rc = e2e_send(c, s, p, rd, total, &sent, r);
	/* the tail: every ack, every record received */
	end = bench_now_ns() + NATS_TAIL_TIMEOUT * 1000000000ull;
	while (!rc && (__atomic_load_n(&rd->got, __ATOMIC_SEQ_CST) < sent || acks_done(c->acks) < sent) &&
	       !__atomic_load_n(&rd->bad, __ATOMIC_SEQ_CST) && bench_now_ns() < end)
		usleep(1000);
	pthread_mutex_lock(&rd->mu);
	rd->stop = 1;
	pthread_mutex_unlock(&rd->mu);
	if (!rc)
		rc = acks_check(c->acks, "e2e", r);
	if (!rc && rd->bad) {
		snprintf(r->error, sizeof(r->error), "e2e: WRONG DATA: %.200s", rd->first_bad);
		rc = -EBADMSG;
	}
	if (!rc && rd->got != sent) {
		snprintf(r->error, sizeof(r->error), "e2e: sent %" PRIu64 ", received %" PRIu64
			 " after %d s (%" PRIu64 " acked)", sent, rd->got, NATS_TAIL_TIMEOUT, acks_done(c->acks));
		rc = -EIO;
	}
	hist_merge(&r->e2e, &rd->lat);
	r->e2e_records = rd->counted;
	sample_rss(s);
	if (!rc)
		fprintf(stderr, "nats: e2e: %" PRIu64 " records sent and received, %" PRIu64
			" after warm-up timed\n", sent, rd->counted);
	natsSubscription_Unsubscribe(sub);
	natsSubscription_Destroy(sub);
	return rc;
}

/* ---- the run ------------------------------------------------------------------- */

static void result_init(struct peer_result *r)
{
	memset(r, 0, sizeof(*r));
	hist_init(&r->produce_lat);
	hist_init(&r->e2e);
	snprintf(r->name, sizeof(r->name), "nats-jetstream");
	snprintf(r->version, sizeof(r->version), "unknown");
	snprintf(r->durability, sizeof(r->durability), "file-backed stream, 1 replica, acked from the "
		 "page cache, fsync every sync_interval (default 2 min)");
}

/* Every phase on one connection (the server is already up). */
static int run_phases(struct nats_srv *s, const struct peer_params *p, struct peer_result *r,
		      struct acks *a, struct e2e_reader *rd)
{
	struct client c = { .acks = a };
	int rc;

	if ((rc = client_open(&c, s, r)) < 0)
		goto out;
	srv_version(s, r->version, sizeof(r->version));
	if ((rc = add_stream(&c, "BENCH", SUBJ_PRODUCE, p->size, r)) < 0)
		goto out;
	if ((rc = run_produce(&c, s, p, r)) < 0)
		goto out;
	if ((rc = run_consume(&c, s, p, r)) < 0)
		goto out;
	if (p->e2e_seconds > 0)
		rc = run_e2e(&c, s, p, rd, r);
out:
	client_close(&c);
	return rc;
}

int peer_nats_run(const struct peer_params *p, struct peer_result *r)
{
	struct nats_srv s = { .pid = 0 };
	struct acks *a = NULL;
	struct e2e_reader *rd = NULL;
	natsStatus st;
	int rc, rc2;

	result_init(r);
	s.peak_rss = &r->server_rss_kb;
	if (p->size < 16) {
		snprintf(r->error, sizeof(r->error), "records of %d bytes: at least 16 (index, "
			 "due time)", p->size);
		return -EINVAL;
	}
	if ((rc = srv_start(&s, p->dir, r)) < 0)
		goto out;
	if ((st = nats_Open(-1)) != NATS_OK) {
		rc = nats_fail(r, "nats_Open (libnats)", st, 0);
		goto out;
	}
	a = calloc(1, sizeof(*a));
	rd = calloc(1, sizeof(*rd));
	if (!a || !rd) {
		rc = -ENOMEM;
		snprintf(r->error, sizeof(r->error), "out of memory");
	} else {
		pthread_mutex_init(&a->mu, NULL);
		pthread_cond_init(&a->cv, NULL);
		pthread_mutex_init(&rd->mu, NULL);
		hist_init(&rd->lat);
		rc = run_phases(&s, p, r, a, rd);
	}
	/* every object is destroyed: wait for libnats's threads (ack and
	 * message callbacks) to be gone before a and rd are */
	if ((st = nats_CloseAndWait(10000)) != NATS_OK)
		fprintf(stderr, "nats: nats_CloseAndWait: %s (libnats threads still running)\n",
			natsStatus_GetText(st));
	else {
		free(a);
		free(rd);
	}
out:
	rc2 = srv_stop(&s);
	if (!rc && rc2 < 0) {
		snprintf(r->error, sizeof(r->error), "nats-server did not exit %d s after SIGTERM",
			 NATS_STOP_TIMEOUT);
		rc = rc2;
	}
	return rc;
}
