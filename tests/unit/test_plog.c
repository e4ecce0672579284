/* tests/unit/test_plog.c — the partition log on a real disk with a real
 * io_uring: round trips across segment rolls, reads from the tail and from
 * disk, index lookups, durability modes, retention, idle partitions. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "storage/plog.h"
#include "storage/plog_internal.h"
#include "tests/unit/helpers.h"

static uint8_t bbuf[2 << 20];
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

static struct plog *open_log(const struct plog_config *cfg)
{
	struct plog *pl;
	int rc = plog_open(&st, dir, cfg, &pl);

	cr_assert_eq(rc, 0, "plog_open: %s", strerror(-rc));
	return pl;
}

static struct plog *open_log_at(const struct plog_config *cfg, int i)
{
	char sub[4300];
	struct plog *pl;
	int rc;

	snprintf(sub, sizeof(sub), "%s/p%d", dir, i);
	rc = plog_open(&st, sub, cfg, &pl);
	cr_assert_eq(rc, 0, "plog_open: %s", strerror(-rc));
	return pl;
}

/* Append batch `seq` of n records; returns its base offset. */
static int64_t append(struct plog *pl, int64_t seq, int n, int vlen, int64_t ts)
{
	int64_t base;
	uint32_t size = test_batch(bbuf, sizeof(bbuf), seq, n, vlen, 7, ts);
	int rc;

	while ((rc = plog_append(pl, bbuf, size, &base)) == -ENOBUFS)
		store_poll(&st, 1);
	cr_assert_eq(rc, 0, "append: %s", strerror(-rc));
	return base;
}

/* Read the whole log from `from` and check every batch: offsets contiguous,
 * values "v<seq>-<i>" where seq is the batch's index. Returns the next
 * offset reached. */
static int64_t check_all(struct plog *pl, int64_t from, int per_batch)
{
	int64_t off = from;

	while (off < pl->high_watermark) {
		struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark,
					.max_bytes = 256 * 1024, .buf = rbuf, .buf_cap = RBUF_CAP };
		int rc = plog_read_sync(pl, &rd);

		cr_assert_eq(rc, 1, "read at %lld: %d", (long long)off, rc);
		cr_assert_gt(rd.bytes, 0, "no data at %lld (hw %lld)", (long long)off,
			     (long long)pl->high_watermark);
		for (uint32_t at = 0; at < rd.bytes;) {
			const uint8_t *b = rd.data + at;
			struct batch_info bi;
			struct record_iter it;
			struct record_view rv;
			char want[64];

			cr_assert_eq(batch_validate(b, rd.bytes - at, 0, 0, &bi), 0, "batch at %lld", (long long)off);
			if (batch_last_offset(b) < off) {
				at += bi.size;
				continue;
			}
			/* the batch holding `off`: starts at it, or before it only
			 * when the read began mid-batch */
			cr_assert(batch_base_offset(b) == off ||
				  (off == from && batch_base_offset(b) < off),
				  "expected offset %lld got %lld", (long long)off,
				  (long long)batch_base_offset(b));
			record_iter_init(&it, b + OF_Records, bi.size - OF_Records, bi.records);
			cr_assert_eq(record_iter_next(&it, &rv), 1);
			snprintf(want, sizeof(want), "v%lld-0", (long long)(batch_base_offset(b) / per_batch));
			cr_assert(rv.value_len >= (int)strlen(want) && !memcmp(rv.value, want, strlen(want)),
				  "value at %lld", (long long)off);
			off = batch_last_offset(b) + 1;
			at += bi.size;
		}
		plog_read_release(&rd);
	}
	return off;
}

TestSuite(plog, .init = setup, .fini = teardown, .timeout = 120);

Test(plog, round_trip_across_rolls_and_reopen)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 64 * 1024;
	pl = open_log(&cfg);
	for (int i = 0; i < 500; i++)
		cr_assert_eq(append(pl, i, 4, 200, 1000 + i), (int64_t)i * 4);
	store_drain(&st);
	cr_assert_eq(pl->next_offset, 2000);
	cr_assert_eq(pl->high_watermark, 2000);
	cr_assert_gt(plog_segment_count(pl), 3, "segments: %d", plog_segment_count(pl));
	cr_assert_eq(check_all(pl, 0, 4), 2000);
	cr_assert_eq(check_all(pl, 1234, 4), 2000);   /* mid-batch start */
	plog_close(pl);

	pl = open_log(&cfg);
	cr_assert_eq(pl->next_offset, 2000);
	cr_assert_eq(pl->recovery.truncated_reason, 0);
	cr_assert_eq(check_all(pl, 0, 4), 2000);
	/* appends continue after a reopen, across the partial last block */
	for (int i = 500; i < 600; i++)
		cr_assert_eq(append(pl, i, 4, 200, 1000 + i), (int64_t)i * 4);
	store_drain(&st);
	cr_assert_eq(check_all(pl, 0, 4), 2400);
	plog_close(pl);
}

/* A roll while the next segment's fallocate is still in flight takes the
 * prepared file at once: appends never wait for the filesystem (it was
 * -ENOBUFS, which the broker answered KAFKA_STORAGE_ERROR, once small
 * segments rolled faster than their successors were prepared). No
 * store_poll between the appends: the preparation cannot have completed. */
Test(plog, roll_does_not_wait_for_the_next_segments_fallocate)
{
	struct plog_config cfg;
	struct plog *pl;
	int64_t base;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16384;
	pl = open_log(&cfg);
	for (int i = 0; i < 40; i++) {
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 4, 1000, 7, 1000 + i);
		int rc = plog_append(pl, bbuf, size, &base);

		cr_assert_eq(rc, 0, "append %d (segments %d): %s", i, plog_segment_count(pl), strerror(-rc));
		cr_assert_eq(base, (int64_t)i * 4);
	}
	cr_assert_gt(plog_segment_count(pl), 5, "segments: %d", plog_segment_count(pl));
	store_drain(&st);
	cr_assert_eq(check_all(pl, 0, 4), 160);
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->next_offset, 160, "everything recovered after a reopen");
	cr_assert_eq(check_all(pl, 0, 4), 160);
	plog_close(pl);
}

Test(plog, reads_from_disk_when_tail_evicted)
{
	struct plog_config cfg;
	struct plog *pl;

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, 256 * 1024), 0);   /* tiny tail budget */
	plog_config_defaults(&cfg);
	cfg.segment_bytes = 1 << 20;
	pl = open_log(&cfg);
	for (int i = 0; i < 2000; i++)
		append(pl, i, 2, 300, 5000 + i);
	store_drain(&st);
	cr_assert_gt(st.tail.evictions, 0);
	/* evicted chunks are reused: the memory allocated stays within the
	 * budget's worth of chunks however many were evicted */
	cr_assert_leq(st.tail.allocations, 256 * 1024 / (1 << TAIL_CHUNK_MIN_SHIFT),
		      "%llu chunks allocated for %llu evictions", (unsigned long long)st.tail.allocations,
		      (unsigned long long)st.tail.evictions);
	uint64_t reads = st.stats.reads;
	cr_assert_eq(check_all(pl, 0, 2), 4000);
	cr_assert_gt(st.stats.reads, reads, "expected O_DIRECT disk reads");
	plog_close(pl);
}

