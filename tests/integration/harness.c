/* tests/integration/harness.c — see harness.h. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/integration/harness.h"

#ifndef SLUICED_PATH
#define SLUICED_PATH "build/sluiced"
#endif
#ifndef FAULTPROXY_PATH
#define FAULTPROXY_PATH "build/itests/faultproxy"
#endif

static void reserve_port(struct broker_proc *b)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
	/* SO_REUSEPORT so that sluiced (which binds with it, one listener per
	 * shard) can bind the same port; SO_REUSEADDR so that its start-up
	 * probe (an explicit bind with SO_REUSEADDR only, which refuses a port
	 * with a live listener) does not take this never-listening socket for
	 * another broker. Autobind never hands out a port that is in use, so
	 * no other test picks it while we hold it. */
	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	b->reserve_fd = fd;
	b->port = ntohs(a.sin_port);
	snprintf(b->bootstrap, sizeof(b->bootstrap), "127.0.0.1:%d", b->port);
}

void broker_init(struct broker_proc *b, const char *const *extra)
{
	const char *base = getenv("SLUICE_TEST_DIR");

	memset(b, 0, sizeof(*b));
	b->reserve_fd = -1;
	snprintf(b->dir, sizeof(b->dir), "%s/sluice-itest-XXXXXX", base && *base ? base : "/var/tmp");
	cr_assert_not_null(mkdtemp(b->dir), "mkdtemp %s: %s", b->dir, strerror(errno));
	snprintf(b->data_dir, sizeof(b->data_dir), "%s/data", b->dir);
	snprintf(b->log_path, sizeof(b->log_path), "%s/broker.log", b->dir);
	for (; extra && extra[b->nextra]; b->nextra++)
		cr_assert_lt(b->nextra, BROKER_MAX_ARGS - 1, "too many broker arguments");
	for (int i = 0; i < b->nextra; i++)
		b->extra[i] = extra[i];
	reserve_port(b);
}

void broker_dump_log(const struct broker_proc *b)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", b->log_path);
	if (system(cmd) != 0)
		fprintf(stderr, "(no broker log)\n");
}

