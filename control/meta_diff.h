/* control/meta_diff.h — what a snapshot installed into a running node's
 * image changed: the image is taken before metalog_restore and compared
 * with the restored one, so the node can act on the records it skipped
 * as it acts on each record applied (control/ctl_follow.c): the topics
 * created, deleted, grown or reconfigured, and whether the run-time
 * broker configs changed. Partitions whose leader, ISR or replicas moved
 * need no entry here: every node compares its served topics with the
 * image after a snapshot as after any partition record (ctl_elect.c,
 * ctl_roles.c, ctl_reassign.c).
 *
 * @thread ctl: the image's thread. Pure over the images; no I/O. */
#ifndef SLUICE_META_DIFF_H
#define SLUICE_META_DIFF_H

#include <stdint.h>

struct metalog;
struct meta_diff;

enum meta_diff_kind {
	META_DIFF_CREATED,           /* a live topic the old image had not (by id) */
	META_DIFF_DELETED,           /* a live topic of the old image the new one has not */
	META_DIFF_CHANGED,           /* in both: its partition count, topic epoch or config overrides differ */
};

/* What ml has now (its live topics, which stay readable after
 * metalog_restore: metalog.h, and a copy of its broker configs). 0 or
 * -ENOMEM. */
int meta_diff_take(const struct metalog *ml, struct meta_diff **out);
/* fn(arg, id, kind) for each topic that differs between the taken image
 * and ml now (deleted first, then created and changed, in ml's order);
 * returns 1 when the run-time broker configs differ, else 0. */
int meta_diff_each(const struct meta_diff *d, const struct metalog *ml,
		   void (*fn)(void *arg, const uint8_t id[16], enum meta_diff_kind kind), void *arg);
void meta_diff_free(struct meta_diff *d);

#endif
