/* dataplane/shard.c — the shard loop: io_uring, TCP connections, framing,
 * dispatch through the ApiKey table, responses in request order. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/part.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_broker.h"
#include "dataplane/shard.h"
#include "storage/recompress.h"
#include "storage/batch_format.h"
#include "storage/compact.h"
#include "storage/compress.h"

/* Kernel 6.2 uapi; liburing 2.3's own copy of io_uring.h predates them. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#define CONN_IN_INITIAL (64u * 1024)
#define CONN_ARENA_MIN (1u << 20)
#define CONN_ARENA_PIPE (64u * 1024)   /* a pipelined produce's, beyond its frame */
#define CONN_ARENA_KEEP (8u << 20)     /* a larger arena is freed when its request ends */
#define CONN_OUT_KEEP (1u << 20)       /* a larger response buffer is freed once sent */
#define ACCEPT_BACKOFF_MIN_NS 100000000ull
#define ACCEPT_BACKOFF_MAX_NS 1000000000ull
#define ACCEPT_LOG_EVERY_NS (60ull * 1000000000ull)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct io_uring_sqe *shard_sqe(struct shard *sh)
{
	return store_sqe(&sh->st);
}

static void io_set(struct io_uring_sqe *sqe, struct io_op *op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)op | SHARD_OP_IO);
	op->inflight = 1;
}

/* ---- setup ------------------------------------------------------------ */

static int listen_socket(const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	char ps[16];
	int fd, one = 1, rc;

	snprintf(ps, sizeof(ps), "%d", port);
	if ((rc = getaddrinfo(host, ps, &hints, &ai)) != 0) {
		snprintf(err, errlen, "cannot resolve listener host '%s': %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		snprintf(err, errlen, "socket: %s", strerror(-rc));
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, strerror(-rc));
		close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	return fd;
}

int shard_probe_port(const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	char ps[16];
	int fd, rc = 0;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai) != 0) {
		snprintf(err, errlen, "cannot resolve listener host '%s'", host);
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		int one = 1;

		/* REUSEADDR (not REUSEPORT): TIME_WAIT leftovers of a restart are
		 * fine, a live listener is not */
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s:%d: %s%s", host, port, strerror(-rc),
			 rc == -EADDRINUSE ? " (another process holds the port: choose another with --listen)" : "");
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

int shard_create(struct broker *b, int id, struct shard **out, char *err, size_t errlen)
{
	struct shard *sh = calloc(1, sizeof(*sh)); /* style: allow shard setup */
	struct io_uring_params p;
	int rc;

	if (!sh)
		return -ENOMEM;
	sh->id = id;
	sh->b = b;
	sh->listen_fd = -1;
	memset(&p, 0, sizeof(p));
	/* created disabled: the shard thread enables it and so becomes its
	 * single issuer */
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_R_DISABLED;
	p.cq_entries = 16384;
	rc = io_uring_queue_init_params(4096, &sh->ring, &p);
	if (rc == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED;
		p.cq_entries = 16384;
		rc = io_uring_queue_init_params(4096, &sh->ring, &p);
	}
	if (rc < 0) {
		snprintf(err, errlen, "io_uring_queue_init: %s", strerror(-rc));
		free(sh);
		return rc;
	}
	if ((rc = store_init(&sh->st, &sh->ring, b->set.tail_budget)) < 0) {
		snprintf(err, errlen, "store_init: %s", strerror(-rc));
		io_uring_queue_exit(&sh->ring);
		free(sh);
		return rc;
	}
	sh->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = listen_socket(b->set.listen_host, b->set.listen_port, err, errlen);
	if (rc < 0 || sh->wake_fd < 0) {
		if (sh->wake_fd >= 0)
			close(sh->wake_fd);
		store_fini(&sh->st);
		io_uring_queue_exit(&sh->ring);
		free(sh);
		return rc < 0 ? rc : -EMFILE;
	}
	sh->listen_fd = rc;
	sh->rbufs = calloc(SHARD_RBUFS, sizeof(*sh->rbufs)); /* style: allow shard setup */
	for (int i = 0; sh->rbufs && i < SHARD_RBUFS; i++)
		if (posix_memalign((void **)&sh->rbufs[sh->nrbufs], 4096, SHARD_RBUF_SIZE) == 0)
			sh->nrbufs++;
	if ((rc = recompress_create(&sh->recompress)) < 0) {
		snprintf(err, errlen, "recompression scratch: %s", strerror(-rc));
		shard_destroy(sh);
		return rc;
	}
	/* the codecs, and the window Produce decompresses batches through */
	if ((rc = compress_ctx_create(&sh->compress)) < 0) {
		snprintf(err, errlen, "compress_ctx_create: %s", strerror(-rc));
		shard_destroy(sh);
		return rc;
	}
	sh->accept_op.kind = IO_ACCEPT;
	sh->wake_op.kind = IO_WAKE;
	sh->native_op.kind = IO_NATIVE;
	if ((b->set.native_port || b->dpdk) &&
	    (rc = native_shard_open(sh, b->set.native_host, b->set.native_port, err, errlen)) < 0) {
		shard_destroy(sh);
		return rc;
	}
	b->wake_fd[id] = sh->wake_fd;
	b->sleeping[id] = &sh->sleeping;
	*out = sh;
	return 0;
}

void shard_destroy(struct shard *sh)
{
	if (!sh)
		return;
	native_shard_close(sh);
	compactor_destroy(sh->compactor);
	compress_ctx_destroy(sh->compress);
	recompress_destroy(sh->recompress);
	if (sh->listen_fd >= 0)
		close(sh->listen_fd);
	close(sh->wake_fd);
	store_fini(&sh->st);
	io_uring_queue_exit(&sh->ring);
	free(sh->pbuf_ring);
	free(sh->pbufs);
	free(sh->backlog);
	free(sh->backlog_to);
	for (int i = 0; i < sh->nrbufs; i++)
		free(sh->rbufs[i]);
	free(sh->rbufs);
	free(sh);
}

