/* dataplane/replica_fetcher.c — a shard's fetchers from its partitions'
 * leaders (see replica_fetcher.h). @thread shard */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_repl.h"
#include "dataplane/part.h"
#include "dataplane/part_replica.h"
#include "dataplane/part_role.h"
#include "dataplane/peer_session.h"
#include "dataplane/replica_fetcher.h"
#include "dataplane/shard_core.h"
#include "storage/batch_format.h"
#include "storage/controls.h"
#include "storage/plog_epochs.h"
#include "storage/slog.h"

#define BACKOFF_MIN_NS 100000000ull       /* 100 ms */
#define BACKOFF_MAX_NS 1000000000ull      /* replica.fetch.backoff.ms */
#define PART_RETRY_NS 500000000ull        /* a partition the leader refused: asked again after */
#define IN_CAP (REPLICA_FETCH_MAX_BYTES + (1u << 20))
#define RF_MAX_PARTS 64                   /* partitions a request: the rest on the next */
#define SOCKET_TIMEOUT_NS 30000000000ull   /* replica.socket.timeout.ms: no answer, a new connection */

/* The native transport: partitions asked at once, each its own
 * REPLICA_FETCH and answer (reassembled in a slot of the fetcher's input
 * buffer); an answer lost is asked again after the leader's wait and this. */
#define NSLOTS 8
#define NSLOT_CAP (IN_CAP / NSLOTS)
#define NATIVE_PART_BYTES (256u << 10)      /* a REPLICA_DATA train of at most ~180 1500-byte frames */
#define NATIVE_LOSS_NS 250000000ull

enum { RF_IDLE, RF_CONNECTING, RF_HANDSHAKE, RF_READY, RF_SENDING, RF_WAITING, RF_CLOSING };
#define AUTH_LOG_NS 60000000000ull        /* the same handshake failure logged again after */
#define SKIP_LOG_NS 60000000000ull        /* a partition's skip or dropped answer logged again after */

struct replica_fetcher;

/* How a fetcher reaches its leader (the seam between the follower's state
 * machine, shared, and the wire): Kafka's Fetch over a TCP connection, or
 * the native REPLICA_FETCH on the shard's DPDK replication queue pair.
 * Both ask with rf_ask_of and take answers with rf_take. */
struct rf_transport {
	const char *name;
	/* the loop's turn: connect, ask, time out; the work done */
	int (*poll)(struct replica_fetcher *f);
	/* nobody follows the leader any more, or another transport takes
	 * over: let go; 1 once nothing is in flight (f may be freed) */
	int (*release)(struct replica_fetcher *f);
};

/* A partition asked over the native transport. */
struct rf_nslot {
	int used;
	const struct part *p;         /* compared, never read: the answer names its partition */
	uint32_t request;
	int64_t offset;
	uint64_t sent_ns;
	uint32_t total;
	uint16_t count, got;
	int16_t err;
	int32_t div_epoch;
	int64_t div_end, hw, ls;
	uint8_t *buf;                 /* NSLOT_CAP bytes of the fetcher's input buffer */
	uint64_t bits[NATIVE_MAX_FRAGMENTS / 64];
};

struct replica_fetcher {
	struct shard *sh;
	int32_t leader;
	const struct rf_transport *tr;
	char host[256];
	int32_t port;
	uint32_t repl_ip;            /* native: the leader's dpdk.listen (network order) */
	uint16_t repl_port;
	struct rf_nslot nslot[NSLOTS];
	int fd;
	int state;
	struct io_op conn_op, send_op, recv_op;
	/* a secured inter-broker listener (b->peer_sec): TLS and/or SASL
	 * on this connection (made at its connect, gone at its close); NULL
	 * on PLAINTEXT, whose path is the plain one */
	struct peer_session *sess;
	/* KIP-368: when to authenticate again on this connection (shard
	 * clock; 0: the session never ends), at 85-95% of the lifetime the
	 * leader gave from when the authentication began, as Kafka's clients;
	 * reauth: the handshakes under way are a re-authentication */
	uint64_t auth_start_ns, reauth_ns;
	int reauth;
	uint32_t rng;
	char auth_err[200];          /* the last handshake failure logged, and when */
	uint64_t auth_logged_ns;
	struct sockaddr_storage addr;  /* the leader's listener: IPv4 or IPv6 */
	socklen_t addr_len;
	uint8_t *out;
	uint32_t out_len, out_sent, out_cap;
	uint8_t *in;
	uint32_t in_len, in_cap;
	uint8_t *arena;
	size_t arena_cap;
	int32_t corr;
	uint64_t retry_ns, backoff_ns;
	uint64_t sent_ns;            /* the request in flight was sent (shard clock) */
	/* the partitions that follow this leader (made again when roles or
	 * the shard's partitions change: sh->roles_changed), so that a turn
	 * and an answer look at these, not at every partition of the shard */
	struct part **fp;
	int nfp, fp_cap;
	/* where in fp the next request (TCP) or round of asks (native)
	 * starts: after the last partition asked, so that each is asked in
	 * turn when more follow this leader than one request names */
	int fp_next;
	/* the request in flight's partitions in request order (the answer's
	 * order): an answer's partition found without a search; cleared
	 * with fp (a partition may be gone) */
	struct part *asked[RF_MAX_PARTS];
	int nasked;
	struct replica_fetcher *next;
};

/* Partition p follows `leader` and may be asked for now. */
static int follows(const struct part *p, int32_t leader)
{
	const struct part_role *r = p->role;

	return r && !r->leading && r->leader == leader && p->pl && !p->deleted;
}

static int ready(const struct part *p, uint64_t now)
{
	return p->pl->durable_offset == p->pl->next_offset && !p->pl->err && now >= p->role->retry_ns;
}

/* p's last append is still being written, and will be: the fetch waits
 * for it (rf_send_fetch). Not a failed log (offline on this node until a
 * restart: never asked again) nor one whose filesystem is full (written
 * again by its role tick, asked once that lands): either would hold back
 * every other partition followed from the same leader (Kafka's fetcher
 * takes a failed partition out and goes on with the others). */
static int settling(const struct part *p, uint64_t now)
{
	const struct plog *pl = p->pl;

	return now >= p->role->retry_ns && !pl->err && !pl->nospace && pl->durable_offset != pl->next_offset;
}

