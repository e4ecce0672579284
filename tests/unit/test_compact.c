/* tests/unit/test_compact.c — the cleaner: newest record per key wins,
 * tombstones expire, offsets never move, every codec handled. */
#include <dirent.h>
#include <errno.h>

#include "storage/compact.h"
#include "storage/compress.h"
#include "storage/plog.h"
#include "tests/unit/helpers.h"

static struct store st;
static struct compress_ctx *cc;
static char *dir;
static uint8_t *rbuf;

static void setup(void)
{
	dir = test_tmpdir();
	cr_assert_eq(store_init(&st, NULL, 64u << 20), 0);
	cr_assert_eq(compress_ctx_create(&cc), 0);
	cr_assert_eq(posix_memalign((void **)&rbuf, 4096, 8u << 20), 0);
}

static void teardown(void)
{
	compress_ctx_destroy(cc);
	store_fini(&st);
	if (!getenv("SLUICE_KEEP")) test_rmrf(dir); else fprintf(stderr, "kept %s\n", dir);
	free(dir);
	free(rbuf);
}

TestSuite(compact, .init = setup, .fini = teardown, .timeout = 120);

#define NKEYS 10
#define NBATCH 300
#define PER 4
/* Record 0 is the only record of key 99, a tombstone: it must expire. */
#define KEY_OF(r) ((r) == 0 ? 99 : (r) % NKEYS)
#define IS_TOMB(r) ((r) == 0 || (r) % 7 == 6)

/* value of record (batch i, record j): "val-<i*PER+j>"; key "key<(i*PER+j) % NKEYS>";
 * every 7th record is a tombstone; timestamps: batch i -> 1000 + i. */
static uint32_t make(uint8_t *out, size_t cap, int i, int codec)
{
	static uint8_t tmp[1 << 16];
	struct batch_builder bb;
	ssize_t n;

	batch_builder_init(&bb, tmp, sizeof(tmp), 1000 + i);
	for (int j = 0; j < PER; j++) {
		int r = i * PER + j;
		char k[16], v[32];
		int kl = snprintf(k, sizeof(k), "key%d", KEY_OF(r));
		int vl = snprintf(v, sizeof(v), "val-%d", r);

		cr_assert_eq(batch_builder_add(&bb, j, 1000 + i, k, kl, IS_TOMB(r) ? NULL : v, vl, NULL, 0, 0), 0);
	}
	n = batch_builder_finish(&bb, (uint16_t)codec, -1, -1, -1, -1);
	cr_assert_gt(n, 0);
	if (!codec) {
		memcpy(out, tmp, (size_t)n);
		return (uint32_t)n;
	}
	ssize_t c = compress_encode(cc, codec, tmp + OF_Records, (size_t)n - OF_Records, out + OF_Records,
				    cap - OF_Records);
	cr_assert_gt(c, 0);
	memcpy(out, tmp, OF_Records);
	be32_store(out + OF_BatchLength, (uint32_t)(OF_Records + c - BATCH_LOG_OVERHEAD));
	be32_store(out + OF_Crc, batch_compute_crc(out, (uint32_t)(OF_Records + c)));
	return (uint32_t)(OF_Records + c);
}

struct seen {
	int64_t offset;
	int rec;          /* r, from the value or -1 for a tombstone */
	int key;
};

