/* tests/unit/test_election.c — who leads a partition (control/election.h),
 * a pure function: replicas, ISR, leader, live brokers and the unclean
 * setting in; the leader and ISR out, as Kafka's PartitionChangeBuilder
 * chooses them. One table of cases per kind of election. */
#include <criterion/criterion.h>
#include <string.h>

#include "control/election.h"

#define L(...) { __VA_ARGS__ }
#define END (-99)

/* ids up to END */
static int ids_n(const int32_t *ids)
{
	int n = 0;

	while (ids[n] != END)
		n++;
	return n;
}

struct ecase {
	const char *what;
	int32_t replicas[8], isr[8], live[8];
	int32_t leader;
	int unclean;
	/* expected */
	int32_t want_leader;
	int32_t want_isr[8];
	int want_unclean;
	int want_result;             /* election_on_brokers: changed; else enum election_result */
};

static void run(const struct ecase *c, int kind)
{
	struct election_in in = {
		.replicas = c->replicas, .nreplicas = ids_n(c->replicas),
		.isr = c->isr, .nisr = ids_n(c->isr),
		.leader = c->leader, .live = c->live, .nlive = ids_n(c->live), .unclean = c->unclean,
	};
	struct election_out out;
	int rc = kind == 0 ? election_on_brokers(&in, &out)
		 : kind == 1 ? (int)election_preferred(&in, &out) : (int)election_unclean(&in, &out);
	int nwant = ids_n(c->want_isr);

	cr_assert_eq(rc, c->want_result, "%s: result %d, want %d", c->what, rc, c->want_result);
	cr_assert_eq(out.leader, c->want_leader, "%s: leader %d, want %d", c->what, out.leader, c->want_leader);
	cr_assert_eq(out.nisr, nwant, "%s: ISR of %d, want %d", c->what, out.nisr, nwant);
	for (int i = 0; i < nwant; i++)
		cr_assert_eq(out.isr[i], c->want_isr[i], "%s: ISR[%d] %d, want %d", c->what, i, out.isr[i],
			     c->want_isr[i]);
	cr_assert_eq(out.unclean, c->want_unclean, "%s: unclean", c->what);
	cr_assert_eq(out.leader_changed, out.leader != c->leader, "%s: leader_changed", c->what);
	cr_assert_eq(out.isr_changed, nwant != in.nisr || memcmp(out.isr, c->isr, (size_t)nwant * 4) != 0,
		     "%s: isr_changed", c->what);
}

Test(election, brokers_changing_move_leaders_and_shrink_the_isr)
{
	static const struct ecase cases[] = {
		{ "all live: nothing", L(1, 2, 3, END), L(1, 2, 3, END), L(1, 2, 3, END), 1, 0,
		  1, L(1, 2, 3, END), 0, 0 },
		{ "leader fenced: the next replica in the ISR leads", L(1, 2, 3, END), L(1, 2, 3, END),
		  L(2, 3, END), 1, 0, 2, L(2, 3, END), 0, 1 },
		{ "replicas order, not ISR order", L(1, 3, 2, END), L(1, 2, 3, END), L(2, 3, END), 1, 0,
		  3, L(2, 3, END), 0, 1 },
		{ "a follower fenced: leaves the ISR, the leader stays", L(1, 2, 3, END), L(1, 2, 3, END),
		  L(1, 3, END), 1, 0, 1, L(1, 3, END), 0, 1 },
		{ "the leader is kept even when not the preferred", L(1, 2, 3, END), L(2, 3, END),
		  L(1, 2, 3, END), 2, 0, 2, L(2, 3, END), 0, 0 },
		{ "the live out-of-sync preferred replica is not elected clean", L(1, 2, END), L(2, END),
		  L(1, END), 2, 0, -1, L(2, END), 0, 1 },
		{ "no live ISR member, unclean off: offline, the last member stays", L(1, 2, 3, END),
		  L(1, END), L(2, 3, END), 1, 0, -1, L(1, END), 0, 1 },
		{ "several dead at once: the leader is the one kept", L(1, 2, 3, END), L(1, 2, END),
		  L(3, END), 2, 0, -1, L(2, END), 0, 1 },
		{ "no live ISR member, unclean on: the first live replica, ISR itself", L(1, 2, 3, END),
		  L(1, END), L(3, 2, END), 1, 1, 2, L(2, END), 1, 1 },
		{ "unclean on but a live ISR member: clean", L(1, 2, 3, END), L(1, 3, END), L(2, 3, END), 1,
		  1, 3, L(3, END), 0, 1 },
		{ "nobody live at all, unclean on: offline", L(1, 2, END), L(1, 2, END), L(END), 1, 1,
		  -1, L(1, END), 0, 1 },
		{ "offline and its ISR member back: it leads again", L(1, 2, 3, END), L(1, END),
		  L(1, 2, END), -1, 0, 1, L(1, END), 0, 1 },
		{ "offline, an out-of-sync replica back, unclean off: still offline", L(1, 2, END), L(1, END),
		  L(2, END), -1, 0, -1, L(1, END), 0, 0 },
		{ "offline, an out-of-sync replica back, unclean on: it leads", L(1, 2, END), L(1, END),
		  L(2, END), -1, 1, 2, L(2, END), 1, 1 },
		{ "offline with a dead ISR of two: left as it is", L(1, 2, 3, END), L(1, 2, END), L(3, END),
		  -1, 0, -1, L(1, 2, END), 0, 0 },
		{ "one replica, fenced: offline, keeps its ISR", L(5, END), L(5, END), L(1, END), 5, 0,
		  -1, L(5, END), 0, 1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run(&cases[i], 0);
}

Test(election, preferred_moves_to_the_first_replica_when_it_is_live_and_in_sync)
{
	static const struct ecase cases[] = {
		{ "already leads", L(1, 2, END), L(1, 2, END), L(1, 2, END), 1, 0, 1, L(1, 2, END), 0,
		  ELECTION_NOT_NEEDED },
		{ "live and in sync: moves", L(1, 2, END), L(1, 2, END), L(1, 2, END), 2, 0, 1, L(1, 2, END),
		  0, ELECTION_DONE },
		{ "offline partition, preferred in sync and live", L(1, 2, END), L(1, END), L(1, 2, END),
		  -1, 0, 1, L(1, END), 0, ELECTION_DONE },
		{ "not in sync", L(1, 2, END), L(2, END), L(1, 2, END), 2, 0, 2, L(2, END), 0,
		  ELECTION_PREFERRED_NOT_AVAILABLE },
		{ "not live", L(1, 2, END), L(1, 2, END), L(2, END), 2, 0, 2, L(1, 2, END), 0,
		  ELECTION_PREFERRED_NOT_AVAILABLE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run(&cases[i], 1);
}

Test(election, unclean_only_for_a_partition_without_a_live_leader)
{
	static const struct ecase cases[] = {
		{ "a live leader: not needed", L(1, 2, END), L(1, END), L(1, 2, END), 1, 0, 1, L(1, END), 0,
		  ELECTION_NOT_NEEDED },
		{ "offline, out-of-sync replica live: it leads", L(1, 2, END), L(1, END), L(2, END), -1, 0,
		  2, L(2, END), 1, ELECTION_DONE },
		{ "leader dead, a live ISR member: clean", L(1, 2, 3, END), L(1, 3, END), L(2, 3, END), 1,
		  0, 3, L(3, END), 0, ELECTION_DONE },
		{ "no live replica", L(1, 2, END), L(1, END), L(3, END), -1, 0, -1, L(1, END), 0,
		  ELECTION_ELIGIBLE_NOT_AVAILABLE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run(&cases[i], 2);
}
