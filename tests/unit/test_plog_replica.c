/* tests/unit/test_plog_replica.c — the follower's path of the partition log
 * (storage/plog_replica.h) on a real disk with a real io_uring: a leader
 * log's bytes appended to a follower log end byte-identical; gaps,
 * overlaps and damaged sets are refused; the cut of a divergent tail, in
 * the active segment and across segments, followed by the new leader's
 * batches; reopen after a cut; a child killed at every step of a cut, and
 * the open that finds the log before or after it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "storage/plog.h"
#include "storage/plog_internal.h"
#include "storage/plog_replica.h"
#include "tests/unit/helpers.h"

static uint8_t bbuf[1 << 18];
static uint8_t *rbuf;
#define RBUF_CAP (4u << 20)

static struct store st;
static char *dir;

static void setup(void)
{
	dir = test_tmpdir();
	cr_assert_eq(store_init(&st, NULL, 64u << 20), 0);
	cr_assert_eq(posix_memalign((void **)&rbuf, 4096, RBUF_CAP), 0);
}

static void teardown(void)
{
	store_fini(&st);
	test_rmrf(dir);
	free(dir);
	free(rbuf);
}

TestSuite(replica, .init = setup, .fini = teardown, .timeout = 240);

static void small_cfg(struct plog_config *cfg)
{
	plog_config_defaults(cfg);
	cfg->segment_bytes = 64 * 1024;   /* several segments in a few hundred batches */
}

static struct plog *open_sub(struct store *s, const char *sub, const struct plog_config *cfg)
{
	char path[4300];
	struct plog *pl;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	rc = plog_open(s, path, cfg, &pl);
	cr_assert_eq(rc, 0, "plog_open %s: %s (%s)", sub, strerror(-rc), s->problem);
	return pl;
}

/* Batch i of a leader: n records, an idempotent producer's sequence for
 * odd i (pid 1000 + i % 3), a transaction and its COMMIT marker every
 * 17th. Appended by the leader's path (stamped with pl->leader_epoch). */
static int64_t lead(struct plog *pl, int i, int vlen)
{
	struct batch_builder bb;
	char val[4096];
	int64_t base;
	uint16_t attrs = 0;
	int64_t pid = -1;
	int32_t seq = -1;
	int n = 1 + i % 4, rc;
	ssize_t size;

	batch_builder_init(&bb, bbuf, sizeof(bbuf), 1000 + i);
	if (i % 17 == 16) {
		/* a control batch: the COMMIT marker of producer 77 */
		uint8_t key[4] = { 0, 0, 0, 1 }, v[6] = { 0 };

		cr_assert_eq(batch_builder_add(&bb, 0, 1000 + i, key, 4, v, 6, NULL, 0, 0), 0);
		attrs = BATCH_ATTR_TRANSACTIONAL | BATCH_ATTR_CONTROL;
		pid = 77;
		n = 1;
	} else {
		for (int r = 0; r < n; r++) {
			int l = snprintf(val, sizeof(val), "v%d-%d", i, r);

			for (; l < vlen; l++)
				val[l] = (char)('a' + l % 26);
			cr_assert_eq(batch_builder_add(&bb, r, 1000 + i + r, "k", 1, val, l, NULL, 0, 0), 0);
		}
		if (i % 17 == 15) {
			attrs = BATCH_ATTR_TRANSACTIONAL;
			pid = 77;
			seq = i;
		} else if (i % 2) {
			pid = 1000 + i % 3;
			seq = i;
		}
	}
	size = batch_builder_finish(&bb, attrs, -1, pid, 0, seq);
	cr_assert_gt(size, 0);
	while ((rc = plog_append(pl, bbuf, (uint32_t)size, &base)) == -ENOBUFS)
		store_poll(&st, 1);
	cr_assert_eq(rc, 0, "leader append %d: %s", i, strerror(-rc));
	return base;
}

/* Copy [from, to) of src to dst through plog_append_replica, in reads of
 * up to max_bytes (several batches per call). */
static void replicate(struct plog *src, struct plog *dst, int64_t from, int64_t to, uint32_t max_bytes)
{
	int64_t off = from;

	store_drain(&st);
	while (off < to) {
		struct plog_read rd = { .offset = off, .max_offset = to, .max_bytes = max_bytes, .buf = rbuf,
					.buf_cap = RBUF_CAP };
		uint32_t at = 0, appended;
		int rc;

		cr_assert_eq(plog_read_sync(src, &rd), 1, "leader read at %lld", (long long)off);
		cr_assert_gt(rd.bytes, 0);
		cr_assert_eq(batch_base_offset(rd.data), off, "reads start on batch boundaries");
		while (at < rd.bytes) {
			rc = plog_append_replica(dst, rd.data + at, rd.bytes - at, &appended);
			at += appended;
			if (rc == -ENOBUFS) {
				store_poll(&st, 1);
				continue;
			}
			cr_assert_eq(rc, 0, "replica append at %lld: %s", (long long)dst->next_offset, strerror(-rc));
		}
		for (at = 0; at < rd.bytes; at += batch_size(rd.data + at))
			off = batch_last_offset(rd.data + at) + 1;
		plog_read_release(&rd);
		cr_assert_eq(dst->next_offset, off);
	}
	store_drain(&st);
}

