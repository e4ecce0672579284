/* tests/unit/test_metalog.c — the metadata log on a real disk: every kind
 * of change survives close and reopen exactly, the cluster id is stable, a
 * torn last record loses only that change, topic names follow Kafka's
 * rule, 1,000 topics replay, producer id blocks never repeat. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "control/meta_brokers.h"
#include "control/metalog.h"
#include "tests/unit/dir_fixture.h"
#include "tests/unit/helpers.h"

TestSuite(metalog, .init = dir_setup, .fini = dir_teardown, .timeout = 120);

static struct metalog *open_ml(void)
{
	struct metalog *ml;
	int rc = metalog_open(dir, 1, &ml);

	cr_assert_eq(rc, 0, "metalog_open: %s", strerror(-rc));
	return ml;
}

/* The whole image as text, byte for byte comparable. */
static char *image(const struct metalog *ml)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fprintf(f, "cluster %s count %d\n", metalog_cluster_id(ml), metalog_topic_count(ml));
	for (int i = 0; i < metalog_topic_count(ml); i++) {
		const struct meta_topic *t = metalog_topic_at(ml, i);

		fprintf(f, "%s id=", t->name);
		for (int j = 0; j < 16; j++)
			fprintf(f, "%02x", t->id[j]);
		fprintf(f, " p=%d e=%d del=%d", t->partitions, t->leader_epoch, t->deleted);
		for (int j = 0; j < t->nconfigs; j++)
			fprintf(f, " %s=%s", t->config_keys[j], t->config_values[j]);
		fputc('\n', f);
		cr_assert_eq(metalog_topic(ml, t->name), t);
		cr_assert_eq(metalog_topic_by_id(ml, t->id), t);
	}
	fclose(f);
	return buf;
}

static const char *cfg_get(const struct meta_topic *t, const char *key)
{
	for (int i = 0; i < t->nconfigs; i++)
		if (!strcmp(t->config_keys[i], key))
			return t->config_values[i];
	return NULL;
}

Test(metalog, changes_survive_reopen)
{
	struct metalog *ml = open_ml();
	const struct meta_topic *t;
	const char *k[] = { "cleanup.policy", "retention.ms" }, *v[] = { "compact", "60000" };
	char *before, *after;

	cr_assert_eq(metalog_topic_count(ml), 0);
	cr_assert_eq(metalog_create_topic(ml, "orders", 3, k, v, 2, &t), 0);
	cr_assert_str_eq(t->name, "orders");
	cr_assert_eq(t->partitions, 3);
	cr_assert_eq(t->leader_epoch, 0);
	cr_assert_eq((t->id[6] >> 4), 4, "uuid v4");
	cr_assert_str_eq(cfg_get(t, "cleanup.policy"), "compact");
	cr_assert_eq(metalog_create_topic(ml, "orders", 1, NULL, NULL, 0, NULL), -EEXIST);
	cr_assert_eq(metalog_create_topic(ml, "payments", 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "gone", 2, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "logs", 1, NULL, NULL, 0, NULL), 0);

	cr_assert_eq(metalog_add_partitions(ml, "payments", 8), 0);
	cr_assert_eq(metalog_topic(ml, "payments")->partitions, 8);
	cr_assert_eq(metalog_topic(ml, "payments")->leader_epoch, 1);
	cr_assert_eq(metalog_add_partitions(ml, "payments", 8), -EINVAL);
	cr_assert_eq(metalog_add_partitions(ml, "payments", 2), -EINVAL);
	cr_assert_eq(metalog_add_partitions(ml, "nope", 9), -ENOENT);

	cr_assert_eq(metalog_set_config(ml, "orders", "retention.ms", "120000"), 0);
	cr_assert_eq(metalog_set_config(ml, "orders", "cleanup.policy", NULL), 0);
	cr_assert_eq(metalog_set_config(ml, "orders", "cleanup.policy", NULL), 0, "absent: no-op");
	cr_assert_eq(metalog_set_config(ml, "logs", "durability", "sync"), 0);
	cr_assert_eq(metalog_set_config(ml, "logs", "durability", "fsync"), -EINVAL);
	cr_assert_eq(metalog_set_config(ml, "logs", "bogus.key", "1"), -ENOENT);
	cr_assert_eq(metalog_set_config(ml, "nope", "durability", "sync"), -ENOENT);
	t = metalog_topic(ml, "orders");
	cr_assert_eq(t->nconfigs, 1);
	cr_assert_str_eq(cfg_get(t, "retention.ms"), "120000");

	const struct meta_topic *g = metalog_topic(ml, "gone");

	cr_assert_eq(metalog_delete_topic(ml, "gone"), 0);
	cr_assert_eq(g->deleted, 1, "a borrowed pointer stays valid, marked deleted");
	cr_assert_null(metalog_topic(ml, "gone"));
	cr_assert_eq(metalog_delete_topic(ml, "gone"), -ENOENT);
	cr_assert_eq(metalog_topic_count(ml), 3);
	/* a name can be reused after deletion, with a new id */
	cr_assert_eq(metalog_create_topic(ml, "gone", 5, NULL, NULL, 0, &t), 0);
	cr_assert_neq(memcmp(t->id, g->id, 16), 0);
	cr_assert_eq(metalog_delete_topic(ml, "gone"), 0);

	before = image(ml);
	metalog_close(ml);
	ml = open_ml();
	after = image(ml);
	cr_assert_str_eq(after, before);
	cr_assert_null(metalog_topic(ml, "gone"));
	cr_assert_gt(metalog_records(ml), 10);
	/* and it keeps working after a reopen */
	cr_assert_eq(metalog_add_partitions(ml, "orders", 4), 0);
	free(before);
	before = image(ml);
	metalog_close(ml);
	ml = open_ml();
	free(after);
	after = image(ml);
	cr_assert_str_eq(after, before);
	free(before);
	free(after);
	metalog_close(ml);
}

