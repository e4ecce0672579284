/* control/metalog_build.c — the builders: a change to the metadata
 * validated against the image and encoded as one record (or, for a topic
 * or partitions placed on replicas, the record and its PARTITION records),
 * malloc()ed for the caller to commit to the local file (metalog.c) or
 * propose to the quorum (control/ctl_meta.c). A builder changes nothing:
 * the record changes the image when it is applied. See metalog.h.
 *
 * @thread ctl: reads the image (the control thread's); the record is
 * encoded in the metalog's read buffer and copied out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "control/config.h"
#include "control/meta_features.h"
#include "control/meta_parts.h"
#include "control/metalog_codec.h"
#include "control/metalog_internal.h"

void metalog_rec_free(struct metalog_rec *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = 0;
}

static void random_id(uint8_t id[16])
{
	char first;

	do {
		size_t got = 0;

		while (got < 16) {
			ssize_t r = getrandom(id + got, 16 - got, 0);

			if (r > 0)
				got += (size_t)r;
		}
		id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);   /* version 4 */
		id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);   /* IETF variant */
		/* Kafka avoids ids whose base64 starts with '-' (looks like an
		 * option on a command line); the first char is id[0] >> 2. */
		first = (char)(id[0] >> 2);
	} while (first == 62);
}

static void base64url(const uint8_t id[16], char out[23])
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t acc = 0;
	int bits = 0, n = 0;

	for (int i = 0; i < 16; i++) {
		acc = acc << 8 | id[i];
		bits += 8;
		while (bits >= 6) {
			out[n++] = a[(acc >> (bits - 6)) & 63];
			bits -= 6;
		}
	}
	out[n++] = a[(acc << (6 - bits)) & 63];   /* 128 = 21*6 + 2 */
	out[n] = 0;
}

int metalog_topic_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 1 || n > META_TOPIC_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}

/* The live topic called name that a builder's record is about (NULL:
 * none), with *out emptied first. */
static struct meta_topic *topic_for(const struct metalog *ml, const char *name, struct metalog_rec *out)
{
	out->buf = NULL;
	out->len = 0;
	return name ? metalog_find_live(ml, name, NULL, NULL) : NULL;
}

int metalog_build_topic(const struct metalog *ml, const char *name, int32_t partitions,
			const char *const *keys, const char *const *values, int n, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	uint8_t id[16];
	int rc;

	out->buf = NULL;
	out->len = 0;
	if (!metalog_topic_name_valid(name) || partitions < 1 || n < 0)
		return -EINVAL;
	if (metalog_find_live(ml, name, NULL, NULL))
		return -EEXIST;
	for (int i = 0; i < n; i++) {
		if (!values[i])
			return -EINVAL;
		if ((rc = topic_config_validate(keys[i], values[i], NULL, 0)) < 0)
			return rc;
		for (int j = 0; j < i; j++)
			if (!strcmp(keys[i], keys[j]))
				return -EINVAL;   /* Kafka: duplicate config keys are refused */
	}
	do
		random_id(id);
	while (metalog_find_live(ml, NULL, id, NULL));
	enc_type(&e, META_REC_TOPIC);
	enc_str(&e, name);
	enc_bytes(&e, id, 16);
	enc_i32(&e, partitions);
	enc_i32(&e, 0);
	enc_i32(&e, n);
	for (int i = 0; i < n; i++) {
		enc_str(&e, keys[i]);
		enc_str(&e, values[i]);
	}
	return rec_finish(&e, out);
}

int metalog_build_delete_topic(const struct metalog *ml, const char *name, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = topic_for(ml, name, out);

	if (!t)
		return -ENOENT;
	enc_type(&e, META_REC_REMOVE_TOPIC);
	enc_bytes(&e, t->id, 16);
	return rec_finish(&e, out);
}

int metalog_build_partitions(const struct metalog *ml, const char *name, int32_t new_total,
			     struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = topic_for(ml, name, out);

	if (!t)
		return -ENOENT;
	if (new_total <= t->partitions)
		return -EINVAL;
	enc_type(&e, META_REC_PARTITIONS);
	enc_bytes(&e, t->id, 16);
	enc_i32(&e, new_total);
	return rec_finish(&e, out);
}