/* Read [0, end) of a file (buffered). */
static uint8_t *slurp(const char *path, uint64_t end)
{
	uint8_t *b = malloc(end ? end : 1);
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0, "open %s", path);
	cr_assert_eq(pread(fd, b, end, 0), (ssize_t)end, "read %s", path);
	close(fd);
	return b;
}

/* Both logs hold the same segments with the same bytes. */
static void same_logs(const struct plog *a, const struct plog *b)
{
	const struct segment *x = a->seg_head, *y = b->seg_head;

	cr_assert_eq(a->next_offset, b->next_offset);
	cr_assert_eq(plog_segment_count(a), plog_segment_count(b));
	for (; x && y; x = x->next, y = y->next) {
		char p[4400], q[4400];
		uint8_t *u, *v;

		cr_assert_eq(x->base_offset, y->base_offset);
		cr_assert_eq(x->end, y->end, "segment %s: %llu vs %llu bytes", x->name, (unsigned long long)x->end,
			     (unsigned long long)y->end);
		cr_assert_eq(x->next_offset, y->next_offset);
		snprintf(p, sizeof(p), "%s/%s", a->dir, x->name);
		snprintf(q, sizeof(q), "%s/%s", b->dir, y->name);
		u = slurp(p, x->end);
		v = slurp(q, y->end);
		cr_assert(!memcmp(u, v, x->end), "segment %s differs", x->name);
		free(u);
		free(v);
	}
}

static int file_exists(const struct plog *pl, const char *name)
{
	char p[4400];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", pl->dir, name);
	return stat(p, &sb) == 0;
}

/* The offset of the k-th batch boundary of pl (0 is the first batch). */
static int64_t boundary(struct plog *pl, int k)
{
	int64_t off = pl->log_start;

	for (int i = 0; i < k; i++) {
		struct plog_read rd = { .offset = off, .max_offset = pl->next_offset, .max_bytes = 1, .buf = rbuf,
					.buf_cap = RBUF_CAP };

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		cr_assert_gt(rd.bytes, 0);
		off = batch_last_offset(rd.data) + 1;
		plog_read_release(&rd);
	}
	return off;
}

Test(replica, leader_bytes_land_byte_identical)
{
	struct plog_config cfg;
	struct plog *l, *f;
	int64_t ts_off, ts_ts, f_off, f_ts;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	f = open_sub(&st, "follower", &cfg);
	for (int i = 0; i < 400; i++) {
		if (i == 150)
			l->leader_epoch = 3;     /* an election on the leader's side */
		if (i == 300)
			l->leader_epoch = 4;
		lead(l, i, 200 + (i * 37) % 1500);
	}
	cr_assert_gt(plog_segment_count(l), 4);
	/* one batch per call, then many per call */
	replicate(l, f, 0, boundary(l, 40), 1);
	replicate(l, f, f->next_offset, l->next_offset, 200 * 1024);
	same_logs(l, f);
	cr_assert_eq(f->leader_epoch, 4, "the newest epoch seen");
	/* the follower's time index answers as the leader's does */
	cr_assert_eq(plog_offset_for_time(l, 1200, &ts_off, &ts_ts), 0);
	cr_assert_eq(plog_offset_for_time(f, 1200, &f_off, &f_ts), 0);
	cr_assert_eq(ts_off, f_off);
	cr_assert_eq(ts_ts, f_ts);
	cr_assert_eq(f->high_watermark, f->next_offset, "durable as any append");
	plog_close(l);
	plog_close(f);
	/* and both recover the same */
	l = open_sub(&st, "leader", &cfg);
	f = open_sub(&st, "follower", &cfg);
	same_logs(l, f);
	plog_close(l);
	plog_close(f);
}

