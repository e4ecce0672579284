/* control/quorum_fsm.c — libraft's state machine (struct raft_fsm, version
 * 1) on the quorum's callbacks. See quorum_fsm.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/quorum_fsm.h"
#include "storage/batch_format.h"

int quorum_fsm_frame(const void *rec, size_t len, struct raft_buffer *out)
{
	size_t size = quorum_frame_size(len);
	uint8_t *p;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	p = raft_malloc(size);
	if (!p)
		return -ENOMEM;
	be32_store(p, (uint32_t)len);
	p[4] = QUORUM_FRAME_VERSION;
	p[5] = p[6] = p[7] = 0;
	if (len)
		memcpy(p + QUORUM_FRAME_HEADER, rec, len);
	memset(p + QUORUM_FRAME_HEADER + len, 0, size - QUORUM_FRAME_HEADER - len);
	out->base = p;
	out->len = size;
	return 0;
}

/* Every committed command entry, on every node. libraft calls this for
 * index last_applied + 1 and moves last_applied once it returns 0; a
 * non-zero return has the same entry tried again at every later commit,
 * and nothing after it applied. The callback cannot fail: only an entry
 * whose frame does not parse (written by another version, or damaged past
 * raft's CRC) is refused, so this node stops applying there instead of
 * skipping a record the others applied. */
static int qfsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct quorum_fsm *qf = fsm->data;
	uint64_t index = raft_last_applied(qf->raft) + 1;
	const uint8_t *p = buf->base;
	size_t len;

	*result = NULL;
	if (buf->len < QUORUM_FRAME_HEADER || p[4] != QUORUM_FRAME_VERSION || p[5] || p[6] || p[7])
		goto bad;
	len = be32_load(p);
	if (quorum_frame_size(len) != buf->len)
		goto bad;
	qf->ops->apply(qf->arg, index, p + QUORUM_FRAME_HEADER, len);
	qf->applied++;
	return 0;
bad:
	if (!qf->failed) {
		qf->failed = -EPROTO;
		qf->failed_index = index;
	}
	return RAFT_MALFORMED;
}

/* The caller's state in one buffer, copied into raft's allocator: libraft
 * frees both the array and the buffer with raft_free once the snapshot is
 * written (or dropped). */
static int qfsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
	struct quorum_fsm *qf = fsm->data;
	struct raft_buffer *b;
	void *state = NULL;
	size_t len = 0;
	int rc;

	rc = qf->ops->snapshot(qf->arg, &state, &len);
	if (rc < 0)
		return rc == -ENOMEM ? RAFT_NOMEM : RAFT_IOERR;
	b = raft_malloc(sizeof(*b));
	if (!b) {
		free(state);
		return RAFT_NOMEM;
	}
	b->len = len;
	b->base = raft_malloc(len ? len : 1);
	if (!b->base) {
		raft_free(b);
		free(state);
		return RAFT_NOMEM;
	}
	if (len)
		memcpy(b->base, state, len);
	free(state);
	*bufs = b;
	*n_bufs = 1;
	return 0;
}

/* A snapshot to install (at start, or sent by the leader). On success
 * the buffer is the FSM's to free; on failure libraft keeps it. */
static int qfsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct quorum_fsm *qf = fsm->data;

	if (qf->ops->restore(qf->arg, buf->base, buf->len) < 0)
		return RAFT_MALFORMED;
	qf->restored++;
	raft_free(buf->base);
	return 0;
}

void quorum_fsm_init(struct quorum_fsm *qf, const struct quorum_ops *ops, void *arg)
{
	memset(qf, 0, sizeof(*qf));
	qf->fsm.version = 1;
	qf->fsm.data = qf;
	qf->fsm.apply = qfsm_apply;
	qf->fsm.snapshot = qfsm_snapshot;
	qf->fsm.restore = qfsm_restore;
	qf->ops = ops;
	qf->arg = arg;
}

void quorum_fsm_bind(struct quorum_fsm *qf, struct raft *raft)
{
	qf->raft = raft;
}
