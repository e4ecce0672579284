/* control/sluicectl_roll.c — `sluicectl cluster roll`: a rolling restart.
 * The brokers are restarted one at a time through a command the operator
 * gives (--exec, run with /bin/sh -c: {id} {host} {port} substituted, and
 * SLUICE_BROKER_ID/HOST/PORT in its environment), every broker that is not
 * the active controller first, the controller last (asked again before
 * each restart, as it may move). Before the first restart the cluster must
 * be healthy (unless --force); after each, the roll waits (--wait seconds)
 * until the broker is back and the cluster healthy again before the next:
 *
 *   - the broker's process from before the command is gone (a connection
 *     opened to it before the command was closed: a command that returns
 *     before the broker stopped is waited for, one that restarted nothing
 *     is a failure);
 *   - it answers on its Kafka listener and is registered and unfenced
 *     (listed in the Metadata of another broker: a fenced one is not, and
 *     in its own), and its sluice_broker_epoch (its admin endpoint's
 *     /metrics, when that answers) grew: the registration seen is the new
 *     process's, not the old one a SIGKILLed broker leaves until its
 *     session ends;
 *   - every partition it hosts has it in the ISR, none is under its
 *     min.insync.replicas, none is without a leader, and it is caught up
 *     with the metadata quorum when it is a voter;
 *   - without --force, every partition fully in sync and every broker
 *     registered, so the next restart starts from a healthy cluster.
 *
 * Leadership is not moved away first: the broker's own controlled shutdown
 * on SIGTERM does that (docs/cluster.md). Leadership does not come back on
 * its own (no auto.leader.rebalance.enable), so once a broker is back the
 * partitions it is the preferred replica of elect it again (ElectLeaders,
 * as `sluicectl leader elect`; --no-elect leaves them).
 *
 * The first broker that does not come back healthy in time (or whose
 * command fails or overruns --exec-timeout) stops the roll: exit 1, naming
 * the broker and what was not healthy; the brokers after it are not
 * touched. State is read over the Kafka protocol from a broker that is up
 * (the controller first, the one restarted last), through connections of
 * this file's own that fail without exiting.
 * @thread main */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define ROLL_POLL_MS 500            /* between two looks at the cluster */
#define ROLL_NOTE_MS 5000           /* a progress line at least this often while waiting */
#define ROLL_FIRST_CHECK_MS 10000   /* the check before the first restart: how long it may settle */
#define ROLL_NAMED 6                /* problems named in a message; the rest counted */
#define ROLL_IO_MS 3000             /* per request while polling (a restarting broker answers nothing) */

enum roll_result { RB_PLANNED, RB_RESTARTED, RB_FAILED };

/* A broker as the roll found it at the start. */
struct rb {
	int32_t id;
	char host[256];
	int32_t port;
	bool planned;               /* --nodes (default: every broker) */
	int seq;                    /* 1, 2, ...: the order its restart was tried in; 0 not yet */
	enum roll_result result;
	int64_t took_ms;            /* from the command's start to healthy */
	char why[1024];             /* a failure: what was not healthy */
	struct kclient k;           /* fd -1 when closed: asked for the cluster's state */
	/* its admin endpoint (found at the start, while the bootstrap broker
	 * answers), for sluice_broker_epoch: a restarted broker's new
	 * registration has a larger one than the old */
	bool admin;                 /* found and answering /metrics */
	char ahost[256];
	int aport;
	bool atls;
	int64_t epoch0;             /* before its restart; -1 unknown (then not judged) */
};

/* One look at the cluster: what is not healthy, named. */
struct look {
	int32_t asked;              /* the broker that answered; -1: none did */
	int32_t controller;         /* the quorum's leader (else Metadata's controller); -1 unknown */
	int n;                      /* problems found */
	size_t len;
	size_t first_len;           /* of the first one in text */
	char text[2048];            /* the first ROLL_NAMED, "; " between */
};

struct roll {
	struct ctl *c;
	struct rb *b;               /* every broker Metadata listed at the start */
	int nb;
	const char *exec;
	int64_t exec_ms, wait_ms;
	bool force, elect, dry_run;
	int32_t controller;         /* the last known active controller, -1 unknown */
	int32_t controller0;        /* the one at the start (the JSON's controller_id) */
	FILE *out;                  /* progress: stdout, or stderr with --format json */
};

static void look_add(struct look *l, const char *f, ...) __attribute__((format(printf, 2, 3)));

static void look_add(struct look *l, const char *f, ...)
{
	va_list ap;

	if (l->n++ >= ROLL_NAMED || l->len >= sizeof l->text - 1)
		return;
	if (l->len)
		l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "; ");
	va_start(ap, f);
	if (l->len < sizeof l->text)
		l->len += (size_t)vsnprintf(l->text + l->len, sizeof l->text - l->len, f, ap);
	va_end(ap);
	if (l->len >= sizeof l->text)
		l->len = sizeof l->text - 1;
	if (l->n == 1)
		l->first_len = l->len;
}

