/* bench/bench_security.c — `sluice-bench security`: what TLS, SASL and
 * ACLs cost, each measured side by side with its plaintext or unchecked
 * counterpart in the same run.
 *
 * One broker with a PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512)
 * listener (certificates made in the run's temp dir with the openssl CLI,
 * the SCRAM user given with `sluiced --add-scram`):
 *   1. produce (100-byte and 16 KiB values, acks=1 and acks=all, one
 *      librdkafka producer) and consume (after the acks=1 produce, the same
 *      records read back and checked) on each listener, the listeners taken
 *      in turn, forward then backward (PT SSL SASL, SASL SSL PT, ...), so
 *      that the machine's drift cancels; each figure printed with its ratio
 *      to PLAINTEXT's; the TLS record layer that ran read from the broker's
 *      sluice_tls_connections_total{record_layer} (admin endpoint), and the
 *      suite negotiated;
 *   2. handshake rate: connections/s from N threads each looping connect,
 *      (TLS), (SCRAM-SHA-512), ApiVersions, close (bench/handshake.h), per
 *      listener, interleaved the same way; the broker's CPU (utime+stime
 *      from /proc/<pid>/stat) per connection.
 * And a second broker with the authorizer on and --acls bindings (LITERAL
 * and PREFIXED, other principals, some on the bench topics' own prefix,
 * plus the PREFIXED allow of the bench's principal, User:ANONYMOUS over
 * PLAINTEXT; created through a SASL_PLAINTEXT listener as a super user):
 *   3. produce (100 B, acks=1) on its PLAINTEXT listener against the first
 *      broker's PLAINTEXT listener (authorizer off), alternating; the ratio.
 *
 * Thread: the benchmark's main thread (librdkafka and the handshake client
 * add their own). Errors: the exit status (0, 1 failure, 2 bad usage).
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <netinet/in.h>

#include "bench/bench.h"
#include "bench/handshake.h"
#include "bench/kafka.h"
#include "dataplane/acl.h"

#define NLIS 3
enum { L_PT, L_SSL, L_SASL };
static const char *const lis_name[NLIS] = { "PLAINTEXT", "SSL", "SASL_SSL" };

#define USER     "bench"
#define PASSWORD "bench-secret"

struct secopts {
	double seconds;             /* each produce run */
	double hs_seconds;          /* each handshake run */
	int rounds;
	int connectors;
	int acls;
	int shards;
	int partitions;
	int quick;
	int parts;                  /* PART_*: what runs (--only) */
};

enum { PART_TPUT = 1, PART_HS = 2, PART_ACL = 4 };

struct sec_run {
	struct broker br;           /* the broker; bootstrap: its PLAINTEXT */
	int port[NLIS];
	int admin_port;
	char dir[300];              /* certificates */
	char ca[340];
	char boot[NLIS][64];
	const char *kv[NLIS][12];   /* client_security pairs per listener */
	int nkv[NLIS];
};

static double rate_of(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-bench security [options]\n"
		"\n"
		"Starts one broker with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners\n"
		"(certificates made with the openssl CLI in a temp dir) and measures, the\n"
		"listeners taken in turn and in alternating order: produce (100 B and 16 KiB\n"
		"values, acks=1 and acks=all) and consume through librdkafka, and the rate of\n"
		"new connections (TCP / TLS / TLS+SCRAM, then ApiVersions); each as a ratio to\n"
		"PLAINTEXT, with the TLS record layer the broker counted (kTLS or OpenSSL).\n"
		"Then a second broker with the authorizer and --acls ACLs: produce against\n"
		"the first broker's (authorizer off), alternating; the overhead.\n"
		"\n"
		"  --seconds S             each produce run (default 3)\n"
		"  --rounds N              rounds per comparison (default 2)\n"
		"  --connectors N          handshake threads (default 4)\n"
		"  --handshake-seconds S   each handshake run (default 2)\n"
		"  --acls N                ACLs besides the bench's own allow (default 10000)\n"
		"  --shards N              broker shards (default 0: one per core)\n"
		"  --partitions P          partitions of each topic (default 6)\n"
		"  --only PARTS            what to run, comma-separated: throughput,handshake,acl\n"
		"                          (default all)\n"
		"  --quick                 a smoke run: short runs, 100 B acks=1 only, 1 round,\n"
		"                          100 ACLs (figures meaningless)\n"
		"  --help                  this text\n");
}

