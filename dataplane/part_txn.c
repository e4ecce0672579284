/* dataplane/part_txn.c — a partition's side of transactions, on its owner
 * shard: which producers have a transaction open here and since which
 * offset (the last stable offset follows from it), the COMMIT/ABORT markers
 * the coordinator has written, and the index of aborted transactions that
 * read_committed fetches return.
 *
 * The index lives in memory and in "aborted.txns" next to the log: one
 * 24-byte record (pid, first offset, marker offset; big-endian) per abort,
 * appended when the marker is appended. At open the file is read, entries
 * the log no longer holds are dropped, and the scan of the batches after
 * the producer snapshot adds the aborts the file missed (a crash between
 * the marker and the file write). The file's presence also says that the
 * partition has had transactions: its open scan then reads everything
 * after the snapshot, so no open transaction is missed.
 *
 * Thread: the owner shard. Aborts and the first transaction of a partition
 * write a small file (slow path: once per transaction, never per batch);
 * the list's rewrite when retention trims it goes on the shard's ring
 * (plog_save_file), and an abort added meanwhile rewrites it after that.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataplane/part_err.h"
#include "dataplane/part_txn.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/plog.h"
#include "storage/slog.h"

#define ABORTED_FILE "aborted.txns"
#define ABORTED_REC 24

static int aborted_push(struct part_txn *t, int64_t pid, int64_t first, int64_t last)
{
	if (t->naborted && t->aborted[t->naborted - 1].last >= last)
		return 0;   /* known already (file and scan overlap) */
	if (t->naborted == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct part_aborted *a = realloc(t->aborted, sizeof(*a) * cap); /* style: allow per aborted transaction, amortized */

		if (!a)
			return -ENOMEM;
		t->aborted = a;
		t->cap = cap;
	}
	t->aborted[t->naborted++] = (struct part_aborted){ pid, first, last };
	return 0;
}

/* The whole list written over the file, on the shard's ring (the log's
 * file work: "aborted.txns.tmp" written, fdatasync'ed, renamed over it). */
static void aborted_file_rewrite(struct part_txn *t)
{
	size_t len = (size_t)t->naborted * ABORTED_REC;
	uint8_t *buf = malloc(len ? len : 1); /* style: allow slow path: the list's rewrite, once per trim */

	if (!buf)
		return;
	for (uint32_t i = 0; i < t->naborted; i++) {
		be64_store(buf + i * ABORTED_REC, (uint64_t)t->aborted[i].pid);
		be64_store(buf + i * ABORTED_REC + 8, (uint64_t)t->aborted[i].first);
		be64_store(buf + i * ABORTED_REC + 16, (uint64_t)t->aborted[i].last);
	}
	plog_save_file(t->pl, ABORTED_FILE, buf, len);   /* copied */
	free(buf);
}

static void aborted_file_add(struct part_txn *t, const struct part_aborted *a)
{
	char path[4200];
	uint8_t rec[ABORTED_REC];
	int fd;

	if (plog_saving_file(t->pl, ABORTED_FILE)) {
		/* a rewrite is queued or running: appended to the old file, the
		 * record would be lost at its rename; the whole list goes after
		 * it instead */
		aborted_file_rewrite(t);
		return;
	}
	snprintf(path, sizeof(path), "%s/" ABORTED_FILE, t->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		slog(SLOG_WARN, /* style: allow slow path: a failed file open, once per abort */
			"%s-%d: cannot open %s: %s (the abort is found again by the scan at the next start)",
			t->topic, t->index, path, strerror(errno));
		return;
	}
	if (a) {
		be64_store(rec, (uint64_t)a->pid);
		be64_store(rec + 8, (uint64_t)a->first);
		be64_store(rec + 16, (uint64_t)a->last);
		if (write(fd, rec, sizeof(rec)) != (ssize_t)sizeof(rec))
			slog(SLOG_WARN, /* style: allow slow path: a failed write, once per abort */
				"%s-%d: writing %s failed (the abort is found again by the scan at the next start)",
				t->topic, t->index, path);
	}
	close(fd);
}

void part_txn_init(struct part_txn *t, struct producer_table *producers, struct plog *pl, const char *topic,
		   int32_t index)
{
	memset(t, 0, sizeof(*t));
	t->producers = producers;
	t->pl = pl;
	t->dir = pl->dir;
	t->topic = topic;
	t->index = index;
	t->lso = INT64_MAX;
}

void part_txn_free(struct part_txn *t)
{
	free(t->aborted);
	t->aborted = NULL;
	t->naborted = t->cap = 0;
	t->lso = INT64_MAX;
}

