/* tests/unit/test_ctl_homes.c — the control thread's book of partition
 * homes (control/ctl_homes.h): entries found by (topic id, index) among
 * many (the table grows), an open told only once the owner answered, a
 * retire taking the entry out (its shard returned only if it was open),
 * a partition opened again after its retire getting a new published
 * block while the old one stays allocated for older snapshots, and the
 * leader epoch the book says was told kept in the next entry built while
 * the leader is the same (ctl_home_epoch). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "control/ctl_homes.h"
#include "dataplane/broker.h"

#define NT 40
#define NP 25

static void id_of(int t, uint8_t id[16])
{
	memset(id, 0, 16);
	id[15] = (uint8_t)t;   /* ids that differ in one byte */
}

Test(ctl_homes, entries_found_among_many)
{
	struct ctl_homes *hs = ctl_homes_new();
	uint8_t id[16];

	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++) {
			struct ctl_home *h;

			id_of(t, id);
			h = ctl_home_add(hs, id, i, (t + i) % 4);
			cr_assert_not_null(h);
			cr_assert_eq(h->opened, 0, "an entry is made as the open is sent: not open yet");
			cr_assert_not_null(h->part_pub);
			cr_assert_eq((uintptr_t)h->part_pub % 64, 0, "the block has a cache line of its own");
			cr_assert_eq(ctl_home_add(hs, id, i, 3), h, "adding again finds the same entry");
		}
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NP; i++) {
			const struct ctl_home *h;

			id_of(t, id);
			h = ctl_home_find(hs, id, i);
			cr_assert_not_null(h, "%d-%d found after the table grew", t, i);
			cr_assert_eq(h->index, i);
			cr_assert_eq(h->shard, (t + i) % 4);
			cr_assert(!memcmp(h->topic_id, id, 16));
		}
	id_of(NT, id);
	cr_assert_null(ctl_home_find(hs, id, 0), "a topic never opened here has no entry");
	id_of(0, id);
	cr_assert_null(ctl_home_find(hs, id, NP), "nor a partition index never opened");
	ctl_homes_free(hs);
}

Test(ctl_homes, take_returns_the_shard_only_when_open)
{
	struct ctl_homes *hs = ctl_homes_new();
	uint8_t id[16];
	struct ctl_home *h;

	id_of(1, id);
	h = ctl_home_add(hs, id, 0, 2);
	cr_assert_eq(ctl_home_take(hs, id, 0), -1, "an open not answered: nothing to retire on the shard");
	cr_assert_null(ctl_home_find(hs, id, 0), "but the entry is gone");
	h = ctl_home_add(hs, id, 0, 2);
	h->opened = 1;
	h = ctl_home_add(hs, id, 1, 3);
	h->opened = -1;   /* the open failed */
	cr_assert_eq(ctl_home_take(hs, id, 0), 2, "open: its owner shard gets the retire");
	cr_assert_eq(ctl_home_take(hs, id, 1), -1, "failed: nothing to send");
	cr_assert_eq(ctl_home_take(hs, id, 0), -1, "taken once");
	ctl_homes_free(hs);
}

Test(ctl_homes, reopened_after_retire_gets_a_new_block)
{
	struct ctl_homes *hs = ctl_homes_new();
	uint8_t id[16];
	struct ctl_home *h;
	struct part_pub *old;

	id_of(7, id);
	h = ctl_home_add(hs, id, 4, 1);
	h->opened = 1;
	h->role_set = 1;
	h->role_epoch = 9;
	old = h->part_pub;
	__atomic_store_n(&old->log_end, 42, __ATOMIC_RELAXED);   /* as the owner would */
	cr_assert_eq(ctl_home_take(hs, id, 4), 1);
	h = ctl_home_add(hs, id, 4, 1);
	cr_assert_neq(h->part_pub, old, "a fresh block: the old one may still hold the retired struct's handle");
	cr_assert_eq(h->role_set, 0, "and no role told yet");
	cr_assert_eq(__atomic_load_n(&old->log_end, __ATOMIC_RELAXED), 42,
		     "the old block stays allocated until exit (an older snapshot may point at it)");
	ctl_homes_free(hs);
}

Test(ctl_homes, the_epoch_told_is_kept_under_the_same_leader)
{
	struct ctl_homes *hs = ctl_homes_new();
	uint8_t id[16];
	struct ctl_home *h;

	id_of(2, id);
	cr_assert_eq(ctl_home_epoch(NULL, 1, 3), 3, "no entry (not this node's): the image's epoch");
	h = ctl_home_add(hs, id, 0, 1);
	cr_assert_eq(h->told, 0, "a new entry was told nothing yet");
	cr_assert_eq(ctl_home_epoch(h, 1, 3), 3, "nothing told: the image's epoch");
	h->told = 1;
	h->told_leader = 1;
	h->told_epoch = 7;   /* its open reported the log's epoch, above the image's */
	cr_assert_eq(ctl_home_epoch(h, 1, 3), 7, "the same leader: the later epoch told is kept");
	cr_assert_eq(ctl_home_epoch(h, 1, 9), 9, "the image moved past it: the image's");
	cr_assert_eq(ctl_home_epoch(h, 2, 3), 3, "another leader: the image's, whatever was told");
	cr_assert_eq(ctl_home_epoch(h, -1, 3), 3, "offline: the image's");
	cr_assert_eq(ctl_home_take(hs, id, 0), -1);
	h = ctl_home_add(hs, id, 0, 1);
	cr_assert_eq(h->told, 0, "opened again after a retire: told nothing yet");
	cr_assert_eq(ctl_home_epoch(h, 1, 3), 3);
	ctl_homes_free(hs);
}