/* Why p was left out or its answer dropped, as the log says it. */
static const char *const skip_why[SHARD_REPL_SKIPS] = {
	"left out of the fetch: its durable end is behind its log end and the filesystem is marked full",
	"left out of the fetch: its log failed on this node",
	"left out of the fetch: the leader refused it, asked again after a pause",
	"left out of the fetch: a throttled replica whose budget is spent",
	"answer dropped: it answers an older fetch (the epoch or the log end moved since)",
	"answer dropped: the partition is not followed from this leader any more",
	"answer dropped: its batches are not contiguous (nothing appended)",
};

/* p was skipped or its answer dropped for `why`: counted; said on stderr
 * naming the partition, the first time a minute for p (any reason). */
static void rf_note(struct shard *sh, struct part *p, enum shard_repl_skip why)
{
	struct part_role *r = p->role;

	shard_stat_add(&sh->stats.repl_skipped[why], 1);
	if (r->skip_logged_ns && sh->now_ns - r->skip_logged_ns < SKIP_LOG_NS)
		return;
	r->skip_logged_ns = sh->now_ns ? sh->now_ns : 1;
	slog(SLOG_WARN, /* style: allow slow path: once a minute per partition at most */
		"shard %d: replica fetch of %s-%d from broker %d: %s", sh->id, p->topic, p->index, r->leader,
		skip_why[why]);
}

/* p, followed, is left out of this fetch: counted once each time it
 * starts to be for a reason (not once a turn; rf_ask_of clears it). */
static void rf_left_out(struct shard *sh, struct part *p, enum shard_repl_skip why)
{
	if (p->role->fetch_skip == why + 1)
		return;
	p->role->fetch_skip = (uint8_t)(why + 1);
	rf_note(sh, p, why);
}

/* p follows the fetcher's leader and is not ready: why, when it is a
 * skip (a last append still being written, settling, is a wait, not one). */
static void rf_not_ready(struct shard *sh, struct part *p)
{
	const struct plog *pl = p->pl;

	if (pl->err)
		rf_left_out(sh, p, SHARD_REPL_SKIP_LOG_FAILED);
	else if (sh->now_ns < p->role->retry_ns)
		rf_left_out(sh, p, SHARD_REPL_SKIP_BACKOFF);
	else if (pl->nospace)
		rf_left_out(sh, p, SHARD_REPL_SKIP_FULL);
}

/* What the follower asks of its leader for p (either transport): its
 * durable log end, the epoch of its last batch, its current leader epoch,
 * noted as the epoch of the fetch in flight. */
struct rf_ask {
	int32_t leader_epoch, last_epoch;
	int64_t offset, log_start;
};

static void rf_ask_of(struct part *p, struct rf_ask *a)
{
	const struct plog *pl = p->pl;

	p->role->fetch_epoch = p->role->leader_epoch;
	p->role->fetch_skip = 0;
	a->leader_epoch = p->role->leader_epoch;
	a->offset = pl->next_offset;
	/* the control no-truncate: no epoch said, so no divergence found */
	a->last_epoch = pl->next_offset > pl->log_start && !SLUICE_CONTROL_OFF(no_truncate)
				? plog_epoch_for_offset(pl, pl->next_offset - 1)
				: -1;
	a->log_start = pl->log_start;
}

/* The bytes the reassignments' replicas may still fetch now: the node's
 * throttle, each shard its share (either transport; read once a round). */
static int64_t rf_throttle_avail(struct shard *sh)
{
	int64_t rate = __atomic_load_n(&sh->b->repl_throttle_bps, __ATOMIC_RELAXED);

	if (rate > 0 && rate != REPL_THROTTLE_NONE)
		rate = rate / sh->b->set.nshards > 0 ? rate / sh->b->set.nshards : 1;
	return repl_throttle_avail(&sh->repl_throttle, rate, sh->now_ns);
}

/* The Fetch from the partitions `from` (a list of nfrom, looked at from
 * index `start` on, round; or sh->parts when NULL); asked, when not NULL,
 * gets the partitions it names in order; *next, when not NULL, the index
 * in `from` after the last one named (where the next request starts). */
static int rf_build(struct shard *sh, int32_t leader, struct part *const *from, int nfrom, int start, int32_t corr,
		    struct kafka_writer *w, struct part **asked, int *next)
{
	struct kafka_fetch_request q;
	struct kafka_fetch_request_fetch_topic topics[RF_MAX_PARTS];
	struct kafka_fetch_request_fetch_partition parts[RF_MAX_PARTS];
	struct kafka_request req;
	int n = 0;
	int32_t self = -1;
	int64_t avail = rf_throttle_avail(sh);
	struct part *p = from ? NULL : sh->parts;

