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
#include "dataplane/part.h"
#include "dataplane/part_replica.h"
#include "dataplane/part_role.h"
#include "dataplane/replica_fetcher.h"
#include "dataplane/shard_core.h"
#include "storage/batch_format.h"
#include "storage/plog_epochs.h"

#define BACKOFF_MIN_NS 100000000ull       /* 100 ms */
#define BACKOFF_MAX_NS 1000000000ull      /* replica.fetch.backoff.ms */
#define PART_RETRY_NS 500000000ull        /* a partition the leader refused: asked again after */
#define IN_CAP (REPLICA_FETCH_MAX_BYTES + (1u << 20))
#define SOCKET_TIMEOUT_NS 30000000000ull   /* replica.socket.timeout.ms: no answer, a new connection */

enum { RF_IDLE, RF_CONNECTING, RF_READY, RF_SENDING, RF_WAITING, RF_CLOSING };

struct replica_fetcher {
	struct shard *sh;
	int32_t leader;
	char host[256];
	int32_t port;
	int fd;
	int state;
	struct io_op conn_op, send_op, recv_op;
	struct sockaddr_in addr;
	uint8_t *out;
	uint32_t out_len, out_sent, out_cap;
	uint8_t *in;
	uint32_t in_len, in_cap;
	uint8_t *arena;
	size_t arena_cap;
	int32_t corr;
	uint64_t retry_ns, backoff_ns;
	uint64_t sent_ns;            /* the request in flight was sent (shard clock) */
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

int replica_fetch_build(struct shard *sh, int32_t leader, int32_t corr, struct kafka_writer *w)
{
	struct kafka_fetch_request q;
	struct kafka_fetch_request_fetch_topic topics[64];
	struct kafka_fetch_request_fetch_partition parts[64];
	struct kafka_request req;
	int n = 0;
	int32_t self = -1;
	/* the node's throttle, each shard its share; read once a request */
	int64_t rate = __atomic_load_n(&sh->b->repl_throttle_bps, __ATOMIC_RELAXED), avail;

	if (rate > 0 && rate != REPL_THROTTLE_NONE)
		rate = rate / sh->b->set.nshards > 0 ? rate / sh->b->set.nshards : 1;
	avail = repl_throttle_avail(&sh->repl_throttle, rate, sh->now_ns);

	/* one topic entry per partition (the request allows repeats); at
	 * most 64 partitions a request, the rest on the next */
	for (struct part *p = sh->parts; p && n < 64; p = p->next) {
		struct plog *pl;

		if (!follows(p, leader) || !ready(p, sh->now_ns))
			continue;
		if (p->role->throttled && avail <= 0)
			continue;                /* its budget spent: asked once it fills */
		pl = p->pl;
		self = p->role->self;
		p->role->fetch_epoch = p->role->leader_epoch;
		parts[n] = (struct kafka_fetch_request_fetch_partition){
			.Partition = p->index,
			.CurrentLeaderEpoch = p->role->leader_epoch,
			.FetchOffset = pl->next_offset,
			.LastFetchedEpoch = pl->next_offset > pl->log_start ? plog_epoch_for_offset(pl, pl->next_offset - 1)
									    : -1,
			.LogStartOffset = pl->log_start,
			.PartitionMaxBytes = p->role->throttled && avail < REPLICA_FETCH_PART_BYTES
				? (int32_t)avail : (int32_t)REPLICA_FETCH_PART_BYTES,
		};
		topics[n].Topic = (struct kafka_str){ p->topic, (int32_t)strlen(p->topic) };
		topics[n].Partitions.items = &parts[n];
		topics[n].Partitions.count = 1;
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

int64_t replica_fetch_apply(struct shard *sh, int32_t leader, const struct kafka_fetch_response *r)
{
	int64_t total = 0;

	for (int32_t i = 0; i < r->Responses.count; i++) {
		const struct kafka_fetch_response_fetchable_topic_response *t = &r->Responses.items[i];

		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_fetch_response_partition_data *d = &t->Partitions.items[j];
			struct part *p = find_part(sh, leader, t->Topic, d->PartitionIndex);
			uint32_t appended = 0;
			int rc;

			if (!p || p->role->fetch_epoch != p->role->leader_epoch)
				continue;            /* not followed any more, or a new epoch since */
			if (d->ErrorCode) {
				/* fenced, unknown epoch, not the leader, out of range:
				 * a new role or the leader's catching up settles it */
				p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
				shard_stat_add(&sh->stats.repl_errors, 1);
				continue;
			}
			if (d->DivergingEpoch.Epoch >= 0) {
				if ((rc = cut_divergent(p, d->DivergingEpoch.Epoch, d->DivergingEpoch.EndOffset)) < 0) {
					p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
					continue;
				}
				shard_stat_add(&sh->stats.repl_truncations, 1);
				continue;            /* fetch again from the cut */
			}
			if (d->Records.len > 0) {
				rc = part_append_replica(p, d->Records.ptr, (uint32_t)d->Records.len, &appended);
				total += appended;
				if (p->role->throttled)
					repl_throttle_spend(&sh->repl_throttle, d->Records.len);
				if (rc < 0 && rc != -EILSEQ) {
					p->role->retry_ns = sh->now_ns + PART_RETRY_NS;
					shard_stat_add(&sh->stats.repl_errors, 1);
					continue;
				}
			}
			if (d->HighWatermark >= 0 && d->HighWatermark > p->role->hw)
				p->role->hw = d->HighWatermark;
			part_progress(p);         /* min(leader's, own durable end) */
		}
	}
	shard_stat_add(&sh->stats.repl_bytes_in, (uint64_t)total);
	return total;
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
	f->state = RF_READY;
	f->backoff_ns = 0;
}

static void rf_arm_send(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe = shard_sqe(f->sh);

	if (!sqe) {
		rf_fail(f);
		return;
	}
	io_uring_prep_send(sqe, f->fd, f->out + f->out_sent, f->out_len - f->out_sent, MSG_NOSIGNAL);
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
	f->out_sent += (uint32_t)res;
	if (f->out_sent < f->out_len) {
		rf_arm_send(f);
		return;
	}
	f->state = RF_WAITING;
	f->in_len = 0;
	rf_arm_recv(f);
}

static void rf_arm_recv(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe;

	if (f->in_len >= 4) {
		uint32_t need = 4 + (uint32_t)kafka_load_be(f->in, 4);

		if (need > f->in_cap) {
			/* a larger answer than expected (a batch above the
			 * partition's bytes: KIP-74): grow, rare */
			uint8_t *nb = realloc(f->in, need); /* style: allow rare large answer */

			if (!nb || need > (1u << 30)) {
				rf_fail(f);
				return;
			}
			f->in = nb;
			f->in_cap = need;
		}
	}
	if (!(sqe = shard_sqe(f->sh))) {
		rf_fail(f);
		return;
	}
	io_uring_prep_recv(sqe, f->fd, f->in + f->in_len, f->in_cap - f->in_len, 0);
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
	if (replica_fetch_apply(f->sh, f->leader, resp.body) < 0)
		shard_stat_add(&f->sh->stats.repl_errors, 1);
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
	f->in_len += (uint32_t)res;
	if (f->in_len >= 4 && f->in_len >= 4 + (uint32_t)kafka_load_be(f->in, 4)) {
		rf_answer(f, (uint32_t)kafka_load_be(f->in, 4));
		return;
	}
	rf_arm_recv(f);
}

/* Dotted IPv4, or "localhost" (no name lookups on a shard: they block). */
static int rf_address(struct replica_fetcher *f)
{
	const char *h = !strcmp(f->host, "localhost") || !f->host[0] ? "127.0.0.1" : f->host;

	memset(&f->addr, 0, sizeof(f->addr));
	f->addr.sin_family = AF_INET;
	f->addr.sin_port = htons((uint16_t)f->port);
	return inet_pton(AF_INET, h, &f->addr.sin_addr) == 1 ? 0 : -EINVAL;
}

static void rf_connect(struct replica_fetcher *f)
{
	struct io_uring_sqe *sqe;
	int one = 1;

	if (rf_address(f) < 0) {
		f->retry_ns = f->sh->now_ns + BACKOFF_MAX_NS;
		return;
	}
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || !(sqe = shard_sqe(f->sh))) {
		rf_fail(f);
		return;
	}
	(void)setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	io_uring_prep_connect(sqe, f->fd, (struct sockaddr *)&f->addr, sizeof(f->addr));
	io_set(sqe, &f->conn_op);
	f->state = RF_CONNECTING;
}

static int rf_send_fetch(struct replica_fetcher *f)
{
	struct kafka_writer w;
	int n;

	/* all at once: a partition whose append is not durable yet would
	 * otherwise wait out the leader's long-poll for the others */
	for (struct part *p = f->sh->parts; p; p = p->next)
		if (follows(p, f->leader) && f->sh->now_ns >= p->role->retry_ns && !ready(p, f->sh->now_ns))
			return 0;
	kafka_writer_init_measure(&w, false);
	n = replica_fetch_build(f->sh, f->leader, f->corr + 1, &w);
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
	if (replica_fetch_build(f->sh, f->leader, f->corr, &w) <= 0)
		return 0;
	f->out_len = (uint32_t)w.len;
	f->out_sent = 0;
	f->state = RF_SENDING;
	f->sent_ns = f->sh->now_ns;
	rf_arm_send(f);
	return 1;
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
	free(f->out);
	free(f->in);
	free(f->arena);
	free(f);
}

/* Fetchers for every leader a partition follows; its address as the
 * role says (a new address closes the connection). */
static void rf_discover(struct shard *sh)
{
	for (struct part *p = sh->parts; p; p = p->next) {
		const struct part_role *r = p->role;
		struct replica_fetcher *f;

		if (!r || r->leading || r->leader < 0 || r->leader_port <= 0)
			continue;
		if (!(f = rf_find(sh, r->leader))) {
			f = calloc(1, sizeof(*f)); /* style: allow a new leader followed */
			if (!f)
				return;
			f->sh = sh;
			f->leader = r->leader;
			f->fd = -1;
			f->conn_op.done = rf_connected;
			f->send_op.done = rf_sent;
			f->recv_op.done = rf_received;
			f->in_cap = IN_CAP;
			f->in = malloc(f->in_cap); /* style: allow a new leader followed */
			if (!f->in) {
				free(f);
				return;
			}
			f->next = sh->fetchers;
			sh->fetchers = f;
		}
		if (strcmp(f->host, r->leader_host) || f->port != r->leader_port) {
			snprintf(f->host, sizeof(f->host), "%s", r->leader_host);
			f->port = r->leader_port;
			if (f->fd >= 0)
				rf_close(f);
			f->retry_ns = 0;
		}
	}
}

static int rf_followed(struct shard *sh, int32_t leader)
{
	for (struct part *p = sh->parts; p; p = p->next)
		if (follows(p, leader))
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
		if ((f->state == RF_IDLE || f->state == RF_READY) && !rf_followed(sh, f->leader)) {
			if (f->state == RF_READY)
				rf_close(f);
			if (f->state == RF_IDLE) {
				*pp = f->next;   /* nobody follows it any more */
				rf_free(f);
				continue;
			}
		}
		if (f->state == RF_IDLE && !sh->stop && sh->now_ns >= f->retry_ns) {
			rf_connect(f);
			work++;
		} else if (f->state == RF_READY && !sh->stop) {
			work += rf_send_fetch(f);
		} else if ((f->state == RF_SENDING || f->state == RF_WAITING) &&
			   sh->now_ns - f->sent_ns > SOCKET_TIMEOUT_NS + REPLICA_FETCH_WAIT_MS * 1000000ull) {
			rf_fail(f);   /* a leader gone without a word: connect again */
		}
		pp = &f->next;
	}
	return work;
}

void replica_fetchers_fini(struct shard *sh)
{
	while (sh->fetchers) {
		struct replica_fetcher *f = sh->fetchers;

		sh->fetchers = f->next;
		if (f->fd >= 0)
			close(f->fd);
		rf_free(f);
	}
}
