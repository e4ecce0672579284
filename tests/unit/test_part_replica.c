/* tests/unit/test_part_replica.c — a partition as a follower holds it
 * (dataplane/part_replica.h), on a shard polled as a plain struct: the
 * leader's produce (an idempotent producer, a transaction and its abort)
 * copied into a follower, which then knows each producer's sequences and
 * the aborted index as the leader does; a cut that takes a producer's
 * batches and an abort marker away gives them back (a sequence cut away
 * is accepted again, the transaction is open again), also after the log
 * grows again past the old end and the partition restarts after a crash;
 * a log that failed refuses every produce before the sequence check. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataplane/part.h"
#include "dataplane/part_replica.h"
#include "dataplane/shard.h"
#include "dataplane/shard_core.h"
#include "broker_fixture.h"
#include "helpers.h"

static struct broker b;
static struct shard *sh;
static char *dir;
static uint8_t *rbuf;
static struct plog_config cfg;

static void setup(void)
{
	dir = test_broker_init(&b, -1);
	sh = test_shard_start(&b);
	cr_assert_eq(posix_memalign((void **)&rbuf, 4096, 4u << 20), 0);
	plog_config_defaults(&cfg);
	cfg.segment_bytes = 16 * 1024;
}

static void teardown(void)
{
	test_shard_stop(&b, sh, 0, 0, dir);
	sh = NULL;
	free(rbuf);
}

TestSuite(part_replica, .init = setup, .fini = teardown, .timeout = 120);

static struct part *open_part(const char *name)
{
	char path[4300];
	struct part *p;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = part_open(sh, path, name, 0, &cfg, &p);
	cr_assert_eq(rc, 0, "part_open %s: %d", name, rc);
	return p;
}

static int64_t last_base;
static int last_err;

static void produced(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	(void)owner;
	(void)cookie;
	(void)log_start;
	last_base = base;
	last_err = err;
}

/* Produce one record of producer pid (epoch 0) with sequence seq;
 * transactional when txn. Returns its offset. */
static int64_t produce(struct part *p, int64_t pid, int32_t seq, int txn)
{
	uint8_t buf[512];
	struct batch_builder bb;
	ssize_t len;
	struct part_produce_req req = { .rec = buf, .acks = 0, .recv_ns = 10 };

	batch_builder_init(&bb, buf, sizeof(buf), 1000 + seq);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000 + seq, "k", 1, "value", 5, NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, txn ? BATCH_ATTR_TRANSACTIONAL : 0, -1, pid, 0, seq);
	cr_assert_gt(len, 0);
	req.len = (uint32_t)len;
	last_err = -1000;
	part_produce(p, &req, produced, NULL);
	cr_assert_eq(last_err, 0, "produce pid %lld seq %d: %d", (long long)pid, seq, last_err);
	return last_base;
}

/* Copy the leader's log [from, its end) into the follower. */
static void replicate(struct part *l, struct part *f, int64_t from)
{
	int64_t off = from;

	store_drain(&sh->st);
	while (off < l->pl->next_offset) {
		struct plog_read rd = { .offset = off, .max_offset = l->pl->next_offset, .max_bytes = 64 * 1024,
					.buf = rbuf, .buf_cap = 4u << 20 };
		uint32_t appended;

		cr_assert_eq(plog_read_sync(l->pl, &rd), 1);
		cr_assert_eq(part_append_replica(f, rd.data, rd.bytes, &appended), 0);
		cr_assert_eq(appended, rd.bytes);
		off = f->pl->next_offset;
		plog_read_release(&rd);
	}
	store_drain(&sh->st);
}

static int verdict(struct part *p, int64_t pid, int32_t seq, struct producer_batch *dup)
{
	return producer_check(&p->producers, pid, 0, seq, seq, dup);
}

/* Leader: producer 5's sequences 0-4 (offsets 0-4), producer 9's
 * transaction (5, 6) and its ABORT marker (7), producer 5's 5-9 (8-12). */
static void lead(struct part *l)
{
	int64_t marker;

	for (int s = 0; s < 5; s++)
		cr_assert_eq(produce(l, 5, s, 0), s);
	cr_assert_eq(part_begin_txn(l, 9, 0, 1), 0);
	cr_assert_eq(produce(l, 9, 0, 1), 5);
	cr_assert_eq(produce(l, 9, 1, 1), 6);
	cr_assert_eq(part_append_marker(l, 9, 0, 0, 0, &marker), 0);
	cr_assert_eq(marker, 7);
	for (int s = 5; s < 10; s++)
		cr_assert_eq(produce(l, 5, s, 0), 3 + s);
	store_drain(&sh->st);
}