void broker_start(struct broker_proc *b)
{
	char listen[64], line[1024], want[96];
	const char *argv[8 + BROKER_MAX_ARGS];
	int n = 0, pfd[2], logfd;
	FILE *out;
	pid_t pid;

	cr_assert_eq(b->pid, 0, "broker already running");
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", b->port);
	argv[n++] = SLUICED_PATH;
	argv[n++] = "--data-dir";
	argv[n++] = b->data_dir;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--shards";
	argv[n++] = "2";
	for (int i = 0; i < b->nextra; i++)
		argv[n++] = b->extra[i];
	argv[n] = NULL;

	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	logfd = open(b->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert_geq(logfd, 0, "open %s: %s", b->log_path, strerror(errno));
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* the broker dies with the test process (a crash or a Criterion
		 * timeout must not leave it running) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(127);
		dup2(pfd[1], 1);
		dup2(logfd, 2);
		execv(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	close(logfd);
	b->pid = pid;

	/* readiness: the "listening on HOST:PORT" line; EOF means it died */
	snprintf(want, sizeof(want), "listening on %s ", listen);
	out = fdopen(pfd[0], "r");
	cr_assert_not_null(out);
	line[0] = 0;
	while (fgets(line, sizeof(line), out) && !strstr(line, "listening on "))
		line[0] = 0;
	fclose(out);   /* sluiced writes nothing else to stdout (SIGPIPE is blocked there) */
	if (!strstr(line, "listening on ")) {
		int st;

		waitpid(pid, &st, 0);
		b->pid = 0;
		broker_dump_log(b);
		cr_assert_fail("sluiced did not start (status 0x%x)", st);
	}
	if (!strstr(line, want)) {
		broker_dump_log(b);
		cr_assert_fail("sluiced listens elsewhere: %s", line);
	}
}

void broker_launch(struct broker_proc *b, const char *const *extra)
{
	broker_init(b, extra);
	broker_start(b);
}

static int wait_child(struct broker_proc *b)
{
	int st = 0;

	while (waitpid(b->pid, &st, 0) < 0 && errno == EINTR)
		;
	b->pid = 0;
	b->last_status = st;
	return st;
}

/* sluiced exits within a couple of seconds of SIGTERM; a shutdown that
 * hangs fails the test here (the broker SIGKILLed, its log dumped)
 * instead of running into the test's timeout */
#define BROKER_STOP_TIMEOUT_MS 20000

void broker_stop(struct broker_proc *b)
{
	int st = 0, waited = 0;
	pid_t rc;

	cr_assert_neq(b->pid, 0, "broker not running");
	kill(b->pid, SIGTERM);
	for (;;) {
		rc = waitpid(b->pid, &st, WNOHANG);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc != 0 || waited >= BROKER_STOP_TIMEOUT_MS)
			break;
		usleep(10000);
		waited += 10;
	}
	if (rc == 0) {
		pid_t pid = b->pid;

		kill(pid, SIGKILL);
		wait_child(b);
		broker_dump_log(b);
		cr_assert_fail("sluiced (pid %d) did not exit within %d ms of SIGTERM: a shutdown hang", (int)pid,
			       BROKER_STOP_TIMEOUT_MS);
	}
	cr_assert_eq(rc, b->pid, "waitpid sluiced: %s", strerror(errno));
	b->pid = 0;
	b->last_status = st;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		broker_dump_log(b);
		cr_assert_fail("sluiced did not exit cleanly on SIGTERM: %s %d",
			       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
}

void broker_kill(struct broker_proc *b)
{
	int st;

	cr_assert_neq(b->pid, 0, "broker not running");
	kill(b->pid, SIGKILL);
	st = wait_child(b);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "sluiced was not killed (status 0x%x)", st);
}

int broker_wait_port_free(const struct broker_proc *b, int timeout_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)b->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	for (int waited = 0;; waited++) {
		/* the broker's own probe: an explicit bind with SO_REUSEADDR
		 * only, refused while a listener is alive (our reserve socket
		 * and TIME_WAIT leftovers do not count) */
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int rc, e;

		cr_assert_geq(fd, 0);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
		e = errno;
		close(fd);
		if (rc == 0)
			return waited;
		cr_assert_eq(e, EADDRINUSE, "bind probe: %s", strerror(e));
		cr_assert_lt(waited, timeout_ms, "port %d still has a listener %d ms after sluiced exited", b->port,
			     timeout_ms);
		usleep(1000);
	}
}

void broker_restart(struct broker_proc *b, int sig)
{
	if (sig == SIGKILL)
		broker_kill(b);
	else
		broker_stop(b);
	/* sluiced's listening sockets outlive the reaped process for a few
	 * milliseconds (the multishot accept in flight holds them until the
	 * io_uring is torn down, asynchronously), and a new sluiced refuses a
	 * port with a live listener: wait for them to go. See the disabled
	 * test rdkafka::restart_right_after_exit. */
	broker_wait_port_free(b, 5000);
	broker_start(b);
}

void broker_cleanup(struct broker_proc *b)
{
	char cmd[400];

	if (b->pid)
		broker_stop(b);
	if (b->reserve_fd >= 0)
		close(b->reserve_fd);
	b->reserve_fd = -1;
	if (b->dir[0] && !getenv("SLUICE_KEEP_TEST_DIR")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->dir);
		cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	}
	b->dir[0] = 0;
}

/* ---- fault-injecting proxy ------------------------------------------ */

