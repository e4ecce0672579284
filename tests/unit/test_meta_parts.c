/* tests/unit/test_meta_parts.c — the partitions in the metadata image
 * (control/meta_parts.h): PARTITION and PARTITION_CHANGE records applied,
 * refused when they do not hold, carried by a snapshot; the records of a
 * log written before them (a TOPIC and PARTITIONS alone) read as every
 * partition on the node that wrote it at the topic's epoch; 100,000
 * partitions take records under the 1 MiB limit. */
#include <errno.h>

#include "control/meta_parts.h"
#include "control/metalog.h"
#include "tests/unit/dir_fixture.h"
#include "tests/unit/helpers.h"

TestSuite(meta_parts, .init = dir_setup, .fini = dir_teardown, .timeout = 120);

/* Every partition of every topic as text. */
static char *parts_image(const struct metalog *ml)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	for (int i = 0; i < metalog_topic_count(ml); i++) {
		const struct meta_topic *t = metalog_topic_at(ml, i);

		fprintf(f, "%s e=%d\n", t->name, t->leader_epoch);
		for (int32_t j = 0; j < t->partitions; j++) {
			const struct meta_part *p = &t->parts[j];

			fprintf(f, " %d: leader %d le %d pe %d legacy %d r", j, p->leader, p->leader_epoch,
				p->partition_epoch, p->legacy);
			for (int k = 0; k < p->nreplicas; k++)
				fprintf(f, " %d", p->replicas[k]);
			fprintf(f, " isr");
			for (int k = 0; k < p->nisr; k++)
				fprintf(f, " %d", p->isr[k]);
			fputc('\n', f);
		}
	}
	fclose(f);
	return buf;
}

static void apply_all(struct metalog *ml, struct metalog_rec *recs, int n)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(metalog_apply(ml, recs[i].buf, recs[i].len, NULL), 0, "record %d", i);
	metalog_recs_free(recs, n);
}

static struct metalog *image_with_node(int32_t writer)
{
	struct metalog *ml;
	struct metalog_rec r;

	cr_assert_eq(metalog_image_new(writer, &ml), 0);
	cr_assert_eq(metalog_build_node(ml, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	return ml;
}

Test(meta_parts, a_placed_topic_and_its_changes)
{
	struct metalog *ml = image_with_node(1);
	struct metalog_rec *recs, r;
	int n;
	static const int32_t placed[4 * 2] = { 1, 2, 2, 1, 1, 2, 2, 1 };
	const struct meta_topic *t;
	const struct meta_part *p;

	cr_assert_eq(metalog_build_topic_placed(ml, "t", 4, NULL, NULL, 0, 2, placed, &recs, &n), 0);
	cr_assert_eq(n, 2, "TOPIC and one PARTITION record");
	apply_all(ml, recs, n);
	t = metalog_topic(ml, "t");
	for (int i = 0; i < 4; i++) {
		p = &t->parts[i];
		cr_assert_eq(p->legacy, 0);
		cr_assert_eq(p->leader, placed[i * 2]);
		cr_assert_eq(p->nreplicas, 2);
		cr_assert_eq(p->nisr, 2);
		cr_assert_eq(p->replicas[1], placed[i * 2 + 1]);
		cr_assert_eq(p->leader_epoch, 0);
		cr_assert_eq(p->partition_epoch, 0);
	}
	/* the ISR shrinks: the partition epoch moves, the leader's does not */
	int32_t isr1[1] = { 1 };

	cr_assert_eq(metalog_build_partition_change(ml, "t", 0, -2, isr1, 1, NULL, 0, &r), 0);
	cr_assert_gt(r.len, 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	p = &t->parts[0];
	cr_assert_eq(p->nisr, 1);
	cr_assert_eq(p->partition_epoch, 1);
	cr_assert_eq(p->leader_epoch, 0);
	/* a new leader (in the ISR): both epochs move */
	int32_t isr2[1] = { 2 };

	cr_assert_eq(metalog_build_partition_change(ml, "t", 1, 1, isr2, 1, NULL, 0, &r), -EINVAL,
		     "a leader outside the ISR");
	cr_assert_eq(metalog_build_partition_change(ml, "t", 1, 1, NULL, 0, NULL, 0, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	p = &t->parts[1];
	cr_assert_eq(p->leader, 1);
	cr_assert_eq(p->leader_epoch, 1);
	cr_assert_eq(p->partition_epoch, 1);
	/* replicas change (a reassignment's end) */
	int32_t rep[1] = { 1 };

	cr_assert_eq(metalog_build_partition_change(ml, "t", 1, -2, rep, 1, rep, 1, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(p->nreplicas, 1);
	cr_assert_eq(p->partition_epoch, 2);
	/* nothing to change: nothing to write */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 1, 1, rep, 1, NULL, 0, &r), 0);
	cr_assert_eq(r.len, 0);
	/* refusals */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 4, 1, NULL, 0, NULL, 0, &r), -EINVAL);
	cr_assert_eq(metalog_build_partition_change(ml, "nope", 0, 1, NULL, 0, NULL, 0, &r), -ENOENT);
	int32_t dup[2] = { 1, 1 };

	cr_assert_eq(metalog_build_topic_placed(ml, "u", 1, NULL, NULL, 0, 2, dup, &recs, &n), -EINVAL);
	/* a change for a topic deleted meanwhile no longer applies */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 2, -2, isr1, 1, NULL, 0, &r), 0);
	struct metalog_rec del;

	cr_assert_eq(metalog_build_delete_topic(ml, "t", &del), 0);
	cr_assert_eq(metalog_apply(ml, del.buf, del.len, NULL), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), -ENOENT);
	metalog_rec_free(&del);
	metalog_rec_free(&r);
	metalog_close(ml);
}

