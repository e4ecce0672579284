/* tests/unit/test_recovery.c — crash recovery as a property.
 *
 * For many random cut points, bit flips and torn blocks in the last
 * segment, reopening yields exactly the batches that were complete and
 * valid before the damage: never a partial or corrupt batch, never a batch
 * after the damage, never fewer than the undamaged prefix. A real SIGKILL
 * of a writing process loses nothing reported durable.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "storage/plog.h"
#include "tests/unit/helpers.h"

#define NB 60
static uint8_t *orig[NB];     /* each batch as stored (offset stamped) */
static uint32_t osize[NB];
static uint64_t opos[NB];     /* file position in the single segment */
static uint8_t *rbuf;
static struct store st;
static char *dir;

static void setup(void)
{
	dir = test_tmpdir();
	cr_assert_eq(store_init(&st, NULL, 64u << 20), 0);
	cr_assert_eq(posix_memalign((void **)&rbuf, 4096, 4u << 20), 0);
}

static void teardown(void)
{
	for (int i = 0; i < NB; i++) {
		free(orig[i]);
		orig[i] = NULL;
	}
	store_fini(&st);
	if (!getenv("SLUICE_KEEP")) test_rmrf(dir); else fprintf(stderr, "kept %s\n", dir);
	free(dir);
	free(rbuf);
}

TestSuite(recovery, .init = setup, .fini = teardown, .timeout = 300);

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Write NB batches of varied sizes into <dir>/pristine; no checkpoint of
 * the active segment is left (as after a crash). */
static void make_pristine(const char *pdir, unsigned seed)
{
	struct plog_config cfg;
	struct plog *pl;
	static uint8_t b[1 << 20];
	uint64_t pos = 0;

	srand(seed);
	plog_config_defaults(&cfg);
	cr_assert_eq(plog_open(&st, pdir, &cfg, &pl), 0);
	for (int i = 0; i < NB; i++) {
		int64_t base;
		int n = 1 + rand() % 20, vlen = 10 + rand() % 3000;

		osize[i] = test_batch(b, sizeof(b), i, n, vlen, 5, 1000 + i);
		cr_assert_eq(plog_append(pl, b, osize[i], &base), 0);
		free(orig[i]);
		orig[i] = malloc(osize[i]);
		memcpy(orig[i], b, osize[i]);
		batch_set_base_offset(orig[i], base);
		batch_set_leader_epoch(orig[i], 0);
		opos[i] = pos;
		pos += osize[i];
		if (rand() % 4 == 0)
			store_poll(&st, 0);     /* writes of many sizes and alignments */
	}
	store_drain(&st);
	plog_close(pl);
	sh("rm -f '%s'/*.index '%s'/recovery-checkpoint", pdir, pdir);
}

/* Reopen `wdir` and check that it holds exactly batches [0, expect). */
static void verify(const char *wdir, int expect, const char *what)
{
	struct plog_config cfg;
	struct plog *pl;
	int64_t off = 0;
	int got = 0;

	plog_config_defaults(&cfg);
	cr_assert_eq(plog_open(&st, wdir, &cfg, &pl), 0, "%s: open", what);
	while (off < pl->high_watermark) {
		struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark,
					.max_bytes = 1 << 20, .buf = rbuf, .buf_cap = 4u << 20 };

		cr_assert_eq(plog_read_sync(pl, &rd), 1, "%s: read", what);
		cr_assert_gt(rd.bytes, 0);
		for (uint32_t at = 0; at < rd.bytes; got++) {
			uint32_t sz = batch_size(rd.data + at);

			cr_assert_lt(got, expect, "%s: batch %d should be gone", what, got);
			cr_assert_eq(sz, osize[got], "%s: batch %d size", what, got);
			cr_assert(!memcmp(rd.data + at, orig[got], sz), "%s: batch %d differs", what, got);
			at += sz;
			off = batch_last_offset(orig[got]) + 1;
		}
		plog_read_release(&rd);
	}
	cr_assert_eq(got, expect, "%s: %d batches survived, expected %d (cut reason %d at %llu)", what,
		     got, expect, pl->recovery.truncated_reason,
		     (unsigned long long)pl->recovery.truncated_at);
	/* the log takes appends after the cut and serves them, no phantom
	 * of the old bytes behind them */
	{
		static uint8_t b[65536];
		int64_t base;
		uint32_t n = test_batch(b, sizeof(b), 999, 3, 100, 1, 5);

		cr_assert_eq(plog_append(pl, b, n, &base), 0);
		cr_assert_eq(base, expect ? batch_last_offset(orig[expect - 1]) + 1 : 0);
		store_drain(&st);
	}
	plog_close(pl);
	plog_open(&st, wdir, &cfg, &pl);
	cr_assert_eq(pl->next_offset, (expect ? batch_last_offset(orig[expect - 1]) + 1 : 0) + 3,
		     "%s: after append and reopen", what);
	plog_close(pl);
}