Test(part_replica, follower_knows_producers_and_aborts_as_the_leader)
{
	struct part *l = open_part("leader"), *f = open_part("follower");
	struct producer_batch d;
	int64_t pid[4], first[4];

	lead(l);
	replicate(l, f, 0);
	cr_assert_eq(f->pl->next_offset, 13);
	cr_assert_eq(verdict(f, 5, 9, &d), PRODUCER_DUPLICATE, "a resend of the last batch is known");
	cr_assert_eq(d.base_offset, 12);
	cr_assert_eq(verdict(f, 5, 10, &d), PRODUCER_APPEND);
	cr_assert_eq(verdict(f, 5, 11, &d), PRODUCER_OUT_OF_ORDER);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, 13, pid, first, 4), 1);
	cr_assert_eq(pid[0], 9);
	cr_assert_eq(first[0], 5);
	cr_assert_eq(f->txn.lso, l->txn.lso);
	cr_assert_eq(f->txn.lso, INT64_MAX, "no transaction open");
	part_close(l);
	part_close(f);
	/* the follower's files say the same after a reopen */
	f = open_part("follower");
	cr_assert_eq(verdict(f, 5, 9, &d), PRODUCER_DUPLICATE);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, 13, pid, first, 4), 1);
	part_close(f);
}

Test(part_replica, a_cut_gives_back_sequences_and_reopens_a_transaction)
{
	struct part *l = open_part("leader"), *f = open_part("follower");
	struct producer_batch d;
	int64_t pid[4], first[4], end;

	lead(l);
	replicate(l, f, 0);
	/* a snapshot that covers the whole log: the cut must not leave it */
	part_snapshot_producers(f);
	while (f->snap.busy)
		store_poll(&sh->st, 1);
	cr_assert_eq(f->snap_covered, 13);

	cr_assert_eq(part_truncate_to_sync(f, 7, 0), 0);   /* the ABORT marker and after */
	cr_assert_eq(f->pl->next_offset, 7);
	cr_assert_eq(verdict(f, 5, 5, &d), PRODUCER_APPEND, "sequence 5 was cut away: accepted again");
	cr_assert_eq(verdict(f, 5, 9, &d), PRODUCER_OUT_OF_ORDER, "sequence 9 is no longer known");
	cr_assert_eq(verdict(f, 5, 4, &d), PRODUCER_DUPLICATE);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, 100, pid, first, 4), 0, "the abort was cut away");
	cr_assert_eq(f->txn.lso, 5, "producer 9's transaction is open again");

	/* the follower goes on (a new leader's batches: here its own) past
	 * the old end, then reopens: neither the old snapshot nor the old
	 * abort comes back */
	for (int s = 5; s < 15; s++)
		produce(f, 5, s, 0);
	store_drain(&sh->st);
	end = f->pl->next_offset;
	cr_assert_gt(end, 13);
	/* a crash now (everything written): no snapshot or checkpoint at close */
	f->pl->err = -EIO;
	part_close(f);
	f = open_part("follower");
	cr_assert_eq(f->pl->next_offset, end);
	cr_assert_eq(verdict(f, 5, 14, &d), PRODUCER_DUPLICATE);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, end, pid, first, 4), 0);
	cr_assert_eq(f->txn.lso, 5);
	part_close(f);
	part_close(l);
}

/* A crash after an abort's record reached aborted.txns and before its
 * marker reached the log: the record is past the recovered end. It must
 * leave the file at that open, or it comes back as an abort of other
 * records once the log grows past its offsets again. */