/* Append batch `seq` (one record of vlen bytes) giving the store a bounded
 * number of loop turns to free memory: returns 0 or the last -errno (the
 * append helper above would wait forever on a pool that never frees). */
static int append_bounded(struct plog *pl, int64_t seq, int vlen)
{
	int64_t base;
	uint32_t size = test_batch(bbuf, sizeof(bbuf), seq, 1, vlen, 0, 1000 + seq);
	int rc, turns = 0;

	while ((rc = plog_append(pl, bbuf, size, &base)) == -ENOBUFS && turns++ < 200)
		store_poll(&st, 1);
	if (!rc)
		cr_assert_eq(base, seq);
	return rc;
}

/* Regression (found by sluice-bench produce, 2026-11-29): every partition
 * kept its last tail chunk forever, and a burst of large batches grows that
 * chunk up to a quarter of the budget, so a few idle partitions held the
 * whole pool (used == budget, nothing on the FIFO) and no partition could
 * append again: -ENOBUFS on every produce, for good. Written and quiet, a
 * partition's last chunk must be evictable; a new partition still appends,
 * an evicted one appends again (its partial block read back from the
 * file), and everything reads back, from the tail or the disk. */
Test(plog, idle_partitions_do_not_keep_the_tail_budget)
{
	enum { NPART = 8, NBATCH = 4, VLEN = 600000 };
	const size_t budget = 4u << 20;
	struct plog_config cfg;
	static struct plog *pls[NPART + 1];

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, budget), 0);
	plog_config_defaults(&cfg);
	for (int i = 0; i <= NPART; i++) {
		char sub[4300];

		snprintf(sub, sizeof(sub), "%s/p%d", dir, i);
		cr_assert_eq(plog_open(&st, sub, &cfg, &pls[i]), 0);
	}
	/* batches of ~600 KB: each takes a chunk of 1 MiB (the most one
	 * partition may have, a quarter of the budget), so the last chunks of
	 * four idle partitions are the whole budget */
	for (int i = 0; i < NPART; i++) {
		for (int j = 0; j < NBATCH; j++) {
			int rc = append_bounded(pls[i], j, VLEN);

			cr_assert_eq(rc, 0, "partition %d batch %d: %s (tail used %zu of %zu, %s evictable)", i, j,
				     strerror(-rc), st.tail.used, budget, st.tail.fifo_head ? "some" : "nothing");
		}
		store_drain(&st);
		cr_assert_leq(st.tail.used + st.tail.cached, budget);
	}
	cr_assert_gt(st.tail.evictions, 0);
	/* a new partition takes writes */
	cr_assert_eq(append_bounded(pls[NPART], 0, VLEN), 0);
	/* the first partition's tail was evicted long ago: it appends again
	 * after its partial last block, read back from its file */
	cr_assert_null(pls[0]->chunk_head, "partition 0 still holds tail memory");
	for (int j = NBATCH; j < NBATCH + 3; j++)
		cr_assert_eq(append_bounded(pls[0], j, VLEN), 0);
	cr_assert_gt(st.tail.reloads, 0);
	store_drain(&st);
	cr_assert_leq(st.tail.used + st.tail.cached, budget);
	cr_assert_eq(pls[0]->high_watermark, NBATCH + 3);
	for (int i = 0; i < NPART; i++)
		cr_assert_eq(check_all(pls[i], 0, 1), i ? NBATCH : NBATCH + 3, "partition %d", i);
	cr_assert_eq(check_all(pls[NPART], 0, 1), 1);
	/* the files themselves are whole: dense across the reloaded block */
	plog_close(pls[0]);
	pls[0] = open_log_at(&cfg, 0);
	cr_assert_eq(pls[0]->recovery.truncated_reason, 0);
	cr_assert_eq(pls[0]->next_offset, NBATCH + 3);
	cr_assert_eq(check_all(pls[0], 0, 1), NBATCH + 3);
	for (int i = 0; i <= NPART; i++)
		plog_close(pls[i]);
}

Test(plog, big_batch_larger_than_first_read)
{
	struct plog_config cfg;
	struct plog *pl;

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, 8u << 20), 0);
	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	append(pl, 0, 1, 100, 1);
	append(pl, 1, 1, 900 * 1024, 2);     /* ~900 KiB record */
	for (int i = 2; i < 10; i++)
		append(pl, i, 1, 100, 3);
	store_drain(&st);
	struct plog_read rd = { .offset = 1, .max_offset = pl->high_watermark, .max_bytes = 1000,
				.buf = rbuf, .buf_cap = RBUF_CAP };
	cr_assert_eq(plog_read_sync(pl, &rd), 1);
	cr_assert_eq(batch_base_offset(rd.data), 1);
	cr_assert_gt(rd.bytes, 900 * 1024, "the first batch is returned whole");
	plog_read_release(&rd);
	plog_close(pl);
}

Test(plog, read_limits)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	for (int i = 0; i < 10; i++)
		append(pl, i, 5, 10, 1);
	store_drain(&st);
	struct plog_read rd = { .offset = 0, .max_offset = 20, .max_bytes = 1 << 20,
				.buf = rbuf, .buf_cap = RBUF_CAP };
	cr_assert_eq(plog_read_sync(pl, &rd), 1);
	/* only whole batches below max_offset */
	uint32_t n = 0;
	for (uint32_t at = 0; at < rd.bytes; at += batch_size(rd.data + at), n++)
		cr_assert_lt(batch_last_offset(rd.data + at), 20);
	cr_assert_eq(n, 4);
	plog_read_release(&rd);
	rd = (struct plog_read){ .offset = 51, .max_offset = 100, .max_bytes = 100, .buf = rbuf, .buf_cap = RBUF_CAP };
	cr_assert_eq(plog_read(pl, &rd), -ERANGE);
	rd = (struct plog_read){ .offset = 50, .max_offset = 100, .max_bytes = 100, .buf = rbuf, .buf_cap = RBUF_CAP };
	cr_assert_eq(plog_read(pl, &rd), 1);
	cr_assert_eq(rd.bytes, 0);
	plog_close(pl);
}

Test(plog, index_lookup_by_offset_and_time)
{
	struct plog_config cfg;
	struct plog *pl;
	int64_t off, ts;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	pl = open_log(&cfg);
	/* batch i: 3 records with timestamps 10000 + 10*i + {0,1,2} */
	for (int i = 0; i < 400; i++)
		append(pl, i, 3, 100, 10000 + 10 * i);
	store_drain(&st);
	cr_assert_gt(plog_segment_count(pl), 5);
	for (int i = 0; i < 400; i += 37) {
		cr_assert_eq(plog_offset_for_time(pl, 10000 + 10 * i + 1, &off, &ts), 0);
		cr_assert_eq(off, i * 3 + 1, "ts lookup batch %d: %lld", i, (long long)off);
		cr_assert_eq(ts, 10000 + 10 * i + 1);
		/* a timestamp between batches gives the next batch's first record */
		cr_assert_eq(plog_offset_for_time(pl, 10000 + 10 * i + 5, &off, &ts), 0);
		cr_assert_eq(off, (i + 1) * 3);
	}
	cr_assert_eq(plog_offset_for_time(pl, 0, &off, &ts), 0);
	cr_assert_eq(off, 0);
	cr_assert_eq(plog_offset_for_time(pl, 99999999, &off, &ts), -ENOENT);
	/* the offset index finds every batch start from any offset */
	for (int64_t o = 0; o < 1200; o += 97) {
		struct plog_read rd = { .offset = o, .max_offset = 1200, .max_bytes = 1,
					.buf = rbuf, .buf_cap = RBUF_CAP };
		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		cr_assert_eq(batch_base_offset(rd.data), o - o % 3);
		plog_read_release(&rd);
	}
	plog_close(pl);
	/* the same after reopening from index files */
	pl = open_log(&cfg);
	cr_assert_eq(plog_offset_for_time(pl, 10000 + 10 * 200 + 2, &off, &ts), 0);
	cr_assert_eq(off, 602);
	plog_close(pl);
}