void proxy_start(struct proxy_proc *p, int target_port, const char *const *args)
{
	char target[64], line[1024];
	const char *argv[8 + 32];
	int n = 0, pfd[2];
	const char *at;
	FILE *out;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	snprintf(target, sizeof(target), "127.0.0.1:%d", target_port);
	argv[n++] = FAULTPROXY_PATH;
	argv[n++] = "--target";
	argv[n++] = target;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	for (int i = 0; args && args[i]; i++) {
		cr_assert_lt(n, (int)(sizeof(argv) / sizeof(argv[0])) - 1, "too many proxy arguments");
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(127);
		dup2(pfd[1], 1);
		execv(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	p->pid = pid;
	out = fdopen(pfd[0], "r");
	cr_assert_not_null(out);
	p->out = out;
	line[0] = 0;
	if (!fgets(line, sizeof(line), out) || !(at = strstr(line, "listening on 127.0.0.1:"))) {
		int st;

		waitpid(pid, &st, 0);
		p->pid = 0;
		cr_assert_fail("faultproxy did not start (status 0x%x): %s", st, line);
	}
	p->port = atoi(at + strlen("listening on 127.0.0.1:"));
	cr_assert_gt(p->port, 0, "faultproxy: %s", line);
	snprintf(p->bootstrap, sizeof(p->bootstrap), "127.0.0.1:%d", p->port);
	snprintf(p->advertised, sizeof(p->advertised), "advertised.listeners=PLAINTEXT://127.0.0.1:%d", p->port);
	cr_log_info("%s", line);
}

void proxy_faults(const struct proxy_proc *p, int on)
{
	cr_assert_neq(p->pid, 0, "faultproxy not running");
	kill(p->pid, on ? SIGUSR2 : SIGUSR1);
}

void proxy_stop(struct proxy_proc *p)
{
	FILE *out = p->out;
	char line[1024];
	int st;

	cr_assert_neq(p->pid, 0, "faultproxy not running");
	kill(p->pid, SIGTERM);
	p->stats[0] = 0;
	while (fgets(line, sizeof(line), out))
		if (strstr(line, "faultproxy stats:"))
			snprintf(p->stats, sizeof(p->stats), "%s", line);
	fclose(out);
	p->out = NULL;
	while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
		;
	p->pid = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "faultproxy did not exit cleanly (status 0x%x)", st);
	cr_assert(p->stats[0], "faultproxy printed no stats line");
	cr_log_info("%s", p->stats);
}

long proxy_stat(const struct proxy_proc *p, const char *key)
{
	char want[64];
	const char *at;

	snprintf(want, sizeof(want), " %s=", key);
	at = strstr(p->stats, want);
	return at ? strtol(at + strlen(want), NULL, 10) : -1;
}

void broker_launch_proxied(struct broker_proc *b, struct proxy_proc *p, const char *const *extra,
			   const char *const *proxy_args)
{
	broker_init(b, extra);
	proxy_start(p, b->port, proxy_args);
	cr_assert_lt(b->nextra + 2, BROKER_MAX_ARGS, "too many broker arguments");
	b->extra[b->nextra++] = "--set";
	b->extra[b->nextra++] = p->advertised;   /* p outlives b's runs */
	b->extra[b->nextra] = NULL;
	broker_start(b);
}

/* ---- librdkafka ------------------------------------------------------ */

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[512];

	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK)
		cr_assert_fail("rd_kafka_conf_set %s=%s: %s", k, v, err);
}

rd_kafka_conf_t *harness_conf(const struct broker_proc *b, const char *const *kv)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();

	conf_set(conf, "bootstrap.servers", b->bootstrap);
	conf_set(conf, "client.id", "sluice-itest");
	/* errors are checked per message; the log line per reconnect during
	 * a restart test is noise */
	conf_set(conf, "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "3");
	if (getenv("SLUICE_RDK_DEBUG"))
		conf_set(conf, "debug", getenv("SLUICE_RDK_DEBUG"));
	for (int i = 0; kv && kv[i]; i += 2)
		conf_set(conf, kv[i], kv[i + 1]);
	return conf;
}

