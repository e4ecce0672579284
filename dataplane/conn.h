/* dataplane/conn.h — a client's TCP connection: accepted from the
 * shard's listener (with Kafka's limits: max.connections, .per.ip, and a
 * back-off after EMFILE), its receives into the shard's provided buffers,
 * frames assembled and taken up under the broker's request memory
 * (queued.max.request.bytes), responses sent in request order, and its
 * close when idle (connections.max.idle.ms) or broken. It builds on the
 * shard's core (dataplane/shard_core.h) and knows no Kafka request: it
 * tells the request pipeline above it (dataplane/kafka_ctx.h) about
 * frames, ends and closes through the struct conn_ops table it is given.
 *
 * Thread: the shard's own (@thread shard), all of it. The only state
 * shared with other shards is the broker-wide counts in struct broker_conns
 * (atomics, dataplane/broker.h).
 * A connection of an SSL listener receives and sends ciphertext with the
 * same operations and passes it through its struct tls_conn
 * (dataplane/tls.h); the handshake is a state of the connection, driven
 * as bytes arrive.
 * Owns: its input and output buffers, its request slots (pipe[]), its
 * TLS state (tls), its SASL state (sasl) and the authorizer's decisions
 * for its principal (authz, dataplane/authz_cache.h).
 * Errors: 0/count or -errno; a connection that fails is closed.
 */
#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "dataplane/authz_cache.h"
#include "dataplane/shard_core.h"

struct kafka_writer;
struct tls_conn;
struct sasl_conn;

/* A request slot as its connection sees it: the first member of the
 * pipeline's request (struct kafka_ctx), which sets these two when the
 * request is over; the connection sends, in request order, what is ready. */
struct conn_req {
	int ready;                         /* response built (or none): send in order */
	int no_response;                   /* nothing to send (acks=0, or aborted) */
};

/* What a connection tells the request pipeline above it (dataplane/
 * kafka_ctx.c), a table the loop gives the shard at creation
 * (shard->conn_ops). A connection frames bytes and sends responses in
 * order; what a frame means is the pipeline's. */
struct conn_ops {
	/* A new request slot for c (made once per slot and connection, kept
	 * until the connection goes); NULL without memory. */
	struct conn_req *(*slot_new)(struct conn *c);
	/* May the request in `frame` start while `head` is still in progress
	 * (pipelined)? */
	int (*may_follow)(const struct conn_req *head, const uint8_t *frame);
	/* The frame is taken up in slot r: decode it and hand it to its
	 * handler. The frame stays valid until r ends. */
	void (*dispatch)(struct conn_req *r, const uint8_t *frame, uint32_t len);
	/* Encode r's response into w: once to measure it, once to write it
	 * (w->err on failure). */
	void (*encode)(struct conn_req *r, struct kafka_writer *w);
	/* r's turn is over (response sent, none, or the connection closing):
	 * it lets go of what it holds; the next request may go. */
	void (*end)(struct conn_req *r);
	/* The connection closes while r, its only request, waits with
	 * nothing in flight (a long poll): r lets go of it all here and
	 * returns 1; 0 when r must run its course. */
	int (*cancel)(struct conn_req *r);
	/* The connection goes: free slot r. */
	void (*fini)(struct conn_req *r);
};

/* Requests of one connection in progress at once: consecutive Produce
 * requests already received are carried out together (their appends share
 * a group commit); everything else runs one at a time. Responses always
 * go out in request order. */
#define CONN_PIPE 8

