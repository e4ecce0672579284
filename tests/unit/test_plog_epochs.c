/* tests/unit/test_plog_epochs.c — a partition log's leader epochs on a real
 * disk with a real io_uring: the cache follows the epoch the log stamps,
 * "leader-epoch-checkpoint" is written on the ring and loaded on open,
 * rebuilt from the batches when missing or damaged (and the recovery line
 * says so), cut back to the log's offsets on open, and moved up by
 * DeleteRecords and retention. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "storage/batch_format.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"
#include "tests/unit/helpers.h"

static uint8_t bbuf[64 << 10];
static struct store st;
static char *dir;

static void setup(void)
{
	dir = test_tmpdir();
	cr_assert_eq(store_init(&st, NULL, 64u << 20), 0);
}

static void teardown(void)
{
	store_fini(&st);
	test_rmrf(dir);
	free(dir);
}

TestSuite(plog_epochs, .init = setup, .fini = teardown, .timeout = 120);

static struct plog *open_log(const struct plog_config *cfg)
{
	struct plog *pl;
	int rc = plog_open(&st, dir, cfg, &pl);

	cr_assert_eq(rc, 0, "plog_open: %s", strerror(-rc));
	return pl;
}

/* n batches of 2 records; the base offset of the first. */
static int64_t append_n(struct plog *pl, int n, int vlen)
{
	int64_t first = -1;

	for (int i = 0; i < n; i++) {
		uint32_t size = test_batch(bbuf, sizeof(bbuf), i, 2, vlen, 3, 1000 + i);
		int64_t base;
		int rc;

		while ((rc = plog_append(pl, bbuf, size, &base)) == -ENOBUFS)
			store_poll(&st, 1);
		cr_assert_eq(rc, 0, "append: %s", strerror(-rc));
		if (first < 0)
			first = base;
	}
	return first;
}

/* Wait until the log's file work is idle (the epochs' file written). */
static void settle(struct plog *pl)
{
	store_drain(&st);
	while (pl->files.job || pl->epochs.due)
		store_poll(&st, 1);
}

static char *file_text(const char *name)
{
	static char text[4096];
	char path[4400];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	return text;
}

static void write_file(const char *name, const char *text)
{
	char path[4400];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

static void expect_end(struct plog *pl, int32_t req, int32_t want_epoch, int64_t want_end)
{
	int32_t e;
	int64_t o;

	plog_epoch_end_offset(pl, req, &e, &o);
	cr_assert_eq(e, want_epoch, "epoch %d: got epoch %d, want %d", req, e, want_epoch);
	cr_assert_eq(o, want_end, "epoch %d: end %lld, want %lld", req, (long long)o, (long long)want_end);
}

/* The epoch written into every batch stored from `from` on. */
static int32_t stored_epoch_at(struct plog *pl, int64_t off)
{
	static uint8_t *rb;
	struct plog_read rd;
	int32_t e;

	if (!rb)
		cr_assert_eq(posix_memalign((void **)&rb, 4096, 4u << 20), 0);
	rd = (struct plog_read){ .offset = off, .max_offset = pl->next_offset, .max_bytes = 1,
				 .buf = rb, .buf_cap = 4u << 20 };
	cr_assert_eq(plog_read_sync(pl, &rd), 1);
	cr_assert_geq(rd.bytes, BATCH_HEADER_SIZE);
	e = batch_leader_epoch(rd.data);
	plog_read_release(&rd);
	return e;
}

Test(plog_epochs, appends_follow_the_epoch_and_the_file_is_kept)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	cr_assert_eq(pl->epochs.c.n, 0);
	cr_assert_null(file_text(EPOCH_CACHE_FILE), "an empty log writes no file");
	append_n(pl, 5, 50);                      /* offsets 0-9 at epoch 0 */
	cr_assert_eq(plog_set_leader_epoch(pl, 3), 0);
	cr_assert_eq(plog_set_leader_epoch(pl, 2), -ESTALE);
	cr_assert_eq(plog_set_leader_epoch(pl, -1), -EINVAL);
	cr_assert_eq(append_n(pl, 5, 50), 10);    /* 10-19 at epoch 3 */
	cr_assert_eq(plog_set_leader_epoch(pl, 4), 0);   /* no batch at 4 yet: starts at the end */
	settle(pl);
	cr_assert_eq(stored_epoch_at(pl, 0), 0);
	cr_assert_eq(stored_epoch_at(pl, 10), 3);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n3\n0 0\n3 10\n4 20\n");
	expect_end(pl, 0, 0, 10);
	expect_end(pl, 3, 3, 20);
	expect_end(pl, 4, 4, 20);
	expect_end(pl, 5, -1, -1);
	append_n(pl, 1, 50);                      /* 20-21 at 4: no change */
	settle(pl);
	cr_assert_eq(pl->epochs.c.n, 3);
	expect_end(pl, 4, 4, 22);
	plog_close(pl);

	/* loaded, not rebuilt; the log goes on at its latest epoch */
	pl = open_log(&cfg);
	cr_assert_eq(pl->recovery.epochs_rebuilt, 0);
	cr_assert_eq(pl->leader_epoch, 4);
	cr_assert_eq(pl->epochs.c.n, 3);
	expect_end(pl, 3, 3, 20);
	expect_end(pl, 4, 4, 22);
	plog_close(pl);
}

