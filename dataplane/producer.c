/* dataplane/producer.c — idempotent producer state of a partition (see
 * producer.h): an open-addressing table keyed by producer id. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataplane/producer.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/controls.h"

#define SNAP_NAME "producers.snapshot"
#define SNAP_TMP "producers.snapshot.tmp"
#define SNAP_MAGIC 0x534c5053u   /* "SLPS" */
#define SNAP_HEADER 20           /* magic u32, version u16, pad u16, covered i64, count u32 */
#define SNAP_ENTRY 28            /* pid i64, epoch i16, n u8, pad u8, last_ms i64, txn_first i64 (v2) */
#define SNAP_ENTRY_V1 20
#define SNAP_BATCH 24            /* first i32, last i32, base i64, last offset i64 */

static uint32_t slot_of(const struct producer_table *t, int64_t pid)
{
	uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(h >> 32) & (t->cap - 1);
}

static struct producer_entry *find(const struct producer_table *t, int64_t pid)
{
	if (!t->cap)
		return NULL;
	for (uint32_t i = slot_of(t, pid);; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].pid == pid)
			return &t->e[i];
		if (t->e[i].pid == -1)
			return NULL;
	}
}

int producer_check(const struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq,
		   int32_t last_seq, struct producer_batch *dup)
{
	const struct producer_entry *e = find(t, pid);
	const struct producer_batch *newest;

	if (!e)
		return PRODUCER_APPEND;
	if (epoch < e->epoch)
		return PRODUCER_OLD_EPOCH;   /* a zombie of an older epoch */
	if (epoch > e->epoch)
		return first_seq == 0 ? PRODUCER_APPEND : PRODUCER_OUT_OF_ORDER;
	for (int i = 0; i < e->n; i++) {
		const struct producer_batch *b = &e->b[(e->head + i) % PRODUCER_BATCHES];

		if (b->first_seq == first_seq && b->last_seq == last_seq) {
			if (SLUICE_CONTROL_OFF(no_dedup))
				return PRODUCER_APPEND;   /* the control: a resend appended again */
			*dup = *b;
			return PRODUCER_DUPLICATE;
		}
	}
	if (!e->n)
		return PRODUCER_APPEND;
	newest = &e->b[(e->head + e->n - 1) % PRODUCER_BATCHES];
	if (first_seq != producer_seq_add(newest->last_seq, 1) && !SLUICE_CONTROL_OFF(no_seq_check))
		return PRODUCER_OUT_OF_ORDER;
	return PRODUCER_APPEND;
}

/* Every live entry of old (pid >= 0; -1 is an empty slot, -2 a
 * tombstone of producer_expire) put into t's slots. */
static void rehash(struct producer_table *t, const struct producer_table *old)
{
	for (uint32_t i = 0; i < old->cap; i++)
		if (old->e[i].pid >= 0) {
			uint32_t j = slot_of(t, old->e[i].pid);

			while (t->e[j].pid != -1)
				j = (j + 1) & (t->cap - 1);
			t->e[j] = old->e[i];
			t->n++;
		}
}

