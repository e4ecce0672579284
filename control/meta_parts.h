/* control/meta_parts.h — the partitions of a topic as the metadata log
 * records them (Kafka's PartitionRecord and PartitionChangeRecord): each
 * partition's replicas (broker ids; the first is the preferred leader),
 * its in-sync replicas, its leader (-1: none), its leader epoch (bumped
 * by every change of leader) and its partition epoch (bumped by every
 * change). Part of the image (control/metalog.h): the records are applied
 * in log order on every node, through metalog_apply_at.
 *
 * A partition no PARTITION record has placed is "legacy": a topic written
 * by a broker before partition records (or a count raised by a PARTITIONS
 * record alone) has every partition on the node that wrote it (the NODE
 * record's), its leader epoch the topic's. Such a partition keeps
 * following the topic's epoch until a record places it, and a snapshot
 * leaves it to the TOPIC record, so a log and its snapshot rebuild the same
 * image.
 *
 * Thread: the control thread (@thread ctl), as the image. Each partition
 * owns its id array. Errors: 0 or -errno, as metalog_apply's: -EPROTO for
 * bytes it cannot read, -EINVAL (a partition out of range, an ISR member
 * or leader that is not a replica, a broker twice), -ENOMEM, -ESTALE (a
 * PARTITION_CHANGE whose guard, the leader and epochs it was built
 * against, no longer holds, or a PARTITION_REASSIGN built at another
 * partition epoch: a no-op).
 */
#ifndef SLUICE_META_PARTS_H
#define SLUICE_META_PARTS_H

#include <stddef.h>
#include <stdint.h>

struct dec;
struct enc;
struct meta_topic;

#define META_MAX_REPLICAS 64         /* replicas of one partition */

struct meta_part {
	int32_t leader;              /* broker id, -1: none */
	int32_t leader_epoch;
	int32_t partition_epoch;
	int16_t nreplicas, nisr;
	int32_t *replicas;           /* malloc()ed: nreplicas ids, then the nisr of the ISR */
	int32_t *isr;                /* = replicas + nreplicas */
	int legacy;                  /* placed by no record: on the writer node, the topic's epoch */
	/* a reassignment in progress (KIP-455): the replicas being added
	 * (catching up, not yet all in the ISR) and those that leave once
	 * they are; both among replicas. moving is malloc()ed (nadding ids,
	 * then the nremoving), NULL when none is in progress */
	int16_t nadding, nremoving;
	int32_t *moving;
};

/* The bytes one partition takes in a PARTITION record with rf replicas
 * (and as many in sync). */
#define META_PART_BYTES(rf) (4 + 4 + 4 + 2 + 2 + 8 * (size_t)(rf))

/* Partitions [from, t->partitions) of t placed the legacy way on node
 * `writer` (t->parts grown to t->partitions): -ENOMEM. Those below from
 * that are legacy follow the topic's epoch again. */
int meta_parts_legacy(struct meta_topic *t, int32_t from, int32_t writer);
/* Apply a PARTITION, PARTITION_CHANGE or PARTITION_REASSIGN record to t (d is past the topic
 * id). dry: check only. */
int meta_parts_apply(struct meta_topic *t, int16_t type, struct dec *d, int dry);
/* Encode a PARTITION record's partitions [first, first + count) of t
 * after the topic id (the caller wrote type, version and id). */
void meta_parts_encode(struct enc *e, const struct meta_topic *t, int32_t first, int32_t count);
/* Encode one partition's state (a PARTITION record's entry). */
void meta_part_encode(struct enc *e, int32_t leader, int32_t leader_epoch, int32_t partition_epoch,
		      const int32_t *replicas, int nreplicas, const int32_t *isr, int nisr);
/* The body of a PARTITION_CHANGE of t's partition (metalog.h
 * metalog_build_partition_change has the arguments' meaning) into e, with
 * the guard: the state it is built against. 1: written; 0: nothing would
 * change (nothing written); -EINVAL. */
int meta_parts_build_change(struct enc *e, const struct meta_topic *t, int32_t partition, int32_t leader,
			    const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas);
/* The body of a PARTITION_REASSIGN (metalog_build_partition_reassign)
 * into e: 1 (written, as meta_parts_build_change), or -EINVAL. */
int meta_parts_build_reassign(struct enc *e, const struct meta_topic *t, int32_t partition, int32_t leader,
			      const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
			      const int32_t *adding, int nadding, const int32_t *removing, int nremoving);
/* Each run of placed partitions of t as PARTITION records no larger than
 * cap value bytes: put(arg, e) per record. First error returned. */
int meta_parts_snapshot(const struct meta_topic *t, struct enc *e, size_t cap,
			int (*put)(void *arg, struct enc *e), void *arg);
/* Each partition of t with a reassignment in progress as a
 * PARTITION_REASSIGN record that notes it (no epoch moves): put(arg, e)
 * per record, after meta_parts_snapshot's. First error returned. */
int meta_parts_snapshot_reassign(const struct meta_topic *t, struct enc *e,
				 int (*put)(void *arg, struct enc *e), void *arg);
/* A BROKER_RESTARTED record (metalog.h) for broker applied to p:
 * eligible(arg, id) says whether broker id may take over (registered and
 * unfenced). Where p's ISR holds broker and an eligible other member,
 * broker leaves the ISR and, where it led, the first such member in
 * replicas order leads (a new leader epoch); else a placed partition it
 * leads takes a new leader epoch. 1: p is a legacy partition broker leads
 * (its topic's epoch is the caller's to bump), else 0. */
int meta_part_restarted(struct meta_part *p, int32_t broker, int (*eligible)(const void *arg, int32_t id),
			const void *arg);
/* Free the partitions of t. */
void meta_parts_free(struct meta_topic *t);
/* Whether a state holds: replicas distinct, not negative, at least one;
 * the ISR a subset of them, distinct; the leader -1 or in the ISR. */
int meta_part_valid(int32_t leader, const int32_t *replicas, int nreplicas, const int32_t *isr, int nisr);
/* Whether a reassignment of p is in progress. */
static inline int meta_part_reassigning(const struct meta_part *p)
{
	return p->nadding > 0 || p->nremoving > 0;
}
/* Whether broker id is a replica / in the ISR of p. */
int meta_part_has(const int32_t *ids, int n, int32_t id);

#endif
