/* dataplane/conn.c — a client's TCP connection: accept (limits, EMFILE
 * back-off), receive and frame assembly under the request memory
 * (queued.max.request.bytes), responses sent in request order, idle close.
 * See dataplane/conn.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dataplane/conn.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/sasl.h"
#include "dataplane/tls.h"
#include "storage/batch_format.h"
#include "storage/slog.h"

/* Kernel 6.2 uapi; liburing 2.3's own copy of io_uring.h predates them. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#define CONN_IN_INITIAL (64u * 1024)
#define CONN_OUT_KEEP (1u << 20)       /* a larger response buffer is freed once sent */
#define ACCEPT_BACKOFF_MIN_NS 100000000ull
#define ACCEPT_BACKOFF_MAX_NS 1000000000ull
#define ACCEPT_LOG_EVERY_NS (60ull * 1000000000ull)

static void shard_pbuf_return(struct shard *sh, int bid);
static void req_mem_release(struct broker *b, int64_t n);
static void conn_ip_release(struct broker *b, int slot);
static int conn_reserve(struct conn *c, uint32_t need);
static void conn_send_head(struct conn *c, struct conn_req *r);
static void conn_process(struct conn *c);
static void conn_arm_recv(struct conn *c);
static void conn_recv_done(struct io_op *op, int res, unsigned flags);
static void conn_send_done(struct io_op *op, int res, unsigned flags);
static void conn_sent(struct conn *c);
static void conn_tls_recv(struct conn *c);
static void conn_tls_on_recv(struct conn *c, int res);
static void conn_tls_pump(struct conn *c);
static void conn_tls_on_send(struct conn *c, int res);

static void conn_free(struct conn *c)
{
	struct shard *sh = c->sh;

	shard_stat_add(&sh->stats.connections_open, (uint64_t)-1);
	__atomic_fetch_sub(&sh->b->conns.open, 1, __ATOMIC_RELAXED);
	conn_ip_release(sh->b, c->ip_slot);
	if (c->vbid >= 0)
		shard_pbuf_return(sh, c->vbid);
	req_mem_release(sh->b, c->in_charge);
	free(c->in);
	free(c->out);
	free(c->iov);
	tls_conn_free(c->tls);
	free(c->sasl);
	for (int i = 0; i < CONN_PIPE; i++)
		if (c->pipe[i])
			c->ops->fini(c->pipe[i]);
	free(c);
}

/* ---- request memory (queued.max.request.bytes) ------------------------ */

/* Reserve n bytes of the broker's request memory: -ENOBUFS when it has no
 * room for them now (the connection waits), -E2BIG when it never will.
 * Lock-free: a compare-and-swap that never lets the sum pass the limit. */
static int req_mem_reserve(struct broker *b, int64_t n)
{
	int64_t limit = b->set.queued_max_request_bytes;
	int64_t cur = __atomic_load_n(&b->conns.req_mem, __ATOMIC_RELAXED);

	if (limit >= 0 && n > limit)
		return -E2BIG;
	do {
		if (limit >= 0 && cur + n > limit)
			return -ENOBUFS;
	} while (!__atomic_compare_exchange_n(&b->conns.req_mem, &cur, cur + n, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return 0;
}

static void req_mem_release(struct broker *b, int64_t n)
{
	if (n)
		__atomic_fetch_sub(&b->conns.req_mem, n, __ATOMIC_RELAXED);
}

/* Resize the connection's input buffer to cap bytes (0: none); its
 * unparsed bytes start at in_off == 0 and fit. A buffer above the initial
 * size is charged to the request memory, a smaller one is not. */
static int conn_in_resize(struct conn *c, uint32_t cap)
{
	struct broker *b = c->sh->b;
	uint32_t charge = cap > CONN_IN_INITIAL ? cap : 0;
	int64_t delta = (int64_t)charge - (int64_t)c->in_charge;
	uint8_t *n = NULL;
	int rc;

	if (delta > 0 && (rc = req_mem_reserve(b, delta)) < 0)
		return rc;
	if (cap) {
		n = realloc(c->in, cap); /* style: allow growth to a larger frame, or back after one */
		if (!n) {
			if (delta > 0)
				req_mem_release(b, delta);
			return -ENOMEM;
		}
	} else {
		free(c->in);
	}
	if (delta < 0)
		req_mem_release(b, -delta);
	c->in = n;
	c->in_cap = cap;
	c->in_charge = charge;
	return 0;
}

/* The connection waits for request memory: in order, on the shard's memq
 * (in front again when a retry still found no room). */
static void conn_memq_add(struct conn *c)
{
	struct shard *sh = c->sh;

	if (c->mem_wait)
		return;
	c->mem_wait = 1;
	if (sh->memq_front) {
		c->memq_next = sh->memq;
		sh->memq = c;
		if (!sh->memq_tail)
			sh->memq_tail = c;
		return;
	}
	c->memq_next = NULL;
	if (sh->memq_tail)
		sh->memq_tail->memq_next = c;
	else
		sh->memq = c;
	sh->memq_tail = c;
}

static void conn_memq_remove(struct conn *c)
{
	struct shard *sh = c->sh;
	struct conn **pp = &sh->memq, *prev = NULL;

	while (*pp && *pp != c) {
		prev = *pp;
		pp = &(*pp)->memq_next;
	}
	if (*pp) {
		*pp = c->memq_next;
		if (sh->memq_tail == c)
			sh->memq_tail = prev;
	}
	c->memq_next = NULL;
	c->mem_wait = 0;
}

/* Memory was given back (here or on another shard): the waiting
 * connections read on, in order, while there is room. */
void conn_retry_memq(struct shard *sh)
{
	sh->memq_front = 1;
	while (sh->memq) {
		struct conn *c = sh->memq;

		conn_memq_remove(c);
		conn_arm_recv(c);
		if (c->mem_wait)
			break;   /* still no room: back in front */
	}
	sh->memq_front = 0;
}

/* ---- connection limits (max.connections, max.connections.per.ip) ------ */

/* A peer address as a 32-bit key of the per-address table: an IPv4
 * address (also v4-mapped IPv6) itself, other IPv6 addresses hashed (two
 * that collide share one count); never 0. */
static uint32_t conn_ip_key(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint32_t k = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET) {
		k = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
	} else if (ss.ss_family == AF_INET6) {
		const uint8_t *a = ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
			k = be32_load(a + 12);
		} else {
			k = 2166136261u;   /* FNV-1a */
			for (int i = 0; i < 16; i++)
				k = (k ^ a[i]) * 16777619u;
		}
	}
	return k ? k : 1;
}

