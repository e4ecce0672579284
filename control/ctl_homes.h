/* control/ctl_homes.h — the control thread's own book of this node's
 * partition copies ("homes"): for each partition this node has asked a
 * shard to open, keyed by (topic id, partition index), which shard owns
 * it, whether that shard answered the open, the published block
 * (struct part_pub) the control thread allocated for it, the role last
 * told to the owner (control/ctl_roles.c), and the leader and leader
 * epoch the owner and the published snapshot were last told.
 *
 * The control thread decides from this book and the metadata image, and
 * from nothing of the published metadata snapshot, whether a partition
 * is open here, which shard to send a message about it to, and which
 * leader epoch to tell it. The snapshot's md_partition entries, which
 * the shards read, are written from the image and this book by the one
 * place that builds and publishes the snapshot (control/ctl_topic.c),
 * and read back by nobody else in control/ (scripts/check-layers, rule 6).
 *
 * An entry is made when the control thread sends the open
 * (ctl_home_add), marked open when the owner answers it, and dropped when
 * the control thread sends the retire or close (ctl_home_take): from then
 * on nothing more is sent to that shard about the partition. A partition
 * whose open failed keeps its entry, not open, and its block (an open
 * again reuses both).
 *
 * Thread: the control thread owns the book and every entry (@thread ctl);
 * no other thread reads it. The part_pub blocks it allocates are shared:
 * the owner shard writes them, the control thread reads them (see struct
 * part_pub, dataplane/broker.h); they are freed only at exit
 * (ctl_homes_free), after the shards have stopped, since an older
 * snapshot may still point at one.
 * Errors: allocation failure aborts (the control thread's own bookkeeping).
 */
#ifndef SLUICE_CTL_HOMES_H
#define SLUICE_CTL_HOMES_H

#include <stdint.h>

struct ctl;
struct ctl_homes;
struct part_pub;

struct ctl_home {
	uint8_t topic_id[16];
	int32_t index;
	int32_t shard;               /* the owner shard on this node */
	int opened;                  /* 1: the owner answered the open; 0: sent, not answered
				      * yet; -1: it failed (its block kept for the next try) */
	struct part_pub *part_pub;   /* what the owner publishes (allocated here, 64-byte aligned) */
	/* ctl_roles.c: the role last sent to the owner (role_set 0: none,
	 * 1: sent, the fields say what; 2: alone, nothing sent) */
	int role_set;
	int32_t role_leader, role_epoch, role_pepoch;
	int role_thr;                /* the throttle flags sent */
	/* the leader and leader epoch last told (told 1; 0: none yet): by
	 * the open's answer (the entry it opened with, its epoch raised to
	 * the log's when the log held a later one), by the snapshot entry
	 * published (ctl_topic.c writes them as it publishes), or by a
	 * part_proxy_set_leader_epoch (ctl_elect.c, as it sends it). The
	 * next entry built keeps that epoch while the leader is the same
	 * (ctl_home_epoch): Metadata never goes back to the metadata log's
	 * lower one */
	int told;
	int32_t told_leader, told_epoch;
	struct ctl_home *next;       /* the hash chain */
};

struct ctl_homes *ctl_homes_new(void);
/* At exit, the shards stopped: the book and every published block. */
void ctl_homes_free(struct ctl_homes *hs);

/* The entry of (topic id, idx), or NULL: this node never asked a shard to
 * open it, or retired it since. */
struct ctl_home *ctl_home_find(const struct ctl_homes *hs, const uint8_t id[16], int32_t idx);
/* The entry of (topic id, idx), made (not open, a zeroed published block)
 * with owner `shard` if there is none. */
struct ctl_home *ctl_home_add(struct ctl_homes *hs, const uint8_t id[16], int32_t idx, int32_t shard);
/* Drop the entry (a retire or close is being sent): its owner shard if it
 * was open, else -1 (nothing to send). Its published block stays
 * allocated until exit (an older snapshot may point at it); an open again
 * gets a new one. */
int32_t ctl_home_take(struct ctl_homes *hs, const uint8_t id[16], int32_t idx);

/* The leader epoch a snapshot entry of h's partition carries when the
 * image says `leader` at `epoch`: the image's, or the one last told when
 * that is higher under the same leader (the log held a later epoch than
 * the metadata log's). h NULL (not a partition of this node): the
 * image's. */
int32_t ctl_home_epoch(const struct ctl_home *h, int32_t leader, int32_t epoch);

/* What the rest of the control thread asks (the group and transaction
 * coordinators and the metrics included): the owner shard of (topic id,
 * idx) when the partition is open on this node, else -1. */
int32_t ctl_part_open_on(const struct ctl *ctl, const uint8_t id[16], int32_t idx);
/* Its entry (NULL: none), for what needs more (ctl_roles.c, metrics). */
const struct ctl_home *ctl_part_home(const struct ctl *ctl, const uint8_t id[16], int32_t idx);

#endif