/* A change carries the state it was built against: a deposed leader's
 * ISR change, built on its stale image after a pause, is a no-op where the
 * controller has moved the partition on (without the guard it would apply
 * and put the deposed leader back into the ISR: the record after the
 * guard's 12 bytes are cut, as written before it, shows that). */
Test(meta_parts, a_change_built_against_a_state_since_changed_is_refused)
{
	struct metalog *ml = image_with_node(1);
	struct metalog_rec *recs, stale, elect, again;
	int n;
	static const int32_t placed[3] = { 1, 2, 3 };
	static const int32_t shrunk[2] = { 1, 2 }, fenced[2] = { 2, 3 };
	const struct meta_part *p;

	cr_assert_eq(metalog_build_topic_placed(ml, "t", 1, NULL, NULL, 0, 3, placed, &recs, &n), 0);
	apply_all(ml, recs, n);
	p = &metalog_topic(ml, "t")->parts[0];
	cr_assert_eq(p->leader, 1);
	/* the leader (1), paused, asks 3 out: built against leader 1, epochs 0/0 */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 0, -2, shrunk, 2, NULL, 0, &stale), 0);
	/* the controller fenced 1 meanwhile: 2 leads, ISR {2,3} */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 0, 2, fenced, 2, NULL, 0, &elect), 0);
	cr_assert_eq(metalog_apply(ml, elect.buf, elect.len, NULL), 0);
	cr_assert_eq(metalog_check(ml, stale.buf, stale.len), -ESTALE, "refused at the proposal's check");
	cr_assert_eq(metalog_apply(ml, stale.buf, stale.len, NULL), -ESTALE);
	cr_assert_eq(p->leader, 2);
	cr_assert_eq(p->nisr, 2);
	cr_assert_eq(p->isr[0], 2, "the deposed leader stays out of the ISR");
	cr_assert_eq(p->isr[1], 3);
	cr_assert_eq(p->leader_epoch, 1);
	cr_assert_eq(p->partition_epoch, 1);
	/* the same change without its guard (a record from before it) applies:
	 * what the guard prevents */
	cr_assert_eq(metalog_apply(ml, stale.buf, stale.len - 12, NULL), 0);
	cr_assert_eq(p->isr[0], 1, "unguarded, the stale change put node 1 back");
	/* built against the current state, the same kind of change applies */
	cr_assert_eq(metalog_build_partition_change(ml, "t", 0, -2, fenced, 2, NULL, 0, &again), 0);
	cr_assert_eq(metalog_apply(ml, again.buf, again.len, NULL), 0);
	cr_assert_eq(p->isr[0], 2);
	metalog_rec_free(&stale);
	metalog_rec_free(&elect);
	metalog_rec_free(&again);
	metalog_close(ml);
}