Test(replica, gaps_overlaps_and_damage_are_refused)
{
	struct plog_config cfg;
	struct plog *l, *f;
	struct plog_read rd = { .offset = 0, .max_bytes = 64 * 1024, .buf = rbuf, .buf_cap = RBUF_CAP };
	uint8_t *set;
	uint32_t len, first, second, appended;
	int64_t end;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	f = open_sub(&st, "follower", &cfg);
	for (int i = 0; i < 20; i++)
		lead(l, i, 100);
	l->leader_epoch = 2;
	for (int i = 20; i < 24; i++)
		lead(l, i, 100);
	store_drain(&st);
	rd.max_offset = l->next_offset;
	cr_assert_eq(plog_read_sync(l, &rd), 1);
	set = malloc(rd.bytes);
	memcpy(set, rd.data, rd.bytes);
	len = rd.bytes;
	plog_read_release(&rd);
	first = batch_size(set);
	second = batch_size(set + first);

	/* a gap: the second batch first */
	cr_assert_eq(plog_append_replica(f, set + first, len - first, &appended), -ENODATA);
	cr_assert_eq(appended, 0);
	cr_assert_eq(f->next_offset, 0);
	/* the first batch, then it again: an overlap */
	cr_assert_eq(plog_append_replica(f, set, first, &appended), 0);
	cr_assert_eq(appended, first);
	cr_assert_eq(plog_append_replica(f, set, first + second, &appended), -EEXIST);
	cr_assert_eq(appended, 0);
	/* a set with a hole inside: nothing of it is appended */
	{
		uint8_t *holed = malloc(len);
		uint32_t third = batch_size(set + first + second);

		memcpy(holed, set + first, second);
		memcpy(holed + second, set + first + second + third, len - first - second - third);
		cr_assert_eq(plog_append_replica(f, holed, len - first - third, &appended), -EILSEQ);
		cr_assert_eq(appended, 0);
		cr_assert_eq(f->next_offset, batch_base_offset(set + first));
		free(holed);
	}
	/* a damaged CRC in the last batch: the whole set is refused */
	end = f->next_offset;
	set[len - 1] ^= 0x40;
	cr_assert_eq(plog_append_replica(f, set + first, len - first, &appended), -EBADMSG);
	cr_assert_eq(f->next_offset, end);
	set[len - 1] ^= 0x40;
	/* a cut batch */
	cr_assert_eq(plog_append_replica(f, set + first, second - 1, &appended), -EBADMSG);
	/* an epoch going down inside a set */
	{
		uint8_t *e = malloc(len);

		memcpy(e, set + first, len - first);
		batch_set_leader_epoch(e + second, 7);   /* outside the CRC: only the order is wrong */
		cr_assert_eq(plog_append_replica(f, e, len - first, &appended), -EILSEQ);
		free(e);
	}
	cr_assert_eq(f->next_offset, end);
	/* the rest, as it is */
	cr_assert_eq(plog_append_replica(f, set + first, len - first, &appended), 0);
	cr_assert_eq(appended, len - first);
	cr_assert_eq(f->next_offset, l->next_offset);
	cr_assert_eq(f->leader_epoch, 2);
	store_drain(&st);
	same_logs(l, f);
	free(set);
	plog_close(l);
	plog_close(f);
}

/* The scenario of KIP-101: a follower holds the old leader's tail, the new
 * leader (which had only a prefix) writes in a new epoch; the follower
 * cuts back to where they agree and fetches the new leader's batches. It
 * ends byte-identical to the new leader. `back`: batches cut. */
static void diverge_and_converge(int back)
{
	struct plog_config cfg;
	struct plog *old, *f, *nl;
	int64_t cut;
	int before;

	small_cfg(&cfg);
	old = open_sub(&st, "old", &cfg);
	f = open_sub(&st, "follower", &cfg);
	nl = open_sub(&st, "new", &cfg);
	old->leader_epoch = 1;
	for (int i = 0; i < 300; i++)
		lead(old, i, 300);
	replicate(old, f, 0, old->next_offset, 256 * 1024);
	cut = boundary(old, 300 - back);
	replicate(old, nl, 0, cut, 256 * 1024);
	cr_assert_eq(plog_checkpoint_sync(f), 0);   /* its checkpoint is above the cut */
	cr_assert_gt(f->checkpointed, cut);
	before = plog_segment_count(f);
	/* the new leader writes in epoch 2 */
	nl->leader_epoch = 2;
	for (int i = 1000; i < 1100; i++)
		lead(nl, i, 500);
	store_drain(&st);

	cr_assert_eq(plog_truncate_to_sync(f, cut, 0), 0);
	cr_assert_eq(f->next_offset, cut);
	cr_assert_eq(f->high_watermark, cut);
	cr_assert_leq(f->checkpointed, cut, "the checkpoint came down");
	cr_assert_leq(plog_segment_count(f), before);
	cr_assert(!file_exists(f, PLOG_TRUNCATE_FILE));
	{
		struct plog_read rd = { .offset = cut, .max_offset = INT64_MAX, .max_bytes = 1, .buf = rbuf,
					.buf_cap = RBUF_CAP };

		cr_assert_eq(plog_read_sync(f, &rd), 1);
		cr_assert_eq(rd.bytes, 0, "nothing at or after the cut");
	}
	replicate(nl, f, cut, nl->next_offset, 256 * 1024);
	same_logs(nl, f);
	cr_assert_eq(f->leader_epoch, 2);
	plog_close(f);
	f = open_sub(&st, "follower", &cfg);
	same_logs(nl, f);
	plog_close(old);
	plog_close(nl);
	plog_close(f);
}

Test(replica, truncate_in_the_active_segment_then_append)
{
	diverge_and_converge(3);
}

Test(replica, truncate_across_segments_then_append)
{
	diverge_and_converge(250);
}

