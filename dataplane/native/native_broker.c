/* dataplane/native/native_broker.c — the native datagram protocol on the
 * shards (see native_broker.h): kernel UDP transport, sessions, fragment
 * reassembly, PRODUCE through the partitions' idempotent producer state,
 * FETCH served by the owner shard. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_lcore.h>

#include "dataplane/coord.h"
#include "dataplane/dpdk_port.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_broker.h"
#include "dataplane/native/native_repl.h"
#include "dataplane/netstack.h"
#include "dataplane/part.h"
#include "dataplane/producer.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/slog.h"

#define RX_BATCH 32                   /* datagrams per recvmmsg */
#define DG_BUF 9216                   /* one datagram buffer (>= NATIVE_MAX_DATAGRAM) */
#define DG_POOL 2048                  /* datagram buffers per shard (18 MiB) */
#define SESSIONS 4096                 /* per shard */
#define PENDING 4096                  /* produces in flight per shard */
#define REASM_SLOTS 256               /* fragmented batches being put together per shard */
#define RCLASSES 9                    /* reassembly buffer sizes: 64 KiB << 0..8 (up to 16 MiB) */
#define RCLASS_FREE 1024              /* free buffers kept per size */
#define FETCH_SLOTS 64                /* fetches in flight per owner shard */
#define SOCK_BUF (8 << 20)
#define DPDK_BURST 32                 /* frames per rte_eth_rx_burst */

/* Where a client is, and through which transport its datagrams came. */
struct npeer {
	uint32_t ip;                  /* network order */
	uint16_t port;                /* host order */
	uint8_t dpdk;                 /* 1: the DPDK port; 0: the kernel's UDP socket */
	uint8_t q;                    /* DPDK: the queue pair it answers by (1: replication) */
};

struct nsession {
	uint32_t id;                  /* 0: free */
	struct npeer peer;
	int64_t pid;                  /* -1 until the control thread gave one */
	uint32_t credits, in_flight;
	uint16_t max_dg;
	uint32_t hello_request;
	uint64_t last_ns;
	char name[64];
};

struct nbuf {                         /* a datagram or reassembly buffer */
	uint8_t *p;
	uint32_t cap;
	int cls;                      /* reassembly size class; -1: a datagram buffer */
};

struct npending {                     /* a PRODUCE handed to the partition's owner */
	struct native_shard *ns;
	uint32_t session, request;
	int32_t partition;
	int64_t pid;
	int32_t seq;
	uint32_t len;
	int8_t acks;
	uint8_t topic_len;
	char topic[NATIVE_MAX_TOPIC];
	struct nbuf buf;
	struct npending *next_free;
};

struct nreasm {
	int used;
	uint32_t session;
	int32_t partition;
	int64_t pid;
	int16_t epoch;
	int32_t seq;
	uint8_t topic_len;
	char topic[NATIVE_MAX_TOPIC];
	uint32_t total, frag_size, last_offset;
	uint16_t count, got;
	int8_t acks;
	uint32_t request;
	uint64_t started_ns;
	uint64_t bits[NATIVE_MAX_FRAGMENTS / 64];
	struct nbuf buf;
};

struct nfetch {                       /* a FETCH being read on its owner shard */
	int used;
	struct native_shard *ns;
	struct part *part;
	struct npeer peer;
	uint32_t session, request;
	uint16_t max_dg;
	int isolation;
	int64_t offset;
	struct part_read_req rq;          /* the read (part_read); its data: rq.rd */
	/* the answer, fixed by the owner before any shard sends it */
	int16_t err;
	int64_t hw, ls, lso;
};

struct native_shard {
	struct shard *sh;
	int fd;
	uint32_t reasm_cap;           /* largest batch reassembled */
	uint64_t reasm_bytes, reasm_limit;   /* reassembly memory in use and its cap */
	uint32_t credits_max;
	uint64_t session_timeout_ns, reasm_timeout_ns;
	uint32_t next_gen;
	struct nsession *sessions;
	struct npending *pending, *pending_free;
	struct nreasm reasm[REASM_SLOTS];
	uint8_t **rfree[RCLASSES];    /* free reassembly buffers per size class */
	int nrfree[RCLASSES];
	uint8_t *dg_mem;
	uint8_t **dg_free;            /* free datagram buffers */
	int ndg_free;
	struct nfetch fetch[FETCH_SLOTS];
	uint8_t tx[DG_BUF];           /* the datagram being sent */
	/* recvmmsg batch */
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_in addr[RX_BATCH];
	uint8_t *rx[RX_BATCH];
	struct native_stats st;
	/* DPDK (dpdk.enable): the shard's client queue pair, and its
	 * replication pair where the port may put client flows there too
	 * (net_tap, whose kernel picks the queue: until replication uses the
	 * pair, such a flow is still served), one stack each */
	int dpdk;
	int client_on_repl;           /* client flows may arrive on the replication pair (net_tap) */
	struct native_repl *repl;     /* replication over the replication pair (native_repl.h) */
	struct dpdk_queue dq[2];
	struct netstack *net[2];
	uint16_t dpdk_udp_port;
	uint8_t *drx;                 /* the datagram buffer DPDK payloads are copied into */
	struct native_arp_cb {
		struct native_shard *ns;
		int q;
	} arp_cb[2];
};

static int dpdk_describe(const struct native_shard *ns, char *buf, size_t len);

/* ---- buffers --------------------------------------------------------------------- */

static uint8_t *dg_get(struct native_shard *ns)
{
	return ns->ndg_free ? ns->dg_free[--ns->ndg_free] : NULL;
}

/* A reassembly buffer for a batch of len bytes: the smallest size class
 * that holds it, from its free list, else grown while the shard's
 * reassembly memory (native.reassembly.memory.bytes) allows. Growth is
 * amortized: buffers go back to their free list, not to malloc. */
static int rbuf_get(struct native_shard *ns, uint32_t len, struct nbuf *b)
{
	int c = 0;
	size_t size = 64u << 10;

	while (size < len && c < RCLASSES - 1) {
		size <<= 1;
		c++;
	}
	if (size < len)
		return -EMSGSIZE;
	if (ns->nrfree[c]) {
		b->p = ns->rfree[c][--ns->nrfree[c]];
	} else {
		if (ns->reasm_bytes + size > ns->reasm_limit)
			return -ENOBUFS;
		b->p = malloc(size); /* style: allow pool growth, bounded by native.reassembly.memory.bytes */
		if (!b->p)
			return -ENOBUFS;
		ns->reasm_bytes += size;
	}
	b->cap = (uint32_t)size;
	b->cls = c;
	return 0;
}

