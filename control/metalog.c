/* control/metalog.c — the metadata log's local file: open it and replay
 * it into the image, commit a change (append it, wait until it is
 * durable, then apply it to the image with the same function replay uses,
 * so a reopened log rebuilds exactly the same image), close it; and the
 * synchronous changes (build, then commit). The image is
 * metalog_image.c's, the builders metalog_build.c's, snapshots
 * metalog_snapshot.c's. See metalog.h.
 *
 * @thread ctl: the file (its private store and plog) and the image are the
 * control thread's; a commit blocks that thread until the record is
 * durable, never a shard. */
#include "control/metalog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control/metalog_internal.h"
#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/slog.h"

/* ---- the local file ------------------------------------------------------ */

static int build_commit(struct metalog *ml, int rc, struct metalog_rec *r, struct metalog_applied *out)
{
	if (rc == 0 && r->len)
		rc = metalog_commit(ml, r->buf, r->len, out);
	metalog_rec_free(r);
	return rc;
}

/* The local file: append one record, wait until it is durable, then apply
 * it. A record that does not apply is not written. */
int metalog_commit(struct metalog *ml, const void *rec, size_t len, struct metalog_applied *out)
{
	struct batch_builder bb;
	const uint8_t *val;
	size_t vlen;
	int16_t type;
	int64_t base;
	ssize_t size;
	int rc;

	if (ml->err)
		return ml->err;
	if (!ml->pl)
		return -EOPNOTSUPP;   /* the image of a quorum: propose instead */
	if ((rc = metalog_rec_split(rec, len, &type, &val, &vlen)) < 0)
		return rc;
	if ((rc = metalog_check(ml, rec, len)) < 0)
		return rc;
	uint8_t key[2] = { (uint8_t)((uint16_t)type >> 8), (uint8_t)type };

	batch_builder_init(&bb, ml->bbuf, META_BATCH_CAP, 0);
	if (vlen > META_MAX_RECORD ||
	    batch_builder_add(&bb, 0, 0, key, 2, val, (int32_t)vlen, NULL, 0, 0) < 0 ||
	    (size = batch_builder_finish(&bb, 0, -1, -1, -1, -1)) < 0)
		return -EMSGSIZE;
	while ((rc = plog_append(ml->pl, ml->bbuf, (uint32_t)size, &base)) == -ENOBUFS)
		store_poll(&ml->st, 1);
	if (rc == 0) {
		while (ml->pl->durable_offset <= base && !ml->pl->err)
			store_poll(&ml->st, 1);
		rc = ml->pl->err;
	}
	/* the durable high watermark moves with every change: a later start
	 * then tells a damaged log from a crash mid-append (a failed
	 * checkpoint only weakens that check; the change is durable) */
	if (rc == 0)
		(void)plog_checkpoint_sync(ml->pl);
	if (rc < 0) {
		ml->err = rc;   /* failed until reopened: the image stays as it was */
		return rc;
	}
	rc = metalog_record_apply(ml, type, val, vlen, 0, out);
	if (rc < 0)
		ml->err = rc;   /* durable but not in the image: failed until reopened (replay applies it) */
	return rc;
}

static int replay(struct metalog *ml)
{
	struct plog *pl = ml->pl;
	int64_t off = pl->log_start;

	while ((ml->replay_at = off) < pl->high_watermark) {
		struct plog_read rd = { .offset = off, .max_offset = pl->high_watermark,
					.max_bytes = META_READ_CAP / 2, .buf = ml->rbuf,
					.buf_cap = META_READ_CAP };
		int rc = plog_read_sync(pl, &rd);

		if (rc < 0)
			return rc;
		if (rd.bytes == 0) {
			plog_read_release(&rd);
			return -EIO;
		}
		for (uint32_t at = 0; at < rd.bytes && rc >= 0;) {
			const uint8_t *b = rd.data + at;
			struct batch_info bi;
			struct record_iter it;
			struct record_view rv;

			if ((rc = batch_validate(b, rd.bytes - at, 0, 0, &bi)) < 0) {
				rc = -EIO;
				break;
			}
			at += bi.size;
			if (batch_last_offset(b) < off)
				continue;
			if (bi.attributes & 0x7) {
				rc = -EPROTO;   /* we never compress metadata */
				break;
			}
			record_iter_init(&it, b + OF_Records, bi.size - OF_Records, bi.records);
			while ((rc = record_iter_next(&it, &rv)) == 1) {
				if (rv.key_len != 2 || !rv.value) {
					rc = -EPROTO;
					break;
				}
				int16_t type = (int16_t)(rv.key[0] << 8 | rv.key[1]);

				/* the file holds only records that applied when
				 * written: one that does not is damage */
				rc = metalog_record_apply(ml, type, rv.value, (size_t)rv.value_len, 0, NULL);
				if (rc < 0) {
					rc = rc == -ENOMEM ? rc : -EPROTO;
					break;
				}
				ml->records++;
			}
			if (rc < 0)
				break;
			off = batch_last_offset(b) + 1;
		}
		plog_read_release(&rd);
		if (rc < 0)
			return rc == -BATCH_ERR_RECORD ? -EIO : rc;
	}
	return 0;
}