Test(replica, truncate_refuses_a_cut_inside_a_batch_or_below_the_committed)
{
	struct plog_config cfg;
	struct plog *l;
	int64_t b10, end;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	for (int i = 0; i < 200; i++)
		lead(l, i, 300);
	store_drain(&st);
	b10 = boundary(l, 10);
	end = l->next_offset;
	/* batch 10 holds 1 + 10 % 4 = 3 records: b10 + 1 is inside it */
	cr_assert_eq(plog_truncate_to_sync(l, b10 + 1, 0), -EINVAL);
	cr_assert_eq(l->next_offset, end, "nothing cut");
	cr_assert_eq(plog_truncate_to_sync(l, b10, b10 + 5), -ERANGE, "below the committed point");
	cr_assert_eq(plog_truncate_to_sync(l, end + 1, 0), -ERANGE, "past the end");
	cr_assert_eq(plog_truncate_to_sync(l, end, 0), 0, "at the end: nothing to do");
	cr_assert_eq(l->next_offset, end);
	cr_assert_eq(plog_truncate_to_sync(l, b10, b10), 0, "at the committed point");
	cr_assert_eq(l->next_offset, b10);
	/* appends went on after it: the leader's own path too */
	lead(l, 500, 100);
	cr_assert_eq(l->next_offset, b10 + 1 + 500 % 4);
	plog_close(l);
}

/* Appends wait while a cut runs. */
static void count_done(struct plog_truncate *t)
{
	(*(int *)t->arg)++;
}

Test(replica, appends_wait_while_a_cut_runs)
{
	struct plog_config cfg;
	struct plog *l;
	int done = 0;
	int64_t base, cut;
	uint32_t appended;
	struct plog_truncate t = { .done = count_done, .arg = &done };

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	for (int i = 0; i < 100; i++)
		lead(l, i, 300);
	store_drain(&st);
	cut = boundary(l, 50);
	t.offset = cut;
	cr_assert_eq(posix_memalign((void **)&t.buf, 4096, 1 << 21), 0);
	t.buf_cap = 1 << 21;
	cr_assert_eq(plog_truncate_to(l, &t), 0);
	cr_assert_eq(plog_append(l, bbuf, 100, &base), -EBUSY);
	cr_assert_eq(plog_append_replica(l, bbuf, 100, &appended), -EBUSY);
	{
		struct plog_truncate t2 = { .offset = cut, .buf = t.buf, .buf_cap = t.buf_cap };

		cr_assert_eq(plog_truncate_to(l, &t2), 1);
		cr_assert_eq(t2.err, -EBUSY, "one cut at a time");
	}
	while (!done)
		store_poll(&st, 1);
	cr_assert_eq(done, 1);
	cr_assert_eq(t.err, 0);
	cr_assert_eq(l->next_offset, cut);
	lead(l, 7, 100);
	free(t.buf);
	plog_close(l);
}

/* A cut, close and reopen: the log is the cut one, and goes on. */
Test(replica, truncate_then_reopen)
{
	struct plog_config cfg;
	struct plog *l, *copy;
	int64_t cut;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	copy = open_sub(&st, "copy", &cfg);
	for (int i = 0; i < 300; i++)
		lead(l, i, 300);
	cut = boundary(l, 120);
	replicate(l, copy, 0, cut, 256 * 1024);
	cr_assert_eq(plog_checkpoint_sync(l), 0);
	cr_assert_eq(plog_truncate_to_sync(l, cut, 0), 0);
	plog_close(l);
	l = open_sub(&st, "leader", &cfg);
	cr_assert_eq(l->next_offset, cut);
	cr_assert_eq(l->recovery.damaged, 0, "a cut is not damage");
	cr_assert_eq(l->recovery.truncate_redone, 0, "nothing left to finish");
	same_logs(copy, l);
	for (int i = 0; i < 50; i++) {
		lead(l, 2000 + i, 300);
		lead(copy, 2000 + i, 300);
	}
	store_drain(&st);
	same_logs(copy, l);
	plog_close(l);
	l = open_sub(&st, "leader", &cfg);
	same_logs(copy, l);
	plog_close(l);
	plog_close(copy);
}

/* ---- crashes ---------------------------------------------------------- */

static int kill_at;

static void die_at_step(struct plog_truncate *t, int step)
{
	(void)t;
	if (step == kill_at)
		kill(getpid(), SIGKILL);
}

/* In a child: build the log (checkpointed, so its checkpoint and indexes
 * are above the cut), start the cut, die at step `at` (-1: right after
 * plog_truncate_to returned, before anything reached the disk). */
static void child_cut(const char *sub, int at, int pfd)
{
	struct store cst;
	struct plog_config cfg;
	struct plog *pl;
	int64_t v[2];
	int done = 0;
	struct plog_truncate t = { .done = count_done, .arg = &done, .on_step = die_at_step };

	if (store_init(&cst, NULL, 32u << 20))
		_exit(2);
	small_cfg(&cfg);
	pl = open_sub(&cst, sub, &cfg);
	for (int i = 0; i < 300; i++) {
		int64_t base;
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, 300, 3, 1000 + i);

		while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
			store_poll(&cst, 1);
	}
	store_drain(&cst);
	if (plog_checkpoint_sync(pl))
		_exit(2);
	v[0] = 2 * 100;          /* every batch holds 2 records: batch 100 */
	v[1] = pl->next_offset;
	if (write(pfd, v, sizeof(v)) != sizeof(v))
		_exit(3);
	kill_at = at;
	t.offset = v[0];
	if (posix_memalign((void **)&t.buf, 4096, 1 << 21))
		_exit(2);
	t.buf_cap = 1 << 21;
	if (plog_truncate_to(pl, &t) != 0)
		_exit(4);
	if (at < 0)
		kill(getpid(), SIGKILL);
	while (!done)
		store_poll(&cst, 1);
	_exit(t.err ? 5 : 0);
}

