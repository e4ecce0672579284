/* tests/unit/test_part_proxy.c — the partition proxy (dataplane/part_proxy.h):
 * one shard polled in the test's thread with an injected clock, the test
 * thread standing in for the control thread, the sender. Each operation
 * goes to the owner as one ring message; its completion comes back over
 * the other ring and runs here, on the sender's side, with self = the
 * sender's object. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataplane/part.h"
#include "dataplane/part_proxy.h"
#include "dataplane/part_role.h"
#include "dataplane/part_table.h"
#include "dataplane/shard.h"
#include "broker_fixture.h"
#include "helpers.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

static struct broker b;
static struct shard *sh;
static struct spsc to_shard, to_ctl;
static struct shard_msg to_shard_slots[RING_SLOTS], to_ctl_slots[RING_SLOTS];
static int ctl_sleeping;
static char *dir;
static char pdir[4200];

static const int32_t node1[1] = { 1 };   /* the fixture's node id: it leads the partition */
static struct md_partition mpart = { .index = 0, .owner_shard = 0, .leader = 1, .nreplicas = 1, .nisr = 1,
				     .replicas = node1, .isr = node1 };
static struct part_pub mpub;   /* where the owner publishes its struct part for the shards */
static struct md_topic *topics[1];
static struct md_topic topic;
static struct md_snapshot md = { .version = 1, .ntopics = 1, .topics = topics };

#define T0 1000000000ull
#define A0 part_addr_of(topic.id, 0)   /* the partition by value, as every request names it */

/* the sender: "the control thread", whose object is `sender` */
static int sender;
static struct part_proxy px;
static int calls;          /* completions run on the sender's side */

static void test_send(void *ctx, int to, const struct shard_msg *m)
{
	cr_assert_eq(ctx, &sender);
	cr_assert_eq(broker_send(&b, broker_ctl_index(&b), to, m), 0, "the test's ring is never full");
}

static void setup(void)
{
	dir = test_broker_init(&b, -1);
	snprintf(pdir, sizeof(pdir), "%s/t-0", dir);
	spsc_init(&to_shard, to_shard_slots, RING_SLOTS);
	spsc_init(&to_ctl, to_ctl_slots, RING_SLOTS);
	b.rings[1][0] = &to_shard;
	b.rings[0][1] = &to_ctl;
	b.sleeping[1] = &ctl_sleeping;

	topic.name = "t";
	topic.name_len = 1;
	topic.nparts = 1;
	topic.parts = &mpart;
	topic.max_message_bytes = 1u << 20;
	plog_config_defaults(&topic.cfg);
	for (int i = 0; i < 16; i++)
		topic.id[i] = (uint8_t)(0xa0 + i);
	topics[0] = &topic;
	memset(&mpub, 0, sizeof(mpub));
	mpart.pub = &mpub;   /* as the control thread publishes it */
	b.md = &md;

	sh = test_shard_start(&b);
	px = (struct part_proxy){ .from = broker_ctl_index(&b), .send = test_send, .ctx = &sender };
	calls = 0;
}

static void teardown(void)
{
	test_shard_stop(&b, sh, 1, T0, dir);
	sh = NULL;
}

TestSuite(part_proxy, .init = setup, .fini = teardown, .timeout = 60);

/* Turns of the shard until `want` completions have run here (or 5000
 * turns); the clock moves 1 ms a turn. Messages the shard sent to the
 * sender run between turns, in the test's thread: the sender's loop. */
static uint64_t now = T0;
static void run_until(int want)
{
	for (int i = 0; i < 5000 && calls < want; i++) {
		struct shard_msg m;

		now += 1000000;
		if (shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000)) == 0)
			shard_idle(sh);
		while (spsc_pop(&to_ctl, &m))
			m.fn(&sender, &m);
	}
	cr_assert_geq(calls, want, "the completion never came");
}

/* ---- completions -------------------------------------------------------- */

static struct part *opened;
static int open_err = -1000;
static struct part_open_report report;

static void on_open(void *self, void *cookie, int err, const struct part_open_report *rep)
{
	cr_assert_eq(self, &sender, "runs on the sender's side");
	cr_assert_eq(cookie, &opened);
	cr_assert_eq(rep, &report);
	opened = err ? NULL : sh->parts;   /* the test looks: the sender is given no handle */
	open_err = err;
	calls++;
}