int part_txn_load(struct part_txn *t, int64_t log_start, int64_t next_offset)
{
	char path[4200];
	uint8_t rec[ABORTED_REC];
	int fd, stale = 0;

	t->lso = INT64_MAX;
	snprintf(path, sizeof(path), "%s/" ABORTED_FILE, t->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	t->seen = 1;
	while (read(fd, rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
		int64_t pid = (int64_t)be64_load(rec), first = (int64_t)be64_load(rec + 8),
			last = (int64_t)be64_load(rec + 16);

		/* a marker a crash took back (its record was written, the
		 * marker was not), or one retention removed */
		if (last >= next_offset || last < log_start || first > last) {
			stale += last >= next_offset;
			continue;
		}
		if (aborted_push(t, pid, first, last) < 0)
			break;
	}
	close(fd);
	/* a record past the log's end must leave the file too: once the log
	 * grows past its offsets again, the next open would take it for an
	 * abort of records that were never aborted */
	if (stale)
		aborted_file_rewrite(t);
	return 1;
}

/* The marker record of a control batch: 0 ABORT, 1 COMMIT, -1 not one. */
static int marker_type(const uint8_t *b)
{
	struct record_iter it;
	struct record_view rv;

	if (batch_attributes(b) & BATCH_ATTR_CODEC_MASK)
		return -1;
	record_iter_init(&it, b + BATCH_HEADER_SIZE, batch_size(b) - BATCH_HEADER_SIZE, batch_records_count(b));
	if (record_iter_next(&it, &rv) != 1 || !rv.key || rv.key_len < 4)
		return -1;
	return (int16_t)be16_load(rv.key + 2);
}

static void txn_close(struct part_txn *t, struct producer_entry *e, int commit, int64_t marker)
{
	if (!commit && e->txn_first >= 0 && aborted_push(t, e->pid, e->txn_first, marker) < 0)
		slog(SLOG_WARN, /* style: allow slow path: out of memory, once per abort */
			"%s-%d: no memory for the aborted transaction index: producer %lld's "
			"aborted records at %lld..%lld stay visible to read_committed consumers",
			t->topic, t->index, (long long)e->pid, (long long)e->txn_first, (long long)marker);
	e->txn_first = -1;
	e->txn_open = 0;
}

void part_txn_scan(struct part_txn *t, const uint8_t *b)
{
	uint16_t a = batch_attributes(b);
	int64_t pid = batch_producer_id(b);
	struct producer_entry *e;

	if (!(a & BATCH_ATTR_TRANSACTIONAL) || pid < 0)
		return;
	t->seen = 1;
	e = producer_entry(t->producers, pid, batch_producer_epoch(b), 1);
	if (!e)
		return;
	if (a & BATCH_ATTR_CONTROL) {
		int type = marker_type(b);

		if (type == 0 || type == 1)
			txn_close(t, e, type == 1, batch_base_offset(b));
		if (batch_producer_epoch(b) > e->epoch) {
			e->epoch = batch_producer_epoch(b);
			e->n = e->head = 0;
		}
	} else if (e->txn_first < 0) {
		e->txn_first = batch_base_offset(b);
	}
}

void part_txn_scanned(struct part_txn *t, uint32_t had)
{
	if (t->seen && had == t->naborted)
		aborted_file_add(t, NULL);   /* (re)create the mark */
	for (uint32_t i = had; i < t->naborted; i++)
		aborted_file_add(t, &t->aborted[i]);
	part_txn_relso(t);
}

void part_txn_relso(struct part_txn *t)
{
	const struct producer_table *pt = t->producers;
	int64_t lso = INT64_MAX;

	for (uint32_t i = 0; i < pt->cap; i++)
		if (pt->e[i].pid >= 0 && pt->e[i].txn_first >= 0 && pt->e[i].txn_first < lso)
			lso = pt->e[i].txn_first;
	t->lso = lso;
}

int part_txn_begin(struct part_txn *t, int64_t pid, int16_t epoch, uint64_t since_ns, int64_t now_ms)
{
	struct producer_entry *e = producer_entry(t->producers, pid, epoch, 1);

	if (!e)
		return PART_ERR_PRODUCERS_FULL;
	if (epoch < e->epoch)
		return PART_ERR_OLD_EPOCH;
	if (epoch > e->epoch) {
		e->epoch = epoch;   /* sequences start over with the new epoch */
		e->n = e->head = 0;
	}
	e->txn_open = 1;
	e->txn_since_ns = since_ns;
	e->last_ms = now_ms;
	if (!t->seen) {
		/* the first transaction here: from now on the open scan reads
		 * everything after the snapshot */
		aborted_file_add(t, NULL);
		t->seen = 1;
	}
	return 0;
}

int part_txn_check(const struct part_txn *t, int64_t pid, int16_t epoch, uint64_t recv_ns)
{
	const struct producer_entry *e = producer_entry(t->producers, pid, epoch, 0);

	if (e && epoch < e->epoch)
		return PART_ERR_OLD_EPOCH;   /* fenced */
	if (!e || !e->txn_open || epoch != e->epoch)
		return PART_ERR_TXN_UNKNOWN;  /* the partition is not in its transaction, as
					       * far as it knows: its coordinator may say so */
	if (recv_ns < e->txn_since_ns)
		return PART_ERR_TXN_STATE;    /* sent before this transaction began: a late
					       * write of an earlier one */
	return 0;
}

void part_txn_appended(struct part_txn *t, int64_t pid, int64_t base)
{
	struct producer_entry *e = producer_entry(t->producers, pid, 0, 0);

	if (e && e->txn_first < 0) {
		e->txn_first = base;
		if (base < t->lso)
			t->lso = base;
	}
}

ssize_t part_txn_marker_build(uint8_t *buf, size_t cap, int64_t pid, int16_t epoch, int commit,
			      int32_t coordinator_epoch, int64_t now_ms)
{
	uint8_t key[4], val[6];
	struct batch_builder bb;
	ssize_t len;

	be16_store(key, 0);
	be16_store(key + 2, commit ? 1 : 0);
	be16_store(val, 0);
	be32_store(val + 2, (uint32_t)coordinator_epoch);
	batch_builder_init(&bb, buf, cap, now_ms);
	if (batch_builder_add(&bb, 0, now_ms, key, 4, val, 6, NULL, 0, 0) < 0 ||
	    (len = batch_builder_finish(&bb, BATCH_ATTR_TRANSACTIONAL | BATCH_ATTR_CONTROL, -1, pid, epoch, -1)) < 0)
		return -EINVAL;
	return len;
}

void part_txn_marked(struct part_txn *t, int64_t pid, int16_t epoch, int commit, int64_t offset, int64_t now_ms)
{
	struct producer_entry *e;

	t->markers++;
	e = producer_entry(t->producers, pid, epoch, 1);
	if (e) {
		uint32_t had = t->naborted;

		if (epoch > e->epoch) {
			/* the coordinator fenced the producer (a timeout): its
			 * older epoch is refused from now on */
			e->epoch = epoch;
			e->n = e->head = 0;
		}
		e->last_ms = now_ms;
		txn_close(t, e, commit, offset);
		if (t->naborted > had)
			aborted_file_add(t, &t->aborted[t->naborted - 1]);
	}
	part_txn_relso(t);
}

void part_txn_replicated(struct part_txn *t, const uint8_t *b, int64_t now_ms)
{
	uint16_t a = batch_attributes(b);
	uint32_t had = t->naborted;
	int seen = t->seen;
	struct producer_entry *e;

	if (!(a & BATCH_ATTR_TRANSACTIONAL) || batch_producer_id(b) < 0)
		return;
	part_txn_scan(t, b);
	e = producer_entry(t->producers, batch_producer_id(b), 0, 0);
	if (e)
		e->last_ms = now_ms;
	if (!seen)
		aborted_file_add(t, NULL);   /* the first transaction here: the mark */
	for (uint32_t i = had; i < t->naborted; i++)
		aborted_file_add(t, &t->aborted[i]);
	if (a & BATCH_ATTR_CONTROL) {
		t->markers++;
		part_txn_relso(t);
	} else if (e && e->txn_first >= 0 && e->txn_first < t->lso) {
		t->lso = e->txn_first;
	}
}

void part_txn_truncated(struct part_txn *t, int64_t offset)
{
	uint32_t keep = t->naborted;

	while (keep && t->aborted[keep - 1].last >= offset)
		keep--;
	t->naborted = keep;
	/* rewritten even when the list kept all: the file may hold a record
	 * the open left out (its marker was past the log end a crash left),
	 * which the log growing again past it would bring back */
	if (t->seen)
		aborted_file_rewrite(t);
}

int part_txn_aborted(const struct part_txn *t, int64_t from, int64_t to, int64_t *pid, int64_t *first, int cap)
{
	uint32_t lo = 0, hi = t->naborted;
	int n = 0;

	while (lo < hi) {   /* the first abort whose marker is at or after `from` */
		uint32_t mid = (lo + hi) / 2;

		if (t->aborted[mid].last < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < t->naborted; i++) {
		const struct part_aborted *a = &t->aborted[i];

		if (a->first > to)
			continue;
		if (n < cap) {
			pid[n] = a->pid;
			first[n] = a->first;
		}
		n++;
	}
	return n;
}

void part_txn_trim(struct part_txn *t, int64_t log_start)
{
	uint32_t drop = 0;

	while (drop < t->naborted && t->aborted[drop].last < log_start)
		drop++;
	if (!drop)
		return;
	memmove(t->aborted, t->aborted + drop, sizeof(*t->aborted) * (t->naborted - drop));
	t->naborted -= drop;
	aborted_file_rewrite(t);
}