/* Every batch valid, offsets contiguous from 0 to the end, values those of
 * the batches appended. */
static void check_whole(struct plog *pl)
{
	int64_t off = 0;

	while (off < pl->next_offset) {
		struct plog_read rd = { .offset = off, .max_offset = pl->next_offset, .max_bytes = 1 << 20,
					.buf = rbuf, .buf_cap = RBUF_CAP };

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		cr_assert_gt(rd.bytes, 0, "no data at %lld of %lld", (long long)off, (long long)pl->next_offset);
		for (uint32_t at = 0; at < rd.bytes;) {
			struct batch_info bi;
			struct record_iter it;
			struct record_view rv;
			char want[32];

			cr_assert_eq(batch_validate(rd.data + at, rd.bytes - at, 0, 0, &bi), 0);
			cr_assert_eq(batch_base_offset(rd.data + at), off);
			record_iter_init(&it, rd.data + at + OF_Records, bi.size - OF_Records, bi.records);
			cr_assert_eq(record_iter_next(&it, &rv), 1);
			snprintf(want, sizeof(want), "v%lld-0", (long long)(off / 2));
			cr_assert(!memcmp(rv.value, want, strlen(want)), "value at %lld", (long long)off);
			off += bi.last_offset_delta + 1;
			at += bi.size;
		}
		plog_read_release(&rd);
	}
	cr_assert_eq(off, pl->next_offset);
}

Test(replica, a_crash_at_any_step_leaves_the_log_before_or_after_the_cut)
{
	/* -1: before the commit point; then after each step on disk (the
	 * steps of plog_replica.c, "truncate-to" saved to the closing of the
	 * directory) */
	for (int at = -1; at <= 13; at++) {
		char sub[32];
		int pfd[2], status;
		int64_t v[2];
		pid_t pid;
		struct plog_config cfg;
		struct plog *pl;

		snprintf(sub, sizeof(sub), "crash%d", at + 1);
		cr_assert_eq(pipe(pfd), 0);
		pid = fork();
		if (pid == 0) {
			close(pfd[0]);
			child_cut(sub, at, pfd[1]);
		}
		close(pfd[1]);
		cr_assert_eq(read(pfd[0], v, sizeof(v)), (ssize_t)sizeof(v));
		close(pfd[0]);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		/* steps past the last one let the child finish: exit 0 */
		cr_assert(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
			  "step %d: child status %d", at, status);
		small_cfg(&cfg);
		pl = open_sub(&st, sub, &cfg);
		if (at == -1)
			cr_assert_eq(pl->next_offset, v[1], "nothing reached the disk: before the cut");
		else
			cr_assert_eq(pl->next_offset, v[0], "step %d: after the cut (end %lld)", at,
				     (long long)pl->next_offset);
		cr_assert_eq(pl->recovery.damaged, 0, "step %d: a cut is not damage", at);
		cr_assert_eq(pl->recovery.truncate_redone, WIFSIGNALED(status) && at >= 2 && at < 11,
			     "step %d: the open finished the cut iff \"truncate-to\" was left", at);
		cr_assert(!file_exists(pl, PLOG_TRUNCATE_FILE));
		check_whole(pl);
		/* and it goes on, and a second open agrees */
		for (int i = 0; i < 20; i++) {
			int64_t base;
			uint32_t size = test_batch(bbuf, sizeof(bbuf), pl->next_offset / 2, 2, 300, 3, 5000 + i);

			while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
				store_poll(&st, 1);
		}
		store_drain(&st);
		v[1] = pl->next_offset;
		plog_close(pl);
		pl = open_sub(&st, sub, &cfg);
		cr_assert_eq(pl->next_offset, v[1]);
		check_whole(pl);
		plog_close(pl);
	}
}

/* The file-level view of a crash right after the commit point: a whole
 * log with "truncate-to" beside it (and a checkpoint above the cut) opens
 * cut, the checkpoint lowered, the later segments and the cut segment's
 * index gone. */
Test(replica, an_open_finishes_a_cut_left_by_a_crash)
{
	struct plog_config cfg;
	struct plog *pl;
	char path[4400];
	int fd, nseg;
	int64_t end;

	small_cfg(&cfg);
	pl = open_sub(&st, "log", &cfg);
	for (int i = 0; i < 300; i++) {
		int64_t base;
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, 300, 3, 1000 + i);

		while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
			store_poll(&st, 1);
	}
	store_drain(&st);
	end = pl->next_offset;
	nseg = plog_segment_count(pl);
	cr_assert_gt(nseg, 3);
	plog_close(pl);     /* checkpointed: every segment has its index */
	snprintf(path, sizeof(path), "%s/log/%s", dir, PLOG_TRUNCATE_FILE);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, PLOG_TRUNCATE_TAG "40\n", strlen(PLOG_TRUNCATE_TAG "40\n")),
		     (ssize_t)strlen(PLOG_TRUNCATE_TAG "40\n"));
	close(fd);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(pl->recovery.truncate_redone, 1);
	cr_assert_eq(pl->recovery.truncate_to, 40);
	cr_assert_eq(pl->next_offset, 40, "end %lld of %lld", (long long)pl->next_offset, (long long)end);
	cr_assert_leq(pl->checkpointed, 40);
	cr_assert_lt(plog_segment_count(pl), nseg);
	cr_assert_eq(pl->recovery.damaged, 0);
	cr_assert(!file_exists(pl, PLOG_TRUNCATE_FILE));
	check_whole(pl);
	plog_close(pl);

	/* an unreadable one refuses the open, changing nothing */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_eq(write(fd, "garbage\n", 8), 8);
	close(fd);
	snprintf(path, sizeof(path), "%s/log", dir);
	cr_assert_eq(plog_open(&st, path, &cfg, &pl), -EUCLEAN);
	cr_assert(strstr(st.problem, PLOG_TRUNCATE_FILE), "%s", st.problem);
}