static void buf_put(struct native_shard *ns, struct nbuf *b)
{
	if (!b->p)
		return;
	if (b->cls < 0) {
		ns->dg_free[ns->ndg_free++] = b->p;
	} else if (ns->nrfree[b->cls] < RCLASS_FREE) {
		ns->rfree[b->cls][ns->nrfree[b->cls]++] = b->p;
	} else {
		free(b->p);
		ns->reasm_bytes -= (size_t)(64u << 10) << b->cls;
	}
	b->p = NULL;
}

/* ---- sending ----------------------------------------------------------------------- */

/* A lost datagram is something the protocol already copes with (the
 * producer resends, the reader asks again): a full socket buffer or TX
 * ring drops and counts, never waits. */
static int send_to(struct native_shard *ns, const struct npeer *to, const uint8_t *dg, int len)
{
	int rc;

	if (len <= 0)
		return len < 0 ? len : -EINVAL;
	if (to->dpdk) {
		struct netstack *net = ns->net[to->q && ns->net[1] ? 1 : 0];

		rc = netstack_udp_send(net, to->ip, to->port, ns->dpdk_udp_port, dg, (uint32_t)len, ns->sh->now_ns);
		if (rc == -ENOSPC) {
			/* a long FETCH_DATA train: hand what is queued to the port */
			netstack_flush(net);
			rc = netstack_udp_send(net, to->ip, to->port, ns->dpdk_udp_port, dg, (uint32_t)len, ns->sh->now_ns);
		}
	} else {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(to->port),
					 .sin_addr.s_addr = to->ip };

		rc = sendto(ns->fd, dg, (size_t)len, MSG_DONTWAIT, (const struct sockaddr *)&a, sizeof(a)) < 0 ? -1 : 0;
	}
	if (rc < 0)
		ns->st.send_errors++;
	else
		ns->st.datagrams_out++;
	return rc < 0 ? -EAGAIN : 0;
}

/* native_repl's way out: a replication datagram on the pair it names. */
static int repl_send(struct shard *sh, const struct native_repl_peer *to, const uint8_t *dg, int len)
{
	struct npeer p = { .ip = to->ip, .port = to->port, .dpdk = 1, .q = to->q };

	return send_to(sh->native, &p, dg, len);
}


static void send_error(struct native_shard *ns, const struct npeer *to, uint32_t session, uint32_t request,
		       int16_t err, uint8_t about, const char *msg)
{
	send_to(ns, to, ns->tx, native_write_error(ns->tx, sizeof(ns->tx), session, request, err, about, msg));
}

static void send_produce_ack(struct native_shard *ns, const struct npeer *to, uint32_t session,
			     uint32_t request, const char *topic, size_t topic_len, int32_t partition, int16_t err,
			     int64_t pid, int32_t seq, int64_t base, int64_t log_start, uint32_t credits)
{
	send_to(ns, to, ns->tx,
		native_write_produce_ack(ns->tx, sizeof(ns->tx), session, request, topic, topic_len, partition, err,
					 pid, seq, base, log_start, credits));
}

/* ---- sessions ------------------------------------------------------------------------ */

static struct nsession *session_of(struct native_shard *ns, uint32_t id)
{
	uint32_t slot = id & 0xfff;

	if ((id >> 24) != (uint32_t)ns->sh->id || slot >= SESSIONS || ns->sessions[slot].id != id)
		return NULL;
	return &ns->sessions[slot];
}

static int same_peer(const struct npeer *a, const struct npeer *b)
{
	return a->ip == b->ip && a->port == b->port && a->dpdk == b->dpdk;
}

static void hello_pid(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct native_shard *ns = sh->native;
	struct nsession *s = session_of(ns, (uint32_t)(uintptr_t)m->p[0]);
	int n;

	if (!s)
		return;   /* expired meanwhile */
	if (m->v[0] < 0) {
		send_error(ns, &s->peer, 0, s->hello_request, KERR_UNKNOWN_SERVER_ERROR, NATIVE_HELLO,
			   "the broker could not reserve a producer id (metadata log): try again");
		s->id = 0;
		return;
	}
	s->pid = m->v[0];
	n = native_write_hello_ack(ns->tx, sizeof(ns->tx), s->hello_request, s->id, s->credits, s->max_dg,
				   (uint16_t)sh->b->set.nshards, s->pid);
	send_to(ns, &s->peer, ns->tx, n);
}

static void on_hello(struct native_shard *ns, const struct native_msg *m, const struct npeer *from)
{
	struct nsession *s = NULL;

	for (uint32_t i = 0; i < SESSIONS; i++)
		if (!ns->sessions[i].id) {
			s = &ns->sessions[i];
			ns->next_gen = (ns->next_gen + 1) & 0xfff;
			if (!ns->next_gen)
				ns->next_gen = 1;
			s->id = (uint32_t)ns->sh->id << 24 | ns->next_gen << 12 | i;
			break;
		}
	if (!s) {
		ns->st.sessions_full++;
		send_error(ns, from, 0, m->request, KERR_THROTTLING_QUOTA_EXCEEDED, NATIVE_HELLO,
			   "this shard has no free session: close idle clients or try later");
		return;
	}
	s->peer = *from;
	s->peer.q = 0;                /* a client's answers: its shard's client pair */
	s->pid = -1;
	s->credits = m->credits && m->credits < ns->credits_max ? m->credits : ns->credits_max;
	s->in_flight = 0;
	s->max_dg = m->max_datagram < NATIVE_MAX_DATAGRAM ? m->max_datagram : NATIVE_MAX_DATAGRAM;
	s->hello_request = m->request;
	s->last_ns = ns->sh->now_ns;
	snprintf(s->name, sizeof(s->name), "%.*s", (int)m->data_len, (const char *)m->data);
	ns->st.sessions_opened++;
	{
		struct shard_msg m = { .fn = ns->sh->b->coord->producer_id_msg, .p = { (void *)(uintptr_t)s->id, (void *)hello_pid },
				       .v = { ns->sh->id } };

		shard_send(ns->sh, broker_ctl_index(ns->sh->b), &m);   /* parks when the ring is full */
	}
}

/* ---- PRODUCE --------------------------------------------------------------------------- */

static void produce_done(void *self, struct shard_msg *m)
{
	struct npending *pd = m->p[0];
	struct native_shard *ns = pd->ns;
	struct nsession *s = session_of(ns, pd->session);
	int64_t base = m->v[0], err = m->v[1];
	int16_t kerr = part_err_to_kafka((int)err);

	(void)self;
	if (kerr)
		ns->st.produce_errors++;
	if (s) {
		s->in_flight -= pd->len <= s->in_flight ? pd->len : s->in_flight;
		if (pd->acks != 0)
			send_produce_ack(ns, &s->peer, s->id, pd->request, pd->topic, pd->topic_len, pd->partition, kerr,
					 pd->pid, pd->seq, kerr ? -1 : base, m->v[2], pd->len);
	}
	buf_put(ns, &pd->buf);
	pd->next_free = ns->pending_free;
	ns->pending_free = pd;
}

