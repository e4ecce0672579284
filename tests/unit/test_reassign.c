/* tests/unit/test_reassign.c — the steps of a partition reassignment
 * (control/reassign.h: the target set's adding and removing replicas, its
 * completion once they are in sync, a cancel), the replication throttle's
 * byte budget (dataplane/repl_throttle.h), and the PARTITION_REASSIGN
 * record in the metadata image (control/meta_parts.h): applied, refused
 * at another partition epoch, carried by a snapshot without moving an
 * epoch. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/reassign.h"
#include "dataplane/repl_throttle.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void same(const int32_t *got, int n, const int32_t *want, int nwant, const char *what)
{
	cr_assert_eq(n, nwant, "%s: %d ids, not %d", what, n, nwant);
	for (int i = 0; i < n; i++)
		cr_assert_eq(got[i], want[i], "%s[%d]: %d, not %d", what, i, got[i], want[i]);
}

Test(reassign, a_target_adds_what_it_lacks_and_removes_what_it_leaves_the_target_first)
{
	int32_t r[] = { 1, 2 }, isr[] = { 1, 2 }, t[] = { 2, 3 };
	struct reassign_state s = { .replicas = r, .nreplicas = 2, .isr = isr, .nisr = 2, .leader = 1 };
	struct reassign_plan p;

	cr_assert_eq(reassign_start(&s, t, 2, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 2, 3, 1 }, 3, "replicas");
	same(p.adding, p.nadding, (int32_t[]){ 3 }, 1, "adding");
	same(p.removing, p.nremoving, (int32_t[]){ 1 }, 1, "removing");
	cr_assert_eq(p.leader, -2, "the leader stays while the new replica catches up");
	cr_assert_eq(p.nisr, -1, "the ISR stays");
}

Test(reassign, the_replicas_as_they_are_is_nothing_to_do_and_a_new_order_is_a_record)
{
	int32_t r[] = { 1, 2 }, isr[] = { 1, 2 };
	struct reassign_state s = { .replicas = r, .nreplicas = 2, .isr = isr, .nisr = 2, .leader = 1 };
	struct reassign_plan p;

	cr_assert_eq(reassign_start(&s, (int32_t[]){ 1, 2 }, 2, &p), 0);
	cr_assert_eq(reassign_start(&s, (int32_t[]){ 2, 1 }, 2, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 2, 1 }, 2, "replicas");
	cr_assert_eq(p.nadding + p.nremoving, 0);
}

Test(reassign, completes_only_once_every_adding_replica_is_in_sync_and_a_removed_leader_hands_over)
{
	int32_t r[] = { 2, 3, 1 }, isr[] = { 1, 2 }, add[] = { 3 }, rm[] = { 1 };
	struct reassign_state s = { .replicas = r, .nreplicas = 3, .isr = isr, .nisr = 2, .adding = add,
				    .nadding = 1, .removing = rm, .nremoving = 1, .leader = 1 };
	int32_t isr2[] = { 1, 2, 3 };
	struct reassign_plan p;

	cr_assert_eq(reassign_complete(&s, &p), 0, "3 is not in sync yet");
	s.isr = isr2;
	s.nisr = 3;
	cr_assert_eq(reassign_complete(&s, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 2, 3 }, 2, "replicas");
	same(p.isr, p.nisr, (int32_t[]){ 2, 3 }, 2, "isr");
	cr_assert_eq(p.leader, 2, "the leader being removed hands over to the target's first in sync");
	s.leader = 3;
	cr_assert_eq(reassign_complete(&s, &p), 1);
	cr_assert_eq(p.leader, -2, "a leader in the target keeps leading");
}

Test(reassign, a_removal_alone_completes_at_once_and_nothing_in_progress_never_completes)
{
	int32_t r[] = { 1, 2, 3 }, isr[] = { 1, 2, 3 }, t[] = { 3, 2 };
	struct reassign_state s = { .replicas = r, .nreplicas = 3, .isr = isr, .nisr = 3, .leader = 1 };
	struct reassign_plan p, q;

	cr_assert_eq(reassign_complete(&s, &p), 0);
	cr_assert_eq(reassign_cancel(&s, &p), 0, "a cancel with nothing in progress");
	cr_assert_eq(reassign_start(&s, t, 2, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 3, 2, 1 }, 3, "replicas");
	cr_assert_eq(p.nadding, 0);
	s.replicas = p.replicas;
	s.nreplicas = p.nreplicas;
	s.adding = p.adding;
	s.nadding = 0;
	s.removing = p.removing;
	s.nremoving = p.nremoving;
	cr_assert_eq(reassign_complete(&s, &q), 1);
	same(q.replicas, q.nreplicas, (int32_t[]){ 3, 2 }, 2, "replicas");
	cr_assert_eq(q.leader, 3);
}

Test(reassign, a_cancel_restores_the_replicas_before_and_drops_the_adding_ones_from_the_isr)
{
	int32_t r[] = { 2, 3, 1 }, isr[] = { 1, 2, 3 }, add[] = { 3 }, rm[] = { 1 };
	struct reassign_state s = { .replicas = r, .nreplicas = 3, .isr = isr, .nisr = 3, .adding = add,
				    .nadding = 1, .removing = rm, .nremoving = 1, .leader = 3 };
	struct reassign_plan p;

	cr_assert_eq(reassign_cancel(&s, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 2, 1 }, 2, "replicas");
	same(p.isr, p.nisr, (int32_t[]){ 1, 2 }, 2, "isr");
	cr_assert_eq(p.leader, 2, "an adding replica that came to lead hands over");
	cr_assert_eq(p.nadding + p.nremoving, 0);
}

Test(reassign, a_new_target_replaces_the_one_in_progress_from_the_replicas_before_it)
{
	int32_t r[] = { 2, 3, 1 }, isr[] = { 1, 2 }, add[] = { 3 }, rm[] = { 1 }, t[] = { 4, 2 };
	struct reassign_state s = { .replicas = r, .nreplicas = 3, .isr = isr, .nisr = 2, .adding = add,
				    .nadding = 1, .removing = rm, .nremoving = 1, .leader = 1 };
	struct reassign_plan p;

	cr_assert_eq(reassign_start(&s, t, 2, &p), 1);
	same(p.replicas, p.nreplicas, (int32_t[]){ 4, 2, 1 }, 3, "replicas (3 no longer)");
	same(p.adding, p.nadding, (int32_t[]){ 4 }, 1, "adding");
	same(p.removing, p.nremoving, (int32_t[]){ 1 }, 1, "removing");
}

Test(reassign, a_target_is_refused_empty_with_a_broker_twice_or_one_not_registered)
{
	int32_t known[] = { 1, 2, 3 }, bad = 0;

	cr_assert_eq(reassign_check_target(NULL, 0, known, 3, &bad), REASSIGN_EMPTY);
	cr_assert_eq(reassign_check_target((int32_t[]){ 2, 2 }, 2, known, 3, &bad), REASSIGN_DUPLICATE);
	cr_assert_eq(bad, 2);
	cr_assert_eq(reassign_check_target((int32_t[]){ 2, 9 }, 2, known, 3, &bad), REASSIGN_UNKNOWN_BROKER);
	cr_assert_eq(bad, 9);
	cr_assert_eq(reassign_check_target((int32_t[]){ -1 }, 1, known, 3, &bad), REASSIGN_UNKNOWN_BROKER);
	cr_assert_eq(reassign_check_target((int32_t[]){ 3, 1 }, 2, known, 3, &bad), REASSIGN_OK);
}

/* ---- the throttle's budget ----------------------------------------------- */

