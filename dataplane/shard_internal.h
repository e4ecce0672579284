/* dataplane/shard_internal.h — what the files of the shard (shard.c, the
 * loop; conn.c, its connections; kafka_ctx.c, their requests) share and
 * nothing else may use.
 *
 * Thread: the shard's own (@thread shard), all of it.
 * Owns: nothing; declarations only.
 * Errors: as each function says; most cannot fail (a connection that
 * fails is closed).
 */
#ifndef SLUICE_SHARD_INTERNAL_H
#define SLUICE_SHARD_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "dataplane/shard.h"

/* @thread any. CLOCK_MONOTONIC now. Only the loop's driver reads it once
 * per turn (sh->now_ns); the two other readers need the instant itself:
 * a connection's accept (conn->accept_ns) and a request's take-up
 * (kafka_ctx.recv_ns), which order requests across connections and
 * shards against the control thread's own clock (transactions' fences):
 * the turn's clock, taken before the turn's work, could put a request
 * taken up later on one shard before one taken up earlier on another. */
static inline uint64_t shard_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* @thread shard. An SQE of the shard's ring, or NULL when it is full. */
static inline struct io_uring_sqe *shard_sqe(struct shard *sh)
{
	return store_sqe(&sh->st);
}

/* @thread shard. The SQE completes to `op` (the loop's dispatch on kind). */
static inline void io_set(struct io_uring_sqe *sqe, struct io_op *op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)op | SHARD_OP_IO);
	op->inflight = 1;
}

/* ---- conn.c: connections ---------------------------------------------- */

/* @thread shard. Arm the listener's multishot accept. */
void conn_arm_accept(struct shard *sh);
/* @thread shard. Completions: an accept, a receive, a send. */
void conn_on_accept(struct shard *sh, int res, unsigned flags);
void conn_on_recv(struct conn *c, int res, unsigned flags);
void conn_on_send(struct conn *c, int res, unsigned flags);
/* @thread shard. Read on: take up the frames received (as the pipeline
 * admits them), or arm the next receive. */
void conn_process(struct conn *c);
void conn_arm_recv(struct conn *c);
/* @thread shard. Send what is next in request order. */
void conn_pump(struct conn *c);
/* @thread shard. Close (idempotent); free once nothing refers to it, at
 * the top of the next turn (conn_free_zombies). */
void conn_close(struct conn *c);
void conn_maybe_free(struct conn *c);
void conn_free_zombies(struct shard *sh);
/* @thread shard. Request memory was given back: waiting connections read
 * on, in order, while there is room. */
void conn_retry_memq(struct shard *sh);
/* @thread shard. Close connections idle for connections.max.idle.ms;
 * returns the number closed. */
int conn_close_idle(struct shard *sh);

/* ---- kafka_ctx.c: requests -------------------------------------------- */

/* @thread shard. The connection's next request slot, NULL without memory. */
struct kafka_ctx *kafka_ctx_next(struct conn *c);
/* @thread shard. May the request in `frame` start while `head` is still in
 * progress (pipelined)? */
int kafka_ctx_may_follow(const struct kafka_ctx *head, const uint8_t *frame);
/* @thread shard. Decode and hand the frame to its handler. */
void kafka_ctx_dispatch(struct kafka_ctx *ctx, const uint8_t *frame, uint32_t len);
/* @thread shard. The head request is over (response sent, none, or the
 * connection closing): the next may go. */
void kafka_ctx_end(struct kafka_ctx *ctx);
void kafka_ctx_release_holds(struct kafka_ctx *ctx);
/* @thread shard. Free the slot's memory (its connection goes). */
void kafka_ctx_fini(struct kafka_ctx *ctx);
/* @thread shard. Wake parked requests: all when `all`, else those past
 * their deadline (sh->now_ns); returns the nearest remaining deadline, 0
 * when none is left. */
uint64_t kafka_ctx_run_parked(struct shard *sh, int all);

#endif
