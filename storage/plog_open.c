/* storage/plog_open.c — recovery on open, close and retention. Recovery
 * runs while the log opens and may block; close waits (polling the store)
 * for the log's writes and file work; retention runs on the slow-path
 * timer (its unlinks). Checkpoints and DeleteRecords are the log's file
 * work (plog_files.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"

/* ---- the sequential scanner ------------------------------------------- */

int seg_scan_init(struct seg_scan *sc, int fd, uint64_t pos, uint64_t limit, size_t cap)
{
	memset(sc, 0, sizeof(*sc));
	sc->fd = fd;
	sc->pos = pos;
	sc->limit = limit;
	sc->cap = cap;
	if (posix_memalign((void **)&sc->buf, 4096, cap))
		return -ENOMEM;
	return 0;
}

void seg_scan_fini(struct seg_scan *sc)
{
	free(sc->buf);
	sc->buf = NULL;
}

const uint8_t *seg_scan_peek(struct seg_scan *sc, size_t need, int *err)
{
	*err = 0;
	if (sc->pos + need > sc->limit)
		return NULL;
	if (sc->pos >= sc->buf_pos && sc->pos + need <= sc->buf_pos + sc->buf_len)
		return sc->buf + (sc->pos - sc->buf_pos);
	{
		uint64_t start = align_down4k(sc->pos);
		size_t want = sc->cap;
		ssize_t r;

		if (sc->pos - start + need > sc->cap) {
			*err = -EMSGSIZE;
			return NULL;
		}
		if (start + want > align_up4k(sc->limit))
			want = align_up4k(sc->limit) - start;
		r = pread(sc->fd, sc->buf, want, (off_t)start); /* style: allow start-up: recovery's scan */
		if (r < 0) {
			*err = -errno;
			return NULL;
		}
		sc->buf_pos = start;
		sc->buf_len = (size_t)r;
		if (sc->pos + need > sc->buf_pos + sc->buf_len)
			return NULL;
		return sc->buf + (sc->pos - sc->buf_pos);
	}
}

/* Validate batches from sc.pos; stops at the first invalid or zero header.
 * Returns the stop reason (0 = clean end: zero header or limit). */
static int segment_scan(struct plog *pl, struct segment *seg, struct seg_scan *sc, int64_t expect)
{
	const uint8_t *h;
	int err, reason = 0;
	uint32_t maxb = pl->cfg.max_batch > (1u << 24) ? pl->cfg.max_batch : (1u << 24);

	seg->next_offset = expect;
	for (;;) {
		struct batch_info bi;
		uint32_t size;

		h = seg_scan_peek(sc, BATCH_LOG_OVERHEAD + 5, &err);
		if (!h)
			break;
		if (batch_length(h) == 0 && batch_base_offset(h) == 0)
			break;             /* zeros: the preallocated end */
		if (batch_length(h) < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD ||
		    (uint32_t)batch_length(h) > maxb) {
			reason = BATCH_ERR_LENGTH;
			break;
		}
		size = batch_size(h);
		h = seg_scan_peek(sc, size, &err);
		if (!h) {
			reason = BATCH_ERR_TRUNCATED;
			break;
		}
		if ((reason = -batch_validate(h, size, 0, 0, &bi)) != 0)
			break;
		if (batch_base_offset(h) < expect ||
		    (!pl->cfg.compact && batch_base_offset(h) != expect)) {
			reason = BATCH_ERR_OFFSET;
			break;
		}
		if (batch_leader_epoch(h) > pl->leader_epoch)
			pl->leader_epoch = batch_leader_epoch(h);
		/* the epochs of what no checkpoint vouched for (plog_epochs.h) */
		if (epoch_cache_assign(&pl->epochs.c, batch_leader_epoch(h), batch_base_offset(h)) > 0)
			pl->epochs.due = 1;
		seg_index_add(&seg->ix, (uint32_t)(batch_base_offset(h) - seg->base_offset),
			      (uint32_t)sc->pos,
			      bi.max_timestamp > seg->max_timestamp ? bi.max_timestamp : seg->max_timestamp,
			      pl->cfg.index_interval, 0);
		if (bi.max_timestamp > seg->max_timestamp)
			seg->max_timestamp = bi.max_timestamp;
		expect = batch_last_offset(h) + 1;
		seg->next_offset = expect;
		sc->pos += size;
		pl->recovery.batches++;
		pl->recovery.bytes_scanned += size;
	}
	seg->end = sc->pos;
	return reason;
}