/* The first problem and how many more: a progress line. */
static const char *look_brief(const struct look *l)
{
	if (l->n <= 1)
		return fmt("%s", l->text);
	return fmt("%.*s (and %d more)", (int)l->first_len, l->text, l->n - 1);
}

/* The problems, with how many more there are. */
static const char *look_str(const struct look *l)
{
	if (l->n <= ROLL_NAMED)
		return fmt("%s", l->text);
	return fmt("%s; and %d more", l->text, l->n - ROLL_NAMED);
}

static const char *ids_str(const int32_t *ids, int32_t n)
{
	char buf[256];
	size_t len = 0;

	buf[0] = 0;
	for (int32_t i = 0; i < n && len < sizeof buf - 16; i++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", i ? "," : "", ids[i]);
	return fmt("%s", buf);
}

static bool has_id(const int32_t *ids, int32_t n, int32_t id)
{
	for (int32_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static struct rb *rb_find(struct roll *r, int32_t id)
{
	for (int i = 0; i < r->nb; i++)
		if (r->b[i].id == id)
			return &r->b[i];
	return NULL;
}

/* ---- the connections the roll asks through ------------------------------ */

static struct kclient *rb_conn(struct roll *r, struct rb *b)
{
	int io = r->c->timeout_ms < ROLL_IO_MS ? r->c->timeout_ms : ROLL_IO_MS;

	if (b->k.fd >= 0)
		return &b->k;
	if (kclient_open(&b->k, b->host, b->port, io, &r->c->sec)) {
		kclient_close(&b->k);
		b->k.fd = -1;
		return NULL;
	}
	return &b->k;
}

static void rb_drop(struct rb *b)
{
	kclient_close(&b->k);
	b->k.fd = -1;
}

/* The metadata quorum from k: NULL when not served or it fails. */
static const struct kafka_describe_quorum_response_partition_data *roll_quorum(struct kclient *k)
{
	const struct kafka_describe_quorum_response_partition_data *q;
	int16_t err;

	return ctl_describe_quorum(k, &q, &err) == 0 ? q : NULL;
}

/* Metadata of every topic from the first broker that answers: the last
 * known controller first, then the others in id order, `avoid` (the one
 * being restarted) last. Borrowed from that broker's connection until the
 * next look; *from is the broker that answered. NULL when none did. */
static struct kafka_metadata_response *roll_metadata(struct roll *r, int32_t avoid, struct rb **from)
{
	for (int pass = 0; pass < 3; pass++)
		for (int i = 0; i < r->nb; i++) {
			struct rb *b = &r->b[i];
			struct kafka_metadata_request req;
			struct kafka_metadata_response *md;
			struct kclient *k;
			int v;

			if ((pass == 0) != (b->id == r->controller && b->id != avoid) ||
			    (pass == 1 && (b->id == avoid || b->id == r->controller)) ||
			    (pass == 2 && b->id != avoid))
				continue;
			if (!(k = rb_conn(r, b)))
				continue;
			kclient_release(k);
			v = kclient_version(k, KAFKA_METADATA_KEY, 6);
			if (v < 1) {
				rb_drop(b);
				continue;
			}
			kafka_metadata_request_init(&req);
			req.Topics.count = -1;   /* every topic */
			req.AllowAutoTopicCreation = false;
			if (kclient_call(k, KAFKA_METADATA_KEY, (int16_t)v, &req, false, (void **)&md)) {
				rb_drop(b);
				continue;
			}
			*from = b;
			return md;
		}
	return NULL;
}

/* Whether broker id lists itself among the brokers of its own Metadata
 * (it applied its registration: its copy of the metadata caught up). */
static bool self_registered(struct roll *r, int32_t id)
{
	struct rb *b = rb_find(r, id);
	struct kafka_metadata_request req;
	struct kafka_metadata_response *md;
	struct kclient *k = b ? rb_conn(r, b) : NULL;
	struct kclient_mem *mark;
	bool found = false;
	int v;

	if (!k || (v = kclient_version(k, KAFKA_METADATA_KEY, 6)) < 1)
		return false;
	mark = k->mem;
	kafka_metadata_request_init(&req);
	req.Topics.count = 0;   /* the brokers only */
	req.AllowAutoTopicCreation = false;
	if (kclient_call(k, KAFKA_METADATA_KEY, (int16_t)v, &req, false, (void **)&md)) {
		rb_drop(b);
		return false;
	}
	for (int32_t i = 0; i < md->Brokers.count && !found; i++)
		found = md->Brokers.items[i].NodeId == id;
	kclient_release_to(k, mark);
	return found;
}

static void look_init(struct look *l)
{
	memset(l, 0, sizeof *l);
	l->asked = l->controller = -1;
}

/* Look at the cluster (adding to l, look_init'd). target: the broker just restarted (-1: none), whose
 * registration, ISRs and quorum state are judged; strict: every broker
 * registered and every partition fully in sync too. */
static void roll_look(struct roll *r, int32_t target, bool strict, struct look *l)
{
	const struct kafka_describe_quorum_response_partition_data *q = NULL;
	struct kafka_metadata_response *md;
	struct topic_repl *repl = NULL;
	struct kafka_str *names = NULL;
	struct rb *from = NULL;

	md = roll_metadata(r, target, &from);
	if (!md) {
		look_add(l, "no broker answers Metadata (every one tried: %s)",
			 r->nb ? fmt("%s:%d: %s", r->b[0].host, r->b[0].port, r->b[0].k.err) : "none");
		return;
	}
	l->asked = from->id;
	if (target >= 0 && from->id != target && !self_registered(r, target))
		look_add(l, "broker %d does not list itself in its own Metadata yet (its metadata not caught up)",
			 target);
	q = roll_quorum(&from->k);
	l->controller = q && q->LeaderId >= 0 ? q->LeaderId : md->ControllerId;
	if (l->controller >= 0)
		r->controller = l->controller;
	for (int i = 0; i < r->nb; i++) {
		bool registered = false;

		if (!strict && r->b[i].id != target)
			continue;
		for (int32_t j = 0; j < md->Brokers.count && !registered; j++)
			registered = md->Brokers.items[j].NodeId == r->b[i].id;
		if (!registered)
			look_add(l, "broker %d is not registered (down, fenced or still starting; asked broker %d)",
				 r->b[i].id, from->id);
	}
	if (md->Topics.count > 0) {
		repl = calloc((size_t)md->Topics.count, sizeof *repl);
		names = calloc((size_t)md->Topics.count, sizeof *names);
		if (repl && names) {
			for (int32_t i = 0; i < md->Topics.count; i++)
				names[i] = md->Topics.items[i].Name;
			ctl_topic_repl_on(&from->k, names, md->Topics.count, repl);
		}
	}
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];
		int32_t min_isr = repl && names ? repl[i].min_isr : -1;

		if (t->ErrorCode)
			continue;   /* being created or deleted */
		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
			const char *tp = fmt("%s-%d", kstr(t->Name), p->PartitionIndex);
			const char *isr = ids_str(p->IsrNodes.items, p->IsrNodes.count);
			const char *reps = ids_str(p->ReplicaNodes.items, p->ReplicaNodes.count);

			if (p->LeaderId < 0) {
				look_add(l, "%s has no leader (offline; replicas %s)", tp, reps);
			} else if (min_isr > 0 && p->IsrNodes.count < min_isr) {
				look_add(l, "%s has %d in sync (ISR %s), under its min.insync.replicas=%d", tp,
					 p->IsrNodes.count, isr, min_isr);
			} else if (target >= 0 && has_id(p->ReplicaNodes.items, p->ReplicaNodes.count, target) &&
				   !has_id(p->IsrNodes.items, p->IsrNodes.count, target)) {
				look_add(l, "%s: broker %d not back in the ISR (ISR %s, replicas %s)", tp, target, isr,
					 reps);
			} else if (strict && p->IsrNodes.count < p->ReplicaNodes.count) {
				look_add(l, "%s is under-replicated (ISR %s, replicas %s)", tp, isr, reps);
			}
		}
	}
	free(repl);
	free(names);
	if (q) {
		if (q->LeaderId < 0)
			look_add(l, "the metadata quorum has no leader");
		for (int32_t i = 0; i < q->CurrentVoters.count; i++) {
			const struct kafka_describe_quorum_response_replica_state *v = &q->CurrentVoters.items[i];

			/* a log end of -1: not known (Sluice's leader does not track
			 * its followers' yet), nothing to judge */
			if ((strict || v->ReplicaId == target) && v->ReplicaId != q->LeaderId &&
			    v->LogEndOffset >= 0 && v->LogEndOffset < q->HighWatermark)
				look_add(l, "voter %d is behind in the metadata quorum (log end %lld, high watermark %lld)",
					 v->ReplicaId, (long long)v->LogEndOffset, (long long)q->HighWatermark);
		}
	}
}