	if (from && (start < 0 || start >= nfrom))
		start = 0;
	/* one topic entry per partition (the request allows repeats); at
	 * most RF_MAX_PARTS partitions a request, the rest on the next,
	 * which starts after the last one this one named (as Kafka's
	 * fetcher moves a partition to the end of its list): from the
	 * list's head each time, a leader with more partitions from this
	 * shard than that would never be asked for the others, and they
	 * would never rejoin its ISR */
	for (int k = 0; n < RF_MAX_PARTS; k++) {
		struct rf_ask a;

		if (from)
			p = k < nfrom ? from[(start + k) % nfrom] : NULL;
		else if (k)
			p = p->next;
		if (!p)
			break;
		if (!follows(p, leader))
			continue;
		if (!ready(p, sh->now_ns)) {
			rf_not_ready(sh, p);
			continue;
		}
		if (p->role->throttled && avail <= 0) {
			rf_left_out(sh, p, SHARD_REPL_SKIP_THROTTLED);
			continue;                /* its budget spent: asked once it fills */
		}
		self = p->role->self;
		rf_ask_of(p, &a);
		parts[n] = (struct kafka_fetch_request_fetch_partition){
			.Partition = p->index,
			.CurrentLeaderEpoch = a.leader_epoch,
			.FetchOffset = a.offset,
			.LastFetchedEpoch = a.last_epoch,
			.LogStartOffset = a.log_start,
			.PartitionMaxBytes = p->role->throttled && avail < REPLICA_FETCH_PART_BYTES
				? (int32_t)avail : (int32_t)REPLICA_FETCH_PART_BYTES,
		};
		topics[n].Topic = (struct kafka_str){ p->topic, (int32_t)strlen(p->topic) };
		topics[n].Partitions.items = &parts[n];
		topics[n].Partitions.count = 1;
		if (asked)
			asked[n] = p;
		if (from && next)
			*next = (start + k + 1) % nfrom;
		n++;
	}
	if (!n)
		return 0;
	kafka_fetch_request_init(&q);
	q.ReplicaId = self;
	q.MaxWaitMs = REPLICA_FETCH_WAIT_MS;
	q.MinBytes = 1;
	q.MaxBytes = (int32_t)REPLICA_FETCH_MAX_BYTES;
	q.IsolationLevel = 0;
	q.SessionId = 0;
	q.SessionEpoch = -1;                 /* a full fetch each time: no session */
	q.Topics.items = topics;
	q.Topics.count = n;
	q.ForgottenTopicsData.count = 0;
	memset(&req, 0, sizeof(req));
	req.api = kafka_api_find(KAFKA_FETCH_KEY);
	req.header.RequestApiKey = KAFKA_FETCH_KEY;
	req.header.RequestApiVersion = REPLICA_FETCH_VERSION;
	req.header.CorrelationId = corr;
	req.header.ClientId = (struct kafka_str){ "sluice-replica-fetcher", 22 };
	req.header_version = kafka_request_header_version(req.api, REPLICA_FETCH_VERSION);
	req.body = &q;
	if (kafka_request_encode(w, &req) < 0)
		return -EMSGSIZE;
	return n;
}

int replica_fetch_build(struct shard *sh, int32_t leader, int32_t corr, struct kafka_writer *w)
{
	return rf_build(sh, leader, NULL, 0, 0, corr, w, NULL, NULL);
}

static struct part *find_part(struct shard *sh, int32_t leader, struct kafka_str topic, int32_t index)
{
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->index == index && follows(p, leader) && (int32_t)strlen(p->topic) == topic.len &&
		    !memcmp(p->topic, topic.ptr, (size_t)topic.len))
			return p;
	return NULL;
}

/* The leader says the log diverges after epoch `epoch` at `end`: cut to
 * where both agree (Kafka's truncateOnFetchResponse: the least of the
 * leader's end of that epoch and this log's). */
static int cut_divergent(struct part *p, int32_t epoch, int64_t end)
{
	int32_t mine;
	int64_t my_end, to;

	plog_epoch_end_offset(p->pl, epoch, &mine, &my_end);
	to = end;
	if (my_end >= 0 && my_end < to)
		to = my_end;
	if (to >= p->pl->next_offset)
		return 0;
	if (to < p->pl->log_start)
		to = p->pl->log_start;
	/* once per election at most: the cut, then the state rebuilt */
	return part_truncate_to_sync(p, to, p->pl->log_start);
}

/* One partition's answer (either transport), as Kafka's Fetch carries it. */
struct rf_answer {
	int16_t err;
	int32_t div_epoch;               /* -1: none */
	int64_t div_end, hw;             /* div_epoch -1, out of range: the leader's log end (-1: not said) */
	int64_t log_start;               /* the leader's (-1: not said) */
	const uint8_t *records;
	uint32_t len;
};

/* The leader answered OFFSET_OUT_OF_RANGE (Kafka's
 * AbstractFetcherThread.handleOutOfRangeError, fetchOffsetAndTruncate):
 * the fetch offset (this log's end) is past the leader's log end, and
 * the epochs did not settle it: the log is cut to the leader's end, or,
 * that being below this log's start, emptied and started there (Kafka's
 * truncateTo below the log start); or it is below the leader's log
 * start, which its retention or DeleteRecords moved while this node was
 * down or behind: the log is emptied and starts at the leader's log start
 * (truncateFullyAndStartAt). Kafka's follower asks the leader
 * ListOffsets for its end and start; Sluice's leader puts both in the
 * answer to a replica: its log start in LogStartOffset, its log end in
 * DivergingEpoch.EndOffset with Epoch -1 (no divergence: Kafka's
 * isDivergingEpoch looks at the epoch only). A leader that does not say
 * its end (-1: from before) gives its high watermark, at or below it: what
 * lies between is fetched again. 1: done, fetch again; 0: neither (or it
 * failed): pause. Waiting, as a cut: once per such fall. */
static int out_of_range(struct shard *sh, struct part *p, const struct rf_answer *a)
{
	struct plog *pl = p->pl;
	int64_t end = pl->next_offset;
	int64_t leader_end = a->div_epoch < 0 && a->div_end >= 0 ? a->div_end : a->hw;

	if (leader_end >= 0 && leader_end < end && leader_end >= pl->log_start) {
		if (part_truncate_to_sync(p, leader_end, pl->log_start) < 0)
			return 0;
	} else if (leader_end >= 0 && leader_end < end) {
		/* the leader ends below this log's start: all of it goes */
		if (part_start_at_sync(p, leader_end) < 0)
			return 0;
	} else if (a->log_start > end) {
		if (part_start_at_sync(p, a->log_start) < 0)
			return 0;
	} else {
		return 0;
	}
	/* the leader's high watermark, as its answers give it (the one
	 * known before may be above this log now) */
	if (a->hw >= 0) {
		p->role->hw = a->hw;
		part_progress(p);
	}
	shard_stat_add(&sh->stats.repl_truncations, 1);
	return 1;
}

/* Take p's answer: an error (asked again after a pause), a diverging
 * epoch (the tail cut, then asked again), or records appended as they are
 * and the leader's high watermark. The bytes appended. */