/* Read the whole log, decompressing; fill out[] in order. */
static int read_all(struct plog *pl, struct seen *out, int max)
{
	int n = 0;
	int64_t off = pl->log_start, last = -1;

	while (off < pl->high_watermark) {
		struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark, .max_bytes = 1 << 20,
					.buf = rbuf, .buf_cap = 8u << 20 };

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		if (!rd.bytes)
			break;
		for (uint32_t at = 0; at < rd.bytes;) {
			const uint8_t *b = rd.data + at;
			struct batch_info bi;
			static uint8_t dec[1 << 20];
			const uint8_t *rec = b + OF_Records;
			size_t len = batch_size(b) - OF_Records;
			struct record_iter it;
			struct record_view rv;

			cr_assert_eq(batch_validate(b, rd.bytes - at, 0, 0, &bi), 0, "a stored batch is valid");
			if (bi.attributes & 7) {
				ssize_t d = compress_decode(cc, bi.attributes & 7, rec, len, dec, sizeof(dec));
				cr_assert_gt(d, 0);
				rec = dec;
				len = (size_t)d;
			}
			record_iter_init(&it, rec, len, bi.records);
			while (record_iter_next(&it, &rv) == 1) {
				int64_t o = batch_base_offset(b) + rv.offset_delta;
				char k[16];

				if (o < off)
					continue;
				cr_assert_gt(o, last, "offsets strictly increase");
				last = o;
				cr_assert_lt(n, max);
				memcpy(k, rv.key, (size_t)rv.key_len);
				k[rv.key_len] = 0;
				out[n].offset = o;
				out[n].key = atoi(k + 3);
				out[n].rec = -1;
				if (rv.value) {
					char v[32];

					memcpy(v, rv.value, (size_t)rv.value_len);
					v[rv.value_len] = 0;
					out[n].rec = atoi(v + 4);
				}
				n++;
			}
			off = batch_last_offset(b) + 1;
			at += bi.size;
		}
		plog_read_release(&rd);
	}
	return n;
}

static void run_codec(int codec)
{
	struct plog_config cfg;
	struct plog *pl;
	struct compactor *cp;
	static uint8_t b[1 << 16];
	static struct seen s[NBATCH * PER];
	char sub[4300];
	int64_t base;

	snprintf(sub, sizeof(sub), "%s/c%d", dir, codec);
	plog_config_defaults(&cfg);
	cfg.compact = 1;
	cfg.segment_bytes = 4 * 1024;
	cfg.delete_retention_ms = 1000;
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	for (int i = 0; i < NBATCH; i++) {
		uint32_t n = make(b, sizeof(b), i, codec);

		int rc;

		while ((rc = plog_append(pl, b, n, &base)) == -ENOBUFS)
			store_poll(&st, 1);
		cr_assert_eq(rc, 0, "append: %d", rc);
		cr_assert_eq(base, i * PER);
		store_poll(&st, 0);
	}
	store_drain(&st);
	int64_t upto = pl->seg_tail->base_offset;
	uint64_t before = plog_size(pl);
	cr_assert_gt(plog_segment_count(pl), 5);

	/* now = 1000 + 150 + 1000: tombstones of batches < 150 are old enough */
	cr_assert_eq(compactor_create(&cp), 0);
	cr_assert_eq(compactor_run(cp, pl, cc, 1000 + 150 + 1000), 0);
	const struct compact_stats *cs = compactor_stats(cp);
	cr_assert_gt(cs->segments_cleaned, 0);
	cr_assert_gt(cs->records_removed, 0);
	cr_assert_gt(cs->tombstones_removed, 0);
	cr_assert_lt(plog_size(pl), before, "%s: cleaned log is smaller", compress_codec_name(codec));

	for (int pass = 0; pass < 2; pass++) {
		int n = read_all(pl, s, NBATCH * PER);
	
		/* newest per key: the last record of each key overall */
		for (int k = 0; k < NKEYS; k++) {
			int newest = -1, found = 0;

			for (int r = 1; r < NBATCH * PER; r++)
				if (r % NKEYS == k)
					newest = r;
			for (int i = 0; i < n; i++)
				if (s[i].offset == newest)
					found = 1;
			if (!IS_TOMB(newest) || newest / PER >= 150)
				cr_assert(found, "key %d: newest record %d kept", k, newest);
		}
		for (int i = 0; i < n; i++) {
			int r = (int)s[i].offset;

			/* offsets never move: the record at offset r is record r */
			cr_assert_eq(s[i].key, KEY_OF(r));
			if (IS_TOMB(r))
				cr_assert_eq(s[i].rec, -1, "tombstone at %d", r);
			else
				cr_assert_eq(s[i].rec, r, "value at offset %d", r);
			if (s[i].offset < upto) {
				/* in the cleaned range: no newer record of the key anywhere */
				for (int r2 = r + 1; r2 < NBATCH * PER; r2++)
					cr_assert(KEY_OF(r2) != KEY_OF(r) || r2 >= upto,
						  "offset %d superseded by %d but kept", r, r2);
				if (s[i].rec == -1)
					cr_assert_geq(r / PER, 150, "expired tombstone %d kept", r);
			}
		}
		/* everything in the active segment is untouched */
		int active = 0;
		for (int i = 0; i < n; i++)
			active += s[i].offset >= upto;
		cr_assert_eq(active, NBATCH * PER - upto);
		if (pass == 0) {
			plog_close(pl);
			cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0, "reopen after compaction");
			cr_assert_eq(pl->next_offset, NBATCH * PER);
		}
	}
	/* appends continue with the next offset */
	cr_assert_eq(plog_append(pl, b, make(b, sizeof(b), NBATCH, codec), &base), 0);
	cr_assert_eq(base, NBATCH * PER);
	store_drain(&st);
	compactor_destroy(cp);
	plog_close(pl);
}