Test(meta_parts, create_partitions_places_only_the_new_ones)
{
	struct metalog *ml = image_with_node(1);
	struct metalog_rec *recs;
	int n;
	static const int32_t first[2] = { 1, 2 }, more[3] = { 2, 1, 2 };
	const struct meta_topic *t;

	cr_assert_eq(metalog_build_topic_placed(ml, "t", 2, NULL, NULL, 0, 1, first, &recs, &n), 0);
	apply_all(ml, recs, n);
	cr_assert_eq(metalog_build_partitions_placed(ml, "t", 5, 1, more, &recs, &n), 0);
	cr_assert_eq(n, 2, "PARTITIONS and one PARTITION record");
	apply_all(ml, recs, n);
	t = metalog_topic(ml, "t");
	cr_assert_eq(t->partitions, 5);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(t->parts[i].leader, i < 2 ? first[i] : more[i - 2], "partition %d", i);
		cr_assert_eq(t->parts[i].leader_epoch, 0, "placed partitions keep their own epoch");
		cr_assert_eq(t->parts[i].legacy, 0);
	}
	cr_assert_eq(metalog_build_partitions_placed(ml, "t", 5, 1, more, &recs, &n), -EINVAL);
	metalog_close(ml);
}

/* A log written before partition records: TOPIC, PARTITIONS alone. */
Test(meta_parts, records_of_an_older_broker_put_every_partition_on_its_node)
{
	struct metalog *ml, *img;
	const struct meta_topic *t;
	void *snap;
	size_t slen;
	char *want, *got;

	cr_assert_eq(metalog_open(dir, 3, &ml), 0);
	cr_assert_eq(metalog_create_topic(ml, "old", 2, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_add_partitions(ml, "old", 3), 0);
	metalog_close(ml);
	cr_assert_eq(metalog_open(dir, 3, &ml), 0);
	t = metalog_topic(ml, "old");
	cr_assert_eq(t->leader_epoch, 1);
	for (int i = 0; i < 3; i++) {
		const struct meta_part *p = &t->parts[i];

		cr_assert_eq(p->legacy, 1);
		cr_assert_eq(p->leader, 3, "the node that wrote the log");
		cr_assert_eq(p->nreplicas, 1);
		cr_assert_eq(p->replicas[0], 3);
		cr_assert_eq(p->nisr, 1);
		cr_assert_eq(p->isr[0], 3);
		cr_assert_eq(p->leader_epoch, 1, "the topic's epoch, as before: partition %d", i);
	}
	/* imported into an image of another node: still the writer's */
	want = parts_image(ml);
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(5, &img), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	got = parts_image(img);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	free(snap);
	metalog_close(img);
	metalog_close(ml);
}

Test(meta_parts, snapshot_carries_placed_and_legacy_partitions)
{
	struct metalog *ml = image_with_node(1), *img;
	struct metalog_rec *recs, r;
	int n;
	static const int32_t pl[3 * 2] = { 1, 2, 2, 1, 1, 2 };
	int32_t isr[1] = { 2 };
	void *snap;
	size_t slen;
	char *want, *got;

	cr_assert_eq(metalog_build_topic_placed(ml, "p", 3, NULL, NULL, 0, 2, pl, &recs, &n), 0);
	apply_all(ml, recs, n);
	cr_assert_eq(metalog_build_topic(ml, "legacy", 2, NULL, NULL, 0, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_build_partitions(ml, "legacy", 4, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_build_partition_change(ml, "p", 1, -2, isr, 1, NULL, 0, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	want = parts_image(ml);
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	got = parts_image(img);
	cr_assert_str_eq(got, want);
	free(got);
	/* a later PARTITIONS record moves the legacy epochs alike on both */
	cr_assert_eq(metalog_build_partitions(ml, "legacy", 5, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(metalog_apply(img, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	free(want);
	want = parts_image(ml);
	got = parts_image(img);
	cr_assert_str_eq(got, want);
	cr_assert(strstr(want, " 3: leader 1 le 2 pe 0 legacy 1"), "%s", want);
	free(got);
	free(want);
	free(snap);
	metalog_close(img);
	metalog_close(ml);
}

Test(meta_parts, a_hundred_thousand_partitions_fit_the_record_limit)
{
	struct metalog *ml = image_with_node(1), *img;
	struct metalog_rec *recs;
	int n;
	int32_t *pl = malloc(100000 * 3 * sizeof(*pl));
	void *snap;
	size_t slen;
	char *want, *got;

	for (int i = 0; i < 100000; i++)
		for (int r = 0; r < 3; r++)
			pl[i * 3 + r] = (i + r) % 5;
	cr_assert_eq(metalog_build_topic_placed(ml, "big", 100000, NULL, NULL, 0, 3, pl, &recs, &n), 0);
	cr_assert_geq(n, 5, "100,000 partitions of 3 replicas in %d records", n);
	for (int i = 0; i < n; i++)
		cr_assert_leq(recs[i].len, (1u << 20) + 2, "record %d: %zu bytes", i, recs[i].len);
	apply_all(ml, recs, n);
	cr_assert_eq(metalog_topic(ml, "big")->parts[99999].replicas[2], (99999 + 2) % 5);
	want = parts_image(ml);
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	got = parts_image(img);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	free(snap);
	free(pl);
	metalog_close(img);
	metalog_close(ml);
}

Test(meta_parts, malformed_or_impossible_records_are_refused)
{
	struct metalog *ml = image_with_node(1);
	struct metalog_rec *recs;
	int n;
	static const int32_t pl[2] = { 1, 2 };
	const struct meta_topic *t;
	char *before, *after;

	cr_assert_eq(metalog_build_topic_placed(ml, "t", 2, NULL, NULL, 0, 1, pl, &recs, &n), 0);
	/* the PARTITION record before its topic: no such topic */
	cr_assert_eq(metalog_apply(ml, recs[1].buf, recs[1].len, NULL), -ENOENT);
	apply_all(ml, recs, n);
	t = metalog_topic(ml, "t");
	before = parts_image(ml);
	/* hand-made: partition 1..2 of a 2-partition topic; a leader not a
	 * replica; a cut-short record */
	uint8_t rec[64];
	size_t len = 0;
#define PUT32(v)                                                                      \
	do {                                                                          \
		uint32_t x_ = (uint32_t)(v);                                          \
		rec[len++] = (uint8_t)(x_ >> 24);                                     \
		rec[len++] = (uint8_t)(x_ >> 16);                                     \
		rec[len++] = (uint8_t)(x_ >> 8);                                      \
		rec[len++] = (uint8_t)x_;                                             \
	} while (0)
#define PUT16(v)                                                                      \
	do {                                                                          \
		rec[len++] = (uint8_t)((uint16_t)(v) >> 8);                           \
		rec[len++] = (uint8_t)(v);                                            \
	} while (0)
	for (int variant = 0; variant < 3; variant++) {
		len = 0;
		PUT16(META_REC_PARTITION);
		rec[len++] = 1;
		memcpy(rec + len, t->id, 16);
		len += 16;
		PUT32(variant == 0 ? 1 : 0);
		PUT32(variant == 0 ? 2 : 1);
		PUT32(variant == 1 ? 7 : 1);     /* leader */
		PUT32(0);
		PUT32(0);
		PUT16(1);
		PUT32(1);
		PUT16(1);
		PUT32(1);
		if (variant == 2)
			len -= 3;
		cr_assert_eq(metalog_apply(ml, rec, len, NULL), variant == 2 ? -EPROTO : -EINVAL, "variant %d",
			     variant);
	}
	after = parts_image(ml);
	cr_assert_str_eq(after, before, "a refused record changed the image");
	free(before);
	free(after);
	metalog_close(ml);
}

static void apply_one(struct metalog *ml, int64_t at, int rc, struct metalog_rec *r)
{
	cr_assert_eq(rc, 0);
	cr_assert_eq(metalog_apply_at(ml, at, r->buf, r->len, NULL), 0);
	metalog_rec_free(r);
}

/* BROKER_RESTARTED: in each partition whose ISR holds the restarted
 * broker and another registered, unfenced member, it leaves the ISR and
 * its leadership goes to the first such member in replicas order; where it
 * is the last such member it stays, with a new leader epoch where it
 * leads; a legacy topic it wrote takes a new topic epoch; a stale
 * registration is refused. */
Test(meta_parts, a_restarted_broker_leaves_the_isr_and_its_leaderships_move)
{
	struct metalog *ml;
	struct metalog_rec r, *recs;
	int n;
	uint8_t inc[16] = { 1 };
	/* p0 led by 1; p1 led by 1, 3 before 2 in replicas order; p2 led by
	 * 2; p3 led by 1, its ISR {1} only; p4 led by 1, its ISR {1, 3} with
	 * 3 fenced */
	const int32_t placed[] = { 1, 2, 3, 1, 3, 2, 2, 1, 3, 1, 2, 3, 1, 3, 2 };
	const int32_t only1[] = { 1 }, one3[] = { 1, 3 };
	const struct meta_topic *t, *old;

	cr_assert_eq(metalog_open(dir, 1, &ml), 0);
	cr_assert_eq(metalog_create_topic(ml, "old", 1, NULL, NULL, 0, NULL), 0);
	for (int32_t b = 1; b <= 3; b++) {
		inc[1] = (uint8_t)b;
		apply_one(ml, 40 + b, metalog_build_register_broker(ml, b, inc, "127.0.0.1", 9092, NULL, &r), &r);
		apply_one(ml, 50 + b, metalog_build_broker_fence(ml, b, 40 + b, 0, &r), &r);
	}
	cr_assert_eq(metalog_build_topic_placed(ml, "t", 5, NULL, NULL, 0, 3, placed, &recs, &n), 0);
	apply_all(ml, recs, n);
	t = metalog_topic(ml, "t");
	old = metalog_topic(ml, "old");
	apply_one(ml, 60, metalog_build_partition_change(ml, "t", 3, -2, only1, 1, NULL, 0, &r), &r);
	apply_one(ml, 61, metalog_build_partition_change(ml, "t", 4, -2, one3, 2, NULL, 0, &r), &r);
	cr_assert_eq(t->parts[3].partition_epoch, 1);
	/* broker 3 is fenced now; broker 1 restarted (registered again at 70) */
	apply_one(ml, 62, metalog_build_broker_fence(ml, 3, 43, 1, &r), &r);
	inc[0] = 2;
	apply_one(ml, 70, metalog_build_register_broker(ml, 1, inc, "127.0.0.1", 9092, NULL, &r), &r);
	apply_one(ml, 71, metalog_build_broker_fence(ml, 1, 70, 0, &r), &r);

	cr_assert_eq(metalog_build_broker_restarted(ml, 1, 41, &r), -ENOENT, "not its registration");
	cr_assert_eq(metalog_build_broker_restarted(ml, 1, 70, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	/* p0: the first in-sync, unfenced other replica leads; 1 left the ISR */
	cr_assert_eq(t->parts[0].leader, 2);
	cr_assert_eq(t->parts[0].leader_epoch, 1);
	cr_assert_eq(t->parts[0].partition_epoch, 1);
	cr_assert_eq(t->parts[0].nisr, 2);
	cr_assert_eq(t->parts[0].isr[0], 2);
	cr_assert_eq(t->parts[0].isr[1], 3);
	cr_assert_eq(t->parts[0].nreplicas, 3, "the replicas stay");
	/* p1: 3 comes first in replicas order but is fenced: 2 leads */
	cr_assert_eq(t->parts[1].leader, 2);
	cr_assert_eq(t->parts[1].nisr, 2);
	cr_assert(!meta_part_has(t->parts[1].isr, t->parts[1].nisr, 1));
	/* p2: led by another: 1 leaves the ISR, the leader epoch stays */
	cr_assert_eq(t->parts[2].leader, 2);
	cr_assert_eq(t->parts[2].leader_epoch, 0);
	cr_assert_eq(t->parts[2].partition_epoch, 1);
	cr_assert_eq(t->parts[2].nisr, 2);
	cr_assert(!meta_part_has(t->parts[2].isr, t->parts[2].nisr, 1));
	/* p3: the only member of its ISR: it stays leader, a new epoch */
	cr_assert_eq(t->parts[3].leader, 1);
	cr_assert_eq(t->parts[3].leader_epoch, 1);
	cr_assert_eq(t->parts[3].partition_epoch, 2);
	cr_assert_eq(t->parts[3].nisr, 1);
	/* p4: the other member is fenced: it stays leader, the ISR as it was */
	cr_assert_eq(t->parts[4].leader, 1);
	cr_assert_eq(t->parts[4].leader_epoch, 1);
	cr_assert_eq(t->parts[4].nisr, 2);
	/* the legacy topic node 1 wrote: its topic's epoch */
	cr_assert_eq(old->leader_epoch, 1);
	cr_assert_eq(old->parts[0].leader, 1);
	cr_assert_eq(old->parts[0].leader_epoch, 1);
	/* a record of an older registration is stale once it registered again */
	cr_assert_eq(metalog_build_broker_restarted(ml, 1, 70, &r), 0);
	inc[0] = 3;
	{
		struct metalog_rec r2;

		apply_one(ml, 80, metalog_build_register_broker(ml, 1, inc, "127.0.0.1", 9092, NULL, &r2), &r2);
	}
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), -ENOENT);
	cr_assert_eq(t->parts[3].leader_epoch, 1, "nothing changed");
	metalog_rec_free(&r);
	metalog_close(ml);
}

/* LEADER_RESTARTED: a restarted broker's partitions take a new leader
 * epoch (placed ones each, legacy ones through their topic), another
 * broker's do not, and a stale registration is refused. */
Test(meta_parts, a_restarted_leader_gives_its_partitions_a_new_epoch)
{
	struct metalog *ml;
	struct metalog_rec r, *recs;
	int n;
	uint8_t inc[16] = { 1 };
	const int32_t placed[] = { 1, 2, 2, 1 };   /* p0 led by 1, p1 by 2 */
	const struct meta_topic *t, *old;

	/* a legacy topic written by node 1, then the image of a quorum */
	cr_assert_eq(metalog_open(dir, 1, &ml), 0);
	cr_assert_eq(metalog_create_topic(ml, "old", 2, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_build_register_broker(ml, 1, inc, "127.0.0.1", 9092, NULL, &r), 0);
	cr_assert_eq(metalog_apply_at(ml, 40, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_build_topic_placed(ml, "t", 2, NULL, NULL, 0, 2, placed, &recs, &n), 0);
	apply_all(ml, recs, n);
	t = metalog_topic(ml, "t");
	old = metalog_topic(ml, "old");
	cr_assert_eq(t->parts[0].leader, 1);
	cr_assert_eq(t->parts[1].leader, 2);

	cr_assert_eq(metalog_build_leader_restarted(ml, 1, 39, &r), -ENOENT, "not its registration");
	cr_assert_eq(metalog_build_leader_restarted(ml, 1, 40, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(t->parts[0].leader_epoch, 1, "led by the restarted broker");
	cr_assert_eq(t->parts[0].partition_epoch, 1);
	cr_assert_eq(t->parts[1].leader_epoch, 0, "led by another broker");
	cr_assert_eq(old->leader_epoch, 1, "a legacy topic follows its topic epoch");
	cr_assert_eq(old->parts[0].leader_epoch, 1);
	cr_assert_eq(old->parts[1].leader_epoch, 1);
	/* applied again (a second start at the same registration cannot
	 * happen; the record itself is not idempotent, each is a start) */
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(t->parts[0].leader_epoch, 2);
	metalog_rec_free(&r);
	/* a record of an older registration is stale once it registered again */
	inc[0] = 2;
	cr_assert_eq(metalog_build_leader_restarted(ml, 1, 40, &r), 0);
	{
		struct metalog_rec r2;

		cr_assert_eq(metalog_build_register_broker(ml, 1, inc, "127.0.0.1", 9092, NULL, &r2), 0);
		cr_assert_eq(metalog_apply_at(ml, 50, r2.buf, r2.len, NULL), 0);
		metalog_rec_free(&r2);
	}
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), -ENOENT);
	cr_assert_eq(t->parts[0].leader_epoch, 2, "nothing changed");
	metalog_rec_free(&r);
	metalog_close(ml);
}