/* ---- the restart command ------------------------------------------------- */

/* tmpl with {id} {host} {port} replaced; NULL when it does not fit. */
static const char *roll_cmdline(const char *tmpl, const struct rb *b, char *out, size_t cap)
{
	size_t len = 0;

	for (const char *s = tmpl; *s;) {
		const char *v = NULL;
		size_t skip = 0;

		if (!strncmp(s, "{id}", 4))
			v = fmt("%d", b->id), skip = 4;
		else if (!strncmp(s, "{host}", 6))
			v = b->host, skip = 6;
		else if (!strncmp(s, "{port}", 6))
			v = fmt("%d", b->port), skip = 6;
		if (v) {
			size_t n = strlen(v);

			if (len + n >= cap)
				return NULL;
			memcpy(out + len, v, n);
			len += n;
			s += skip;
		} else {
			if (len + 1 >= cap)
				return NULL;
			out[len++] = *s++;
		}
	}
	out[len] = 0;
	return out;
}

/* A host name a shell reads as one plain word. */
static bool host_plain(const char *h)
{
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr(".-_:[]", *h))
			return false;
	return true;
}

/* Run the command for broker b: 0 when it exited 0 within --exec-timeout,
 * else 1 with why filled. Its stdin is /dev/null (it must not prompt: ssh
 * -o BatchMode=yes), its output passed through (to stderr with --format
 * json); it runs in its own process group, which a timeout ends (SIGTERM,
 * SIGKILL 5 s later). */