Test(metalog, cluster_id_stable)
{
	struct metalog *ml = open_ml();
	char id[32];
	const char *c = metalog_cluster_id(ml);

	cr_assert_eq(strlen(c), 22);
	for (const char *p = c; *p; p++)
		cr_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
	cr_assert_neq(c[0], '-');
	snprintf(id, sizeof(id), "%s", c);
	metalog_close(ml);
	for (int i = 0; i < 3; i++) {
		ml = open_ml();
		cr_assert_str_eq(metalog_cluster_id(ml), id);
		metalog_close(ml);
	}
	/* another node id may not take over this data directory */
	cr_assert_eq(metalog_open(dir, 2, &ml), -EINVAL);
	/* another directory gets another cluster id */
	char other[4200];

	snprintf(other, sizeof(other), "%s/other", dir);
	cr_assert_eq(metalog_open(other, 1, &ml), 0);
	cr_assert_str_neq(metalog_cluster_id(ml), id);
	metalog_close(ml);
}

/* Find the metadata segment and the end of its data (the last batch). */
static void seg_path(char *buf, size_t n)
{
	snprintf(buf, n, "%s/__cluster_metadata-0/%020d.log", dir, 0);
}

Test(metalog, torn_last_record_loses_only_that_change)
{
	struct metalog *ml = open_ml();
	char path[4300], *before;
	const char *k[] = { "retention.ms" }, *v[] = { "1000" };

	cr_assert_eq(metalog_create_topic(ml, "a", 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "b", 2, k, v, 1, NULL), 0);
	before = image(ml);
	/* the last change: its batch is the last bytes of the segment */
	/* a crash mid-append: the checkpoint on disk is the one from before
	 * the change (it is written only once a change is durable) */
	char ck[4300];

	snprintf(ck, sizeof(ck), "cp '%s/__cluster_metadata-0/recovery-checkpoint' '%s/ck.saved'", dir, dir);
	cr_assert_eq(system(ck), 0);
	cr_assert_eq(metalog_set_config(ml, "b", "retention.ms", "2000"), 0);
	metalog_close(ml);
	snprintf(ck, sizeof(ck), "cp '%s/ck.saved' '%s/__cluster_metadata-0/recovery-checkpoint'", dir, dir);
	cr_assert_eq(system(ck), 0);

	/* the data end: scan the file for the last batch (zeros follow it) */
	seg_path(path, sizeof(path));
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	static uint8_t buf[1 << 16];
	ssize_t got = pread(fd, buf, sizeof(buf), 0);
	uint32_t at = 0, last = 0;
	struct batch_info bi;

	cr_assert_gt(got, 0);
	while (at < got && batch_validate(buf + at, (size_t)got - at, 0, 0, &bi) == 0) {
		last = at;
		at += bi.size;
	}
	cr_assert_gt(last, 0);
	/* cut in the middle of the last batch, as a crash would */
	cr_assert_eq(ftruncate(fd, (off_t)(last + (at - last) / 2)), 0);
	close(fd);

	ml = open_ml();
	char *after = image(ml);

	cr_assert_str_eq(after, before);
	cr_assert_str_eq(cfg_get(metalog_topic(ml, "b"), "retention.ms"), "1000");
	/* the log continues cleanly after the cut */
	cr_assert_eq(metalog_set_config(ml, "b", "retention.ms", "3000"), 0);
	metalog_close(ml);
	ml = open_ml();
	cr_assert_str_eq(cfg_get(metalog_topic(ml, "b"), "retention.ms"), "3000");
	metalog_close(ml);
	free(before);
	free(after);
}