static int64_t rf_take(struct shard *sh, struct part *p, const struct rf_answer *a)
{
	uint32_t appended = 0;
	int rc;

	if (a->err == KERR_OFFSET_OUT_OF_RANGE && out_of_range(sh, p, a))
		return 0;                    /* fetch again from the new end */
	if (a->err) {
		/* fenced, unknown epoch, not the leader (or out of range
		 * and not settled above): a new role or the leader's
		 * catching up settles it */
		p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
		shard_stat_add(&sh->stats.repl_errors, 1);
		return 0;
	}
	if (a->div_epoch >= 0) {
		if (cut_divergent(p, a->div_epoch, a->div_end) < 0) {
			p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
			shard_stat_add(&sh->stats.repl_errors, 1);   /* a truncation that failed */
			return 0;
		}
		shard_stat_add(&sh->stats.repl_truncations, 1);
		return 0;                    /* fetch again from the cut */
	}
	if (a->len > 0) {
		rc = part_append_replica(p, a->records, a->len, &appended);
		if (p->role->throttled)
			repl_throttle_spend(&sh->repl_throttle, a->len);
		if (rc == -EILSEQ)
			rf_note(sh, p, SHARD_REPL_DROP_NON_CONTIGUOUS);   /* taken as before: asked again */
		if (rc < 0 && rc != -EILSEQ) {
			p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
			shard_stat_add(&sh->stats.repl_errors, 1);
			return appended;
		}
	}
	if (a->hw >= 0 && a->hw > p->role->hw)
		p->role->hw = a->hw;
	part_progress(p);                    /* min(leader's, own durable end) */
	if (a->log_start > p->pl->log_start)
		part_follow_log_start(p, a->log_start);   /* the leader's DeleteRecords or retention */
	return appended;
}

/* The partition an answer's k-th entry is about: the request's k-th when
 * it names that one (the leader answers in request order), else found. */
static struct part *rf_answered(struct shard *sh, int32_t leader, struct part *const *asked, int nasked, int k,
				struct kafka_str topic, int32_t index)
{
	struct part *p = k < nasked ? asked[k] : NULL;

	if (p && p->index == index && follows(p, leader) && (int32_t)strlen(p->topic) == topic.len &&
	    !memcmp(p->topic, topic.ptr, (size_t)topic.len))
		return p;
	return find_part(sh, leader, topic, index);
}

static int64_t rf_apply(struct shard *sh, int32_t leader, const struct kafka_fetch_response *r,
			struct part *const *asked, int nasked)
{
	int64_t total = 0;
	int k = 0;

	for (int32_t i = 0; i < r->Responses.count; i++) {
		const struct kafka_fetch_response_fetchable_topic_response *t = &r->Responses.items[i];

		for (int32_t j = 0; j < t->Partitions.count; j++, k++) {
			const struct kafka_fetch_response_partition_data *d = &t->Partitions.items[j];
			struct part *p = rf_answered(sh, leader, asked, nasked, k, t->Topic, d->PartitionIndex);
			struct rf_answer a = { .err = d->ErrorCode, .div_epoch = d->DivergingEpoch.Epoch,
					       .div_end = d->DivergingEpoch.EndOffset, .hw = d->HighWatermark,
					       .log_start = d->LogStartOffset,
					       .records = d->Records.ptr,
					       .len = d->Records.len > 0 ? (uint32_t)d->Records.len : 0 };

			if (!p) {
				shard_stat_add(&sh->stats.repl_skipped[SHARD_REPL_DROP_NOT_FOLLOWED], 1);
				continue;            /* not followed any more */
			}
			if (p->role->fetch_epoch != p->role->leader_epoch) {
				rf_note(sh, p, SHARD_REPL_DROP_STALE);
				continue;            /* a new epoch since */
			}
			total += rf_take(sh, p, &a);
		}
	}
	shard_stat_add(&sh->stats.repl_bytes_in, (uint64_t)total);
	return total;
}

int64_t replica_fetch_apply(struct shard *sh, int32_t leader, const struct kafka_fetch_response *r)
{
	return rf_apply(sh, leader, r, NULL, 0);
}

/* ---- the connection ---------------------------------------------------- */

static void rf_close(struct replica_fetcher *f)
{
	struct shard *sh = f->sh;

	if (f->fd >= 0 && (f->conn_op.inflight || f->send_op.inflight || f->recv_op.inflight)) {
		/* the ring's operations end with an error first */
		shutdown(f->fd, SHUT_RDWR);
		f->state = RF_CLOSING;
		return;
	}
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->state = RF_IDLE;
	f->reauth = 0;
	f->reauth_ns = 0;
	peer_session_destroy(f->sess);
	f->sess = NULL;
	f->in_len = 0;
	f->backoff_ns = f->backoff_ns ? f->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (f->backoff_ns > BACKOFF_MAX_NS)
		f->backoff_ns = BACKOFF_MAX_NS;
	f->retry_ns = sh->now_ns + f->backoff_ns;
}

static void rf_fail(struct replica_fetcher *f)
{
	shard_stat_add(&f->sh->stats.repl_reconnects, 1);
	rf_close(f);
}

static void rf_arm_recv(struct replica_fetcher *f);
static void rf_arm_send(struct replica_fetcher *f);

/* The TLS or SASL handshake with the leader failed: said on stderr with
 * why (once a minute at most for the same reason), counted; the
 * connection made again after the back-off. */
static void rf_auth_failed(struct replica_fetcher *f)
{
	struct shard *sh = f->sh;
	const char *why = peer_session_error(f->sess);

	shard_stat_add(&sh->stats.repl_auth_failures, 1);
	if (f->reauth)
		shard_stat_add(&sh->stats.repl_reauth[1], 1);
	if (strcmp(why, f->auth_err) || sh->now_ns - f->auth_logged_ns > AUTH_LOG_NS) {
		snprintf(f->auth_err, sizeof(f->auth_err), "%s", why);
		f->auth_logged_ns = sh->now_ns;
		slog(SLOG_WARN, /* style: allow slow path: a failed handshake, once a minute per reason */
			"shard %d: replica fetcher to broker %d at %s:%d: %s%s failed: %s", sh->id,
			f->leader, f->host, f->port, f->sess->tls ? "TLS/SASL" : "SASL",
			f->reauth ? " re-authentication" : " handshake", why);
	}
	rf_fail(f);
}

/* The handshakes: step the session, send what it has, receive when it
 * waits; READY once done and everything sent. */