static int parse(int argc, char **argv, struct secopts *o)
{
	*o = (struct secopts){ .seconds = 3, .hs_seconds = 2, .rounds = 2, .connectors = 4, .acls = 10000,
			       .partitions = 6, .parts = PART_TPUT | PART_HS | PART_ACL };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		double d;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--quick")) {
			o->quick = 1;
			o->seconds = 0.2;
			o->hs_seconds = 0.2;
			o->rounds = 1;
			o->acls = 100;
			o->connectors = 2;
			continue;
		}
		if (!v)
			return -bad_option("security", a, "unknown option, or its value is missing");
		if (!strcmp(a, "--only")) {
			char buf[64], *tok, *save = NULL;

			snprintf(buf, sizeof(buf), "%s", v);
			o->parts = 0;
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (!strcmp(tok, "throughput"))
					o->parts |= PART_TPUT;
				else if (!strcmp(tok, "handshake"))
					o->parts |= PART_HS;
				else if (!strcmp(tok, "acl"))
					o->parts |= PART_ACL;
				else
					return -bad_option("security", v, "--only takes throughput, handshake, acl");
			i++;
			continue;
		}
		d = strtod(v, &end);
		if (!end || *end || d < 0)
			return -bad_option("security", a, "expects a number >= 0");
		i++;
		if (!strcmp(a, "--seconds") && d > 0)
			o->seconds = d;
		else if (!strcmp(a, "--handshake-seconds") && d > 0)
			o->hs_seconds = d;
		else if (!strcmp(a, "--rounds") && d >= 1 && d <= 20)
			o->rounds = (int)d;
		else if (!strcmp(a, "--connectors") && d >= 1 && d <= 64)
			o->connectors = (int)d;
		else if (!strcmp(a, "--acls") && d <= 1000000)
			o->acls = (int)d;
		else if (!strcmp(a, "--shards") && d <= 64)
			o->shards = (int)d;
		else if (!strcmp(a, "--partitions") && d >= 1 && d <= 1000)
			o->partitions = (int)d;
		else
			return -bad_option("security", a, "unknown option, or a value out of range");
	}
	return 1;
}

/* ---- the broker with three listeners ------------------------------------- */

static int make_certs(struct sec_run *s)
{
	char cmd[2400];
	const char *base = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR")
										   : "/var/tmp";

	snprintf(s->dir, sizeof(s->dir), "%s/sluice-bench-certs-XXXXXX", base);
	if (!mkdtemp(s->dir))
		return -errno;
	snprintf(s->ca, sizeof(s->ca), "%s/ca.pem", s->dir);
	/* as docs/security.md makes them: a CA, the broker's EC key and
	 * certificate for 127.0.0.1, both in one keystore file */
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && exec >openssl.log 2>&1 && "
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
		 "-out ca.pem -days 2 -subj /CN=bench-ca && "
		 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout broker.key "
		 "-out broker.csr -subj /CN=localhost && "
		 "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > broker.ext && "
		 "openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.pem "
		 "-days 2 -extfile broker.ext && cat broker.pem broker.key > keystore.pem",
		 s->dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "security: making certificates with openssl failed: see %s/openssl.log\n", s->dir);
		return -EIO;
	}
	return 0;
}

static void client_kv(struct sec_run *s)
{
	for (int l = 0; l < NLIS; l++) {
		snprintf(s->boot[l], sizeof(s->boot[l]), "127.0.0.1:%d", s->port[l]);
		s->nkv[l] = 0;
	}
	s->kv[L_SSL][0] = "security.protocol";
	s->kv[L_SSL][1] = "ssl";
	s->kv[L_SSL][2] = "ssl.ca.location";
	s->kv[L_SSL][3] = s->ca;
	s->nkv[L_SSL] = 2;
	s->kv[L_SASL][0] = "security.protocol";
	s->kv[L_SASL][1] = "sasl_ssl";
	s->kv[L_SASL][2] = "ssl.ca.location";
	s->kv[L_SASL][3] = s->ca;
	s->kv[L_SASL][4] = "sasl.mechanism";
	s->kv[L_SASL][5] = "SCRAM-SHA-512";
	s->kv[L_SASL][6] = "sasl.username";
	s->kv[L_SASL][7] = USER;
	s->kv[L_SASL][8] = "sasl.password";
	s->kv[L_SASL][9] = PASSWORD;
	s->nkv[L_SASL] = 5;
}