Test(metalog, bad_topic_names)
{
	struct metalog *ml = open_ml();
	char longest[251], toolong[251];
	static const char *bad[] = { "", ".", "..", "a b", "a/b", "a:b", "é", "topic!", "a\tb" };

	memset(longest, 'x', 249);
	longest[249] = 0;
	memset(toolong, 'y', 250);
	toolong[250] = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(metalog_create_topic(ml, bad[i], 1, NULL, NULL, 0, NULL), -EINVAL, "'%s'", bad[i]);
		cr_assert_eq(metalog_topic_name_valid(bad[i]), 0);
	}
	cr_assert_eq(metalog_create_topic(ml, NULL, 1, NULL, NULL, 0, NULL), -EINVAL);
	cr_assert_eq(metalog_create_topic(ml, toolong, 1, NULL, NULL, 0, NULL), -EINVAL);
	cr_assert_eq(metalog_create_topic(ml, longest, 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "Ok_name-1.x", 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "...", 1, NULL, NULL, 0, NULL), 0, "only . and .. are refused");
	cr_assert_eq(metalog_create_topic(ml, "zero", 0, NULL, NULL, 0, NULL), -EINVAL);
	cr_assert_eq(metalog_create_topic(ml, "neg", -3, NULL, NULL, 0, NULL), -EINVAL);
	/* configs are validated before anything is written */
	const char *k[] = { "retention.ms" }, *v[] = { "soon" }, *k2[] = { "nope" };
	const char *kd[] = { "retention.ms", "retention.ms" }, *vd[] = { "1", "2" };

	cr_assert_eq(metalog_create_topic(ml, "cfg", 1, k, v, 1, NULL), -EINVAL);
	cr_assert_eq(metalog_create_topic(ml, "cfg", 1, k2, v, 1, NULL), -ENOENT);
	cr_assert_eq(metalog_create_topic(ml, "cfg", 1, kd, vd, 2, NULL), -EINVAL);
	cr_assert_null(metalog_topic(ml, "cfg"));
	cr_assert_eq(metalog_topic_count(ml), 3);
	metalog_close(ml);
	ml = open_ml();
	cr_assert_eq(metalog_topic_count(ml), 3);
	cr_assert_not_null(metalog_topic(ml, longest));
	metalog_close(ml);
}

Test(metalog, thousand_topics_replay)
{
	struct metalog *ml = open_ml();
	char name[64], *before, *after;

	for (int i = 0; i < 1000; i++) {
		const char *k[] = { "retention.bytes" };
		char val[32];
		const char *v[] = { val };

		snprintf(name, sizeof(name), "topic-%04d", i);
		snprintf(val, sizeof(val), "%d", 1000 + i);
		cr_assert_eq(metalog_create_topic(ml, name, 1 + i % 7, k, v, i % 2, NULL), 0);
	}
	for (int i = 0; i < 1000; i += 10) {
		snprintf(name, sizeof(name), "topic-%04d", i);
		cr_assert_eq(metalog_delete_topic(ml, name), 0);
	}
	for (int i = 1; i < 1000; i += 10) {
		snprintf(name, sizeof(name), "topic-%04d", i);
		cr_assert_eq(metalog_add_partitions(ml, name, 100), 0);
	}
	cr_assert_eq(metalog_topic_count(ml), 900);
	before = image(ml);
	metalog_close(ml);
	ml = open_ml();
	after = image(ml);
	cr_assert_str_eq(after, before);
	cr_assert_eq(metalog_topic_count(ml), 900);
	cr_assert_eq(metalog_topic(ml, "topic-0001")->partitions, 100);
	cr_assert_eq(metalog_topic(ml, "topic-0001")->leader_epoch, 1);
	cr_assert_str_eq(cfg_get(metalog_topic(ml, "topic-0003"), "retention.bytes"), "1003");
	cr_assert_null(metalog_topic(ml, "topic-0010"));
	metalog_close(ml);
	free(before);
	free(after);
}

Test(metalog, producer_id_blocks_never_repeat)
{
	struct metalog *ml = open_ml();
	int64_t prev_end = 0;

	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 5; i++) {
			int64_t first = metalog_next_producer_ids(ml, 1000);

			cr_assert_geq(first, prev_end, "round %d: %lld < %lld", round,
				      (long long)first, (long long)prev_end);
			prev_end = first + 1000;
		}
		metalog_close(ml);
		ml = open_ml();
	}
	cr_assert_eq(metalog_next_producer_ids(ml, 0), -EINVAL);
	cr_assert_eq(metalog_next_producer_ids(ml, 1), prev_end);
	metalog_close(ml);
}

/* Broker configs changed at run time: set, changed, deleted, per scope,
 * and replayed at open; keys that are not dynamic are refused. */
Test(metalog, broker_configs_survive_reopen)
{
	struct metalog *ml = open_ml();
	int32_t scope;
	const char *k, *v;

	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "log.retention.ms", "1000"), 0);
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "compression.type", "gzip"), 0);
	cr_assert_eq(metalog_set_broker_config(ml, 1, "log.retention.ms", "2000"), 0);
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "log.retention.ms", "3000"), 0);
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "compression.type", NULL), 0);
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "compression.type", NULL), 0, "absent");
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "num.partitions", "3"), -EPERM);
	cr_assert_eq(metalog_set_broker_config(ml, META_SCOPE_CLUSTER, "log.retention.ms", "soon"), -EINVAL);
	metalog_close(ml);
	ml = open_ml();
	cr_assert_eq(metalog_broker_config_at(ml, 0, &scope, &k, &v), 0);
	cr_assert(scope == META_SCOPE_CLUSTER && !strcmp(k, "log.retention.ms") && !strcmp(v, "3000"));
	cr_assert_eq(metalog_broker_config_at(ml, 1, &scope, &k, &v), 0);
	cr_assert(scope == 1 && !strcmp(k, "log.retention.ms") && !strcmp(v, "2000"));
	cr_assert_eq(metalog_broker_config_at(ml, 2, &scope, &k, &v), -ENOENT);
	metalog_close(ml);
}

