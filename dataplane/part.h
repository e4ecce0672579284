/* dataplane/part.h — a partition as its owner shard holds it: the log, the
 * produce requests waiting for durability, and who to wake when its high
 * watermark moves.
 *
 * Thread: the owner shard only. Other shards reach it through messages.
 */
#ifndef SLUICE_PART_H
#define SLUICE_PART_H

#include <stdint.h>

#include "dataplane/producer.h"
#include "storage/plog.h"

struct shard;
struct shard_msg;
struct kafka_ctx;

/* A produce waiting until durable_offset >= need. */
struct ack_wait {
	int64_t need;
	int64_t base_offset;
	int from;                   /* shard of the connection */
	struct kafka_ctx *ctx;      /* on shard `from` */
	void *slot;                 /* the partition response to fill, on `from` */
	/* Internal appends (the group coordinator's offsets): when set, the
	 * completion goes to thread `from` (any thread, the control thread
	 * included) as this message, p[0] = ctx, v = { base_offset, err }. */
	void (*notify)(void *self, struct shard_msg *m);
};

struct part {
	struct plog *pl;
	struct shard *sh;
	int32_t index;
	char topic[256];
	struct ack_wait *acks;      /* ring, oldest first */
	uint32_t ack_head, ack_tail, ack_cap;
	uint64_t watchers;          /* shards with long-polls on this partition */
	int64_t last_hw;
	int deleted;                /* its topic was deleted: the log is closed */
	struct producer_table producers;   /* idempotent producers' last batches */
	int64_t snap_covered;       /* log offset the last producer snapshot covers, -1: none */
	struct part *next;          /* the owner shard's list */
};

int part_open(struct shard *sh, const char *dir, const char *topic, int32_t index,
	      const struct plog_config *cfg, struct part **out);
void part_close(struct part *p);
/* Close the log of a deleted partition but keep the struct: requests
 * parked on other shards may still name it; they see `deleted`. */
void part_retire(struct part *p);

/* Save the idempotent producer state next to the log (slow path). */
void part_snapshot_producers(struct part *p);

/* Register a produce waiting for durability. -ENOBUFS if the queue is full. */
int part_wait_ack(struct part *p, const struct ack_wait *w);
/* Complete what durability allows and wake watchers; called after appends
 * and from the durability callback. */
void part_progress(struct part *p);

#endif