static int done_err = -1000;

static void on_done(void *self, void *cookie, int err)
{
	cr_assert_eq(self, &sender);
	cr_assert_eq(cookie, &done_err);
	done_err = err;
	calls++;
}

static int64_t appended[8];
static int append_err[8];

static void on_appended(void *self, void *cookie, int64_t base, int err)
{
	int i = (int)(intptr_t)cookie;

	cr_assert_eq(self, &sender);
	appended[i] = base;
	append_err[i] = err;
	calls++;
}

static int64_t read_offsets[64];
static int nread, read_ends;

static void on_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t index)
{
	cr_assert_eq(self, &sender);
	cr_assert_eq(cookie, &nread);
	cr_assert_eq(index, 0);
	for (uint32_t at = 0; at + BATCH_LOG_OVERHEAD <= len; at += batch_size(buf + at)) {
		cr_assert_lt(nread, 64);
		read_offsets[nread++] = batch_base_offset(buf + at);
	}
}

static void on_end(void *self, void *cookie)
{
	cr_assert_eq(self, &sender);
	cr_assert_eq(cookie, &nread);
	read_ends++;
	calls++;
}

/* ---- helpers ------------------------------------------------------------ */

static void open_partition(void)
{
	int want = calls + 1;
	struct md_partition before = mpart;

	part_proxy_open(&px, 0, pdir, &topic, &mpart, &mpub, &report, on_open, &opened);
	cr_assert_eq(calls, want - 1, "nothing runs before the shard's turn");
	run_until(want);
	cr_assert_eq(open_err, 0, "open: %d", open_err);
	cr_assert_not_null(opened);
	cr_assert(!memcmp(&before, &mpart, sizeof(mpart)), "the owner writes nothing of the sender's metadata entry");
	cr_assert_eq(md_part_owner(&mpart), opened, "the owner published its partition for the shards");
	cr_assert_eq(part_table_find(&sh->part_tab, topic.id, 0), opened, "and keyed it by (topic id, index)");
	cr_assert_eq(sh->parts, opened, "and linked it into its list");
}

/* A batch of n records with keys "k<i>". */
static uint8_t *make_batch(int n, uint32_t *len)
{
	size_t cap = 256 + (size_t)n * 64;
	uint8_t *buf = calloc(1, cap);
	struct batch_builder bb;
	ssize_t l;

	cr_assert_not_null(buf);
	batch_builder_init(&bb, buf, cap, 1700000000000);
	for (int i = 0; i < n; i++) {
		char k[16];
		int kl = snprintf(k, sizeof(k), "k%d", i);

		cr_assert_eq(batch_builder_add(&bb, i, 1700000000000, k, kl, "v", 1, NULL, 0, 0), 0);
	}
	l = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(l, 0);
	*len = (uint32_t)l;
	return buf;
}

/* ---- the tests ---------------------------------------------------------- */

Test(part_proxy, open_reports_a_new_directory_and_a_clean_recovery)
{
	open_partition();
	cr_assert_eq(report.made, 1, "the directory did not exist");
	cr_assert_eq(report.noteworthy, 0);
	cr_assert_eq(report.damaged, 0);
}