Test(metalog, newer_format_is_refused)
{
	struct metalog *ml = open_ml();

	cr_assert_eq(metalog_create_topic(ml, "a", 1, NULL, NULL, 0, NULL), 0);
	metalog_close(ml);
	/* flip the version byte of the last record and fix the batch CRC */
	char path[4300];

	seg_path(path, sizeof(path));
	int fd = open(path, O_RDWR);
	static uint8_t buf[1 << 16];
	ssize_t got = pread(fd, buf, sizeof(buf), 0);
	uint32_t at = 0, last = 0;
	struct batch_info bi;

	while (at < got && batch_validate(buf + at, (size_t)got - at, 0, 0, &bi) == 0) {
		last = at;
		at += bi.size;
	}
	uint8_t *b = buf + last;
	struct record_iter it;
	struct record_view rv;

	record_iter_init(&it, b + OF_Records, bi.size - OF_Records, 1);
	cr_assert_eq(record_iter_next(&it, &rv), 1);
	((uint8_t *)rv.value)[0] = META_FORMAT_VERSION + 1;
	uint32_t crc = batch_compute_crc(b, at - last);

	b[OF_Crc] = (uint8_t)(crc >> 24);
	b[OF_Crc + 1] = (uint8_t)(crc >> 16);
	b[OF_Crc + 2] = (uint8_t)(crc >> 8);
	b[OF_Crc + 3] = (uint8_t)crc;
	cr_assert_eq(pwrite(fd, b, at - last, last), (ssize_t)(at - last));
	close(fd);
	cr_assert_eq(metalog_open(dir, 1, &ml), -EPROTO);
}

/* (issue 17) A metadata log truncated or damaged below what was durable is
 * refused (the broker stops, naming the file), never replayed as an empty
 * or shorter image: that would start "ready" with topics gone. */