/* ListOffsets by timestamp through the asynchronous walk (plog_find_time):
 * the right offset whether the batches are in the tail or only on disk,
 * across segments, before the first record, after the last, and from disk
 * alone after a restart (the tail is empty then). */
struct time_seen {
	int calls;
};

static void time_done(struct plog_time *q)
{
	((struct time_seen *)q->arg)->calls++;
}

/* Run one lookup to its end; *went_async says whether a read hit the disk. */
static int find_time(struct plog *pl, int64_t ts, int64_t *off, int64_t *rts, int *went_async)
{
	struct time_seen seen = { 0 };
	struct plog_time q = { .ts = ts, .buf = rbuf, .buf_cap = RBUF_CAP, .done = time_done, .arg = &seen };
	int rc = plog_find_time(pl, &q);

	cr_assert(rc == 0 || rc == 1, "plog_find_time: %d", rc);
	if (rc == 0)
		while (!seen.calls)
			store_poll(&st, 1);
	cr_assert_eq(seen.calls, rc == 0 ? 1 : 0, "done called %d times", seen.calls);
	if (went_async)
		*went_async |= rc == 0;
	*off = q.offset;
	*rts = q.timestamp;
	return q.err;
}

Test(plog, offset_for_time_async)
{
	struct plog_config cfg;
	struct plog *pl;
	int64_t off, ts;
	int disk = 0;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	cfg.durability = PLOG_DUR_WRITE;
	pl = open_log(&cfg);
	/* batch i: 3 records with timestamps 10000 + 10*i + {0,1,2} */
	for (int i = 0; i < 300; i++)
		append(pl, i, 3, 100, 10000 + 10 * i);
	/* some still only in the tail */
	for (int i = 0; i < 300; i += 23) {
		cr_assert_eq(find_time(pl, 10000 + 10 * i + 2, &off, &ts, NULL), 0);
		cr_assert_eq(off, i * 3 + 2);
		cr_assert_eq(ts, 10000 + 10 * i + 2);
	}
	store_drain(&st);
	cr_assert_gt(plog_segment_count(pl), 5);
	for (int i = 0; i < 300; i += 29) {
		cr_assert_eq(find_time(pl, 10000 + 10 * i + 1, &off, &ts, NULL), 0);
		cr_assert_eq(off, i * 3 + 1, "batch %d: %lld", i, (long long)off);
		cr_assert_eq(find_time(pl, 10000 + 10 * i + 5, &off, &ts, NULL), 0);
		cr_assert_eq(off, (i + 1) * 3, "between batches %d: %lld", i, (long long)off);
		cr_assert_eq(ts, 10000 + 10 * (i + 1));
	}
	/* before the first record: the first; after the last: none */
	cr_assert_eq(find_time(pl, 0, &off, &ts, NULL), 0);
	cr_assert_eq(off, 0);
	cr_assert_eq(ts, 10000);
	cr_assert_eq(find_time(pl, 10000 + 10 * 299 + 2, &off, &ts, NULL), 0);
	cr_assert_eq(off, 899);
	cr_assert_eq(find_time(pl, 10000 + 10 * 299 + 3, &off, &ts, NULL), -ENOENT);
	cr_assert_eq(off, -1);
	plog_close(pl);

	/* after a restart everything is on disk: the walk reads through the ring */
	pl = open_log(&cfg);
	for (int i = 0; i < 300; i += 31) {
		cr_assert_eq(find_time(pl, 10000 + 10 * i, &off, &ts, &disk), 0);
		cr_assert_eq(off, i * 3, "after restart, batch %d: %lld", i, (long long)off);
		cr_assert_eq(ts, 10000 + 10 * i);
	}
	cr_assert(disk, "no lookup went to the disk");
	cr_assert_eq(find_time(pl, -5, &off, &ts, NULL), 0);
	cr_assert_eq(off, 0);
	cr_assert_eq(find_time(pl, 99999999, &off, &ts, NULL), -ENOENT);
	/* the synchronous wrapper agrees */
	cr_assert_eq(plog_offset_for_time(pl, 10000 + 10 * 150 + 1, &off, &ts), 0);
	cr_assert_eq(off, 451);
	plog_close(pl);
}

static int64_t durable_seen;
static void on_durable(struct plog *pl, int64_t off, int err, void *arg)
{
	(void)pl; (void)arg;
	if (!err)
		durable_seen = off;
}

Test(plog, durability_modes)
{
	int modes[] = { PLOG_DUR_WRITE, PLOG_DUR_SYNC, PLOG_DUR_MEMORY };

	for (int m = 0; m < 3; m++) {
		struct plog_config cfg;
		struct plog *pl;
		char sub[4300];

		snprintf(sub, sizeof(sub), "%s/m%d", dir, m);
		plog_config_defaults(&cfg);
		cfg.durability = modes[m];
		cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
		plog_set_durable_cb(pl, on_durable, NULL);
		durable_seen = 0;
		append(pl, 0, 10, 100, 1);
		if (modes[m] == PLOG_DUR_MEMORY) {
			cr_assert_eq(pl->durable_offset, 10, "memory mode acks at once");
		} else {
			cr_assert_eq(pl->durable_offset, 0, "not durable before the write");
			cr_assert_eq(pl->high_watermark, 0, "consumers do not see it yet");
		}
		store_drain(&st);
		cr_assert_eq(pl->durable_offset, 10);
		cr_assert_eq(pl->high_watermark, 10);
		if (modes[m] != PLOG_DUR_MEMORY)
			cr_assert_eq(durable_seen, 10);
		plog_close(pl);
	}
}

/* log.durability=memory acknowledges at the append, so its partial last
 * block waits PLOG_MEMORY_HOLD_NS for more records instead of a write a
 * record (a VM exit each on a virtual disk); whole blocks go as they
 * fill, and a flush of everything (a wait, a clean stop) writes it at
 * once. A write-mode log beside it writes at once: the control. */