void metalog_recs_free(struct metalog_rec *recs, int n)
{
	for (int i = 0; recs && i < n; i++)
		metalog_rec_free(&recs[i]);
	free(recs);
}

/* The PARTITION records placing partitions [first, first + count) of the
 * topic `id` on replicas (rf each, the first the leader, all in sync,
 * epochs 0), appended to recs[*n..): as many as keep each under the
 * record limit. recs has room for them (part_records_max). */
static int part_records_per(int rf)
{
	return (int)((META_MAX_RECORD - 64) / META_PART_BYTES(rf));
}

static int part_records(const struct metalog *ml, const uint8_t id[16], int32_t first, int32_t count, int rf,
			const int32_t *replicas, struct metalog_rec *recs, int *n)
{
	int per = part_records_per(rf);

	for (int32_t i = 0; i < count; i += per) {
		struct enc e = ENC_INIT(ml, ml->rbuf);
		int32_t k = count - i < per ? count - i : per;
		int rc;

		enc_type(&e, META_REC_PARTITION);
		enc_bytes(&e, id, 16);
		enc_i32(&e, first + i);
		enc_i32(&e, k);
		for (int32_t j = i; j < i + k; j++)
			meta_part_encode(&e, replicas[(size_t)j * rf], 0, 0, &replicas[(size_t)j * rf], rf,
					 &replicas[(size_t)j * rf], rf);
		if ((rc = rec_finish(&e, &recs[*n])) < 0)
			return rc;
		(*n)++;
	}
	return 0;
}

static int placement_valid(int32_t count, int rf, const int32_t *replicas)
{
	if (rf < 1 || rf > META_MAX_REPLICAS || !replicas)
		return 0;
	for (int32_t i = 0; i < count; i++) {
		const int32_t *r = &replicas[(size_t)i * rf];

		if (!meta_part_valid(r[0], r, rf, r, rf))
			return 0;
	}
	return 1;
}

/* One record (first), then the PARTITION records of count partitions. */
static int placed_records(const struct metalog *ml, struct metalog_rec *first, const uint8_t id[16], int32_t from,
			  int32_t count, int rf, const int32_t *replicas, struct metalog_rec **recs, int *nrecs)
{
	int max = 1 + (count + part_records_per(rf) - 1) / part_records_per(rf), n = 1, rc;
	struct metalog_rec *r = calloc((size_t)max, sizeof(*r));

	if (!r) {
		metalog_rec_free(first);
		return -ENOMEM;
	}
	r[0] = *first;
	if ((rc = part_records(ml, id, from, count, rf, replicas, r, &n)) < 0) {
		metalog_recs_free(r, n);
		return rc;
	}
	*recs = r;
	*nrecs = n;
	return 0;
}

int metalog_build_topic_placed(const struct metalog *ml, const char *name, int32_t partitions,
			       const char *const *keys, const char *const *values, int n, int rf,
			       const int32_t *replicas, struct metalog_rec **recs, int *nrecs)
{
	struct metalog_rec t;
	int rc;

	*recs = NULL;
	*nrecs = 0;
	if (partitions >= 1 && !placement_valid(partitions, rf, replicas))
		return -EINVAL;
	if ((rc = metalog_build_topic(ml, name, partitions, keys, values, n, &t)) < 0)
		return rc;
	/* the id the TOPIC record carries: after type, version and name */
	uint8_t id[16];

	memcpy(id, t.buf + 3 + 2 + strlen(name), 16);
	return placed_records(ml, &t, id, 0, partitions, rf, replicas, recs, nrecs);
}

int metalog_build_partitions_placed(const struct metalog *ml, const char *name, int32_t new_total, int rf,
				    const int32_t *replicas, struct metalog_rec **recs, int *nrecs)
{
	struct meta_topic *t = name ? metalog_find_live(ml, name, NULL, NULL) : NULL;
	struct metalog_rec r;
	int rc;

	*recs = NULL;
	*nrecs = 0;
	if (t && new_total > t->partitions && !placement_valid(new_total - t->partitions, rf, replicas))
		return -EINVAL;
	if ((rc = metalog_build_partitions(ml, name, new_total, &r)) < 0)
		return rc;
	return placed_records(ml, &r, t->id, t->partitions, new_total - t->partitions, rf, replicas, recs, nrecs);
}