/* On the owner: the batch's outcome, back to the session's shard. */
static void produce_route(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	struct npending *pd = cookie;
	struct shard_msg m = { .fn = produce_done, .p = { pd }, .v = { base, err, log_start } };

	if (pd->ns->sh == owner)
		produce_done(owner, &m);
	else
		shard_send(owner, pd->ns->sh->id, &m);
}

/* On the owner shard of the batch's partition (rec stays in the session
 * shard's buffer until produce_done gives it back). */
static void produce_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part_produce_req req = { .rec = m->p[1], .len = (uint32_t)m->v[0], .acks = (int)m->v[1],
					.recv_ns = sh->now_ns };

	part_produce(m->p[0], &req, produce_route, m->p[2]);
}

/* A whole batch (in buf) of session s: validate as Produce does, then
 * append through the owner. Takes buf. */
static void produce_batch(struct native_shard *ns, struct nsession *s, const struct native_msg *m, struct nbuf *buf,
			  const uint8_t *batch, uint32_t len)
{
	struct md_snapshot *md = broker_md(ns->sh->b);
	const struct md_topic *t = md_find(md, m->topic, m->topic_len);
	struct batch_info bi;
	struct npending *pd;
	int16_t err = 0;
	int rc;

	const struct md_partition *mp;
	int16_t led = md_part_led(t, (int32_t)m->partition, ns->sh->b->set.node_id, &mp);

	if (!mp) {
		err = led;   /* unknown, or led by another broker */
	} else if (t->internal) {
		err = KERR_INVALID_TOPIC_EXCEPTION;
	} else if ((rc = batch_validate(batch, len, t->max_message_bytes, BATCH_V_PRODUCE, &bi)) < 0 ||
		   ((bi.attributes & BATCH_ATTR_CODEC_MASK) &&
		    (rc = batch_check_records(ns->sh->compress, batch, &bi, BATCH_V_PRODUCE)) < 0)) {
		/* as Produce: a compressed batch's records are checked too */
		err = rc == -BATCH_ERR_TOO_LARGE || rc == -BATCH_ERR_INFLATE ? KERR_MESSAGE_TOO_LARGE
		    : rc == -BATCH_ERR_INNER ? KERR_INVALID_RECORD : KERR_CORRUPT_MESSAGE;
	} else if (bi.size != len || (bi.attributes & (BATCH_ATTR_CONTROL | BATCH_ATTR_TRANSACTIONAL)) ||
		   batch_producer_id(batch) != m->producer_id || batch_producer_epoch(batch) != m->producer_epoch ||
		   batch_base_sequence(batch) != m->base_sequence) {
		err = KERR_INVALID_RECORD;   /* one batch, matching its datagram, no transactions */
	}
	if (!err && !(pd = ns->pending_free))
		err = KERR_THROTTLING_QUOTA_EXCEEDED;   /* this shard's produce slots are all out */
	if (err) {
		ns->st.produce_errors++;
		if (m->acks != 0)
			send_produce_ack(ns, &s->peer, s->id, m->request, m->topic, m->topic_len, m->partition, err,
					 m->producer_id, m->base_sequence, -1, -1, 0);
		buf_put(ns, buf);
		return;
	}
	ns->pending_free = pd->next_free;
	pd->ns = ns;
	pd->session = s->id;
	pd->request = m->request;
	pd->partition = m->partition;
	pd->pid = m->producer_id;
	pd->seq = m->base_sequence;
	pd->len = len;
	pd->acks = m->acks;
	pd->topic_len = m->topic_len;
	memcpy(pd->topic, m->topic, m->topic_len);
	pd->buf = *buf;
	buf->p = NULL;
	s->in_flight += len;
	ns->st.batches++;
	if (t->parts[m->partition].owner_shard == ns->sh->id) {
		struct part_produce_req req = { .rec = batch, .len = len, .acks = pd->acks ? pd->acks : 1,
						.recv_ns = ns->sh->now_ns };

		part_produce(md_part_owner(&t->parts[m->partition]), &req, produce_route, pd);
	} else {
		struct shard_msg o = { .fn = produce_on_owner, .p = { md_part_owner(&t->parts[m->partition]), (void *)batch, pd },
				       .v = { len, pd->acks ? pd->acks : 1 } };

		shard_send(ns->sh, t->parts[m->partition].owner_shard, &o);
	}
}

static struct nreasm *reasm_find(struct native_shard *ns, const struct native_msg *m)
{
	for (int i = 0; i < REASM_SLOTS; i++) {
		struct nreasm *r = &ns->reasm[i];

		if (r->used && r->session == m->session && r->pid == m->producer_id && r->seq == m->base_sequence &&
		    r->epoch == m->producer_epoch && r->partition == m->partition && r->topic_len == m->topic_len &&
		    !memcmp(r->topic, m->topic, m->topic_len))
			return r;
	}
	return NULL;
}

static void reasm_drop(struct native_shard *ns, struct nreasm *r)
{
	buf_put(ns, &r->buf);
	r->used = 0;
}

/* One fragment of a batch: 1 and *out when the batch is whole. */
static int reasm_add(struct native_shard *ns, const struct native_msg *m, struct nreasm **out)
{
	struct nreasm *r = reasm_find(ns, m);
	int last = m->frag_index == m->frag_count - 1;

	if (!r) {
		for (int i = 0; i < REASM_SLOTS && !r; i++)
			if (!ns->reasm[i].used)
				r = &ns->reasm[i];
		struct nbuf b = { 0 };
		int rc;

		if (m->total_len > ns->reasm_cap)
			return -EMSGSIZE;
		if (!r || (rc = rbuf_get(ns, m->total_len, &b)) < 0) {
			ns->st.reassembly_full++;
			return -ENOBUFS;
		}
		memset(r, 0, sizeof(*r));
		r->buf = b;
		r->used = 1;
		r->session = m->session;
		r->pid = m->producer_id;
		r->epoch = m->producer_epoch;
		r->seq = m->base_sequence;
		r->partition = m->partition;
		r->topic_len = m->topic_len;
		memcpy(r->topic, m->topic, m->topic_len);
		r->total = m->total_len;
		r->count = m->frag_count;
		r->acks = m->acks;
		r->request = m->request;
		r->started_ns = ns->sh->now_ns;
		ns->st.batches_fragmented++;
	}
	/* every fragment but the last has the same size; they tile the batch */
	if (m->total_len != r->total || m->frag_count != r->count || m->acks != r->acks)
		goto bad;
	if (!last) {
		if (!r->frag_size)
			r->frag_size = m->data_len;
		if (m->data_len != r->frag_size || (uint64_t)m->frag_index * r->frag_size != m->frag_offset)
			goto bad;
	} else {
		if ((uint64_t)m->frag_offset + m->data_len != r->total)
			goto bad;
		r->last_offset = m->frag_offset;
	}
	if (r->bits[m->frag_index / 64] & (1ull << (m->frag_index % 64))) {
		ns->st.fragments_duplicate++;
		return 0;
	}
	memcpy(r->buf.p + m->frag_offset, m->data, m->data_len);
	r->bits[m->frag_index / 64] |= 1ull << (m->frag_index % 64);
	r->got++;
	r->request = m->request;
	if (r->got < r->count)
		return 0;
	/* the last fragment starts where the others end */
	if ((uint64_t)r->frag_size * (r->count - 1) != r->last_offset)
		goto bad;
	*out = r;
	return 1;
bad:
	ns->st.fragments_bad++;
	reasm_drop(ns, r);
	return -EINVAL;
}