static int roll_exec(struct roll *r, const struct rb *b, const char *cmd, char *why, size_t cap)
{
	int64_t deadline = mono_ms() + r->exec_ms, killed = 0;
	int status = 0;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(why, cap, "cannot start the restart command: fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (null >= 0)
			dup2(null, 0);
		if (r->c->json)
			dup2(2, 1);
		signal(SIGPIPE, SIG_DFL);
		setenv("SLUICE_BROKER_ID", fmt("%d", b->id), 1);
		setenv("SLUICE_BROKER_HOST", b->host, 1);
		setenv("SLUICE_BROKER_PORT", fmt("%d", b->port), 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		fprintf(stderr, "sluicectl: cluster roll: cannot run /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);   /* the child does too: whichever runs first */
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		int64_t now = mono_ms();

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			snprintf(why, cap, "waiting for the restart command: %s", strerror(errno));
			return 1;
		}
		if (!killed && now >= deadline) {
			kill(-pid, SIGTERM);
			killed = now;
		} else if (killed && now >= killed + 5000) {
			kill(-pid, SIGKILL);
		}
		poll(NULL, 0, 50);
	}
	if (killed) {
		snprintf(why, cap, "the restart command ran longer than --exec-timeout %lld s and was stopped",
			 (long long)(r->exec_ms / 1000));
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, cap, "the restart command exited %d", WEXITSTATUS(status));
	else
		snprintf(why, cap, "the restart command was killed by signal %d", WTERMSIG(status));
	return 1;
}

/* Whether the connection k (opened before the restart) is gone: closed
 * by the peer or in error. An idle Kafka connection is sent nothing, so
 * anything readable means the end. */
static bool conn_gone(const struct kclient *k)
{
	struct pollfd p = { .fd = k->fd, .events = POLLIN };

	if (k->fd < 0)
		return true;
	return poll(&p, 1, 0) != 0;
}

/* ---- the broker epoch (the admin endpoint's /metrics) --------------------- */

/* sluice_broker_epoch in a /metrics body, -1 when absent. */
static int64_t epoch_parse(const struct http_reply *rep)
{
	const char *p = rep->body ? strstr(rep->body, "\nsluice_broker_epoch ") : NULL;
	int64_t e;

	if (!p)
		return -1;
	p += strlen("\nsluice_broker_epoch ");
	return parse_i64(fmt("%.*s", (int)strcspn(p, "\n\r "), p), -1, INT64_MAX, &e) ? e : -1;
}

/* Every planned broker's admin endpoint, asked once at the start (finding
 * them asks the bootstrap broker, which may be restarted later). */
static void roll_admin_find(struct roll *r)
{
	static const char unknown[] = "the roll cannot tell a restarted broker's new registration from its old "
				      "one by its sluice_broker_epoch, and relies on its connections and ISRs";

	for (int i = 0; i < r->nb; i++) {
		struct rb *b = &r->b[i];
		struct http_reply rep;

		b->epoch0 = -1;
		if (!b->planned)
			continue;
		b->admin = ctl_admin_get_node(r->c, b->id, "/metrics", unknown, &rep) == 200 &&
			   epoch_parse(&rep) >= 0 &&
			   ctl_admin_addr(r->c, b->id, b->ahost, sizeof b->ahost, &b->aport, &b->atls) == 0;
		http_reply_fini(&rep);
	}
}

/* Broker b's sluice_broker_epoch now: >= 0, -1 before it registered, or
 * -2 when its endpoint does not answer (err says why). */
static int64_t roll_epoch(struct roll *r, const struct rb *b, char *err, size_t cap)
{
	struct http_reply rep;
	int io = r->c->timeout_ms < ROLL_IO_MS ? r->c->timeout_ms : ROLL_IO_MS;
	int64_t e = -2;

	memset(&rep, 0, sizeof rep);
	if (http_get(b->ahost, b->aport, "/metrics", ctl_admin_auth(r->c), b->atls ? &r->c->sec : NULL, io, &rep) < 0)
		snprintf(err, cap, "%s", rep.err);
	else if (rep.status != 200)
		snprintf(err, cap, "HTTP %d", rep.status);
	else
		e = epoch_parse(&rep);
	http_reply_fini(&rep);
	return e;
}

/* ---- one broker ----------------------------------------------------------- */

static void note(struct roll *r, const char *f, ...) __attribute__((format(printf, 2, 3)));

static void note(struct roll *r, const char *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vfprintf(r->out, f, ap);
	va_end(ap);
	fputc('\n', r->out);
	fflush(r->out);
}

/* Preferred leader elections for the partitions whose first replica is
 * broker id (they left it at its shutdown). Not fatal: a note says what
 * happened. */
static void roll_elect(struct roll *r, int32_t id)
{
	struct kafka_elect_leaders_request req;
	struct kafka_elect_leaders_request_topic_partitions *tps = NULL;
	struct kafka_elect_leaders_response *resp;
	struct kafka_metadata_response *md;
	struct rb *from = NULL;
	int32_t *parts = NULL, ntp = 0, nparts = 0, all = 0, elected = 0, failed = 0;
	int v, io, rc;

	if (!(md = roll_metadata(r, id, &from)))
		return;
	for (int32_t i = 0; i < md->Topics.count; i++)
		all += md->Topics.items[i].Partitions.count;
	tps = calloc((size_t)md->Topics.count + 1, sizeof *tps);
	parts = calloc((size_t)all + 1, sizeof *parts);
	if (!tps || !parts)
		goto out;
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];
		int32_t first = nparts;

		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];

			if (p->ReplicaNodes.count > 0 && p->ReplicaNodes.items[0] == id && p->LeaderId != id)
				parts[nparts++] = p->PartitionIndex;
		}
		if (nparts > first) {
			memset(&tps[ntp], 0, sizeof tps[ntp]);
			tps[ntp].Topic = t->Name;
			tps[ntp].Partitions.items = &parts[first];
			tps[ntp++].Partitions.count = nparts - first;
		}
	}
	if (!nparts || (v = kclient_version(&from->k, KAFKA_ELECT_LEADERS_KEY, 2)) < 0)
		goto out;
	kafka_elect_leaders_request_init(&req);
	req.ElectionType = 0;   /* preferred */
	req.TimeoutMs = r->c->timeout_ms;
	req.TopicPartitions.items = tps;
	req.TopicPartitions.count = ntp;
	io = from->k.timeout_ms;
	from->k.timeout_ms = r->c->timeout_ms;   /* the answer comes once the records are applied */
	rc = kclient_call(&from->k, KAFKA_ELECT_LEADERS_KEY, (int16_t)v, &req, false, (void **)&resp);
	from->k.timeout_ms = io;
	if (rc) {
		note(r, "  broker %d: preferred leader elections not done (%s): `sluicectl leader elect` does them",
		     id, from->k.err);
		rb_drop(from);
		goto out;
	}
	for (int32_t i = 0; i < resp->ReplicaElectionResults.count; i++)
		for (int32_t j = 0; j < resp->ReplicaElectionResults.items[i].PartitionResult.count; j++) {
			int16_t e = resp->ReplicaElectionResults.items[i].PartitionResult.items[j].ErrorCode;

			elected += e == 0;
			failed += e != 0 && e != KERR_ELECTION_NOT_NEEDED;
		}
	note(r, "  broker %d: leads %d partition(s) again as their preferred replica%s", id, elected,
	     failed ? fmt(" (%d not elected: `sluicectl leader elect` retries)", failed) : "");