/* ---- a restart of the whole log at the leader's log start -------------- */

/* The batches of a and b from `from` to their (equal) ends are the same
 * bytes, read through each log. */
static void same_from(struct plog *a, struct plog *b, int64_t from)
{
	int64_t off = from;

	cr_assert_eq(a->next_offset, b->next_offset);
	while (off < a->next_offset) {
		struct plog_read ra = { .offset = off, .max_offset = a->next_offset, .max_bytes = 1 << 19,
					.buf = rbuf, .buf_cap = RBUF_CAP / 2 };
		struct plog_read rb = { .offset = off, .max_offset = b->next_offset, .max_bytes = 1 << 19,
					.buf = rbuf + RBUF_CAP / 2, .buf_cap = RBUF_CAP / 2 };
		uint32_t n, at = 0;

		cr_assert_eq(plog_read_sync(a, &ra), 1);
		cr_assert_eq(plog_read_sync(b, &rb), 1);
		cr_assert_gt(ra.bytes, 0);
		cr_assert_gt(rb.bytes, 0, "nothing at %lld", (long long)off);
		n = ra.bytes < rb.bytes ? ra.bytes : rb.bytes;
		/* the whole batches both reads hold */
		while (at + BATCH_LOG_OVERHEAD <= n && batch_size(ra.data + at) <= n - at) {
			off = batch_last_offset(ra.data + at) + 1;
			at += batch_size(ra.data + at);
		}
		cr_assert_gt(at, 0);
		cr_assert(!memcmp(ra.data, rb.data, at), "the bytes before offset %lld differ", (long long)off);
		plog_read_release(&ra);
		plog_read_release(&rb);
	}
}

/* A follower that has the first 40 batches of its leader, whose log start
 * moved (DeleteRecords) past them: the follower's log is emptied and
 * started at the leader's log start; the leader's batches from there land
 * byte-identical, with their epochs; a reopen finds it so. */
Test(replica, start_at_the_leaders_log_start_then_follow)
{
	struct plog_config cfg;
	struct plog *l, *f;
	int64_t ls;
	int32_t e;
	int64_t end;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	f = open_sub(&st, "follower", &cfg);
	for (int i = 0; i < 300; i++) {
		if (i == 100)
			l->leader_epoch = 3;
		if (i == 250)
			l->leader_epoch = 5;
		lead(l, i, 200 + (i * 37) % 1500);
	}
	replicate(l, f, 0, boundary(l, 40), 64 * 1024);
	cr_assert_gt(plog_segment_count(f), 1);
	cr_assert_eq(plog_checkpoint_sync(f), 0);
	ls = boundary(l, 180);
	cr_assert_eq(plog_delete_records_sync(l, ls), 0);
	cr_assert_eq(l->log_start, ls);
	cr_assert_gt(ls, f->next_offset);

	cr_assert_eq(plog_start_at_sync(f, -1), -ERANGE, "refused: nothing changes");
	cr_assert_eq(plog_start_at_sync(f, ls), 0);
	cr_assert_eq(f->log_start, ls);
	cr_assert_eq(f->next_offset, ls);
	cr_assert_eq(f->durable_offset, ls);
	cr_assert_eq(f->high_watermark, ls);
	cr_assert_eq(plog_segment_count(f), 1);
	cr_assert_eq(f->seg_head->base_offset, ls);
	cr_assert_eq(f->epochs.c.n, 0, "the cache is emptied");
	cr_assert(!file_exists(f, "00000000000000000000.log"));
	cr_assert(!file_exists(f, "00000000000000000000.index"));
	cr_assert(!file_exists(f, PLOG_START_FILE));
	cr_assert(!file_exists(f, PLOG_CHECKPOINT_FILE));
	cr_assert(!file_exists(f, PLOG_NEXT_NAME));
	cr_assert(file_exists(f, f->seg_head->name));
	/* the leader's batches follow, epochs and all */
	replicate(l, f, ls, l->next_offset, 64 * 1024);
	same_from(l, f, ls);
	plog_epoch_end_offset(l, 3, &e, &end);
	{
		int32_t fe;
		int64_t fend;

		plog_epoch_end_offset(f, 3, &fe, &fend);
		cr_assert_eq(fe, e);
		cr_assert_eq(fend, end, "epoch 3 ends at %lld on the leader, %lld here", (long long)end,
			     (long long)fend);
	}
	cr_assert_eq(plog_epoch_for_offset(f, f->next_offset - 1), 5);
	plog_close(f);
	f = open_sub(&st, "follower", &cfg);
	cr_assert_eq(f->log_start, ls);
	cr_assert_eq(f->recovery.damaged, 0);
	cr_assert_eq(f->recovery.start_redone, 0);
	same_from(l, f, ls);
	cr_assert_eq(plog_epoch_for_offset(f, f->next_offset - 1), 5);
	plog_close(l);
	plog_close(f);
}

