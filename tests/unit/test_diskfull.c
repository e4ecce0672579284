/* tests/unit/test_diskfull.c — a full disk: appends are refused with
 * -ENOSPC (the waiters told), what was acknowledged stays readable, the log
 * is not failed, and once space returns (the tmpfs remounted larger) the
 * next append has the unwritten bytes written again and the log takes
 * appends as before: everything appended is durable and there after a
 * reopen. Uses a real 1 MiB tmpfs (O_DIRECT capable), so it needs root to
 * mount; without root it is skipped with the reason. */
#include <errno.h>
#include <sys/mount.h>

#include "storage/plog.h"
#include "tests/unit/helpers.h"

static int64_t durable, failed_err;
static void cb(struct plog *pl, int64_t off, int err, void *arg)
{
	(void)pl; (void)arg;
	if (err)
		failed_err = err;
	else
		durable = off;
}

Test(diskfull, enospc_refuses_appends_until_space_returns_and_keeps_acked_data, .timeout = 60)
{
	char *dir = test_tmpdir(), sub[4300];
	struct store st;
	struct plog_config cfg;
	struct plog *pl;
	static uint8_t b[65536];
	uint8_t *rbuf = NULL;
	int64_t base, appended = 0;
	int rc = 0;

	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=1m") != 0) {
		test_rmrf(dir);
		cr_skip_test("needs root to mount a 1 MiB tmpfs (errno %d)", errno);
	}
	snprintf(sub, sizeof(sub), "%s/p0", dir);
	cr_assert_eq(store_init(&st, NULL, 32u << 20), 0);
	cr_assert_eq(posix_memalign((void **)&rbuf, 4096, 4u << 20), 0);
	plog_config_defaults(&cfg);
	cfg.segment_bytes = 256 * 1024;
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	plog_set_durable_cb(pl, cb, NULL);
	for (int i = 0; i < 2000 && !pl->err && !pl->nospace; i++) {
		uint32_t n = test_batch(b, sizeof(b), i, 4, 1000, 3, i);

		rc = plog_append(pl, b, n, &base);
		if (rc == -ENOBUFS) {
			store_poll(&st, 1);
			continue;
		}
		if (rc)
			break;
		appended++;
		store_poll(&st, 0);
	}
	store_drain(&st);
	cr_assert_eq(pl->err, 0, "a full disk failed the log (%d)", pl->err);
	cr_assert(pl->nospace, "the log saw the disk full");
	cr_assert_eq(failed_err, -ENOSPC, "the durability callback reports the full disk");
	cr_assert_eq(plog_append(pl, b, test_batch(b, sizeof(b), 0, 1, 10, 1, 1), &base), -ENOSPC);
	store_drain(&st);
	cr_assert(pl->nospace, "still full: the retry found no space either");
	cr_assert_eq(pl->err, 0);
	cr_assert_gt(durable, 0);
	cr_assert_lt(durable, appended * 4, "not everything could have been durable");
	/* acknowledged data is still served */
	for (int64_t off = 0; off < durable;) {
		struct plog_read rd = { .offset = off, .max_offset = durable, .max_bytes = 1 << 20,
					.buf = rbuf, .buf_cap = 4u << 20 };

		cr_assert_eq(plog_read_sync(pl, &rd), 1);
		cr_assert_gt(rd.bytes, 0);
		for (uint32_t at = 0; at < rd.bytes; at += batch_size(rd.data + at)) {
			cr_assert_eq(batch_validate(rd.data + at, rd.bytes - at, 0, 0, NULL), 0);
			off = batch_last_offset(rd.data + at) + 1;
		}
		plog_read_release(&rd);
	}
	/* space returns: the next append asks for the unwritten bytes again
	 * (refused itself), and once they landed appends are taken again */
	cr_assert_eq(mount("tmpfs", dir, "tmpfs", MS_REMOUNT, "size=8m"), 0, "remount: errno %d", errno);
	rc = -ENOSPC;
	for (int i = 0; i < 100 && rc == -ENOSPC; i++) {
		rc = plog_append(pl, b, test_batch(b, sizeof(b), 0, 1, 10, 1, 1), &base);
		store_drain(&st);
	}
	cr_assert_eq(rc, 0, "space back, the append still refused (%d)", rc);
	appended++;
	store_drain(&st);
	cr_assert_eq(pl->err, 0);
	cr_assert_eq(pl->nospace, 0);
	cr_assert_eq(durable, pl->next_offset, "everything appended is durable");
	cr_assert_eq(pl->next_offset, (appended - 1) * 4 + 1);
	plog_close(pl);
	/* and after a restart, everything is there */
	cr_assert_eq(plog_open(&st, sub, &cfg, &pl), 0);
	cr_assert_eq(pl->next_offset, durable);
	plog_close(pl);
	store_fini(&st);
	free(rbuf);
	umount(dir);
	test_rmrf(dir);
	free(dir);
}