/* The index of the first batch that overlaps [from, to). */
static int batch_at(uint64_t p)
{
	for (int i = 0; i < NB; i++)
		if (p < opos[i] + osize[i])
			return i;
	return NB;
}

static int outside_crc(uint64_t p)
{
	/* PartitionLeaderEpoch is outside the CRC by Kafka's design and has
	 * no redundancy: a flip there is undetectable by any reader. */
	int i = batch_at(p);

	return i < NB && p - opos[i] >= OF_PartitionLeaderEpoch && p - opos[i] < OF_Magic;
}

/* A naive reader for the negative control: it trusts BatchLength (and
 * stops only at a zero or impossible length) without checking the CRC.
 * Returns how many batches it would serve whose bytes differ from what
 * was appended. */
static int naive_scan_damaged(const char *path)
{
	static uint8_t f[4u << 20];
	FILE *fp = fopen(path, "rb");
	size_t len, pos = 0;
	int k = 0, damaged = 0;

	cr_assert(fp);
	len = fread(f, 1, sizeof(f), fp);
	fclose(fp);
	while (pos + BATCH_LOG_OVERHEAD <= len && k < NB) {
		int32_t bl = batch_length(f + pos);
		size_t size = (size_t)bl + BATCH_LOG_OVERHEAD;

		if (bl <= 0 || size < BATCH_HEADER_SIZE || pos + size > len)
			break;
		if (size != osize[k] || memcmp(f + pos, orig[k], size))
			damaged++;
		pos += size;
		k++;
	}
	return damaged;
}

Test(recovery, random_damage_in_last_segment)
{
	char pristine[4300], work[4300], seg[4400];
	int trials = 0, removed = 0, flips = 0, naive_served = 0;

	snprintf(pristine, sizeof(pristine), "%s/pristine", dir);
	snprintf(work, sizeof(work), "%s/work", dir);
	snprintf(seg, sizeof(seg), "%s/%020d.log", work, 0);
	make_pristine(pristine, 42);
	uint64_t end = opos[NB - 1] + osize[NB - 1];

	for (int t = 0; t < 240; t++) {
		char what[128];
		int kind = t % 4, expect;
		uint64_t p = (uint64_t)rand() % (end + 100);
		int fd;

		sh("rm -rf '%s'%s", work, "");
		sh("cp -a '%s' '%s'", pristine, work);
		fd = open(seg, O_RDWR);
		cr_assert_geq(fd, 0);
		if (kind == 0) {
			/* a crash cut: everything from p on is zeros */
			struct stat sb;

			fstat(fd, &sb);
			cr_assert_eq(ftruncate(fd, (off_t)p), 0);
			cr_assert_eq(ftruncate(fd, sb.st_size), 0);
			expect = batch_at(p);
			/* a batch that ends exactly at p is complete */
			snprintf(what, sizeof(what), "cut at %llu", (unsigned long long)p);
		} else if (kind == 1) {
			uint8_t c;

			if (outside_crc(p))
				p -= 8;
			cr_assert_eq(pread(fd, &c, 1, (off_t)p), 1);
			c ^= (uint8_t)(1u << (rand() % 8));
			cr_assert_eq(pwrite(fd, &c, 1, (off_t)p), 1);
			expect = p < end ? batch_at(p) : NB;
			snprintf(what, sizeof(what), "bit flip at %llu", (unsigned long long)p);
			/* the negative control: without the CRC this flip would be
			 * served (the log under test must cut it: verify below) */
			flips++;
			naive_served += naive_scan_damaged(seg) > 0;
		} else if (kind == 2) {
			/* a torn write: one 4 KiB block lost, later ones present */
			static uint8_t z[4096];
			uint64_t blk = p & ~4095ull;

			cr_assert_eq(pwrite(fd, z, 4096, (off_t)blk), 4096);
			expect = blk < end ? batch_at(blk) : NB;
			snprintf(what, sizeof(what), "zeroed block at %llu", (unsigned long long)blk);
		} else {
			/* garbage after a cut (a stale or half-written block) */
			uint8_t g[512];

			for (size_t i = 0; i < sizeof(g); i++)
				g[i] = (uint8_t)rand();
			cr_assert_eq(pwrite(fd, g, sizeof(g), (off_t)p), (ssize_t)sizeof(g));
			expect = p < end ? batch_at(p) : NB;
			snprintf(what, sizeof(what), "garbage at %llu", (unsigned long long)p);
		}
		close(fd);
		verify(work, expect, what);
		trials++;
		removed += expect < NB;
	}
	cr_assert_eq(trials, 240);
	/* the property is not vacuous: most trials really cost batches */
	cr_assert_geq(removed, 100, "only %d of %d trials removed a batch", removed, trials);
	/* and the CRC is what protects: a reader trusting BatchLength alone
	 * serves a damaged batch after some of the flips */
	cr_assert_geq(naive_served, 1, "no flip of %d fooled a CRC-less scan", flips);
	cr_log_info("damage trials: %d of %d removed batches; %d of %d flips would be served without the CRC",
		    removed, trials, naive_served, flips);
}