rd_kafka_t *harness_producer(const struct broker_proc *b, const char *const *kv,
			     void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
			     void *opaque)
{
	rd_kafka_conf_t *conf = harness_conf(b, kv);
	char err[512];
	rd_kafka_t *rk;

	if (dr_msg_cb)
		rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
	rd_kafka_conf_set_opaque(conf, opaque);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	cr_assert_not_null(rk, "rd_kafka_new(producer): %s", err);
	return rk;
}

rd_kafka_t *harness_consumer(const struct broker_proc *b, const char *const *kv)
{
	rd_kafka_conf_t *conf = harness_conf(b, kv);
	char err[512];
	rd_kafka_t *rk;

	conf_set(conf, "enable.partition.eof", "true");
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	cr_assert_not_null(rk, "rd_kafka_new(consumer): %s", err);
	return rk;
}

/* A high-level (subscribing) consumer in the test process: manual
 * commits, from the earliest offset when the group has none. */
rd_kafka_t *harness_group_consumer(const struct broker_proc *b, const char *group, const char *topic,
				   const char *const *kv)
{
	rd_kafka_conf_t *conf = harness_conf(b, kv);
	rd_kafka_topic_partition_list_t *sub;
	char err[512];
	rd_kafka_t *rk;
	const char *base[] = { "group.id", group, "enable.auto.commit", "false", "enable.auto.offset.store", "false",
			       "auto.offset.reset", "earliest", "session.timeout.ms", "6000",
			       "heartbeat.interval.ms", "500", "fetch.wait.max.ms", "100", "log_level",
			       getenv("SLUICE_RDK_DEBUG") ? "7" : "0", NULL };

	for (int i = 0; base[i]; i += 2)
		if (rd_kafka_conf_set(conf, base[i], base[i + 1], err, sizeof(err)) != RD_KAFKA_CONF_OK)
			cr_assert_fail("%s: %s", base[i], err);
	/* kv again, so that a test can override the base settings */
	for (int i = 0; kv && kv[i]; i += 2)
		cr_assert_eq(rd_kafka_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)), RD_KAFKA_CONF_OK, "%s", err);
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	cr_assert_not_null(rk, "rd_kafka_new(consumer): %s", err);
	rd_kafka_poll_set_consumer(rk);
	sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
	cr_assert_eq(rd_kafka_subscribe(rk, sub), 0);
	rd_kafka_topic_partition_list_destroy(sub);
	return rk;
}

void harness_create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
	char err[512];
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, err, sizeof(err));
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	const rd_kafka_CreateTopics_result_t *res;
	const rd_kafka_topic_result_t **tr;
	rd_kafka_AdminOptions_t *opt;
	rd_kafka_event_t *ev;
	size_t n;

	cr_assert_not_null(nt, "NewTopic: %s", err);
	opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(opt, 30000, err, sizeof(err));
	rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
	/* wait for the result event (the only event on this queue) */
	do
		ev = rd_kafka_queue_poll(q, 1000);
	while (!ev);
	cr_assert_eq(rd_kafka_event_type(ev), RD_KAFKA_EVENT_CREATETOPICS_RESULT);
	cr_assert_eq(rd_kafka_event_error(ev), 0, "CreateTopics: %s", rd_kafka_event_error_string(ev));
	res = rd_kafka_event_CreateTopics_result(ev);
	tr = rd_kafka_CreateTopics_result_topics(res, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(rd_kafka_topic_result_error(tr[0]), 0, "CreateTopics %s: %s", topic,
		     rd_kafka_topic_result_error_string(tr[0]));
	rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(opt);
	rd_kafka_NewTopic_destroy(nt);
	rd_kafka_queue_destroy(q);
}

/* ---- raw frames ------------------------------------------------------ */

void rb_init(struct rawbuf *r)
{
	r->cap = 256;
	r->len = 0;
	r->p = malloc(r->cap);
	cr_assert_not_null(r->p);
}

void rb_free(struct rawbuf *r)
{
	free(r->p);
	r->p = NULL;
	r->len = r->cap = 0;
}