#define MS 1000000ull

Test(repl_throttle, no_rate_is_no_limit_and_a_rate_fills_by_the_elapsed_time_up_to_one_second)
{
	struct repl_throttle t = { 0 };
	uint64_t now = 5000 * MS;

	cr_assert_eq(repl_throttle_avail(&t, 0, now), INT64_MAX);
	cr_assert_eq(repl_throttle_avail(&t, REPL_THROTTLE_NONE, now), INT64_MAX);
	repl_throttle_spend(&t, 1 << 20);
	cr_assert_eq(repl_throttle_avail(&t, 0, now), INT64_MAX, "spending without a rate changes nothing");
	cr_assert_eq(repl_throttle_avail(&t, 1000000, now), 0, "a throttle starts with nothing saved");
	cr_assert_eq(repl_throttle_avail(&t, 1000000, now + 100 * MS), 100000);
	cr_assert_eq(repl_throttle_avail(&t, 1000000, now + 250 * MS), 250000);
	cr_assert_eq(repl_throttle_avail(&t, 1000000, now + 10000 * MS), 1000000, "at most a second's worth");
}

Test(repl_throttle, an_overspent_budget_waits_until_refilled_so_the_rate_holds_over_time)
{
	struct repl_throttle t = { 0 };
	uint64_t now = 1000 * MS;
	int64_t fetched = 0, rate = 2000000;

	repl_throttle_avail(&t, rate, now);
	/* a fetcher asking every 10 ms, each answer one whole 1 MiB batch
	 * whatever it asked for (an answer carries at least one batch) */
	for (int i = 1; i <= 1000; i++) {
		now += 10 * MS;
		if (repl_throttle_avail(&t, rate, now) > 0) {
			repl_throttle_spend(&t, 1 << 20);
			fetched += 1 << 20;
		}
	}
	/* 10 s at 2 MB/s: 20 MB, give or take the one batch in flight */
	cr_assert_leq(fetched, rate * 10 + (1 << 20), "fetched %lld", (long long)fetched);
	cr_assert_geq(fetched, rate * 10 - (2 << 20), "fetched %lld", (long long)fetched);
}

Test(repl_throttle, a_small_rate_loses_no_fraction_of_a_byte)
{
	struct repl_throttle t = { 0 };
	uint64_t now = 1 * MS;

	repl_throttle_avail(&t, 10, now);
	for (int i = 0; i < 100; i++)
		repl_throttle_avail(&t, 10, now += 10 * MS);   /* 0.1 byte a call */
	cr_assert_eq(repl_throttle_avail(&t, 10, now), 10, "a second at 10 bytes/s is 10 bytes");
}

