/* dataplane/shard.c — the shard: creation, its io_uring, the rings from
 * other threads, and the loop (shard_poll and its driver), which
 * dispatches completions (io_op.done) and ring messages (their fn) to
 * everything below it. What they all build on is dataplane/shard_core.c;
 * connections are dataplane/conn.c, their requests dataplane/kafka_ctx.c. */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/conn.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/native/native_broker.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/replica_fetcher.h"
#include "dataplane/shard.h"
#include "storage/recompress.h"
#include "storage/batch_format.h"
#include "storage/compact.h"
#include "storage/compress.h"
#include "storage/slog.h"

/* ---- setup ------------------------------------------------------------ */

static int shard_timers_init(struct shard *sh);
static void shard_wake_done(struct io_op *op, int res, unsigned flags);
static void shard_native_done(struct io_op *op, int res, unsigned flags);

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

struct shard_published shard_published(const struct shard *sh)
{
	return (struct shard_published){ &sh->stats, &sh->hists, &sh->st.tail, &sh->st.write_lat, &sh->st.stats };
}

struct shard_published broker_shard_published(const struct broker *b, int i)
{
	return shard_published(b->shards[i]);
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
	uint32_t seed;
	int rc;

	if (!sh)
		return -ENOMEM;
	sh->id = id;
	sh->b = b;
	for (int i = 0; i < BROKER_MAX_LISTENERS; i++)
		sh->listen_fd[i] = -1;
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = 0x9e3779b9u * (uint32_t)(id + 1) ^ (uint32_t)(uintptr_t)sh;
	fsess_cache_init(&sh->fsess, b->set.fetch_session_slots > 0 && b->set.nshards > 0 ?
			 (int)(((int64_t)b->set.fetch_session_slots + b->set.nshards - 1) / b->set.nshards) : 0,
			 seed);
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
	/* a controller-only node serves no Kafka client: no listener; else
	 * one socket per client listener (SO_REUSEPORT: every shard binds
	 * each port) */
	rc = 0;
	sh->nlisten = b->set.controller_only ? 0 : b->set.nlisteners ? b->set.nlisteners : 1;
	for (int i = 0; i < sh->nlisten && rc >= 0; i++) {
		const char *host = b->set.nlisteners ? b->set.listeners[i].host : b->set.listen_host;
		int port = b->set.nlisteners ? b->set.listeners[i].port : b->set.listen_port;

		if ((rc = listen_socket(host, port, err, errlen)) >= 0)
			sh->listen_fd[i] = rc;
	}
	if (rc < 0 || sh->wake_fd < 0) {
		for (int i = 0; i < sh->nlisten; i++)
			if (sh->listen_fd[i] >= 0)
				close(sh->listen_fd[i]);
		if (sh->wake_fd >= 0)
			close(sh->wake_fd);
		store_fini(&sh->st);
		io_uring_queue_exit(&sh->ring);
		free(sh);
		return rc < 0 ? rc : -EMFILE;
	}
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
	if ((rc = shard_timers_init(sh)) < 0) {
		snprintf(err, errlen, "shard timers: %s", strerror(-rc));
		shard_destroy(sh);
		return rc;
	}
	sh->wake_op.done = shard_wake_done;
	sh->native_op.done = shard_native_done;
	sh->conn_ops = &kafka_ctx_conn_ops;   /* connections tell the request pipeline */
	if ((b->set.native_port || b->dpdk) &&
	    (rc = native_shard_open(sh, b->set.native_host, b->set.native_port, err, errlen)) < 0) {
		shard_destroy(sh);
		return rc;
	}
	b->wake_fd[id] = sh->wake_fd;
	b->sleeping[id] = &sh->sleeping;
	b->md_seen[id] = &sh->md_seen;
	b->busy_cycles[id] = &sh->stats.busy_cycles;
	*out = sh;
	return 0;
}

