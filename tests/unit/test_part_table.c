/* tests/unit/test_part_table.c — a shard's partitions by (topic id,
 * partition index): found, replaced, removed, and still found after the
 * removals that shift a probe run back, with the table growing as
 * partitions are added. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/part.h"
#include "dataplane/part_table.h"

#define NT 40
#define NP 25

static struct part *parts;   /* NT topics of NP partitions */

static struct part *at(int t, int i)
{
	return &parts[t * NP + i];
}

static void setup(void)
{
	parts = calloc(NT * NP, sizeof(*parts));
	cr_assert_not_null(parts);
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++) {
			memset(at(t, i)->topic_id, 0, 16);
			at(t, i)->topic_id[15] = (uint8_t)t;   /* ids that differ in one byte */
			at(t, i)->index = i;
		}
}

static void teardown(void)
{
	free(parts);
}

TestSuite(part_table, .init = setup, .fini = teardown);

Test(part_table, finds_each_partition_by_value_and_nothing_else)
{
	struct part_table pt = { 0 };
	uint8_t other[16] = { 0 };

	cr_assert_null(part_table_find(&pt, other, 0), "an empty table finds nothing");
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++)
			cr_assert_eq(part_table_add(&pt, at(t, i)), 0);
	cr_assert_eq(pt.n, NT * NP);
	cr_assert_leq(pt.n * 2, pt.cap, "at most half full");
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++)
			cr_assert_eq(part_table_find(&pt, at(t, i)->topic_id, i), at(t, i));
	other[15] = NT;
	cr_assert_null(part_table_find(&pt, other, 0), "an unknown topic");
	cr_assert_null(part_table_find(&pt, at(0, 0)->topic_id, NP), "an unknown partition index");
	part_table_fini(&pt);
}

Test(part_table, removals_keep_the_rest_findable)
{
	struct part_table pt = { 0 };
	struct part again = *at(3, 8);   /* one kept below */

	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++)
			cr_assert_eq(part_table_add(&pt, at(t, i)), 0);
	/* every other partition goes: the runs they sat in shift back */
	for (int t = 0; t < NT; t++)
		for (int i = t % 2; i < NP; i += 2)
			part_table_remove(&pt, at(t, i));
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++)
			cr_assert_eq(part_table_find(&pt, at(t, i)->topic_id, i), (i % 2 == t % 2) ? NULL : at(t, i),
				     "topic %d partition %d", t, i);
	/* removing one that is not the entry under its key changes nothing */
	part_table_remove(&pt, &again);
	cr_assert_eq(part_table_find(&pt, again.topic_id, again.index), at(3, 8));
	/* a new open under the same key replaces the entry */
	cr_assert_eq(part_table_add(&pt, &again), 0);
	cr_assert_eq(part_table_find(&pt, again.topic_id, again.index), &again);
	part_table_remove(&pt, &again);
	cr_assert_null(part_table_find(&pt, again.topic_id, again.index));
	part_table_fini(&pt);
	cr_assert_null(part_table_find(&pt, at(0, 1)->topic_id, 1), "a finished table finds nothing");
}