Test(plog, memory_durability_holds_the_partial_block)
{
	struct plog_config cfg;
	struct plog *mem, *wr;
	char sub[4300];
	uint64_t writes, t0 = 5000000000ull;

	plog_config_defaults(&cfg);
	cfg.durability = PLOG_DUR_MEMORY;
	snprintf(sub, sizeof(sub), "%s/mem", dir);
	cr_assert_eq(plog_open(&st, sub, &cfg, &mem), 0);
	cfg.durability = PLOG_DUR_WRITE;
	snprintf(sub, sizeof(sub), "%s/wr", dir);
	cr_assert_eq(plog_open(&st, sub, &cfg, &wr), 0);
	store_drain(&st);

	st.now_ns = t0;
	writes = st.stats.writes;
	append(mem, 0, 1, 100, 1);
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes, "memory: the partial block was written at once");
	cr_assert_eq(mem->high_watermark, 1, "memory: served at the append");
	cr_assert_eq(store_held_until(&st), t0 + PLOG_MEMORY_HOLD_NS, "the loop wakes when it is due");
	append(mem, 1, 1, 100, 1);
	st.now_ns = t0 + PLOG_MEMORY_HOLD_NS - 1;
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes, "memory: written before its time");

	append(wr, 0, 1, 100, 1);
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes + 1, "write: not written at once");
	store_drain(&st);
	cr_assert_eq(wr->durable_offset, 1);
	cr_assert_eq(st.stats.writes, writes + 2, "draining wrote the held block (%llu writes)",
		     (unsigned long long)(st.stats.writes - writes));
	cr_assert_eq(mem->written_offset, 2, "the held records were written by the drain");
	cr_assert_eq(store_held_until(&st), 0);

	/* held again, then due */
	writes = st.stats.writes;
	st.now_ns = t0 + 10 * PLOG_MEMORY_HOLD_NS;
	append(mem, 2, 1, 100, 1);
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes);
	st.now_ns += PLOG_MEMORY_HOLD_NS;
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes + 1, "memory: not written once due");
	while (st.inflight)
		store_reap(&st, 1);
	cr_assert_eq(mem->written_offset, 3);

	/* whole blocks wait for PLOG_MEMORY_WRITE_BYTES of them, then go
	 * without the partial one after them, which waits */
	writes = st.stats.writes;
	st.now_ns += PLOG_MEMORY_HOLD_NS;
	append(mem, 3, 100, 100, 1);       /* ~10 KiB: whole blocks, not enough */
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes, "memory: 10 KiB written before its time");
	append(mem, 4, 600, 1000, 1);      /* ~1.2 MB with it: enough */
	append(mem, 5, 600, 1000, 1);
	store_flush(&st);
	cr_assert_gt(st.stats.writes, writes, "memory: 1 MiB of whole blocks not written at once");
	while (st.inflight)
		store_reap(&st, 1);
	cr_assert_lt(mem->written_offset, 1303, "the partial block after them went too");
	writes = st.stats.writes;
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes, "memory: the partial block not held");
	st.now_ns += PLOG_MEMORY_HOLD_NS;
	store_flush(&st);
	cr_assert_eq(st.stats.writes, writes + 1, "memory: the partial block not written once due");
	while (st.inflight)
		store_reap(&st, 1);
	cr_assert_eq(mem->written_offset, 1303);
	append(mem, 1303, 1, 100, 1);
	plog_close(mem);   /* writes what it holds */
	plog_close(wr);
	cr_assert_eq(store_held_until(&st), 0, "a closed log stays held");
	cfg.durability = PLOG_DUR_MEMORY;
	snprintf(sub, sizeof(sub), "%s/mem", dir);
	cr_assert_eq(plog_open(&st, sub, &cfg, &mem), 0);
	cr_assert_eq(mem->next_offset, 1304, "the held record did not reach the disk at the close");
	plog_close(mem);
}

Test(plog, group_commit_one_submission_for_many_partitions)
{
	struct plog_config cfg;
	struct plog *pls[50];

	plog_config_defaults(&cfg);
	for (int i = 0; i < 50; i++) {
		char sub[4300];

		snprintf(sub, sizeof(sub), "%s/p%d", dir, i);
		cr_assert_eq(plog_open(&st, sub, &cfg, &pls[i]), 0);
	}
	store_drain(&st);
	uint64_t flushes = st.stats.flushes, writes = st.stats.writes;
	for (int i = 0; i < 50; i++)
		append(pls[i], 0, 2, 50, 1);
	cr_assert_eq(store_flush(&st), 50);
	cr_assert_eq(st.stats.flushes, flushes + 1, "one submission");
	cr_assert_eq(st.stats.writes, writes + 50);
	store_drain(&st);
	for (int i = 0; i < 50; i++) {
		cr_assert_eq(pls[i]->high_watermark, 2);
		plog_close(pls[i]);
	}
}

/* A write that rewrites the partial block an earlier one left and goes on
 * past it is split at that block's end (on ext4 a direct write across a
 * written and a preallocated, unwritten extent goes to an io_uring worker
 * thread instead of inline: plog_queue_write). The two halves retire in
 * order and the log reads back whole, before and after a reopen; a write
 * that starts on a block boundary, or stays in its block, is not split. */
static const struct plog_write *inflight_write(const struct plog *pl, unsigned k)
{
	return &pl->wr[(pl->wr_head + k) % PLOG_MAX_WRITES];
}

Test(plog, a_write_past_the_partial_block_it_rewrites_is_split_at_its_end)
{
	struct plog_config cfg;
	struct plog *pl;
	uint64_t writes, splits;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	store_drain(&st);
	writes = st.stats.writes;
	splits = st.stats.split_writes;
	append(pl, 0, 2, 50, 1);                 /* a partial first block */
	cr_assert_eq(store_flush(&st), 1);
	store_drain(&st);
	cr_assert_eq(pl->high_watermark, 2);
	cr_assert_eq(st.stats.writes, writes + 1);
	cr_assert_eq(st.stats.split_writes, splits, "a write from a block boundary is whole");
	append(pl, 1, 2, 60, 2);                 /* still within the first block */
	cr_assert_eq(store_flush(&st), 1);
	store_drain(&st);
	cr_assert_eq(st.stats.writes, writes + 2);
	cr_assert_eq(st.stats.split_writes, splits, "a write within its block is whole");
	append(pl, 2, 2, 6000, 3);               /* rewrites block 0 and goes on into block 1..3 */
	cr_assert_eq(store_flush(&st), 2, "the partial block, then the rest from its end");
	cr_assert_eq(st.stats.split_writes, splits + 1);
	cr_assert_eq(pl->inflight, 2);
	cr_assert_eq(inflight_write(pl, 0)->pos, 0);
	cr_assert_eq(inflight_write(pl, 0)->bytes, 4096);
	cr_assert_eq(inflight_write(pl, 1)->pos, 4096);
	cr_assert_eq(inflight_write(pl, 1)->pos + inflight_write(pl, 1)->bytes, (pl->seg_tail->end + 4095) & ~4095ull);
	store_drain(&st);
	cr_assert_eq(st.stats.writes, writes + 4);
	cr_assert_eq(pl->durable_offset, 6);
	cr_assert_eq(pl->high_watermark, 6);
	cr_assert_eq(check_all(pl, 0, 2), 6);
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->next_offset, 6);
	cr_assert_eq(check_all(pl, 0, 2), 6);
	plog_close(pl);
}