#define IP_PROBES 64

/* Count one more connection from `key`: its slot, -1 when the table has
 * no room near its place (not counted, admitted), -EMLINK over the limit.
 * A word is (key << 32 | count); one with count 0 is free. The address's
 * word is looked for first, then the first free one claimed; a failed
 * compare-and-swap starts over, so two shards admitting the same new
 * address meet in one word (except in a rare interleaving with a word
 * being freed, where the address is counted in two words). */
static int conn_ip_acquire(struct broker *b, uint32_t key, int32_t limit)
{
	uint64_t *t = b->conns.ip_slots;
	uint32_t home = (key * 2654435761u) % BROKER_IP_SLOTS;

	for (;;) {
		int free_slot = -1, i;
		uint64_t w = 0;

		for (i = 0; i < IP_PROBES; i++) {
			int s = (int)((home + (uint32_t)i) % BROKER_IP_SLOTS);

			w = __atomic_load_n(&t[s], __ATOMIC_RELAXED);
			if ((uint32_t)w != 0 && (uint32_t)(w >> 32) == key) {
				if ((int64_t)(uint32_t)w >= limit)
					return -EMLINK;
				if (__atomic_compare_exchange_n(&t[s], &w, w + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
					return s;
				break;   /* it moved: start over */
			}
			if ((uint32_t)w == 0 && free_slot < 0)
				free_slot = s;
		}
		if (i < IP_PROBES)
			continue;
		if (free_slot < 0)
			return -1;
		if (limit < 1)
			return -EMLINK;
		w = __atomic_load_n(&t[free_slot], __ATOMIC_RELAXED);
		if ((uint32_t)w == 0 &&
		    __atomic_compare_exchange_n(&t[free_slot], &w, ((uint64_t)key << 32) | 1, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return free_slot;
	}
}

static void conn_ip_release(struct broker *b, int slot)
{
	if (slot >= 0)
		__atomic_fetch_sub(&b->conns.ip_slots[slot], 1, __ATOMIC_RELAXED);
}

void conn_close(struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->closing)
		return;
	c->closing = 1;
	if (c->mem_wait)
		conn_memq_remove(c);
	if (c->busy == 1 && c->ops->cancel(c->pipe[c->phead])) {
		/* a long-poll holds nothing in flight: it ended here (the caller
		 * frees the connection); a Fetch is never pipelined */
		c->busy = 0;
		shard_stat_add(&c->sh->stats.requests_inflight, (uint64_t)-1);
		c->phead = 0;
	}
	if (c->recv_op.inflight && (sqe = shard_sqe(c->sh))) {
		io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)&c->recv_op | SHARD_OP_IO, 0);
		io_uring_sqe_set_data64(sqe, 0);
	}
	shutdown(c->fd, SHUT_RDWR);
}

/* Free the connection once nothing refers to it any more. */
/* A connection nothing refers to any more is unlinked and freed at the top
 * of the next loop turn, never inside a call chain that may still hold
 * it (a request completing synchronously inside conn_process, say). */
void conn_maybe_free(struct conn *c)
{
	struct shard *sh = c->sh;

	if (!c->closing || c->recv_op.inflight || c->send_op.inflight || c->busy || c->zombie)
		return;
	c->zombie = 1;
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		sh->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = NULL;
	c->next = sh->zombies;
	sh->zombies = c;
}

void conn_free_zombies(struct shard *sh)
{
	while (sh->zombies) {
		struct conn *c = sh->zombies;

		sh->zombies = c->next;
		c->next = c->prev = NULL;
		conn_free(c);
	}
}

static void conn_accept_done(struct io_op *op, int res, unsigned flags)
{
	/* op is one of the shard's accept_op[]: the listener is its index */
	struct shard *sh = (struct shard *)((char *)op - offsetof(struct shard, accept_op) -
					    (size_t)op->arg * sizeof(struct io_op));

	conn_on_accept(sh, (int)op->arg, res, flags);
}

void conn_arm_accept(struct shard *sh)
{
	for (int i = 0; i < sh->nlisten; i++) {
		struct io_uring_sqe *sqe;

		if (sh->listen_fd[i] < 0 || sh->accept_op[i].inflight || !(sqe = shard_sqe(sh)))
			continue;
		io_uring_prep_multishot_accept(sqe, sh->listen_fd[i], NULL, NULL, SOCK_CLOEXEC);
		sh->accept_op[i].done = conn_accept_done;
		sh->accept_op[i].arg = (uint8_t)i;
		io_set(sqe, &sh->accept_op[i]);
	}
}

/* An accept failed. Out of descriptors (or memory) it fails again at once
 * until something closes: back off (the loop re-arms at accept_retry_ns)
 * and say so on stderr, broker-wide at most once a minute. Anything else
 * (a peer that reset before we took it) is counted and the accept goes
 * on. */
static void conn_accept_failed(struct shard *sh, int li, int res, unsigned flags)
{
	struct broker *b = sh->b;
	int64_t last;

	if (res == -ECANCELED) {
		/* ours: stopping, or the back-off below; one that ends after
		 * the back-off did is armed again here */
		if (!sh->stop && !sh->accept_wait)
			conn_arm_accept(sh);
		return;
	}
	shard_stat_add(&sh->stats.accept_errors[res == -EMFILE ? SHARD_ACCEPT_EMFILE :
						res == -ENFILE ? SHARD_ACCEPT_ENFILE : SHARD_ACCEPT_OTHER], 1);
	if (res != -EMFILE && res != -ENFILE && res != -ENOBUFS && res != -ENOMEM) {
		if (!sh->stop && !sh->accept_wait)
			conn_arm_accept(sh);
		return;
	}
	if (sh->accept_op[li].inflight && (flags & IORING_CQE_F_MORE)) {
		struct io_uring_sqe *sqe = shard_sqe(sh);

		if (sqe) {
			io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)&sh->accept_op[li] | SHARD_OP_IO, 0);
			io_uring_sqe_set_data64(sqe, 0);
		}
	}
	sh->accept_backoff_ns = !sh->accept_backoff_ns ? ACCEPT_BACKOFF_MIN_NS :
				sh->accept_backoff_ns * 2 > ACCEPT_BACKOFF_MAX_NS ? ACCEPT_BACKOFF_MAX_NS :
				sh->accept_backoff_ns * 2;
	sh->accept_retry_ns = sh->now_ns + sh->accept_backoff_ns;
	sh->accept_wait = 1;
	last = __atomic_load_n(&b->conns.accept_logged_ns, __ATOMIC_RELAXED);
	if ((!last || (uint64_t)last + ACCEPT_LOG_EVERY_NS <= sh->now_ns) &&
	    __atomic_compare_exchange_n(&b->conns.accept_logged_ns, &last, (int64_t)sh->now_ns, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		struct rlimit rl = { 0, 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		if (res == -EMFILE)
			slog(SLOG_WARN, /* style: allow slow path: once a minute at most, broker-wide */
				"shard %d: cannot accept connections: too many open files "
				"(RLIMIT_NOFILE %llu, %llu connections open): new clients wait in the listen "
				"backlog, accepts retry every 0.1-1 s; raise the limit (systemd LimitNOFILE=, "
				"ulimit -n) or set max.connections below it "
				"(sluice_accept_errors_total{reason=\"emfile\"})",
				sh->id, (unsigned long long)rl.rlim_cur,
				(unsigned long long)__atomic_load_n(&b->conns.open, __ATOMIC_RELAXED));
		else
			slog(SLOG_WARN, /* style: allow slow path: once a minute at most, broker-wide */
				"shard %d: cannot accept connections: %s: new clients wait in the listen "
				"backlog, accepts retry every 0.1-1 s%s", sh->id, strerror(-res),
				res == -ENFILE ? "; raise the system's limit (fs.file-max)" : "");
	}
}

void conn_on_accept(struct shard *sh, int li, int res, unsigned flags)
{
	struct broker *b = sh->b;
	struct conn *c;
	int one = 1, slot = -1;
	int64_t open;

	if (!(flags & IORING_CQE_F_MORE))
		sh->accept_op[li].inflight = 0;
	if (res < 0) {
		conn_accept_failed(sh, li, res, flags);
		return;
	}
	sh->accept_backoff_ns = 0;
	if (!sh->accept_op[li].inflight && !sh->stop && !sh->accept_wait)
		conn_arm_accept(sh);
	/* Kafka's limits: a connection over them is closed at once */
	open = __atomic_add_fetch(&b->conns.open, 1, __ATOMIC_RELAXED);
	if (open > b->set.max_connections) {
		__atomic_fetch_sub(&b->conns.open, 1, __ATOMIC_RELAXED);
		shard_stat_add(&sh->stats.conns_rejected[0], 1);
		close(res);
		return;
	}
	if (b->conns.ip_slots &&
	    (slot = conn_ip_acquire(b, conn_ip_key(res), b->set.max_connections_per_ip)) == -EMLINK) {
		__atomic_fetch_sub(&b->conns.open, 1, __ATOMIC_RELAXED);
		shard_stat_add(&sh->stats.conns_rejected[1], 1);
		close(res);
		return;
	}
	c = calloc(1, sizeof(*c)); /* style: allow per connection */
	if (!c) {
		__atomic_fetch_sub(&b->conns.open, 1, __ATOMIC_RELAXED);
		conn_ip_release(b, slot);
		close(res);
		return;
	}
	if (li < b->set.nlisteners && b->set.listeners[li].tls && !(c->tls = tls_conn_new(b->tls[li]))) {
		__atomic_fetch_sub(&b->conns.open, 1, __ATOMIC_RELAXED);
		conn_ip_release(b, slot);
		free(c);
		close(res);
		return;
	}
	if (li < b->set.nlisteners && b->set.listeners[li].sasl &&
	    !(c->sasl = calloc(1, sizeof(*c->sasl)))) { /* style: allow per connection */
		__atomic_fetch_sub(&b->conns.open, 1, __ATOMIC_RELAXED);
		conn_ip_release(b, slot);
		tls_conn_free(c->tls);
		free(c);
		close(res);
		return;
	}
	if (c->sasl)
		c->sasl->expire_ns = UINT64_MAX;   /* no session yet: nothing expires */
	setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = res;
	c->sh = sh;
	c->accept_ns = shard_mono_ns();
	c->active_ns = sh->now_ns;
	c->ip_slot = slot;
	c->listener = (uint8_t)li;
	c->vbid = -1;    /* input buffers come from the shard's ring until a frame is split */
	c->ops = sh->conn_ops;
	c->recv_op.done = conn_recv_done;
	c->send_op.done = conn_send_done;
	c->next = sh->conns;
	if (sh->conns)
		sh->conns->prev = c;
	sh->conns = c;
	shard_stat_add(&sh->stats.connections_accepted, 1);
	shard_stat_add(&sh->stats.connections_open, 1);
	conn_arm_recv(c);
}

/* Close connections without a request for connections.max.idle.ms: idle
 * ones and ones that stopped half-way through a frame (slowloris). A
 * connection with a request in progress, or waiting for request memory,
 * is not idle. Returns the number closed. */
int conn_close_idle(struct shard *sh)
{
	uint64_t idle_ns = (uint64_t)sh->b->set.connections_max_idle_ms * 1000000ull;
	int n = 0;

	for (struct conn *c = sh->conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->busy || c->closing || c->mem_wait || sh->now_ns - c->active_ns < idle_ns)
			continue;
		shard_stat_add(&sh->stats.conns_idle_closed, 1);
		conn_close(c);
		conn_maybe_free(c);
		n++;
	}
	return n;
}