static void on_produce(struct native_shard *ns, struct nsession *s, const struct native_msg *m, uint8_t **rxbuf)
{
	struct nbuf buf = { 0 };

	if (m->producer_id != s->pid) {
		/* only the producer id this session was given is ours to dedup */
		ns->st.unknown_producer++;
		send_produce_ack(ns, &s->peer, s->id, m->request, m->topic, m->topic_len, m->partition,
				 KERR_UNKNOWN_PRODUCER_ID, m->producer_id, m->base_sequence, -1, -1, 0);
		return;
	}
	if (s->in_flight + (uint64_t)m->total_len > s->credits) {
		ns->st.credits_exceeded++;
		send_error(ns, &s->peer, s->id, m->request, KERR_THROTTLING_QUOTA_EXCEEDED, NATIVE_PRODUCE,
			   "beyond this session's credits: wait for acknowledgements before sending more");
		return;
	}
	if (m->frag_count == 1) {
		/* the datagram itself holds the batch: keep its buffer until the
		 * acknowledgement, and give the receiver a fresh one */
		uint8_t *fresh = dg_get(ns);

		if (!fresh) {
			ns->st.rx_pool_empty++;
			send_error(ns, &s->peer, s->id, m->request, KERR_THROTTLING_QUOTA_EXCEEDED, NATIVE_PRODUCE,
				   "this shard's receive buffers are all holding batches not yet durable: resend later");
			return;
		}
		buf.p = *rxbuf;
		buf.cap = DG_BUF;
		buf.cls = -1;
		*rxbuf = fresh;
		produce_batch(ns, s, m, &buf, m->data, m->data_len);
		return;
	}
	{
		struct nreasm *r = NULL;
		int rc = reasm_add(ns, m, &r);

		if (rc == -ENOBUFS) {
			send_error(ns, &s->peer, s->id, m->request, KERR_THROTTLING_QUOTA_EXCEEDED, NATIVE_PRODUCE,
				   "no room to put fragmented batches together on this shard: "
				   "resend later, or send fewer fragmented batches at once");
		} else if (rc == -EMSGSIZE) {
			send_produce_ack(ns, &s->peer, s->id, m->request, m->topic, m->topic_len, m->partition,
					 KERR_MESSAGE_TOO_LARGE, m->producer_id, m->base_sequence, -1, -1, 0);
		} else if (rc == -EINVAL) {
			send_error(ns, &s->peer, s->id, m->request, -NATIVE_E_FRAGMENT, NATIVE_PRODUCE,
				   "fragments of this batch do not add up: the batch was dropped, resend it whole");
		} else if (rc == 1) {
			struct native_msg whole = *m;

			whole.request = r->request;
			buf = r->buf;
			r->buf.p = NULL;
			r->used = 0;
			produce_batch(ns, s, &whole, &buf, buf.p, r->total);
		}
	}
}

/* ---- FETCH ----------------------------------------------------------------------------- */

/* FETCH_DATA has no list of aborted transactions yet: a read_committed
 * answer holding aborted records is refused (INVALID_REQUEST) rather than
 * served as if they were committed; such a range is read over Kafka's
 * Fetch. */
static int16_t fetch_aborted_check(const struct nfetch *f)
{
	int64_t end = f->offset;

	if (!f->isolation || !f->rq.rd.bytes || !f->part->txn.naborted)
		return 0;
	for (uint32_t at = 0; at + BATCH_HEADER_SIZE <= f->rq.rd.bytes; at += batch_size(f->rq.rd.data + at))
		end = batch_last_offset(f->rq.rd.data + at);
	return part_txn_aborted(&f->part->txn, f->offset, end, NULL, NULL, 0) > 0 ? KERR_INVALID_REQUEST : 0;
}

/* The FETCH_DATA train of f from ns's transport (the owner's, or the
 * session's shard's: see fetch_send). Reads f, changes nothing in it. */
static void fetch_emit(struct native_shard *ns, const struct nfetch *f)
{
	const struct part *p = f->part;
	const uint8_t *data = f->err ? NULL : f->rq.rd.data;
	uint32_t total = f->err ? 0 : f->rq.rd.bytes;
	size_t tl = strlen(p->topic);
	uint32_t room = native_fetch_data_room(f->max_dg, tl);
	uint16_t count = (uint16_t)(total ? (total + room - 1) / room : 0);

	if (count > NATIVE_MAX_FRAGMENTS) {
		count = NATIVE_MAX_FRAGMENTS;
		total = room * count;   /* cannot happen with max_bytes <= 2 MiB; be safe */
	}
	for (uint16_t i = 0; i == 0 || i < count; i++) {
		uint32_t off = (uint32_t)i * room, n = total - off < room ? total - off : room;

		if (!total)
			n = 0;
		send_to(ns, &f->peer, ns->tx,
			native_write_fetch_data(ns->tx, sizeof(ns->tx), f->session, f->request, p->topic, tl, p->index,
						f->err, f->hw, f->ls, f->lso, total, off, i, count,
						data ? data + off : NULL, n));
		ns->st.fetch_datagrams++;
	}
}

/* On the owner: the read buffer goes back, the slot is free. */
static void fetch_release(struct nfetch *f)
{
	part_read_release(&f->rq);
	f->used = 0;
}

static void fetch_released(void *self, struct shard_msg *m)
{
	(void)self;
	fetch_release(m->p[0]);
}

/* On the session's shard: send the owner's answer from our queue, then
 * hand the read back. */
static void fetch_emit_remote(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct nfetch *f = m->p[0];
	struct shard_msg back = { .fn = fetch_released, .p = { f } };

	fetch_emit(sh->native, f);
	shard_send(sh, f->ns->sh->id, &back);
}

