/* storage/plog_epochs.c — a running log's leader epochs (plog_epochs.h):
 * what changes the cache, and the text its file is saved with. The save
 * itself is the log's file work (plog_files.c); the load and the rebuild
 * are recovery's (plog_open.c). @thread shard */
#include <errno.h>
#include <stdlib.h>

#include "storage/plog.h"
#include "storage/plog_epochs.h"

/* The cache changed: its file is due, first of the log's file work. */
static void epochs_changed(struct plog *pl)
{
	pl->epochs.latest = epoch_cache_latest(&pl->epochs.c);
	pl->epochs.due = 1;
	if (pl->files.kick)
		pl->files.kick(pl);
}

int plog_epochs_assign(struct plog *pl, int32_t epoch, int64_t start)
{
	int rc = epoch_cache_assign(&pl->epochs.c, epoch, start);

	if (rc > 0)
		epochs_changed(pl);
	return rc;
}

void plog_epochs_note(struct plog *pl, int64_t base)
{
	/* (-ENOMEM: the next batch tries again) */
	plog_epochs_assign(pl, pl->leader_epoch, base);
}

int plog_set_leader_epoch(struct plog *pl, int32_t epoch)
{
	if (epoch < 0)
		return -EINVAL;
	if (epoch < pl->leader_epoch)
		return -ESTALE;
	pl->leader_epoch = epoch;
	if (pl->next_offset > pl->log_start && epoch != pl->epochs.latest)
		return plog_epochs_assign(pl, epoch, pl->next_offset) < 0 ? -ENOMEM : 0;
	return 0;
}

int plog_epochs_truncate_end(struct plog *pl, int64_t end)
{
	int rc = epoch_cache_truncate_end(&pl->epochs.c, end);

	if (rc > 0)
		epochs_changed(pl);
	return rc;
}

int plog_epochs_truncate_start(struct plog *pl, int64_t start)
{
	int rc = epoch_cache_truncate_start(&pl->epochs.c, start);

	if (rc > 0)
		epochs_changed(pl);
	return rc;
}

void plog_epoch_end_offset(const struct plog *pl, int32_t requested, int32_t *epoch, int64_t *end)
{
	epoch_cache_end_offset(&pl->epochs.c, requested, pl->next_offset, epoch, end);
}

int32_t plog_epoch_for_offset(const struct plog *pl, int64_t offset)
{
	return epoch_cache_epoch_for(&pl->epochs.c, offset);
}

int plog_epochs_image(struct plog *pl, size_t *len)
{
	size_t n = epoch_cache_format(&pl->epochs.c, NULL, 0);

	free(pl->epochs.img);
	pl->epochs.img = malloc(n + 1); /* style: allow slow path: an epoch change */
	if (!pl->epochs.img)
		return -ENOMEM;
	*len = epoch_cache_format(&pl->epochs.c, pl->epochs.img, n + 1);
	return 0;
}

void plog_epochs_saved(struct plog *pl, int err)
{
	free(pl->epochs.img);
	pl->epochs.img = NULL;
	if (err) {
		pl->epochs.due = 1;
		pl->epochs.failed = 1;   /* tried again with the next checkpoint */
		return;
	}
	pl->epochs.saved++;
}