Test(plog_epochs, an_empty_log_records_its_epoch_with_the_first_batch)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	cr_assert_eq(plog_set_leader_epoch(pl, 2), 0);
	cr_assert_eq(plog_set_leader_epoch(pl, 5), 0);
	cr_assert_eq(pl->epochs.c.n, 0);
	append_n(pl, 2, 10);
	settle(pl);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n1\n5 0\n");
	plog_close(pl);
}

static void rebuild_case(const char *damage, int want_state, const char *want_word)
{
	struct plog_config cfg;
	struct plog *pl;
	char line[2048];

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;            /* several segments, checkpointed ones too */
	pl = open_log(&cfg);
	append_n(pl, 40, 200);                    /* 0-79 at 0 */
	plog_set_leader_epoch(pl, 2);
	append_n(pl, 40, 200);                    /* 80-159 at 2 */
	plog_set_leader_epoch(pl, 7);
	append_n(pl, 40, 200);                    /* 160-239 at 7 */
	settle(pl);
	cr_assert_gt(plog_segment_count(pl), 3);
	plog_close(pl);
	if (damage)
		write_file(EPOCH_CACHE_FILE, damage);
	else
		cr_assert_eq(unlink(strcat(strcpy(line, dir), "/" EPOCH_CACHE_FILE)), 0);

	pl = open_log(&cfg);
	cr_assert_gt(pl->recovery.segments_trusted, 0, "the sealed segments are taken unread");
	cr_assert_eq(pl->recovery.epochs_rebuilt, want_state);
	cr_assert_eq(pl->recovery.epochs_batches, 120);
	plog_recovery_describe(pl, line, sizeof(line));
	cr_assert(strstr(line, want_word) && strstr(line, "rebuilt from 120 batches (3 epochs)"), "%s", line);
	cr_assert_eq(pl->leader_epoch, 7);
	expect_end(pl, 0, 0, 80);
	expect_end(pl, 1, 0, 80);
	expect_end(pl, 2, 2, 160);
	expect_end(pl, 7, 7, 240);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n3\n0 0\n2 80\n7 160\n", "written again on open");
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->recovery.epochs_rebuilt, 0);
	plog_close(pl);
}

Test(plog_epochs, a_missing_file_is_rebuilt_from_the_batches)
{
	rebuild_case(NULL, 1, EPOCH_CACHE_FILE " missing");
}

Test(plog_epochs, a_damaged_file_is_rebuilt_from_the_batches)
{
	rebuild_case("0\n3\n0 0\n2 8", 2, EPOCH_CACHE_FILE " damaged");
}