void rb_bytes(struct rawbuf *r, const void *src, size_t n)
{
	if (r->len + n > r->cap) {
		while (r->len + n > r->cap)
			r->cap *= 2;
		r->p = realloc(r->p, r->cap);
		cr_assert_not_null(r->p);
	}
	memcpy(r->p + r->len, src, n);
	r->len += n;
}

static void rb_be(struct rawbuf *r, uint64_t v, int n)
{
	uint8_t b[8];

	for (int i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	rb_bytes(r, b, (size_t)n);
}

void rb_i8(struct rawbuf *r, int8_t v) { rb_be(r, (uint8_t)v, 1); }
void rb_i16(struct rawbuf *r, int16_t v) { rb_be(r, (uint16_t)v, 2); }
void rb_i32(struct rawbuf *r, int32_t v) { rb_be(r, (uint32_t)v, 4); }
void rb_i64(struct rawbuf *r, int64_t v) { rb_be(r, (uint64_t)v, 8); }

void rb_str(struct rawbuf *r, const char *s)
{
	if (!s) {
		rb_i16(r, -1);
		return;
	}
	rb_i16(r, (int16_t)strlen(s));
	rb_bytes(r, s, strlen(s));
}

void rb_blob(struct rawbuf *r, const void *p, int32_t n)
{
	rb_i32(r, n < 0 ? -1 : n);
	if (n > 0)
		rb_bytes(r, p, (size_t)n);
}

void rb_request(struct rawbuf *r, int16_t key, int16_t version, int32_t corr)
{
	r->len = 0;
	rb_i32(r, 0);
	rb_i16(r, key);
	rb_i16(r, version);
	rb_i32(r, corr);
	rb_str(r, "sluice-raw");
}

void rb_finish(struct rawbuf *r)
{
	uint32_t n = (uint32_t)(r->len - 4);

	r->p[0] = (uint8_t)(n >> 24);
	r->p[1] = (uint8_t)(n >> 16);
	r->p[2] = (uint8_t)(n >> 8);
	r->p[3] = (uint8_t)n;
}

const uint8_t *rc_take(struct rawcur *c, size_t n)
{
	const uint8_t *p = c->p;

	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = 1;
		return NULL;
	}
	c->p += n;
	return p;
}

int8_t rc_i8(struct rawcur *c) { const uint8_t *p = rc_take(c, 1); return p ? (int8_t)p[0] : 0; }
int16_t rc_i16(struct rawcur *c) { const uint8_t *p = rc_take(c, 2); return p ? (int16_t)be16(p) : 0; }
int32_t rc_i32(struct rawcur *c) { const uint8_t *p = rc_take(c, 4); return p ? (int32_t)be32(p) : 0; }
int64_t rc_i64(struct rawcur *c) { const uint8_t *p = rc_take(c, 8); return p ? (int64_t)be64(p) : 0; }

int rc_skip_str(struct rawcur *c)
{
	int16_t n = rc_i16(c);

	if (n > 0)
		rc_take(c, (size_t)n);
	return n;
}

int rc_str(struct rawcur *c, char *out, size_t cap)
{
	int16_t n = rc_i16(c);
	const uint8_t *p = rc_take(c, n > 0 ? (size_t)n : 0);
	size_t k = n > 0 && p ? (size_t)n : 0;

	if (k > cap - 1)
		k = cap - 1;
	if (k)
		memcpy(out, p, k);
	out[k] = 0;
	return n;
}