Test(metalog, truncated_or_damaged_log_is_refused)
{
	for (int kind = 0; kind < 3; kind++) {
		struct metalog *ml = open_ml();
		char path[4300];
		int fd, rc;

		for (int i = 0; i < 20; i++) {
			char name[32];

			snprintf(name, sizeof(name), "t%d-%d", kind, i);
			cr_assert_eq(metalog_create_topic(ml, name, 2, NULL, NULL, 0, NULL), 0);
		}
		metalog_close(ml);
		seg_path(path, sizeof(path));
		fd = open(path, O_RDWR);
		cr_assert_geq(fd, 0);
		if (kind == 0) {
			cr_assert_eq(ftruncate(fd, 100), 0);          /* truncated to 100 bytes */
		} else if (kind == 1) {
			uint8_t junk[16];

			memset(junk, 0xa5, sizeof(junk));
			cr_assert_eq(pwrite(fd, junk, sizeof(junk), 1500), 16);   /* a damaged run */
		} else {
			cr_assert_eq(ftruncate(fd, 0), 0);            /* emptied */
		}
		close(fd);
		if (kind == 1) {
			/* without its index (a crash before the clean stop) the
			 * damage is found by the recovery scan */
			char cmd[4400];

			snprintf(cmd, sizeof(cmd), "rm -f '%s/__cluster_metadata-0/'*.index", dir);
			cr_assert_eq(system(cmd), 0);
		}
		ml = NULL;
		rc = metalog_open(dir, 1, &ml);
		cr_assert_lt(rc, 0, "kind %d: a damaged metadata log opened with %d topics", kind,
			     ml ? metalog_topic_count(ml) : -1);
		/* start over for the next kind */
		char cmd[4400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s/__cluster_metadata-0'", dir);
		cr_assert_eq(system(cmd), 0);
	}
}

/* Build, then apply: the records the local file commits, applied in the
 * same order to an image without a file (as every node of a quorum
 * applies them), give the same image, byte for byte. */
Test(metalog, records_applied_elsewhere_give_the_same_image)
{
	struct metalog *ml = open_ml(), *img;
	struct metalog_rec r;
	struct metalog_applied a;
	const char *k[] = { "retention.ms" }, *v[] = { "1000" };
	void *snap;
	size_t slen;
	char *want, *got;

	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_str_eq(metalog_cluster_id(img), "");
	/* the NODE record the open wrote reaches the image as a snapshot */
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	free(snap);
#define BOTH(build)                                                                  \
	do {                                                                         \
		cr_assert_eq(build, 0);                                              \
		cr_assert_gt(r.len, 0);                                              \
		cr_assert_eq(metalog_commit(ml, r.buf, r.len, NULL), 0);             \
		cr_assert_eq(metalog_apply(img, r.buf, r.len, &a), 0);               \
		metalog_rec_free(&r);                                                \
	} while (0)
	BOTH(metalog_build_topic(ml, "a", 3, k, v, 1, &r));
	cr_assert_eq(a.type, META_REC_TOPIC);
	cr_assert_str_eq(a.topic->name, "a");
	BOTH(metalog_build_topic(ml, "b", 1, NULL, NULL, 0, &r));
	BOTH(metalog_build_partitions(ml, "a", 5, &r));
	BOTH(metalog_build_config(ml, "a", "retention.ms", "2000", &r));
	BOTH(metalog_build_config(ml, "b", "cleanup.policy", "compact", &r));
	BOTH(metalog_build_delete_topic(ml, "b", &r));
	BOTH(metalog_build_broker_config(ml, META_SCOPE_CLUSTER, "log.retention.ms", "5000", &r));
	BOTH(metalog_build_producer_ids(ml, 1000, &r));
	cr_assert_eq(a.pid_start, 0);
	BOTH(metalog_build_producer_ids(ml, 1000, &r));
	cr_assert_eq(a.pid_start, 1000);
#undef BOTH
	/* deleting an absent override: nothing to write */
	cr_assert_eq(metalog_build_config(ml, "a", "segment.ms", NULL, &r), 0);
	cr_assert_eq(r.len, 0);
	want = image(ml);
	got = image(img);
	cr_assert_str_eq(got, want);
	cr_assert_eq(metalog_next_producer_id(img), 2000);
	cr_assert_eq(metalog_commit(img, "x", 1, NULL), -EOPNOTSUPP);
	free(got);
	/* and the file replays to it too */
	metalog_close(ml);
	ml = open_ml();
	got = image(ml);
	cr_assert_str_eq(got, want);
	cr_assert_eq(metalog_next_producer_id(ml), 2000);
	free(got);
	free(want);
	metalog_close(ml);
	metalog_close(img);
}

/* Racing proposals: two records built from the same image; the first to
 * be applied wins, the second no longer applies, changes nothing and says
 * why; the local file does not write it. */
Test(metalog, a_record_that_no_longer_applies_changes_nothing)
{
	struct metalog *ml = open_ml();
	struct metalog_rec r1, r2;
	struct metalog_applied a;
	int64_t nrec;
	char *before, *after;

	cr_assert_eq(metalog_build_topic(ml, "x", 1, NULL, NULL, 0, &r1), 0);
	cr_assert_eq(metalog_build_topic(ml, "x", 2, NULL, NULL, 0, &r2), 0);
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, NULL), 0);
	before = image(ml);
	cr_assert_eq(metalog_check(ml, r2.buf, r2.len), -EEXIST);
	cr_assert_eq(metalog_apply(ml, r2.buf, r2.len, NULL), -EEXIST);
	cr_assert_eq(metalog_commit(ml, r2.buf, r2.len, NULL), -EEXIST);
	/* the same record twice (its id is live) */
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, NULL), -EEXIST);
	metalog_rec_free(&r1);
	metalog_rec_free(&r2);

	cr_assert_eq(metalog_build_partitions(ml, "x", 4, &r1), 0);
	cr_assert_eq(metalog_build_partitions(ml, "x", 3, &r2), 0);
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, NULL), 0);
	cr_assert_eq(metalog_apply(ml, r2.buf, r2.len, NULL), -EINVAL);
	metalog_rec_free(&r1);
	metalog_rec_free(&r2);

	cr_assert_eq(metalog_build_producer_ids(ml, 10, &r1), 0);
	cr_assert_eq(metalog_build_producer_ids(ml, 10, &r2), 0);
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, &a), 0);
	cr_assert_eq(a.pid_start, 0);
	cr_assert_eq(metalog_apply(ml, r2.buf, r2.len, NULL), -EINVAL);
	cr_assert_eq(metalog_next_producer_id(ml), 10);
	metalog_rec_free(&r1);
	metalog_rec_free(&r2);

	cr_assert_eq(metalog_build_delete_topic(ml, "x", &r1), 0);
	cr_assert_eq(metalog_build_config(ml, "x", "retention.ms", "5", &r2), 0);
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, NULL), 0);
	cr_assert_eq(metalog_apply(ml, r1.buf, r1.len, NULL), -ENOENT);
	cr_assert_eq(metalog_apply(ml, r2.buf, r2.len, NULL), -ENOENT);
	metalog_rec_free(&r1);
	metalog_rec_free(&r2);

	cr_assert_eq(metalog_build_node(ml, &r1), -EEXIST);
	free(before);

	/* what the file holds is what a commit wrote: nothing above */
	cr_assert_eq(metalog_create_topic(ml, "y", 1, NULL, NULL, 0, NULL), 0);
	before = image(ml);
	nrec = 0;
	metalog_close(ml);
	ml = open_ml();
	nrec = metalog_records(ml);
	cr_assert_eq(nrec, 2, "NODE and y: %lld records", (long long)nrec);
	after = image(ml);
	cr_assert_str_eq(after, before);
	/* bytes that are no record */
	cr_assert_eq(metalog_apply(ml, "\x00", 1, NULL), -EPROTO);
	cr_assert_eq(metalog_apply(ml, "\x00\x63\x01", 3, NULL), -EPROTO);
	cr_assert_eq(metalog_apply(ml, "\x00\x05\x02", 3, NULL), -EPROTO);
	free(before);
	free(after);
	metalog_close(ml);
}