Test(plog, retention_by_time_and_size)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 32 * 1024;
	cfg.retention_ms = 1000;
	pl = open_log(&cfg);
	for (int i = 0; i < 300; i++)
		append(pl, i, 2, 200, i < 150 ? 1000 : 100000);
	store_drain(&st);
	int before = plog_segment_count(pl);
	int del = plog_retain(pl, 50000);      /* old ones (ts 1000..) expired */
	cr_assert_gt(del, 0);
	cr_assert_eq(plog_segment_count(pl), before - del);
	cr_assert_gt(pl->log_start, 0);
	cr_assert_leq(pl->log_start, 300);
	cr_assert_eq(pl->seg_head->base_offset, pl->log_start);
	/* nothing of the new data was deleted */
	cr_assert_eq(check_all(pl, pl->log_start, 2), 600);
	struct plog_read rd = { .offset = 0, .max_offset = 600, .max_bytes = 100, .buf = rbuf, .buf_cap = RBUF_CAP };
	cr_assert_eq(plog_read(pl, &rd), -ERANGE, "deleted offsets are out of range");

	/* size: keep at most ~64 KiB */
	pl->cfg.retention_ms = -1;
	pl->cfg.retention_bytes = 64 * 1024;
	plog_retain(pl, 50000);
	cr_assert_leq(plog_size(pl), 64 * 1024 + 32 * 1024);
	cr_assert_eq(check_all(pl, pl->log_start, 2), 600);
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->log_start, pl->seg_head->base_offset);
	cr_assert_gt(pl->log_start, 0);
	plog_close(pl);
}

Test(plog, idle_partitions_cost_little)
{
	struct plog_config cfg;
	static struct plog *pls[2000];
	struct stat sb;
	uint64_t blocks = 0;

	plog_config_defaults(&cfg);
	for (int i = 0; i < 2000; i++) {
		char sub[4300];

		snprintf(sub, sizeof(sub), "%s/p%d", dir, i);
		cr_assert_eq(plog_open(&st, sub, &cfg, &pls[i]), 0);
	}
	store_drain(&st);            /* the first extents are in place */
	for (int i = 0; i < 2000; i++)
		append(pls[i], 0, 1, 100, 1);
	store_drain(&st);
	for (int i = 0; i < 2000; i++) {
		char p[4400];

		snprintf(p, sizeof(p), "%s/p%d/%020d.log", dir, i, 0);
		cr_assert_eq(stat(p, &sb), 0);
		blocks += (uint64_t)sb.st_blocks * 512;
	}
	/* 64 KiB preallocated each (not 1 GiB; and a record written does not
	 * ask for a second extent), 16 KiB of tail memory each */
	cr_assert_leq(blocks, 2000ull * 64 * 1024, "disk reserved: %llu", (unsigned long long)blocks);
	cr_assert_leq(st.tail.used, 2000ull * 16 * 1024, "tail memory: %zu", st.tail.used);
	for (int i = 0; i < 2000; i++)
		plog_close(pls[i]);
}

/* Several writes in flight for one hot partition. The durable offsets the
 * callback reports only grow, and whenever one is reported, the batch just
 * below it is already whole and valid in its segment file (read back
 * without the log, through a plain buffered fd). */
#define BURST_MAX 2048
static int64_t burst_base[BURST_MAX], burst_seg[BURST_MAX];
static uint64_t burst_pos[BURST_MAX];
static uint32_t burst_size[BURST_MAX];
static int burst_n, burst_calls, burst_checked, burst_indexed;
static int64_t burst_durable;
static const char *burst_dir;

static void on_burst_durable(struct plog *pl, int64_t off, int err, void *arg)
{
	static uint8_t b[1 << 20];
	char path[4400];
	int i, fd;

	(void)arg;
	cr_assert_eq(err, 0);
	cr_assert_gt(off, burst_durable, "durable offsets only grow: %lld after %lld",
		     (long long)off, (long long)burst_durable);
	cr_assert_leq(off, pl->next_offset);
	burst_durable = off;
	burst_calls++;
	/* a sealed segment is acknowledged only once its index is written
	 * (after its data's fdatasync): a crash then reads only what follows */
	for (const struct segment *s = pl->seg_head; s && s != pl->seg_tail; s = s->next) {
		if (s->next_offset > off)
			break;
		snprintf(path, sizeof(path), "%s/%020lld.index", burst_dir, (long long)s->base_offset);
		cr_assert_eq(access(path, F_OK), 0, "offset %lld acknowledged before the index of %s", (long long)off,
			     s->name);
		burst_indexed++;
	}
	/* the last batch wholly below the durable offset */
	for (i = burst_n - 1; i >= 0 && burst_base[i] + 10 > off; i--)
		;
	if (i < 0)
		return;
	snprintf(path, sizeof(path), "%s/%020lld.log", burst_dir, (long long)burst_seg[i]);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_leq(burst_size[i], sizeof(b));
	cr_assert_eq(pread(fd, b, burst_size[i], (off_t)burst_pos[i]), (ssize_t)burst_size[i]);
	cr_assert_eq(batch_validate(b, burst_size[i], 0, 0, &(struct batch_info){ 0 }), 0,
		     "batch at %lld reported durable is not on disk", (long long)burst_base[i]);
	cr_assert_eq(batch_base_offset(b), burst_base[i]);
	close(fd);
	burst_checked++;
}

static void burst_run(int durability, int batches)
{
	struct plog_config cfg;
	struct plog *pl;
	char sub[4300];

	snprintf(sub, sizeof(sub), "%s/burst%d", dir, durability);
	plog_config_defaults(&cfg);
	cfg.durability = durability;
	cfg.segment_bytes = 16u << 20;          /* rolls while writes are in flight */
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	plog_set_durable_cb(pl, on_burst_durable, NULL);
	burst_dir = sub;
	burst_n = burst_calls = burst_checked = burst_indexed = 0;
	burst_durable = 0;
	st.stats.max_inflight_writes = 0;
	cr_assert_leq(batches, BURST_MAX);
	for (int i = 0; i < batches; i++) {
		int64_t base = append(pl, i, 10, 6000 + i % 777, 1000 + i);

		burst_base[burst_n] = base;
		burst_seg[burst_n] = pl->seg_tail->base_offset;
		burst_size[burst_n] = batch_size(bbuf);
		burst_pos[burst_n] = pl->seg_tail->end - batch_size(bbuf);
		burst_n++;
		if (i % 64 == 63)
			store_poll(&st, 0);
	}
	store_drain(&st);
	cr_assert_gt(pl->inflight_max, 1, "writes in flight at once: %d", pl->inflight_max);
	cr_assert_leq(pl->inflight_max, PLOG_MAX_WRITES);
	cr_assert_gt(st.stats.max_inflight_writes, 1);
	cr_assert_gt(plog_segment_count(pl), 1);
	cr_assert_eq(pl->durable_offset, pl->next_offset);
	cr_assert_eq(pl->high_watermark, pl->next_offset);
	cr_assert_eq(burst_durable, pl->next_offset, "the last report covers everything");
	cr_assert_gt(burst_checked, 3, "reports checked against the disk: %d", burst_checked);
	cr_assert_gt(burst_indexed, 0, "sealed segments checked for their index");
	cr_assert_eq(check_all(pl, 0, 10), (int64_t)batches * 10);
	plog_close(pl);
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	cr_assert_eq(pl->next_offset, (int64_t)batches * 10);
	cr_assert_eq(check_all(pl, 0, 10), (int64_t)batches * 10);
	plog_close(pl);
}

Test(plog, several_writes_in_flight_per_partition)
{
	burst_run(PLOG_DUR_WRITE, 1200);   /* ~80 MB in 64 KiB batches */
}

Test(plog, several_writes_in_flight_sync)
{
	burst_run(PLOG_DUR_SYNC, 500);
}

