/* dataplane/part_table.h — a shard's own partitions by value: (topic id,
 * partition index) -> the shard's struct part. A message that names a
 * partition by value (dataplane/part_proxy.h) is resolved here on the owner
 * when it arrives, so a partition deleted or moved meanwhile is simply not
 * found and the sender gets an error answer, never a freed struct.
 *
 * Thread: owned by one shard, the partitions' owner (@thread owner); no
 * other thread reads or writes it.
 * Owns: the slot array only; the partitions are linked from struct shard
 * (sh->parts) and freed there.
 * Errors: part_table_add returns 0 or -ENOMEM (the slot array could not
 * grow: the open fails).
 *
 * Open addressing with linear probing, at most half full; removal shifts
 * the following entries back (no tombstones), so a lookup is O(1) on
 * average and never scans the shard's list. The array grows only when a
 * partition is opened (the slow path), never on a lookup.
 */
#ifndef SLUICE_PART_TABLE_H
#define SLUICE_PART_TABLE_H

#include <stdint.h>

struct part;

struct part_table {
	struct part **slot;          /* NULL: empty; cap a power of two (0: nothing yet) */
	uint32_t cap, n;
};

/* Add p under (p->topic_id, p->index); one already there under that key
 * is replaced (the newest open wins). @thread owner */
int part_table_add(struct part_table *pt, struct part *p);

/* Remove p if it is the entry under its key (nothing otherwise).
 * @thread owner */
void part_table_remove(struct part_table *pt, const struct part *p);

/* The partition under (topic_id, index), or NULL. @thread owner */
struct part *part_table_find(const struct part_table *pt, const uint8_t topic_id[16], int32_t index);

/* Free the slot array (not the partitions). @thread owner, at exit */
void part_table_fini(struct part_table *pt);

#endif
