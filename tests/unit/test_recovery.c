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
	sh("rm -f '%s'/*.index%s", pdir, "");
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
	cr_assert_eq(plog_open(&st, p1, &cfg, &pl), 0);
	uint64_t ck_end = pl->seg_tail->end;
	for (int i = 20; i < 40; i++) {
		uint32_t n = test_batch(b, sizeof(b), i, 3, 300, 2, 10);

		cr_assert_eq(plog_append(pl, b, n, &base), 0);
	}
	uint64_t end = pl->seg_tail->end;
	plog_close(pl);
	sh("cp '%s' '%s'", save, idx);           /* as if the process died: stale checkpoint */
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
	sh("rm -f '%s'/*.index%s", p1, "");
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
	sh("rm -f '%s'/*.index%s", p1, "");     /* as after a crash: no checkpoint */
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