/* Damage after an index checkpoint: the checkpointed prefix stays, the
 * rest is validated from the checkpoint on. */
Test(recovery, damage_after_checkpoint)
{
	struct plog_config cfg;
	struct plog *pl;
	char p1[4300], idx[4400], save[4400], seg[4400];
	static uint8_t b[1 << 16];
	int64_t base;

	snprintf(p1, sizeof(p1), "%s/ck", dir);
	snprintf(idx, sizeof(idx), "%s/%020d.index", p1, 0);
	snprintf(save, sizeof(save), "%s/saved.index", dir);
	snprintf(seg, sizeof(seg), "%s/%020d.log", p1, 0);
	plog_config_defaults(&cfg);
	cfg.index_interval = 512;
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	for (int i = 0; i < 20; i++) {
		uint32_t n = test_batch(b, sizeof(b), i, 3, 300, 2, 10);

		cr_assert_eq(plog_append(pl, b, n, &base), 0);
	}
	plog_close(pl);                          /* checkpoint at 60 */
	sh("cp '%s' '%s'", idx, save);
	sh("cp '%s'/recovery-checkpoint '%s'.ck", p1, save);
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	uint64_t ck_end = pl->seg_tail->end;
	for (int i = 20; i < 40; i++) {
		uint32_t n = test_batch(b, sizeof(b), i, 3, 300, 2, 10);

		cr_assert_eq(plog_append(pl, b, n, &base), 0);
	}
	uint64_t end = pl->seg_tail->end;
	plog_close(pl);
	sh("cp '%s' '%s'", save, idx);           /* as if the process died: stale checkpoint */
	sh("cp '%s.ck' '%s'/recovery-checkpoint", save, p1);
	int fd = open(seg, O_RDWR);
	uint64_t p = ck_end + (end - ck_end) / 2;
	uint8_t c = 0x55;
	cr_assert_eq(pwrite(fd, &c, 1, (off_t)p), 1);
	close(fd);
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	cr_assert_geq(pl->next_offset, 60, "the checkpointed prefix survives");
	cr_assert_lt(pl->next_offset, 120, "the damaged batch and everything after it are cut");
	cr_assert_neq(pl->recovery.truncated_reason, 0, "the damage was found");
	plog_close(pl);
}

/* A real crash: a child appends (durability=write) and reports each
 * durable offset through a pipe; the parent SIGKILLs it at a random
 * moment. Reopening keeps every offset reported durable, intact. Half the
 * rounds append big batches fast, so several writes are in flight. */
static int64_t child_durable;
static int child_pipe;
static void child_cb(struct plog *pl, int64_t off, int err, void *arg)
{
	(void)pl; (void)arg;
	if (!err && off > child_durable) {
		child_durable = off;
		if (write(child_pipe, &off, sizeof(off)) != sizeof(off))
			_exit(3);
	}
}