static void rf_handshake(struct replica_fetcher *f)
{
	const uint8_t *b;
	int rc = peer_session_step(f->sess);

	if (rc < 0) {
		rf_auth_failed(f);
		return;
	}
	if (!f->send_op.inflight && peer_session_tx(f->sess, &b) > 0)
		rf_arm_send(f);
	if (f->state != RF_HANDSHAKE)
		return;
	if (rc == 1 && !f->send_op.inflight && !f->recv_op.inflight) {
		int64_t life = peer_session_lifetime_ms(f->sess);

		f->state = RF_READY;
		f->backoff_ns = 0;
		f->auth_err[0] = 0;
		if (f->reauth)
			shard_stat_add(&f->sh->stats.repl_reauth[0], 1);
		f->reauth = 0;
		f->reauth_ns = 0;
		if (life > 0) {
			/* xorshift32: a point between 85% and 95% of the lifetime */
			f->rng ^= f->rng << 13;
			f->rng ^= f->rng >> 17;
			f->rng ^= f->rng << 5;
			f->reauth_ns = f->auth_start_ns + (uint64_t)life * (850000ull + f->rng % 100001u);
		}
		return;
	}
	if (rc == 0 && !f->recv_op.inflight)
		rf_arm_recv(f);
}

static void rf_op_ended(struct replica_fetcher *f)
{
	if (f->state == RF_CLOSING && !f->conn_op.inflight && !f->send_op.inflight && !f->recv_op.inflight)
		rf_close(f);
}

static void rf_connected(struct io_op *op, int res, unsigned flags)
{
	struct replica_fetcher *f = (struct replica_fetcher *)((char *)op - offsetof(struct replica_fetcher, conn_op));

	(void)flags;
	op->inflight = 0;
	if (f->state == RF_CLOSING) {
		rf_op_ended(f);
		return;
	}
	if (res < 0) {
		rf_fail(f);
		return;
	}
	if (f->sh->b->peer_sec) {
		if (!(f->sess = peer_session_create(f->sh->b->peer_sec, f->host))) {
			rf_fail(f);
			return;
		}
		f->state = RF_HANDSHAKE;
		f->sent_ns = f->auth_start_ns = f->sh->now_ns;
		rf_handshake(f);
		return;
	}
	f->state = RF_READY;
	f->backoff_ns = 0;
}

static void rf_arm_send(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe = shard_sqe(f->sh);
	const uint8_t *b;
	uint32_t n;

	if (!sqe) {
		rf_fail(f);
		return;
	}
	if (f->sess && (f->state == RF_HANDSHAKE || peer_session_tls(f->sess))) {
		n = peer_session_tx(f->sess, &b);   /* ciphertext (or SASL's frames) */
		io_uring_prep_send(sqe, f->fd, b, n, MSG_NOSIGNAL);
	} else {
		io_uring_prep_send(sqe, f->fd, f->out + f->out_sent, f->out_len - f->out_sent, MSG_NOSIGNAL);
	}
	io_set(sqe, &f->send_op);
}

static void rf_sent(struct io_op *op, int res, unsigned flags)
{
	struct replica_fetcher *f = (struct replica_fetcher *)((char *)op - offsetof(struct replica_fetcher, send_op));

	(void)flags;
	op->inflight = 0;
	if (f->state == RF_CLOSING) {
		rf_op_ended(f);
		return;
	}
	if (res <= 0) {
		rf_fail(f);
		return;
	}
	if (f->state == RF_HANDSHAKE) {
		peer_session_sent(f->sess, (uint32_t)res);
		rf_handshake(f);
		return;
	}
	if (peer_session_tls(f->sess)) {
		const uint8_t *b;

		peer_session_sent(f->sess, (uint32_t)res);
		if (peer_session_tx(f->sess, &b) > 0) {
			rf_arm_send(f);
			return;
		}
		res = (int)(f->out_len - f->out_sent);   /* all of the request is out */
	}
	f->out_sent += (uint32_t)res;
	if (f->out_sent < f->out_len) {
		rf_arm_send(f);
		return;
	}
	f->state = RF_WAITING;
	f->in_len = 0;
	rf_arm_recv(f);
}

/* Room in the input buffer for the answer whose size it holds: grown
 * for a larger answer than expected (a batch above the partition's bytes:
 * KIP-74), rare. 0, or -ENOMEM. */
static int rf_in_room(struct replica_fetcher *f)
{
	if (f->in_len >= 4) {
		uint32_t need = 4 + (uint32_t)kafka_load_be(f->in, 4);

		if (need > f->in_cap) {
			uint8_t *nb = need > (1u << 30) ? NULL : realloc(f->in, need); /* style: allow rare large answer */

			if (!nb)
				return -ENOMEM;
			f->in = nb;
			f->in_cap = need;
		}
	}
	return 0;
}

static void rf_arm_recv(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe;

	if (rf_in_room(f) < 0 || !(sqe = shard_sqe(f->sh))) {
		rf_fail(f);
		return;
	}
	if (f->sess && (f->state == RF_HANDSHAKE || peer_session_tls(f->sess))) {
		uint32_t cap;
		uint8_t *b = peer_session_rx(f->sess, &cap);   /* ciphertext (or SASL's answers) */

		io_uring_prep_recv(sqe, f->fd, b, cap, 0);
	} else {
		io_uring_prep_recv(sqe, f->fd, f->in + f->in_len, f->in_cap - f->in_len, 0);
	}
	io_set(sqe, &f->recv_op);
}

static void rf_answer(struct replica_fetcher *f, uint32_t len)
{
	struct kafka_response resp;
	struct kafka_arena a;
	size_t need = kafka_arena_bound(len);
	int rc;

	if (need > f->arena_cap) {
		uint8_t *na = realloc(f->arena, need); /* style: allow rare large answer */

		if (!na) {
			rf_fail(f);
			return;
		}
		f->arena = na;
		f->arena_cap = need;
	}
	kafka_arena_init(&a, f->arena, f->arena_cap);
	rc = kafka_response_decode(f->in + 4, len, KAFKA_FETCH_KEY, REPLICA_FETCH_VERSION, &a, &resp);
	if (rc < 0 || resp.header.CorrelationId != f->corr) {
		rf_fail(f);
		return;
	}
	if (rf_apply(f->sh, f->leader, resp.body, f->asked, f->nasked) < 0)
		shard_stat_add(&f->sh->stats.repl_errors, 1);
	f->nasked = 0;
	f->in_len = 0;
	f->state = RF_READY;   /* the next once what was appended is durable */
}