/* A snapshot is the image: restored into an empty image it gives the same
 * topics (ids, partitions, leader epochs, configs), broker configs,
 * cluster id and producer-id position; bytes that are no snapshot are
 * refused. */
Test(metalog, snapshot_restores_the_same_image)
{
	struct metalog *ml = open_ml(), *img;
	const struct meta_topic *old;
	void *snap;
	size_t slen;
	char *want, *got;

	cr_assert_eq(metalog_create_topic(ml, "a", 2, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "b", 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_create_topic(ml, "c", 1, NULL, NULL, 0, NULL), 0);
	cr_assert_eq(metalog_add_partitions(ml, "a", 6), 0);
	cr_assert_eq(metalog_set_config(ml, "a", "retention.ms", "77"), 0);
	cr_assert_eq(metalog_delete_topic(ml, "b"), 0);
	cr_assert_eq(metalog_set_broker_config(ml, 1, "log.retention.ms", "5000"), 0);
	cr_assert_eq(metalog_next_producer_ids(ml, 1000), 0);
	want = image(ml);
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_create_topic(img, "z", 1, NULL, NULL, 0, NULL), -EOPNOTSUPP);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	got = image(img);
	cr_assert_str_eq(got, want);
	cr_assert_eq(metalog_topic(img, "a")->leader_epoch, 1);
	cr_assert_eq(metalog_next_producer_id(img), 1000);
	free(got);
	/* restoring again replaces the image; borrowed topics stay readable */
	old = metalog_topic(img, "a");
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	cr_assert_eq(old->deleted, 1);
	cr_assert_str_eq(old->name, "a");
	got = image(img);
	cr_assert_str_eq(got, want);
	free(got);
	/* not a snapshot; a snapshot cut short */
	cr_assert_eq(metalog_restore(img, "nonsense", 8), -EPROTO);
	cr_assert_eq(metalog_restore(img, snap, slen - 3), -EPROTO);
	free(snap);
	free(want);
	metalog_close(img);
	metalog_close(ml);
}

/* A broker's native replication address (its dpdk.listen) travels in its
 * registration, after the rack and only when it has one: a broker without
 * DPDK registers with the bytes it always did; both survive a snapshot. */