Test(recovery, sigkill_loses_nothing_durable)
{
	for (int round = 0; round < 8; round++) {
		char sub[4300];
		int pfd[2];
		pid_t pid;
		/* odd rounds: a hot partition (~32 KiB batches, 512 KiB per
		 * flush) that keeps several writes in flight */
		int hot = round % 2;
		uint64_t seg_bytes = hot ? 4u << 20 : 256 * 1024;

		snprintf(sub, sizeof(sub), "%s/kill%d", dir, round);
		cr_assert_eq(pipe(pfd), 0);
		pid = fork();
		if (pid == 0) {
			struct store cst;
			struct plog_config cfg;
			struct plog *pl;
			static uint8_t b[1 << 16];

			close(pfd[0]);
			child_pipe = pfd[1];
			if (store_init(&cst, NULL, 32u << 20))
				_exit(2);
			plog_config_defaults(&cfg);
			cfg.segment_bytes = seg_bytes;   /* rolls during the run */
			if (plog_open(&cst, sub, &cfg, &pl))
				_exit(2);
			plog_set_durable_cb(pl, child_cb, NULL);
			for (int64_t i = 0;; i++) {
				int64_t base;
				uint32_t n = hot ? test_batch(b, sizeof(b), i, 2, 15000 + (int)(i % 3000), 3, i)
						 : test_batch(b, sizeof(b), i, 2, 100 + (int)(i % 700), 3, i);

				while (plog_append(pl, b, n, &base) == -ENOBUFS)
					store_poll(&cst, 1);
				if (i % (hot ? 16 : 3) == 0)
					store_poll(&cst, 0);
			}
		}
		close(pfd[1]);
		int64_t durable = 0, v;
		int reads = 0, target = 50 + rand() % 400;

		while (reads < target && read(pfd[0], &v, sizeof(v)) == sizeof(v)) {
			durable = v;
			reads++;
		}
		kill(pid, SIGKILL);
		while (read(pfd[0], &v, sizeof(v)) == sizeof(v))
			durable = v;     /* reports sent before the kill count too */
		waitpid(pid, NULL, 0);
		close(pfd[0]);
		cr_assert_gt(durable, 0);

		struct plog_config cfg;
		struct plog *pl;

		plog_config_defaults(&cfg);
		cfg.segment_bytes = seg_bytes;
		cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
		cr_assert_geq(pl->next_offset, durable, "round %d: durable %lld, recovered %lld", round,
			      (long long)durable, (long long)pl->next_offset);
		/* every batch is whole and valid, offsets contiguous from 0 */
		int64_t off = 0;
		while (off < pl->high_watermark) {
			struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark,
						.max_bytes = 1 << 20, .buf = rbuf, .buf_cap = 4u << 20 };

			cr_assert_eq(plog_read_sync(pl, &rd), 1);
			cr_assert_gt(rd.bytes, 0, "round %d: no data at %lld of %lld (%d segments)", round,
				     (long long)off, (long long)pl->high_watermark, plog_segment_count(pl));
			for (uint32_t at = 0; at < rd.bytes;) {
				struct batch_info bi;

				cr_assert_eq(batch_validate(rd.data + at, rd.bytes - at, 0, 0, &bi), 0);
				cr_assert_eq(batch_base_offset(rd.data + at), off);
				off += bi.last_offset_delta + 1;
				at += bi.size;
			}
			plog_read_release(&rd);
		}
		cr_assert_eq(off, pl->next_offset);
		plog_close(pl);
	}
}

/* The one-line recovery report names what was kept, where the log was cut
 * and why. */
Test(recovery, describe_reports_the_cut)
{
	struct plog_config cfg;
	struct plog *pl;
	char p1[4300], seg[4400], line[512], want[256], small[16];
	static uint8_t b[1 << 16];
	uint64_t pos10 = 0;
	int64_t base;
	int n;

	snprintf(p1, sizeof(p1), "%s/desc", dir);
	snprintf(seg, sizeof(seg), "%s/%020d.log", p1, 0);
	plog_config_defaults(&cfg);
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	n = plog_recovery_describe(pl, line, sizeof(line));
	cr_assert_eq(n, (int)strlen(line));
	cr_assert(strstr(line, "0 batches, 0 bytes scanned; clean end at position 0 of "
			       "00000000000000000000.log"), "%s", line);
	for (int i = 0; i < 20; i++) {
		uint32_t sz = test_batch(b, sizeof(b), i, 3, 300, 2, 10);

		if (i == 10)
			pos10 = pl->seg_tail->end;
		cr_assert_eq(plog_append(pl, b, sz, &base), 0);
	}
	plog_close(pl);
	sh("rm -f '%s'/*.index '%s'/recovery-checkpoint", p1, p1);
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	n = plog_recovery_describe(pl, line, sizeof(line));
	cr_assert(strstr(line, "1 segment, 20 batches,"), "%s", line);
	cr_assert(strstr(line, "clean end at position"), "%s", line);
	cr_assert(strstr(line, "0 segments dropped"), "%s", line);
	plog_close(pl);

	/* a flipped byte in batch 10's records: cut there, CRC named */
	int fd = open(seg, O_RDWR);
	uint8_t c;

	cr_assert_eq(pread(fd, &c, 1, (off_t)(pos10 + OF_Records + 5)), 1);
	c ^= 0x10;
	cr_assert_eq(pwrite(fd, &c, 1, (off_t)(pos10 + OF_Records + 5)), 1);
	close(fd);
	sh("rm -f '%s'/*.index '%s'/recovery-checkpoint", p1, p1);     /* as after a crash: no checkpoint */
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	cr_assert_eq(pl->next_offset, 30);
	n = plog_recovery_describe(pl, line, sizeof(line));
	cr_assert_eq(n, (int)strlen(line), "%s", line);
	cr_assert(strstr(line, "10 batches,"), "%s", line);
	snprintf(want, sizeof(want), "cut at position %llu of 00000000000000000000.log: %s;",
		 (unsigned long long)pos10, batch_strerror(BATCH_ERR_CRC));
	cr_assert(strstr(line, want), "%s\nwanted: %s", line, want);
	cr_assert(strstr(line, "bytes after the end removed"), "%s", line);
	cr_assert(!strchr(line, '\n'), "one line");
	/* snprintf contract: truncated and terminated, full length returned */
	cr_assert_eq(plog_recovery_describe(pl, small, sizeof(small)), n);
	cr_assert_eq(strlen(small), sizeof(small) - 1);
	cr_assert(!strncmp(small, line, sizeof(small) - 1));
	cr_assert_eq(plog_recovery_describe(pl, NULL, 0), n);
	plog_close(pl);
}