/* ---- the record in the image --------------------------------------------- */

static void apply(struct metalog *ml, const struct metalog_rec *r, int want)
{
	int rc = metalog_apply_at(ml, 0, r->buf, r->len, NULL);

	cr_assert_eq(rc, want, "apply: %d, not %d", rc, want);
}

Test(reassign_record, applied_it_notes_the_moving_replicas_refused_at_another_epoch_and_a_snapshot_keeps_it)
{
	struct metalog *ml = NULL, *back = NULL;
	struct metalog_rec *recs = NULL, r, stale;
	int nrecs = 0;
	int32_t placed[] = { 1, 2 };
	const struct meta_part *p;
	void *snap = NULL;
	size_t len = 0;

	cr_assert_eq(metalog_image_new(1, &ml), 0);
	cr_assert_eq(metalog_build_topic_placed(ml, "t", 1, NULL, NULL, 0, 2, placed, &recs, &nrecs), 0);
	for (int i = 0; i < nrecs; i++)
		apply(ml, &recs[i], 0);
	metalog_recs_free(recs, nrecs);
	/* start: replicas 2,3,1, adding 3, removing 1 */
	cr_assert_eq(metalog_build_partition_reassign(ml, "t", 0, -2, NULL, 0, (int32_t[]){ 2, 3, 1 }, 3,
						      (int32_t[]){ 3 }, 1, (int32_t[]){ 1 }, 1, &r), 0);
	cr_assert_eq(metalog_build_partition_reassign(ml, "t", 0, -2, NULL, 0, (int32_t[]){ 2, 1 }, 2, NULL, 0, NULL, 0,
						      &stale), 0);
	cr_assert_eq(metalog_build_partition_reassign(ml, "t", 0, -2, NULL, 0, (int32_t[]){ 2, 1 }, 2,
						      (int32_t[]){ 3 }, 1, NULL, 0, &(struct metalog_rec){ 0 }),
		     -EINVAL, "an adding replica that is not a replica");
	apply(ml, &r, 0);
	p = &metalog_topic(ml, "t")->parts[0];
	same(p->replicas, p->nreplicas, (int32_t[]){ 2, 3, 1 }, 3, "replicas");
	same(p->moving, p->nadding, (int32_t[]){ 3 }, 1, "adding");
	same(p->moving + p->nadding, p->nremoving, (int32_t[]){ 1 }, 1, "removing");
	cr_assert_eq(p->partition_epoch, 1);
	cr_assert_eq(p->leader, 1);
	apply(ml, &stale, -ESTALE);   /* built at epoch 0 */
	metalog_rec_free(&r);
	metalog_rec_free(&stale);

	cr_assert_eq(metalog_snapshot(ml, &snap, &len), 0);
	cr_assert_eq(metalog_image_new(1, &back), 0);
	cr_assert_eq(metalog_restore(back, snap, len), 0);
	free(snap);
	p = &metalog_topic(back, "t")->parts[0];
	same(p->replicas, p->nreplicas, (int32_t[]){ 2, 3, 1 }, 3, "replicas after the snapshot");
	same(p->moving, p->nadding, (int32_t[]){ 3 }, 1, "adding after the snapshot");
	same(p->moving + p->nadding, p->nremoving, (int32_t[]){ 1 }, 1, "removing after the snapshot");
	cr_assert_eq(p->partition_epoch, 1, "the snapshot's note moves no epoch");
	cr_assert_eq(p->leader_epoch, metalog_topic(ml, "t")->parts[0].leader_epoch);

	/* completed: 2,3, no reassignment left, a new leader */
	cr_assert_eq(metalog_build_partition_reassign(back, "t", 0, 2, (int32_t[]){ 2 }, 1, (int32_t[]){ 2, 3 }, 2, NULL,
						      0, NULL, 0, &r), 0);
	apply(back, &r, 0);
	metalog_rec_free(&r);
	p = &metalog_topic(back, "t")->parts[0];
	cr_assert_eq(p->nadding + p->nremoving, 0);
	cr_assert(!meta_part_reassigning(p));
	cr_assert_eq(p->leader, 2);
	cr_assert_eq(p->partition_epoch, 2);
	metalog_close(ml);
	metalog_close(back);
}

Test(reassign, a_throttled_replica_list_names_a_partition_on_a_broker_or_all_with_a_star)
{
	cr_assert(reassign_throttle_names("*", 7, 3));
	cr_assert(reassign_throttle_names(" * ", 0, 1));
	cr_assert(reassign_throttle_names("0:1,1:2", 1, 2));
	cr_assert(reassign_throttle_names(" 0 : 1 , 2:3 ", 2, 3));
	cr_assert(!reassign_throttle_names("0:1,1:2", 1, 1), "partition 1 on broker 2, not 1");
	cr_assert(!reassign_throttle_names("0:1,1:2", 2, 2));
	cr_assert(!reassign_throttle_names("10:1", 1, 1));
	cr_assert(!reassign_throttle_names("", 0, 1));
}
