/* tests/unit/test_placement.c — the assignment of replicas to brokers
 * (control/placement.h), a pure function: brokers with racks in, an
 * assignment out. Kafka's own figures (AdminUtils' doc: 5 brokers, 10
 * partitions, 3 replicas, start 0), even spread of leaders and replicas
 * over many shapes, racks alternated, refusals. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "control/placement.h"

/* Each partition's replicas distinct and known; every broker leads
 * nparts / n or one more, and holds nparts * rf / n or one more. */
static void check_spread(const struct placement_broker *b, int n, int32_t nparts, int rf, const int32_t *out)
{
	int lead[64] = { 0 }, hold[64] = { 0 };

	for (int32_t p = 0; p < nparts; p++)
		for (int r = 0; r < rf; r++) {
			int at = -1;

			for (int k = 0; k < n; k++)
				if (b[k].id == out[p * rf + r])
					at = k;
			cr_assert_geq(at, 0, "partition %d names broker %d", p, out[p * rf + r]);
			for (int q = 0; q < r; q++)
				cr_assert_neq(out[p * rf + q], out[p * rf + r], "partition %d has a broker twice", p);
			hold[at]++;
			lead[at] += r == 0;
		}
	for (int k = 0; k < n; k++) {
		cr_assert_geq(lead[k], nparts / n, "broker %d leads %d of %d", b[k].id, lead[k], nparts);
		cr_assert_leq(lead[k], (nparts + n - 1) / n, "broker %d leads %d of %d", b[k].id, lead[k], nparts);
		cr_assert_geq(hold[k], nparts * rf / n, "broker %d holds %d", b[k].id, hold[k]);
		cr_assert_leq(hold[k], (nparts * rf + n - 1) / n, "broker %d holds %d", b[k].id, hold[k]);
	}
}

Test(placement, kafkas_own_example)
{
	/* AdminUtils.assignReplicasToBrokers' comment: 5 brokers, 10
	 * partitions, 3 replicas, start index 0 */
	static const int32_t want[10][3] = {
		{ 0, 1, 2 }, { 1, 2, 3 }, { 2, 3, 4 }, { 3, 4, 0 }, { 4, 0, 1 },
		{ 0, 2, 3 }, { 1, 3, 4 }, { 2, 4, 0 }, { 3, 0, 1 }, { 4, 1, 2 },
	};
	struct placement_broker b[5] = { { 4, NULL }, { 2, NULL }, { 0, NULL }, { 3, NULL }, { 1, NULL } };
	int32_t out[30];

	cr_assert_eq(placement_assign(b, 5, 0, 10, 3, 0, out), 0);
	for (int p = 0; p < 10; p++)
		for (int r = 0; r < 3; r++)
			cr_assert_eq(out[p * 3 + r], want[p][r], "partition %d replica %d: %d", p, r, out[p * 3 + r]);
}

Test(placement, two_brokers_four_partitions_one_replica)
{
	struct placement_broker b[2] = { { 1, NULL }, { 2, NULL } };
	int32_t out[4];

	for (uint32_t start = 0; start < 4; start++) {
		cr_assert_eq(placement_assign(b, 2, 0, 4, 1, start, out), 0);
		check_spread(b, 2, 4, 1, out);
		cr_assert_eq(out[0], start % 2 ? 2 : 1, "the start chooses the first leader");
	}
}

Test(placement, many_shapes_spread_evenly)
{
	struct placement_broker b[12];
	int32_t out[240 * 4];

	for (int n = 1; n <= 12; n++) {
		for (int k = 0; k < n; k++)
			b[k] = (struct placement_broker){ 100 + 7 * k, NULL };
		for (int rf = 1; rf <= 4 && rf <= n; rf++)
			for (int32_t np = 1; np <= 240; np += 17)
				for (uint32_t start = 0; start < 3; start++) {
					cr_assert_eq(placement_assign(b, n, 0, np, rf, start, out), 0);
					/* whole rounds of the brokers spread exactly */
					if (np % n == 0)
						check_spread(b, n, np, rf, out);
				}
	}
}

