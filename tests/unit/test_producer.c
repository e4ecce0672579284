/* tests/unit/test_producer.c — idempotent producer state (dataplane/producer.c):
 * duplicates, gaps, epochs, the wrap, the 5-batch window, growth, expiry and
 * snapshots. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dataplane/producer.h"

/* the ring the snapshots are saved on */
static struct store *test_store(void)
{
	static struct store st;
	static int ready;

	if (!ready) {
		cr_assert_eq(store_init(&st, NULL, 1u << 20), 0);
		ready = 1;
	}
	return &st;
}

static void rec(struct producer_table *t, int64_t pid, int16_t epoch, int32_t first, int32_t n, int64_t base,
		int64_t now)
{
	cr_assert_eq(producer_record(t, pid, epoch, first, producer_seq_add(first, n - 1), base, base + n - 1, now), 0);
}

static int check(const struct producer_table *t, int64_t pid, int16_t epoch, int32_t first, int32_t n,
		 struct producer_batch *dup)
{
	return producer_check(t, pid, epoch, first, producer_seq_add(first, n - 1), dup);
}

Test(producer, duplicates_gaps_and_epochs)
{
	struct producer_table t = { 0 };
	struct producer_batch d;

	cr_assert_eq(check(&t, 7, 0, 0, 3, &d), PRODUCER_APPEND, "an unknown producer is accepted");
	rec(&t, 7, 0, 0, 3, 100, 1);
	cr_assert_eq(check(&t, 7, 0, 0, 3, &d), PRODUCER_DUPLICATE);
	cr_assert(d.base_offset == 100 && d.last_offset == 102);
	cr_assert_eq(check(&t, 7, 0, 3, 1, &d), PRODUCER_APPEND);
	cr_assert_eq(check(&t, 7, 0, 4, 1, &d), PRODUCER_OUT_OF_ORDER);
	cr_assert_eq(check(&t, 7, 0, 1, 2, &d), PRODUCER_OUT_OF_ORDER, "a different batch shape");
	cr_assert_eq(check(&t, 7, 1, 0, 1, &d), PRODUCER_APPEND, "a new epoch from 0");
	cr_assert_eq(check(&t, 7, 1, 5, 1, &d), PRODUCER_OUT_OF_ORDER, "a new epoch not from 0");
	rec(&t, 7, 1, 0, 1, 103, 2);
	cr_assert_eq(check(&t, 7, 0, 3, 1, &d), PRODUCER_OLD_EPOCH);
	cr_assert_eq(check(&t, 7, 0, 0, 3, &d), PRODUCER_OLD_EPOCH, "the old epoch's batch is fenced");
	producer_table_free(&t);
}

Test(producer, five_batch_window_and_wrap)
{
	struct producer_table t = { 0 };
	struct producer_batch d;

	for (int i = 0; i < 7; i++)
		rec(&t, 1, 0, i * 2, 2, 10 + i * 2, 1);
	for (int i = 2; i < 7; i++)
		cr_assert_eq(check(&t, 1, 0, i * 2, 2, &d), PRODUCER_DUPLICATE, "batch %d is in the window", i);
	cr_assert_eq(check(&t, 1, 0, 0, 2, &d), PRODUCER_OUT_OF_ORDER, "batch 0 left the window");
	rec(&t, 2, 0, INT32_MAX - 1, 3, 0, 1);   /* INT32_MAX-1, INT32_MAX, 0 */
	cr_assert_eq(check(&t, 2, 0, 1, 1, &d), PRODUCER_APPEND, "after the wrap the next is 1");
	cr_assert_eq(check(&t, 2, 0, INT32_MAX - 1, 3, &d), PRODUCER_DUPLICATE);
	producer_table_free(&t);
}

Test(producer, many_producers_grow_and_expire)
{
	struct producer_table t = { 0 };
	struct producer_batch d;

	for (int64_t pid = 0; pid < 1000; pid++)
		rec(&t, pid, 0, 0, 1, pid, pid < 500 ? 1000 : 5000);
	cr_assert_eq(t.n, 1000);
	for (int64_t pid = 0; pid < 1000; pid++)
		cr_assert_eq(check(&t, pid, 0, 0, 1, &d), PRODUCER_DUPLICATE, "pid %lld", (long long)pid);
	producer_expire(&t, 6000, 2000);   /* the first 500 idle for 5000 ms */
	cr_assert_eq(t.n, 500);
	cr_assert_eq(check(&t, 3, 0, 0, 1, &d), PRODUCER_APPEND, "expired: unknown again");
	cr_assert_eq(check(&t, 700, 0, 0, 1, &d), PRODUCER_DUPLICATE, "still known");
	producer_table_free(&t);
}