out:
	free(tps);
	free(parts);
}

/* Restart broker b and wait for it: 0 healthy, 1 stopped (b->why says why). */
static int roll_one(struct roll *r, struct rb *b, int step, int nsteps)
{
	char cmdbuf[8192];
	const char *cmd = roll_cmdline(r->exec, b, cmdbuf, sizeof cmdbuf);
	struct kclient old;
	int64_t start = mono_ms(), deadline, last_note = 0;
	bool was_up, gone;
	char last[sizeof ((struct look *)0)->text] = "";
	struct look l;

	memset(&old, 0, sizeof old);
	old.fd = -1;
	if (b->admin) {
		char err[256];

		b->epoch0 = roll_epoch(r, b, err, sizeof err);
		if (b->epoch0 < 0)
			b->epoch0 = -1;   /* not registered now, or not answering: nothing to compare with */
	}
	was_up = kclient_open(&old, b->host, b->port, r->c->timeout_ms, &r->c->sec) == 0;
	if (!was_up)
		kclient_close(&old);
	note(r, "[%d/%d] broker %d (%s:%d)%s: %s", step, nsteps, b->id, b->host, b->port,
	     b->id == r->controller ? ", the active controller" : "", cmd);
	if (!was_up)
		note(r, "  broker %d does not answer before its restart (%s)", b->id, old.err);
	rb_drop(b);   /* its connection ends with it */
	if (roll_exec(r, b, cmd, b->why, sizeof b->why)) {
		kclient_close(&old);
		return 1;
	}
	deadline = mono_ms() + r->wait_ms;
	gone = !was_up || conn_gone(&old);
	while (!gone && mono_ms() < deadline) {
		if (mono_ms() - last_note >= ROLL_NOTE_MS) {
			last_note = mono_ms();
			note(r, "  broker %d: the command is done; waiting for its process from before to stop", b->id);
		}
		poll(NULL, 0, 100);
		gone = conn_gone(&old);
	}
	kclient_close(&old);
	if (!gone) {
		snprintf(b->why, sizeof b->why,
			 "broker %d was not restarted: the restart command exited 0 but its process from before the "
			 "command still answered after --wait %lld s (does the command restart this broker?)", b->id,
			 (long long)(r->wait_ms / 1000));
		return 1;
	}
	last_note = mono_ms();
	for (;;) {
		struct kclient *k = rb_conn(r, b);
		int64_t now;

		look_init(&l);
		if (!k) {
			look_add(&l, "broker %d does not answer on %s:%d (%s)", b->id, b->host, b->port, b->k.err);
			roll_look(r, -1, false, &l);   /* what that costs: offline, under min.insync.replicas */
		} else {
			if (b->epoch0 >= 0) {
				char err[256] = "";
				int64_t e = roll_epoch(r, b, err, sizeof err);

				if (e == -2)
					look_add(&l, "broker %d's admin endpoint %s:%d does not answer (%s)", b->id, b->ahost,
						 b->aport, err);
				else if (e <= b->epoch0)
					look_add(&l, "broker %d has not registered again yet (sluice_broker_epoch %lld, %lld "
						 "before)", b->id, (long long)e, (long long)b->epoch0);
			}
			roll_look(r, b->id, !r->force, &l);
		}
		if (!l.n)
			break;
		now = mono_ms();
		if (now >= deadline) {
			snprintf(b->why, sizeof b->why, "broker %d did not come back healthy within --wait %lld s: %s",
				 b->id, (long long)(r->wait_ms / 1000), look_str(&l));
			return 1;
		}
		if (strncmp(last, l.text, l.first_len) || now - last_note >= ROLL_NOTE_MS) {
			note(r, "  broker %d: waiting (%lld s): %s", b->id, (long long)((now - start) / 1000),
			     look_brief(&l));
			snprintf(last, sizeof last, "%s", l.text);
			last_note = now;
		}
		poll(NULL, 0, ROLL_POLL_MS);
	}
	if (r->elect)
		roll_elect(r, b->id);
	b->took_ms = mono_ms() - start;
	if (b->epoch0 >= 0) {
		char err[256];
		int64_t e = roll_epoch(r, b, err, sizeof err);

		note(r, "  broker %d: back and healthy after %.1f s (registered anew: broker epoch %lld, %lld before)",
		     b->id, (double)b->took_ms / 1000.0, (long long)e, (long long)b->epoch0);
	} else {
		note(r, "  broker %d: back and healthy after %.1f s", b->id, (double)b->took_ms / 1000.0);
	}
	return 0;
}