static void rf_received(struct io_op *op, int res, unsigned flags)
{
	struct replica_fetcher *f = (struct replica_fetcher *)((char *)op - offsetof(struct replica_fetcher, recv_op));

	(void)flags;
	op->inflight = 0;
	if (f->state == RF_CLOSING) {
		rf_op_ended(f);
		return;
	}
	if (res <= 0) {
		rf_fail(f);
		return;
	}
	if (f->state == RF_HANDSHAKE) {
		if (peer_session_feed(f->sess, (uint32_t)res) < 0) {
			rf_auth_failed(f);
			return;
		}
		rf_handshake(f);
		return;
	}
	if (peer_session_tls(f->sess)) {
		/* the answer decrypted out of OpenSSL's record layer */
		int n;

		if (peer_session_feed(f->sess, (uint32_t)res) < 0) {
			rf_fail(f);
			return;
		}
		res = 0;
		while (rf_in_room(f) == 0 && f->in_cap > f->in_len &&
		       (n = peer_session_read(f->sess, f->in + f->in_len, f->in_cap - f->in_len)) > 0) {
			f->in_len += (uint32_t)n;
			shard_stat_add(&f->sh->stats.repl_tls_bytes_in, (uint64_t)n);
			if (f->in_len >= 4 && f->in_len >= 4 + (uint32_t)kafka_load_be(f->in, 4))
				break;
		}
		if (f->sess->state == PEER_SESSION_FAILED) {
			rf_auth_failed(f);
			return;
		}
	}
	f->in_len += (uint32_t)res;
	if (f->in_len >= 4 && f->in_len >= 4 + (uint32_t)kafka_load_be(f->in, 4)) {
		rf_answer(f, (uint32_t)kafka_load_be(f->in, 4));
		return;
	}
	rf_arm_recv(f);
}

/* A numeric IPv4 or IPv6 address (the control thread resolved a name),
 * or "localhost" (no name lookups on a shard: they block). */
static int rf_address(struct replica_fetcher *f)
{
	const char *h = !strcmp(f->host, "localhost") || !f->host[0] ? "127.0.0.1" : f->host;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&f->addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&f->addr;

	memset(&f->addr, 0, sizeof(f->addr));
	if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)f->port);
		f->addr_len = sizeof(*a4);
		return 0;
	}
	memset(&f->addr, 0, sizeof(f->addr));
	if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)f->port);
		f->addr_len = sizeof(*a6);
		return 0;
	}
	return -EINVAL;
}

static void rf_connect(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe;
	int one = 1;

	if (rf_address(f) < 0) {
		f->retry_ns = f->sh->now_ns + BACKOFF_MAX_NS;
		return;
	}
	f->fd = socket(f->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || !(sqe = shard_sqe(f->sh))) {
		rf_fail(f);
		return;
	}
	(void)setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	io_uring_prep_connect(sqe, f->fd, (struct sockaddr *)&f->addr, f->addr_len);
	io_set(sqe, &f->conn_op);
	f->state = RF_CONNECTING;
}

static int rf_send_fetch(struct replica_fetcher *f)
{
	struct kafka_writer w;
	int n;

	/* all at once: a partition whose append is not durable yet would
	 * otherwise wait out the leader's long-poll for the others; one that
	 * cannot become durable (settling) is left out, not waited for */
	for (int i = 0; i < f->nfp; i++) {
		struct part *p = f->fp[i];

		if (follows(p, f->leader) && settling(p, f->sh->now_ns))
			return 0;
	}
	kafka_writer_init_measure(&w, false);
	n = rf_build(f->sh, f->leader, f->fp, f->nfp, f->fp_next, f->corr + 1, &w, NULL, NULL);
	if (n <= 0)
		return 0;
	if (w.len > f->out_cap) {
		uint8_t *nb = realloc(f->out, w.len); /* style: allow rare large request */

		if (!nb)
			return 0;
		f->out = nb;
		f->out_cap = (uint32_t)w.len;
	}
	f->corr++;
	kafka_writer_init(&w, f->out, f->out_cap);
	if ((n = rf_build(f->sh, f->leader, f->fp, f->nfp, f->fp_next, f->corr, &w, f->asked, &f->fp_next)) <= 0)
		return 0;
	f->nasked = n;
	f->out_len = (uint32_t)w.len;
	f->out_sent = 0;
	f->state = RF_SENDING;
	f->sent_ns = f->sh->now_ns;
	if (peer_session_tls(f->sess)) {
		/* into OpenSSL's record layer: the ciphertext is what goes */
		if (peer_session_write(f->sess, f->out, f->out_len) < 0) {
			rf_auth_failed(f);
			return 1;
		}
		shard_stat_add(&f->sh->stats.repl_tls_bytes_out, f->out_len);
	}
	rf_arm_send(f);
	return 1;
}

/* KIP-368: the session ends soon: SaslHandshake and SaslAuthenticate
 * again on this connection, between two fetches (READY: nothing in
 * flight), the fetches held until it is done. */
static void rf_reauth(struct replica_fetcher *f)
{
	if (peer_session_reauth(f->sess) < 0) {
		f->reauth_ns = 0;
		return;
	}
	f->reauth = 1;
	f->reauth_ns = 0;
	f->state = RF_HANDSHAKE;
	f->sent_ns = f->auth_start_ns = f->sh->now_ns;
	rf_handshake(f);
}

/* ---- the TCP transport: Kafka's Fetch on a connection of its own ----------- */

static int tcp_poll(struct replica_fetcher *f)
{
	struct shard *sh = f->sh;

	if (f->state == RF_IDLE && !sh->stop && sh->now_ns >= f->retry_ns) {
		rf_connect(f);
		return 1;
	}
	if (f->state == RF_READY && f->reauth_ns && sh->now_ns >= f->reauth_ns && !sh->stop) {
		rf_reauth(f);
		return 1;
	}
	if (f->state == RF_READY && !sh->stop)
		return rf_send_fetch(f);
	if ((f->state == RF_SENDING || f->state == RF_WAITING || f->state == RF_HANDSHAKE) &&
	    sh->now_ns - f->sent_ns > SOCKET_TIMEOUT_NS + REPLICA_FETCH_WAIT_MS * 1000000ull)
		rf_fail(f);   /* a leader gone without a word: connect again */
	return 0;
}