void shard_destroy(struct shard *sh)
{
	if (!sh)
		return;
	native_shard_close(sh);
	compactor_destroy(sh->compactor);
	fsess_cache_free(&sh->fsess);
	compress_ctx_destroy(sh->compress);
	recompress_destroy(sh->recompress);
	for (int i = 0; i < sh->nlisten; i++)
		if (sh->listen_fd[i] >= 0)
			close(sh->listen_fd[i]);
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
	return shard_mono_ns();
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

static void shard_wake_done(struct io_op *op, int res, unsigned flags)
{
	(void)res;
	(void)flags;
	op->inflight = 0;
	shard_arm_wake((struct shard *)((char *)op - offsetof(struct shard, wake_op)));
}

static void shard_native_done(struct io_op *op, int res, unsigned flags)
{
	(void)res;
	/* datagrams wait: the loop reads them (native_shard_poll) */
	if (!(flags & IORING_CQE_F_MORE))
		shard_arm_native((struct shard *)((char *)op - offsetof(struct shard, native_op)));
}

/* A completion: the store's, or an io_op's, whose owner's done runs. */
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
	op->done(op, cqe->res, cqe->flags);
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

/* ---- timers ----------------------------------------------------------- */

int shard_timer_add(struct shard *sh, uint64_t first_ns, uint64_t period_ns, enum shard_timer_wake wake,
		    void (*fn)(struct shard *sh))
{
	struct shard_timer *t;

	if (sh->ntimers == SHARD_TIMERS)
		return -ENOSPC;
	t = &sh->timers[sh->ntimers];
	t->next_ns = first_ns;
	t->period_ns = period_ns;
	t->wake = wake;
	t->fn = fn;
	return sh->ntimers++;
}

/* Run the timers that are due, in the order they were added; each runs
 * again `period` after this turn's clock. Returns the number run. */
static int shard_run_timers(struct shard *sh)
{
	int n = 0;

	for (int i = 0; i < sh->ntimers; i++) {
		struct shard_timer *t = &sh->timers[i];

		if (sh->now_ns < t->next_ns)
			continue;
		t->next_ns = sh->now_ns + t->period_ns;
		t->fn(sh);
		n++;
	}
	return n;
}

/* Look for connections idle past connections.max.idle.ms. */
static void shard_idle_tick(struct shard *sh)
{
	conn_close_idle(sh);
}

/* The native protocol's housekeeping (every 100 ms, once it serves). */
static void shard_native_tick(struct shard *sh)
{
	if (!sh->native || sh->stop || !__atomic_load_n(&sh->b->serving, __ATOMIC_ACQUIRE)) {
		sh->timers[sh->native_timer].next_ns = 0;   /* not yet: the first turn that serves */
		return;
	}
	native_shard_tick(sh);
}

/* Retention: whole segments, by time and size; then the recovery point
 * (a crash scans only what follows; slow path: fdatasync when it moved). */
static void shard_retention_tick(struct shard *sh)
{
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->pl) {
			int gone = plog_retain(p->pl, sh->now_ms);

			plog_checkpoint(p->pl);
			if (gone > 0)
				shard_stat_add(&sh->stats.retention_segments_deleted, (uint64_t)gone);
			part_publish(p);
			if (p->producers.n) {
				/* producer state: expired ids go, the rest is snapshot */
				producer_expire(&p->producers, sh->now_ms, sh->b->set.producer_ttl_ms);
				part_snapshot_producers(p);
			}
		}
}

/* Replication: followers out of sync past replica.lag.time.max.ms leave
 * the ISR, acks=all past its timeout fails (nothing on one node). */
static void shard_repl_tick(struct shard *sh)
{
	if (!sh->repl_parts)
		return;
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->role)
			part_role_tick(p, sh->now_ns, (uint64_t)sh->b->set.replica_lag_ms * 1000000ull);
}

/* The high-watermark checkpoints of the partitions with a role whose
 * high watermark moved (nothing on one node). */
static void shard_hw_tick(struct shard *sh)
{
	if (!sh->repl_parts)
		return;
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->role)
			part_hw_checkpoint(p);
}

/* The cleaner looks for a partition to clean (shard_compact, next turn). */
static void shard_compact_tick(struct shard *sh)
{
	sh->compact_due = 1;
}

/* The periodic work of the loop, on its clock (registered at creation;
 * each runs first on the first turn). */
