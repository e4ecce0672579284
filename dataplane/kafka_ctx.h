/* dataplane/kafka_ctx.h — a request in progress on a connection: its
 * memory (an arena, and blocks beyond it), its dispatch through the ApiKey
 * table, the data its response holds, its parking for a long poll, and its
 * response's encoding. It sits above the connection (dataplane/conn.h),
 * which takes frames up and sends responses in request order, and tells
 * this pipeline through kafka_ctx_conn_ops (struct conn_ops).
 *
 * Thread: the shard's own (@thread shard), all of it: a request lives on
 * the shard whose connection took it up; another shard's part of it comes
 * back as a ring message before anything here is touched.
 * Owns: its arena and the `more` blocks, until the request ends.
 * Errors: 0/count or -errno; a request that cannot go on is aborted
 * (kafka_ctx_abort closes its connection).
 */
#ifndef SLUICE_KAFKA_CTX_H
#define SLUICE_KAFKA_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/conn.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/shard_core.h"

struct plog_read;

/* A data reference a response holds until it is sent: a tail chunk or a
 * disk read buffer, on this shard or on its owner shard; `release` (the
 * handler's, given with kafka_ctx_hold) gives it back. */
struct data_hold {
	int shard;                  /* owner shard */
	struct plog_read *rd;       /* on the owner; released there */
	void (*release)(struct shard *sh, struct data_hold *h);
};

/* The request in progress on a connection (one at a time, like Kafka:
 * the connection is muted until the response is queued). */
struct kafka_ctx {
	struct conn_req cr;                 /* the connection's view: ready, no_response */
	struct shard *sh;
	struct conn *c;
	struct kafka_request req;
	const uint8_t *frame;
	uint32_t frame_len;
	int pending;                        /* sub-operations outstanding */
	int (*resume)(struct kafka_ctx *);  /* when pending drops to 0 */
	void *resp;                         /* response body, in the arena */
	void *state;                        /* handler state, in the arena */
	struct shard_park park;             /* long-poll waiting (park.parked), until park.deadline_ns */
	struct data_hold *holds;            /* in the arena */
	int nholds, holds_cap;
	int final;                          /* long-poll over: answer now */
	int16_t only_error;                 /* nonzero: answer just this error */
	int raw;                            /* a bare SASL token after a v0 SaslHandshake: the answer
					     * is raw_out, size-prefixed, no Kafka header */
	struct kafka_bytes raw_out;
	int (*edit)(struct kafka_ctx *);    /* the handler's last word on a response another thread
					     * built (the authorizer's per-item refusals), run once by
					     * kafka_ctx_respond; < 0 aborts */
	void *edit_arg;
	void (*cleanup)(struct kafka_ctx *);/* when the request ends (its response sent or dropped) */
	void *cleanup_arg;
	int parked_once;                    /* a fetch that long-polled (metrics) */
	uint64_t started_ns;
	uint64_t recv_ns;                   /* CLOCK_MONOTONIC when the frame was taken up: orders
					     * requests across connections (transactions' fences) */
	uint64_t conn_ns;                   /* CLOCK_MONOTONIC when its connection was accepted */
	struct kafka_arena arena;           /* the request's memory, until its response is sent */
	uint8_t *arena_mem;
	size_t arena_cap;
	void *more;                         /* blocks beyond arena_mem for a response larger than it
					     * (kafka_ctx_alloc_more), freed when the request ends */
	size_t more_bytes;
};

/* @thread shard, all of them. */
/* Queue the response in ctx->resp for sending; ends the request. */
void kafka_ctx_respond(struct kafka_ctx *ctx);
/* End a request that has no response (acks=0). */
void kafka_ctx_done(struct kafka_ctx *ctx);
/* A sub-operation finished: resume the handler when none is left. */
void kafka_ctx_sub_done(struct kafka_ctx *ctx);
/* Close the connection after a protocol violation. */
void kafka_ctx_abort(struct kafka_ctx *ctx);



/* n elements of `type` from the request's arena (at least one, so an
 * empty array is not NULL); NULL when the arena is full. The arena lives
 * until the response is sent. */
#define ALLOC(ctx, type, n) ((type *)kafka_ctx_alloc((ctx), sizeof(type) * (size_t)((n) > 0 ? (n) : 1)))

/* Requests' memory beyond their arena: at most this much more each. */
#define KAFKA_CTX_MORE_MAX (256u << 20)

/* @thread shard. The slow side of ALLOC: the arena is spent, so a new
 * block (at least 1 MiB) becomes the arena, the old one staying valid
 * until the request ends. For responses larger than the request that asked
 * for them (Metadata of a topic with many thousands of partitions); NULL
 * past KAFKA_CTX_MORE_MAX or when memory is short. */
void *kafka_ctx_alloc_more(struct kafka_ctx *ctx, size_t n);

/* @thread shard. n bytes of the request's memory, or NULL. */
static inline void *kafka_ctx_alloc(struct kafka_ctx *ctx, size_t n)
{
	void *p = kafka_arena_alloc(&ctx->arena, n);

	return p ? p : kafka_ctx_alloc_more(ctx, n);
}

/* @thread shard. s (NUL-terminated) copied into the request's memory
 * ("" when it is full): for strings that may not outlive the request
 * (a metadata snapshot's, the control thread's answer). */
struct kafka_str kafka_ctx_strdup(struct kafka_ctx *ctx, const char *s);

/* @thread shard. A result's ErrorCode and ErrorMessage from an item the
 * control thread answered: err, and text copied (null when err is 0). */
static inline void kafka_ctx_result_error(struct kafka_ctx *ctx, int16_t *code, struct kafka_str *msg, int16_t err,
					  const char *text)
{
	*code = err;
	*msg = err ? kafka_ctx_strdup(ctx, text) : (struct kafka_str){ NULL, -1 };
}

/* Keep `rd` (on shard `owner`) until the response is sent; then (or when
 * the request lets go of its holds early) release(ctx->sh, hold) gives it
 * back. */
int kafka_ctx_hold(struct kafka_ctx *ctx, int owner, struct plog_read *rd,
		   void (*release)(struct shard *sh, struct data_hold *h));
/* Give back every hold now (a long poll lets go of its data). */
void kafka_ctx_release_holds(struct kafka_ctx *ctx);

/* Park a request until its deadline or a wake on one of its partitions
 * (shard_wake_parked): then ctx->resume runs, with ctx->final set when the
 * shard stops. */
void kafka_ctx_park(struct kafka_ctx *ctx, uint64_t deadline_ns);

/* @thread shard. What a connection tells its requests (given to the shards
 * by the loop, dataplane/shard.c). */
extern const struct conn_ops kafka_ctx_conn_ops;

/* ---- what a coordinator's shard-side half uses (dataplane/coord.h) ---- */

struct shard_msg;
/* @thread shard. The shard the request lives on (where its answer goes). */
int kafka_ctx_shard_id(const struct kafka_ctx *ctx);
/* @thread shard. Send m to the control thread from the request's shard;
 * a full ring parks it (shard_send), never drops it. */
void kafka_ctx_send_ctl(struct kafka_ctx *ctx, const struct shard_msg *m);
/* @thread shard. The peer's address as Kafka spells it ("/127.0.0.1"),
 * "" when unknown. */
void kafka_ctx_peer_host(const struct kafka_ctx *ctx, char *buf, size_t n);

#endif
