/* control/metalog_snapshot.c — the image as a snapshot (metalog_snapshot:
 * "SLMETA01", then records, each a uint32 length (big-endian) and the
 * record's bytes, that rebuild the image when applied in order) and an
 * image rebuilt from one (metalog_restore). The quorum's snapshots and a
 * broker-only node's image file (control/meta_image.c) carry these bytes.
 * See metalog.h.
 *
 * @thread ctl: reads or replaces the control thread's image; the snapshot
 * is built in memory (open_memstream), never on a shard. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_features.h"
#include "control/meta_parts.h"
#include "control/metalog_codec.h"
#include "control/metalog_internal.h"
#include "storage/batch.h"

#define SNAP_MAGIC "SLMETA01"

/* One record of the snapshot: uint32 length (big-endian), the record. */
static int snap_put(FILE *f, const struct enc *e)
{
	uint8_t l[4];

	be32_store(l, (uint32_t)e->len);
	if (e->err)
		return e->err;
	return fwrite(l, 4, 1, f) == 1 && fwrite(e->p, e->len, 1, f) == 1 ? 0 : -ENOMEM;
}

static int snap_put_cb(void *arg, struct enc *e)
{
	return snap_put(arg, e);
}

int metalog_snapshot(const struct metalog *ml, void **buf, size_t *len)
{
	char *mem = NULL;
	size_t mlen = 0;
	FILE *f = open_memstream(&mem, &mlen);
	uint8_t *tmp = malloc(META_MAX_RECORD + 2);
	int rc = f && tmp ? 0 : -ENOMEM;

	if (!rc && fwrite(SNAP_MAGIC, 8, 1, f) != 1)
		rc = -ENOMEM;
	if (!rc && ml->have_node) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		enc_type(&e, META_REC_NODE);
		enc_i32(&e, ml->node_rec);
		enc_str(&e, ml->cluster_id);
		rc = snap_put(f, &e);
	}
	for (int i = 0; !rc && i < ml->nlive; i++) {
		const struct meta_topic *t = ml->live[i];
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		enc_type(&e, META_REC_TOPIC);
		enc_str(&e, t->name);
		enc_bytes(&e, t->id, 16);
		enc_i32(&e, t->partitions);
		enc_i32(&e, t->leader_epoch);
		enc_i32(&e, t->nconfigs);
		for (int j = 0; j < t->nconfigs; j++) {
			enc_str(&e, t->config_keys[j]);
			enc_str(&e, t->config_values[j]);
		}
		rc = snap_put(f, &e);
		if (!rc)
			rc = meta_parts_snapshot(t, &e, META_MAX_RECORD, snap_put_cb, f);
		if (!rc)
			rc = meta_parts_snapshot_reassign(t, &e, snap_put_cb, f);
	}
	if (!rc && ml->mv > 0) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		enc_type(&e, META_REC_FEATURE_LEVEL);
		enc_str(&e, META_FEATURE_METADATA_VERSION);
		enc_i16(&e, ml->mv);
		enc_i64(&e, ml->mv_epoch > 0 ? ml->mv_epoch : 0);
		rc = snap_put(f, &e);
	}
	for (int i = 0; !rc && i < ml->nbcfg; i++) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		enc_type(&e, META_REC_BROKER_CONFIG);
		enc_i32(&e, ml->bcfg[i].scope);
		enc_str(&e, ml->bcfg[i].key);
		enc_str(&e, ml->bcfg[i].value);
		rc = snap_put(f, &e);
	}
	if (!rc) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		rc = meta_brokers_snapshot(&ml->brokers, &e, snap_put_cb, f);
	}
	if (!rc) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		rc = meta_scram_snapshot(&ml->scram, &e, snap_put_cb, f);
	}
	if (!rc) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		rc = meta_acl_snapshot(&ml->acls, &e, snap_put_cb, f);
	}
	if (!rc && ml->next_producer_id > 0) {
		struct enc e = { tmp, 0, META_MAX_RECORD + 2, 0 };

		enc_type(&e, META_REC_PRODUCER_IDS);
		enc_i64(&e, ml->next_producer_id);
		rc = snap_put(f, &e);
	}
	free(tmp);
	if (f && fclose(f) != 0 && !rc)
		rc = -ENOMEM;
	if (rc) {
		free(mem);
		return rc;
	}
	*buf = mem;
	*len = mlen;
	return 0;
}

int metalog_snapshot_each(const void *buf, size_t len, int (*fn)(void *arg, const void *rec, size_t len),
			  void *arg)
{
	const uint8_t *p = buf, *end = p + len;
	int rc;

	if (len < 8 || memcmp(p, SNAP_MAGIC, 8))
		return -EPROTO;
	for (p += 8; p < end;) {
		uint32_t n;

		if (end - p < 4)
			return -EPROTO;
		n = be32_load(p);
		p += 4;
		if ((size_t)(end - p) < n)
			return -EPROTO;
		if ((rc = fn(arg, p, n)) < 0)
			return rc;
		p += n;
	}
	return 0;
}

static int restore_one(void *arg, const void *rec, size_t len)
{
	int rc = metalog_apply(arg, rec, len, NULL);

	return rc < 0 ? (rc == -ENOMEM ? rc : -EPROTO) : 0;
}

int metalog_restore(struct metalog *ml, const void *buf, size_t len)
{
	int rc;

	if (len < 8 || memcmp(buf, SNAP_MAGIC, 8))
		return -EPROTO;
	if ((rc = metalog_image_reset(ml)) < 0)
		return rc;
	return metalog_snapshot_each(buf, len, restore_one, ml);
}