/* The record a meta_parts builder wrote into e (built: 1), or what it
 * returned (0: nothing to write, with out->len 0; or an error). */
static int part_finish(struct enc *e, struct metalog_rec *out, int built)
{
	return built <= 0 ? built : rec_finish(e, out);
}

int metalog_build_partition_change(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				   const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				   struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = topic_for(ml, name, out);

	return !t ? -ENOENT
		  : part_finish(&e, out, meta_parts_build_change(&e, t, partition, leader, isr, nisr, replicas,
								  nreplicas));
}

int metalog_build_partition_reassign(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				     const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				     const int32_t *adding, int nadding, const int32_t *removing, int nremoving,
				     struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = topic_for(ml, name, out);

	return !t ? -ENOENT
		  : part_finish(&e, out, meta_parts_build_reassign(&e, t, partition, leader, isr, nisr, replicas,
								    nreplicas, adding, nadding, removing, nremoving));
}

int metalog_build_config(const struct metalog *ml, const char *name, const char *key, const char *value,
			 struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = topic_for(ml, name, out);
	int rc, have = 0;

	if (!t || !key)
		return -ENOENT;
	if (value) {
		if ((rc = topic_config_validate(key, value, NULL, 0)) < 0)
			return rc;
	} else {
		if (!topic_config_known(key))
			return -ENOENT;
		for (int i = 0; i < t->nconfigs; i++)
			have |= !strcmp(t->config_keys[i], key);
		if (!have)
			return 0;
	}
	enc_type(&e, META_REC_CONFIG);
	enc_bytes(&e, t->id, 16);
	enc_str(&e, key);
	enc_str(&e, value);
	return rec_finish(&e, out);
}

int metalog_build_broker_config(const struct metalog *ml, int32_t scope, const char *key, const char *value,
				struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	int rc, have = 0;

	out->buf = NULL;
	out->len = 0;
	if (!key)
		return -ENOENT;
	if ((rc = config_dynamic_validate(key, value, NULL, 0)) < 0)
		return rc;
	if (!value) {
		for (int i = 0; i < ml->nbcfg; i++)
			have |= ml->bcfg[i].scope == scope && !strcmp(ml->bcfg[i].key, key);
		if (!have)
			return 0;
	}
	enc_type(&e, META_REC_BROKER_CONFIG);
	enc_i32(&e, scope);
	enc_str(&e, key);
	enc_str(&e, value);
	return rec_finish(&e, out);
}

int metalog_build_producer_ids(const struct metalog *ml, int32_t block, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	int64_t start = ml->next_producer_id;

	out->buf = NULL;
	out->len = 0;
	if (block < 1 || start > INT64_MAX - block)
		return -EINVAL;
	enc_type(&e, META_REC_PRODUCER_IDS);
	enc_i64(&e, start + block);
	return rec_finish(&e, out);
}

void metalog_new_cluster_id(char out[23])
{
	uint8_t id[16];

	random_id(id);
	base64url(id, out);
}

int metalog_build_node_for(const struct metalog *ml, const char *cluster_id, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);

	out->buf = NULL;
	out->len = 0;
	if (ml->have_node)
		return -EEXIST;
	if (!cluster_id || strlen(cluster_id) != 22)
		return -EINVAL;
	enc_type(&e, META_REC_NODE);
	enc_i32(&e, ml->node_id);
	enc_str(&e, cluster_id);
	return rec_finish(&e, out);
}

int metalog_build_feature_level(const struct metalog *ml, const char *name, int16_t level, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);

	out->buf = NULL;
	out->len = 0;
	if (!name || strcmp(name, META_FEATURE_METADATA_VERSION))
		return -ENOENT;
	if (level < metalog_metadata_version(ml))
		return -EINVAL;
	if (level > META_MV_MAX)
		return -ERANGE;
	if (level == metalog_metadata_version(ml) && ml->mv > 0)
		return 0;   /* finalized at that level already */
	enc_type(&e, META_REC_FEATURE_LEVEL);
	enc_str(&e, name);
	enc_i16(&e, level);
	enc_i64(&e, -1);
	return rec_finish(&e, out);
}