static int start_main(struct sec_run *s, const struct secopts *so)
{
	static char lis[300], ks[360], admin[64];
	struct opts o = { 0 };
	int rc;

	for (int l = 0; l < NLIS; l++)
		if ((s->port[l] = bench_free_port(SOCK_STREAM)) < 0)
			return -EADDRNOTAVAIL;
	if ((s->admin_port = bench_free_port(SOCK_STREAM)) < 0)
		return -EADDRNOTAVAIL;
	snprintf(lis, sizeof(lis), "listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d",
		 s->port[0], s->port[1], s->port[2]);
	snprintf(ks, sizeof(ks), "ssl.keystore.location=%s/keystore.pem", s->dir);
	snprintf(admin, sizeof(admin), "admin.listen=127.0.0.1:%d", s->admin_port);
	o.sets[o.nsets++] = lis;
	o.sets[o.nsets++] = ks;
	o.sets[o.nsets++] = "sasl.enabled.mechanisms=SCRAM-SHA-512";
	o.sets[o.nsets++] = admin;
	o.args[o.nargs++] = "--add-scram";
	o.args[o.nargs++] = "SCRAM-SHA-512=[name=" USER ",password=" PASSWORD "]";
	if ((rc = broker_start(&s->br, so->shards, &o)) < 0)
		return rc;
	client_kv(s);
	snprintf(s->br.bootstrap, sizeof(s->br.bootstrap), "%s", s->boot[L_PT]);
	return 0;
}