/* ---- the command ------------------------------------------------------------ */

/* --nodes 1,3 into the brokers' planned flags: 0, or the exit status. */
static int parse_nodes(struct roll *r, const char *s)
{
	if (!s) {
		for (int i = 0; i < r->nb; i++)
			r->b[i].planned = true;
		return 0;
	}
	while (*s) {
		size_t n = strcspn(s, ",");
		char tok[32];
		int64_t id;
		struct rb *b;

		snprintf(tok, sizeof tok, "%.*s", (int)(n < sizeof tok - 1 ? n : sizeof tok - 1), s);
		if (!parse_i64(tok, 0, INT32_MAX, &id))
			return ctl_usage(r->c, "--nodes wants broker ids like 1,3, not '%s'", tok);
		if (!(b = rb_find(r, (int32_t)id))) {
			char all[256];
			size_t len = 0;

			for (int i = 0; i < r->nb && len < sizeof all - 16; i++)
				len += (size_t)snprintf(all + len, sizeof all - len, "%s%d", i ? "," : "", r->b[i].id);
			return ctl_fail(r->c, "broker %lld is not registered in the cluster (its Metadata lists %s): "
					"start it, or leave it out of --nodes", (long long)id, len ? all : "none");
		}
		b->planned = true;
		s += n + (s[n] == ',');
	}
	return 0;
}

/* The next broker to restart: the first planned one not yet done that is
 * not the active controller, else the controller. */
static struct rb *roll_next(struct roll *r)
{
	struct rb *ctl_b = NULL;

	for (int i = 0; i < r->nb; i++) {
		struct rb *b = &r->b[i];

		if (!b->planned || b->result != RB_PLANNED)
			continue;
		if (b->id != r->controller)
			return b;
		ctl_b = b;
	}
	return ctl_b;
}

static int cmp_rb(const void *a, const void *b)
{
	const struct rb *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

/* The planned brokers in order: those tried in the order they were, then
 * the others in id order, the active controller last. Returns the count. */
static int roll_order(struct roll *r, struct rb **out)
{
	int n = 0;

	for (int seq = 1; seq <= r->nb; seq++)
		for (int i = 0; i < r->nb; i++)
			if (r->b[i].planned && r->b[i].seq == seq)
				out[n++] = &r->b[i];
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < r->nb; i++)
			if (r->b[i].planned && !r->b[i].seq && (pass == 0) != (r->b[i].id == r->controller))
				out[n++] = &r->b[i];
	return n;
}