Test(compact, uncompressed) { run_codec(0); }
Test(compact, gzip) { run_codec(1); }
Test(compact, snappy) { run_codec(2); }
Test(compact, lz4) { run_codec(3); }
Test(compact, zstd) { run_codec(4); }

Test(compact, not_for_delete_policy)
{
	struct plog_config cfg;
	struct plog *pl;
	struct compactor *cp;
	static uint8_t b[1 << 16];
	int64_t base;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 8 * 1024;
	cr_assert_eq(plog_open(&st, dir, &cfg, &pl), 0);
	for (int i = 0; i < 50; i++) {
		uint32_t n = make(b, sizeof(b), i, 0);

		while (plog_append(pl, b, n, &base) == -ENOBUFS)
			store_poll(&st, 1);
	}
	store_drain(&st);
	uint64_t before = plog_size(pl);
	cr_assert_eq(compactor_create(&cp), 0);
	cr_assert_eq(compactor_run(cp, pl, cc, 1 << 30), 0);
	cr_assert_eq(plog_size(pl), before);
	compactor_destroy(cp);
	plog_close(pl);
}

/* The cleaner never waits for the disk: each step leaves its read, write,
 * fdatasync or rename in flight on the ring (COMPACT_WAIT) and appends go
 * on between steps; the result is the same, nothing temporary is left, and
 * a pass abandoned with an I/O in flight frees its buffers when it lands. */
Test(compact, steps_leave_their_io_on_the_ring)
{
	struct plog_config cfg;
	struct plog *pl;
	struct compactor *cp;
	static uint8_t b[1 << 16];
	static struct seen s[(NBATCH + 200) * PER];
	int64_t base, upto;
	int rc, waits = 0, appended = 0, segs;

	plog_config_defaults(&cfg);
	cfg.compact = 1;
	cfg.segment_bytes = 4 * 1024;
	cfg.delete_retention_ms = 1000;
	cr_assert_eq(plog_open(&st, dir, &cfg, &pl), 0);
	for (int i = 0; i < NBATCH; i++) {
		uint32_t n = make(b, sizeof(b), i, 0);

		while ((rc = plog_append(pl, b, n, &base)) == -ENOBUFS)
			store_poll(&st, 1);
		cr_assert_eq(rc, 0);
	}
	store_drain(&st);
	upto = pl->seg_tail->base_offset;
	segs = plog_segment_count(pl);
	cr_assert_eq(compactor_create(&cp), 0);
	while ((rc = compactor_step(cp, pl, cc, 1000 + 150 + 1000)) != 0) {
		cr_assert(rc == 1 || rc == COMPACT_WAIT, "step: %d", rc);
		if (rc != COMPACT_WAIT)
			continue;
		waits++;
		cr_assert_geq(st.inflight, 1, "the step's I/O is in flight");
		cr_assert_eq(compactor_step(cp, pl, cc, 1000 + 150 + 1000), COMPACT_WAIT, "nothing until it lands");
		if (appended < 200) {
			/* the partition goes on taking appends meanwhile */
			uint32_t n = make(b, sizeof(b), NBATCH + appended, 0);

			cr_assert_eq(plog_append(pl, b, n, &base), 0);
			cr_assert_eq(base, (NBATCH + appended) * PER);
			appended++;
		}
		store_poll(&st, 1);
	}
	/* per sealed segment: a read to map it, a read, a write, a sync and a
	 * rename to clean it */
	cr_assert_geq(waits, (segs - 1) * 5, "%d waits for %d segments", waits, segs);
	cr_assert_gt(compactor_stats(cp)->segments_cleaned, 0);
	store_drain(&st);
	/* a rewritten segment has the index of its new layout */
	for (struct segment *sg = pl->seg_head; sg && sg->base_offset < upto; sg = sg->next)
		if (sg->end)
			cr_assert_geq(sg->ix.n_off, 1, "segment %lld lost its index", (long long)sg->base_offset);
	{
		int n = read_all(pl, s, (NBATCH + 200) * PER), active = 0;

		for (int i = 0; i < n; i++)
			active += s[i].offset >= upto;
		cr_assert_eq(active, (NBATCH + appended) * PER - upto, "everything past the pass is there");
	}
	{
		DIR *d = opendir(dir);
		struct dirent *e;

		cr_assert_not_null(d);
		while ((e = readdir(d)))
			cr_assert_null(strstr(e->d_name, ".cleaned"), "left behind: %s", e->d_name);
		closedir(d);
	}

	/* a new pass, abandoned at its first I/O */
	for (int i = 0; i < 40; i++) {
		uint32_t n = make(b, sizeof(b), NBATCH + appended + i, 0);

		while ((rc = plog_append(pl, b, n, &base)) == -ENOBUFS)
			store_poll(&st, 1);
	}
	store_drain(&st);
	while ((rc = compactor_step(cp, pl, cc, 1 << 30)) == 1)
		;
	cr_assert_eq(rc, COMPACT_WAIT);
	compactor_reset(cp);
	store_drain(&st);
	compactor_destroy(cp);
	plog_close(pl);
}