static int shard_timers_init(struct shard *sh)
{
	struct broker *b = sh->b;
	uint64_t retention = (uint64_t)b->set.retention_check_ms * 1000000ull;
	int rc;

	if (b->set.connections_max_idle_ms >= 0) {
		uint64_t every = (uint64_t)b->set.connections_max_idle_ms * 1000000ull / 4;

		every = every < 10000000ull ? 10000000ull : every > 1000000000ull ? 1000000000ull : every;
		if ((rc = shard_timer_add(sh, 0, every, SHARD_TIMER_WAKE_IF_CONNS, shard_idle_tick)) < 0)
			return rc;
	}
	if ((rc = shard_timer_add(sh, 0, 100000000ull, SHARD_TIMER_NO_WAKE, shard_native_tick)) < 0)
		return rc;
	sh->native_timer = rc;
	/* retention and the cleaner on one period, in this order (a pass
	 * starts on the turn after retention ran, as it always did) */
	if ((rc = shard_timer_add(sh, 0, retention, SHARD_TIMER_NO_WAKE, shard_retention_tick)) < 0 ||
	    (rc = shard_timer_add(sh, 0, retention, SHARD_TIMER_NO_WAKE, shard_compact_tick)) < 0)
		return rc;
	if ((rc = shard_timer_add(sh, 0, 100000000ull, SHARD_TIMER_NO_WAKE, shard_repl_tick)) < 0 ||
	    (rc = shard_timer_add(sh, 0, PART_HW_CKPT_NS, SHARD_TIMER_NO_WAKE, shard_hw_tick)) < 0)
		return rc;
	return 0;
}

/* ---- the loop --------------------------------------------------------- */

int shard_thread_init(struct shard *sh)
{
	/* liburing 2.3 declares io_uring_enable_rings but does not export it */
	if (syscall(__NR_io_uring_register, sh->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0)
		return -errno;
	shard_setup_pbufs(sh);
	native_shard_thread_init(sh);
	/* no accept before the control thread has replayed the metadata: a
	 * client connecting early waits in the listen backlog rather than
	 * being told its topics do not exist */
	shard_arm_wake(sh);
	io_uring_submit(&sh->ring);
	return 0;
}

/* Reap what completed: one at a time, each marked seen first: a handler
 * may poll the store (a log closing waits for its writes), which then
 * keeps our completions for us in st.foreign. Returns the number. */
static int shard_reap(struct shard *sh)
{
	struct io_uring_cqe *cqe;
	int n = 0;

	{
		/* SQEs taken and CQEs reaped since the last turn, whoever
		 * took or reaped them (the shard or its storage) */
		uint32_t sq = sh->ring.sq.sqe_tail, cq = __atomic_load_n(sh->ring.cq.khead, __ATOMIC_RELAXED);

		shard_stat_add(&sh->stats.uring_sqes, (uint32_t)(sq - sh->sqe_seen));
		shard_stat_add(&sh->stats.uring_cqes, (uint32_t)(cq - sh->cqe_seen));
		sh->sqe_seen = sq;
		sh->cqe_seen = cq;
	}
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
	return n;
}

/* The broker stops: no more accepts; in-flight requests finish;
 * connections close when idle. */
static void shard_begin_stop(struct shard *sh)
{
	sh->stop = 1;
	for (int i = 0; i < sh->nlisten; i++) {
		/* the multishot accept holds the socket inside io_uring:
		 * shutdown() stops the listening now, so the port is
		 * free the moment we exit */
		struct io_uring_sqe *sqe;

		if (sh->listen_fd[i] < 0)
			continue;
		if (sh->accept_op[i].inflight && (sqe = shard_sqe(sh))) {
			io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)&sh->accept_op[i] | SHARD_OP_IO, 0);
			io_uring_sqe_set_data64(sqe, 0);
		}
		shutdown(sh->listen_fd[i], SHUT_RDWR);
		close(sh->listen_fd[i]);
		sh->listen_fd[i] = -1;
	}
	for (struct conn *c = sh->conns, *nx; c; c = nx) {
		nx = c->next;
		if (!c->busy)
			conn_close(c);
		conn_maybe_free(c);
	}
	/* long-polls answer now with what they have */
	shard_stop_parked(sh);
}

/* DPDK busy-polling (dpdk.poll.sleep.us 0): the loop never sleeps. */
static int shard_busy_polls(const struct shard *sh)
{
	return native_shard_dpdk((struct shard *)sh) && !sh->b->set.dpdk_poll_sleep_us && !sh->stop;
}