/* On the owner, the read done (or refused with err): fix the answer and
 * send it. Over DPDK it leaves by the queue pair of the session's shard —
 * the pair its datagrams arrive on — since a port such as net_memif joins
 * queue pairs end to end (the client polls only the pairs it has): the
 * session's shard emits it from the owner's buffer (no copy beyond the
 * one into mbufs) and hands the buffer back. */
static void fetch_send(struct native_shard *ns, struct nfetch *f, int16_t err)
{
	struct part *p = f->part;
	int home = (int)(f->session >> 24);

	f->err = err ? err : fetch_aborted_check(f);
	f->hw = p->pl ? p->pl->high_watermark : -1;
	f->ls = p->pl ? p->pl->log_start : -1;
	f->lso = p->pl ? part_lso(p) : -1;
	if (f->peer.dpdk && home != ns->sh->id && home < ns->sh->b->set.nshards) {
		struct shard_msg m = { .fn = fetch_emit_remote, .p = { f } };

		shard_send(ns->sh, home, &m);
		return;
	}
	fetch_emit(ns, f);
	fetch_release(f);
}

/* The owner's read ended (part_read): its outcome as the Kafka code the
 * FETCH_DATA carries. */
static void fetch_read_done(void *cookie, struct part_read_req *rq, int err)
{
	struct nfetch *f = cookie;

	(void)rq;
	fetch_send(f->ns, f, !err ? 0 : err == -ENOENT ? KERR_UNKNOWN_TOPIC_OR_PARTITION
				: err == -ERANGE ? KERR_OFFSET_OUT_OF_RANGE : KERR_KAFKA_STORAGE_ERROR);
}

/* On the partition's owner: read and answer. */
static void fetch_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct native_shard *ns = sh->native;
	struct part *p = m->p[0];
	struct nfetch *f = NULL;
	uint32_t max_bytes = (uint32_t)m->v[1];
	int isolation = (int)((m->v[1] >> 48) & 1);

	for (int i = 0; i < FETCH_SLOTS && !f; i++)
		if (!ns->fetch[i].used)
			f = &ns->fetch[i];
	if (!f) {
		ns->st.fetch_busy++;   /* dropped: the reader asks again */
		return;
	}
	memset(f, 0, sizeof(*f));
	f->used = 1;
	f->ns = ns;
	f->part = p;
	f->peer.ip = (uint32_t)(m->v[2] >> 16);
	f->peer.port = (uint16_t)m->v[2];
	f->peer.dpdk = (uint8_t)((m->v[1] >> 49) & 1);
	f->session = (uint32_t)(m->v[3] >> 32);
	f->request = (uint32_t)m->v[3];
	f->max_dg = (uint16_t)(m->v[1] >> 32);
	f->isolation = isolation;
	f->offset = m->v[0];
	ns->st.fetches++;
	f->rq.offset = m->v[0];
	f->rq.max_bytes = max_bytes;
	f->rq.isolation = isolation;
	part_read(p, &f->rq, fetch_read_done, f);
}

static void on_fetch(struct native_shard *ns, struct nsession *s, const struct native_msg *m)
{
	struct md_snapshot *md = broker_md(ns->sh->b);
	const struct md_topic *t = md_find(md, m->topic, m->topic_len);
	const struct md_partition *mp;
	struct shard_msg f = { .fn = fetch_on_owner };

	int16_t led = md_part_led(t, (int32_t)m->partition, ns->sh->b->set.node_id, &mp);

	if (!mp) {
		send_to(ns, &s->peer, ns->tx,
			native_write_fetch_data(ns->tx, sizeof(ns->tx), s->id, m->request, m->topic, m->topic_len,
						m->partition, led, -1, -1, -1, 0, 0, 0, 0, NULL, 0));
		return;
	}
	f.p[0] = md_part_owner(mp);
	f.v[0] = m->offset;
	f.v[1] = (int64_t)m->max_bytes | (int64_t)s->max_dg << 32 | (int64_t)(m->isolation & 1) << 48 |
		 (int64_t)s->peer.dpdk << 49;
	f.v[2] = (int64_t)s->peer.ip << 16 | s->peer.port;
	f.v[3] = (int64_t)((uint64_t)s->id << 32 | m->request);
	if (mp->owner_shard == ns->sh->id)
		fetch_on_owner(ns->sh, &f);
	else
		shard_send(ns->sh, mp->owner_shard, &f);
}

/* ---- receiving ---------------------------------------------------------------------------- */

static void on_datagram(struct native_shard *ns, uint8_t **rxbuf, size_t len, const struct npeer *from)
{
	struct native_msg m;
	struct nsession *s;
	int rc = native_parse(*rxbuf, len, 1, &m);

	ns->st.datagrams_in++;
	ns->st.bytes_in += len;
	if (rc < 0) {
		ns->st.rejected[-rc]++;
		/* answer what is ours but unreadable; stay silent to strangers */
		if (rc != -NATIVE_E_MAGIC && rc != -NATIVE_E_SHORT)
			send_error(ns, from, 0, len >= NATIVE_HEADER ? be32_load(*rxbuf + NH_REQUEST) : 0, (int16_t)rc,
				   len > NH_TYPE ? (*rxbuf)[NH_TYPE] : 0, native_reject_name(rc));
		return;
	}
	if (m.type == NATIVE_REPLICA_FETCH || m.type == NATIVE_REPLICA_DATA) {
		struct native_repl_peer rp = { .ip = from->ip, .port = from->port, .q = from->q };

		if (!from->dpdk || !ns->repl) {
			ns->st.rejected[NATIVE_E_TYPE]++;   /* replication runs on the DPDK replication pairs only */
			return;
		}
		native_repl_datagram(ns->sh, &m, &rp);
		return;
	}
	if (from->dpdk && from->q && !ns->client_on_repl) {
		ns->st.rejected[NATIVE_E_TYPE]++;   /* the replication pair carries no client flow here */
		return;
	}
	if (m.type == NATIVE_HELLO) {
		on_hello(ns, &m, from);
		return;
	}
	if (m.type != NATIVE_PRODUCE && m.type != NATIVE_FETCH) {
		ns->st.rejected[NATIVE_E_TYPE]++;
		send_error(ns, from, m.session, m.request, -NATIVE_E_TYPE, m.type, "a client sends HELLO, PRODUCE, FETCH");
		return;
	}
	s = session_of(ns, m.session);
	if (!s || s->pid < 0) {
		ns->st.unknown_session++;
		send_error(ns, from, m.session, m.request, KERR_UNKNOWN_PRODUCER_ID, m.type,
			   "unknown or expired session: send HELLO again");
		return;
	}
	if (!same_peer(&s->peer, from)) {
		ns->st.wrong_peer++;
		send_error(ns, from, m.session, m.request, KERR_UNKNOWN_PRODUCER_ID, m.type,
			   "this session belongs to another address: send HELLO");
		return;
	}
	s->last_ns = ns->sh->now_ns;
	if (m.type == NATIVE_PRODUCE)
		on_produce(ns, s, &m, rxbuf);
	else
		on_fetch(ns, s, &m);
}