/* The first pass over a log whose only sealed segment is not yet cleanable
 * while the map is built (its flush and index still on the ring, as right
 * after a roll under a producer) and is by the time the clean phase looks:
 * the map is empty, and a lookup in it must say "no newer record", not
 * index a table that was never allocated (the broker crashed so in CI's
 * test_metrics compaction test; UBSan: "applying non-zero offset to null
 * pointer" in map_find). */
Test(compact, a_segment_ready_only_after_the_map_is_cleaned_with_an_empty_map)
{
	struct plog_config cfg;
	struct plog *pl;
	struct compactor *cp;
	static uint8_t b[1 << 16];
	static struct seen s[NBATCH * PER];
	int64_t base;
	int rc, i = 0, steps = 0;

	plog_config_defaults(&cfg);
	cfg.compact = 1;
	cfg.segment_bytes = 4 * 1024;
	cfg.delete_retention_ms = 1000;
	cr_assert_eq(plog_open(&st, dir, &cfg, &pl), 0);
	store_drain(&st);
	/* appends until the first segment is sealed, its I/O not yet landed */
	while (pl->seg_head == pl->seg_tail) {
		uint32_t n = make(b, sizeof(b), i, 0);

		while ((rc = plog_append(pl, b, n, &base)) == -ENOBUFS)
			store_poll(&st, 1);
		cr_assert_eq(rc, 0);
		cr_assert_eq(base, i * PER);
		i++;
	}
	cr_assert(!pl->seg_head->index_saved || pl->seg_head->flushed < pl->seg_head->end,
		  "the sealed segment's files are still being written");
	cr_assert_eq(compactor_create(&cp), 0);
	cr_assert_eq(compactor_step(cp, pl, cc, 0), 1, "the pass starts");
	cr_assert_eq(compactor_step(cp, pl, cc, 0), 1, "the map phase finds nothing it may map");
	store_drain(&st);
	cr_assert(pl->seg_head->index_saved && pl->seg_head->flushed == pl->seg_head->end, "now it is ready");
	while ((rc = compactor_step(cp, pl, cc, 0)) != 0) {
		cr_assert(rc == 1 || rc == COMPACT_WAIT, "step: %d", rc);
		if (rc == COMPACT_WAIT)
			store_poll(&st, 1);
		cr_assert_lt(++steps, 10000);
	}
	store_drain(&st);
	/* nothing was mapped: every record stays, at its offset */
	cr_assert_eq(read_all(pl, s, NBATCH * PER), i * PER);
	for (int k = 0; k < i * PER; k++)
		cr_assert_eq(s[k].offset, k);
	compactor_destroy(cp);
	plog_close(pl);
}