/* A follower whose log epoch was raised above its batches (the
 * metadata's epoch, set at the partition's open: dataplane/part_proxy.c)
 * takes the leader's batches at the epochs they carry: before the fix
 * each was assigned the raised epoch, so the follower named an epoch the
 * leader never had, and the leader's divergence answer cut them again at
 * every fetch (a power-cut fault run's ISR that never grew back). */
Test(replica, a_raised_epoch_is_not_given_to_the_leaders_batches)
{
	struct plog_config cfg;
	struct plog *l, *f;
	int32_t e;
	int64_t end;

	small_cfg(&cfg);
	l = open_sub(&st, "leader", &cfg);
	f = open_sub(&st, "follower", &cfg);
	cr_assert_eq(plog_set_leader_epoch(l, 0), 0);
	for (int i = 0; i < 10; i++)
		lead(l, i, 100);
	replicate(l, f, 0, boundary(l, 5), 64 * 1024);
	cr_assert_eq(plog_set_leader_epoch(f, 1), 0);
	replicate(l, f, boundary(l, 5), l->next_offset, 64 * 1024);
	cr_assert_eq(plog_epoch_for_offset(f, f->next_offset - 1), 0, "the leader's batches are epoch 0, not %d",
		     plog_epoch_for_offset(f, f->next_offset - 1));
	plog_epoch_end_offset(f, 0, &e, &end);
	cr_assert_eq(e, 0);
	cr_assert_eq(end, f->next_offset, "epoch 0 ends at the log end");
	/* a later epoch of the leader's still opens an entry here */
	cr_assert_eq(plog_set_leader_epoch(l, 3), 0);
	lead(l, 10, 100);
	replicate(l, f, boundary(l, 10), l->next_offset, 64 * 1024);
	cr_assert_eq(plog_epoch_for_offset(f, f->next_offset - 1), 3);
	cr_assert_eq(f->leader_epoch, 3);
	plog_close(l);
	plog_close(f);
}

/* An empty log started at an offset, closed before anything is appended,
 * opens there (its only segment is empty). */
Test(replica, an_empty_log_started_at_an_offset_reopens_there)
{
	struct plog_config cfg;
	struct plog *pl;

	small_cfg(&cfg);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(plog_start_at_sync(pl, 1234), 0);
	plog_close(pl);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(pl->log_start, 1234);
	cr_assert_eq(pl->next_offset, 1234);
	/* and at a lower offset (a leader whose log ends below this start),
	 * then at the same again (nothing to do) */
	cr_assert_eq(plog_start_at_sync(pl, 10), 0);
	cr_assert_eq(plog_start_at_sync(pl, 10), 0);
	cr_assert_eq(pl->next_offset, 10);
	plog_close(pl);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(pl->log_start, 10);
	cr_assert_eq(pl->next_offset, 10);
	plog_close(pl);
}

/* A log restarted at the base of one of its own segments (a name the new
 * segment takes once the old file is gone). */
Test(replica, start_at_the_base_of_an_old_segment)
{
	struct plog_config cfg;
	struct plog *pl;
	int64_t base;

	small_cfg(&cfg);
	pl = open_sub(&st, "log", &cfg);
	for (int i = 0; i < 100; i++) {
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, 300, 3, 1000 + i);

		while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
			store_poll(&st, 1);
	}
	store_drain(&st);
	cr_assert_gt(plog_segment_count(pl), 1);
	base = pl->seg_tail->base_offset;
	cr_assert_eq(plog_start_at_sync(pl, base), 0);
	cr_assert_eq(plog_segment_count(pl), 1);
	cr_assert_eq(pl->seg_head->end, 0);
	plog_close(pl);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(pl->log_start, base);
	cr_assert_eq(pl->next_offset, base);
	plog_close(pl);
}

/* In a child: a checkpointed log of 300 two-record batches, then a restart
 * at 10,000 that dies at step `at` (-1: right after plog_start_at
 * returned). */
static void child_start(const char *sub, int at, int pfd)
{
	struct store cst;
	struct plog_config cfg;
	struct plog *pl;
	int64_t v[2];
	int done = 0;
	struct plog_truncate t = { .offset = 10000, .done = count_done, .arg = &done, .on_step = die_at_step };

	if (store_init(&cst, NULL, 32u << 20))
		_exit(2);
	small_cfg(&cfg);
	pl = open_sub(&cst, sub, &cfg);
	for (int i = 0; i < 300; i++) {
		int64_t base;
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, 300, 3, 1000 + i);

		while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
			store_poll(&cst, 1);
	}
	store_drain(&cst);
	if (plog_checkpoint_sync(pl))
		_exit(2);
	v[0] = 10000;
	v[1] = pl->next_offset;
	if (write(pfd, v, sizeof(v)) != sizeof(v))
		_exit(3);
	kill_at = at;
	if (plog_start_at(pl, &t) != 0)
		_exit(4);
	if (at < 0)
		kill(getpid(), SIGKILL);
	while (!done)
		store_poll(&cst, 1);
	_exit(t.err ? 5 : 0);
}