Test(part_replica, an_abort_record_past_the_log_end_leaves_the_file_at_open)
{
	struct part *p = open_part("stale");
	int64_t pid[4], first[4], end;
	char path[4300];
	uint8_t rec[24];
	struct stat st;
	int fd;

	lead(p);                     /* producer 9's abort: 5..7 in the file */
	end = p->pl->next_offset;
	p->pl->err = -EIO;           /* a crash: nothing more at close */
	part_close(p);
	/* the record of an abort whose marker (at end + 4) never landed */
	snprintf(path, sizeof(path), "%s/stale/aborted.txns", dir);
	be64_store(rec, 77);
	be64_store(rec + 8, (uint64_t)end + 2);
	be64_store(rec + 16, (uint64_t)end + 4);
	fd = open(path, O_WRONLY | O_APPEND);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
	close(fd);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 48);

	p = open_part("stale");
	store_drain(&sh->st);
	cr_assert_eq(part_txn_aborted(&p->txn, 0, end, pid, first, 4), 1, "the real abort stays");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 24, "the stale record left the file");
	/* the log grows past the stale record's offsets, then a crash and an
	 * open: producer 77's records there were never aborted */
	for (int s = 10; s < 20; s++)
		produce(p, 5, s, 0);
	store_drain(&sh->st);
	cr_assert_gt(p->pl->next_offset, end + 4);
	p->pl->err = -EIO;
	part_close(p);
	p = open_part("stale");
	cr_assert_eq(part_txn_aborted(&p->txn, 0, p->pl->next_offset, pid, first, 4), 1, "no abort came back");
	cr_assert_eq(pid[0], 9);
	part_close(p);
}

/* A follower whose leader's log now starts above its end: its log starts
 * again there, and with it go the producers, the open transaction and
 * the aborts of the old log; also when a crash left "start-at" with the
 * old producer snapshot and abort records beside it. */
Test(part_replica, a_restart_at_the_leaders_log_start_resets_producers_and_aborts)
{
	struct part *l = open_part("leader"), *f = open_part("follower");
	int64_t pid[4], first[4];
	char path[4300];
	struct stat st;
	int fd;

	lead(l);
	cr_assert_eq(part_begin_txn(l, 11, 0, 1), 0);
	produce(l, 11, 0, 1);            /* a transaction left open at 13 */
	replicate(l, f, 0);
	part_snapshot_producers(f);
	while (f->snap.busy)
		store_poll(&sh->st, 1);
	cr_assert_eq(f->snap_covered, 14);
	cr_assert_eq(f->txn.lso, 13);
	cr_assert_gt(f->producers.n, 0);

	cr_assert_eq(part_start_at_sync(f, -1), -ERANGE);
	cr_assert_eq(part_start_at_sync(f, 100), 0);
	cr_assert_eq(f->pl->log_start, 100);
	cr_assert_eq(f->pl->next_offset, 100);
	cr_assert_eq(f->producers.n, 0, "no producer of the old log");
	cr_assert_eq(f->txn.lso, INT64_MAX, "no transaction open");
	cr_assert_eq(part_txn_aborted(&f->txn, 0, INT64_MAX, pid, first, 4), 0);
	snprintf(path, sizeof(path), "%s/follower/producers.snapshot", dir);
	cr_assert_neq(stat(path, &st), 0, "the snapshot is gone");
	part_close(f);
	f = open_part("follower");
	cr_assert_eq(f->pl->log_start, 100);
	cr_assert_eq(f->producers.n, 0);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, INT64_MAX, pid, first, 4), 0);
	part_close(f);

	/* a crash right after the commit point: the old log's snapshot and
	 * aborts still beside it; the open ignores them */
	f = open_part("again");
	replicate(l, f, 0);
	part_snapshot_producers(f);
	while (f->snap.busy)
		store_poll(&sh->st, 1);
	part_close(f);
	snprintf(path, sizeof(path), "%s/again/start-at", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "sluice-start-at 1 at 100\n", 25), 25);
	close(fd);
	f = open_part("again");
	cr_assert_eq(f->pl->recovery.start_redone, 1);
	cr_assert_eq(f->pl->log_start, 100);
	cr_assert_eq(f->producers.n, 0, "the old snapshot is not taken");
	cr_assert_eq(f->txn.lso, INT64_MAX);
	cr_assert_eq(part_txn_aborted(&f->txn, 0, INT64_MAX, pid, first, 4), 0);
	part_close(f);
	part_close(l);
}

/* Produce one record of pid at epoch with sequence seq (attrs: 0 or
 * BATCH_ATTR_TRANSACTIONAL), taken up at recv_ns: the partition's answer
 * (0, an enum part_err or -errno). */
