/* tests/unit/test_meta_diff.c — what a snapshot installed into a running
 * node's image changed (control/meta_diff.h): an image follows records
 * up to a point, another goes on (topics deleted, created, grown,
 * reconfigured, a name deleted and made again, a broker config set);
 * the first takes the second's snapshot, and the diff names each topic
 * the skipped records changed, and nothing else. */
#include <errno.h>
#include <string.h>

#include "control/meta_diff.h"
#include "control/metalog.h"
#include "tests/unit/helpers.h"

TestSuite(meta_diff, .timeout = 60);

static void apply1(struct metalog *ml, int rc, struct metalog_rec *r)
{
	cr_assert_eq(rc, 0, "build: %d", rc);
	cr_assert_eq(metalog_apply(ml, r->buf, r->len, NULL), 0);
	metalog_rec_free(r);
}

/* Every change applied to both images a and b (ml2 may be NULL). */
static void topic(struct metalog *ml, struct metalog *ml2, const char *name, int32_t parts)
{
	struct metalog_rec r;
	int rc = metalog_build_topic(ml, name, parts, NULL, NULL, 0, &r);

	cr_assert_eq(rc, 0);
	if (ml2)
		cr_assert_eq(metalog_apply(ml2, r.buf, r.len, NULL), 0);
	apply1(ml, 0, &r);
}

static void both(struct metalog *a, struct metalog *b, int rc, struct metalog_rec *r)
{
	cr_assert_eq(rc, 0);
	cr_assert_eq(metalog_apply(b, r->buf, r->len, NULL), 0);
	apply1(a, 0, r);
}

struct seen {
	char what[16][300];
	int n;
};

static struct metalog *named;   /* where the ids are looked up */
static struct meta_diff *old_d;

static void note(void *arg, const uint8_t id[16], enum meta_diff_kind kind)
{
	struct seen *s = arg;
	const struct meta_topic *t = metalog_topic_by_id(named, id);
	static const char *const k[] = { "created", "deleted", "changed" };

	cr_assert_lt(s->n, 16);
	/* a deleted topic is no longer in the image: its id's first byte */
	if (t)
		snprintf(s->what[s->n++], 300, "%s %s", k[kind], t->name);
	else
		snprintf(s->what[s->n++], 300, "%s id%02x%02x%02x%02x", k[kind], id[0], id[1], id[2], id[3]);
}

static int has(const struct seen *s, const char *what)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->what[i], what))
			return 1;
	return 0;
}

Test(meta_diff, a_snapshot_names_the_topics_the_skipped_records_changed)
{
	struct metalog *behind, *ahead;
	struct metalog_rec r;
	struct seen s = { 0 };
	uint8_t gone_id[16], again_id[16];
	void *snap;
	size_t len;
	int broker;

	cr_assert_eq(metalog_image_new(1, &behind), 0);
	cr_assert_eq(metalog_image_new(2, &ahead), 0);
	topic(behind, ahead, "same", 2);
	topic(behind, ahead, "gone", 1);
	topic(behind, ahead, "grown", 1);
	topic(behind, ahead, "conf", 1);
	topic(behind, ahead, "again", 1);
	both(behind, ahead, metalog_build_config(behind, "same", "retention.ms", "5000", &r), &r);
	both(behind, ahead, metalog_build_broker_config(behind, -1, "log.retention.ms", "7000", &r), &r);
	memcpy(gone_id, metalog_topic(behind, "gone")->id, 16);
	memcpy(again_id, metalog_topic(behind, "again")->id, 16);

	/* what "behind" skips */
	apply1(ahead, metalog_build_delete_topic(ahead, "gone", &r), &r);
	apply1(ahead, metalog_build_partitions(ahead, "grown", 3, &r), &r);
	apply1(ahead, metalog_build_config(ahead, "conf", "retention.ms", "1000", &r), &r);
	apply1(ahead, metalog_build_delete_topic(ahead, "again", &r), &r);
	topic(ahead, NULL, "again", 2);
	topic(ahead, NULL, "fresh", 4);

	/* nothing differs from itself */
	cr_assert_eq(meta_diff_take(behind, &old_d), 0);
	named = behind;
	cr_assert_eq(meta_diff_each(old_d, behind, note, &s), 0);
	cr_assert_eq(s.n, 0, "%d notes for an unchanged image", s.n);
	meta_diff_free(old_d);

	cr_assert_eq(meta_diff_take(behind, &old_d), 0);
	cr_assert_eq(metalog_snapshot(ahead, &snap, &len), 0);
	cr_assert_eq(metalog_restore(behind, snap, len), 0);
	free(snap);
	broker = meta_diff_each(old_d, behind, note, &s);
	cr_assert_eq(broker, 0, "the broker configs are the same");
	for (int i = 0; i < s.n; i++)
		cr_log_info("%s", s.what[i]);
	cr_assert(has(&s, "created fresh"));
	cr_assert(has(&s, "created again"), "a name made again is another topic");
	cr_assert(has(&s, "changed grown"));
	cr_assert(has(&s, "changed conf"));
	{
		char g[64], a[64];

		snprintf(g, sizeof(g), "deleted id%02x%02x%02x%02x", gone_id[0], gone_id[1], gone_id[2], gone_id[3]);
		snprintf(a, sizeof(a), "deleted id%02x%02x%02x%02x", again_id[0], again_id[1], again_id[2], again_id[3]);
		cr_assert(has(&s, g), "gone deleted");
		cr_assert(has(&s, a), "the old 'again' deleted");
	}
	cr_assert_eq(s.n, 6, "%d notes: the unchanged topic 'same' named too?", s.n);
	meta_diff_free(old_d);

	/* a broker config set in the skipped records */
	cr_assert_eq(meta_diff_take(behind, &old_d), 0);
	apply1(ahead, metalog_build_broker_config(ahead, -1, "log.retention.ms", "8000", &r), &r);
	cr_assert_eq(metalog_snapshot(ahead, &snap, &len), 0);
	cr_assert_eq(metalog_restore(behind, snap, len), 0);
	free(snap);
	s.n = 0;
	cr_assert_eq(meta_diff_each(old_d, behind, note, &s), 1, "the broker configs differ");
	cr_assert_eq(s.n, 0);
	meta_diff_free(old_d);
	metalog_close(behind);
	metalog_close(ahead);
}
