/* dataplane/conn.h — a client's TCP connection: accepted from the
 * shard's listener (with Kafka's limits: max.connections, .per.ip, and a
 * back-off after EMFILE), its receives into the shard's provided buffers,
 * frames assembled and taken up under the broker's request memory
 * (queued.max.request.bytes), responses sent in request order, and its
 * close when idle (connections.max.idle.ms) or broken.
 *
 * Thread: the shard's own (@thread shard), all of it. The only state
 * shared with other shards is the broker-wide counts in struct broker_conns
 * (atomics, dataplane/broker.h).
 * Owns: its input and output buffers and its request slots (pipe[]).
 * Errors: 0/count or -errno; a connection that fails is closed.
 */
#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "dataplane/kafka_ctx.h"

/* user_data ops of the shard (storage uses 1..4 and 6). */
#define SHARD_OP_IO 5

enum io_kind { IO_ACCEPT = 1, IO_RECV, IO_SEND, IO_WAKE, IO_CLOSE, IO_NATIVE };

/* One in-flight operation; user_data = &io | SHARD_OP_IO. */
struct io_op {
	uint8_t kind;
	uint8_t inflight;
	struct conn *c;
} __attribute__((aligned(8)));


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
	struct io_op recv_op, send_op, close_op;
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
	int zc_notifs;                     /* zero-copy notifications to come */
	int zc_copied;                     /* the kernel copied our zero-copy pages: plain sends */
	int send_done;                     /* sent; waiting for them */
	int busy;                          /* requests in progress (pipe[phead..]) */
	int sending;                       /* the head's response is on the wire */
	struct kafka_ctx *pipe[CONN_PIPE]; /* in request order from phead; allocated on first use */
	int phead;
	int closing;
	uint32_t in_charge;                /* bytes of `in` reserved in the broker's request memory
					    * (queued.max.request.bytes): its capacity when above
					    * the initial buffer, else 0 */
	int mem_wait;                      /* on the shard's memq: its frame waits for request memory */
	struct conn *memq_next;
	int ip_slot;                       /* its word in the per-address table, -1: none */
	uint64_t active_ns;                /* loop clock at accept and at each request's start and
					    * end: idle since then (connections.max.idle.ms) */
	int peer_closed;                   /* EOF read: finish what was sent, then close */
	int zombie;                        /* unlinked, freed next loop turn */
	struct kafka_ctx ctx;              /* pipe[]'s first slot */
	struct conn *next;                 /* shard's list */
	struct conn *prev;
};

#define SEND_ZC_MIN (64u * 1024)     /* responses this large go out zero-copy */
#define SHARD_PBUF_SIZE (64u * 1024) /* one provided receive buffer */
#define SHARD_PBUFS 256              /* per shard: 16 MiB */
#define SHARD_PBUF_GROUP 1

#endif