int metalog_open(const char *data_dir, int32_t node_id, struct metalog **out)
{
	struct metalog *ml = calloc(1, sizeof(*ml));
	struct plog_config cfg;
	char *path = NULL;
	int rc;

	if (!ml)
		return -ENOMEM;
	ml->node_id = node_id;
	if (mkdir(data_dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		free(ml);
		return rc;
	}
	if (asprintf(&path, "%s/%s", data_dir, META_DIR) < 0) {
		free(ml);
		return -ENOMEM;
	}
	ml->bbuf = malloc(META_BATCH_CAP);
	if (!ml->bbuf || posix_memalign((void **)&ml->rbuf, 4096, META_READ_CAP)) {
		free(ml->bbuf);
		free(path);
		free(ml);
		return -ENOMEM;
	}
	if ((rc = store_init(&ml->st, NULL, META_TAIL_BUDGET)) < 0) {
		free(ml->rbuf);
		free(ml->bbuf);
		free(path);
		free(ml);
		return rc;
	}
	ml->has_store = 1;
	plog_config_defaults(&cfg);
	cfg.segment_bytes = 64u << 20;
	cfg.max_batch = META_BATCH_CAP;
	cfg.retention_ms = -1;
	cfg.retention_bytes = -1;
	cfg.durability = PLOG_DUR_SYNC;
	cfg.damage_refuses = 1;   /* topics missing from the image are never "ready" */
	rc = plog_open(&ml->st, path, &cfg, &ml->pl);
	if (rc < 0) {
		if (rc == -EUCLEAN)
			slog(SLOG_ERR, "the metadata log is damaged: %s. Sluice will not start without "
				"its topics. Restore %s from a backup (or, to start this node with no topics, "
				"move that directory aside); the files were left as they are",
				ml->st.problem, path);
		free(path);
		ml->pl = NULL;
		metalog_close(ml);
		return rc;
	}
	if ((rc = replay(ml)) < 0) {
		slog(SLOG_ERR, "the metadata log %s cannot be replayed: %s (a record at offset %"
			PRId64 " is damaged or of an unknown kind). Sluice will not start without its topics. "
			"Restore that directory from a backup (or, to start this node with no topics, move it "
			"aside)", path, strerror(-rc), ml->replay_at);
		free(path);
		metalog_close(ml);
		return rc;
	}
	free(path);
	if (ml->have_node && ml->node_rec != node_id) {
		metalog_close(ml);
		return -EINVAL;   /* this data directory belongs to another node */
	}
	if (!ml->have_node) {
		struct metalog_rec r;

		if ((rc = build_commit(ml, metalog_build_node(ml, &r), &r, NULL)) < 0) {
			metalog_close(ml);
			return rc;
		}
	}
	*out = ml;
	return 0;
}

int metalog_image_new(int32_t node_id, struct metalog **out)
{
	struct metalog *ml = calloc(1, sizeof(*ml));

	if (!ml)
		return -ENOMEM;
	ml->node_id = node_id;
	if (posix_memalign((void **)&ml->rbuf, 4096, META_READ_CAP)) {
		free(ml);
		return -ENOMEM;
	}
	*out = ml;
	return 0;
}

void metalog_close(struct metalog *ml)
{
	if (!ml)
		return;
	if (ml->pl)
		plog_close(ml->pl);
	if (ml->has_store)
		store_fini(&ml->st);
	metalog_image_fini(ml);
	free(ml->bbuf);
	free(ml->rbuf);
	free(ml);
}

const char *metalog_cluster_id(const struct metalog *ml)
{
	return ml->cluster_id;
}

int32_t metalog_node_id(const struct metalog *ml)
{
	return ml->node_id;
}

int64_t metalog_records(const struct metalog *ml)
{
	return ml->records;
}

/* ---- the local file's synchronous changes: build, then commit ----------- */

int metalog_create_topic(struct metalog *ml, const char *name, int32_t partitions,
			 const char *const *keys, const char *const *values, int n,
			 const struct meta_topic **out)
{
	struct metalog_rec r;
	struct metalog_applied a = { 0 };
	int rc = build_commit(ml, metalog_build_topic(ml, name, partitions, keys, values, n, &r), &r, &a);

	if (rc == 0 && out)
		*out = a.topic;
	return rc;
}

int metalog_delete_topic(struct metalog *ml, const char *name)
{
	struct metalog_rec r;

	return build_commit(ml, metalog_build_delete_topic(ml, name, &r), &r, NULL);
}

int metalog_add_partitions(struct metalog *ml, const char *name, int32_t new_total)
{
	struct metalog_rec r;

	return build_commit(ml, metalog_build_partitions(ml, name, new_total, &r), &r, NULL);
}

int metalog_set_config(struct metalog *ml, const char *name, const char *key, const char *value)
{
	struct metalog_rec r;

	return build_commit(ml, metalog_build_config(ml, name, key, value, &r), &r, NULL);
}

int metalog_set_broker_config(struct metalog *ml, int32_t scope, const char *key, const char *value)
{
	struct metalog_rec r;

	return build_commit(ml, metalog_build_broker_config(ml, scope, key, value, &r), &r, NULL);
}

int64_t metalog_next_producer_ids(struct metalog *ml, int32_t block)
{
	struct metalog_rec r;
	struct metalog_applied a = { 0 };
	int rc = build_commit(ml, metalog_build_producer_ids(ml, block, &r), &r, &a);

	return rc < 0 ? rc : a.pid_start;
}