int raw_connect(const struct broker_proc *b)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)b->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int raw_send(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return -ECONNRESET;
		if (r < 0)
			return -errno;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int raw_recv_frame(int fd, uint8_t **out, size_t *len)
{
	uint8_t h[4];
	uint32_t n;
	int rc;

	*out = NULL;
	*len = 0;
	if ((rc = recv_all(fd, h, 4)) < 0)
		return rc;
	n = be32(h);
	if (n > (256u << 20))
		return -EMSGSIZE;
	*out = malloc(n ? n : 1);
	if (!*out)
		return -ENOMEM;
	if ((rc = recv_all(fd, *out, n)) < 0) {
		free(*out);
		*out = NULL;
		return rc;
	}
	*len = n;
	return 0;
}

int raw_closed(int fd)
{
	uint8_t b;
	ssize_t r;

	do
		r = recv(fd, &b, 1, 0);
	while (r < 0 && errno == EINTR);
	return r <= 0;
}

void raw_api_versions_ok(const struct broker_proc *b)
{
	struct rawbuf r;
	struct rawcur c;
	uint8_t *resp;
	size_t len;
	int fd = raw_connect(b);
	int32_t n;
	int produce = 0, fetch = 0;

	cr_assert_geq(fd, 0, "connect after the bad input: %s", strerror(-fd));
	rb_init(&r);
	rb_request(&r, 18, 0, 4242);
	rb_finish(&r);
	cr_assert_eq(raw_send(fd, r.p, r.len), 0);
	cr_assert_eq(raw_recv_frame(fd, &resp, &len), 0, "no ApiVersions response on a new connection");
	c = (struct rawcur){ resp, resp + len, 0 };
	cr_assert_eq(rc_i32(&c), 4242);
	cr_assert_eq(rc_i16(&c), 0, "ApiVersions error");
	n = rc_i32(&c);
	for (int32_t i = 0; i < n && !c.bad; i++) {
		int16_t k = rc_i16(&c);

		rc_i16(&c);
		rc_i16(&c);
		produce |= k == 0;
		fetch |= k == 1;
	}
	cr_assert(!c.bad && c.p == c.end, "malformed ApiVersions v0 response");
	cr_assert(produce && fetch, "ApiVersions lists no Produce/Fetch");
	free(resp);
	rb_free(&r);
	close(fd);
}

void raw_create_topic(const struct broker_proc *b, const char *topic)
{
	struct rawbuf r;
	struct rawcur c;
	uint8_t *resp;
	size_t len;
	int fd = raw_connect(b);
	int32_t n;
	int found = 0;

	cr_assert_geq(fd, 0);
	rb_init(&r);
	rb_request(&r, 3, 1, 7);
	rb_i32(&r, 1);
	rb_str(&r, topic);
	rb_finish(&r);
	cr_assert_eq(raw_send(fd, r.p, r.len), 0);
	cr_assert_eq(raw_recv_frame(fd, &resp, &len), 0);
	c = (struct rawcur){ resp, resp + len, 0 };
	cr_assert_eq(rc_i32(&c), 7);
	n = rc_i32(&c);                            /* brokers */
	for (int32_t i = 0; i < n && !c.bad; i++) {
		rc_i32(&c);
		rc_skip_str(&c);
		rc_i32(&c);
		rc_skip_str(&c);                   /* rack (v1) */
	}
	rc_i32(&c);                                /* controller (v1) */
	n = rc_i32(&c);                            /* topics */
	for (int32_t i = 0; i < n && !c.bad; i++) {
		int16_t err = rc_i16(&c);
		const uint8_t *name;
		int16_t nl = rc_i16(&c);

		name = rc_take(&c, nl > 0 ? (size_t)nl : 0);
		rc_i8(&c);                         /* is_internal */
		if (name && nl == (int16_t)strlen(topic) && !memcmp(name, topic, (size_t)nl)) {
			cr_assert_eq(err, 0, "Metadata %s: error %d", topic, err);
			found = 1;
		}
		break;                             /* one topic asked */
	}
	cr_assert(found, "Metadata did not return %s", topic);
	free(resp);
	rb_free(&r);
	close(fd);
}

int16_t raw_produce(int fd, int32_t corr, const char *topic, int32_t partition,
		    const void *records, size_t len, int64_t *base)
{
	return raw_produce_txn(fd, corr, NULL, topic, partition, records, len, base);
}

int16_t raw_produce_txn(int fd, int32_t corr, const char *txn_id, const char *topic, int32_t partition,
			const void *records, size_t len, int64_t *base)
{
	struct rawbuf r;
	struct rawcur c;
	uint8_t *resp;
	size_t rlen;
	int16_t err;
	int rc;

	rb_init(&r);
	rb_request(&r, 0, 7, corr);
	rb_str(&r, txn_id);        /* transactional_id */
	rb_i16(&r, -1);            /* acks */
	rb_i32(&r, 30000);         /* timeout */
	rb_i32(&r, 1);
	rb_str(&r, topic);
	rb_i32(&r, 1);
	rb_i32(&r, partition);
	rb_i32(&r, (int32_t)len);
	rb_bytes(&r, records, len);
	rb_finish(&r);
	cr_assert_eq(raw_send(fd, r.p, r.len), 0);
	rb_free(&r);
	rc = raw_recv_frame(fd, &resp, &rlen);
	cr_assert_eq(rc, 0, "no Produce response (%s)", strerror(-rc));
	c = (struct rawcur){ resp, resp + rlen, 0 };
	cr_assert_eq(rc_i32(&c), corr);
	cr_assert_eq(rc_i32(&c), 1);
	rc_skip_str(&c);
	cr_assert_eq(rc_i32(&c), 1);
	cr_assert_eq(rc_i32(&c), partition);
	err = rc_i16(&c);
	if (base)
		*base = rc_i64(&c);
	else
		rc_i64(&c);
	rc_i64(&c);                /* log_append_time */
	rc_i64(&c);                /* log_start_offset (v5) */
	rc_i32(&c);                /* throttle */
	cr_assert(!c.bad && c.p == c.end, "malformed Produce v7 response");
	free(resp);
	return err;
}

int16_t raw_fetch(int fd, int32_t corr, const char *topic, int32_t partition, int64_t offset,
		  int64_t *hw, uint8_t **records, size_t *rlen)
{
	struct rawbuf r;
	struct rawcur c;
	uint8_t *resp;
	size_t len;
	int32_t n;
	int16_t err;
	const uint8_t *rec;

	rb_init(&r);
	rb_request(&r, 1, 4, corr);
	rb_i32(&r, -1);            /* replica_id */
	rb_i32(&r, 0);             /* max_wait_ms */
	rb_i32(&r, 0);             /* min_bytes */
	rb_i32(&r, 64 << 20);      /* max_bytes */
	rb_i8(&r, 0);              /* isolation */
	rb_i32(&r, 1);
	rb_str(&r, topic);
	rb_i32(&r, 1);
	rb_i32(&r, partition);
	rb_i64(&r, offset);
	rb_i32(&r, 64 << 20);
	rb_finish(&r);
	cr_assert_eq(raw_send(fd, r.p, r.len), 0);
	rb_free(&r);
	cr_assert_eq(raw_recv_frame(fd, &resp, &len), 0, "no Fetch response");
	c = (struct rawcur){ resp, resp + len, 0 };
	cr_assert_eq(rc_i32(&c), corr);
	rc_i32(&c);                /* throttle */
	cr_assert_eq(rc_i32(&c), 1);
	rc_skip_str(&c);
	cr_assert_eq(rc_i32(&c), 1);
	cr_assert_eq(rc_i32(&c), partition);
	err = rc_i16(&c);
	*hw = rc_i64(&c);
	rc_i64(&c);                /* last_stable_offset */
	n = rc_i32(&c);            /* aborted transactions */
	for (int32_t i = 0; i < n && !c.bad; i++)
		rc_take(&c, 16);
	n = rc_i32(&c);
	rec = rc_take(&c, n > 0 ? (size_t)n : 0);
	cr_assert(!c.bad && c.p == c.end, "malformed Fetch v4 response");
	*rlen = n > 0 ? (size_t)n : 0;
	*records = malloc(*rlen ? *rlen : 1);
	if (*rlen)
		memcpy(*records, rec, *rlen);
	free(resp);
	return err;
}
