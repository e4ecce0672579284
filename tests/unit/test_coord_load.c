/* tests/unit/test_coord_load.c — a coordinator's internal partitions,
 * loaded or not (control/coord_load.h): the answers while a partition is
 * not led, loading and loaded; a replay overtaken by a leadership change
 * (lost and won back while it read) never marks the partition loaded. */
#include <criterion/criterion.h>

#include "control/coord_load.h"
#include "dataplane/kafka_errors.h"

Test(coord_load, no_topic_yet_is_coordinator_not_available)
{
	struct coord_load cl = { 0 };

	cr_assert_eq(coord_load_err(&cl, 0), KERR_COORDINATOR_NOT_AVAILABLE);
	coord_load_fini(&cl);
}

Test(coord_load, led_loading_loaded_then_lost)
{
	struct coord_load cl = { 0 };
	uint32_t gen = 0, g2 = 0;

	cr_assert_eq(coord_load_resize(&cl, 4), 0);
	cr_assert_eq(coord_load_err(&cl, 2), KERR_NOT_COORDINATOR, "not led: NOT_COORDINATOR");
	cr_assert_eq(coord_load_lead(&cl, 2, 0, &gen), COORD_NONE, "not led and not loaded: nothing to do");
	cr_assert_eq(coord_load_lead(&cl, 2, 1, &gen), COORD_LOAD);
	cr_assert_eq(coord_load_err(&cl, 2), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	cr_assert_eq(coord_load_lead(&cl, 2, 1, &g2), COORD_NONE, "one load per leadership");
	cr_assert(coord_load_current(&cl, 2, gen));
	cr_assert_eq(coord_load_done(&cl, 2, gen), 1);
	cr_assert_eq(coord_load_err(&cl, 2), 0);
	cr_assert_eq(cl.loaded, 1);
	cr_assert_eq(coord_load_err(&cl, 1), KERR_NOT_COORDINATOR, "other partitions stay not coordinated");
	cr_assert_eq(coord_load_lead(&cl, 2, 0, &g2), COORD_UNLOAD);
	cr_assert_eq(cl.loaded, 0);
	cr_assert_eq(coord_load_err(&cl, 2), KERR_NOT_COORDINATOR);
	cr_assert_eq(coord_load_err(&cl, 9), KERR_NOT_COORDINATOR, "out of range");
	coord_load_fini(&cl);
}

Test(coord_load, a_replay_overtaken_by_a_move_is_ignored)
{
	struct coord_load cl = { 0 };
	uint32_t first = 0, un = 0, second = 0;

	cr_assert_eq(coord_load_resize(&cl, 2), 0);
	cr_assert_eq(coord_load_lead(&cl, 0, 1, &first), COORD_LOAD);
	cr_assert_eq(coord_load_lead(&cl, 0, 0, &un), COORD_UNLOAD, "lost while loading");
	cr_assert_not(coord_load_current(&cl, 0, first), "the first replay's chunks are dropped");
	cr_assert_eq(coord_load_lead(&cl, 0, 1, &second), COORD_LOAD, "won back");
	cr_assert_neq(first, second);
	cr_assert_eq(coord_load_done(&cl, 0, first), 0, "the overtaken replay's end marks nothing");
	cr_assert_eq(coord_load_err(&cl, 0), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	cr_assert_eq(coord_load_done(&cl, 0, second), 1);
	cr_assert_eq(coord_load_err(&cl, 0), 0);
	cr_assert_eq(cl.loads, 2);
	cr_assert_eq(cl.unloads, 1);
	coord_load_fini(&cl);
}

Test(coord_load, growing_keeps_the_loaded_partitions)
{
	struct coord_load cl = { 0 };
	uint32_t gen = 0;

	cr_assert_eq(coord_load_resize(&cl, 1), 0);
	cr_assert_eq(coord_load_lead(&cl, 0, 1, &gen), COORD_LOAD);
	cr_assert_eq(coord_load_done(&cl, 0, gen), 1);
	cr_assert_eq(coord_load_resize(&cl, 3), 0);
	cr_assert_eq(coord_load_err(&cl, 0), 0);
	cr_assert_eq(coord_load_err(&cl, 2), KERR_NOT_COORDINATOR);
	cr_assert_eq(coord_load_resize(&cl, 2), 0, "never shrinks");
	cr_assert_eq(cl.n, 3);
	coord_load_fini(&cl);
}
