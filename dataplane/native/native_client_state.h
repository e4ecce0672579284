/* dataplane/native/native_client_state.h — the state of one
 * libsluice_native client (struct sluice_client: its session, partitions,
 * batches and the fetch in progress), shared by the engine (native_client.c:
 * the session, the producer, the loop, the API) and the fetch answer
 * (native_client_fetch.c: FETCH_DATA put together, its records). Nothing
 * else includes it: to the application and the transports a client is
 * opaque (sluice_native.h, native_client.h).
 *
 * Thread: the client's (the caller's, one at a time), which owns all of
 * it. Errors: 0/count or -errno.
 */
#ifndef SLUICE_NATIVE_CLIENT_STATE_H
#define SLUICE_NATIVE_CLIENT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <isa-l/crc.h>

#include "dataplane/native/native_client.h"

#define REQS_KEPT 8                   /* sends of a batch whose refusals are tracked */
#define RX_BURST 64

/* ---- state --------------------------------------------------------------------------- */

struct npart;

/* A batch: sealed bytes (header written at seal, identity and CRC at its
 * first send), the opaques of its records, and its send state. Lives in
 * its partition's list from seal to completion, then in the done list
 * until reported, then in the free list. */
struct nbatch {
	struct nbatch *next;
	struct npart *part;
	uint8_t *buf;
	uint32_t cap, len;
	void **opaque;
	uint32_t max_records;
	int32_t count;
	int64_t base_ts, max_ts;      /* ms */
	uint64_t open_ns;             /* first record: linger and delivery timeout */
	/* identity, stamped at the first send (sends == 0: not stamped) */
	int64_t pid;
	int16_t epoch;
	int32_t base_seq;
	/* sending */
	uint32_t sends;               /* sends with this identity */
	uint64_t sent_ns, due_ns;     /* last send; next resend */
	uint32_t reqs[REQS_KEPT];     /* request numbers of the first sends */
	uint8_t refused;              /* bit i: reqs[i] was refused (not appended) */
	uint8_t credited;             /* counted in credits_used */
	uint8_t ooo;                  /* OUT_OF_ORDER: resend when the one before is acknowledged */
	uint8_t acked, failed;
	uint8_t codec;                /* the records' compression (attributes) */
	int err;
	int64_t base_offset;
};

/* A partition the client produced to: its open batch, its sealed batches
 * in sequence order (sent ones first), its producer epoch and sequence. */
struct npart {
	char topic[NATIVE_MAX_TOPIC + 1];
	uint8_t topic_len;
	int32_t partition;
	uint32_t hash;
	struct npart *hnext;          /* hash chain */
	struct npart *anext;          /* active list (open batch or batches in the list) */
	uint8_t active;
	uint8_t confirmed;            /* acknowledged once in this (pid, epoch): window open */
	int16_t epoch;
	int64_t pid;                  /* the producer id next_seq belongs to */
	int32_t next_seq;
	struct nbatch *open;
	struct nbatch *head, *tail;
};

struct nfetch {
	int active, complete;
	char topic[NATIVE_MAX_TOPIC + 1];
	uint8_t topic_len;
	int32_t partition;
	int64_t offset;
	uint32_t max_bytes;
	uint8_t isolation;
	uint32_t first_request, request, ans_request;
	int have;
	uint32_t total;
	uint16_t count, got;
	int16_t err;
	int64_t hw, log_start, lso;
	uint64_t bits[NATIVE_MAX_FRAGMENTS / 64];
	uint8_t *buf;
	uint32_t cap;
};

enum { S_HELLO = 1, S_OPEN = 2 };

struct sluice_client {
	struct native_transport *t;
	struct sluice_config cfg;
	char client_id[256];
	char last_error[256];
	int failed;
	/* session */
	int state;
	uint32_t session;
	uint32_t hello_request;
	uint64_t hello_due, hello_rto;
	int64_t pid;                  /* -1 before the first HELLO_ACK */
	uint32_t credits, credits_used;
	uint16_t max_dg, shards;
	uint32_t batch_limit;         /* bytes a batch may reach (batch_bytes, credits, fragments) */
	uint32_t next_request;
	/* round trip of acknowledgements */
	uint64_t srtt_ns, rttvar_ns;
	int have_rtt;
	/* partitions */
	struct npart **htab;
	uint32_t hcap, nparts;
	struct npart *recent[64];     /* by partition % 64: the last looked up (parts live until close) */
	struct npart *active;
	/* batches */
	struct nbatch *free_batches;
	uint64_t batch_mem, batch_mem_max;
	uint32_t batch_cap, batch_records;
	struct nbatch *done_head, *done_tail;
	size_t outq;
	/* compression: the codec contexts (made on first use), a scratch
	 * batch for the producer, the decompressed records of a fetch */
	struct compress_ctx *zctx;
	uint8_t *zbuf;
	size_t zbuf_cap;
	uint8_t *arena;
	size_t arena_len, arena_cap;
	/* fetch */
	struct nfetch fetch;
	struct sluice_record *recs;
	size_t recs_cap;
	struct sluice_stats st;
	int defeat_dedup;
	uint64_t now;
	uint64_t next_wake;
	struct native_dgram rx[RX_BURST];
};

/* ---- helpers both files use ------------------------------------------------------------------ */

/* a is before b in request-number order (wrapping) */
static inline int req_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline uint32_t crc32c(const uint8_t *p, size_t n)
{
	return crc32_iscsi((unsigned char *)p, (int)n, 0xffffffffu) ^ 0xffffffffu;
}

/* ---- the fetch answer (native_client_fetch.c) -------------------------------------------------- */

/* One FETCH_DATA datagram for the fetch in progress (c->fetch): its
 * fragment kept, stale and unreadable ones counted. */
void native_client_on_fetch_data(struct sluice_client *c, const struct native_msg *m);
/* The records of the complete answer into res (c->recs, c->arena, valid
 * until the next fetch): the count, or -errno (-EPROTO: a batch that does
 * not parse or that its codec refuses; -EPROTONOSUPPORT: an unknown codec;
 * -ENOMEM). */
int native_client_fetch_records(struct sluice_client *c, struct sluice_fetch_result *res);

#endif