static int tcp_release(struct replica_fetcher *f)
{
	if (f->state != RF_IDLE && f->state != RF_READY && f->state != RF_HANDSHAKE)
		return 0;     /* a fetch in flight: its answer first */
	if (f->state == RF_READY || f->state == RF_HANDSHAKE)
		rf_close(f);  /* a handshake's operations end with an error first */
	return f->state == RF_IDLE;
}

static const struct rf_transport tcp_transport = { "tcp", tcp_poll, tcp_release };

/* ---- the native transport: REPLICA_FETCH on the DPDK replication pair ------- */

static struct rf_nslot *nslot_of(struct replica_fetcher *f, const struct part *p)
{
	for (int i = 0; i < NSLOTS; i++)
		if (f->nslot[i].used && f->nslot[i].p == p)
			return &f->nslot[i];
	return NULL;
}

/* Ask every partition that is ready and has no fetch in flight (each on
 * its own: one partition's held fetch never delays another's). */
static int native_poll(struct replica_fetcher *f)
{
	struct shard *sh = f->sh;
	uint16_t max_dg = native_repl_max_datagram(sh);
	int work = 0;
	int64_t avail;

	for (int i = 0; i < NSLOTS; i++)
		if (f->nslot[i].used &&
		    sh->now_ns - f->nslot[i].sent_ns > REPLICA_FETCH_WAIT_MS * 1000000ull + NATIVE_LOSS_NS) {
			f->nslot[i].used = 0;   /* a datagram lost either way: asked again */
			shard_stat_add(&sh->stats.repl_reconnects, 1);
		}
	if (sh->stop || !max_dg)
		return 0;
	avail = rf_throttle_avail(sh);
	/* from where the last round stopped (fp_next), as a TCP request: the
	 * slots go round the partitions, not to the list's head each time */
	for (int j = 0, start = f->fp_next < f->nfp ? f->fp_next : 0; j < f->nfp; j++) {
		int k = (start + j) % f->nfp;
		struct part *p = f->fp[k];
		struct rf_nslot *s = NULL;
		struct rf_ask a;
		struct native_replica_fetch q;

		if (!follows(p, f->leader) || nslot_of(f, p))
			continue;
		if (!ready(p, sh->now_ns)) {
			rf_not_ready(sh, p);
			continue;
		}
		if (p->role->throttled && avail <= 0) {
			rf_left_out(sh, p, SHARD_REPL_SKIP_THROTTLED);
			continue;                /* its budget spent: asked once it fills */
		}
		for (int i = 0; i < NSLOTS && !s; i++)
			if (!f->nslot[i].used)
				s = &f->nslot[i];
		if (!s)
			break;                   /* the rest once answers come */
		rf_ask_of(p, &a);
		q = (struct native_replica_fetch){ .replica_id = p->role->self, .partition = p->index,
						   .leader_epoch = a.leader_epoch, .last_epoch = a.last_epoch,
						   .offset = a.offset, .log_start = a.log_start,
						   .max_bytes = NATIVE_PART_BYTES, .max_wait_ms = REPLICA_FETCH_WAIT_MS,
						   .max_datagram = max_dg };
		f->corr = (f->corr + 1) & 0xffffff;
		s->used = 1;
		s->p = p;
		s->request = (uint32_t)sh->id << 24 | (uint32_t)f->corr;
		s->offset = a.offset;
		s->sent_ns = sh->now_ns;
		s->got = s->count = 0;
		f->fp_next = (k + 1) % f->nfp;
		/* a frame the ring could not take is a lost datagram: the slot
		 * times out and the partition is asked again */
		(void)native_repl_send(sh, f->repl_ip, f->repl_port, s->request, p->topic, strlen(p->topic), &q);
		work++;
	}
	return work;
}

static int native_release(struct replica_fetcher *f)
{
	for (int i = 0; i < NSLOTS; i++)
		f->nslot[i].used = 0;    /* answers still on the way are strays */
	if (f->fd >= 0 && f->state == RF_READY)
		rf_close(f);             /* a TCP connection from before */
	return f->fd < 0;
}

static const struct rf_transport native_transport = { "native", native_poll, native_release };

/* One REPLICA_DATA for this shard (native_repl's receiver): into its
 * slot; the whole answer taken as the TCP path takes a partition's. */
static void native_data(void *arg, const struct native_msg *m)
{
	struct shard *sh = arg;
	struct replica_fetcher *f;
	struct rf_nslot *s = NULL;
	struct part *p;
	struct rf_answer a;
	int64_t n;

	for (f = sh->fetchers; f && !s; f = s ? f : f->next)
		for (int i = 0; i < NSLOTS && !s; i++)
			if (f->tr == &native_transport && f->nslot[i].used && f->nslot[i].request == m->request)
				s = &f->nslot[i];
	if (!s || m->offset != s->offset)
		return;                          /* an answer nobody waits for now */
	if (!s->got) {
		s->total = m->total_len;
		s->count = m->frag_count ? m->frag_count : 1;
		s->err = m->error;
		s->div_epoch = m->last_epoch;
		s->div_end = m->div_end;
		s->hw = m->high_watermark;
		s->ls = m->log_start;
		memset(s->bits, 0, sizeof(s->bits));
		if (s->total > NSLOT_CAP) {
			/* one batch above what a slot holds (KIP-74's large first
			 * batch): not over this transport; counted, asked again */
			s->used = 0;
			shard_stat_add(&sh->stats.repl_errors, 1);
			return;
		}
	} else if (m->total_len != s->total || (m->frag_count ? m->frag_count : 1) != s->count) {
		return;                          /* not this answer's */
	}
	if (s->bits[m->frag_index / 64] & (1ull << (m->frag_index % 64)))
		return;                          /* a duplicate */
	s->bits[m->frag_index / 64] |= 1ull << (m->frag_index % 64);
	if (m->data_len)
		memcpy(s->buf + m->frag_offset, m->data, m->data_len);
	if (++s->got < s->count)
		return;
	s->used = 0;
	p = find_part(sh, f->leader, (struct kafka_str){ m->topic, m->topic_len }, m->partition);
	if (!p || p != s->p) {
		shard_stat_add(&sh->stats.repl_skipped[SHARD_REPL_DROP_NOT_FOLLOWED], 1);
		return;                          /* not followed any more */
	}
	if (p->role->fetch_epoch != p->role->leader_epoch || m->leader_epoch != p->role->leader_epoch ||
	    p->pl->next_offset != s->offset) {
		rf_note(sh, p, SHARD_REPL_DROP_STALE);
		return;                          /* a new epoch, or moved on */
	}
	a = (struct rf_answer){ .err = s->err, .div_epoch = s->div_epoch, .div_end = s->div_end, .hw = s->hw,
				.log_start = s->ls, .records = s->buf, .len = s->total };
	n = rf_take(sh, p, &a);
	shard_stat_add(&sh->stats.repl_bytes_in, (uint64_t)n);
	shard_stat_add(&sh->stats.repl_native_bytes_in, (uint64_t)n);
}

