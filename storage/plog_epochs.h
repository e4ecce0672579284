/* storage/plog_epochs.h — a partition log's leader epochs: the epoch it
 * stamps into each batch it appends, the leader-epoch cache beside it
 * (storage/epoch_cache.h) and its file "leader-epoch-checkpoint" in the
 * partition directory (KIP-101/279: what OffsetForLeaderEpoch answers, what
 * a follower truncates by, what a fetch's last fetched epoch is checked
 * against).
 *
 * The cache changes only when the epoch does: the append path compares the
 * log's epoch with the cache's latest (one load, one compare per batch) and
 * calls in here only when they differ. Every change is written to the file
 * on the shard's ring, as the log's first file work (storage/plog_files.c),
 * before any segment index or "recovery-checkpoint" that follows it: a
 * segment a restart trusts unread never holds an epoch change the file
 * lacks, and the batches scanned on open add theirs again. The open loads
 * the file, and rebuilds it from the batches when it is missing or
 * damaged (plog_recovery says so).
 *
 * Thread: the shard that owns the log (@thread shard), like plog.h.
 * Owns: the cache's entries and the text being saved.
 * Errors: 0/1 or -errno.
 */
#ifndef SLUICE_PLOG_EPOCHS_H
#define SLUICE_PLOG_EPOCHS_H

#include <stddef.h>
#include <stdint.h>

#include "storage/epoch_cache.h"

struct plog;

struct plog_epochs {
	struct epoch_cache c;
	int32_t latest;              /* epoch_cache_latest(&c), for the append path's compare */
	uint8_t due;                 /* the file is to be written */
	uint8_t failed;              /* its last save failed: again at the next checkpoint */
	char *img;                   /* the text being saved (heap, slow path), NULL: none */
	uint64_t saved;              /* saves completed (tests) */
};

/* Set the epoch the log stamps into the batches it appends from now on (the
 * partition's leader epoch; the control thread's on every leader change,
 * through the partition proxy). Like Kafka's new leader, the epoch starts
 * at the log end offset in the cache at once (when the log holds anything:
 * an empty log's first append records it). 0: set (or already that
 * epoch); -EINVAL: negative; -ESTALE: lower than the log's epoch (nothing
 * changes); -ENOMEM. */
int plog_set_leader_epoch(struct plog *pl, int32_t epoch);

/* Epoch `epoch` starts at offset `start` in this log (epoch_cache_assign):
 * the append path's, and a follower's appending batches that carry their
 * leader's epochs. 1: changed (the file is saved); 0: unchanged; -ENOMEM. */
int plog_epochs_assign(struct plog *pl, int32_t epoch, int64_t start);
/* The log's tail from `end` on was cut (a follower truncating a divergent
 * tail): the entries starting at or after it go (the file is saved).
 * Call it after cutting the log. 1: changed; 0: unchanged. */
int plog_epochs_truncate_end(struct plog *pl, int64_t end);
/* The log start moved (retention, DeleteRecords): the first entry now
 * starts at the log start. 1: changed; 0: unchanged. Storage calls it. */
int plog_epochs_truncate_start(struct plog *pl, int64_t start);

/* OffsetForLeaderEpoch: epoch_cache_end_offset with the log end offset. */
void plog_epoch_end_offset(const struct plog *pl, int32_t requested, int32_t *epoch, int64_t *end);
/* The epoch that wrote `offset` (ListOffsets' leader epoch), or -1. */
int32_t plog_epoch_for_offset(const struct plog *pl, int64_t offset);

/* Internal to storage. */
/* The file's text into pl->epochs.img. 0 or -ENOMEM. (plog_files.c) */
int plog_epochs_image(struct plog *pl, size_t *len);
/* Its save ended with err. (plog_files.c) */
void plog_epochs_saved(struct plog *pl, int err);
/* The append path: the log's epoch differs from the cache's latest. */
void plog_epochs_note(struct plog *pl, int64_t base);

#endif