Test(plog_epochs, entries_past_the_log_end_are_cut_on_open)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	append_n(pl, 5, 10);                      /* 0-9 at 0 */
	plog_close(pl);
	/* an epoch whose batches a crash took back (never acknowledged) */
	write_file(EPOCH_CACHE_FILE, "0\n2\n0 0\n6 10\n");
	pl = open_log(&cfg);
	cr_assert_eq(pl->recovery.epochs_rebuilt, 0);
	cr_assert_eq(pl->epochs.c.n, 1);
	settle(pl);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n1\n0 0\n");
	plog_close(pl);
}

Test(plog_epochs, batches_scanned_on_open_add_their_epochs)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	append_n(pl, 5, 10);                      /* 0-9 at 0 */
	plog_set_leader_epoch(pl, 3);
	append_n(pl, 5, 10);                      /* 10-19 at 3 */
	plog_close(pl);
	/* as if the crash came before the file was written (the batches were
	 * not checkpointed: the scan reads them) */
	write_file(EPOCH_CACHE_FILE, "0\n1\n0 0\n");
	write_file(PLOG_CHECKPOINT_FILE, "");
	{
		char ix[4400];

		snprintf(ix, sizeof(ix), "%s/%020d.index", dir, 0);
		unlink(ix);
	}
	pl = open_log(&cfg);
	cr_assert_eq(pl->recovery.segments_trusted, 0);
	cr_assert_eq(pl->recovery.epochs_rebuilt, 0);
	cr_assert_eq(pl->leader_epoch, 3);
	expect_end(pl, 0, 0, 10);
	settle(pl);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n2\n0 0\n3 10\n");
	plog_close(pl);
}

Test(plog_epochs, truncate_end_drops_the_divergent_epochs)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	append_n(pl, 5, 10);                      /* 0-9 at 0 */
	plog_set_leader_epoch(pl, 3);
	append_n(pl, 5, 10);                      /* 10-19 at 3 */
	cr_assert_eq(plog_epochs_truncate_end(pl, 15), 0);
	cr_assert_eq(plog_epochs_truncate_end(pl, 10), 1);
	settle(pl);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n1\n0 0\n");
	plog_close(pl);
}

Test(plog_epochs, delete_records_moves_the_first_epoch_up)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	pl = open_log(&cfg);
	append_n(pl, 5, 10);                      /* 0-9 at 0 */
	plog_set_leader_epoch(pl, 3);
	append_n(pl, 5, 10);                      /* 10-19 at 3 */
	settle(pl);
	cr_assert_eq(plog_delete_records_sync(pl, 12), 0);
	settle(pl);
	cr_assert_str_eq(file_text(EPOCH_CACHE_FILE), "0\n1\n3 12\n");
	expect_end(pl, 0, 0, 12);                 /* below the first: its start */
	cr_assert_eq(plog_epoch_for_offset(pl, 12), 3);
	cr_assert_eq(plog_epoch_for_offset(pl, 11), -1);
	plog_close(pl);
	pl = open_log(&cfg);
	cr_assert_eq(pl->epochs.c.n, 1);
	cr_assert_eq(pl->epochs.c.e[0].start, 12);
	plog_close(pl);
}

Test(plog_epochs, retention_moves_the_first_epoch_up)
{
	struct plog_config cfg;
	struct plog *pl;

	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
	cfg.retention_ms = 1000;
	pl = open_log(&cfg);
	append_n(pl, 30, 200);                    /* old: timestamps 1000.. */
	plog_set_leader_epoch(pl, 1);
	append_n(pl, 30, 200);
	settle(pl);
	cr_assert_gt(plog_retain(pl, 1000000), 0);
	settle(pl);
	cr_assert_gt(pl->log_start, 0);
	cr_assert_eq(pl->epochs.c.e[0].start, pl->log_start);
	plog_close(pl);
}