/* A batch larger than the shard's whole tail memory can never be appended:
 * -EMSGSIZE (MESSAGE_TOO_LARGE on the wire), refused at once, not -ENOBUFS
 * (REQUEST_TIMED_OUT, which clients retry for ever); one that fits is
 * appended in the same pool. */
Test(plog, batch_larger_than_the_tail_budget_is_too_large)
{
	const size_t budget = 1u << 20;
	struct plog_config cfg;
	struct plog *pl;
	int64_t base;
	uint32_t size;

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, budget), 0);
	plog_config_defaults(&cfg);
	pl = open_log_at(&cfg, 0);
	size = test_batch(bbuf, sizeof(bbuf), 0, 1, (int)budget, 0, 1000);
	cr_assert_eq(plog_append(pl, bbuf, size, &base), -EMSGSIZE);
	cr_assert_eq(append_bounded(pl, 0, (int)budget - 8192), 0);
	store_drain(&st);
	cr_assert_eq(check_all(pl, 0, 1), 1);
	plog_close(pl);
}

/* ---- operations in flight when the log goes away ---------------------- */

struct read_seen {
	int calls;
	int err;
	uint32_t bytes;
};

static void read_seen_done(struct plog_read *rd)
{
	struct read_seen *s = rd->arg;

	s->calls++;
	s->err = rd->err;
	s->bytes = rd->bytes;
}

/* 100 batches, closed and opened again: the tail then holds only the
 * partial last block, so a read from offset 0 goes to the disk. */
static struct plog *open_log_on_disk(struct plog_config *cfg)
{
	struct plog *pl;

	plog_config_defaults(cfg);
	cfg->segment_bytes = 64 * 1024;
	pl = open_log(cfg);
	for (int i = 0; i < 100; i++)
		append(pl, i, 2, 300, 1000 + i);
	store_drain(&st);
	plog_close(pl);
	return open_log(cfg);
}

/* Regression: a Fetch's disk read still in flight when its partition is
 * deleted (plog_close) completed against the freed log and segment (a
 * use-after-free the sanitizer build reports). The read must end once,
 * with an error, and the log be freed only after it. */
Test(plog, disk_read_in_flight_when_the_log_closes)
{
	struct plog_config cfg;
	struct plog *pl = open_log_on_disk(&cfg);
	struct read_seen seen = { 0 };
	struct plog_read rd = { .offset = 0, .max_offset = pl->high_watermark, .max_bytes = 64 * 1024,
				.buf = rbuf, .buf_cap = RBUF_CAP, .done = read_seen_done, .arg = &seen };

	cr_assert_eq(plog_read(pl, &rd), 0, "the read goes to the disk");
	plog_close(pl);                 /* the partition is deleted meanwhile */
	store_drain(&st);
	cr_assert_eq(seen.calls, 1, "the read ends once");
	cr_assert_neq(seen.err, 0, "a read of a closed log reports it");
	cr_assert_eq(seen.bytes, 0);
}

/* The same for ListOffsets by timestamp: its walk reads from the disk. */
Test(plog, time_lookup_in_flight_when_the_log_closes)
{
	struct plog_config cfg;
	struct plog *pl = open_log_on_disk(&cfg);
	struct time_seen seen = { 0 };
	struct plog_time q = { .ts = 1050, .buf = rbuf, .buf_cap = RBUF_CAP, .done = time_done, .arg = &seen };

	cr_assert_eq(plog_find_time(pl, &q), 0, "the walk goes to the disk");
	plog_close(pl);
	store_drain(&st);
	cr_assert_eq(seen.calls, 1, "the walk ends once");
	cr_assert_neq(q.err, 0);
}

/* Regression: retention deleted a segment a disk read was still reading
 * (its completion then read the freed segment). The segment stays until
 * the read is over; the read returns its batches; the next retention pass
 * deletes it. */
Test(plog, retention_waits_for_a_disk_read_of_the_segment)
{
	struct plog_config cfg;
	struct plog *pl;
	struct read_seen seen = { 0 };

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	cfg.retention_ms = 1000;
	pl = open_log(&cfg);
	for (int i = 0; i < 100; i++)
		append(pl, i, 2, 300, i < 50 ? 1000 : 100000);
	store_drain(&st);
	plog_close(pl);
	pl = open_log(&cfg);
	int64_t first_end = pl->seg_head->next_offset;
	struct plog_read rd = { .offset = 0, .max_offset = pl->high_watermark, .max_bytes = 1,
				.buf = rbuf, .buf_cap = RBUF_CAP, .done = read_seen_done, .arg = &seen };

	cr_assert_eq(plog_read(pl, &rd), 0, "the read goes to the disk");
	int gone = plog_retain(pl, 50000);
	cr_assert_lt(pl->log_start, first_end, "the segment being read is still there");
	store_drain(&st);
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.err, 0);
	cr_assert_gt(seen.bytes, 0);
	cr_assert_eq(batch_base_offset(rd.data), 0);
	gone += plog_retain(pl, 50000);
	cr_assert_gt(gone, 0);
	cr_assert_geq(pl->log_start, first_end, "deleted once the read was over");
	plog_close(pl);
}

/* Regression: a preallocation that fails after its segment was taken off
 * the log (retention, DeleteRecords) and the log was closed read the freed
 * log in its completion (and leaked the segment). The state is reached
 * directly: a new log's first extent is asked for but not yet submitted;
 * the segment's descriptor is made read-only so the fallocate fails
 * (EBADF); the segment is taken off the log as retention does it and the
 * log, failed (nothing left to write), is closed; then the completion
 * comes. */
Test(plog, failed_preallocation_after_the_log_is_gone)
{
	struct plog_config cfg;
	struct plog *pl;
	struct segment *seg;
	char path[4400];
	int ro;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	seg = pl->seg_head;
	cr_assert(seg->falloc_inflight, "the first extent is asked for at creation");
	snprintf(path, sizeof(path), "%s/%s", dir, seg->name);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(ro, 0);
	cr_assert_eq(dup2(ro, seg->fd), seg->fd);
	close(ro);
	plog_segment_unlink(pl, seg);
	segment_free(seg);            /* in flight: only marked dead */
	pl->err = -EIO;
	plog_close(pl);
	uint64_t errors = st.stats.falloc_errors;
	store_drain(&st);
	cr_assert_eq(st.stats.falloc_errors, errors + 1, "the preallocation failed");
}

/* ---- the partial block of an evicted partition, read back ------------- */

/* Append one record of vlen bytes, batch `seq`, without polling; its base
 * offset must be `seq`. */
static void append_now(struct plog *pl, int64_t seq, int vlen)
{
	int64_t base;
	uint32_t size = test_batch(bbuf, sizeof(bbuf), seq, 1, vlen, 0, 1000 + seq);
	int rc = plog_append(pl, bbuf, size, &base);

	cr_assert_eq(rc, 0, "append %lld: %s", (long long)seq, strerror(-rc));
	cr_assert_eq(base, seq);
}

/* A partition whose last chunk was evicted appends again at once; its
 * partial block is read back while later appends go on, one of them into a
 * new chunk that starts in that same block; everything is written after
 * the block came back, the bytes on disk are whole (reopened, read from
 * the files) and every batch reads back. */