/* Regression: recovery once handed the segment it had just opened to the
 * code path for the prepared ".next.log", which renamed a leftover
 * ".next.log" over the real segment (and, without one, closed the fd the
 * scan then used — another thread's file once the number was reused). A
 * crash while the next segment is prepared leaves exactly that file. */
Test(recovery, leftover_prepared_segment_never_replaces_data)
{
	struct plog_config cfg;
	struct plog *pl;
	char sub[4300], next[4400];
	static uint8_t b[1 << 16];
	int64_t base;
	int fd;

	snprintf(sub, sizeof(sub), "%s/nx", dir);
	plog_config_defaults(&cfg);
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), i, 2, 100, 3, 1), &base), 0);
	store_drain(&st);
	plog_close(pl);
	snprintf(next, sizeof(next), "%s/.next.log", sub);
	fd = open(next, O_RDWR | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fallocate(fd, 0, 0, 65536), 0);
	close(fd);
	/* descriptors opened and closed around the open shift fd numbers */
	int spare = open("/dev/null", O_RDONLY);
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	close(spare);
	cr_assert_eq(pl->next_offset, 20, "all 10 batches survive a leftover .next.log");
	plog_close(pl);
	/* and they are still on disk under their name for the next start */
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	cr_assert_eq(pl->next_offset, 20, "the segment file was not replaced");
	{
		struct plog_read rd = { .offset = 0, .max_offset = 20, .max_bytes = 1 << 20,
					.buf = rbuf, .buf_cap = 4u << 20 };
		int n = 0;

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		for (uint32_t at = 0; at < rd.bytes; at += batch_size(rd.data + at), n++)
			cr_assert_eq(batch_validate(rd.data + at, rd.bytes - at, 0, 0, NULL), 0,
				     "batch %d on disk is valid", n);
		cr_assert_eq(n, 10, "10 batches read back from disk, got %d", n);
		plog_read_release(&rd);
	}
	plog_close(pl);
}

/* ---- checkpoints, recovery points, damage in the middle (issue 17) ---- */

#define MS_SEGS 8
static int64_t ms_seg_base[MS_SEGS + 2];

/* A log of ~MS_SEGS small segments (16 KiB), every write completed before
 * the next append (so each segment rolls after its last write landed: the
 * path that once never got an index). Returns the log end. */
static int64_t make_multiseg(const char *pdir, struct plog **keep_open)
{
	struct plog_config cfg;
	struct plog *pl;
	static uint8_t b[1 << 16];
	int64_t base = 0;
	int segs = 0;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16384;
	cfg.index_interval = 512;
	cr_assert_eq(plog_open(&st, pdir, &cfg, &pl), 0);
	for (int i = 0; segs < MS_SEGS || pl->seg_tail->end < 4000; i++) {
		uint32_t n = test_batch(b, sizeof(b), i, 3, 300, 2, 1000 + i);
		struct segment *before = pl->seg_tail;

		cr_assert_eq(plog_append(pl, b, n, &base), 0);
		if (pl->seg_tail != before || i == 0)
			ms_seg_base[segs++] = pl->seg_tail->base_offset;
		store_drain(&st);
	}
	cr_assert_eq(plog_segment_count(pl), MS_SEGS);
	int64_t end = pl->next_offset;

	if (keep_open)
		*keep_open = pl;
	else
		plog_close(pl);
	return end;
}