Test(part_proxy, open_append_read_configure_close)
{
	struct part_append_req req[3];
	uint8_t *batch[3];
	int counts[3] = { 3, 1, 5 };
	int64_t want_base = 0;
	struct plog_config cfg;

	open_partition();

	/* three appends in flight at once: each durable with its base offset */
	for (int i = 0; i < 3; i++) {
		batch[i] = make_batch(counts[i], &req[i].len);
		req[i].batch = batch[i];
		req[i].done = on_appended;
		req[i].cookie = (void *)(intptr_t)i;
		appended[i] = -2;
		part_proxy_append(&px, 0, A0, &req[i]);
	}
	run_until(calls + 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(append_err[i], 0, "append %d: %d", i, append_err[i]);
		cr_assert_eq(appended[i], want_base, "append %d at %lld, wanted %lld", i, (long long)appended[i],
			     (long long)want_base);
		want_base += counts[i];
	}
	cr_assert_geq(opened->pl->high_watermark, want_base, "durable before the completion");

	/* the range back: all three batches, then the end */
	nread = 0;
	read_ends = 0;
	part_proxy_read(&px, 0, A0, 0, INT64_MAX, on_chunk, on_end, &nread);
	run_until(calls + 1);
	cr_assert_eq(read_ends, 1);
	cr_assert_eq(nread, 3);
	cr_assert_eq(read_offsets[0], 0);
	cr_assert_eq(read_offsets[1], 3);
	cr_assert_eq(read_offsets[2], 4);

	/* a range that starts at the second batch */
	nread = 0;
	part_proxy_read(&px, 0, A0, 3, INT64_MAX, on_chunk, on_end, &nread);
	run_until(calls + 1);
	cr_assert_eq(nread, 2);
	cr_assert_eq(read_offsets[0], 3);

	/* new settings: the owner takes them (segment size bounds the extent) */
	cfg = topic.cfg;
	cfg.segment_bytes = 1u << 20;
	cfg.initial_extent = 4u << 20;
	done_err = -1000;
	part_proxy_set_config(&px, 0, A0, &cfg, on_done, &done_err);
	run_until(calls + 1);
	cr_assert_eq(done_err, 0);
	cr_assert_eq(opened->pl->cfg.segment_bytes, 1u << 20);
	cr_assert_eq(opened->pl->cfg.initial_extent, 1u << 20);

	/* close: out of the owner's list */
	done_err = -1000;
	part_proxy_close(&px, 0, A0, on_done, &done_err);
	run_until(calls + 1);
	cr_assert_eq(done_err, 0);
	cr_assert_null(sh->parts, "the owner's list no longer holds it");
	for (int i = 0; i < 3; i++)
		free(batch[i]);
}

Test(part_proxy, append_to_a_retired_partition_fails_with_enoent)
{
	struct part_append_req req;
	uint8_t *batch;

	open_partition();
	done_err = -1000;
	part_proxy_retire(&px, 0, A0, on_done, &done_err);
	run_until(calls + 1);
	cr_assert_eq(done_err, 0);
	cr_assert_null(sh->parts);
	cr_assert_eq(sh->retired_parts, opened, "kept until the shard exits");

	batch = make_batch(1, &req.len);
	req.batch = batch;
	req.done = on_appended;
	req.cookie = (void *)(intptr_t)0;
	part_proxy_append(&px, 0, A0, &req);
	run_until(calls + 1);
	cr_assert_eq(append_err[0], -ENOENT);
	cr_assert_eq(appended[0], -1);
	free(batch);
}

Test(part_proxy, reopen_reports_what_recovery_read)
{
	struct part_append_req req;
	uint8_t *batch;

	open_partition();
	batch = make_batch(4, &req.len);
	req.batch = batch;
	req.done = on_appended;
	req.cookie = (void *)(intptr_t)0;
	part_proxy_append(&px, 0, A0, &req);
	run_until(calls + 1);
	cr_assert_eq(append_err[0], 0);
	done_err = -1000;
	part_proxy_close(&px, 0, A0, on_done, &done_err);
	run_until(calls + 1);
	free(batch);

	memset(&report, 0xff, sizeof(report));
	open_partition();
	cr_assert_eq(report.made, 0, "the directory was there");
	cr_assert_geq(report.segments, 1);
	cr_assert_eq(report.noteworthy, 0);
	cr_assert_eq(opened->pl->next_offset, 4);
}

/* The leader epoch: the partition opens at its metadata entry's epoch (or
 * its log's, when that is higher), and the sender moves it through the
 * proxy: stamped into the batches appended after, kept in the epoch cache;
 * a lower epoch is refused, a retired partition answers -ENOENT. */