static void roll_json(struct roll *r, int rc, int64_t took_ms, const char *refused)
{
	struct rb **order = calloc((size_t)r->nb + 1, sizeof *order);
	int n = order ? roll_order(r, order) : 0;

	json_obj_begin(NULL);
	json_int_or_null("controller_id", r->controller0);
	json_bool("dry_run", r->dry_run);
	json_arr_begin("brokers");
	for (int i = 0; i < n; i++) {
		const struct rb *b = order[i];
		char buf[8192];

		json_obj_begin(NULL);
		json_int("node_id", b->id);
		json_str("host", b->host);
		json_int("port", b->port);
		json_str("command", roll_cmdline(r->exec, b, buf, sizeof buf));
		json_str("result", b->result == RB_RESTARTED ? "restarted" : b->result == RB_FAILED ? "failed"
			 : "not_restarted");
		json_int_or_null("seconds", b->result == RB_RESTARTED ? (b->took_ms + 500) / 1000 : -1);
		json_str("error", b->why[0] ? b->why : NULL);
		json_obj_end();
	}
	json_arr_end();
	json_str("refused", refused);
	json_int("seconds", (took_ms + 500) / 1000);
	json_int("exit_status", rc);
	json_obj_end();
	json_end();
	free(order);
}

/* The plan, in order: the controller last. */
static void roll_plan(struct roll *r)
{
	struct rb **order = calloc((size_t)r->nb + 1, sizeof *order);
	int n = order ? roll_order(r, order) : 0;

	for (int i = 0; i < n; i++) {
		const struct rb *b = order[i];
		char buf[8192];

		note(r, "  %d. broker %d (%s:%d)%s: %s", i + 1, b->id, b->host, b->port,
		     b->id == r->controller ? ", the active controller" : "", roll_cmdline(r->exec, b, buf, sizeof buf));
	}
	free(order);
}