Test(plog, evicted_partial_block_comes_back_under_later_appends)
{
	struct plog_config cfg;
	struct plog *a, *b;

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, 256 * 1024), 0);
	plog_config_defaults(&cfg);
	a = open_log_at(&cfg, 0);
	b = open_log_at(&cfg, 1);
	append_now(a, 0, 1000);               /* a's partial block: ~1 KB */
	store_drain(&st);
	/* b's writes take the whole budget: a's last chunk is evicted */
	for (int i = 0; i < 60; i++)
		cr_assert_eq(append_bounded(b, i, 12000), 0);
	store_drain(&st);
	cr_assert_null(a->chunk_head, "a's last chunk was evicted");
	uint64_t reloads = st.tail.reloads;

	append_now(a, 1, 500);                /* reads the block back */
	append_now(a, 2, 14000);              /* a new chunk, from the same block */
	append_now(a, 3, 300);
	cr_assert_eq(a->durable_offset, 1, "nothing new is durable before the block is back");
	store_drain(&st);
	cr_assert_eq(st.tail.reloads, reloads + 1, "one read of the block");
	cr_assert_eq(a->high_watermark, 4);
	cr_assert_eq(check_all(a, 0, 1), 4);
	plog_close(a);
	a = open_log_at(&cfg, 0);
	cr_assert_eq(a->recovery.truncated_reason, 0);
	cr_assert_eq(a->next_offset, 4);
	cr_assert_eq(check_all(a, 0, 1), 4);
	cr_assert_eq(check_all(b, 0, 1), 60);
	plog_close(a);
	plog_close(b);
}

/* The chunk taken for the next append evicts the partition's own last
 * chunk (the oldest clean one) and has no room left for the block read
 * back: the read goes into a page of its own, taken from the pool. */
Test(plog, partial_block_read_back_into_a_page_of_its_own)
{
	struct plog_config cfg;
	struct plog *a, *b;

	store_fini(&st);
	cr_assert_eq(store_init(&st, NULL, 32 * 1024), 0);
	plog_config_defaults(&cfg);
	a = open_log_at(&cfg, 0);
	b = open_log_at(&cfg, 1);
	append_now(a, 0, 12000);
	store_drain(&st);
	append_now(b, 0, 12000);
	store_drain(&st);
	uint64_t reloads = st.tail.reloads, evictions = st.tail.evictions;

	append_now(a, 1, 12000);
	store_drain(&st);
	cr_assert_eq(st.tail.reloads, reloads + 1);
	cr_assert_geq(st.tail.evictions, evictions + 2, "a's chunk and b's");
	cr_assert_leq(st.tail.used + st.tail.cached, 32 * 1024);
	cr_assert_eq(check_all(a, 0, 1), 2);
	plog_close(a);
	a = open_log_at(&cfg, 0);
	cr_assert_eq(a->recovery.truncated_reason, 0);
	cr_assert_eq(check_all(a, 0, 1), 2);
	cr_assert_eq(check_all(b, 0, 1), 1);
	plog_close(a);
	plog_close(b);
}

/* ---- the log's small files, on the ring ------------------------------- */

/* The text of dir/name ("" if absent). */
static const char *file_text(const char *name)
{
	static char buf[256];
	char path[4400];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	buf[0] = 0;
	if (!(f = fopen(path, "r")))
		return buf;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int file_there(const char *name)
{
	char path[4400];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static int64_t checkpoint_hw(void)
{
	const char *t = file_text("recovery-checkpoint");

	return strncmp(t, "sluice-checkpoint 1 hw ", 23) ? -1 : strtoll(t + 23, NULL, 10);
}

/* A roll's index and a checkpoint are written on the ring: the calls
 * return at once, the files appear only as completions are reaped (none
 * is written while nothing polls), and then say the right thing. */
Test(plog, index_and_checkpoint_are_written_on_the_ring)
{
	struct plog_config cfg;
	struct plog *pl;
	char idx[48];

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	pl = open_log(&cfg);
	uint32_t size = test_batch(bbuf, sizeof(bbuf), 0, 1, 1000, 7, 1000);
	int i = 0;

	for (; pl->seg_tail->end + size <= cfg.segment_bytes; i++)
		append(pl, i, 1, 1000, 1000 + i);
	store_drain(&st);
	cr_assert_eq(plog_segment_count(pl), 1);
	snprintf(idx, sizeof(idx), "%020d.index", 0);
	cr_assert(!file_there(idx));
	/* the roll: the old segment is wholly written, its index is due now */
	append(pl, i, 1, 1000, 1000 + i);
	cr_assert_eq(plog_segment_count(pl), 2);
	cr_assert(!file_there(idx), "written while the append ran");
	store_drain(&st);
	cr_assert(file_there(idx), "the sealed segment's index");
	cr_assert(pl->seg_head->index_saved);

	store_drain(&st);
	cr_assert_eq(checkpoint_hw(), -1);
	cr_assert_eq(plog_checkpoint(pl), 0);
	cr_assert_eq(checkpoint_hw(), -1, "written while plog_checkpoint ran");
	store_drain(&st);
	cr_assert_eq(checkpoint_hw(), pl->next_offset);
	cr_assert_eq(pl->checkpointed, pl->next_offset);
	/* nothing new: nothing written */
	cr_assert_eq(plog_checkpoint_sync(pl), 0);
	cr_assert_eq(checkpoint_hw(), pl->next_offset);
	cr_assert(!file_there("recovery-checkpoint.tmp"));
	plog_close(pl);
}

/* The checkpoint never claims offsets whose data may not be synced: a
 * sealed segment whose index could not be written (its temporary name is
 * taken by a directory) caps the watermark at its base. Once the index
 * can be written, the next checkpoint writes it and goes to the end. */
Test(plog, checkpoint_stops_below_a_segment_without_its_index)
{
	struct plog_config cfg;
	struct plog *pl;
	char tmp[4400];
	int64_t blocked;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	pl = open_log(&cfg);
	for (int i = 0; plog_segment_count(pl) < 2; i++)
		append(pl, i, 1, 1000, 1000 + i);
	blocked = pl->seg_tail->base_offset;
	snprintf(tmp, sizeof(tmp), "%s/%020lld.index.tmp", dir, (long long)blocked);
	cr_assert_eq(mkdir(tmp, 0755), 0);
	for (int i = (int)pl->next_offset; plog_segment_count(pl) < 4; i++)
		append(pl, i, 1, 1000, 1000 + i);
	store_drain(&st);
	cr_assert_eq(plog_checkpoint_sync(pl), 0);
	cr_assert(!pl->seg_head->next->index_saved, "its index could not be written");
	cr_assert(pl->seg_head->next->next->index_saved, "the later ones were");
	cr_assert_eq(checkpoint_hw(), blocked, "checkpoint at %lld, the segment without index starts at %lld",
		     (long long)checkpoint_hw(), (long long)blocked);
	cr_assert_eq(rmdir(tmp), 0);
	cr_assert_eq(plog_checkpoint_sync(pl), 0);
	cr_assert(pl->seg_head->next->index_saved);
	cr_assert_eq(checkpoint_hw(), pl->next_offset);
	plog_close(pl);
}

struct del_seen {
	int calls;
	int err;
};

static void del_done(struct plog_delete *d)
{
	struct del_seen *s = d->arg;

	s->calls++;
	s->err = d->err;
}

/* DeleteRecords answers once the new start is durable ("log-start-offset"
 * written on the ring): not before; two requests in flight are answered
 * after one save of the larger; whole segments below go; a restart keeps
 * the start; outside [log start, high watermark] nothing happens. */
Test(plog, delete_records_answers_once_the_start_is_durable)
{
	struct plog_config cfg;
	struct plog *pl;
	struct del_seen s1 = { 0 }, s2 = { 0 }, s3 = { 0 };
	struct plog_delete d1 = { .offset = 30, .done = del_done, .arg = &s1 };
	struct plog_delete d2 = { .offset = 45, .done = del_done, .arg = &s2 };
	struct plog_delete d3 = { .offset = 1000, .done = del_done, .arg = &s3 };
	int segs;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	pl = open_log(&cfg);
	for (int i = 0; i < 60; i++)
		append(pl, i, 1, 1000, 1000 + i);
	store_drain(&st);
	segs = plog_segment_count(pl);
	cr_assert_gt(segs, 3);
	cr_assert_eq(plog_delete_records(pl, &d1), 0);
	cr_assert_eq(plog_delete_records(pl, &d2), 0);
	cr_assert_eq(plog_delete_records(pl, &d3), 1);
	cr_assert_eq(d3.err, -ERANGE);
	cr_assert_eq(s1.calls + s2.calls + s3.calls, 0, "answered before the start was saved");
	cr_assert_eq(pl->log_start, 0);
	store_drain(&st);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s1.err, 0);
	cr_assert_eq(s2.err, 0);
	cr_assert_eq(pl->log_start, 45);
	cr_assert_eq(strtoll(file_text("log-start-offset"), NULL, 10), 45);
	cr_assert_lt(plog_segment_count(pl), segs, "whole segments below the start went");
	cr_assert_leq(pl->seg_head->base_offset, 45);
	cr_assert_eq(check_all(pl, 45, 1), 60);
	cr_assert_eq(plog_delete_records_sync(pl, 40), -ERANGE, "below the start");
	cr_assert_eq(plog_delete_records_sync(pl, -1), 0);
	cr_assert_eq(pl->log_start, 60);
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->log_start, 60);
	plog_close(pl);
}