int metalog_build_node(const struct metalog *ml, struct metalog_rec *out)
{
	char cid[23];

	metalog_new_cluster_id(cid);
	return metalog_build_node_for(ml, cid, out);
}

int metalog_build_register_broker(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				  const char *host, int32_t port, const char *rack, struct metalog_rec *out)
{
	return metalog_build_register_broker_repl(ml, id, incarnation, host, port, rack, 0, 0, out);
}

int metalog_build_register_broker_repl(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				       const char *host, int32_t port, const char *rack, uint32_t repl_ip,
				       int32_t repl_port, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);

	out->buf = NULL;
	out->len = 0;
	if (id < 0 || !host || port < 0 || port > 65535 || repl_port < 0 || repl_port > 65535)
		return -EINVAL;
	meta_brokers_enc_register(&e, id, incarnation, -1, host, port, rack, repl_ip, repl_port);
	return rec_finish(&e, out);
}

int metalog_build_register_endpoints(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				     const char *rack, uint32_t repl_ip, int32_t repl_port, const char *inter,
				     const struct meta_endpoint *eps, int nep, struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	int found = 0;

	out->buf = NULL;
	out->len = 0;
	if (id < 0 || !inter || nep < 1 || nep > META_BROKER_MAX_ENDPOINTS || repl_port < 0 || repl_port > 65535)
		return -EINVAL;
	for (int i = 0; i < nep; i++) {
		if (!eps[i].name[0] || !eps[i].host[0] || eps[i].port < 0 || eps[i].port > 65535 ||
		    eps[i].protocol < 0 || eps[i].protocol > 3)
			return -EINVAL;
		for (int k = 0; k < i; k++)
			if (!strcmp(eps[k].name, eps[i].name))
				return -EINVAL;
		found |= !strcmp(eps[i].name, inter);
	}
	if (!found)
		return -EINVAL;
	if (metalog_metadata_version(ml) < META_MV_ENDPOINTS)
		return -EOPNOTSUPP;   /* nodes of older builds could not read it */
	meta_brokers_enc_endpoints(&e, id, incarnation, -1, rack, repl_ip, repl_port, inter, eps, nep);
	return rec_finish(&e, out);
}

/* A record about broker id at its registration `epoch` (-ENOENT when that
 * is not its registration in the image): type, id, epoch, then the fenced
 * byte when fenced >= 0. */
static int build_broker_rec(const struct metalog *ml, int16_t type, int32_t id, int64_t epoch, int fenced,
			    struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	const struct meta_broker *b = meta_brokers_find(&ml->brokers, id);

	out->buf = NULL;
	out->len = 0;
	if (!b || b->epoch != epoch)
		return -ENOENT;
	if (type == META_REC_BROKER_FENCE && b->fenced == !!fenced)
		return 0;                /* nothing to write */
	enc_type(&e, type);
	enc_i32(&e, id);
	enc_i64(&e, epoch);
	if (fenced >= 0)
		enc_u8(&e, fenced ? 1 : 0);
	return rec_finish(&e, out);
}

int metalog_build_broker_fence(const struct metalog *ml, int32_t id, int64_t epoch, int fenced,
			       struct metalog_rec *out)
{
	return build_broker_rec(ml, META_REC_BROKER_FENCE, id, epoch, fenced ? 1 : 0, out);
}

int metalog_build_unregister_broker(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out)
{
	return build_broker_rec(ml, META_REC_UNREGISTER_BROKER, id, epoch, -1, out);
}

int metalog_build_leader_restarted(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out)
{
	return build_broker_rec(ml, META_REC_LEADER_RESTARTED, id, epoch, -1, out);
}

int metalog_build_broker_restarted(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out)
{
	return build_broker_rec(ml, META_REC_BROKER_RESTARTED, id, epoch, -1, out);
}