Test(producer, snapshot_round_trip_and_corruption)
{
	struct producer_table t = { 0 }, u = { 0 };
	struct producer_batch d;
	char dir[] = "/tmp/sluice-producer-XXXXXX";
	int dfd;

	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(producer_snapshot_load(&u, dfd), -1, "no snapshot yet");
	for (int i = 0; i < 6; i++)
		rec(&t, 42, 3, i, 1, 100 + i, 9);
	rec(&t, 43, 0, 0, 5, 200, 9);
	cr_assert_eq(producer_snapshot_save(&t, test_store(), dfd, 205), 0);
	cr_assert_eq(producer_snapshot_load(&u, dfd), 205);
	cr_assert_eq(u.n, 2);
	cr_assert_eq(check(&u, 42, 3, 5, 1, &d), PRODUCER_DUPLICATE);
	cr_assert_eq(d.base_offset, 105);
	cr_assert_eq(check(&u, 42, 3, 6, 1, &d), PRODUCER_APPEND);
	cr_assert_eq(check(&u, 42, 2, 6, 1, &d), PRODUCER_OLD_EPOCH, "the epoch came back");
	cr_assert_eq(check(&u, 43, 0, 0, 5, &d), PRODUCER_DUPLICATE);
	producer_table_free(&u);
	{
		/* one flipped byte: refused whole, the caller scans instead */
		int fd = openat(dfd, "producers.snapshot", O_RDWR);
		uint8_t byte;

		cr_assert_geq(fd, 0);
		cr_assert_eq(pread(fd, &byte, 1, 30), 1);
		byte ^= 0x40;
		cr_assert_eq(pwrite(fd, &byte, 1, 30), 1);
		close(fd);
	}
	cr_assert_eq(producer_snapshot_load(&u, dfd), -1);
	cr_assert_eq(u.n, 0);
	unlinkat(dfd, "producers.snapshot", 0);
	close(dfd);
	rmdir(dir);
	producer_table_free(&t);
}

/* Transactions: a producer with an open transaction (registered, with or
 * without batches) survives the snapshot with its first offset, and is
 * never expired while the transaction is open. */
Test(producer, open_transactions_snapshot_and_never_expire)
{
	struct producer_table t = { 0 }, u = { 0 };
	struct producer_entry *e;
	char dir[] = "/tmp/sluice-producer-XXXXXX";
	int dfd;

	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dfd, 0);
	rec(&t, 7, 1, 0, 1, 50, 100);
	e = producer_entry(&t, 7, 1, 0);
	cr_assert_not_null(e);
	e->txn_first = 50;
	e = producer_entry(&t, 8, 2, 1);   /* registered, nothing written yet */
	cr_assert_not_null(e);
	cr_assert_eq(e->txn_first, -1);
	e->txn_open = 1;
	e->last_ms = 100;
	rec(&t, 9, 0, 0, 1, 60, 100);      /* an idempotent producer, no transaction */
	producer_expire(&t, 1000000, 1000);
	cr_assert_eq(t.n, 2, "only the producer without a transaction expires");
	cr_assert_null(producer_entry(&t, 9, 0, 0));
	cr_assert_eq(producer_snapshot_save(&t, test_store(), dfd, 70), 0);
	cr_assert_eq(producer_snapshot_load(&u, dfd), 70);
	e = producer_entry(&u, 7, 0, 0);
	cr_assert(e && e->txn_first == 50 && e->epoch == 1, "the open transaction's first offset");
	e = producer_entry(&u, 8, 0, 0);
	cr_assert(e && e->txn_first == -1 && e->epoch == 2 && e->n == 0, "a producer without batches");
	producer_table_free(&u);
	producer_table_free(&t);
	unlinkat(dfd, "producers.snapshot", 0);
	close(dfd);
	rmdir(dir);
}

/* A save on the ring: the previous snapshot stays whole and is what a
 * restart reads until the new one is synced and renamed over it; a save
 * that fails (the directory is gone) leaves nothing half-written. */
static void snap_done(struct producer_snap *s)
{
	(*(int *)s->arg)++;
}

Test(producer, snapshot_on_the_ring_replaces_the_old_only_when_durable)
{
	struct producer_table t = { 0 }, u = { 0 };
	struct producer_snap s = { .done = snap_done };
	struct store *st = test_store();
	char dir[] = "/tmp/sluice-producer-XXXXXX";
	int dfd, calls = 0;

	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dfd, 0);
	for (int64_t pid = 0; pid < 3000; pid++)
		rec(&t, pid, 1, 0, 2, pid * 2, 9);
	cr_assert_eq(producer_snapshot_save(&t, st, dfd, 6000), 0);
	rec(&t, 5000, 0, 0, 1, 6000, 9);
	s.arg = &calls;
	cr_assert_eq(producer_snapshot_start(&s, &t, st, dfd, 6001), 0);
	cr_assert(s.busy);
	cr_assert_eq(producer_snapshot_start(&s, &t, st, dfd, 6001), -EBUSY, "one save at a time");
	/* the table may change while the save is in flight: it was copied */
	rec(&t, 6000, 0, 0, 1, 6001, 9);
	cr_assert_eq(producer_snapshot_load(&u, dfd), 6000, "the old snapshot until the rename");
	producer_table_free(&u);
	while (!calls)
		store_poll(st, 1);
	cr_assert_eq(calls, 1);
	cr_assert_eq(s.err, 0);
	cr_assert(!s.busy);
	cr_assert_eq(producer_snapshot_load(&u, dfd), 6001);
	cr_assert_eq(u.n, 3001);
	cr_assert_null(producer_entry(&u, 6000, 0, 0), "taken after the start");
	producer_table_free(&u);
	cr_assert_eq(faccessat(dfd, "producers.snapshot.tmp", F_OK, 0), -1, "no temporary left");

	/* the directory goes away: the save fails at its first step, no done
	 * is lost and nothing is left behind */
	unlinkat(dfd, "producers.snapshot", 0);
	cr_assert_eq(rmdir(dir), 0);
	cr_assert_eq(producer_snapshot_start(&s, &t, st, dfd, 6002), 0);
	while (calls < 2)
		store_poll(st, 1);
	cr_assert_lt(s.err, 0);
	cr_assert(!s.busy);
	close(dfd);
	producer_table_free(&t);
}