Test(metalog, a_registration_carries_the_native_replication_address)
{
	struct metalog *ml = open_ml(), *img;
	struct metalog_rec r, plain;
	uint8_t inc[16] = { 1 };
	const struct meta_broker *b;
	void *snap;
	size_t slen;

	cr_assert_eq(metalog_build_register_broker(ml, 2, inc, "127.0.0.1", 9092, "r1", &plain), 0);
	cr_assert_eq(metalog_build_register_broker_repl(ml, 2, inc, "127.0.0.1", 9092, "r1", 0, 0, &r), 0);
	cr_assert_eq(r.len, plain.len, "no address: the same record as before");
	cr_assert_eq(memcmp(r.buf, plain.buf, r.len), 0);
	metalog_rec_free(&r);
	metalog_rec_free(&plain);
	cr_assert_eq(metalog_build_register_broker_repl(ml, 2, inc, "127.0.0.1", 9092, "r1", htonl(0x0a4d0002), 70000,
							&r), -EINVAL);
	cr_assert_eq(metalog_build_register_broker_repl(ml, 2, inc, "127.0.0.1", 9092, "r1", htonl(0x0a4d0002), 9095,
							&r), 0);
	cr_assert_eq(metalog_apply_at(ml, 30, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	inc[0] = 3;
	cr_assert_eq(metalog_build_register_broker(ml, 3, inc, "127.0.0.1", 9093, NULL, &r), 0);
	cr_assert_eq(metalog_apply_at(ml, 31, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	b = metalog_broker(ml, 2);
	cr_assert(b && b->repl_ip == htonl(0x0a4d0002) && b->repl_port == 9095 && !strcmp(b->rack, "r1"));
	b = metalog_broker(ml, 3);
	cr_assert(b && b->repl_ip == 0 && b->repl_port == 0);
	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	b = metalog_broker(img, 2);
	cr_assert(b && b->repl_ip == htonl(0x0a4d0002) && b->repl_port == 9095 && b->epoch == 30);
	b = metalog_broker(img, 3);
	cr_assert(b && b->repl_port == 0);
	free(snap);
	metalog_close(img);
	metalog_close(ml);
}

/* A broker registers every listener it advertises (REGISTER_BROKER_ENDPOINTS):
 * each endpoint and the inter-broker one's name survive the record and a
 * snapshot; host/port are the inter-broker endpoint's. A broker of the older
 * REGISTER_BROKER record loads with its one address and no endpoints, and a
 * snapshot writes it as it was. Bad records are refused. */
Test(metalog, a_registration_carries_an_endpoint_per_listener)
{
	struct metalog *ml = open_ml(), *img;
	struct metalog_rec r;
	uint8_t inc[16] = { 7 };
	struct meta_endpoint eps[9];
	const struct meta_broker *b;
	uint8_t *bad, *at;
	void *snap;
	size_t slen;

	memset(eps, 0, sizeof(eps));
	for (int i = 0; i < 9; i++) {
		snprintf(eps[i].name, sizeof(eps[i].name), "L%d", i);
		snprintf(eps[i].host, sizeof(eps[i].host), "10.0.0.%d", i);
		eps[i].port = 9000 + i;
	}
	snprintf(eps[0].name, sizeof(eps[0].name), "INTERNAL");
	eps[0].protocol = 3;   /* SASL_SSL */
	snprintf(eps[1].name, sizeof(eps[1].name), "PLAINTEXT");
	eps[1].protocol = 0;
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", 0, 0, "NOPE", eps, 2, &r), -EINVAL,
		     "the inter-broker listener must be one of them");
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", 0, 0, "INTERNAL", eps, 0, &r), -EINVAL);
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", 0, 0, "INTERNAL", eps, 9, &r), -EINVAL,
		     "at most 8");
	snprintf(eps[2].name, sizeof(eps[2].name), "PLAINTEXT");
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", 0, 0, "INTERNAL", eps, 3, &r), -EINVAL,
		     "a name twice");
	snprintf(eps[2].name, sizeof(eps[2].name), "L2");
	eps[2].protocol = 4;
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", 0, 0, "INTERNAL", eps, 3, &r), -EINVAL,
		     "no such security protocol");
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", htonl(0x0a4d0002), 9095, "INTERNAL", eps, 2,
						      &r), -EOPNOTSUPP, "not at metadata.version 1");
	cr_assert_eq(metalog_build_feature_level(ml, "metadata.version", 2, &r), 0);
	cr_assert_eq(metalog_apply_at(ml, 39, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, "r1", htonl(0x0a4d0002), 9095, "INTERNAL", eps, 2,
						      &r), 0);

	/* damaged: cut short, or the inter-broker name changed to none of theirs */
	cr_assert_eq(metalog_apply_at(ml, 40, r.buf, r.len - 1, NULL), -EPROTO);
	bad = malloc(r.len);
	memcpy(bad, r.buf, r.len);
	at = memmem(bad, r.len, "INTERNAL", 8);
	cr_assert(at);
	at[0] = 'X';
	cr_assert_eq(metalog_apply_at(ml, 40, bad, r.len, NULL), -EPROTO);
	free(bad);
	cr_assert_null(metalog_broker(ml, 2), "the image unchanged");

	cr_assert_eq(metalog_apply_at(ml, 40, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	inc[0] = 8;
	cr_assert_eq(metalog_build_register_broker(ml, 3, inc, "127.0.0.1", 9093, NULL, &r), 0);
	cr_assert_eq(metalog_apply_at(ml, 41, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);

	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	for (int k = 0; k < 2; k++) {
		const struct metalog *m = k ? img : ml;

		b = metalog_broker(m, 2);
		cr_assert(b && b->epoch == 40 && b->nendpoints == 2 && b->inter == 0);
		cr_assert_str_eq(b->host, "10.0.0.0", "host/port: the inter-broker endpoint's");
		cr_assert_eq(b->port, 9000);
		cr_assert_str_eq(b->rack, "r1");
		cr_assert(b->repl_ip == htonl(0x0a4d0002) && b->repl_port == 9095);
		cr_assert_str_eq(b->endpoints[0].name, "INTERNAL");
		cr_assert_eq(b->endpoints[0].protocol, 3);
		cr_assert_str_eq(b->endpoints[1].name, "PLAINTEXT");
		cr_assert_str_eq(b->endpoints[1].host, "10.0.0.1");
		cr_assert_eq(b->endpoints[1].port, 9001);
		cr_assert_eq(b->endpoints[1].protocol, 0);
		b = metalog_broker(m, 3);
		cr_assert(b && b->epoch == 41 && b->nendpoints == 0 && b->port == 9093, "the old record: one address");
		cr_assert_str_eq(b->host, "127.0.0.1");
	}
	/* the old record is written as it was: its bytes are in the snapshot */
	cr_assert_eq(metalog_build_register_broker(ml, 3, inc, "127.0.0.1", 9093, NULL, &r), 0);
	cr_assert(memmem(snap, slen, (const uint8_t *)r.buf + 2 + 1 + 4 + 16 + 8,
			 r.len - (2 + 1 + 4 + 16 + 8)), "broker 3's host, port and rack as a REGISTER_BROKER");
	metalog_rec_free(&r);
	free(snap);
	metalog_close(img);
	metalog_close(ml);
}

/* metadata.version (control/meta_features.h): a log without a FEATURE_LEVEL
 * record is at level 1, and there a registration with endpoints (20) is
 * never built; a FEATURE_LEVEL record raises the level (its epoch: its
 * log index), a snapshot carries it, and it is never lowered. A feature or
 * level this build does not know is -EPROTO. */
Test(metalog, metadata_version_gates_the_endpoints_record)
{
	struct metalog *ml = open_ml(), *img;
	struct metalog_rec r;
	struct meta_endpoint ep;
	uint8_t inc[16] = { 9 };
	uint8_t *bad;
	void *snap;
	size_t slen;

	memset(&ep, 0, sizeof(ep));
	snprintf(ep.name, sizeof(ep.name), "PLAINTEXT");
	snprintf(ep.host, sizeof(ep.host), "127.0.0.1");
	ep.port = 9092;
	cr_assert_eq(metalog_metadata_version(ml), 1, "an old log (no FEATURE_LEVEL): level 1");
	cr_assert_eq(metalog_features_epoch(ml), 0);
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, NULL, 0, 0, "PLAINTEXT", &ep, 1, &r), -EOPNOTSUPP,
		     "record 20 is never built below level 2");
	cr_assert_null(r.buf);
	cr_assert_eq(metalog_build_register_broker(ml, 2, inc, "127.0.0.1", 9092, NULL, &r), 0, "record 8 is");
	metalog_rec_free(&r);

	cr_assert_eq(metalog_build_feature_level(ml, "no.such.feature", 2, &r), -ENOENT);
	cr_assert_eq(metalog_build_feature_level(ml, "metadata.version", 3, &r), -ERANGE, "beyond this build");
	cr_assert_eq(metalog_build_feature_level(ml, "metadata.version", 2, &r), 0);
	/* a level this build does not know, or another feature: -EPROTO */
	bad = malloc(r.len);
	memcpy(bad, r.buf, r.len);
	bad[r.len - 9] = 3;                  /* the level's low byte */
	cr_assert_eq(metalog_apply_at(ml, 10, bad, r.len, NULL), -EPROTO);
	memcpy(bad, r.buf, r.len);
	bad[2 + 1 + 2] = 'M';                /* "Metadata.version" */
	cr_assert_eq(metalog_apply_at(ml, 10, bad, r.len, NULL), -EPROTO);
	free(bad);
	cr_assert_eq(metalog_metadata_version(ml), 1, "the image unchanged");

	cr_assert_eq(metalog_apply_at(ml, 10, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_metadata_version(ml), 2);
	cr_assert_eq(metalog_features_epoch(ml), 10, "its epoch: the record's log index");
	cr_assert_eq(metalog_build_feature_level(ml, "metadata.version", 2, &r), 0);
	cr_assert_eq(r.len, 0, "there already: nothing to write");
	cr_assert_eq(metalog_build_feature_level(ml, "metadata.version", 1, &r), -EINVAL, "never lowered");
	cr_assert_eq(metalog_build_register_endpoints(ml, 2, inc, NULL, 0, 0, "PLAINTEXT", &ep, 1, &r), 0,
		     "record 20 from level 2");
	cr_assert_eq(metalog_apply_at(ml, 11, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);

	cr_assert_eq(metalog_snapshot(ml, &snap, &slen), 0);
	cr_assert_eq(metalog_image_new(1, &img), 0);
	cr_assert_eq(metalog_metadata_version(img), 1);
	cr_assert_eq(metalog_restore(img, snap, slen), 0);
	cr_assert_eq(metalog_metadata_version(img), 2, "the snapshot carries the level");
	cr_assert_eq(metalog_features_epoch(img), 10, "and its epoch");
	cr_assert(metalog_broker(img, 2) && metalog_broker(img, 2)->nendpoints == 1);
	free(snap);

	/* a record that would lower it is refused on apply too */
	{
		uint8_t low[64];
		size_t n = 0;
		const char *name = "metadata.version";

		low[n++] = 0;
		low[n++] = META_REC_FEATURE_LEVEL;
		low[n++] = 1;                /* the version byte */
		low[n++] = 0;
		low[n++] = (uint8_t)strlen(name);
		memcpy(low + n, name, strlen(name));
		n += strlen(name);
		low[n++] = 0;
		low[n++] = 1;                /* level 1 */
		memset(low + n, 0xff, 8);    /* epoch -1 */
		n += 8;
		cr_assert_eq(metalog_apply_at(img, 12, low, n, NULL), -EINVAL);
		cr_assert_eq(metalog_metadata_version(img), 2);
		metalog_close(img);
		/* and an empty image takes it: level 1 written explicitly */
		cr_assert_eq(metalog_image_new(1, &img), 0);
		cr_assert_eq(metalog_apply_at(img, 3, low, n, NULL), 0);
		cr_assert_eq(metalog_metadata_version(img), 1);
		cr_assert_eq(metalog_features_epoch(img), 3);
	}
	metalog_close(img);
	metalog_close(ml);
}