/* Sum of a metric's samples whose labels contain sel, from /metrics. */
static int64_t metric_sum(int port, const char *name, const char *sel)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n";
	static char buf[1 << 20];
	size_t have = 0;
	ssize_t n;
	int64_t sum = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char *p;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(fd, req, sizeof(req) - 1) < 0) {
		close(fd);
		return -1;
	}
	while (have < sizeof(buf) - 1 && (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	close(fd);
	buf[have] = 0;
	for (p = buf; (p = strstr(p, name)); p++) {
		char *eol = strchr(p, '\n'), *sp;

		if (p > buf && p[-1] != '\n')
			continue;
		if (!eol)
			break;
		*eol = 0;
		sp = strrchr(p, ' ');
		if (strstr(p, sel) && sp) {
			if (sum < 0)
				sum = 0;
			sum += strtoll(sp + 1, NULL, 10);
		}
		*eol = '\n';
	}
	return sum;
}

/* /proc/<pid>/stat's utime + stime, in clock ticks. */
static uint64_t proc_cpu_ticks(pid_t pid)
{
	char path[64], line[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	p = strrchr(line, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* ---- 1: produce and consume per listener --------------------------------- */

struct cell { double rps, mbps; };

/* One produce (and consume when consume) on listener l; the topic is
 * deleted after. */
static int one_listener(struct sec_run *s, const struct secopts *so, int l, int size, int acks, int consume,
			struct cell *pc, struct cell *cc)
{
	static unsigned seq;
	struct opts o = { .records = 1000000000ull, .size = size, .partitions = so->partitions,
			  .replication_factor = 1, .acks = acks, .seconds = so->seconds, .compression = "none",
			  .linger_ms = -1, .cmd = "security" };
	struct broker br = s->br;
	struct run pr, cr;
	char topic[96], label[96];
	int rc;

	memset(&pr, 0, sizeof(pr));
	memset(&cr, 0, sizeof(cr));
	snprintf(topic, sizeof(topic), "secbench-%d-%u", (int)getpid(), seq++);
	client_security(NULL, 0);
	if ((rc = create_topics_rf(s->boot[L_PT], topic, 1, 1, so->partitions, 1)) < 0)
		return rc;
	snprintf(br.bootstrap, sizeof(br.bootstrap), "%s", s->boot[l]);
	client_security(s->kv[l], s->nkv[l]);
	snprintf(label, sizeof(label), "security: %s produce", lis_name[l]);
	rc = kafka_produce(&o, &br, topic, o.records, &pr, label);
	if (!rc && consume) {
		snprintf(label, sizeof(label), "security: %s consume", lis_name[l]);
		rc = kafka_consume(&o, &br, topic, pr.records, &cr, label);
	}
	client_security(NULL, 0);
	if (br.died)
		s->br.died = 1;
	if (rc < 0)
		return rc;
	pc->rps = rate_of(pr.records, pr.seconds);
	pc->mbps = rate_of(pr.bytes, pr.seconds) / 1e6;
	cc->rps = rate_of(cr.records, cr.seconds);
	cc->mbps = rate_of(cr.bytes, cr.seconds) / 1e6;
	delete_topic(s->boot[L_PT], topic);
	return 0;
}

/* Listener k of round r: forward on even rounds, backward on odd. */
static int turn(int r, int k)
{
	return r % 2 ? NLIS - 1 - k : k;
}

static void row3(const char *metric, const double v[NLIS], double target)
{
	double r1 = v[0] > 0 ? v[1] / v[0] : 0, r2 = v[0] > 0 ? v[2] / v[0] : 0;

	printf("security %-34s %12.1f %12.1f %12.1f %8.3f %8.3f", metric, v[0], v[1], v[2], r1, r2);
	if (target > 0)
		printf("  (target >= %.2g: %s)", target, r1 >= target && r2 >= target ? "met" : "missed");
	putchar('\n');
}

static int throughput(struct sec_run *s, const struct secopts *so)
{
	static const int sizes[2] = { 100, 16384 }, acks[2] = { 1, -1 };
	int nsz = 2, nak = so->quick ? 1 : 2;

	printf("%-43s %12s %12s %12s %8s %8s\n", "# metric", lis_name[0], lis_name[1], lis_name[2], "SSL/PT",
	       "SASL/PT");
	for (int zi = 0; zi < nsz; zi++)
		for (int ai = 0; ai < nak; ai++) {
			double prps[NLIS] = { 0 }, pmb[NLIS] = { 0 }, crps[NLIS] = { 0 }, cmb[NLIS] = { 0 };
			int consume = acks[ai] == 1;
			char name[64], sz[16];

			if (so->quick && zi == 1)
				continue;
			for (int r = 0; r < so->rounds; r++)
				for (int k = 0; k < NLIS; k++) {
					int l = turn(r, k);
					struct cell pc, cc;

					fprintf(stderr, "security: %d-byte values, acks=%s, round %d: %s\n", sizes[zi],
						acks[ai] == 1 ? "1" : "all", r + 1, lis_name[l]);
					if (one_listener(s, so, l, sizes[zi], acks[ai], consume, &pc, &cc) < 0)
						return -EIO;
					prps[l] += pc.rps / so->rounds;
					pmb[l] += pc.mbps / so->rounds;
					crps[l] += cc.rps / so->rounds;
					cmb[l] += cc.mbps / so->rounds;
				}
			snprintf(sz, sizeof(sz), sizes[zi] == 100 ? "100B" : "16KiB");
			snprintf(name, sizeof(name), "produce_%s_acks%s_records_per_s", sz, acks[ai] == 1 ? "1" : "all");
			row3(name, prps, 0.7);
			snprintf(name, sizeof(name), "produce_%s_acks%s_MB_per_s", sz, acks[ai] == 1 ? "1" : "all");
			row3(name, pmb, 0);
			if (consume) {
				snprintf(name, sizeof(name), "consume_%s_records_per_s", sz);
				row3(name, crps, 0.7);
				snprintf(name, sizeof(name), "consume_%s_MB_per_s", sz);
				row3(name, cmb, 0);
			}
			fflush(stdout);
		}
	return 0;
}

static double tv_us(const struct timeval *tv)
{
	return (double)tv->tv_sec * 1e6 + (double)tv->tv_usec;
}

/* ---- 2: handshakes ------------------------------------------------------- */

static int handshakes(struct sec_run *s, const struct secopts *so, char *cipher, size_t clen)
{
	SSL_CTX *ctx = handshake_ctx(s->ca);
	double rate[NLIS] = { 0 }, cpu[NLIS] = { 0 }, ccpu[NLIS] = { 0 }, cus[NLIS] = { 0 };
	uint64_t conns[NLIS] = { 0 }, ticks[NLIS] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);

	if (!ctx)
		return -EIO;
	for (int r = 0; r < so->rounds; r++)
		for (int k = 0; k < NLIS; k++) {
			int l = turn(r, k);
			struct handshake_target t = { .port = s->port[l], .ctx = l == L_PT ? NULL : ctx,
						      .user = l == L_SASL ? USER : NULL, .password = PASSWORD };
			struct handshake_result hr;
			struct rusage u0, u1;
			uint64_t c0 = proc_cpu_ticks(s->br.pid), c1;
			int rc;

			getrusage(RUSAGE_SELF, &u0);
			rc = handshake_run(&t, so->connectors, so->hs_seconds, &hr);
			c1 = proc_cpu_ticks(s->br.pid);
			getrusage(RUSAGE_SELF, &u1);
			cus[l] += tv_us(&u1.ru_utime) + tv_us(&u1.ru_stime) - tv_us(&u0.ru_utime) - tv_us(&u0.ru_stime);
			fprintf(stderr, "security: handshakes, round %d, %s: %" PRIu64 " in %.2f s, %" PRIu64
				" failed%s%s\n", r + 1, lis_name[l], hr.conns, hr.seconds, hr.errors,
				hr.first_error[0] ? ": first: " : "", hr.first_error);
			if (rc < 0 || !broker_alive(&s->br)) {
				SSL_CTX_free(ctx);
				return -EIO;
			}
			rate[l] += rate_of(hr.conns, hr.seconds) / so->rounds;
			conns[l] += hr.conns;
			ticks[l] += c1 - c0;
			if (hr.cipher[0])
				snprintf(cipher, clen, "%s %s", hr.cipher, hr.version);
		}
	SSL_CTX_free(ctx);
	for (int l = 0; l < NLIS; l++) {
		cpu[l] = conns[l] && hz > 0 ? (double)ticks[l] * 1e6 / (double)hz / (double)conns[l] : 0;
		ccpu[l] = conns[l] ? cus[l] / (double)conns[l] : 0;
	}
	row3("connections_per_s", rate, 0);
	row3("broker_cpu_us_per_connection", cpu, 0);
	row3("client_cpu_us_per_connection", ccpu, 0);
	return 0;
}

/* ---- 3: ACLs ------------------------------------------------------------- */

static int admin_wait(rd_kafka_t *rk, rd_kafka_queue_t *q, rd_kafka_event_type_t type, rd_kafka_event_t **out)
{
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, READY_TIMEOUT * 1000);

	(void)rk;
	if (!ev || rd_kafka_event_type(ev) != type || rd_kafka_event_error(ev)) {
		fprintf(stderr, "security: admin request: %s\n", ev ? rd_kafka_event_error_string(ev) : "timed out");
		if (ev)
			rd_kafka_event_destroy(ev);
		return -EIO;
	}
	*out = ev;
	return 0;
}

/* The binding make_acls makes i-th (of n, the last the bench's allow),
 * names into buf (64 bytes each). */
static void acl_nth(int i, int n, char name[64], char user[32], struct acl_binding *b)
{
	int lit = i % 4 == 0 || i % 4 == 3;

	snprintf(user, 32, "User:u%d", i);
	if (i == n)
		snprintf(name, 64, "secbench-acl-");
	else if (i % 4 == 0)
		snprintf(name, 64, "t-%d", i);
	else if (i % 4 == 1)
		snprintf(name, 64, "p%d-", i);
	else
		snprintf(name, 64, "secbench-acl-%s%d", i % 4 == 2 ? "" : "x", i);
	b->res = ACL_RES_TOPIC;
	b->pat = i == n || !lit ? ACL_PAT_PREFIXED : ACL_PAT_LITERAL;
	b->op = i % 4 == 1 && i != n ? ACL_READ : ACL_WRITE;
	b->perm = i % 4 == 3 && i != n ? ACL_PERM_DENY : ACL_PERM_ALLOW;
	b->name = name;
	b->principal = i == n ? "User:ANONYMOUS" : user;
	b->host = ACL_WILDCARD;
}

static int acl_sort_cmp(const void *x, const void *y)
{
	return acl_cmp(x, y);
}

/* n bindings for others, then User:ANONYMOUS's allow of WRITE on the
 * prefix "secbench-acl-"; waits until DescribeAcls lists n + 1. */
static int make_acls(const char *bootstrap, int n)
{
	struct client_errs errs = { 0 };
	rd_kafka_conf_t *c = base_conf(bootstrap, &errs);
	rd_kafka_t *rk;
	rd_kafka_queue_t *q;
	rd_kafka_AclBinding_t *b[1000];
	char err[256], name[64], user[32];
	int rc = 0, done = 0;

	if (!c || !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err))))
		return -EINVAL;
	q = rd_kafka_queue_new(rk);
	while (!rc && done <= n) {
		int k = 0;
		rd_kafka_event_t *ev;
		const rd_kafka_CreateAcls_result_t *res;
		const rd_kafka_acl_result_t **ar;
		size_t cnt;

		for (; k < 1000 && done + k <= n; k++) {
			struct acl_binding ab;

			acl_nth(done + k, n, name, user, &ab);
			b[k] = rd_kafka_AclBinding_new(RD_KAFKA_RESOURCE_TOPIC, ab.name,
						       ab.pat == ACL_PAT_PREFIXED ? RD_KAFKA_RESOURCE_PATTERN_PREFIXED
										  : RD_KAFKA_RESOURCE_PATTERN_LITERAL,
						       ab.principal, "*",
						       ab.op == ACL_READ ? RD_KAFKA_ACL_OPERATION_READ
									 : RD_KAFKA_ACL_OPERATION_WRITE,
						       ab.perm == ACL_PERM_DENY ? RD_KAFKA_ACL_PERMISSION_TYPE_DENY
										: RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
						       err, sizeof(err));
			if (!b[k]) {
				fprintf(stderr, "security: ACL %s: %s\n", name, err);
				rc = -EINVAL;
				break;
			}
		}
		if (!rc) {
			rd_kafka_CreateAcls(rk, b, (size_t)k, NULL, q);
			if (!(rc = admin_wait(rk, q, RD_KAFKA_EVENT_CREATEACLS_RESULT, &ev))) {
				res = rd_kafka_event_CreateAcls_result(ev);
				ar = rd_kafka_CreateAcls_result_acls(res, &cnt);
				for (size_t j = 0; j < cnt; j++)
					if (rd_kafka_acl_result_error(ar[j])) {
						fprintf(stderr, "security: CreateAcls: %s\n",
							rd_kafka_error_string(rd_kafka_acl_result_error(ar[j])));
						rc = -EIO;
						break;
					}
				rd_kafka_event_destroy(ev);
			}
		}
		for (int j = 0; j < k; j++)
			if (b[j])
				rd_kafka_AclBinding_destroy(b[j]);
		done += k;
	}
	for (uint64_t end = bench_now_ns() + READY_TIMEOUT * 1000000000ull; !rc;) {
		rd_kafka_AclBindingFilter_t *f = rd_kafka_AclBindingFilter_new(
			RD_KAFKA_RESOURCE_ANY, NULL, RD_KAFKA_RESOURCE_PATTERN_ANY, NULL, NULL,
			RD_KAFKA_ACL_OPERATION_ANY, RD_KAFKA_ACL_PERMISSION_TYPE_ANY, err, sizeof(err));
		rd_kafka_event_t *ev;
		size_t cnt = 0;

		rd_kafka_DescribeAcls(rk, f, NULL, q);
		rd_kafka_AclBinding_destroy(f);
		if ((rc = admin_wait(rk, q, RD_KAFKA_EVENT_DESCRIBEACLS_RESULT, &ev)) < 0)
			break;
		rd_kafka_DescribeAcls_result_acls(rd_kafka_event_DescribeAcls_result(ev), &cnt);
		rd_kafka_event_destroy(ev);
		if (cnt >= (size_t)n + 1)
			break;
		if (bench_now_ns() > end) {
			fprintf(stderr, "security: DescribeAcls lists %zu of %d ACLs after %d s\n", cnt, n + 1,
				READY_TIMEOUT);
			rc = -ETIMEDOUT;
		}
		usleep(100000);
	}
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return rc;
}