Test(part_proxy, the_leader_epoch_is_set_through_the_proxy)
{
	struct part_append_req req;
	uint8_t *batch;
	int32_t e;
	int64_t end;

	mpart.leader_epoch = 2;
	open_partition();
	cr_assert_eq(report.leader_epoch, 2, "opens at the metadata's epoch");
	cr_assert_eq(opened->pl->leader_epoch, 2);
	batch = make_batch(4, &req.len);
	req.batch = batch;
	req.done = on_appended;
	req.cookie = (void *)(intptr_t)0;
	part_proxy_append(&px, 0, A0, &req);
	run_until(calls + 1);
	cr_assert_eq(append_err[0], 0);

	done_err = -1000;
	part_proxy_set_leader_epoch(&px, 0, A0, 5, on_done, &done_err);
	cr_assert_eq(opened->pl->leader_epoch, 2, "nothing changes before the owner's turn");
	run_until(calls + 1);
	cr_assert_eq(done_err, 0);
	cr_assert_eq(opened->pl->leader_epoch, 5);
	plog_epoch_end_offset(opened->pl, 2, &e, &end);
	cr_assert_eq(e, 2);
	cr_assert_eq(end, 4, "epoch 2 ended where 5 began");
	part_proxy_append(&px, 0, A0, &req);
	run_until(calls + 1);
	cr_assert_eq(appended[0], 4);
	plog_epoch_end_offset(opened->pl, 5, &e, &end);
	cr_assert_eq(e, 5);
	cr_assert_eq(end, 8);

	done_err = -1000;
	part_proxy_set_leader_epoch(&px, 0, A0, 4, on_done, &done_err);
	run_until(calls + 1);
	cr_assert_eq(done_err, -ESTALE, "a lower epoch is refused");
	cr_assert_eq(opened->pl->leader_epoch, 5);

	/* reopened with an older metadata entry: the log's epoch wins */
	done_err = -1000;
	part_proxy_close(&px, 0, A0, on_done, &done_err);
	run_until(calls + 1);
	mpart.leader_epoch = 1;
	open_partition();
	cr_assert_eq(report.leader_epoch, 5);
	cr_assert_eq(opened->pl->leader_epoch, 5);

	done_err = -1000;
	part_proxy_retire(&px, 0, A0, on_done, &done_err);
	run_until(calls + 1);
	done_err = -1000;
	part_proxy_set_leader_epoch(&px, 0, A0, 9, on_done, &done_err);
	run_until(calls + 1);
	cr_assert_eq(done_err, -ENOENT);
	mpart.leader_epoch = 0;
	free(batch);
}

/* ---- a partition gone between the send and the arrival ----------------- */

static void on_done_into(void *self, void *cookie, int err)
{
	cr_assert_eq(self, &sender);
	*(int *)cookie = err;
	calls++;
}

static int64_t marker_base = -2;
static int marker_err = -1000;

static void on_marker(void *self, void *cookie, int64_t base, int err)
{
	cr_assert_eq(self, &sender);
	cr_assert_eq(cookie, &marker_base);
	marker_base = base;
	marker_err = err;
	calls++;
}

static int64_t lag_hw = -2, lag_ts = -2;

static void on_lag(void *self, void *cookie, int64_t hw, int64_t oldest_ts)
{
	cr_assert_eq(self, &sender);
	cr_assert_eq(cookie, &lag_hw);
	lag_hw = hw;
	lag_ts = oldest_ts;
	calls++;
}

/* Every request names the partition by value: when the owner closed
 * (freed) or retired it before the request arrived, the owner's table no
 * longer has it and the sender gets the error answer. With the handle the
 * sender used to hold, these requests ran on the freed struct (under
 * ASan: heap-use-after-free in the owner's set_config/append/...).
 * `close` frees the struct; `retire` keeps it. */