/* ---- DPDK -------------------------------------------------------------------------------------- */

/* A datagram another shard's queue received for one of our sessions (the
 * port hashed its flow there): served here, where the session lives. */
static void dpdk_forwarded(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct native_shard *ns = sh->native;
	struct rte_mbuf *mb = m->p[0];
	struct npeer from = { .ip = (uint32_t)m->v[1], .port = (uint16_t)m->v[2], .dpdk = 1, .q = (uint8_t)m->v[3] };
	uint32_t len = (uint32_t)m->v[0];

	memcpy(ns->drx, m->p[1], len);
	rte_pktmbuf_free(mb);   /* the pools are multi-producer: any shard frees */
	on_datagram(ns, &ns->drx, len, &from);
}

/* netstack's on_udp: a datagram for dpdk.listen. Copied into a datagram
 * buffer (a PRODUCE keeps it until durable; the mbuf goes back to the
 * port at once), unless it belongs to another shard's session. */
static int dpdk_on_udp(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		       struct rte_mbuf *m)
{
	struct native_arp_cb *cb = arg;
	struct native_shard *ns = cb->ns;
	struct npeer from = { .ip = src_ip, .port = src_port, .dpdk = 1, .q = (uint8_t)cb->q };

	if (len > DG_BUF)
		len = DG_BUF;   /* native_parse refuses it by its own length */
	if (len >= NATIVE_HEADER && be16_load(payload + NH_MAGIC) == NATIVE_MAGIC && payload[NH_TYPE] != NATIVE_HELLO &&
	    payload[NH_TYPE] != NATIVE_REPLICA_FETCH) {
		/* a session's datagram goes to the session's shard; a
		 * REPLICA_DATA to its fetcher's (the request's top byte); a
		 * REPLICA_FETCH is served where it came in (its answer leaves
		 * by this pair) */
		int owner = payload[NH_TYPE] == NATIVE_REPLICA_DATA ? (int)(be32_load(payload + NH_REQUEST) >> 24)
								    : (int)(be32_load(payload + NH_SESSION) >> 24);

		if (owner != ns->sh->id && owner < ns->sh->b->set.nshards) {
			struct shard_msg f = { .fn = dpdk_forwarded, .p = { m, (void *)payload },
					       .v = { len, src_ip, src_port, cb->q } };

			ns->st.forwarded++;
			shard_send(ns->sh, owner, &f);
			return 1;   /* the owner frees m */
		}
	}
	memcpy(ns->drx, payload, len);
	on_datagram(ns, &ns->drx, len, &from);
	return 0;
}

static void arp_learned(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct native_shard *ns = sh->native;
	struct rte_ether_addr mac;

	memcpy(mac.addr_bytes, &m->v[1], RTE_ETHER_ADDR_LEN);
	for (int q = 0; q < 2; q++)
		if (ns->net[q])
			netstack_arp_learn(ns->net[q], (uint32_t)m->v[0], &mac, sh->now_ns);
}

/* netstack's on_arp: what one queue learned, every other stack learns
 * (ARP answers land on whichever queue the port chooses). Runs per entry
 * learned, never per datagram. */
static void dpdk_on_arp(void *arg, uint32_t ip, const struct rte_ether_addr *mac)
{
	struct native_arp_cb *cb = arg;
	struct native_shard *ns = cb->ns;
	struct shard_msg m = { .fn = arp_learned, .v = { ip, 0 } };

	memcpy(&m.v[1], mac->addr_bytes, RTE_ETHER_ADDR_LEN);
	if (ns->net[!cb->q])
		netstack_arp_learn(ns->net[!cb->q], ip, mac, ns->sh->now_ns);
	for (int i = 0; i < ns->sh->b->set.nshards; i++)
		if (i != ns->sh->id)
			shard_send(ns->sh, i, &m);
}

static int dpdk_poll(struct native_shard *ns)
{
	struct rte_mbuf *pkts[DPDK_BURST];
	int total = 0;

	for (int q = 0; q < 2; q++) {
		uint16_t n;

		if (!ns->net[q])
			continue;
		n = dpdk_queue_rx(&ns->dq[q], pkts, DPDK_BURST);
		if (n) {
			netstack_rx(ns->net[q], pkts, n, ns->sh->now_ns);
			total += n;
		}
	}
	for (int q = 0; q < 2; q++)
		if (ns->net[q])
			netstack_poll(ns->net[q], ns->sh->now_ns);
	return total;
}

int native_shard_poll(struct shard *sh)
{
	struct native_shard *ns = sh->native;
	int n, total = 0;

	if (!ns)
		return 0;
	if (ns->dpdk)
		total += dpdk_poll(ns);
	if (ns->repl)
		total += native_repl_poll(sh);
	for (int round = 0; ns->fd >= 0 && round < 4; round++) {
		for (int i = 0; i < RX_BATCH; i++) {
			ns->iov[i] = (struct iovec){ ns->rx[i], DG_BUF };
			ns->msgs[i].msg_hdr = (struct msghdr){ .msg_name = &ns->addr[i], .msg_namelen = sizeof(ns->addr[i]),
							       .msg_iov = &ns->iov[i], .msg_iovlen = 1 };
		}
		n = recvmmsg(ns->fd, ns->msgs, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			struct npeer from = { .ip = ns->addr[i].sin_addr.s_addr, .port = ntohs(ns->addr[i].sin_port) };

			on_datagram(ns, &ns->rx[i], ns->msgs[i].msg_len, &from);
		}
		total += n;
		if (n < RX_BATCH)
			break;
	}
	return total;
}

/* ---- timers, life ----------------------------------------------------------------------------- */

void native_shard_tick(struct shard *sh)
{
	struct native_shard *ns = sh->native;

	if (!ns)
		return;
	for (int i = 0; i < REASM_SLOTS; i++)
		if (ns->reasm[i].used && sh->now_ns - ns->reasm[i].started_ns > ns->reasm_timeout_ns) {
			ns->st.reassembly_timeouts++;   /* the producer resends the batch */
			reasm_drop(ns, &ns->reasm[i]);
		}
	for (uint32_t i = 0; i < SESSIONS; i++) {
		struct nsession *s = &ns->sessions[i];

		if (s->id && !s->in_flight && sh->now_ns - s->last_ns > ns->session_timeout_ns) {
			s->id = 0;
			ns->st.sessions_expired++;
		}
	}
}