/* ---- messages --------------------------------------------------------- */

void shard_send(struct shard *sh, int to, const struct shard_msg *m)
{
	if (to == sh->id) {
		struct shard_msg copy = *m;

		copy.fn(sh, &copy);
		return;
	}
	if (sh->backlog_len == 0 && broker_send(sh->b, sh->id, to, m) == 0)
		return;
	/* ring full: park in order and retry next loop turn (never spin) */
	shard_stat_add(&sh->stats.ring_full, 1);
	if (sh->backlog_len == sh->backlog_cap) {
		int ncap = sh->backlog_cap ? sh->backlog_cap * 2 : 64;
		struct shard_msg *nb = realloc(sh->backlog, (size_t)ncap * sizeof(*nb)); /* style: allow rare overflow */
		int *nt = realloc(sh->backlog_to, (size_t)ncap * sizeof(*nt)); /* style: allow rare overflow */

		if (!nb || !nt)
			abort();
		sh->backlog = nb;
		sh->backlog_to = nt;
		sh->backlog_cap = ncap;
	}
	sh->backlog[sh->backlog_len] = *m;
	sh->backlog_to[sh->backlog_len++] = to;
}

static void shard_flush_backlog(struct shard *sh)
{
	int i = 0;

	while (i < sh->backlog_len && broker_send(sh->b, sh->id, sh->backlog_to[i], &sh->backlog[i]) == 0)
		i++;
	if (i) {
		memmove(sh->backlog, sh->backlog + i, (size_t)(sh->backlog_len - i) * sizeof(*sh->backlog));
		memmove(sh->backlog_to, sh->backlog_to + i, (size_t)(sh->backlog_len - i) * sizeof(int));
		sh->backlog_len -= i;
	}
}

static int shard_drain_rings(struct shard *sh)
{
	struct broker *b = sh->b;
	struct shard_msg m;
	int n = 0;

	for (int from = 0; from <= b->set.nshards; from++) {
		struct spsc *r = b->rings[from][sh->id];

		if (!r)
			continue;
		for (int k = 0; k < 256 && spsc_pop(r, &m); k++, n++)
			m.fn(sh, &m);
	}
	return n;
}

static int shard_rings_empty(struct shard *sh)
{
	struct broker *b = sh->b;

	for (int from = 0; from <= b->set.nshards; from++)
		if (b->rings[from][sh->id] && !spsc_empty(b->rings[from][sh->id]))
			return 0;
	return 1;
}

/* ---- connections ------------------------------------------------------ */

static void conn_arm_recv(struct conn *c);
static void conn_process(struct conn *c);

static void shard_pbuf_return(struct shard *sh, int bid);

static void req_mem_release(struct broker *b, int64_t n);
static void conn_ip_release(struct broker *b, int slot);

static void ctx_more_free(struct kafka_ctx *ctx);

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
	for (int i = 0; i < CONN_PIPE; i++)
		if (c->pipe[i]) {
			ctx_more_free(c->pipe[i]);
			free(c->pipe[i]->arena_mem);
			if (c->pipe[i] != &c->ctx)
				free(c->pipe[i]);
		}
	free(c);
}

static void release_holds(struct kafka_ctx *ctx);

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
static void shard_retry_memq(struct shard *sh)
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