/* ---- the shard's fetchers ---------------------------------------------- */

static struct replica_fetcher *rf_find(struct shard *sh, int32_t leader)
{
	for (struct replica_fetcher *f = sh->fetchers; f; f = f->next)
		if (f->leader == leader)
			return f;
	return NULL;
}

static void rf_free(struct replica_fetcher *f)
{
	free(f->fp);
	free(f->out);
	free(f->in);
	free(f->arena);
	free(f);
}

/* The leader's transport: native where this shard has a DPDK replication
 * pair and the leader registered a native replication address, else TCP. */
static const struct rf_transport *rf_transport_for(struct shard *sh, const struct part_role *r)
{
	return native_repl_max_datagram(sh) && r->leader_repl_port > 0 ? &native_transport : &tcp_transport;
}

/* p follows f's leader: into f's list (grown on a role change, rare). */
static int rf_fp_add(struct replica_fetcher *f, struct part *p)
{
	if (f->nfp == f->fp_cap) {
		int cap = f->fp_cap ? f->fp_cap * 2 : 16;
		struct part **n = realloc(f->fp, (size_t)cap * sizeof(*n)); /* style: allow role change */

		if (!n)
			return -ENOMEM;
		f->fp = n;
		f->fp_cap = cap;
	}
	f->fp[f->nfp++] = p;
	return 0;
}

/* Fetchers for every leader a partition follows; its address as the
 * role says (a new address closes the connection); each fetcher's list
 * of the partitions that follow its leader made again. */
static void rf_discover(struct shard *sh)
{
	for (struct replica_fetcher *f = sh->fetchers; f; f = f->next) {
		f->nfp = 0;
		f->nasked = 0;       /* a partition asked may be gone: found by name */
	}
	for (struct part *p = sh->parts; p; p = p->next) {
		const struct part_role *r = p->role;
		const struct rf_transport *tr;
		struct replica_fetcher *f;

		if (!r || r->leading || r->leader < 0)
			continue;
		if (r->leader_port <= 0) {
			/* no address (yet): asked on a connection already made */
			if ((f = rf_find(sh, r->leader)) && follows(p, f->leader) && rf_fp_add(f, p) < 0)
				sh->roles_changed = 1;
			continue;
		}
		tr = rf_transport_for(sh, r);
		if (!(f = rf_find(sh, r->leader))) {
			f = calloc(1, sizeof(*f)); /* style: allow a new leader followed */
			if (!f) {
				sh->roles_changed = 1;   /* tried again next turn */
				return;
			}
			f->sh = sh;
			f->leader = r->leader;
			f->tr = tr;
			f->fd = -1;
			f->rng = (uint32_t)(sh->now_ns ^ (sh->now_ns >> 32) ^ (uint64_t)(uintptr_t)f) | 1u;
			f->conn_op.done = rf_connected;
			f->send_op.done = rf_sent;
			f->recv_op.done = rf_received;
			f->in_cap = IN_CAP;
			f->in = malloc(f->in_cap); /* style: allow a new leader followed */
			if (!f->in) {
				free(f);
				sh->roles_changed = 1;
				return;
			}
			for (int i = 0; i < NSLOTS; i++)
				f->nslot[i].buf = f->in + (size_t)i * NSLOT_CAP;
			f->next = sh->fetchers;
			sh->fetchers = f;
			if (tr == &native_transport)
				native_repl_set_receiver(sh, native_data, sh);
		}
		if (strcmp(f->host, r->leader_host) || f->port != r->leader_port || f->tr != tr ||
		    f->repl_ip != r->leader_repl_ip || f->repl_port != (uint16_t)r->leader_repl_port) {
			snprintf(f->host, sizeof(f->host), "%s", r->leader_host);
			f->port = r->leader_port;
			f->repl_ip = r->leader_repl_ip;
			f->repl_port = (uint16_t)r->leader_repl_port;
			(void)f->tr->release(f);
			if (f->fd >= 0)
				rf_close(f);
			f->tr = tr;
			if (tr == &native_transport)
				native_repl_set_receiver(sh, native_data, sh);
			f->retry_ns = 0;
		}
		if (follows(p, f->leader) && rf_fp_add(f, p) < 0)
			sh->roles_changed = 1;   /* no memory: made again next turn */
	}
}

static int rf_followed(const struct replica_fetcher *f)
{
	for (int i = 0; i < f->nfp; i++)
		if (follows(f->fp[i], f->leader))
			return 1;
	return 0;
}

int replica_fetchers_poll(struct shard *sh)
{
	int work = 0;

	if (sh->roles_changed) {
		sh->roles_changed = 0;
		rf_discover(sh);
	}
	for (struct replica_fetcher **pp = &sh->fetchers, *f; (f = *pp);) {
		if (!rf_followed(f) && f->tr->release(f)) {
			*pp = f->next;   /* nobody follows it any more */
			rf_free(f);
			continue;
		}
		work += f->tr->poll(f);
		pp = &f->next;
	}
	return work;
}

void replica_fetchers_fini(struct shard *sh)
{
	native_repl_set_receiver(sh, NULL, NULL);
	while (sh->fetchers) {
		struct replica_fetcher *f = sh->fetchers;

		sh->fetchers = f->next;
		if (f->fd >= 0)
			close(f->fd);
		peer_session_destroy(f->sess);
		rf_free(f);
	}
}