static void ms_open(const char *pdir, struct plog **pl)
{
	struct plog_config cfg;
	int rc;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16384;
	cfg.index_interval = 512;
	rc = plog_open(&st, pdir, &cfg, pl);
	cr_assert_eq(rc, 0, "plog_open %s: %s (%s)", pdir, strerror(-rc), st.problem);
}

static int file_exists(const char *pdir, const char *name)
{
	char p[4400];

	snprintf(p, sizeof(p), "%s/%s", pdir, name);
	return access(p, F_OK) == 0;
}

/* Every batch readable from log_start to the end, in order; returns the
 * number of offsets read (gaps skipped). */
static int64_t read_all(struct plog *pl, int64_t *first_gap)
{
	int64_t off = pl->log_start, got = 0;

	*first_gap = -1;
	while (off < pl->high_watermark) {
		struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark,
					.max_bytes = 1 << 20, .buf = rbuf, .buf_cap = 4u << 20 };

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		cr_assert_gt(rd.bytes, 0, "no data at %lld of %lld", (long long)off,
			     (long long)pl->high_watermark);
		for (uint32_t at = 0; at < rd.bytes;) {
			struct batch_info bi;

			cr_assert_eq(batch_validate(rd.data + at, rd.bytes - at, 0, 0, &bi), 0);
			if (batch_base_offset(rd.data + at) != off && *first_gap < 0)
				*first_gap = off;
			cr_assert_geq(batch_base_offset(rd.data + at), off);
			off = batch_base_offset(rd.data + at) + bi.last_offset_delta + 1;
			got += bi.last_offset_delta + 1;
			at += bi.size;
		}
		plog_read_release(&rd);
	}
	return got;
}

/* (a) A clean close leaves every sealed segment its index and the log its
 * checkpoint; the next open scans nothing. Also when the caller marked the
 * log closing (-ESHUTDOWN) first, as dataplane/part.c does. */
Test(recovery, clean_close_checkpoints_every_segment)
{
	for (int closing = 0; closing < 2; closing++) {
		char p1[4300], name[64];
		struct plog *pl;
		int64_t end = make_multiseg((snprintf(p1, sizeof(p1), "%s/cc%d", dir, closing), p1), &pl);

		if (closing)
			pl->err = -ESHUTDOWN;
		plog_close(pl);
		for (int i = 0; i < MS_SEGS; i++) {
			snprintf(name, sizeof(name), "%020lld.index", (long long)ms_seg_base[i]);
			cr_assert(file_exists(p1, name), "closing=%d: %s has no index", closing, name);
		}
		cr_assert(file_exists(p1, "recovery-checkpoint"), "closing=%d: no checkpoint", closing);
		ms_open(p1, &pl);
		cr_assert_eq(pl->next_offset, end);
		cr_assert_eq(pl->recovery.bytes_scanned, 0,
			     "closing=%d: a clean stop re-scanned %llu bytes", closing,
			     (unsigned long long)pl->recovery.bytes_scanned);
		cr_assert_eq(pl->recovery.segments_trusted, MS_SEGS);
		plog_close(pl);
	}
}

/* (b) After a crash only what follows the recovery point is scanned: every
 * segment sealed (and written) before the crash has its index, so only
 * the active segment is read. The crash is a copy of the directory taken
 * while the log is open, all writes landed. */
Test(recovery, crash_scans_only_after_the_recovery_point)
{
	char p1[4300], p2[4300];
	struct plog *pl, *pl2;

	snprintf(p1, sizeof(p1), "%s/rp", dir);
	snprintf(p2, sizeof(p2), "%s/rp-crash", dir);
	int64_t end = make_multiseg(p1, &pl);
	uint64_t active = pl->seg_tail->end;

	sh("cp -a '%s' '%s'", p1, p2);
	plog_close(pl);
	ms_open(p2, &pl2);
	cr_assert_eq(pl2->next_offset, end);
	cr_assert_leq(pl2->recovery.bytes_scanned, active,
		      "scanned %llu bytes after a crash, the active segment holds %llu",
		      (unsigned long long)pl2->recovery.bytes_scanned, (unsigned long long)active);
	cr_assert_geq(pl2->recovery.segments_trusted, MS_SEGS - 1);
	/* an explicit checkpoint moves the recovery point to the end */
	{
		char p3[4400];

		cr_assert_eq(plog_checkpoint_sync(pl2), 0);
		snprintf(p3, sizeof(p3), "%s/rp-crash2", dir);
		sh("cp -a '%s' '%s'", p2, p3);
		plog_close(pl2);
		ms_open(p3, &pl2);
		cr_assert_eq(pl2->recovery.bytes_scanned, 0, "a checkpoint at the end: nothing to scan");
		cr_assert_eq(pl2->next_offset, end);
		plog_close(pl2);
	}
}