static int conn_reserve(struct conn *c, uint32_t need);

/* Receive into the free end of the input buffer. The buffer is compacted
 * or grown only here, with no receive in flight and no request borrowing
 * it. */
/* Receive. While a request is in progress the connection is muted (as in
 * Kafka): nothing is read until its response is queued. With nothing
 * pending, data lands in a buffer of the shard's provided-buffer ring and
 * whole frames are decoded right there, so an idle connection holds no
 * input buffer; the connection's own buffer only assembles a frame split
 * across receives. */
static void conn_arm_recv(struct conn *c)
{
	struct shard *sh = c->sh;
	struct io_uring_sqe *sqe;
	uint32_t need, left;
	int rc;

	if (c->recv_op.inflight || c->closing || c->busy || c->vbid >= 0 || c->mem_wait)
		return;
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	left = c->in_len - c->in_off;
	if (c->in_cap > CONN_IN_INITIAL) {
		/* a large frame was handled: its buffer goes back (to the size
		 * the next frame needs, or the initial one, or none) */
		uint32_t keep = c->want > CONN_IN_INITIAL ? c->want : left ? CONN_IN_INITIAL : 0;

		if (keep < left)
			keep = left;
		if (keep < c->in_cap) {
			if (c->in_off) {
				memmove(c->in, c->in + c->in_off, left);
				c->in_len = left;
				c->in_off = 0;
			}
			(void)conn_in_resize(c, keep);   /* a shrink that fails keeps the buffer */
		}
	}
	if (c->in_len == 0 && sh->pbuf_ring && !c->pbuf_starved && !c->tls) {
		if (!(sqe = shard_sqe(sh)))
			return;
		io_uring_prep_recv(sqe, c->fd, NULL, SHARD_PBUF_SIZE, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = SHARD_PBUF_GROUP;
		io_set(sqe, &c->recv_op);
		return;
	}
	c->pbuf_starved = 0;
	need = c->want > c->in_len - c->in_off ? c->want : 0;
	if (c->in_off && (need || c->in_len == c->in_cap)) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	if ((rc = conn_reserve(c, need > CONN_IN_INITIAL ? need : CONN_IN_INITIAL)) < 0) {
		if (rc == -ENOBUFS) {
			/* no request memory for the frame now: stop reading this
			 * connection until some is given back (Kafka's memory
			 * pool mutes it the same way) */
			if (!sh->memq_front)   /* (not again at each retry) */
				shard_stat_add(&sh->stats.req_mem_waits, 1);
			conn_memq_add(c);
			return;
		}
		if (rc == -E2BIG)
			shard_stat_add(&sh->stats.req_mem_refused, 1);
		conn_close(c);
		conn_maybe_free(c);
		return;
	}
	if (c->in_len == c->in_cap)
		return;
	if (c->tls) {
		conn_tls_recv(c);   /* plaintext from what was received, or receive more */
		return;
	}
	if (!(sqe = shard_sqe(sh)))
		return;
	io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	io_set(sqe, &c->recv_op);
}

static void shard_pbuf_return(struct shard *sh, int bid)
{
	io_uring_buf_ring_add(sh->pbuf_ring, sh->pbufs + (size_t)bid * SHARD_PBUF_SIZE, SHARD_PBUF_SIZE,
			      (unsigned short)bid, io_uring_buf_ring_mask(SHARD_PBUFS), 0);
	io_uring_buf_ring_advance(sh->pbuf_ring, 1);
}

/* The ring buffer's frames are done: what is left (a split frame) moves
 * to the connection's own buffer, and the ring buffer goes back. */
static int conn_view_end(struct conn *c)
{
	uint32_t left = c->vlen - c->voff;
	int rc = 0;

	if (left) {
		if ((rc = conn_reserve(c, left > CONN_IN_INITIAL ? left : CONN_IN_INITIAL)) == 0) {
			memcpy(c->in, c->vbuf + c->voff, left);
			c->in_off = 0;
			c->in_len = left;
		}
	}
	shard_pbuf_return(c->sh, c->vbid);
	c->vbid = -1;
	c->vbuf = NULL;
	c->vlen = c->voff = 0;
	return rc;
}

/* The client closed its side: requests it sent before are still carried
 * out (acks=0 produces, say), then the connection goes. */
static void conn_peer_closed(struct conn *c)
{
	c->peer_closed = 1;
	conn_process(c);
	if (!c->busy) {
		conn_close(c);
		conn_maybe_free(c);
	}
}

static void conn_on_recv(struct conn *c, int res, unsigned flags)
{
	if (c->tls) {
		conn_tls_on_recv(c, res);   /* ciphertext */
		return;
	}
	c->recv_op.inflight = 0;
	if (res == -ENOBUFS && !c->closing) {
		/* the ring ran dry: this once, receive into our own buffer */
		shard_stat_add(&c->sh->stats.pbuf_starved, 1);
		c->pbuf_starved = 1;
		conn_arm_recv(c);
		return;
	}
	if (flags & IORING_CQE_F_BUFFER) {
		int bid = (int)(flags >> IORING_CQE_BUFFER_SHIFT);

		if (res <= 0 || c->closing) {
			shard_pbuf_return(c->sh, bid);
		} else {
			c->vbid = bid;
			c->vbuf = c->sh->pbufs + (size_t)bid * SHARD_PBUF_SIZE;
			c->vlen = (uint32_t)res;
			c->voff = 0;
			conn_process(c);
			conn_arm_recv(c);
			return;
		}
	}
	if (res == 0 && !c->closing) {
		conn_peer_closed(c);
		return;
	}
	if (res < 0 || c->closing) {
		conn_close(c);
		conn_maybe_free(c);
		return;
	}
	c->in_len += (uint32_t)res;
	conn_process(c);
	conn_arm_recv(c);
}

/* Grow the buffer to hold a whole frame of `need` bytes from in_off == 0
 * (no request in progress, no receive in flight). */
static int conn_reserve(struct conn *c, uint32_t need)
{
	/* grows to the frame in progress; given back once it is handled
	 * (conn_arm_recv) */
	return need > c->in_cap ? conn_in_resize(c, need) : 0;
}

/* ---- frames: taken up as the pipeline admits them --------------------- */

const char *conn_principal(const struct conn *c)
{
	if (c->sasl && c->sasl->state == SASL_DONE)
		return c->sasl->principal;
	if (c->tls && tls_conn_principal(c->tls)[0])
		return tls_conn_principal(c->tls);
	return "User:ANONYMOUS";
}

static void conn_process(struct conn *c)
{
	while (!c->closing && c->busy < CONN_PIPE) {
		int view = c->vbid >= 0;
		uint8_t *p = view ? c->vbuf + c->voff : c->in + c->in_off;
		uint32_t avail = view ? c->vlen - c->voff : c->in_len - c->in_off;
		int32_t size;

		if (avail < 4)
			break;
		size = (int32_t)be32_load(p);
		if (size < 8 || (uint32_t)size > c->sh->b->set.max_request_bytes) {
			/* like Kafka: a frame over socket.request.max.bytes (or a
			 * negative size) closes the connection before anything is
			 * allocated for it */
			shard_stat_add(&c->sh->stats.bad_frames, 1);
			conn_close(c);
			conn_maybe_free(c);
			return;
		}
		if (c->sasl && sasl_preauth_refuse(c->sasl, (uint32_t)size, p + 4, avail - 4)) {
			/* before authentication: ApiVersions, SaslHandshake and
			 * SaslAuthenticate only, each small (CVE-2022-34917:
			 * nothing is allocated for a larger frame) */
			shard_stat_add(&c->sh->stats.sasl_preauth_closed, 1);
			conn_close(c);
			conn_maybe_free(c);
			return;
		}
		if (avail < 4 + (uint32_t)size && 4 + (uint32_t)size > CONN_IN_INITIAL &&
		    c->sh->b->set.queued_max_request_bytes >= 0 &&
		    4 + (int64_t)size > c->sh->b->set.queued_max_request_bytes) {
			/* larger than all of queued.max.request.bytes: it could
			 * never be read */
			shard_stat_add(&c->sh->stats.req_mem_refused, 1);
			conn_close(c);
			conn_maybe_free(c);
			return;
		}
		if (avail < 4 + (uint32_t)size) {
			/* conn_arm_recv makes room for the whole frame (once
			 * nothing is in progress) */
			if (!c->busy)
				c->want = 4 + (uint32_t)size;
			break;
		}
		if (c->sasl && c->sh->now_ns >= c->sasl->expire_ns &&
		    sasl_session_expired(c->sasl, p + 4, (uint32_t)size)) {
			/* KIP-368: the session is over and this is no
			 * re-authentication: closed, not served (Kafka) */
			shard_stat_add(&c->sh->stats.sasl_expired_closed, 1);
			conn_close(c);
			conn_maybe_free(c);
			return;
		}
		if (c->busy && !c->ops->may_follow(c->pipe[c->phead], p + 4))
			break;
		int slot = (c->phead + c->busy) % CONN_PIPE;
		struct conn_req *r = c->pipe[slot] ? c->pipe[slot] : (c->pipe[slot] = c->ops->slot_new(c));

		if (!r) {
			if (!c->busy) {
				conn_close(c);
				conn_maybe_free(c);
				return;
			}
			break;
		}
		c->want = 0;
		c->busy++;
		shard_stat_add(&c->sh->stats.requests_inflight, 1);
		if (view)
			c->voff += 4 + (uint32_t)size;
		else
			c->in_off += 4 + (uint32_t)size;
		c->ops->dispatch(r, p + 4, (uint32_t)size);
	}
	if (!c->busy && c->vbid >= 0 && !c->zombie && conn_view_end(c) < 0) {
		conn_close(c);
		conn_maybe_free(c);
	}
}

/* ---- responses -------------------------------------------------------- */

static void conn_send_more(struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->tls) {
		conn_tls_pump(c);   /* encrypted, a piece at a time */
		return;
	}
	if (!(sqe = shard_sqe(c->sh))) {
		conn_close(c);
		return;
	}
	/* a fetch of many partitions is more iovecs than one sendmsg takes
	 * (IOV_MAX, 1024: EMSGSIZE, and the connection was closed, so a
	 * consumer of 520 partitions never got a full fetch): IOV_MAX at a
	 * time, the rest after it as after a partial send */
	c->msg.msg_iovlen = c->iov_rest < IOV_MAX ? c->iov_rest : IOV_MAX;
	if (c->send_left >= SEND_ZC_MIN && !c->sh->no_send_zc && !c->zc_copied) {
		/* large responses (fetches of record data): zero copy; the
		 * kernel reports when it no longer needs the pages, and
		 * whether it had to copy them after all */
		io_uring_prep_sendmsg_zc(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
		if (!c->sh->no_zc_report)
			sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
		shard_stat_add(&c->sh->stats.send_zc, 1);
	} else {
		io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
	}
	io_set(sqe, &c->send_op);
}

/* The head request is over: its response was sent (or it had none, or
 * the connection is closing). The next one's response may go out. */
static void conn_end_head(struct conn *c)
{
	struct conn_req *r = c->pipe[c->phead];

	c->ops->end(r);
	r->ready = 0;
	c->active_ns = c->sh->now_ns;
	c->phead = (c->phead + 1) % CONN_PIPE;
	c->busy--;
	shard_stat_add(&c->sh->stats.requests_inflight, (uint64_t)-1);
	if (c->busy) {
		conn_process(c);   /* a full pipeline takes the next produce */
		conn_pump(c);
		return;
	}
	c->phead = 0;   /* an idle connection starts over at its first slot */
	if (c->closing) {
		conn_maybe_free(c);
		return;
	}
	conn_process(c);
	if (c->peer_closed) {
		if (!c->busy) {
			conn_close(c);
			conn_maybe_free(c);
		}
		return;
	}
	conn_arm_recv(c);
}

/* Send what is next in request order: the head's response once it is
 * built; requests without one (acks=0) end as their turn comes. */
void conn_pump(struct conn *c)
{
	while (c->busy && !c->sending) {
		struct conn_req *r = c->pipe[c->phead];

		if (!r->ready)
			return;
		if (r->no_response || c->closing) {
			conn_end_head(c);   /* pumps the rest itself */
			return;
		}
		conn_send_head(c, r);
		return;
	}
}

void conn_abort(struct conn *c, struct conn_req *r)
{
	shard_stat_add(&c->sh->stats.bad_frames, 1);
	conn_close(c);
	r->ready = 1;
	r->no_response = 1;
	conn_pump(c);
}

static void conn_send_head(struct conn *c, struct conn_req *r)
{
	struct kafka_writer w;
	int n;

	kafka_writer_init_measure(&w, true);
	c->ops->encode(r, &w);
	if (w.err) {
		conn_abort(c, r);
		return;
	}
	if (w.len > c->out_cap) {
		free(c->out);
		c->out = malloc(w.len); /* style: allow growth to a larger response */
		c->out_cap = c->out ? (uint32_t)w.len : 0;
	}
	if (w.iov_cnt + 1 > c->iov_cap) {
		free(c->iov);
		c->iov = malloc(sizeof(struct iovec) * (size_t)(w.iov_cnt + 1)); /* style: allow growth */
		c->iov_cap = c->iov ? w.iov_cnt + 1 : 0;
	}
	if (!c->out || !c->iov) {
		conn_abort(c, r);
		return;
	}
	kafka_writer_init_iov(&w, c->out, c->out_cap, c->iov, c->iov_cap);
	c->ops->encode(r, &w);
	n = kafka_writer_finish(&w);
	if (n < 0) {
		conn_abort(c, r);
		return;
	}
	if (n == 0) {
		c->iov[0] = (struct iovec){ c->out, w.len };
		n = 1;
	}
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->iov;
	c->msg.msg_iovlen = (size_t)n;
	c->iov_rest = (size_t)n;
	c->send_left = 0;
	for (int i = 0; i < n; i++)
		c->send_left += c->iov[i].iov_len;
	c->sending = 1;
	conn_send_more(c);
}

/* The head's response is out: it ends, and the next may go. */
static void conn_sent(struct conn *c)
{
	c->sending = 0;
	if (c->close_after)
		conn_close(c);   /* a failed authentication: answered, then closed */
	if (c->out_cap > CONN_OUT_KEEP) {
		/* a large response's buffer goes back once it is sent */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	conn_end_head(c);
}

static void conn_on_send(struct conn *c, int res, unsigned flags)
{
	if (c->tls) {
		conn_tls_on_send(c, res);
		return;
	}
	if (flags & IORING_CQE_F_NOTIF) {
		/* the kernel is done with the zero-copy pages */
		if (((uint32_t)res & IORING_NOTIF_USAGE_ZC_COPIED) && !c->zc_copied) {
			/* it copied them (a loopback or local peer): zero copy
			 * only costs us here, since the request ends at this
			 * notification rather than when the bytes are sent */
			c->zc_copied = 1;
			shard_stat_add(&c->sh->stats.send_zc_copied, 1);
		}
		if (--c->zc_notifs == 0) {
			c->send_op.inflight = 0;
			if (c->send_done) {
				c->send_done = 0;
				conn_sent(c);
			} else {
				conn_maybe_free(c);
			}
		}
		return;
	}
	if (flags & IORING_CQE_F_MORE)
		c->zc_notifs++;           /* a notification follows */
	else if (!c->zc_notifs)
		c->send_op.inflight = 0;
	if (res == -EINVAL || res == -EOPNOTSUPP) {
		if (!c->sh->no_send_zc && !c->zc_copied && c->send_left >= SEND_ZC_MIN) {
			/* first without the usage report (kernels before 6.2),
			 * then without zero copy: plain sendmsg from now on */
			if (!c->sh->no_zc_report)
				c->sh->no_zc_report = 1;
			else
				c->sh->no_send_zc = 1;
			conn_send_more(c);
			return;
		}
	}
	if (res < 0 || c->closing) {
		conn_close(c);
		if (c->zc_notifs) {
			c->send_done = 1;   /* pages may still be the kernel's */
			return;
		}
		conn_sent(c);
		return;
	}
	c->send_left -= (size_t)res;
	if (c->send_left) {
		/* partial send: skip what went out */
		size_t done = (size_t)res;

		while (done && c->iov_rest) {
			if (done >= c->msg.msg_iov->iov_len) {
				done -= c->msg.msg_iov->iov_len;
				c->msg.msg_iov++;
				c->iov_rest--;
			} else {
				c->msg.msg_iov->iov_base = (uint8_t *)c->msg.msg_iov->iov_base + done;
				c->msg.msg_iov->iov_len -= done;
				done = 0;
			}
		}
		conn_send_more(c);
		return;
	}
	if (c->zc_notifs) {
		c->send_done = 1;   /* the data is still the kernel's: end at the notification */
		return;
	}
	conn_sent(c);
}

/* ---- TLS (an SSL listener's connections, dataplane/tls.h) -------------- */

/* TLS receives ciphertext into the connection's tls_conn and decrypts it
 * into the input buffer, where frames are taken up as for plaintext (no
 * provided buffers); sends encrypt the response a piece at a time into
 * ciphertext that goes out with plain sends (no zero copy: the kernel
 * would need kTLS for that, and has none here). The handshake goes on as
 * bytes arrive, on the shard's ring like everything else. */

/* Room in the input buffer (conn_arm_recv made it): decrypt what was
 * received into it, else receive more ciphertext. */
static void conn_tls_recv(struct conn *c)
{
	struct shard *sh = c->sh;
	struct io_uring_sqe *sqe;
	int n, got = 0;

	while ((n = tls_conn_read(c->tls, c->in + c->in_len, c->in_cap - c->in_len)) > 0) {
		c->in_len += (uint32_t)n;
		got = 1;
		if (c->in_len == c->in_cap)
			break;
	}
	if (tls_conn_established(c->tls)) {
		/* the handshake is over: the record layer stays OpenSSL's (no
		 * kTLS in this kernel: docs/security.md) */
		shard_stat_add(&sh->stats.tls_handshakes, 1);
		shard_stat_add(&sh->stats.tls_record_openssl, 1);
	}
	if (!got && n < 0 && n != -EPIPE) {
		/* the handshake failed (a protocol version refused, an
		 * untrusted certificate) or a record was bad: the alert that
		 * says why goes out first, a few bytes into an empty socket
		 * buffer, never waited for */
		const uint8_t *p;
		uint32_t len = c->send_op.inflight ? 0 : tls_conn_tx(c->tls, &p);

		if (len)
			(void)send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		shard_stat_add(&sh->stats.tls_failures, 1);
		conn_close(c);
		conn_maybe_free(c);
		return;
	}
	conn_tls_pump(c);   /* handshake messages, session tickets */
	if (got) {
		conn_process(c);
		conn_arm_recv(c);
		return;
	}
	if (n == 0) {
		if (!(sqe = shard_sqe(sh)))
			return;
		io_uring_prep_recv(sqe, c->fd, tls_conn_rx(c->tls), TLS_RX_SIZE, 0);
		io_set(sqe, &c->recv_op);
		return;
	}
	conn_peer_closed(c);   /* close_notify: as a TCP end of file */
}

static void conn_tls_on_recv(struct conn *c, int res)
{
	c->recv_op.inflight = 0;
	if (res > 0 && !c->closing && tls_conn_feed(c->tls, (uint32_t)res) == 0) {
		conn_arm_recv(c);
		return;
	}
	if (res == 0 && !c->closing) {
		conn_peer_closed(c);
		return;
	}
	conn_close(c);
	conn_maybe_free(c);
}

/* Send the ciphertext waiting, encrypting the next piece of the head's
 * response when none is; the response is sent once all of it is. */
static void conn_tls_pump(struct conn *c)
{
	struct io_uring_sqe *sqe;
	const uint8_t *p;
	uint32_t n;

	if (c->send_op.inflight)
		return;
	n = tls_conn_tx(c->tls, &p);
	if (!n && c->sending && c->send_left) {
		if (tls_conn_write(c->tls, &c->msg, &c->send_left, TLS_TX_SIZE - 1024) < 0) {
			conn_close(c);
			conn_sent(c);
			return;
		}
		n = tls_conn_tx(c->tls, &p);
	}
	if (!n) {
		if (c->sending && !c->send_left)
			conn_sent(c);
		return;
	}
	if (!(sqe = shard_sqe(c->sh))) {
		conn_close(c);
		return;
	}
	io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
	io_set(sqe, &c->send_op);
}

static void conn_tls_on_send(struct conn *c, int res)
{
	c->send_op.inflight = 0;
	if (res < 0 || c->closing) {
		conn_close(c);
		if (c->sending)
			conn_sent(c);
		else
			conn_maybe_free(c);
		return;
	}
	tls_conn_sent(c->tls, (uint32_t)res);
	conn_tls_pump(c);
}

/* ---- completions (io_op.done, called by the loop) --------------------- */

static void conn_recv_done(struct io_op *op, int res, unsigned flags)
{
	conn_on_recv((struct conn *)((char *)op - offsetof(struct conn, recv_op)), res, flags);
}

static void conn_send_done(struct io_op *op, int res, unsigned flags)
{
	conn_on_send((struct conn *)((char *)op - offsetof(struct conn, send_op)), res, flags);
}