/* ---- open / recovery -------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int parse_segment_name(const char *n, int64_t *base)
{
	char *end;
	long long v;

	if (strlen(n) != 24 || strcmp(n + 20, ".log"))
		return -1;
	v = strtoll(n, &end, 10);
	if (end != n + 20 || v < 0)
		return -1;
	*base = v;
	return 0;
}

static int parse_index_name(const char *n, int64_t *base)
{
	char *end;
	long long v;

	if (strlen(n) != 26 || strcmp(n + 20, ".index"))
		return -1;
	v = strtoll(n, &end, 10);
	if (end != n + 20 || v < 0)
		return -1;
	*base = v;
	return 0;
}

static int64_t *push_base(int64_t *arr, size_t *n, size_t *cap, int64_t b)
{
	if (*n == *cap) {
		int64_t *nb = realloc(arr, (*cap = *cap ? *cap * 2 : 16) * sizeof(*arr)); /* style: allow recovery */

		if (!nb) {
			free(arr);
			return NULL;
		}
		arr = nb;
	}
	arr[(*n)++] = b;
	return arr;
}

static int64_t plog_read_log_start(struct plog *pl)
{
	char buf[64];
	int fd = openat(plog_dirfd(pl), PLOG_LOG_START_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtoll(buf, NULL, 10);
}

static int64_t plog_read_checkpoint(struct plog *pl)
{
	char buf[96];
	int fd = openat(plog_dirfd(pl), PLOG_CHECKPOINT_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *end;
	long long v;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= (ssize_t)strlen(PLOG_CHECKPOINT_TAG))
		return -1;
	buf[n] = 0;
	if (strncmp(buf, PLOG_CHECKPOINT_TAG, strlen(PLOG_CHECKPOINT_TAG)))
		return -1;
	v = strtoll(buf + strlen(PLOG_CHECKPOINT_TAG), &end, 10);
	if (end == buf + strlen(PLOG_CHECKPOINT_TAG) || *end != '\n' || v < 0)
		return -1;
	return v;
}

/* ---- the leader epochs ------------------------------------------------ */

/* Load "leader-epoch-checkpoint" into the cache: 0, -ENOENT (none) or
 * -EINVAL (damaged: the cache is empty). */
static int plog_epochs_load(struct plog *pl)
{
	char buf[8192], *big = NULL;
	int fd = openat(plog_dirfd(pl), EPOCH_CACHE_FILE, O_RDONLY | O_CLOEXEC);
	struct stat stb;
	ssize_t n;
	int rc;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EINVAL;
	if (fstat(fd, &stb) < 0 || stb.st_size > (1 << 26)) {
		close(fd);
		return -EINVAL;
	}
	if ((size_t)stb.st_size >= sizeof(buf) && !(big = malloc((size_t)stb.st_size + 1))) { /* style: allow recovery */
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, big ? big : buf, big ? (size_t)stb.st_size + 1 : sizeof(buf));
	close(fd);
	rc = n < 0 ? -EINVAL : epoch_cache_parse(&pl->epochs.c, big ? big : buf, (size_t)n);
	free(big);
	return rc == -ENOMEM ? rc : rc ? -EINVAL : 0;
}

/* The cache from every batch header of every segment (the file was missing
 * or damaged): one sequential read of the log, once. */
static int plog_epochs_rebuild(struct plog *pl, size_t cap)
{
	epoch_cache_clear(&pl->epochs.c);
	for (struct segment *seg = pl->seg_head; seg; seg = seg->next) {
		struct seg_scan sc;
		const uint8_t *h;
		int err = 0, rc;

		if ((rc = seg_scan_init(&sc, seg->fd, 0, seg->end, cap)) < 0)
			return rc;
		while ((h = seg_scan_peek(&sc, BATCH_LOG_OVERHEAD + 5, &err)) && batch_length(h) > 0) {
			epoch_cache_assign(&pl->epochs.c, batch_leader_epoch(h), batch_base_offset(h));
			pl->recovery.epochs_batches++;
			sc.pos += batch_size(h);
		}
		seg_scan_fini(&sc);
		if (err)
			return err;
	}
	return 0;
}

/* After recovery: the cache as the file left it and the scanned batches
 * added to it, or rebuilt; cut to the log's offsets; the log's epoch at
 * least its latest. Saved (the open's file work) when it changed. */
static int plog_epochs_recover(struct plog *pl, int loaded, size_t cap)
{
	struct plog_epochs *e = &pl->epochs;
	int rc, changed = 0;

	if (loaded < 0) {
		pl->recovery.epochs_rebuilt = loaded == -ENOENT ? 1 : 2;
		if ((rc = plog_epochs_rebuild(pl, cap)) < 0)
			return rc;
		changed = e->c.n > 0 || loaded != -ENOENT;
		if (!pl->recovery.epochs_batches && loaded == -ENOENT)
			pl->recovery.epochs_rebuilt = 0;   /* an empty log: nothing to say */
	}
	changed |= epoch_cache_truncate_end(&e->c, pl->next_offset) > 0;
	changed |= epoch_cache_truncate_start(&e->c, pl->log_start) > 0;
	e->latest = epoch_cache_latest(&e->c);
	if (e->latest > pl->leader_epoch)
		pl->leader_epoch = e->latest;
	e->due |= (uint8_t)changed;
	return 0;
}

/* Delete the files of segments bases[from..n). */
static void plog_drop_from(struct plog *pl, const int64_t *bases, size_t from, size_t n)
{
	for (size_t j = from; j < n; j++) {
		char nm[48];

		snprintf(nm, sizeof(nm), "%020" PRId64 ".log", bases[j]);
		unlinkat(plog_dirfd(pl), nm, 0);
		snprintf(nm, sizeof(nm), "%020" PRId64 ".index", bases[j]);
		unlinkat(plog_dirfd(pl), nm, 0);
		pl->recovery.segments_dropped++;
	}
}

/* The lowest offset recovery may not cut below: the checkpoint's durable
 * high watermark, or the base of a later segment that was checkpointed
 * (its index is written only once it is wholly on disk, and writes retire
 * in file order: everything before it was durable, so acknowledged). */
static int64_t plog_floor_after(struct plog *pl, const int64_t *bases, size_t from, size_t n)
{
	int64_t floor = pl->recovery.checkpoint_hw;

	for (size_t j = n; j > from; j--) {
		struct seg_index ix;
		struct seg_index_trailer tr;
		char path[4200];

		snprintf(path, sizeof(path), "%s/%020" PRId64 ".index", pl->dir, bases[j - 1]);
		seg_index_init(&ix);
		if (seg_index_load(&ix, path, bases[j - 1], &tr) == 0) {
			seg_index_fini(&ix);
			return bases[j - 1] > floor ? bases[j - 1] : floor;
		}
		seg_index_fini(&ix);
	}
	return floor;
}

/* Copy the bytes [from, to) of a segment to "<name>.damaged" (appended:
 * a later damage of the same file adds to it). */
static int segment_move_aside(struct plog *pl, struct segment *seg, uint64_t from, uint64_t to)
{
	char name[48];
	int in, out, rc = 0;
	static const size_t chunk = 1u << 20;
	uint8_t *buf = malloc(chunk); /* style: allow recovery of damage, once */

	if (!buf)
		return -ENOMEM;
	snprintf(name, sizeof(name), "%s.damaged", seg->name);
	in = openat(plog_dirfd(pl), seg->name, O_RDONLY | O_CLOEXEC);
	out = openat(plog_dirfd(pl), name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (in < 0 || out < 0)
		rc = -errno;
	while (!rc && from < to) {
		ssize_t r = pread(in, buf, to - from < chunk ? (size_t)(to - from) : chunk, (off_t)from); /* style: allow start-up: recovery moves damage aside */

		if (r <= 0) {
			rc = r < 0 ? -errno : 0;
			break;
		}
		if (write(out, buf, (size_t)r) != r)
			rc = -EIO;
		from += (uint64_t)r;
	}
	if (!rc && fsync(out) < 0) /* style: allow start-up: recovery moves damage aside */
		rc = -errno;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(buf);
	return rc;
}

/* Damage below the floor in `seg` (cut at seg->end, offset seg->next_offset):
 * move the rest of the file aside, keep the valid prefix, and make the
 * segment reach `to` (the next segment's base, or the floor) so offsets
 * stay contiguous and none is handed out again. */
static int segment_keep_prefix(struct plog *pl, struct segment *seg, int64_t to, int reason)
{
	struct plog_recovery *r = &pl->recovery;
	uint64_t fend = seg->alloc;
	int rc;

	if (pl->cfg.damage_refuses) {
		/* a log that cannot run with a hole: report, change nothing */
		snprintf(pl->st->problem, sizeof(pl->st->problem),
			 "%s/%s is damaged at position %" PRIu64 " (%s): offsets %" PRId64 "-%" PRId64
			 " were written (durable high watermark %" PRId64 ") and cannot be read",
			 pl->dir, seg->name, seg->end, reason ? batch_strerror(reason) : "data missing",
			 seg->next_offset, to - 1, pl->recovery.checkpoint_hw);
		return -EUCLEAN;
	}
	if (fend > seg->end && (rc = segment_move_aside(pl, seg, seg->end, fend)) < 0)
		return rc;
	if (fend > seg->end && ftruncate(seg->fd, (off_t)seg->end) < 0)
		return -errno;
	seg->alloc = seg->end;
	if (!r->damaged++) {
		snprintf(r->damaged_file, sizeof(r->damaged_file), "%s", seg->name);
		r->damaged_reason = reason;
		r->damaged_pos = seg->end;
		r->damaged_end = fend;
		r->lost_from = seg->next_offset;
		r->lost_to = to;
	} else {
		r->lost_to = to;   /* a later range: the report spans both */
	}
	seg->next_offset = to;
	seg->flushed = seg->end;
	seg->sealed = 1;
	seg->index_saved = 0;
	plog_seal_segment(pl, seg);   /* the next start trusts the prefix */
	return 0;
}

static int plog_refuse(struct plog *pl, const char *fmt, const char *a, const char *b)
{
	snprintf(pl->st->problem, sizeof(pl->st->problem), fmt, pl->dir, a, b);
	return -EUCLEAN;
}

/* Open the files found; decide where the log really ends. */
static int plog_recover(struct plog *pl)
{
	DIR *d = fdopendir(dup(plog_dirfd(pl)));
	struct dirent *de;
	int64_t *bases = NULL, *ibases = NULL, expect = 0;
	size_t n = 0, cap = 0, ni = 0, icap = 0;
	int rc = 0, next_fd = -1, prev_trusted = 0;
	size_t scan_cap = 4u << 20;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int64_t b;

		if (!strcmp(de->d_name, PLOG_NEXT_NAME)) {
			next_fd = 1;
			continue;
		}
		if (strlen(de->d_name) > 8 && !strcmp(de->d_name + strlen(de->d_name) - 8, ".cleaned")) {
			unlinkat(plog_dirfd(pl), de->d_name, 0);   /* an interrupted cleaner swap */
			continue;
		}
		if (!parse_index_name(de->d_name, &b)) {
			if (!(ibases = push_base(ibases, &ni, &icap, b))) {
				rc = -ENOMEM;
				goto out;
			}
			continue;
		}
		if (parse_segment_name(de->d_name, &b))
			continue;
		if (!(bases = push_base(bases, &n, &cap, b))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (n)
		qsort(bases, n, sizeof(*bases), cmp_i64);
	if (pl->cfg.max_batch * 2ull + 8192 > scan_cap)
		scan_cap = align_up4k(pl->cfg.max_batch * 2ull + 8192);
	pl->recovery.checkpoint_hw = plog_read_checkpoint(pl);
	pl->st->problem[0] = 0;

	/* An index without its segment: a segment file is missing. Below the
	 * first segment it is a leftover of retention (the .log goes first). */
	for (size_t k = 0; k < ni; k++) {
		int found = 0;
		char nm[48];

		for (size_t j = 0; j < n && !found; j++)
			found = bases[j] == ibases[k];
		if (found)
			continue;
		if (n && ibases[k] < bases[0]) {
			snprintf(nm, sizeof(nm), "%020" PRId64 ".index", ibases[k]);
			unlinkat(plog_dirfd(pl), nm, 0);
			continue;
		}
		{
			char ix[48];

			snprintf(nm, sizeof(nm), "%020" PRId64 ".log", ibases[k]);
			snprintf(ix, sizeof(ix), "%020" PRId64 ".index", ibases[k]);
			rc = plog_refuse(pl, "segment file %s/%s is missing (its index %s is there): the "
					 "records it held are gone. Restore the file (from a backup), or, to "
					 "give up the whole partition, move its directory aside and start again",
					 nm, ix);
		}
		goto out;
	}
	if (!n && pl->recovery.checkpoint_hw > 0) {
		char hw[32];

		snprintf(hw, sizeof(hw), "%" PRId64, pl->recovery.checkpoint_hw);
		rc = plog_refuse(pl, "every segment file of %s is missing (%s says offsets below %s were "
				 "written): restore the files (from a backup), or move the directory aside "
				 "to start the partition empty", PLOG_CHECKPOINT_FILE, hw);
		goto out;
	}

	for (size_t i = 0; i < n; i++) {
		struct segment *seg;
		struct seg_index_trailer tr;
		struct seg_scan sc;
		struct stat stb;
		char name[48], path[4200];
		int fd, reason, last = (i + 1 == n);
		uint64_t from = 0;

		if (i > 0 && bases[i] > expect && !pl->cfg.compact) {
			/* The previous segment ends before this one begins. */
			struct segment *prev = pl->seg_tail;

			if (prev_trusted) {
				/* it was whole on disk when checkpointed: the
				 * segment(s) in between were removed */
				char a[32], b[32];

				snprintf(a, sizeof(a), "%020" PRId64, expect);
				snprintf(b, sizeof(b), "%020" PRId64, bases[i]);
				rc = plog_refuse(pl, "a segment file of %s is missing: offsets from %s up to "
						 "%s have no file (between the segments around them). Restore "
						 "the file (from a backup), or move the directory aside to start "
						 "the partition empty", a, b);
				goto out;
			}
			if (bases[i] <= plog_floor_after(pl, bases, i, n)) {
				/* durable, acknowledged data is missing from the end
				 * of the previous segment: damage, keep the rest */
				if ((rc = segment_keep_prefix(pl, prev, bases[i], 0)) < 0)
					goto out;
				expect = bases[i];
			}
		}
		if (i > 0 && (bases[i] < expect || (!pl->cfg.compact && bases[i] != expect))) {
			/* The previous segment ends before this one begins and
			 * nothing says what follows was acknowledged: its tail was
			 * lost in a crash after the roll, and the later segments
			 * hold only writes never acknowledged (writes retire in
			 * file order). Offsets must stay contiguous: drop them. */
			plog_drop_from(pl, bases, i, n);
			n = i;
			break;
		}
		snprintf(name, sizeof(name), "%020" PRId64 ".log", bases[i]);
		fd = openat(plog_dirfd(pl), name, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			goto out;
		}
		/* an existing file, opened above: never renamed or reopened */
		if (fstat(fd, &stb) < 0) {
			rc = -errno;
			close(fd);
			goto out;
		}
		if ((rc = plog_segment_add(pl, bases[i], fd, stb.st_size ? (uint64_t)stb.st_size : 4096, 0, &seg)) < 0)
			goto out;
		seg->alloc = (uint64_t)stb.st_size;
		expect = bases[i];
		prev_trusted = 0;
		segment_index_path(seg, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", pl->dir, name);
		if (seg_index_load(&seg->ix, path, seg->base_offset, &tr) == 0 &&
		    tr.end_pos <= seg->alloc && tr.next_offset >= seg->base_offset) {
			seg->end = tr.end_pos;
			seg->next_offset = tr.next_offset;
			seg->max_timestamp = tr.max_timestamp;
			seg->index_saved = 1;
			from = tr.end_pos;
			expect = tr.next_offset;
			pl->recovery.segments_trusted++;
			pl->recovery.bytes_trusted += tr.end_pos;
			if (!last) {
				prev_trusted = 1;
				/* a sealed, checkpointed segment */
				seg->flushed = seg->end;
				seg->sealed = 1;
				pl->recovery.segments++;
				continue;
			}
		} else {
			seg_index_reset(&seg->ix);
			seg->index_saved = 0;
		}
		if ((rc = seg_scan_init(&sc, fd, from, seg->alloc, scan_cap)) < 0)
			goto out;
		reason = segment_scan(pl, seg, &sc, expect);
		seg_scan_fini(&sc);
		pl->recovery.segments++;
		seg->flushed = seg->end;
		expect = seg->next_offset;
		if (seg->end != from)
			seg->index_saved = 0;  /* a loaded checkpoint is only a prefix */
		if (reason) {
			int64_t floor = plog_floor_after(pl, bases, i + 1, n);
			int64_t to = last ? floor : bases[i + 1];

			if (seg->next_offset < floor && to > seg->next_offset) {
				/* below what was acknowledged: damage, not a torn
				 * tail. The intact later segments stay. */
				if ((rc = segment_keep_prefix(pl, seg, to, reason)) < 0)
					goto out;
				expect = to;
				if (last) {
					struct segment *ns;

					/* the log goes on from the floor: a new segment */
					if ((rc = plog_segment_add(pl, to, -1, 0, 0, &ns)) < 0)
						goto out;
				}
				continue;
			}
			pl->recovery.truncated_reason = reason;
			pl->recovery.truncated_at = seg->end;
			if (!last) {
				/* Corruption inside a sealed segment that no
				 * checkpoint vouches for: a torn tail after a roll;
				 * the log ends here, like Kafka truncating at the
				 * first invalid batch. */
				plog_drop_from(pl, bases, i + 1, n);
				n = i + 1;
				break;
			}
		}
		if (!last) {
			seg->sealed = 1;
			plog_seal_segment(pl, seg);
		}
	}
	/* The active segment: cut everything after the valid end so no stale
	 * bytes can ever line up behind new data, then preallocate again
	 * (zeros). An index file that still describes it stays as its
	 * checkpoint. */
	if (pl->seg_tail) {
		struct segment *seg = pl->seg_tail;

		seg->sealed = 0;
		if (seg->alloc > seg->end) {
			pl->recovery.bytes_truncated = seg->alloc - seg->end;
			if (ftruncate(seg->fd, (off_t)seg->end) < 0) {
				rc = -errno;
				goto out;
			}
			seg->alloc = seg->end;
			if (seg->alloc < pl->cfg.segment_bytes &&
			    fallocate(seg->fd, 0, (off_t)seg->alloc, (off_t)pl->cfg.initial_extent) == 0)
				seg->alloc += pl->cfg.initial_extent;
		}
		if (seg->end == 0 && seg->index_saved) {
			char name[48];

			segment_index_path(seg, name, sizeof(name));
			unlinkat(plog_dirfd(pl), name, 0);
			seg->index_saved = 0;
		}
	}
	/* a prepared next segment that a crash caught before its rename */
	if (next_fd > 0) {
		int fd = openat(plog_dirfd(pl), PLOG_NEXT_NAME, O_RDWR | O_DIRECT | O_CLOEXEC);
		int keep = 0;

		if (fd >= 0) {
			uint8_t *b = NULL;

			if (!posix_memalign((void **)&b, 4096, 4096) && pread(fd, b, 4096, 0) >= BATCH_HEADER_SIZE && /* style: allow start-up: recovery */
			    batch_length(b) >= BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD && b[OF_Magic] == 2 &&
			    batch_base_offset(b) == expect && n > 0)
				keep = 1;
			free(b);
			close(fd);
		}
		if (keep) {
			/* data was written into it: give it its name and recover it */
			char name[48];

			snprintf(name, sizeof(name), "%020" PRId64 ".log", expect);
			closedir(d);
			d = NULL;
			free(bases);
			bases = NULL;
			free(ibases);
			ibases = NULL;
			if (renameat(plog_dirfd(pl), PLOG_NEXT_NAME, plog_dirfd(pl), name) == 0) {
				/* start over with the renamed file in the list */
				while (pl->seg_head) {
					struct segment *s = pl->seg_head;

					plog_segment_unlink(pl, s);
					segment_free(s);
				}
				memset(&pl->recovery, 0, sizeof(pl->recovery));
				return plog_recover(pl);
			}
		} else {
			unlinkat(plog_dirfd(pl), PLOG_NEXT_NAME, 0);
		}
	}
	if (!pl->seg_head) {
		/* an empty log starts at 0, or where "log-start-offset" says
		 * (a log restarted there: plog_start_at) */
		struct segment *seg;
		int64_t base = plog_read_log_start(pl);

		base = base > 0 ? base : 0;
		if ((rc = plog_segment_add(pl, base, -1, 0, 0, &seg)) < 0)
			goto out;
		expect = base;
	}
	/* The log ends below the checkpoint's durable high watermark (its
	 * last batches read as zeros, or were cut as a "torn tail" that the
	 * checkpoint proves was acknowledged): those offsets are never given
	 * out again. */
	if (pl->seg_tail->next_offset < pl->recovery.checkpoint_hw) {
		struct segment *seg = pl->seg_tail, *ns;
		int reason = pl->recovery.truncated_reason;

		if (seg->alloc > seg->end && ftruncate(seg->fd, (off_t)seg->end) == 0)
			seg->alloc = seg->end;   /* the torn-tail cut above: zeros, nothing to keep */
		if ((rc = segment_keep_prefix(pl, seg, pl->recovery.checkpoint_hw, reason)) < 0)
			goto out;
		pl->recovery.truncated_reason = 0;
		if ((rc = plog_segment_add(pl, pl->recovery.checkpoint_hw, -1, 0, 0, &ns)) < 0)
			goto out;
	}
	pl->log_start = pl->seg_head->base_offset;
	{
		/* DeleteRecords moved the start inside the first segment */
		int64_t ck = plog_read_log_start(pl);

		if (ck > pl->log_start && ck <= pl->seg_tail->next_offset)
			pl->log_start = ck;
	}
	pl->next_offset = pl->seg_tail->next_offset;
	pl->durable_offset = pl->written_offset = pl->next_offset;
	pl->high_watermark = pl->next_offset;
	pl->checkpointed = pl->recovery.checkpoint_hw;
out:
	if (d)
		closedir(d);
	free(bases);
	free(ibases);
	return rc;
}

int plog_recovery_describe(const struct plog *pl, char *buf, size_t len)
{
	const struct plog_recovery *r = &pl->recovery;
	const char *seg = pl->seg_tail ? pl->seg_tail->name : "-";
	int n, m;

	if (!buf && len)
		return -EINVAL;
	n = snprintf(buf, len, "recovery of %s: %d segment%s, %" PRId64 " batch%s, %" PRIu64
		     " bytes scanned; ",
		     pl->dir ? pl->dir : "?", r->segments, r->segments == 1 ? "" : "s", r->batches,
		     r->batches == 1 ? "" : "es", r->bytes_scanned);
	if (n < 0)
		return -EINVAL;
	if (r->truncated_reason)
		m = snprintf(buf ? buf + ((size_t)n < len ? (size_t)n : len) : NULL,
			     (size_t)n < len ? len - (size_t)n : 0,
			     "cut at position %" PRIu64 " of %s: %s; %" PRIu64
			     " bytes after the end removed; %d segment%s dropped",
			     r->truncated_at, seg, batch_strerror(r->truncated_reason), r->bytes_truncated,
			     r->segments_dropped, r->segments_dropped == 1 ? "" : "s");
	else
		m = snprintf(buf ? buf + ((size_t)n < len ? (size_t)n : len) : NULL,
			     (size_t)n < len ? len - (size_t)n : 0,
			     "clean end at position %" PRIu64 " of %s; %" PRIu64
			     " bytes after the end removed; %d segment%s dropped",
			     pl->seg_tail ? pl->seg_tail->end : 0, seg, r->bytes_truncated,
			     r->segments_dropped, r->segments_dropped == 1 ? "" : "s");
	if (m < 0)
		return -EINVAL;
	n += m;
	m = snprintf(buf ? buf + ((size_t)n < len ? (size_t)n : len) : NULL,
		     (size_t)n < len ? len - (size_t)n : 0,
		     "; %d segment%s (%" PRIu64 " bytes) taken from checkpoints unread",
		     r->segments_trusted, r->segments_trusted == 1 ? "" : "s", r->bytes_trusted);
	if (m < 0)
		return -EINVAL;
	n += m;
	if (r->epochs_rebuilt) {
		m = snprintf(buf ? buf + ((size_t)n < len ? (size_t)n : len) : NULL,
			     (size_t)n < len ? len - (size_t)n : 0,
			     "; %s %s: rebuilt from %" PRId64 " batch%s (%u epoch%s)", EPOCH_CACHE_FILE,
			     r->epochs_rebuilt == 1 ? "missing" : "damaged", r->epochs_batches,
			     r->epochs_batches == 1 ? "" : "es", pl->epochs.c.n, pl->epochs.c.n == 1 ? "" : "s");
		if (m < 0)
			return -EINVAL;
		n += m;
	}
	if (r->damaged) {
		m = snprintf(buf ? buf + ((size_t)n < len ? (size_t)n : len) : NULL,
			     (size_t)n < len ? len - (size_t)n : 0,
			     "; DAMAGED below the durable high watermark: %s positions %" PRIu64 "-%" PRIu64
			     " (%s) moved to %s.damaged, offsets %" PRId64 "-%" PRId64
			     " lost (%d range%s), later segments kept",
			     r->damaged_file, r->damaged_pos, r->damaged_end,
			     r->damaged_reason ? batch_strerror(r->damaged_reason) : "data missing",
			     r->damaged_file, r->lost_from, r->lost_to - 1, r->damaged,
			     r->damaged == 1 ? "" : "s");
		if (m < 0)
			return -EINVAL;
		n += m;
	}
	return n;
}

/* Load the partial last block of the active segment into a tail chunk. */
static int plog_load_tail_block(struct plog *pl)
{
	struct segment *seg = pl->seg_tail;
	uint64_t base = align_down4k(seg->end);
	uint32_t head = (uint32_t)(seg->end - base);
	struct tail_chunk *c;

	if (!head)
		return 0;
	c = tail_chunk_get(&pl->st->tail, TAIL_CHUNK_MIN_SHIFT, 4096);
	if (!c)
		return -ENOBUFS;
	if (pread(seg->fd, c->mem, 4096, (off_t)base) < (ssize_t)head) { /* style: allow start-up: the log opens */
		tail_chunk_put(&pl->st->tail, c);
		return -EIO;
	}
	memset(c->mem + head, 0, c->cap - head);
	c->seg = seg;
	c->file_base = base;
	c->len = head;
	c->data_start = head;   /* earlier batches are read from disk */
	c->first_offset = c->end_offset = pl->next_offset;
	c->born_ns = pl->st->now_ns;
	c->owner = &pl->chunk_owner;
	c->prev = pl->chunk_tail;
	pl->chunk_head = pl->chunk_tail = c;
	/* on disk already: evictable until the partition is written again */
	plog_chunks_reclaim(pl);
	return 0;
}

int plog_open(struct store *st, const char *dir, const struct plog_config *cfg, struct plog **out)
{
	struct plog *pl = calloc(1, sizeof(*pl)); /* style: allow partition setup */
	int rc, loaded;

	if (!pl)
		return -ENOMEM;
	pl->st = st;
	plog_init_callbacks(pl);
	pl->cfg = *cfg;
	if (pl->cfg.initial_extent < 4096)
		pl->cfg.initial_extent = 4096;
	pl->cfg.initial_extent = align_up4k(pl->cfg.initial_extent);
	if (pl->cfg.initial_extent > pl->cfg.segment_bytes)
		pl->cfg.initial_extent = align_up4k(pl->cfg.segment_bytes);
	if (!pl->cfg.index_interval)
		pl->cfg.index_interval = 4096;
	pl->next_fd = -1;
	pl->chunk_shift = TAIL_CHUNK_MIN_SHIFT;
	pl->files.seal_gate = INT64_MAX;
	pl->epochs.latest = EPOCH_UNDEFINED;
	pl->dir = strdup(dir);
	if (!pl->dir) {
		free(pl);
		return -ENOMEM;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	pl->dirfd = -1;
	if (plog_dirfd(pl) < 0) {
		rc = -errno;
		goto fail;
	}
	/* a restart at an offset or a truncation a crash interrupted is
	 * finished first (plog_replica.c) */
	if ((rc = plog_start_redo(pl)) < 0 || (rc = plog_truncate_redo(pl)) < 0)
		goto fail;
	loaded = plog_epochs_load(pl);
	if (loaded == -ENOMEM) {
		rc = loaded;
		goto fail;
	}
	if ((rc = plog_recover(pl)) < 0)
		goto fail;
	if ((rc = plog_epochs_recover(pl, loaded, align_up4k(pl->cfg.max_batch * 2ull + 8192))) < 0)
		goto fail;
	if ((rc = plog_load_tail_block(pl)) < 0)
		goto fail;
	plog_dir_release(pl);
	/* the indexes recovery left to write (segments it scanned, a damaged
	 * one's prefix), on the ring; the open waits for them, as it waited
	 * for its reads */
	plog_files_start(pl);
	plog_files_wait(pl);
	*out = pl;
	return 0;
fail:
	pl->next_fd = -1;
	pl->err = rc;      /* nothing is written or checkpointed on the way out */
	plog_close(pl);
	return rc;
}

void plog_close(struct plog *pl)
{
	struct store *st = pl->st;
	int was_open = !pl->closed;

	/* write everything buffered, then checkpoint: every sealed segment
	 * gets its index, the active one too, and the log its durable high
	 * watermark. A log only marked closing (-ESHUTDOWN) does all that. */
	if (was_open) {
		while (pl->trunc)         /* a truncation ends first (its done runs) */
			store_poll(st, 1);
		/* what a full filesystem left unwritten gets one more try, and
		 * a full filesystem now fails the log (the loop below ends) */
		pl->nospace_fatal = 1;
		while (pl->nospace && pl->inflight)
			store_poll(st, 1);
		pl->nospace = 0;
		while (!plog_failed(pl) && (pl->inflight || pl->prep_inflight || pl->reload_inflight ||
					    pl->flush.dirty)) {
			store_mark_dirty(st, &pl->flush);
			store_poll(st, 1);
		}
		for (struct segment *s = pl->seg_head; s; s = s->next)
			while (s->falloc_inflight)
				store_poll(st, 1);
		if (!plog_failed(pl))
			plog_checkpoint(pl);
		/* the file work queued (a failed log's too: DeleteRecords and
		 * files saved beside it are answered) */
		plog_files_wait(pl);
	}
	/* off the store's dirty list */
	store_unmark_dirty(st, &pl->flush);
	pl->closed = 1;
	pl->files.running = 0;        /* a late write completion starts nothing */
	plog_dir_release(pl);
	plog_free(pl);
}

/* ---- retention -------------------------------------------------------- */

int plog_retain(struct plog *pl, int64_t now_ms)
{
	int n = 0;
	uint64_t total = plog_size(pl);

	for (;;) {
		struct segment *seg = pl->seg_head;
		int expired, oversize, below;

		if (!seg || seg == pl->seg_tail || !seg->sealed || seg->flushed < seg->end)
			break;
		expired = pl->cfg.retention_ms >= 0 && seg->max_timestamp != INT64_MIN &&
			  seg->max_timestamp < now_ms - pl->cfg.retention_ms;
		oversize = pl->cfg.retention_bytes >= 0 &&
			   total - seg->end >= (uint64_t)pl->cfg.retention_bytes;
		/* wholly below the log start (DeleteRecords found it busy) */
		below = seg->next_offset <= pl->log_start;
		if (!expired && !oversize && !below)
			break;
		if (plog_segment_busy(pl, seg))
			break;             /* a response or a disk read still uses it: next time */
		plog_chunks_drop(pl, seg);
		total -= seg->end;
		segment_remove_files(plog_dirfd(pl), seg);
		plog_segment_unlink(pl, seg);
		pl->log_start = pl->seg_head->base_offset > pl->log_start ? pl->seg_head->base_offset
									    : pl->log_start;
		segment_free(seg);
		n++;
	}
	if (n)
		plog_epochs_truncate_start(pl, pl->log_start);
	plog_dir_release(pl);
	return n;
}