/* ns per check of the broker's matcher (dataplane/acl.h), in this
 * process, on the same n + 1 bindings, for a bench topic's name. */
static double acl_check_ns(int n)
{
	struct acl_binding *b = calloc((size_t)n + 1, sizeof(*b));
	char (*names)[64] = calloc((size_t)n + 1, 64), (*users)[32] = calloc((size_t)n + 1, 32);
	struct acl_set set;
	static const char topic[] = "secbench-acl-on-123456-7";
	uint64_t t0, iters = 200000;
	volatile int ok = 0;
	double ns = 0;

	if (b && names && users) {
		for (int i = 0; i <= n; i++)
			acl_nth(i, n, names[i], users[i], &b[i]);
		qsort(b, (size_t)n + 1, sizeof(*b), acl_sort_cmp);
		set = (struct acl_set){ .b = b, .n = n + 1 };
		t0 = bench_now_ns();
		for (uint64_t k = 0; k < iters; k++)
			ok += acl_authorize_n(&set, "User:ANONYMOUS", ACL_WILDCARD, ACL_WRITE, ACL_RES_TOPIC, topic,
					      sizeof(topic) - 1, 0);
		ns = (double)(bench_now_ns() - t0) / (double)iters;
		if (ok != (int)iters)
			ns = -1;        /* the bench's principal not allowed: a bug here */
	}
	free(b);
	free(names);
	free(users);
	return ns;
}