struct conn {
	int fd;
	uint64_t accept_ns;                /* CLOCK_MONOTONIC at accept */
	uint32_t gen;
	struct shard *sh;
	const struct conn_ops *ops;        /* the request pipeline above (shard->conn_ops) */
	struct io_op recv_op, send_op;
	uint8_t *in;
	uint32_t in_cap, in_len, in_off;   /* bytes [in_off, in_len) unparsed */
	uint32_t want;                     /* room a partial frame needs */
	uint8_t *vbuf;                     /* the provided buffer being parsed */
	uint32_t vlen, voff;
	int vbid;                          /* its buffer id, -1: none */
	int pbuf_starved;                  /* the ring ran dry: next receive is ours */
	uint8_t *out;
	uint32_t out_cap;
	struct iovec *iov;
	int iov_cap;
	struct msghdr msg;
	size_t send_left;
	size_t iov_rest;                /* iovecs from msg.msg_iov to the response's end (a
					 * sendmsg takes IOV_MAX of them at most) */
	int zc_notifs;                     /* zero-copy notifications to come */
	int zc_copied;                     /* the kernel copied our zero-copy pages: plain sends */
	int send_done;                     /* sent; waiting for them */
	int busy;                          /* requests in progress (pipe[phead..]) */
	int sending;                       /* the head's response is on the wire */
	struct conn_req *pipe[CONN_PIPE];  /* in request order from phead; made on first use (ops->slot_new) */
	int phead;
	int closing;
	uint32_t in_charge;                /* bytes of `in` reserved in the broker's request memory
					    * (queued.max.request.bytes): its capacity when above
					    * the initial buffer, else 0 */
	int mem_wait;                      /* on the shard's memq: its frame waits for request memory */
	struct conn *memq_next;
	int ip_slot;                       /* its word in the per-address table, -1: none */
	uint8_t listener;                  /* the listener it came through (b->set.listeners[]) */
	uint64_t active_ns;                /* loop clock at accept and at each request's start and
					    * end: idle since then (connections.max.idle.ms) */
	int peer_closed;                   /* EOF read: finish what was sent, then close */
	int zombie;                        /* unlinked, freed next loop turn */
	struct tls_conn *tls;              /* an SSL listener's: its TLS (dataplane/tls.h), else NULL */
	struct sasl_conn *sasl;            /* a SASL listener's: its authentication (dataplane/sasl.h),
					    * else NULL; until its state is SASL_DONE only ApiVersions,
					    * SaslHandshake and SaslAuthenticate frames of at most
					    * SASL_PREAUTH_FRAME_MAX bytes are taken up */
	int close_after;                   /* close once the head's response is sent (a failed
					    * authentication) */
	struct authz_cache authz;          /* the authorizer's decisions for its principal and
					    * address (dataplane/authz.c); emptied when the
					    * principal authenticates again */
	struct conn *next;                 /* shard's list */
	struct conn *prev;
};

#define SEND_ZC_MIN (64u * 1024)     /* responses this large go out zero-copy */
#define SHARD_PBUF_SIZE (64u * 1024) /* one provided receive buffer */
#define SHARD_PBUFS 256              /* per shard: 16 MiB */
#define SHARD_PBUF_GROUP 1

/* @thread shard, all of them. */
/* The loop's: arm each listener's multishot accept not armed yet (it
 * completes to conn_on_accept). */
void conn_arm_accept(struct shard *sh);
/* An accept of listener li (b->set.listeners[li]) completed: res the new
 * socket or -errno. */
void conn_on_accept(struct shard *sh, int li, int res, unsigned flags);
/* The loop's: free the connections closed since the last turn. */
void conn_free_zombies(struct shard *sh);
/* The loop's: request memory was given back: waiting connections read
 * on, in order, while there is room. */
void conn_retry_memq(struct shard *sh);
/* The loop's: close connections idle for connections.max.idle.ms;
 * returns the number closed. */
int conn_close_idle(struct shard *sh);

/* Close (idempotent); free once nothing refers to it, at the top of the
 * next turn (conn_free_zombies). */
void conn_close(struct conn *c);
void conn_maybe_free(struct conn *c);
/* A request became ready (r->ready): send what is next in request order. */
void conn_pump(struct conn *c);
/* The connection's authenticated principal: SASL's "User:<name>", else
 * the TLS client certificate's, else "User:ANONYMOUS". */
const char *conn_principal(const struct conn *c);

/* Request r broke the protocol: close the connection; r ends without a
 * response (bad_frames counts it). */
void conn_abort(struct conn *c, struct conn_req *r);

#endif