static int cmd_cluster_roll(struct ctl *c, const struct args *a)
{
	struct roll r = { .c = c, .controller = -1, .controller0 = -1 };
	const char *s;
	struct kafka_metadata_response *md;
	struct kclient *boot;
	int64_t v, start = mono_ms();
	int rc = 0, nplanned = 0, step = 0;
	const char *refused = NULL;
	struct look l;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	r.exec = opt_get(a, "exec");
	if (!r.exec || !*r.exec)
		return ctl_usage(c, "--exec 'CMD' is needed: the command that restarts one broker, e.g. "
				 "--exec 'ssh {host} systemctl restart sluiced'");
	r.wait_ms = 300000;
	if ((s = opt_get(a, "wait"))) {
		if (!parse_i64(s, 1, 86400, &v))
			return ctl_usage(c, "--wait wants seconds (1-86400), not '%s'", s);
		r.wait_ms = v * 1000;
	}
	r.exec_ms = 600000;
	if ((s = opt_get(a, "exec-timeout"))) {
		if (!parse_i64(s, 1, 86400, &v))
			return ctl_usage(c, "--exec-timeout wants seconds (1-86400), not '%s'", s);
		r.exec_ms = v * 1000;
	}
	r.force = opt_has(a, "force");
	r.elect = !opt_has(a, "no-elect");
	r.dry_run = opt_has(a, "dry-run");
	r.out = c->json ? stderr : stdout;

	md = ctl_metadata(c, NULL, 0);   /* exits 1 when no bootstrap broker answers */
	boot = ctl_client(c);
	r.nb = md->Brokers.count;
	r.b = calloc((size_t)r.nb + 1, sizeof *r.b);
	if (!r.b)
		return ctl_fail(c, "out of memory");
	for (int i = 0; i < r.nb; i++) {
		const struct kafka_metadata_response_metadata_response_broker *mb = &md->Brokers.items[i];

		r.b[i].id = mb->NodeId;
		snprintf(r.b[i].host, sizeof r.b[i].host, "%s", kstr(mb->Host));
		r.b[i].port = mb->Port;
		r.b[i].k.fd = -1;
	}
	qsort(r.b, (size_t)r.nb, sizeof *r.b, cmp_rb);
	{
		const struct kafka_describe_quorum_response_partition_data *q = roll_quorum(boot);

		r.controller = r.controller0 = q && q->LeaderId >= 0 ? q->LeaderId : md->ControllerId;
	}
	if ((rc = parse_nodes(&r, opt_get(a, "nodes"))))
		goto out;
	for (int i = 0; i < r.nb; i++) {
		if (!r.b[i].planned)
			continue;
		nplanned++;
		if (strstr(r.exec, "{host}") && !host_plain(r.b[i].host)) {
			rc = ctl_fail(c, "broker %d's host '%s' holds characters a shell reads: use \"$SLUICE_BROKER_HOST\" "
				      "in --exec instead of {host}", r.b[i].id, r.b[i].host);
			goto out;
		}
	}
	note(&r, "%s %d broker(s) one at a time, the active controller (%d) last; --wait %lld s for each:",
	     r.dry_run ? "would restart" : "restarting", nplanned, r.controller, (long long)(r.wait_ms / 1000));
	roll_plan(&r);
	look_init(&l);
	roll_look(&r, -1, true, &l);
	if (r.dry_run) {
		note(&r, l.n ? "the cluster is not healthy now: %s%s" : "the cluster is healthy now%s%s",
		     l.n ? look_str(&l) : "", l.n && !r.force ? " (the roll would refuse to start; --force starts it)"
		     : "");
		if (l.n && !r.force) {
			refused = fmt("the cluster is not healthy: %s", look_str(&l));
			rc = EXIT_KAFKA;   /* a gate: the roll would not start */
		}
		goto out;
	}
	{
		int64_t deadline = mono_ms() + (r.wait_ms < ROLL_FIRST_CHECK_MS ? r.wait_ms : ROLL_FIRST_CHECK_MS);

		while (l.n && !r.force && mono_ms() < deadline) {
			poll(NULL, 0, ROLL_POLL_MS);
			look_init(&l);
			roll_look(&r, -1, true, &l);
		}
	}
	if (l.n && !r.force) {
		refused = fmt("the cluster is not healthy: %s", look_str(&l));
		rc = ctl_fail(c, "not started: %s; wait until it is (sluicectl cluster info, cluster check), or --force "
			      "to restart anyway", look_str(&l));
		goto out;
	}
	if (l.n)
		note(&r, "--force: restarting although the cluster is not healthy: %s", look_str(&l));
	roll_admin_find(&r);
	for (struct rb *b; (b = roll_next(&r));) {
		b->seq = ++step;
		if (roll_one(&r, b, step, nplanned)) {
			char rest[512];
			size_t len = 0;

			b->result = RB_FAILED;
			rest[0] = 0;
			for (int i = 0; i < r.nb; i++)
				if (r.b[i].planned && r.b[i].result == RB_PLANNED && len < sizeof rest - 16)
					len += (size_t)snprintf(rest + len, sizeof rest - len, "%s%d", len ? "," : "",
								r.b[i].id);
			rc = ctl_fail(c, "stopped at broker %d: %s%s", b->id, b->why,
				      len ? fmt("; not restarted: broker(s) %s", rest) : "");
			break;
		}
		b->result = RB_RESTARTED;
	}
	if (!rc)
		note(&r, "rolled %d broker(s) in %.1f s", nplanned, (double)(mono_ms() - start) / 1000.0);
out:
	if (c->json && rc != EXIT_USAGE)
		roll_json(&r, rc, mono_ms() - start, refused);
	for (int i = 0; i < r.nb; i++)
		kclient_close(&r.b[i].k);
	free(r.b);
	return rc;
}

static const struct opt_spec roll_opts[] = {
	{ "exec", 'e', "CMD", "the command that restarts one broker, run with /bin/sh -c: {id} {host} {port} are "
	  "replaced by the broker's, which are also in $SLUICE_BROKER_ID, $SLUICE_BROKER_HOST, "
	  "$SLUICE_BROKER_PORT; its stdin is /dev/null (it must not prompt: ssh -o BatchMode=yes); exit 0 "
	  "when it restarted the broker" },
	{ "nodes", 'n', "IDS", "only these brokers (1,3; default: every broker), still the controller last" },
	{ "wait", 'w', "SECONDS", "how long each broker may take to be back healthy after its command "
	  "(default 300)" },
	{ "exec-timeout", 0, "SECONDS", "how long the command may run before it is stopped and the roll "
	  "with it (default 600)" },
	{ "force", 0, NULL, "start although the cluster is not healthy, and after each broker wait only for "
	  "that broker (registered, in its partitions' ISRs), not for every partition in sync" },
	{ "no-elect", 0, NULL, "leave leadership where the restarts put it (default: a restarted broker leads "
	  "again the partitions it is the preferred replica of)" },
	{ "dry-run", 0, NULL, "print the order, the commands and whether the cluster is healthy; restart nothing "
	  "(exit 1 when the roll would refuse to start)" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd roll_cmds[] = {
	{ "cluster", "roll", "", "restart brokers one at a time through a command, waiting until each is healthy",
	  roll_opts,
	  "sluicectl cluster roll --exec 'ssh {host} systemctl restart sluiced'\n"
	  "sluicectl cluster roll -e 'ssh {host} systemctl restart sluiced' --dry-run\n"
	  "sluicectl cluster roll -e './restart.sh \"$SLUICE_BROKER_ID\"' -n 2,3 -w 600",
	  cmd_cluster_roll },
};

const int roll_ncmds = sizeof roll_cmds / sizeof roll_cmds[0];