/* Two fresh brokers alike (PLAINTEXT for the bench's producer,
 * SASL_PLAINTEXT for the admin user that creates topics and ACLs) but for
 * the authorizer; produce to each in turn. */
static int acl_overhead(const struct secopts *so)
{
	static char lis[2][200], psasl[2][32];
	static const char *admin_kv[] = { "security.protocol", "sasl_plaintext", "sasl.mechanism", "SCRAM-SHA-512",
					  "sasl.username", "admin", "sasl.password", "admin-secret" };
	struct opts o = { .records = 1000000000ull, .size = 100, .partitions = so->partitions,
			  .replication_factor = 1, .acks = 1, .seconds = so->seconds, .compression = "none",
			  .linger_ms = -1, .cmd = "security" };
	struct broker ab[2];
	int npairs = so->quick ? 1 : 3 * so->rounds, rc = 0, started = 0;
	double rate[2] = { 0 }, ratio[64], check_ns;

	for (int on = 0; on < 2 && !rc; on++) {
		struct opts bo = o;
		int pt = bench_free_port(SOCK_STREAM), sp = bench_free_port(SOCK_STREAM);

		if (pt < 0 || sp < 0) {
			rc = -EADDRNOTAVAIL;
			break;
		}
		snprintf(lis[on], sizeof(lis[on]), "listeners=PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d",
			 pt, sp);
		snprintf(psasl[on], sizeof(psasl[on]), "127.0.0.1:%d", sp);
		bo.sets[bo.nsets++] = lis[on];
		bo.sets[bo.nsets++] = "sasl.enabled.mechanisms=SCRAM-SHA-512";
		bo.sets[bo.nsets++] = "super.users=User:admin";
		if (on)
			bo.sets[bo.nsets++] =
				"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";
		bo.args[bo.nargs++] = "--add-scram";
		bo.args[bo.nargs++] = "SCRAM-SHA-512=[name=admin,password=admin-secret]";
		fprintf(stderr, "security: a broker with the authorizer %s\n", on ? "on" : "off");
		if ((rc = broker_start(&ab[on], so->shards, &bo)) < 0)
			break;
		started++;
		snprintf(ab[on].bootstrap, sizeof(ab[on].bootstrap), "127.0.0.1:%d", pt);
	}
	if (!rc) {
		fprintf(stderr, "security: %d ACLs\n", so->acls + 1);
		client_security(admin_kv, 4);
		rc = make_acls(psasl[1], so->acls);
		client_security(NULL, 0);
	}
	for (int r = 0; !rc && r < 2 * npairs; r++) {
		/* off, on, on, off, off, on ...: each in turn first */
		int on = (r % 2) ^ ((r / 2) % 2);
		struct run pr;
		char topic[96];
		static unsigned seq;
		double v;

		snprintf(topic, sizeof(topic), "secbench-acl-%s-%d-%u", on ? "on" : "off", (int)getpid(), seq++);
		client_security(admin_kv, 4);
		rc = create_topics_rf(psasl[on], topic, 1, 1, so->partitions, 1);
		client_security(NULL, 0);
		if (rc < 0)
			break;
		fprintf(stderr, "security: ACLs, pair %d: authorizer %s\n", r / 2 + 1, on ? "on" : "off");
		memset(&pr, 0, sizeof(pr));
		if ((rc = kafka_produce(&o, &ab[on], topic, o.records, &pr,
					on ? "security: acl on" : "security: acl off")) < 0)
			break;
		v = rate_of(pr.records, pr.seconds);
		rate[on] += v / npairs;
		if (r % 2 == 0)
			ratio[r / 2] = v;
		else
			ratio[r / 2] = on ? v / ratio[r / 2] : ratio[r / 2] / v;
		client_security(admin_kv, 4);
		delete_topic(psasl[on], topic);
		client_security(NULL, 0);
	}
	for (int on = 0; on < started; on++)
		if (broker_stop(&ab[on]) < 0 && !rc)
			rc = -EIO;
	if (rc < 0)
		return rc;
	/* the median of the pairs' ratios */
	for (int i = 1; i < npairs; i++)
		for (int j = i; j > 0 && ratio[j] < ratio[j - 1]; j--) {
			double t = ratio[j];

			ratio[j] = ratio[j - 1];
			ratio[j - 1] = t;
		}
	check_ns = acl_check_ns(so->acls);
	printf("%-43s %12s %12s %8s\n", "# metric", "authz_off", "authz_on", "on/off");
	printf("security %-34s %12.1f %12.1f %8.3f\n", "acl_produce_100B_records_per_s", rate[0], rate[1],
	       rate[0] > 0 ? rate[1] / rate[0] : 0);
	printf("security %-34s %12d  (pairs, alternating order)\n", "acl_pairs", npairs);
	printf("security %-34s %12.3f  (min %.3f, max %.3f)\n", "acl_pair_ratio_median",
	       npairs % 2 ? ratio[npairs / 2] : (ratio[npairs / 2 - 1] + ratio[npairs / 2]) / 2, ratio[0],
	       ratio[npairs - 1]);
	printf("security %-34s %12d\n", "acl_count", so->acls + 1);
	printf("security %-34s %12.2f  (target <= 3: %s)\n", "acl_overhead_pct",
	       rate[0] > 0 ? 100 * (1 - rate[1] / rate[0]) : 0,
	       rate[0] > 0 && 100 * (1 - rate[1] / rate[0]) <= 3 ? "met" : "missed");
	printf("security %-34s %12.0f  (one check of WRITE on a topic, in this process, same ACLs)\n",
	       "acl_check_ns", check_ns);
	return check_ns < 0 ? -EACCES : 0;
}