Test(replica, a_crash_at_any_step_of_a_restart_leaves_the_log_before_or_at_the_new_start)
{
	/* -1: before the commit point; then after each step on disk (the
	 * restart's steps of plog_replica.c: 16 "start-at" saved ... 27 the
	 * directory closed) */
	for (int at = -1; at <= 27; at = at < 0 ? 16 : at + 1) {
		char sub[32];
		int pfd[2], status;
		int64_t v[2];
		pid_t pid;
		struct plog_config cfg;
		struct plog *pl;
		int after;

		snprintf(sub, sizeof(sub), "start%d", at + 1);
		cr_assert_eq(pipe(pfd), 0);
		pid = fork();
		if (pid == 0) {
			close(pfd[0]);
			child_start(sub, at, pfd[1]);
		}
		close(pfd[1]);
		cr_assert_eq(read(pfd[0], v, sizeof(v)), (ssize_t)sizeof(v));
		close(pfd[0]);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
			  "step %d: child status %d", at, status);
		small_cfg(&cfg);
		pl = open_sub(&st, sub, &cfg);
		after = at >= 0;
		if (!after) {
			cr_assert_eq(pl->next_offset, v[1], "nothing reached the disk: as before");
			cr_assert_eq(pl->log_start, 0);
			check_whole(pl);
		} else {
			cr_assert_eq(pl->log_start, v[0], "step %d: at the new start (%lld)", at,
				     (long long)pl->log_start);
			cr_assert_eq(pl->next_offset, v[0], "step %d: empty", at);
			cr_assert_eq(plog_segment_count(pl), 1);
			cr_assert_eq(pl->epochs.c.n, 0, "step %d: no epochs of the old log", at);
		}
		cr_assert_eq(pl->recovery.damaged, 0, "step %d", at);
		cr_assert_eq(pl->recovery.start_redone, WIFSIGNALED(status) && at >= 16 && at < 25,
			     "step %d: the open finished the restart iff \"start-at\" was left", at);
		cr_assert(!file_exists(pl, PLOG_START_FILE));
		cr_assert(!file_exists(pl, "00000000000000000000.log") || !after);
		/* it goes on, and a second open agrees */
		for (int i = 0; i < 20; i++) {
			int64_t base;
			uint32_t size = test_batch(bbuf, sizeof(bbuf), pl->next_offset / 2, 2, 300, 3, 5000 + i);

			while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
				store_poll(&st, 1);
		}
		store_drain(&st);
		v[1] = pl->next_offset;
		plog_close(pl);
		pl = open_sub(&st, sub, &cfg);
		cr_assert_eq(pl->next_offset, v[1]);
		cr_assert_eq(pl->log_start, after ? v[0] : 0);
		plog_close(pl);
	}
}

/* The file-level view: a whole log with "start-at" beside it opens empty
 * at that offset; an unreadable one refuses the open. */
Test(replica, an_open_finishes_a_restart_left_by_a_crash)
{
	struct plog_config cfg;
	struct plog *pl;
	char path[4400];
	int fd;

	small_cfg(&cfg);
	pl = open_sub(&st, "log", &cfg);
	for (int i = 0; i < 300; i++) {
		int64_t base;
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, 300, 3, 1000 + i);

		while (plog_append(pl, bbuf, size, &base) == -ENOBUFS)
			store_poll(&st, 1);
	}
	store_drain(&st);
	cr_assert_gt(plog_segment_count(pl), 3);
	plog_close(pl);
	snprintf(path, sizeof(path), "%s/log/%s", dir, PLOG_START_FILE);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, PLOG_START_TAG "5000\n", strlen(PLOG_START_TAG "5000\n")),
		     (ssize_t)strlen(PLOG_START_TAG "5000\n"));
	close(fd);
	pl = open_sub(&st, "log", &cfg);
	cr_assert_eq(pl->recovery.start_redone, 1);
	cr_assert_eq(pl->recovery.start_at, 5000);
	cr_assert_eq(pl->log_start, 5000);
	cr_assert_eq(pl->next_offset, 5000);
	cr_assert_eq(plog_segment_count(pl), 1);
	cr_assert(!file_exists(pl, PLOG_START_FILE));
	cr_assert(!file_exists(pl, PLOG_CHECKPOINT_FILE));
	plog_close(pl);

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_eq(write(fd, "garbage\n", 8), 8);
	close(fd);
	snprintf(path, sizeof(path), "%s/log", dir);
	cr_assert_eq(plog_open(&st, path, &cfg, &pl), -EUCLEAN);
	cr_assert(strstr(st.problem, PLOG_START_FILE), "%s", st.problem);
}