static int grow(struct producer_table *t)
{
	struct producer_table old = *t;
	uint32_t cap = old.cap ? old.cap * 2 : 4;

	t->e = malloc(sizeof(*t->e) * cap); /* style: allow per producer id, amortized */
	if (!t->e) {
		*t = old;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		t->e[i].pid = -1;
	t->cap = cap;
	t->n = 0;
	rehash(t, &old);
	free(old.e);
	return 0;
}

struct producer_entry *producer_entry(struct producer_table *t, int64_t pid, int16_t epoch, int create)
{
	struct producer_entry *e = find(t, pid);
	uint32_t i;

	if (e || !create)
		return e;
	if ((t->n + 1) * 4 > t->cap * 3 && grow(t) < 0)
		return NULL;
	for (i = slot_of(t, pid); t->e[i].pid != -1; i = (i + 1) & (t->cap - 1))
		;
	e = &t->e[i];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->epoch = epoch;
	e->txn_first = -1;
	t->n++;
	return e;
}

int producer_record(struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq, int32_t last_seq,
		    int64_t base_offset, int64_t last_offset, int64_t now_ms)
{
	struct producer_entry *e = producer_entry(t, pid, epoch, 1);

	if (!e)
		return -ENOMEM;
	if (epoch != e->epoch) {
		/* a new epoch starts its sequences over */
		e->epoch = epoch;
		e->n = 0;
		e->head = 0;
	}
	if (e->n == PRODUCER_BATCHES) {
		e->head = (uint8_t)((e->head + 1) % PRODUCER_BATCHES);
		e->n--;
	}
	e->b[(e->head + e->n) % PRODUCER_BATCHES] = (struct producer_batch){ first_seq, last_seq, base_offset,
									    last_offset };
	e->n++;
	e->last_ms = now_ms;
	return 0;
}

void producer_expire(struct producer_table *t, int64_t now_ms, int64_t ttl_ms)
{
	int gone = 0;

	for (uint32_t i = 0; i < t->cap; i++)
		if (t->e[i].pid >= 0 && now_ms - t->e[i].last_ms >= ttl_ms && t->e[i].txn_first < 0 &&
		    !t->e[i].txn_open) {
			t->e[i].pid = -2;   /* tombstone until the rebuild below */
			gone++;
		}
	if (!gone)
		return;
	/* rebuild in place: linear probing has no cheap delete */
	{
		struct producer_table old = *t;
		uint32_t n = 0;

		for (uint32_t i = 0; i < old.cap; i++)
			n += old.e[i].pid >= 0;
		t->e = NULL;
		t->cap = t->n = 0;
		if (n) {
			while (t->cap * 3 < (n + 1) * 4)
				if (grow(t) < 0)
					break;
			if (t->cap)
				rehash(t, &old);
		}
		free(old.e);
	}
}

void producer_table_free(struct producer_table *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

/* The save's steps, each one SQE on the ring. */
enum { SNAP_OPEN, SNAP_WRITE, SNAP_SYNC, SNAP_CLOSE, SNAP_RENAME };

static void snap_finish(struct producer_snap *s, int err)
{
	if (s->fd >= 0)
		close(s->fd);      /* only after a failure: the close step cleared it */
	s->fd = -1;
	if (err < 0)
		unlinkat(s->dirfd, SNAP_TMP, 0);
	free(s->buf);
	s->buf = NULL;
	s->err = err;
	s->busy = 0;
	if (s->done)
		s->done(s);
}

/* Submit the step s->step. */
static int snap_submit(struct producer_snap *s)
{
	struct io_uring_sqe *sqe = store_sqe(s->st);

	if (!sqe)
		return -EBUSY;
	switch (s->step) {
	case SNAP_OPEN:
		io_uring_prep_openat(sqe, s->dirfd, SNAP_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		break;
	case SNAP_WRITE:
		io_uring_prep_write(sqe, s->fd, s->buf + s->at, (unsigned)(s->len - s->at), s->at);
		break;
	case SNAP_SYNC:
		io_uring_prep_fsync(sqe, s->fd, IORING_FSYNC_DATASYNC);
		break;
	case SNAP_CLOSE:
		io_uring_prep_close(sqe, s->fd);
		break;
	case SNAP_RENAME:
		io_uring_prep_renameat(sqe, s->dirfd, SNAP_TMP, s->dirfd, SNAP_NAME, 0);
		break;
	}
	store_call_submit(s->st, sqe, &s->call);
	return 0;
}

static void snap_step_done(struct store_call *call, int res)
{
	struct producer_snap *s = (struct producer_snap *)call;
	int rc;

	if (res < 0) {
		if (s->step == SNAP_CLOSE)
			s->fd = -1;        /* a failed close still released it */
		snap_finish(s, res);
		return;
	}
	switch (s->step) {
	case SNAP_OPEN:
		s->fd = res;
		s->step = SNAP_WRITE;
		break;
	case SNAP_WRITE:
		if (res == 0) {
			snap_finish(s, -EIO);
			return;
		}
		s->at += (size_t)res;
		if (s->at >= s->len)
			s->step = SNAP_SYNC;
		break;
	case SNAP_SYNC:
		s->step = SNAP_CLOSE;
		break;
	case SNAP_CLOSE:
		s->fd = -1;
		s->step = SNAP_RENAME;
		break;
	case SNAP_RENAME:
		snap_finish(s, 0);
		return;
	}
	if ((rc = snap_submit(s)) < 0)
		snap_finish(s, rc);
}

int producer_snapshot_start(struct producer_snap *s, const struct producer_table *t, struct store *st,
			    int dirfd, int64_t covered)
{
	size_t cap = SNAP_HEADER + (size_t)t->n * (SNAP_ENTRY + PRODUCER_BATCHES * SNAP_BATCH) + 4, at = 0;
	uint8_t *buf;
	uint32_t count = 0;
	int rc;

	if (s->busy)
		return -EBUSY;
	buf = malloc(cap); /* style: allow snapshot (slow path, once per tick) */
	if (!buf)
		return -ENOMEM;
	be32_store(buf, SNAP_MAGIC);
	be16_store(buf + 4, 2);
	be16_store(buf + 6, 0);
	be64_store(buf + 8, (uint64_t)covered);
	at = SNAP_HEADER;
	for (uint32_t i = 0; i < t->cap; i++) {
		const struct producer_entry *e = &t->e[i];

		if (e->pid < 0)
			continue;
		be64_store(buf + at, (uint64_t)e->pid);
		be16_store(buf + at + 8, (uint16_t)e->epoch);
		buf[at + 10] = e->n;
		buf[at + 11] = 0;
		be64_store(buf + at + 12, (uint64_t)e->last_ms);
		be64_store(buf + at + 20, (uint64_t)e->txn_first);
		at += SNAP_ENTRY;
		for (int j = 0; j < e->n; j++) {
			const struct producer_batch *b = &e->b[(e->head + j) % PRODUCER_BATCHES];

			be32_store(buf + at, (uint32_t)b->first_seq);
			be32_store(buf + at + 4, (uint32_t)b->last_seq);
			be64_store(buf + at + 8, (uint64_t)b->base_offset);
			be64_store(buf + at + 16, (uint64_t)b->last_offset);
			at += SNAP_BATCH;
		}
		count++;
	}
	be32_store(buf + 16, count);
	be32_store(buf + at, batch_crc32c(buf, at));
	at += 4;
	s->call.done = snap_step_done;
	s->st = st;
	s->dirfd = dirfd;
	s->fd = -1;
	s->step = SNAP_OPEN;
	s->err = 0;
	s->covered = covered;
	s->buf = buf;
	s->len = at;
	s->at = 0;
	if ((rc = snap_submit(s)) < 0) {
		free(buf);
		s->buf = NULL;
		return rc;
	}
	s->busy = 1;
	return 0;
}

static void snap_sync_done(struct producer_snap *s)
{
	*(int *)s->arg = 1;
}

int producer_snapshot_save(const struct producer_table *t, struct store *st, int dirfd, int64_t covered)
{
	struct producer_snap s = { .done = snap_sync_done };
	int finished = 0, rc;

	s.arg = &finished;
	if ((rc = producer_snapshot_start(&s, t, st, dirfd, covered)) < 0)
		return rc;
	while (!finished)
		store_poll(st, 1);
	return s.err;
}

int64_t producer_snapshot_load(struct producer_table *t, int dirfd)
{
	int fd = openat(dirfd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
	off_t size;
	uint8_t *buf;
	int64_t covered = -1;
	size_t at = SNAP_HEADER, esize;
	int version;

	if (fd < 0)
		return -1;
	size = lseek(fd, 0, SEEK_END);
	if (size < SNAP_HEADER + 4 || size > (64 << 20)) {
		close(fd);
		return -1;
	}
	buf = malloc((size_t)size); /* style: allow snapshot (slow path) */
	if (!buf || pread(fd, buf, (size_t)size, 0) != size || /* style: allow start-up: the partition opens */
	    be32_load(buf) != SNAP_MAGIC ||
	    (be16_load(buf + 4) != 1 && be16_load(buf + 4) != 2) ||
	    be32_load(buf + size - 4) != batch_crc32c(buf, (size_t)size - 4)) {
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	version = be16_load(buf + 4);
	esize = version == 1 ? SNAP_ENTRY_V1 : SNAP_ENTRY;
	for (uint32_t i = 0, n = be32_load(buf + 16); i < n; i++) {
		struct producer_entry *e;
		int64_t pid, txn_first;
		int16_t epoch;
		uint8_t nb;
		int64_t last_ms;

		if (at + esize > (size_t)size - 4)
			goto bad;
		pid = (int64_t)be64_load(buf + at);
		epoch = (int16_t)be16_load(buf + at + 8);
		nb = buf[at + 10];
		last_ms = (int64_t)be64_load(buf + at + 12);
		txn_first = version == 1 ? -1 : (int64_t)be64_load(buf + at + 20);
		at += esize;
		if (pid < 0 || !(e = producer_entry(t, pid, epoch, 1)))
			goto bad;
		e->last_ms = last_ms;
		e->txn_first = txn_first;
		if (nb > PRODUCER_BATCHES || at + (size_t)nb * SNAP_BATCH > (size_t)size - 4)
			goto bad;
		for (int j = 0; j < nb; j++, at += SNAP_BATCH)
			if (producer_record(t, pid, epoch, (int32_t)be32_load(buf + at), (int32_t)be32_load(buf + at + 4),
					    (int64_t)be64_load(buf + at + 8), (int64_t)be64_load(buf + at + 16),
					    last_ms) < 0)
				goto bad;
	}
	covered = (int64_t)be64_load(buf + 8);
	free(buf);
	return covered;
bad:
	free(buf);
	producer_table_free(t);
	return -1;
}