/* (c) A damaged run of bytes inside the 5th of 8 segments (its index gone
 * too, so recovery reads it): the intact later segments stay and are
 * served, the damaged range is moved aside to <segment>.damaged and
 * reported, and the next append never reuses an acknowledged offset. */
Test(recovery, damage_in_a_middle_segment_keeps_later_segments)
{
	char p1[4300], seg[4400], name[64], line[1024];
	struct plog *pl;
	int64_t end = make_multiseg((snprintf(p1, sizeof(p1), "%s/mid", dir), p1), NULL);
	int64_t gap;
	int fd;
	uint8_t junk[16];

	snprintf(name, sizeof(name), "%020lld.log", (long long)ms_seg_base[4]);
	snprintf(seg, sizeof(seg), "%s/%s", p1, name);
	{
		char cmd[4600];

		snprintf(cmd, sizeof(cmd), "rm -f '%s/%020lld.index'", p1, (long long)ms_seg_base[4]);
		cr_assert_eq(system(cmd), 0);
	}
	fd = open(seg, O_RDWR);
	cr_assert_geq(fd, 0);
	memset(junk, 0xa5, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), 6000), 16);
	close(fd);

	ms_open(p1, &pl);
	plog_recovery_describe(pl, line, sizeof(line));
	cr_log_info("%s", line);
	cr_assert_eq(plog_segment_count(pl), MS_SEGS, "later segments kept: %s", line);
	cr_assert_eq(pl->next_offset, end, "the log end stays: %s", line);
	cr_assert_eq(pl->recovery.damaged, 1, "%s", line);
	cr_assert(strstr(line, name) && strstr(line, "damaged"), "names the file: %s", line);
	snprintf(name, sizeof(name), "%020lld.log.damaged", (long long)ms_seg_base[4]);
	cr_assert(file_exists(p1, name), "the damaged range moved aside to %s", name);
	int64_t got = read_all(pl, &gap);

	cr_assert_gt(gap, ms_seg_base[4], "the gap starts inside segment 5");
	cr_assert_lt(gap, ms_seg_base[5]);
	cr_assert_geq(got, end - (ms_seg_base[5] - ms_seg_base[4]), "only segment 5's tail is lost");
	cr_assert_eq(got, end - (pl->recovery.lost_to - pl->recovery.lost_from));
	{
		static uint8_t b[65536];
		int64_t base;

		cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), 1, 3, 100, 1, 5), &base), 0);
		cr_assert_eq(base, end, "the next append gets the old end, not a reused offset");
		store_drain(&st);
	}
	plog_close(pl);
	/* and the next start is clean: nothing more cut, nothing scanned twice */
	ms_open(p1, &pl);
	cr_assert_eq(pl->next_offset, end + 3);
	cr_assert_eq(pl->recovery.damaged, 0);
	cr_assert_eq(pl->recovery.bytes_scanned, 0);
	plog_close(pl);
}

/* (c) Damage in the last segment below the durable high watermark of the
 * checkpoint is not a torn tail: acknowledged offsets are never handed out
 * again. */
Test(recovery, damage_below_the_checkpoint_never_reuses_offsets)
{
	char p1[4300], seg[4400], cmd[4600];
	struct plog *pl;
	int64_t end = make_multiseg((snprintf(p1, sizeof(p1), "%s/last", dir), p1), NULL);
	uint8_t junk[16];
	int fd;

	snprintf(seg, sizeof(seg), "%s/%020lld.log", p1, (long long)ms_seg_base[MS_SEGS - 1]);
	snprintf(cmd, sizeof(cmd), "rm -f '%s/%020lld.index'", p1, (long long)ms_seg_base[MS_SEGS - 1]);
	cr_assert_eq(system(cmd), 0);
	fd = open(seg, O_RDWR);
	memset(junk, 0x5a, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), 1000), 16);
	close(fd);
	ms_open(p1, &pl);
	cr_assert_geq(pl->next_offset, end, "log end %lld fell below the acknowledged %lld",
		      (long long)pl->next_offset, (long long)end);
	cr_assert_eq(pl->recovery.damaged, 1);
	{
		static uint8_t b[65536];
		int64_t base;

		cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), 1, 3, 100, 1, 5), &base), 0);
		cr_assert_geq(base, end);
		store_drain(&st);
	}
	plog_close(pl);
	ms_open(p1, &pl);
	cr_assert_eq(pl->recovery.damaged, 0);
	plog_close(pl);
}