/* A file beside the log: written whole on the ring, later saves of the
 * same name after earlier ones (the last wins), plog_saving_file true
 * until the last is in place, no temporary file left. */
Test(plog, files_saved_beside_the_log)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	cr_assert_eq(plog_saving_file(pl, "state.bin"), 0);
	cr_assert_eq(plog_save_file(pl, "state.bin", "first\n", 6), 0);
	cr_assert_eq(plog_save_file(pl, "other.bin", "x", 1), 0);
	cr_assert_eq(plog_save_file(pl, "state.bin", "second\n", 7), 0);
	cr_assert_eq(plog_saving_file(pl, "state.bin"), 1);
	cr_assert(!file_there("state.bin"), "written while plog_save_file ran");
	store_drain(&st);
	cr_assert_eq(plog_saving_file(pl, "state.bin"), 0);
	cr_assert_str_eq(file_text("state.bin"), "second\n");
	cr_assert_str_eq(file_text("other.bin"), "x");
	cr_assert(!file_there("state.bin.tmp"));
	cr_assert_eq(plog_save_file(pl, "empty.bin", NULL, 0), 0);
	plog_close(pl);                 /* the close waits for it */
	cr_assert(file_there("empty.bin"));
	cr_assert_str_eq(file_text("empty.bin"), "");
}

/* Every partition's checkpoint at once (the retention tick) keeps at most
 * STORE_SLOW_SLOTS saves running (two descriptors each); the others wait
 * their turn and all end written. */
Test(plog, many_checkpoints_at_once_take_turns)
{
	enum { N = 40 };
	struct plog_config cfg;
	static struct plog *pls[N];
	int waiting = 0;

	plog_config_defaults(&cfg);
	for (int i = 0; i < N; i++) {
		pls[i] = open_log_at(&cfg, i);
		append(pls[i], 0, 3, 100, 1000);
	}
	store_drain(&st);
	for (int i = 0; i < N; i++)
		cr_assert_eq(plog_checkpoint(pls[i]), 0);
	cr_assert_eq(st.slow_slots, STORE_SLOW_SLOTS);
	for (struct store_slot_wait *w = st.slot_head; w; w = w->next)
		waiting++;
	cr_assert_eq(waiting, N - STORE_SLOW_SLOTS);
	while (st.inflight) {
		store_poll(&st, 1);
		cr_assert_leq(st.slow_slots, STORE_SLOW_SLOTS);
	}
	cr_assert_eq(st.slow_slots, 0);
	cr_assert_null(st.slot_head);
	for (int i = 0; i < N; i++) {
		char path[4400];
		FILE *f;
		char line[128] = "";

		cr_assert_eq(pls[i]->checkpointed, 3, "log %d", i);
		snprintf(path, sizeof(path), "%s/p%d/recovery-checkpoint", dir, i);
		cr_assert_not_null(f = fopen(path, "r"));
		cr_assert_not_null(fgets(line, sizeof(line), f));
		fclose(f);
		cr_assert_str_eq(line, "sluice-checkpoint 1 hw 3\n");
		plog_close(pls[i]);
	}
}

/* Whether the mapping holding addr has flag ("hg": MADV_HUGEPAGE) in
 * /proc/self/smaps; -1 when no mapping holds it. */
static int vma_has_flag(const void *addr, const char *flag)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, found = -1;
	uintptr_t a = (uintptr_t)addr;

	cr_assert(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			char want[8];

			snprintf(want, sizeof(want), " %s", flag);
			found = strstr(line, want) != NULL;
			break;
		}
	}
	fclose(f);
	return found;
}

Test(plog, tail_chunks_of_2_MiB_and_more_ask_for_huge_pages)
{
	struct tail_pool tp;
	struct tail_chunk *small, *two, *big;

	tail_pool_init(&tp, (size_t)64 << 20);
	small = tail_chunk_get(&tp, TAIL_CHUNK_MIN_SHIFT, 4096);
	two = tail_chunk_get(&tp, TAIL_HUGE_SHIFT, 1);
	big = tail_chunk_get(&tp, TAIL_CHUNK_MAX_SHIFT, 1);
	cr_assert(small && two && big);
	/* aligned to a huge page, and advised (the mapping's "hg" flag,
	 * whatever the system's THP setting does with the advice) */
	cr_assert_eq((uintptr_t)two->mem % ((size_t)1 << TAIL_HUGE_SHIFT), 0);
	cr_assert_eq((uintptr_t)big->mem % ((size_t)1 << TAIL_HUGE_SHIFT), 0);
	cr_assert_eq(vma_has_flag(two->mem, "hg"), 1);
	cr_assert_eq(vma_has_flag(big->mem + big->cap - 1, "hg"), 1);
	/* a small chunk is neither */
	cr_assert_eq((uintptr_t)small->mem % 4096, 0);
	cr_assert_neq(vma_has_flag(small->mem, "hg"), 1);
	tail_chunk_put(&tp, small);
	tail_chunk_put(&tp, two);
	tail_chunk_put(&tp, big);
	tail_pool_fini(&tp);
}