int native_shard_fd(const struct shard *sh)
{
	return sh->native ? sh->native->fd : -1;
}

int native_shard_describe(const struct shard *sh, char *buf, size_t len)
{
	const struct native_stats *st = &sh->native->st;
	uint64_t bad = 0;

	for (int i = 1; i < NATIVE_E_COUNT; i++)
		bad += st->rejected[i];
	int n = snprintf(buf, len,
			"native shard %d: %llu datagrams in, %llu out, %llu unreadable (short %llu, magic %llu, "
			"version %llu, length %llu, crc %llu, type %llu, topic %llu, fragment %llu, field %llu), "
			"%llu unknown session, %llu unknown producer, %llu beyond credits, %llu batches "
			"(%llu fragmented, %llu refused), %llu reassembly timeouts, %llu without reassembly room, "
			"%llu bad fragments, %llu receive buffers short, %llu fetches, %llu send errors",
			sh->id, (unsigned long long)st->datagrams_in, (unsigned long long)st->datagrams_out,
			(unsigned long long)bad, (unsigned long long)st->rejected[NATIVE_E_SHORT],
			(unsigned long long)st->rejected[NATIVE_E_MAGIC], (unsigned long long)st->rejected[NATIVE_E_VERSION],
			(unsigned long long)st->rejected[NATIVE_E_LENGTH], (unsigned long long)st->rejected[NATIVE_E_CRC],
			(unsigned long long)st->rejected[NATIVE_E_TYPE], (unsigned long long)st->rejected[NATIVE_E_TOPIC],
			(unsigned long long)st->rejected[NATIVE_E_FRAGMENT], (unsigned long long)st->rejected[NATIVE_E_FIELD],
			(unsigned long long)st->unknown_session, (unsigned long long)st->unknown_producer,
			(unsigned long long)st->credits_exceeded, (unsigned long long)st->batches,
			(unsigned long long)st->batches_fragmented, (unsigned long long)st->produce_errors,
			(unsigned long long)st->reassembly_timeouts, (unsigned long long)st->reassembly_full,
			(unsigned long long)st->fragments_bad, (unsigned long long)st->rx_pool_empty,
			(unsigned long long)st->fetches, (unsigned long long)st->send_errors);

	if (sh->native->dpdk && n >= 0 && (size_t)n < len)
		n += dpdk_describe(sh->native, buf + n, len - (size_t)n);
	if (sh->native->repl && n >= 0 && (size_t)n < len)
		n += native_repl_describe(sh, buf + n, len - (size_t)n);
	return n;
}

/* The DPDK side of the shard: its stacks' counters (no newline). */
static int dpdk_describe(const struct native_shard *ns, char *buf, size_t len)
{
	struct netstack_stats t = { 0 };
	uint64_t drops = 0;
	size_t at;
	int worst = -1;

	for (int q = 0; q < 2; q++) {
		const struct netstack_stats *a;

		if (!ns->net[q])
			continue;
		a = &ns->net[q]->stats;
		t.rx_frames += a->rx_frames;
		t.tx_frames += a->tx_frames;
		t.udp_rx += a->udp_rx;
		t.udp_tx += a->udp_tx;
		t.icmp_echo += a->icmp_echo;
		t.arp_rx_requests += a->arp_rx_requests;
		t.arp_tx_requests += a->arp_tx_requests;
		t.arp_learned += a->arp_learned;
		for (int d = 0; d < NETSTACK_DROP_MAX; d++)
			t.drop[d] += a->drop[d];
	}
	for (int d = 0; d < NETSTACK_DROP_MAX; d++) {
		drops += t.drop[d];
		if (t.drop[d] && (worst < 0 || t.drop[d] > t.drop[worst]))
			worst = d;
	}
	at = (size_t)snprintf(buf, len,
			      "; dpdk: %llu frames in, %llu out, %llu datagrams in, %llu passed to their session's "
			      "shard, %llu ping answers, %llu ARP requests in, %llu out, %llu learned, %llu frames dropped",
			      (unsigned long long)t.rx_frames, (unsigned long long)t.tx_frames,
			      (unsigned long long)t.udp_rx, (unsigned long long)ns->st.forwarded,
			      (unsigned long long)t.icmp_echo, (unsigned long long)t.arp_rx_requests,
			      (unsigned long long)t.arp_tx_requests, (unsigned long long)t.arp_learned,
			      (unsigned long long)drops);
	if (worst >= 0 && at < len)
		at += (size_t)snprintf(buf + at, len - at, " (most: %s %llu)", netstack_drop_name[worst],
				       (unsigned long long)t.drop[worst]);
	return (int)at;
}

/* The shard's queues on the broker's port, a stack on each. */
static int dpdk_shard_open(struct native_shard *ns, char *err, size_t errlen)
{
	const struct broker_settings *set = &ns->sh->b->set;
	struct dpdk_port *port = ns->sh->b->dpdk;
	int rc;

	for (int q = 0; q < 2; q++) {
		struct netstack_config c;

		rc = dpdk_port_queue(port, (uint16_t)ns->sh->id, q, &ns->dq[q]);
		if (rc == -ENOENT && q == 1)
			break;   /* no replication pairs on this port (its notes say why) */
		if (rc < 0) {
			snprintf(err, errlen, "dpdk: shard %d has no queue pair on port %s: %s", ns->sh->id, port->name,
				 strerror(-rc));
			return rc;
		}
		netstack_config_defaults(&c);
		c.ip = set->dpdk_ip;
		c.netmask = set->dpdk_netmask;
		c.gateway = set->dpdk_gateway;
		c.mac = ns->dq[q].mac;
		c.udp_port = set->dpdk_udp_port;
		c.mtu = ns->dq[q].mtu;
		c.rx_offloads = ns->dq[q].rx_offloads;
		c.tx_offloads = ns->dq[q].tx_offloads;
		c.udp_cksum_none = 1;   /* every native datagram carries its CRC-32C */
		c.pool = ns->dq[q].pool;
		c.tx = dpdk_queue_tx;
		c.tx_arg = &ns->dq[q];
		c.on_udp = dpdk_on_udp;
		ns->arp_cb[q] = (struct native_arp_cb){ ns, q };
		c.udp_arg = &ns->arp_cb[q];
		c.on_arp = dpdk_on_arp;
		c.arp_arg = &ns->arp_cb[q];
		ns->net[q] = calloc(1, sizeof(*ns->net[q])); /* style: allow shard setup */
		if (!ns->net[q])
			return -ENOMEM;
		if ((rc = netstack_init(ns->net[q], &c)) < 0) {
			snprintf(err, errlen, "dpdk: shard %d: network stack: %s", ns->sh->id, strerror(-rc));
			free(ns->net[q]);
			ns->net[q] = NULL;
			return rc;
		}
	}
	ns->dpdk = 1;
	ns->dpdk_udp_port = set->dpdk_udp_port;
	ns->client_on_repl = port->any_queue;
	if (ns->net[1]) {
		/* replication over the replication pair: the largest datagram
		 * its MTU carries (IPv4 and UDP headers off) */
		uint32_t mtu = ns->dq[1].mtu ? ns->dq[1].mtu : 1500;
		uint32_t dg = mtu - 28 < NATIVE_MAX_DATAGRAM ? mtu - 28 : NATIVE_MAX_DATAGRAM;

		if (!(ns->repl = native_repl_new(ns->sh, repl_send, (uint16_t)dg)))
			return -ENOMEM;
		ns->sh->native_repl = ns->repl;
	}
	return 0;
}

