/* control/coord_load.h — which partitions of a coordinator's internal topic
 * (__consumer_offsets for the group coordinator, __transaction_state for
 * the transaction coordinator) this node coordinates: Kafka's
 * loadGroupsForPartition / removeGroupsForPartition bookkeeping.
 *
 * A coordinator serves the keys of partition p only while this node leads
 * p and p's state has been read back from its log (replayed up to the log
 * end). Each partition is UNLOADED (not led here: NOT_COORDINATOR),
 * LOADING (led here, the replay in flight: COORDINATOR_LOAD_IN_PROGRESS)
 * or LOADED (served). Every load and every unload takes a new generation,
 * so a replay that a leadership change overtook is recognised by its
 * generation when its chunks or its end come back, and ignored.
 *
 * Thread: the control thread (@thread ctl): a coordinator's own; pure
 * bookkeeping over the caller's struct (no I/O; the unit test drives it).
 * Errors: -ENOMEM from coord_load_resize; Kafka error codes from
 * coord_load_err.
 */
#ifndef SLUICE_COORD_LOAD_H
#define SLUICE_COORD_LOAD_H

#include <stdint.h>

enum coord_pstate { COORD_UNLOADED = 0, COORD_LOADING, COORD_LOADED };

/* What the coordinator must do after coord_load_lead. */
enum coord_action { COORD_NONE = 0, COORD_LOAD, COORD_UNLOAD };

struct coord_load {
	int32_t n;                   /* partitions of the internal topic; 0: none yet */
	uint8_t *state;              /* enum coord_pstate, per partition */
	uint32_t *gen;               /* per partition: bumped by every load and unload */
	int32_t loaded;              /* partitions LOADED (the metric) */
	uint64_t loads, unloads;     /* started, since start */
};

/* Size the table for n partitions (the topic appeared, or grew; never
 * shrinks: internal topics are not shrunk). New partitions are UNLOADED. */
int coord_load_resize(struct coord_load *cl, int32_t n);
void coord_load_fini(struct coord_load *cl);
/* Whether this node leads partition p now (leads): a load to start
 * (COORD_LOAD: p is LOADING at *gen), an unload to do (COORD_UNLOAD: p is
 * UNLOADED, its keys must be dropped), or nothing. */
enum coord_action coord_load_lead(struct coord_load *cl, int32_t p, int leads, uint32_t *gen);
/* The replay of p at generation gen ended: 1 if it is the current one (p
 * is LOADED now), 0 if a leadership change overtook it (drop what it
 * read: the caller unloads again if p is not LOADING). */
int coord_load_done(struct coord_load *cl, int32_t p, uint32_t gen);
/* Whether a chunk of p's replay at gen is still wanted. */
int coord_load_current(const struct coord_load *cl, int32_t p, uint32_t gen);
/* 0 when p is served here, else the Kafka error for a request of one of
 * its keys: COORDINATOR_LOAD_IN_PROGRESS (14) or NOT_COORDINATOR (16);
 * COORDINATOR_NOT_AVAILABLE (15) while the topic has no partitions. */
int16_t coord_load_err(const struct coord_load *cl, int32_t p);

/* A replay's cookie (what its read callbacks get back): the partition and
 * the load generation it reads for, and the two taken out again. */
static inline void *coord_load_cookie(int32_t p, uint32_t gen)
{
	return (void *)(uintptr_t)(((uint64_t)gen << 32) | (uint32_t)p);
}

static inline int32_t coord_cookie_part(void *cookie)
{
	return (int32_t)(uint32_t)(uintptr_t)cookie;
}

static inline uint32_t coord_cookie_gen(void *cookie)
{
	return (uint32_t)((uint64_t)(uintptr_t)cookie >> 32);
}

#endif
