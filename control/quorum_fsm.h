/* control/quorum_fsm.h — the state machine adapter: libraft's struct
 * raft_fsm (apply, snapshot, restore on raft_buffers it allocates and
 * frees) turned into the quorum's callbacks (struct quorum_ops in
 * control/quorum.h: plain pointers and lengths, malloc for the snapshot).
 * The quorum gives one to its struct raft; the unit tests give them to
 * libraft's deterministic fixture (raft/fixture.h), so the same adapter
 * runs under simulated time, leader kills and snapshot installs.
 *
 * Entry framing: raft_uv 0.15 needs every entry's length to be a multiple
 * of 8. Its encoder pads the batch size but writes only len bytes (the
 * check is an assert, compiled out in Debian's build), so an entry of 7
 * bytes replicates in memory and then cannot be read back from the log or
 * off the wire ("read header: short read" at the next start). Every
 * record therefore travels framed (quorum_fsm_frame), and the adapter
 * hands apply the record without its frame:
 *   [0..3]  uint32 big-endian: record length
 *   [4]     frame version (QUORUM_FRAME_VERSION)
 *   [5..7]  zero (reserved)
 *   [8..]   the record, then zero bytes up to a multiple of 8.
 * An entry whose frame does not parse is not applied: the adapter refuses
 * it (libraft then applies nothing more on this node, rather than skip
 * it) and keeps the error in failed/failed_index.
 *
 * Thread: the thread that runs the raft instance (@thread ctl for the
 * quorum). Caller memory (init, bind; nothing to free): it must not move
 * once given to raft_init, and outlive the raft instance.
 * Errors: the raft_fsm functions return libraft's codes (RAFT_NOMEM when
 * the snapshot cannot be copied, RAFT_MALFORMED when restore refuses).
 */
#ifndef SLUICE_QUORUM_FSM_H
#define SLUICE_QUORUM_FSM_H

#include <raft.h>

#include "control/quorum.h"

struct quorum_fsm {
	struct raft_fsm fsm;            /* given to raft_init (&qf->fsm) */
	struct raft *raft;              /* bound: read for each entry's index */
	const struct quorum_ops *ops;   /* borrowed */
	void *arg;
	uint64_t applied, restored;     /* counts, for tests and metrics */
	int failed;                     /* 0, or -EPROTO: an entry did not parse */
	uint64_t failed_index;          /* ... at this index */
};

#define QUORUM_FRAME_HEADER 8
#define QUORUM_FRAME_VERSION 1

/* The frame's size for a record of len bytes. */
static inline size_t quorum_frame_size(size_t len)
{
	return (QUORUM_FRAME_HEADER + len + 7) & ~(size_t)7;
}

/* @thread any. Frame a record into a new raft_malloc() buffer (what
 * raft_apply takes and then owns): 0, -EMSGSIZE (len over 4 GiB),
 * -ENOMEM. */
int quorum_fsm_frame(const void *rec, size_t len, struct raft_buffer *out);

/* @thread any. Fill qf (version 1: snapshots are taken synchronously, on
 * the thread that runs raft). */
void quorum_fsm_init(struct quorum_fsm *qf, const struct quorum_ops *ops, void *arg);
/* The raft instance qf->fsm was given to, before it starts: apply's index
 * is raft's last applied index + 1 (libraft moves last_applied only after
 * the FSM's apply returns). */
void quorum_fsm_bind(struct quorum_fsm *qf, struct raft *raft);

#endif