int native_shard_open(struct shard *sh, const char *host, int port, char *err, size_t errlen)
{
	struct native_shard *ns = calloc(1, sizeof(*ns)); /* style: allow shard setup */
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, sz = SOCK_BUF, rc;
	const struct broker_settings *set = &sh->b->set;

	if (!ns)
		return -ENOMEM;
	ns->sh = sh;
	ns->fd = -1;
	if (!port)
		goto buffers;   /* DPDK only */
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		snprintf(err, errlen, "native.listen: '%s' is not an IPv4 address", host);
		free(ns);
		return -EINVAL;
	}
	ns->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ns->fd < 0 || setsockopt(ns->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(ns->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		snprintf(err, errlen, "native.listen: cannot bind UDP %s:%d: %s", host, port, strerror(e));
		if (ns->fd >= 0)
			close(ns->fd);
		free(ns);
		return -e;
	}
	setsockopt(ns->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	setsockopt(ns->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
buffers:
	ns->credits_max = set->native_credits;
	ns->session_timeout_ns = (uint64_t)set->native_session_timeout_ms * 1000000ull;
	ns->reasm_timeout_ns = (uint64_t)set->native_reassembly_timeout_ms * 1000000ull;
	ns->reasm_cap = set->message_max_bytes + 4096;
	ns->reasm_limit = set->native_reassembly_bytes;
	ns->sessions = calloc(SESSIONS, sizeof(*ns->sessions)); /* style: allow shard setup */
	ns->pending = calloc(PENDING, sizeof(*ns->pending)); /* style: allow shard setup */
	ns->dg_mem = aligned_alloc(64, (size_t)DG_POOL * DG_BUF); /* style: allow shard setup */
	ns->dg_free = calloc(DG_POOL, sizeof(*ns->dg_free)); /* style: allow shard setup */
	for (int c = 0; c < RCLASSES; c++)
		ns->rfree[c] = calloc(RCLASS_FREE, sizeof(*ns->rfree[c])); /* style: allow shard setup */
	if (!ns->sessions || !ns->pending || !ns->dg_mem || !ns->dg_free || !ns->rfree[RCLASSES - 1]) {
		snprintf(err, errlen, "native.listen: no memory for the shard's buffers");
		sh->native = ns;
		native_shard_close(sh);
		return -ENOMEM;
	}
	for (int i = 0; i < PENDING; i++) {
		ns->pending[i].next_free = ns->pending_free;
		ns->pending_free = &ns->pending[i];
	}
	for (int i = 0; i < DG_POOL; i++)
		ns->dg_free[ns->ndg_free++] = ns->dg_mem + (size_t)i * DG_BUF;
	for (int i = 0; i < RX_BATCH; i++)
		ns->rx[i] = dg_get(ns);
	ns->drx = dg_get(ns);
	sh->native = ns;
	if (sh->b->dpdk && (rc = dpdk_shard_open(ns, err, errlen)) < 0) {
		native_shard_close(sh);
		return rc;
	}
	return 0;
}

void native_shard_close(struct shard *sh)
{
	struct native_shard *ns = sh->native;

	if (!ns)
		return;
	if (ns->fd >= 0)
		close(ns->fd);
	sh->native_repl = NULL;
	native_repl_free(ns->repl);
	for (int q = 0; q < 2; q++)
		if (ns->net[q]) {
			netstack_fini(ns->net[q]);
			free(ns->net[q]);
		}
	for (int i = 0; i < REASM_SLOTS; i++)
		if (ns->reasm[i].used)
			reasm_drop(ns, &ns->reasm[i]);
	for (int c = 0; c < RCLASSES; c++) {
		for (int i = 0; i < ns->nrfree[c]; i++)
			free(ns->rfree[c][i]);
		free(ns->rfree[c]);
	}
	free(ns->sessions);
	free(ns->pending);
	free(ns->dg_mem);
	free(ns->dg_free);
	free(ns);
	sh->native = NULL;
}

void native_shard_thread_init(struct shard *sh)
{
	int rc;

	/* an lcore id, so the pools' per-lcore caches serve this shard */
	if (sh->native && sh->native->dpdk && rte_lcore_id() == LCORE_ID_ANY && (rc = dpdk_eal_thread_register()) < 0)
		slog(SLOG_WARN, "shard %d: no DPDK lcore id left (%s): mbufs bypass the pool cache", sh->id, /* style: allow once, at thread start */
			strerror(-rc));
}

int native_shard_dpdk(const struct shard *sh)
{
	return sh->native && sh->native->dpdk;
}

int native_dpdk_start(struct broker *b, const char *eal_args, const char *device, int mtu, char *err, size_t errlen)
{
	struct dpdk_port_config cfg;
	struct dpdk_port *p;
	char line[2048];
	int rc;

	if ((rc = dpdk_eal_start(eal_args, err, errlen)) < 0)
		return rc;
	p = calloc(1, sizeof(*p)); /* style: allow startup */
	if (!p) {
		dpdk_eal_stop();
		snprintf(err, errlen, "no memory for the port");
		return -ENOMEM;
	}
	dpdk_port_config_defaults(&cfg);
	cfg.device = device && *device ? device : NULL;
	cfg.shards = (uint16_t)b->set.nshards;
	cfg.mtu = (uint16_t)mtu;
	if ((rc = dpdk_port_init(p, &cfg, err, errlen)) < 0) {
		free(p);
		dpdk_eal_stop();
		return rc;
	}
	dpdk_port_describe(p, line, sizeof(line));
	slog(SLOG_INFO, "dpdk: %s", line); /* style: allow once, at startup */
	b->dpdk = p;
	return 0;
}

void native_dpdk_stop(struct broker *b)
{
	if (!b->dpdk)
		return;
	dpdk_port_fini(b->dpdk);
	free(b->dpdk);
	b->dpdk = NULL;
	dpdk_eal_stop();
}