static int produce_one(struct part *p, int16_t attrs, int64_t pid, int16_t epoch, int32_t seq, uint64_t recv_ns)
{
	uint8_t buf[512];
	struct batch_builder bb;
	ssize_t len;
	struct part_produce_req req = { .rec = buf, .acks = 0, .recv_ns = recv_ns };

	batch_builder_init(&bb, buf, sizeof(buf), 1000 + seq);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000 + seq, "k", 1, "value", 5, NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, attrs, -1, pid, epoch, seq);
	cr_assert_gt(len, 0);
	req.len = (uint32_t)len;
	last_err = -1000;
	part_produce(p, &req, produced, NULL);
	return last_err;
}

static int produce_txn(struct part *p, int64_t pid, int16_t epoch, int32_t seq, uint64_t recv_ns)
{
	return produce_one(p, BATCH_ATTR_TRANSACTIONAL, pid, epoch, seq, recv_ns);
}

/* The leader's side of transactions that WriteTxnMarkers and KIP-890's
 * verification build on: a transactional batch of a producer with no
 * transaction open here is PART_ERR_TXN_UNKNOWN (the handler asks the
 * coordinator, then begins it here), a late one of the open transaction
 * PART_ERR_TXN_STATE (refused, never asked about); a marker of an epoch
 * older than the producer's is refused (PART_ERR_OLD_EPOCH: Kafka's
 * INVALID_PRODUCER_EPOCH), of its epoch written. */
Test(part_replica, unbegun_writes_ask_late_ones_and_stale_markers_are_refused)
{
	struct part *p = open_part("m-0");
	int64_t marker = -1, end;

	cr_assert_eq(produce_txn(p, 9, 3, 0, 50), PART_ERR_TXN_UNKNOWN);
	cr_assert_eq(p->pl->next_offset, 0, "nothing appended");
	cr_assert_eq(part_begin_txn(p, 9, 3, 100), 0);
	cr_assert_eq(produce_txn(p, 9, 3, 0, 50), PART_ERR_TXN_STATE, "taken up before the transaction began");
	cr_assert_eq(produce_txn(p, 9, 3, 0, 150), 0);
	cr_assert_eq(produce_txn(p, 9, 2, 1, 150), PART_ERR_OLD_EPOCH);
	end = p->pl->next_offset;
	cr_assert_eq(part_append_marker(p, 9, 2, 1, 0, &marker), PART_ERR_OLD_EPOCH);
	cr_assert_eq(p->pl->next_offset, end, "the stale marker is not in the log");
	cr_assert_eq(p->txn.lso, 0, "the transaction is still open");
	cr_assert_eq(part_append_marker(p, 9, 3, 1, 0, &marker), 0);
	cr_assert_eq(marker, end);
	cr_assert_eq(p->txn.lso, INT64_MAX, "closed by its marker");
	cr_assert_eq(produce_txn(p, 9, 3, 1, 150), PART_ERR_TXN_UNKNOWN, "ended: the coordinator is asked again");
	cr_assert_eq(part_append_marker(p, 7, 0, 0, 0, &marker), 0, "a producer it never saw: written");
	part_close(p);
}

/* A log that failed (EIO: offline until a restart) refuses every batch of
 * an idempotent producer as the append does (KAFKA_STORAGE_ERROR at the
 * edge), also the one after a refused batch: a sequence check there
 * answered it OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka bumps its
 * epoch and numbers its unacknowledged records again, so that those the
 * log or a replica kept were appended twice after a restart (issue 20). */
Test(part_replica, a_failed_log_refuses_every_batch_before_the_sequence_check)
{
	struct part *p = open_part("failed");

	for (int s = 0; s < 3; s++)
		cr_assert_eq(produce(p, 5, s, 0), s);
	store_drain(&sh->st);
	p->pl->err = -EIO;           /* the disk failed */
	cr_assert_eq(produce_one(p, 0, 5, 0, 3, 10), -EROFS, "the next batch: the log's refusal");
	cr_assert_eq(produce_one(p, 0, 5, 0, 4, 10), -EROFS, "the one after it: the log's refusal, not a sequence gap");
	cr_assert_eq(produce_one(p, 0, 5, 0, 2, 10), -EROFS, "a resend: refused too (a new leader answers it)");
	cr_assert_eq(produce_one(p, 0, 8, 0, 0, 10), -EROFS, "a new producer");
	part_close(p);
}