static void requests_after_the_partition_went(int close)
{
	enum { GONE, CONFIG, EPOCH, ROLE, BEGIN, RETIRE, CLOSE, N };
	int err[N];
	struct part_append_req req = { 0 };
	struct part_marker_req mk = { .pid = 7, .epoch = 0, .commit = 1, .done = on_marker, .cookie = &marker_base };
	struct part_lag_req lag = { .committed = 0, .done = on_lag, .cookie = &lag_hw };
	struct part_role_msg role = { .self = 1, .leader = 1, .leader_epoch = 3, .nreplicas = 1, .nisr = 1,
				      .replicas = { 1 }, .isr = { 1 } };
	struct plog_config cfg = topic.cfg;
	uint8_t *batch;
	int want;

	open_partition();
	for (int i = 0; i < N; i++)
		err[i] = -1000;
	batch = make_batch(2, &req.len);
	req.batch = batch;
	req.done = on_appended;
	req.cookie = (void *)(intptr_t)0;
	appended[0] = -2;
	append_err[0] = -1000;
	nread = 0;
	read_ends = 0;

	/* all sent before the owner's turn: the first one takes the partition away */
	want = calls + 12;
	if (close)
		part_proxy_close(&px, 0, A0, on_done_into, &err[GONE]);
	else
		part_proxy_retire(&px, 0, A0, on_done_into, &err[GONE]);
	part_proxy_append(&px, 0, A0, &req);
	part_proxy_set_config(&px, 0, A0, &cfg, on_done_into, &err[CONFIG]);
	part_proxy_set_leader_epoch(&px, 0, A0, 3, on_done_into, &err[EPOCH]);
	part_proxy_set_role(&px, 0, A0, &role, on_done_into, &err[ROLE]);
	part_proxy_txn_begin(&px, 0, A0, 7, 0, T0, on_done_into, &err[BEGIN]);
	part_proxy_txn_marker(&px, 0, A0, &mk);
	part_proxy_lag(&px, 0, A0, &lag);
	part_proxy_read(&px, 0, A0, 0, INT64_MAX, on_chunk, on_end, &nread);
	part_proxy_read(&px, 0, A0, 0, PART_READ_LOG_END, on_chunk, on_end, &nread);
	part_proxy_retire(&px, 0, A0, on_done_into, &err[RETIRE]);
	part_proxy_close(&px, 0, A0, on_done_into, &err[CLOSE]);
	cr_assert_lt(calls, want, "nothing runs before the shard's turn");
	run_until(want);

	cr_assert_eq(err[GONE], 0, "the close or retire itself");
	cr_assert_null(sh->parts);
	cr_assert_null(part_table_find(&sh->part_tab, topic.id, 0), "out of the owner's table");
	cr_assert_eq(append_err[0], -ENOENT, "append: %d", append_err[0]);
	cr_assert_eq(appended[0], -1);
	cr_assert_eq(err[CONFIG], -ENOENT);
	cr_assert_eq(err[EPOCH], -ENOENT);
	cr_assert_eq(err[ROLE], -ENOENT);
	cr_assert_eq(err[BEGIN], -ENOENT);
	cr_assert_eq(marker_err, 0, "nothing to mark: answered as for a deleted partition");
	cr_assert_eq(marker_base, -1);
	cr_assert_eq(lag_hw, -1, "the lag of a partition that is gone");
	cr_assert_eq(lag_ts, -1);
	cr_assert_eq(read_ends, 2, "each read ends");
	cr_assert_eq(nread, 0, "with nothing read");
	cr_assert_eq(err[RETIRE], -ENOENT, "nothing left to retire");
	cr_assert_eq(err[CLOSE], -ENOENT, "nothing left to close");
	if (!close)
		cr_assert_eq(sh->retired_parts, opened, "a retired struct is kept until the shard exits");
	free(batch);
}

Test(part_proxy, requests_for_a_partition_closed_before_they_arrive_get_errors)
{
	requests_after_the_partition_went(1);
}

Test(part_proxy, requests_for_a_partition_retired_before_they_arrive_get_errors)
{
	requests_after_the_partition_went(0);
}

/* Another topic's partition under the same index is not this one: the
 * owner matches the whole (topic id, index). */
Test(part_proxy, a_request_for_another_topic_finds_nothing)
{
	uint8_t other[16];
	int err = -1000;

	open_partition();
	memcpy(other, topic.id, sizeof(other));
	other[0] ^= 1;
	part_proxy_set_leader_epoch(&px, 0, part_addr_of(other, 0), 3, on_done_into, &err);
	run_until(calls + 1);
	cr_assert_eq(err, -ENOENT);
	err = -1000;
	part_proxy_set_leader_epoch(&px, 0, part_addr_of(topic.id, 1), 3, on_done_into, &err);
	run_until(calls + 1);
	cr_assert_eq(err, -ENOENT);
	cr_assert_eq(opened->pl->leader_epoch, 0, "the open partition untouched");
}