Test(placement, added_partitions_continue_the_rounds)
{
	struct placement_broker b[3] = { { 1, NULL }, { 2, NULL }, { 3, NULL } };
	int32_t all[12 * 2], head[6 * 2], tail[6 * 2];

	cr_assert_eq(placement_assign(b, 3, 0, 12, 2, 5, all), 0);
	cr_assert_eq(placement_assign(b, 3, 0, 6, 2, 5, head), 0);
	cr_assert_eq(placement_assign(b, 3, 6, 6, 2, 5, tail), 0);
	cr_assert_eq(memcmp(all, head, sizeof(head)), 0);
	cr_assert_eq(memcmp(all + 12, tail, sizeof(tail)), 0, "CreatePartitions places as if created together");
}

Test(placement, racks_alternate)
{
	/* 6 brokers on 3 racks, listed unordered: every partition of 3
	 * replicas is on 3 racks, of 2 on 2 */
	struct placement_broker b[6] = { { 5, "c" }, { 1, "a" }, { 3, "b" }, { 2, "a" }, { 4, "b" }, { 6, "c" } };
	int32_t out[60 * 3];

	for (int rf = 2; rf <= 3; rf++)
		for (uint32_t start = 0; start < 6; start++) {
			cr_assert_eq(placement_assign(b, 6, 0, 60, rf, start, out), 0);
			check_spread(b, 6, 60, rf, out);
			for (int p = 0; p < 60; p++)
				for (int r = 0; r < rf; r++)
					for (int q = 0; q < r; q++) {
						const char *x = NULL, *y = NULL;

						for (int k = 0; k < 6; k++) {
							if (b[k].id == out[p * rf + r])
								x = b[k].rack;
							if (b[k].id == out[p * rf + q])
								y = b[k].rack;
						}
						cr_assert_str_neq(x, y, "rf %d partition %d: two replicas on rack %s", rf, p, x);
					}
		}
	/* more replicas than racks: every rack first, then a second in one */
	struct placement_broker two[4] = { { 1, "x" }, { 2, "x" }, { 3, "y" }, { 4, "y" } };
	int32_t o3[8 * 3];

	cr_assert_eq(placement_assign(two, 4, 0, 8, 3, 0, o3), 0);
	for (int p = 0; p < 8; p++) {
		int xs = 0;

		for (int r = 0; r < 3; r++)
			xs += o3[p * 3 + r] <= 2;
		cr_assert(xs == 1 || xs == 2, "partition %d not on both racks", p);
	}
}

Test(placement, alternated_list_leads_round_robin_across_racks)
{
	/* Kafka's rack-alternated order of a:{1,2} b:{3} c:{4,5}: 1,3,4,2,5 */
	struct placement_broker b[5] = { { 1, "a" }, { 2, "a" }, { 3, "b" }, { 4, "c" }, { 5, "c" } };
	static const int32_t leaders[5] = { 1, 3, 4, 2, 5 };
	int32_t out[5];

	cr_assert_eq(placement_assign(b, 5, 0, 5, 1, 0, out), 0);
	for (int p = 0; p < 5; p++)
		cr_assert_eq(out[p], leaders[p], "partition %d led by %d", p, out[p]);
}

Test(placement, refusals)
{
	struct placement_broker b[2] = { { 1, NULL }, { 2, "r" } };
	int32_t out[8], bad = 0;
	static const int32_t ok[4] = { 1, 2, 2, 1 }, unknown[4] = { 1, 2, 9, 1 }, twice[4] = { 1, 1, 2, 1 };

	cr_assert_eq(placement_assign(b, 2, 0, 4, 3, 0, out), -ENOSPC, "more replicas than brokers");
	cr_assert_eq(placement_assign(b, 0, 0, 1, 1, 0, out), -ENOSPC, "no broker");
	cr_assert_eq(placement_assign(b, 2, 0, 4, 0, 0, out), -EINVAL);
	cr_assert_eq(placement_assign(b, 2, 0, 0, 1, 0, out), -EINVAL);
	/* one broker without a rack: rack-unaware, still spread */
	cr_assert_eq(placement_assign(b, 2, 0, 4, 2, 0, out), 0);
	check_spread(b, 2, 4, 2, out);
	cr_assert_eq(placement_check(b, 2, 2, 2, ok, &bad), 0);
	cr_assert_eq(placement_check(b, 2, 2, 2, unknown, &bad), -ENOENT);
	cr_assert_eq(bad, 9);
	cr_assert_eq(placement_check(b, 2, 2, 2, twice, &bad), -EINVAL);
	cr_assert_eq(bad, 1);
}