/* (d) A deleted middle segment file: the open refuses, naming the file and
 * what to do, instead of dropping every later segment. */
Test(recovery, missing_middle_segment_refuses_to_open)
{
	char p1[4300], cmd[4600];
	struct plog *pl = NULL;
	struct plog_config cfg;
	int rc;

	make_multiseg((snprintf(p1, sizeof(p1), "%s/miss", dir), p1), NULL);
	snprintf(cmd, sizeof(cmd), "rm -f '%s/%020lld.log'", p1, (long long)ms_seg_base[3]);
	cr_assert_eq(system(cmd), 0);
	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16384;
	rc = plog_open(&st, p1, &cfg, &pl);
	cr_assert_eq(rc, -EUCLEAN, "open of a log with a missing segment: %d", rc);
	char want[64];

	snprintf(want, sizeof(want), "%020lld.log", (long long)ms_seg_base[3]);
	cr_assert(strstr(st.problem, want), "names the missing file: %s", st.problem);
	cr_assert(strstr(st.problem, "Restore the file"), "says what to do: %s", st.problem);
	/* nothing was deleted */
	snprintf(want, sizeof(want), "%020lld.log", (long long)ms_seg_base[MS_SEGS - 1]);
	cr_assert(file_exists(p1, want));
}

/* The torn-tail rule holds: a crash mid-append (no checkpoint covers the
 * cut bytes) is cut silently-but-reported, and not called damage. */
Test(recovery, torn_tail_is_not_damage)
{
	char p1[4300], p2[4300];
	struct plog *pl, *pl2;
	static uint8_t b[1 << 16];
	int64_t base;

	snprintf(p1, sizeof(p1), "%s/torn", dir);
	snprintf(p2, sizeof(p2), "%s/torn-crash", dir);
	int64_t end = make_multiseg(p1, &pl);
	uint64_t at = pl->seg_tail->end;

	cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), 1, 3, 300, 1, 5), &base), 0);
	store_drain(&st);
	sh("cp -a '%s' '%s'", p1, p2);
	plog_close(pl);
	{
		char seg[4400];
		int fd;

		snprintf(seg, sizeof(seg), "%s/%020lld.log", p2, (long long)ms_seg_base[MS_SEGS - 1]);
		fd = open(seg, O_RDWR);
		cr_assert_eq(ftruncate(fd, (off_t)(at + 100)), 0);   /* the last batch half written */
		close(fd);
	}
	ms_open(p2, &pl2);
	cr_assert_eq(pl2->next_offset, end);
	cr_assert_eq(pl2->recovery.damaged, 0);
	cr_assert_neq(pl2->recovery.truncated_reason, 0);
	plog_close(pl2);
}

/* The recovery point of an active segment still being written: the
 * checkpoint covers the written prefix only (up to a batch boundary), and
 * a crash then reads nothing before it and keeps nothing unwritten. */
Test(recovery, checkpoint_of_a_partly_written_active_segment)
{
	char p1[4300], p2[4300];
	struct plog_config cfg;
	struct plog *pl, *pl2;
	static uint8_t b[1 << 16];
	int64_t base, written;

	snprintf(p1, sizeof(p1), "%s/part", dir);
	snprintf(p2, sizeof(p2), "%s/part-crash", dir);
	plog_config_defaults(&cfg);
	cfg.index_interval = 512;
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	for (int i = 0; i < 30; i++)
		cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), i, 3, 300, 2, 10), &base), 0);
	store_drain(&st);
	written = pl->next_offset;
	/* more appended, not yet written */
	for (int i = 30; i < 40; i++)
		cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), i, 3, 300, 2, 10), &base), 0);
	cr_assert_lt(pl->seg_tail->flushed, pl->seg_tail->end);
	cr_assert_eq(plog_checkpoint_sync(pl), 0);
	sh("cp -a '%s' '%s'", p1, p2);
	plog_close(pl);
	plog_config_defaults(&cfg);
	cfg.index_interval = 512;
	cr_assert_eq(plog_open(&st, p2, &cfg, &pl2), 0);
	cr_assert_eq(pl2->next_offset, written, "the written prefix, nothing else");
	cr_assert_eq(pl2->recovery.bytes_scanned, 0);
	cr_assert_eq(pl2->recovery.segments_trusted, 1);
	cr_assert_eq(pl2->recovery.damaged, 0);
	plog_close(pl2);
}