static void conn_close(struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->closing)
		return;
	c->closing = 1;
	if (c->mem_wait)
		conn_memq_remove(c);
	if (c->busy == 1 && c->pipe[c->phead]->parked) {
		/* a long-poll holds nothing in flight: end it here (the caller
		 * frees the connection); a Fetch is never pipelined */
		struct kafka_ctx *ctx = c->pipe[c->phead];

		kafka_ctx_unpark(ctx);
		release_holds(ctx);
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
static void conn_maybe_free(struct conn *c)
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

static void shard_free_zombies(struct shard *sh)
{
	while (sh->zombies) {
		struct conn *c = sh->zombies;

		sh->zombies = c->next;
		c->next = c->prev = NULL;
		conn_free(c);
	}
}

static void shard_arm_accept(struct shard *sh)
{
	struct io_uring_sqe *sqe = shard_sqe(sh);

	if (!sqe)
		return;
	io_uring_prep_multishot_accept(sqe, sh->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_set(sqe, &sh->accept_op);
}

/* An accept failed. Out of descriptors (or memory) it fails again at once
 * until something closes: back off (the loop re-arms at accept_retry_ns)
 * and say so on stderr, broker-wide at most once a minute. Anything else
 * (a peer that reset before we took it) is counted and the accept goes
 * on. */
static void shard_accept_failed(struct shard *sh, int res, unsigned flags)
{
	struct broker *b = sh->b;
	int64_t last;

	if (res == -ECANCELED)
		return;   /* ours: stopping, or the back-off below */
	shard_stat_add(&sh->stats.accept_errors[res == -EMFILE ? SHARD_ACCEPT_EMFILE :
						res == -ENFILE ? SHARD_ACCEPT_ENFILE : SHARD_ACCEPT_OTHER], 1);
	if (res != -EMFILE && res != -ENFILE && res != -ENOBUFS && res != -ENOMEM) {
		if (!sh->accept_op.inflight && !sh->stop)
			shard_arm_accept(sh);
		return;
	}
	if (sh->accept_op.inflight && (flags & IORING_CQE_F_MORE)) {
		struct io_uring_sqe *sqe = shard_sqe(sh);

		if (sqe) {
			io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)&sh->accept_op | SHARD_OP_IO, 0);
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
			fprintf(stderr, /* style: allow slow path: once a minute at most, broker-wide */
				"sluiced: shard %d: cannot accept connections: too many open files "
				"(RLIMIT_NOFILE %llu, %llu connections open): new clients wait in the listen "
				"backlog, accepts retry every 0.1-1 s; raise the limit (systemd LimitNOFILE=, "
				"ulimit -n) or set max.connections below it "
				"(sluice_accept_errors_total{reason=\"emfile\"})\n",
				sh->id, (unsigned long long)rl.rlim_cur,
				(unsigned long long)__atomic_load_n(&b->conns.open, __ATOMIC_RELAXED));
		else
			fprintf(stderr, /* style: allow slow path: once a minute at most, broker-wide */
				"sluiced: shard %d: cannot accept connections: %s: new clients wait in the listen "
				"backlog, accepts retry every 0.1-1 s%s\n", sh->id, strerror(-res),
				res == -ENFILE ? "; raise the system's limit (fs.file-max)" : "");
	}
}

static void shard_on_accept(struct shard *sh, int res, unsigned flags)
{
	struct broker *b = sh->b;
	struct conn *c;
	int one = 1, slot = -1;
	int64_t open;

	if (!(flags & IORING_CQE_F_MORE))
		sh->accept_op.inflight = 0;
	if (res < 0) {
		shard_accept_failed(sh, res, flags);
		return;
	}
	sh->accept_backoff_ns = 0;
	if (!sh->accept_op.inflight && !sh->stop && !sh->accept_wait)
		shard_arm_accept(sh);
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
	setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = res;
	c->sh = sh;
	c->accept_ns = now_ns();
	c->active_ns = sh->now_ns;
	c->ip_slot = slot;
	c->vbid = -1;    /* input buffers come from the shard's ring until a frame is split */
	c->recv_op.kind = IO_RECV;
	c->recv_op.c = c;
	c->send_op.kind = IO_SEND;
	c->send_op.c = c;
	c->ctx.sh = sh;
	c->ctx.c = c;
	c->pipe[0] = &c->ctx;
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
static int shard_close_idle(struct shard *sh)
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
	if (c->in_len == 0 && sh->pbuf_ring && !c->pbuf_starved) {
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

static void conn_on_recv(struct conn *c, int res, unsigned flags)
{
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
		/* the client closed its side: requests it sent before are still
		 * carried out (acks=0 produces, say), then the connection goes */
		c->peer_closed = 1;
		conn_process(c);
		if (!c->busy) {
			conn_close(c);
			conn_maybe_free(c);
		}
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

struct ctx_more {
	struct ctx_more *next;
	size_t size;
	max_align_t mem[];
};

void *kafka_ctx_alloc_more(struct kafka_ctx *ctx, size_t n)
{
	size_t size = n + 64 > CONN_ARENA_MIN ? n + 64 : CONN_ARENA_MIN;
	struct ctx_more *m;

	if (n > KAFKA_CTX_MORE_MAX || ctx->more_bytes + size > KAFKA_CTX_MORE_MAX)
		return NULL;
	m = malloc(sizeof(*m) + size); /* style: allow a response larger than its request's arena */
	if (!m)
		return NULL;
	m->next = ctx->more;
	m->size = size;
	ctx->more = m;
	ctx->more_bytes += size;
	kafka_arena_init(&ctx->arena, m->mem, size);
	return kafka_arena_alloc(&ctx->arena, n);
}

static void ctx_more_free(struct kafka_ctx *ctx)
{
	while (ctx->more) {
		struct ctx_more *m = ctx->more;

		ctx->more = m->next;
		free(m);
	}
	ctx->more_bytes = 0;
}

static int ctx_arena(struct kafka_ctx *ctx, size_t want)
{
	if (ctx->arena_cap >= want)
		return 0;
	free(ctx->arena_mem);
	ctx->arena_mem = malloc(want); /* style: allow growth to a larger request */
	ctx->arena_cap = ctx->arena_mem ? want : 0;
	return ctx->arena_mem ? 0 : -ENOMEM;
}

/* The next request slot of the pipeline (allocated once per slot and
 * connection, kept until the connection goes). */
static struct kafka_ctx *conn_next_ctx(struct conn *c)
{
	int slot = (c->phead + c->busy) % CONN_PIPE;

	if (!c->pipe[slot]) {
		c->pipe[slot] = calloc(1, sizeof(struct kafka_ctx)); /* style: allow per connection */
		if (!c->pipe[slot])
			return NULL;
		c->pipe[slot]->sh = c->sh;
		c->pipe[slot]->c = c;
	}
	return c->pipe[slot];
}

static void kafka_dispatch(struct conn *c, struct kafka_ctx *ctx, const uint8_t *frame, uint32_t len)
{
	struct shard *sh = c->sh;
	int rc;

	memset(&ctx->req, 0, sizeof(ctx->req));
	ctx->frame = frame;
	ctx->frame_len = len;
	ctx->pending = 0;
	ctx->resume = NULL;
	ctx->resp = NULL;
	ctx->state = NULL;
	ctx->nholds = 0;
	ctx->holds = NULL;
	ctx->holds_cap = 0;
	ctx->parked = 0;
	ctx->final = 0;
	ctx->parked_once = 0;
	ctx->only_error = 0;
	ctx->ready = 0;
	ctx->no_response = 0;
	ctx->cleanup = NULL;
	ctx->cleanup_arg = NULL;
	ctx->started_ns = sh->now_ns;
	c->active_ns = sh->now_ns;
	ctx->recv_ns = now_ns();
	ctx->conn_ns = c->accept_ns;
	/* the first slot takes any request; the others only produces */
	if (ctx_arena(ctx, (size_t)len * 4 + (ctx == &c->ctx ? CONN_ARENA_MIN : CONN_ARENA_PIPE)) < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	ctx_more_free(ctx);
	kafka_arena_init(&ctx->arena, ctx->arena_mem, ctx->arena_cap);
	rc = kafka_request_decode(frame, len, &ctx->arena, &ctx->req);
	if (rc == -ENOBUFS) {
		/* the worst case the codec guarantees; rare */
		if (ctx_arena(ctx, kafka_arena_bound(len)) < 0) {
			kafka_ctx_abort(ctx);
			return;
		}
		kafka_arena_init(&ctx->arena, ctx->arena_mem, ctx->arena_cap);
		rc = kafka_request_decode(frame, len, &ctx->arena, &ctx->req);
	}
	shard_stat_add(&sh->stats.requests, 1);
	if (rc == -ENOTSUP && ctx->req.header.RequestApiKey == KAFKA_API_VERSIONS_KEY) {
		/* an ApiVersions version we do not know: answer v0 with error 35
		 * and our range, never close (clients retry with a lower one) */
		ctx->req.api = kafka_api_find(KAFKA_API_VERSIONS_KEY);
		ctx->req.header.RequestApiVersion = 0;
		ctx->req.body = NULL;
		rc = 0;
	}
	if (rc == -ENOTSUP || (rc == 0 && (!ctx->req.api || !ctx->req.api->handler))) {
		/* an API or version we do not serve: UNSUPPORTED_VERSION where
		 * the response has a top-level error code to carry it, else
		 * the connection is closed, as Kafka does */
		ctx->only_error = KERR_UNSUPPORTED_VERSION;
		shard_stat_add(&sh->stats.unsupported, 1);
		kafka_ctx_respond(ctx);
		return;
	}
	if (rc < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	ctx->req.api->handler(ctx);
}

/* A frame's ApiKey (the first field of every request header). */
static int16_t frame_api_key(const uint8_t *frame)
{
	return (int16_t)be16_load(frame);
}

/* May a request with ApiKey `next` start while the connection's head
 * request (`head`) is still in progress? Responses go out in order either
 * way. Produces after a produce: their appends share a group commit. Group
 * calls (OffsetCommit, OffsetFetch, Heartbeat, LeaveGroup) after a
 * JoinGroup or SyncGroup that waits for the rebalance: a commit the member
 * sent while its generation was current is judged then, not after the
 * rebalance it waits behind has made it stale (Kafka judges it late and
 * refuses it, and librdkafka then drops the member's partitions), and a
 * LeaveGroup of a closing member takes effect at once. */
static int pipelinable(int16_t head, int16_t next)
{
	if (head == KAFKA_PRODUCE_KEY)
		return next == KAFKA_PRODUCE_KEY;
	if (head == 11 || head == 14)
		return next == 8 || next == 9 || next == 12 || next == 13;
	return 0;
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
		if (c->busy && !pipelinable(c->pipe[c->phead]->req.header.RequestApiKey, frame_api_key(p + 4)))
			break;
		struct kafka_ctx *ctx = conn_next_ctx(c);

		if (!ctx) {
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
		kafka_dispatch(c, ctx, p + 4, (uint32_t)size);
	}
	if (!c->busy && c->vbid >= 0 && !c->zombie && conn_view_end(c) < 0) {
		conn_close(c);
		conn_maybe_free(c);
	}
}

/* ---- responses -------------------------------------------------------- */

static void release_holds(struct kafka_ctx *ctx)
{
	extern void fetch_release_hold(struct shard *sh, struct data_hold *h);

	for (int i = 0; i < ctx->nholds; i++)
		fetch_release_hold(ctx->sh, &ctx->holds[i]);
	ctx->nholds = 0;
}

static void conn_pump(struct conn *c);

/* The head request is over: its response was sent (or it had none, or
 * the connection is closing). The next one's response may go out. */
static void request_end(struct kafka_ctx *ctx)
{
	struct conn *c = ctx->c;

	release_holds(ctx);
	if (ctx->cleanup) {
		ctx->cleanup(ctx);
		ctx->cleanup = NULL;
	}
	ctx->ready = 0;
	ctx_more_free(ctx);
	if (ctx->arena_cap > CONN_ARENA_KEEP) {
		/* a large request's arena goes back with it */
		free(ctx->arena_mem);
		ctx->arena_mem = NULL;
		ctx->arena_cap = 0;
	}
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

/* The request's latency into the shard's histograms (its loop clock). */
static void shard_observe(struct kafka_ctx *ctx)
{
	struct shard *sh = ctx->sh;
	int16_t key = ctx->req.header.RequestApiKey;
	uint64_t ns = sh->now_ns > ctx->started_ns ? sh->now_ns - ctx->started_ns : 0;

	if (key < 0 || key >= SHARD_LAT_APIS)
		return;
	lathist_add(&sh->hists.api[key], ns);
	if (key == KAFKA_PRODUCE_KEY && ctx->req.body) {
		int16_t acks = ((const struct kafka_produce_request *)ctx->req.body)->Acks;

		if (acks == 0 || acks == 1 || acks == -1)
			lathist_add(&sh->hists.produce[acks < 0 ? 2 : acks], ns);
	} else if (key == 1) {   /* Fetch */
		lathist_add(&sh->hists.fetch, ns);
	}
}

void kafka_ctx_done(struct kafka_ctx *ctx)
{
	shard_observe(ctx);
	ctx->ready = 1;
	ctx->no_response = 1;
	conn_pump(ctx->c);
}

void kafka_ctx_abort(struct kafka_ctx *ctx)
{
	struct conn *c = ctx->c;

	shard_stat_add(&c->sh->stats.bad_frames, 1);
	release_holds(ctx);
	conn_close(c);
	ctx->ready = 1;
	ctx->no_response = 1;
	conn_pump(c);
}

static void conn_send_more(struct conn *c)
{
	struct io_uring_sqe *sqe = shard_sqe(c->sh);

	if (!sqe) {
		conn_close(c);
		return;
	}
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

static void response_encode(struct kafka_ctx *ctx, struct kafka_writer *w,
			    int16_t key, int16_t ver, int32_t corr)
{
	if (ctx->only_error)
		kafka_error_response_encode(w, key, ver, corr, ctx->only_error);
	else
		kafka_response_encode(w, key, ver, corr, ctx->resp);
}

void kafka_ctx_respond(struct kafka_ctx *ctx)
{
	shard_observe(ctx);
	ctx->ready = 1;
	conn_pump(ctx->c);
}

static void conn_send_head(struct conn *c, struct kafka_ctx *ctx);

/* Send what is next in request order: the head's response once it is
 * built; requests without one (acks=0) end as their turn comes. */
static void conn_pump(struct conn *c)
{
	while (c->busy && !c->sending) {
		struct kafka_ctx *ctx = c->pipe[c->phead];

		if (!ctx->ready)
			return;
		if (ctx->no_response || c->closing) {
			request_end(ctx);   /* pumps the rest itself */
			return;
		}
		conn_send_head(c, ctx);
		return;
	}
}

static void conn_send_head(struct conn *c, struct kafka_ctx *ctx)
{
	struct kafka_writer w;
	int16_t key = ctx->req.header.RequestApiKey, ver = ctx->req.header.RequestApiVersion;
	int32_t corr = ctx->req.header.CorrelationId;
	int n;

	kafka_writer_init_measure(&w, true);
	response_encode(ctx, &w, key, ver, corr);
	if (w.err) {
		kafka_ctx_abort(ctx);
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
		kafka_ctx_abort(ctx);
		return;
	}
	kafka_writer_init_iov(&w, c->out, c->out_cap, c->iov, c->iov_cap);
	response_encode(ctx, &w, key, ver, corr);
	n = kafka_writer_finish(&w);
	if (n < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	if (n == 0) {
		c->iov[0] = (struct iovec){ c->out, w.len };
		n = 1;
	}
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->iov;
	c->msg.msg_iovlen = (size_t)n;
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
	if (c->out_cap > CONN_OUT_KEEP) {
		/* a large response's buffer goes back once it is sent */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	request_end(c->pipe[c->phead]);
}

static void conn_on_send(struct conn *c, int res, unsigned flags)
{
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

		while (done && c->msg.msg_iovlen) {
			if (done >= c->msg.msg_iov->iov_len) {
				done -= c->msg.msg_iov->iov_len;
				c->msg.msg_iov++;
				c->msg.msg_iovlen--;
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

int kafka_ctx_hold(struct kafka_ctx *ctx, int owner, struct plog_read *rd)
{
	if (ctx->nholds == ctx->holds_cap) {
		int ncap = ctx->holds_cap ? ctx->holds_cap * 2 : 16;
		struct data_hold *n = kafka_arena_alloc(&ctx->arena, (size_t)ncap * sizeof(*n));

		if (!n)
			return -ENOBUFS;
		if (ctx->nholds)
			memcpy(n, ctx->holds, (size_t)ctx->nholds * sizeof(*n));
		ctx->holds = n;
		ctx->holds_cap = ncap;
	}
	ctx->holds[ctx->nholds++] = (struct data_hold){ owner, rd };
	return 0;
}

void kafka_ctx_sub_done(struct kafka_ctx *ctx)
{
	if (--ctx->pending == 0 && ctx->resume)
		ctx->resume(ctx);
}

void kafka_ctx_park(struct kafka_ctx *ctx, uint64_t deadline_ns)
{
	struct shard *sh = ctx->sh;

	ctx->deadline_ns = deadline_ns;
	ctx->parked = 1;
	ctx->park_prev = NULL;
	ctx->park_next = sh->parked;
	if (sh->parked)
		sh->parked->park_prev = ctx;
	sh->parked = ctx;
}

void kafka_ctx_unpark(struct kafka_ctx *ctx)
{
	struct shard *sh = ctx->sh;

	if (!ctx->parked)
		return;
	if (ctx->park_prev)
		ctx->park_prev->park_next = ctx->park_next;
	else
		sh->parked = ctx->park_next;
	if (ctx->park_next)
		ctx->park_next->park_prev = ctx->park_prev;
	ctx->parked = 0;
}

/* Wake parked requests: all of them when `all`, else those past their
 * deadline. Returns the nearest remaining deadline (0: none). */
static uint64_t shard_run_parked(struct shard *sh, int all)
{
	struct kafka_ctx *ctx = sh->parked, *next;
	uint64_t nearest = 0;

	for (; ctx; ctx = next) {
		next = ctx->park_next;
		if (all || ctx->deadline_ns <= sh->now_ns || ctx->c->closing) {
			kafka_ctx_unpark(ctx);
			if (ctx->c->closing) {
				request_end(ctx);
				continue;
			}
			ctx->resume(ctx);
		} else if (!nearest || ctx->deadline_ns < nearest) {
			nearest = ctx->deadline_ns;
		}
	}
	return nearest;
}


void shard_wake_parked(struct shard *sh)
{
	shard_run_parked(sh, 1);
}

/* ---- the loop --------------------------------------------------------- */

static void shard_arm_wake(struct shard *sh)
{
	struct io_uring_sqe *sqe = shard_sqe(sh);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, sh->wake_fd, &sh->wake_buf, sizeof(sh->wake_buf), 0);
	io_set(sqe, &sh->wake_op);
}

/* The cleaner for cleanup.policy=compact topics: one partition's pass at a
 * time, one step per loop turn (the key map, or one sealed segment
 * rewritten: bounded by segment.bytes of reading), so an append waits at
 * most one step. A partition gets a new pass when a segment was sealed
 * since its last one; passes start from the retention timer. Steps run
 * only with no SQE waiting (a rewritten segment's file descriptor is
 * replaced: nothing prepared may name the old one). Returns 1 if it
 * worked. */
static int shard_compact(struct shard *sh, int may_start)
{
	struct part *p = sh->compacting;
	const struct compact_stats *cs;
	int rc;

	if (!p) {
		if (!may_start)
			return 0;
		for (p = sh->parts; p; p = p->next)
			if (p->pl && !p->deleted && p->pl->cfg.compact && !p->pl->err &&
			    p->pl->seg_tail->base_offset > p->compact_upto)
				break;
		if (!p)
			return 0;
		if ((!sh->compactor && compactor_create(&sh->compactor) < 0) ||
		    (!sh->compress && compress_ctx_create(&sh->compress) < 0)) {
			shard_stat_add(&sh->stats.compact_errors, 1);
			return 0;   /* no memory: the next timer tries again */
		}
		p->compact_upto = p->pl->seg_tail->base_offset;
		sh->compacting = p;
	}
	if (io_uring_sq_ready(&sh->ring))
		return 0;
	if (p->deleted || !p->pl) {
		compactor_reset(sh->compactor);   /* its topic went away mid-pass */
		sh->compacting = NULL;
		return 0;
	}
	rc = compactor_step(sh->compactor, p->pl, sh->compress, sh->now_ms);
	if (rc == COMPACT_WAIT)
		return 0;   /* its I/O is in flight: the completion wakes the loop */
	if (rc <= 0) {
		if (rc < 0)
			shard_stat_add(&sh->stats.compact_errors, 1);   /* the segment stays as it was */
		sh->compacting = NULL;
	}
	cs = compactor_stats(sh->compactor);
	__atomic_store_n(&sh->stats.compact_passes, cs->passes, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.compact_segments, cs->segments_cleaned, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.compact_records_removed, cs->records_removed, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.compact_tombstones_removed, cs->tombstones_removed, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.compact_bytes_before, cs->bytes_before, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.compact_bytes_after, cs->bytes_after, __ATOMIC_RELAXED);
	return 1;
}

/* The cycle counter busy time is counted in: the TSC where there is one
 * (no system call, ~20 cycles), else the monotonic clock in ns. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define SHARD_CYCLES_UNIT "TSC cycles"
static inline uint64_t shard_cycles(void)
{
	return __rdtsc();
}
#else
#define SHARD_CYCLES_UNIT "ns"
static inline uint64_t shard_cycles(void)
{
	return now_ns();
}
#endif

/* A multishot poll on the native socket: wakes the loop when datagrams
 * arrive. */
static void shard_arm_native(struct shard *sh)
{
	struct io_uring_sqe *sqe;

	if (native_shard_fd(sh) < 0 || sh->stop || !(sqe = shard_sqe(sh)))
		return;
	io_uring_prep_poll_multishot(sqe, native_shard_fd(sh), POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)&sh->native_op | SHARD_OP_IO);
}

static void shard_complete(struct shard *sh, struct io_uring_cqe *cqe)
{
	struct io_op *op;

	if (!cqe->user_data)
		return;
	if (store_owns_cqe(cqe->user_data)) {
		store_complete(&sh->st, cqe);
		return;
	}
	op = (struct io_op *)(uintptr_t)(cqe->user_data & ~7ull);
	switch (op->kind) {
	case IO_ACCEPT:
		shard_on_accept(sh, cqe->res, cqe->flags);
		break;
	case IO_RECV:
		conn_on_recv(op->c, cqe->res, cqe->flags);
		break;
	case IO_SEND:
		conn_on_send(op->c, cqe->res, cqe->flags);
		break;
	case IO_WAKE:
		op->inflight = 0;
		shard_arm_wake(sh);
		break;
	case IO_NATIVE:
		/* datagrams wait: the loop reads them (native_shard_poll) */
		if (!(cqe->flags & IORING_CQE_F_MORE))
			shard_arm_native(sh);
		break;
	}
}

/* The provided-buffer ring for receives (registered by the ring's own
 * thread). Without kernel support, connections receive into their own
 * buffers. */
static void shard_setup_pbufs(struct shard *sh)
{
	struct io_uring_buf_reg reg;
	size_t rsz = SHARD_PBUFS * sizeof(struct io_uring_buf);
	void *r;

	if (posix_memalign(&r, 4096, rsz) ||
	    posix_memalign((void **)&sh->pbufs, 4096, (size_t)SHARD_PBUFS * SHARD_PBUF_SIZE)) {
		sh->pbufs = NULL;
		return;
	}
	memset(r, 0, rsz);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)r;
	reg.ring_entries = SHARD_PBUFS;
	reg.bgid = SHARD_PBUF_GROUP;
	if (io_uring_register_buf_ring(&sh->ring, &reg, 0) < 0) {
		free(r);
		free(sh->pbufs);
		sh->pbufs = NULL;
		return;
	}
	sh->pbuf_ring = r;
	io_uring_buf_ring_init(sh->pbuf_ring);
	for (int i = 0; i < SHARD_PBUFS; i++)
		io_uring_buf_ring_add(sh->pbuf_ring, sh->pbufs + (size_t)i * SHARD_PBUF_SIZE, SHARD_PBUF_SIZE,
				      (unsigned short)i, io_uring_buf_ring_mask(SHARD_PBUFS), i);
	io_uring_buf_ring_advance(sh->pbuf_ring, SHARD_PBUFS);
}

static void *shard_main(void *arg)
{
	struct shard *sh = arg;
	struct broker *b = sh->b;
	cpu_set_t cpus;
	char name[16];

	snprintf(name, sizeof(name), "sluice-shard%d", sh->id);
	pthread_setname_np(pthread_self(), name);
	CPU_ZERO(&cpus);
	CPU_SET(sh->id % CPU_SETSIZE, &cpus);
	pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	/* liburing 2.3 declares io_uring_enable_rings but does not export it */
	if (syscall(__NR_io_uring_register, sh->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0)
		abort();
	shard_setup_pbufs(sh);
	native_shard_thread_init(sh);
	/* no accept before the control thread has replayed the metadata: a
	 * client connecting early waits in the listen backlog rather than
	 * being told its topics do not exist */
	shard_arm_wake(sh);
	io_uring_submit(&sh->ring);

	/* A shard leaves only when every shard has closed its connections:
	 * until then another shard's request may still need its partitions. */
	while (!sh->stop || sh->conns || __atomic_load_n(&b->drained, __ATOMIC_ACQUIRE) < b->set.nshards) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts;
		unsigned head, n = 0;
		int work, rc;
		uint64_t nearest;

		uint64_t c0 = shard_cycles(), c1, c2;

		shard_stat_add(&sh->stats.loops, 1);
		if (sh->zombies)
			shard_free_zombies(sh);
		sh->now_ns = now_ns();
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			sh->now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		}
		sh->st.now_ns = sh->now_ns;
		__atomic_store_n(&sh->md_seen, broker_md(b) ? broker_md(b)->version : 0, __ATOMIC_RELEASE);
		if (sh->backlog_len)
			shard_flush_backlog(sh);
		if (!sh->accepting && !sh->stop && sh->listen_fd >= 0 &&
		    __atomic_load_n(&b->serving, __ATOMIC_ACQUIRE)) {
			sh->accepting = 1;
			shard_arm_accept(sh);
		}
		if (sh->accept_wait && sh->now_ns >= sh->accept_retry_ns && !sh->accept_op.inflight) {
			/* the back-off after EMFILE is over (and a cancelled
			 * multishot accept has ended): try again */
			sh->accept_wait = 0;
			if (!sh->stop && sh->listen_fd >= 0)
				shard_arm_accept(sh);
		}
		if (sh->memq && (b->set.queued_max_request_bytes < 0 ||
				 __atomic_load_n(&b->conns.req_mem, __ATOMIC_RELAXED) < b->set.queued_max_request_bytes))
			shard_retry_memq(sh);
		if (b->set.connections_max_idle_ms >= 0 && sh->now_ns >= sh->next_idle_ns) {
			uint64_t every = (uint64_t)b->set.connections_max_idle_ms * 1000000ull / 4;

			shard_close_idle(sh);
			sh->next_idle_ns = sh->now_ns + (every < 10000000ull ? 10000000ull :
							 every > 1000000000ull ? 1000000000ull : every);
		}
		work = 0;
		if ((sh->compact_due || sh->compacting) && !sh->stop && !io_uring_sq_ready(&sh->ring)) {
			/* before anything of this turn prepares an SQE */
			work += shard_compact(sh, sh->compact_due);
			sh->compact_due = 0;
		}
		work += shard_drain_rings(sh);
		if (sh->native && !sh->stop && __atomic_load_n(&b->serving, __ATOMIC_ACQUIRE)) {
			if (!sh->native_armed) {
				sh->native_armed = 1;
				shard_arm_native(sh);
			}
			work += native_shard_poll(sh);
			if (sh->now_ns >= sh->next_native_tick_ns) {
				native_shard_tick(sh);
				sh->next_native_tick_ns = sh->now_ns + 100000000ull;
			}
		}
		if (sh->now_ns >= sh->next_retention_ns) {
			/* retention: whole segments, a slow-path timer */
			for (struct part *p = sh->parts; p; p = p->next)
				if (p->pl) {
					int gone = plog_retain(p->pl, sh->now_ms);

					/* the recovery point: a crash scans only what
					 * follows (slow path: fdatasync when it moved) */
					plog_checkpoint(p->pl);

					if (gone > 0)
						shard_stat_add(&sh->stats.retention_segments_deleted, (uint64_t)gone);
					part_publish(p);
					if (p->producers.n) {
						producer_expire(&p->producers, sh->now_ms, b->set.producer_ttl_ms);
						part_snapshot_producers(p);
					}
				}
			sh->next_retention_ns = sh->now_ns + (uint64_t)b->set.retention_check_ms * 1000000ull;
			sh->compact_due = 1;   /* and the cleaner looks for work */
		}
		nearest = sh->parked ? shard_run_parked(sh, 0) : 0;
		work += store_flush(&sh->st);
		if (b->stopping && !sh->stop) {
			/* stop accepting; in-flight requests finish; connections
			 * close when idle */
			sh->stop = 1;
			if (sh->listen_fd >= 0) {
				/* the multishot accept holds the socket inside io_uring:
				 * shutdown() stops the listening now, so the port is
				 * free the moment we exit */
				struct io_uring_sqe *sqe = shard_sqe(sh);

				if (sqe && sh->accept_op.inflight) {
					io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)&sh->accept_op | SHARD_OP_IO, 0);
					io_uring_sqe_set_data64(sqe, 0);
				}
				shutdown(sh->listen_fd, SHUT_RDWR);
				close(sh->listen_fd);
				sh->listen_fd = -1;
			}
			for (struct conn *c = sh->conns, *nx; c; c = nx) {
				nx = c->next;
				if (!c->busy)
					conn_close(c);
				conn_maybe_free(c);
			}
			/* long-polls answer now with what they have */
			for (struct kafka_ctx *ctx = sh->parked; ctx; ctx = ctx->park_next)
				ctx->final = 1;
			shard_run_parked(sh, 1);
		}
		if (sh->stop && !sh->conns && !sh->drained) {
			sh->drained = 1;
			__atomic_fetch_add(&b->drained, 1, __ATOMIC_ACQ_REL);
		}
		if (sh->stop)
			for (struct conn *c = sh->conns, *nx; c; c = nx) {
				nx = c->next;
				if (!c->busy && !c->closing)
					conn_close(c);
				conn_maybe_free(c);
			}
		if (native_shard_dpdk(sh) && !b->set.dpdk_poll_sleep_us && !sh->stop) {
			/* DPDK busy-polling: never sleep; enter the kernel only to
			 * submit, or every 20 us for completions (its task work
			 * runs there) — not once per turn, which would cost a
			 * system call per burst of frames */
			rc = 0;
			if (io_uring_sq_ready(&sh->ring) || sh->now_ns - sh->last_enter_ns >= 20000) {
				rc = io_uring_submit_and_get_events(&sh->ring);
				sh->last_enter_ns = sh->now_ns;
			}
			c1 = c2 = shard_cycles();
		} else if (work || sh->backlog_len) {
			rc = io_uring_submit_and_get_events(&sh->ring);
			c1 = c2 = shard_cycles();
		} else {
			/* sleep in io_uring until I/O, a message or a deadline */
			__atomic_store_n(&sh->sleeping, 1, __ATOMIC_SEQ_CST);
			if (!shard_rings_empty(sh)) {
				__atomic_store_n(&sh->sleeping, 0, __ATOMIC_SEQ_CST);
				continue;
			}
			uint64_t wait_ns = 100000000ull;
			if (sh->accept_wait && (!nearest || sh->accept_retry_ns < nearest))
				nearest = sh->accept_retry_ns;
			if (b->set.connections_max_idle_ms >= 0 && sh->conns && (!nearest || sh->next_idle_ns < nearest))
				nearest = sh->next_idle_ns;
			if (nearest)
				wait_ns = nearest > sh->now_ns ? nearest - sh->now_ns : 0;
			if (sh->memq && wait_ns > 10000000ull)
				wait_ns = 10000000ull;   /* another shard may give request memory back */
			if (native_shard_dpdk(sh) && wait_ns > (uint64_t)b->set.dpdk_poll_sleep_us * 1000)
				wait_ns = (uint64_t)b->set.dpdk_poll_sleep_us * 1000;   /* the queues have no wake-up */
			ts.tv_sec = (long long)(wait_ns / 1000000000ull);
			ts.tv_nsec = (long long)(wait_ns % 1000000000ull);
			c1 = shard_cycles();
			rc = io_uring_submit_and_wait_timeout(&sh->ring, &cqe, 1, &ts, NULL);
			c2 = shard_cycles();
			__atomic_store_n(&sh->sleeping, 0, __ATOMIC_SEQ_CST);
		}
		(void)rc;
		{
			/* SQEs taken and CQEs reaped since the last turn, whoever
			 * took or reaped them (the shard or its storage) */
			uint32_t sq = sh->ring.sq.sqe_tail, cq = __atomic_load_n(sh->ring.cq.khead, __ATOMIC_RELAXED);

			shard_stat_add(&sh->stats.uring_sqes, (uint32_t)(sq - sh->sqe_seen));
			shard_stat_add(&sh->stats.uring_cqes, (uint32_t)(cq - sh->cqe_seen));
			sh->sqe_seen = sq;
			sh->cqe_seen = cq;
		}
		/* one at a time, each marked seen first: a handler may poll the
		 * store (a log closing waits for its writes), which then keeps
		 * our completions for us in st.foreign */
		(void)head;
		while (io_uring_peek_cqe(&sh->ring, &cqe) == 0) {
			struct io_uring_cqe c = *cqe;

			io_uring_cqe_seen(&sh->ring, cqe);
			shard_complete(sh, &c);
			n++;
		}
		for (unsigned i = 0; i < sh->st.nforeign; i++) {
			struct io_uring_cqe c = { .user_data = sh->st.foreign[i].user_data,
						  .res = sh->st.foreign[i].res, .flags = sh->st.foreign[i].flags };

			shard_complete(sh, &c);
		}
		sh->st.nforeign = 0;
		/* busy time: the turn's work before waiting, and the completions
		 * after it; an idle turn (nothing polled, nothing completed) is
		 * the price of polling, not of serving */
		if (work || n)   /* (relaxed: the control thread reads it on SIGUSR1) */
			__atomic_store_n(&sh->stats.busy_cycles,
					 sh->stats.busy_cycles + (work ? c1 - c0 : 0) + (n ? shard_cycles() - c2 : 0),
					 __ATOMIC_RELAXED);
	}
	/* make appended data durable and checkpoint every log */
	store_drain(&sh->st);
	shard_free_zombies(sh);
	while (sh->parts) {
		struct part *p = sh->parts;

		sh->parts = p->next;
		part_close(p);
	}
	while (sh->retired_parts) {
		struct part *p = sh->retired_parts;

		sh->retired_parts = p->next;
		free(p);   /* its log was closed when its topic was deleted */
	}
	fprintf(stderr, "sluiced: shard %d: %llu loop turns, %llu busy cycles (%s in turns that did work)\n", sh->id, /* style: allow once, at exit */
		(unsigned long long)sh->stats.loops, (unsigned long long)sh->stats.busy_cycles, SHARD_CYCLES_UNIT);
	if (sh->native) {
		char line[2048];

		native_shard_describe(sh, line, sizeof(line));
		fprintf(stderr, "sluiced: %s\n", line); /* style: allow once, at exit */
	}
	return NULL;
}

int shard_start(struct shard *sh)
{
	return -pthread_create(&sh->thread, NULL, shard_main, sh);
}

void shard_join(struct shard *sh)
{
	pthread_join(sh->thread, NULL);
}