/* Submit what the turn prepared and take up completions without waiting.
 * Busy-polling DPDK enters the kernel only to submit, or every 20 us for
 * completions (its task work runs there), not once per turn, which would
 * cost a system call per burst of frames. */
static void shard_submit(struct shard *sh)
{
	if (shard_busy_polls(sh)) {
		if (io_uring_sq_ready(&sh->ring) || sh->now_ns - sh->last_enter_ns >= 20000) {
			(void)io_uring_submit_and_get_events(&sh->ring);
			sh->last_enter_ns = sh->now_ns;
		}
		return;
	}
	(void)io_uring_submit_and_get_events(&sh->ring);
}

int shard_poll(struct shard *sh, uint64_t now_ns, int64_t now_ms)
{
	struct broker *b = sh->b;
	int work = 0, n;

	shard_stat_add(&sh->stats.loops, 1);
	if (sh->zombies)
		conn_free_zombies(sh);
	sh->now_ns = now_ns;
	sh->now_ms = now_ms;
	sh->st.now_ns = now_ns;
	n = shard_reap(sh);
	__atomic_store_n(&sh->md_seen, broker_md(b) ? broker_md(b)->version : 0, __ATOMIC_RELEASE);
	if (sh->backlog_len)
		shard_flush_backlog(sh);
	if (!sh->accepting && !sh->stop && sh->nlisten && __atomic_load_n(&b->serving, __ATOMIC_ACQUIRE)) {
		sh->accepting = 1;
		conn_arm_accept(sh);
	}
	if (sh->accept_wait && sh->now_ns >= sh->accept_retry_ns) {
		/* the back-off after EMFILE is over: try again (the accepts
		 * still armed, or a cancelled one not ended yet, are left) */
		sh->accept_wait = 0;
		if (!sh->stop)
			conn_arm_accept(sh);
	}
	if (sh->memq && (b->set.queued_max_request_bytes < 0 ||
			 __atomic_load_n(&b->conns.req_mem, __ATOMIC_RELAXED) < b->set.queued_max_request_bytes))
		conn_retry_memq(sh);
	if ((sh->compact_due || sh->compacting) && !sh->stop && !io_uring_sq_ready(&sh->ring)) {
		/* before anything of this turn prepares an SQE */
		work += shard_compact(sh, sh->compact_due);
		sh->compact_due = 0;
	}
	work += shard_drain_rings(sh);
	if (sh->repl_parts || sh->fetchers)
		work += replica_fetchers_poll(sh);   /* followers: their leaders' fetchers */
	if (sh->native && !sh->stop && __atomic_load_n(&b->serving, __ATOMIC_ACQUIRE)) {
		if (!sh->native_armed) {
			sh->native_armed = 1;
			shard_arm_native(sh);
		}
		work += native_shard_poll(sh);
	}
	shard_run_timers(sh);
	sh->next_parked_ns = sh->parked ? shard_run_parked(sh, 0) : 0;
	work += store_flush(&sh->st);
	if (b->stopping && !sh->stop)
		shard_begin_stop(sh);
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
	if (work || sh->backlog_len)
		shard_submit(sh);
	return work + n;
}

/* The nearest deadline the loop must wake for (0: none): a parked
 * request's, a held write's, the end of the accept back-off, and the
 * timers that ask. */
static uint64_t shard_next_deadline(const struct shard *sh)
{
	uint64_t nearest = sh->next_parked_ns, held = store_held_until(&sh->st);

	if (held && (!nearest || held < nearest))
		nearest = held;   /* log.durability=memory: a partial block's write */

	if (sh->accept_wait && (!nearest || sh->accept_retry_ns < nearest))
		nearest = sh->accept_retry_ns;
	for (int i = 0; i < sh->ntimers; i++) {
		const struct shard_timer *t = &sh->timers[i];

		if (t->wake == SHARD_TIMER_NO_WAKE || (t->wake == SHARD_TIMER_WAKE_IF_CONNS && !sh->conns))
			continue;
		if (!nearest || t->next_ns < nearest)
			nearest = t->next_ns;
	}
	return nearest;
}