int bench_security(int argc, char **argv)
{
	struct secopts so;
	static struct sec_run s;
	char cipher[96] = "(none)", layer[64];
	int64_t ktls, ossl;
	int rc;

	if ((rc = parse(argc, argv, &so)) <= 0)
		return rc < 0 ? 2 : 0;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (make_certs(&s) < 0) {
		bench_rmrf(s.dir, "security");
		return 1;
	}
	if ((rc = start_main(&s, &so)) < 0) {
		bench_rmrf(s.dir, "security");
		return 1;
	}
	printf("# sluice-bench security: one broker (%s), listeners PLAINTEXT, SSL, SASL_SSL (SCRAM-SHA-512); "
	       "librdkafka %s, one producer, %d partitions, %.1f s a produce run, %d round%s each listener in turn "
	       "(order reversed every other round), means of the rounds; MB = 10^6 bytes of record values\n",
	       so.shards ? "shards given" : "one shard per core", rd_kafka_version_str(), so.partitions, so.seconds,
	       so.rounds, so.rounds > 1 ? "s," : ",");
	fflush(stdout);
	rc = so.parts & PART_TPUT ? throughput(&s, &so) : 0;
	if (!rc && so.parts & PART_HS)
		rc = handshakes(&s, &so, cipher, sizeof(cipher));
	ktls = metric_sum(s.admin_port, "sluice_tls_connections_total{", "record_layer=\"ktls\"");
	ossl = metric_sum(s.admin_port, "sluice_tls_connections_total{", "record_layer=\"openssl\"");
	snprintf(layer, sizeof(layer), "%s", ktls > 0 && ossl <= 0 ? "ktls" : ktls > 0 ? "mixed"
					     : ossl > 0 ? "openssl" : "unknown");
	if (!rc && so.parts & (PART_TPUT | PART_HS)) {
		printf("security tls_record_layer %s  (broker's sluice_tls_connections_total: ktls %" PRId64
		       ", openssl %" PRId64 ")\n", layer, ktls, ossl);
		printf("security tls_cipher %s  (negotiated by the handshake client; OpenSSL 3 defaults on both sides)\n",
		       cipher);
		fflush(stdout);
	}
	/* the ACL brokers run alone */
	if (broker_stop(&s.br) < 0 && !rc)
		rc = -EIO;
	if (!rc && so.parts & PART_ACL)
		rc = acl_overhead(&so);
	bench_rmrf(s.dir, "security");
	return rc < 0 ? 1 : 0;
}