int shard_idle(struct shard *sh)
{
	struct broker *b = sh->b;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	uint64_t nearest, wait_ns = 100000000ull;

	if (shard_busy_polls(sh)) {
		shard_submit(sh);   /* never sleeps */
		return 0;
	}
	if (sh->backlog_len)
		return 0;   /* a full ring: the turn submitted; retry at once */
	/* sleep in io_uring until I/O, a message or a deadline; a sender
	 * that sees `sleeping` writes the eventfd after its push */
	__atomic_store_n(&sh->sleeping, 1, __ATOMIC_SEQ_CST);
	if (!shard_rings_empty(sh)) {
		__atomic_store_n(&sh->sleeping, 0, __ATOMIC_SEQ_CST);
		return 0;
	}
	nearest = shard_next_deadline(sh);
	if (nearest)
		wait_ns = nearest > sh->now_ns ? nearest - sh->now_ns : 0;
	if (sh->memq && wait_ns > 10000000ull)
		wait_ns = 10000000ull;   /* another shard may give request memory back */
	if (native_shard_dpdk(sh) && wait_ns > (uint64_t)b->set.dpdk_poll_sleep_us * 1000)
		wait_ns = (uint64_t)b->set.dpdk_poll_sleep_us * 1000;   /* the queues have no wake-up */
	ts.tv_sec = (long long)(wait_ns / 1000000000ull);
	ts.tv_nsec = (long long)(wait_ns % 1000000000ull);
	(void)io_uring_submit_and_wait_timeout(&sh->ring, &cqe, 1, &ts, NULL);
	__atomic_store_n(&sh->sleeping, 0, __ATOMIC_SEQ_CST);
	return 1;
}

int shard_done(const struct shard *sh)
{
	return sh->stop && !sh->conns && __atomic_load_n(&sh->b->drained, __ATOMIC_ACQUIRE) >= sh->b->set.nshards;
}

void shard_thread_fini(struct shard *sh)
{
	replica_fetchers_fini(sh);   /* their connections: nothing fetches any more */
	/* make appended data durable and checkpoint every log */
	store_drain(&sh->st);
	conn_free_zombies(sh);
	/* Every log's checkpoint asked at once, then waited for: their saves
	 * (the active segment's fdatasync, its index, "recovery-checkpoint")
	 * run side by side on the ring, STORE_SLOW_SLOTS at a time, where each
	 * close alone waited for its own before the next began (10,000
	 * partitions took 7 s to stop); each close then finds its checkpoint
	 * in place and writes nothing again. */
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->pl)
			plog_checkpoint(p->pl);
	for (struct part *p = sh->parts; p; p = p->next)
		if (p->pl)
			plog_checkpoint_wait(p->pl);
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
	part_table_fini(&sh->part_tab);
}

/* Wall clock in ms, for timestamps and retention. */
static int64_t shard_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The thread: one clock per turn, a turn, and the idle policy when the
 * turn found nothing to do. A shard leaves only when every shard has
 * closed its connections: until then another shard's request may still
 * need its partitions. */
static void *shard_main(void *arg)
{
	struct shard *sh = arg;
	cpu_set_t cpus;
	char name[16];

	snprintf(name, sizeof(name), "sluice-shard%d", sh->id);
	pthread_setname_np(pthread_self(), name);
	CPU_ZERO(&cpus);
	CPU_SET(sh->id % CPU_SETSIZE, &cpus);
	pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	if (shard_thread_init(sh) < 0)
		abort();
	while (!shard_done(sh)) {
		uint64_t c0 = shard_cycles();
		int work = shard_poll(sh, shard_mono_ns(), shard_wall_ms());

		/* busy time: turns that did work; an idle turn (nothing
		 * polled, nothing completed) is the price of polling, not of
		 * serving (relaxed: the control thread reads it on SIGUSR1) */
		if (work)
			__atomic_store_n(&sh->stats.busy_cycles, sh->stats.busy_cycles + (shard_cycles() - c0),
					 __ATOMIC_RELAXED);
		else
			shard_idle(sh);
	}
	shard_thread_fini(sh);
	slog(SLOG_INFO, "shard %d: %llu loop turns, %llu busy cycles (%s in turns that did work)", sh->id, /* style: allow once, at exit */
		(unsigned long long)sh->stats.loops, (unsigned long long)sh->stats.busy_cycles, SHARD_CYCLES_UNIT);
	if (sh->native) {
		char line[2048];

		native_shard_describe(sh, line, sizeof(line));
		slog(SLOG_INFO, "%s", line); /* style: allow once, at exit */
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
