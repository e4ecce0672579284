/* control/metalog_image.c — the metadata image: its live and deleted
 * topics, run-time broker configs, brokers, SCRAM users and ACL bindings
 * (struct metalog, control/metalog_internal.h), looked up and changed.
 * A record applied (metalog_record_apply) is the only way it changes,
 * used alike by the local file's replay and commits, by the quorum's
 * committed records (metalog_apply) and by a snapshot restored, so every
 * path builds the same image. (Not the image file of a broker-only node:
 * that is control/meta_image.c.) See metalog.h.
 *
 * @thread ctl: the image is the control thread's alone; nothing locks.
 * Borrowed pointers (meta_topic, meta_broker) stay valid until
 * metalog_close: a deleted topic moves to the dead list. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_features.h"
#include "control/meta_parts.h"
#include "control/metalog_codec.h"
#include "control/metalog_internal.h"

static void topic_free(struct meta_topic *t)
{
	for (int i = 0; i < t->nconfigs; i++) {
		free(t->config_keys[i]);
		free(t->config_values[i]);
	}
	free(t->config_keys);
	free(t->config_values);
	meta_parts_free(t);
	free(t);
}

/* The node a TOPIC or PARTITIONS record without PARTITION records places
 * its partitions on: the one that wrote the log (the NODE record's). */
static int32_t legacy_node(const struct metalog *ml)
{
	return ml->have_node ? ml->node_rec : ml->node_id;
}

struct meta_topic *metalog_find_live(const struct metalog *ml, const char *name, const uint8_t *id, int *at)
{
	for (int i = 0; i < ml->nlive; i++) {
		struct meta_topic *t = ml->live[i];

		if ((name && !strcmp(t->name, name)) || (id && !memcmp(t->id, id, 16))) {
			if (at)
				*at = i;
			return t;
		}
	}
	return NULL;
}

static int grow(void *arrp, int *cap, int need)
{
	void **arr = arrp;

	if (need <= *cap)
		return 0;
	int nc = *cap ? *cap * 2 : 64;
	void *n = realloc(*arr, (size_t)nc * sizeof(void *));

	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = nc;
	return 0;
}

/* Set or delete (value NULL) an override; takes ownership of key and value. */
static int topic_config_put(struct meta_topic *t, char *key, char *value)
{
	for (int i = 0; i < t->nconfigs; i++) {
		if (strcmp(t->config_keys[i], key))
			continue;
		free(key);
		free(t->config_values[i]);
		if (value) {
			t->config_values[i] = value;
			return 0;
		}
		free(t->config_keys[i]);
		memmove(&t->config_keys[i], &t->config_keys[i + 1], (size_t)(t->nconfigs - i - 1) * sizeof(char *));
		memmove(&t->config_values[i], &t->config_values[i + 1], (size_t)(t->nconfigs - i - 1) * sizeof(char *));
		t->nconfigs--;
		return 0;
	}
	if (!value) {
		free(key);
		return 0;
	}
	char **k = realloc(t->config_keys, (size_t)(t->nconfigs + 1) * sizeof(char *));

	if (k)
		t->config_keys = k;
	char **v = k ? realloc(t->config_values, (size_t)(t->nconfigs + 1) * sizeof(char *)) : NULL;

	if (!v) {
		free(key);
		free(value);
		return -ENOMEM;
	}
	t->config_values = v;
	t->config_keys[t->nconfigs] = key;
	t->config_values[t->nconfigs] = value;
	t->nconfigs++;
	return 0;
}

/* Set or delete (value NULL) a run-time broker config; takes key and
 * value. */
static int broker_config_put(struct metalog *ml, int32_t scope, char *key, char *value)
{
	for (int i = 0; i < ml->nbcfg; i++) {
		struct broker_cfg *c = &ml->bcfg[i];

		if (c->scope != scope || strcmp(c->key, key))
			continue;
		free(key);
		free(c->value);
		if (value) {
			c->value = value;
			return 0;
		}
		free(c->key);
		memmove(c, c + 1, (size_t)(ml->nbcfg - i - 1) * sizeof(*c));
		ml->nbcfg--;
		return 0;
	}
	if (!value) {
		free(key);
		return 0;
	}
	if (ml->nbcfg == ml->cap_bcfg) {
		int nc = ml->cap_bcfg ? ml->cap_bcfg * 2 : 16;
		struct broker_cfg *n = realloc(ml->bcfg, (size_t)nc * sizeof(*n));

		if (!n) {
			free(key);
			free(value);
			return -ENOMEM;
		}
		ml->bcfg = n;
		ml->cap_bcfg = nc;
	}
	ml->bcfg[ml->nbcfg++] = (struct broker_cfg){ scope, key, value };
	return 0;
}

/* BROKER_RESTARTED's test of who may take over: registered, unfenced. */
static int broker_eligible(const void *arg, int32_t id)
{
	const struct meta_broker *b = meta_brokers_find(&((const struct metalog *)arg)->brokers, id);

	return b && !b->fenced;
}

/* Apply one record to the image: the only place the image changes, used
 * by replay, by the local file's commits and by metalog_apply. dry: only
 * say whether it applies, change nothing. -EPROTO: malformed (an unknown
 * type or version, a field that does not parse); a well-formed record that
 * no longer applies to the image changes nothing and says why: -EEXIST
 * (the topic's name or id is live, a second NODE record), -ENOENT (no live
 * topic with that id), -EINVAL (partitions not more than now, producer ids
 * not beyond the last block); -ENOMEM. out (may be NULL) gets what the
 * record did. */
int metalog_record_apply(struct metalog *ml, int16_t type, const uint8_t *val, size_t len, int dry,
			 struct metalog_applied *out)
{
	struct dec d = { val, val + len, 0 };
	uint8_t id[16];
	int isnull, at, rc = 0;
	struct meta_topic *t = NULL;

	if (dec_u8(&d) != META_FORMAT_VERSION)
		return -EPROTO;
	switch (type) {
	case META_REC_TOPIC: {
		char *name = dec_str(&d, &isnull);
		int32_t nconf;

		if (!(t = calloc(1, sizeof(*t)))) {
			free(name);
			return -ENOMEM;
		}
		if (name && strlen(name) < sizeof(t->name))
			strcpy(t->name, name);
		else if (!d.err)
			d.err = -EPROTO;
		free(name);
		dec_id(&d, t->id);
		t->partitions = (int32_t)dec_be(&d, 4);
		t->leader_epoch = (int32_t)dec_be(&d, 4);
		nconf = (int32_t)dec_be(&d, 4);
		if (nconf < 0 || t->partitions < 1)
			d.err = d.err ? d.err : -EPROTO;
		for (int32_t i = 0; i < nconf && !d.err; i++) {
			char *k = dec_str(&d, &isnull), *v = dec_str(&d, &isnull);

			if (!d.err && (!k || !v))
				d.err = -EPROTO;
			if (d.err) {
				free(k);
				free(v);
				break;
			}
			if ((rc = topic_config_put(t, k, v)) < 0)
				d.err = rc;
		}
		if (!d.err && d.p != d.end)
			d.err = -EPROTO;
		if (!d.err && (metalog_find_live(ml, t->name, NULL, NULL) || metalog_find_live(ml, NULL, t->id, NULL)))
			d.err = -EEXIST;
		if (!d.err && !dry)
			d.err = grow(&ml->live, &ml->cap_live, ml->nlive + 1);
		if (!d.err && !dry)
			d.err = meta_parts_legacy(t, 0, legacy_node(ml));
		if (d.err || dry) {
			topic_free(t);
			return d.err;
		}
		ml->live[ml->nlive++] = t;
		if (out)
			out->topic = t;
		return 0;
	}
	case META_REC_PARTITIONS: {
		int32_t n;

		dec_id(&d, id);
		n = (int32_t)dec_be(&d, 4);
		if (d.err || d.p != d.end)
			return -EPROTO;
		if (!(t = metalog_find_live(ml, NULL, id, NULL)))
			return -ENOENT;
		if (n <= t->partitions)
			return -EINVAL;
		if (dry)
			return 0;
		int32_t was = t->partitions;

		t->partitions = n;
		t->leader_epoch++;
		if ((rc = meta_parts_legacy(t, was, legacy_node(ml))) < 0) {
			t->partitions = was;
			t->leader_epoch--;
			return rc;
		}
		if (out)
			out->topic = t;
		return 0;
	}
	case META_REC_LEADER_RESTARTED:
	case META_REC_BROKER_RESTARTED: {
		int32_t broker = (int32_t)dec_be(&d, 4);
		int64_t bepoch = dec_be(&d, 8);
		const struct meta_broker *mb;

		if (d.err || d.p != d.end)
			return d.err ? d.err : -EPROTO;
		mb = meta_brokers_find(&ml->brokers, broker);
		if (!mb || mb->epoch != bepoch)
			return -ENOENT;   /* stale: it registered again since */
		if (dry)
			return 0;
		for (int i = 0; i < ml->nlive; i++) {
			struct meta_topic *lt = ml->live[i];
			int legacy = 0;

			for (int32_t j = 0; j < lt->partitions; j++) {
				struct meta_part *p = &lt->parts[j];

				if (type == META_REC_BROKER_RESTARTED) {
					legacy |= meta_part_restarted(p, broker, broker_eligible, ml);
					continue;
				}
				if (p->leader != broker)
					continue;
				if (p->legacy) {
					legacy = 1;
					continue;
				}
				p->leader_epoch++;
				p->partition_epoch++;
			}
			if (legacy) {
				/* legacy partitions follow their topic's epoch */
				lt->leader_epoch++;
				for (int32_t j = 0; j < lt->partitions; j++)
					if (lt->parts[j].legacy)
						lt->parts[j].leader_epoch = lt->leader_epoch;
			}
		}
		if (out)
			out->broker = broker, out->broker_epoch = bepoch;
		return 0;
	}
	case META_REC_PARTITION:
	case META_REC_PARTITION_CHANGE:
	case META_REC_PARTITION_REASSIGN:
		dec_id(&d, id);
		if (d.err)
			return -EPROTO;
		if (!(t = metalog_find_live(ml, NULL, id, NULL)))
			return -ENOENT;
		rc = meta_parts_apply(t, type, &d, dry);
		if (rc == 0 && out)
			out->topic = t;
		return rc;
	case META_REC_CONFIG: {
		char *k, *v;

		dec_id(&d, id);
		k = dec_str(&d, &isnull);
		v = dec_str(&d, &isnull);
		if (d.err || !k || d.p != d.end || !(t = metalog_find_live(ml, NULL, id, NULL)) || dry) {
			free(k);
			free(v);
			return d.err ? d.err : !k || d.p != d.end ? -EPROTO : !t ? -ENOENT : 0;
		}
		if (out)
			out->topic = t;
		return topic_config_put(t, k, v);
	}
	case META_REC_REMOVE_TOPIC:
		dec_id(&d, id);
		if (d.err || d.p != d.end)
			return -EPROTO;
		if (!(t = metalog_find_live(ml, NULL, id, &at)))
			return -ENOENT;
		if (dry)
			return 0;
		if ((rc = grow(&ml->dead, &ml->cap_dead, ml->ndead + 1)) < 0)
			return rc;
		t->deleted = 1;
		memmove(&ml->live[at], &ml->live[at + 1], (size_t)(ml->nlive - at - 1) * sizeof(*ml->live));
		ml->nlive--;
		ml->dead[ml->ndead++] = t;
		return 0;
	case META_REC_PRODUCER_IDS: {
		int64_t next = dec_be(&d, 8);

		if (d.err || d.p != d.end)
			return -EPROTO;
		if (next <= ml->next_producer_id)
			return -EINVAL;
		if (dry)
			return 0;
		/* every block is the ids between the last one and this */
		if (out) {
			out->pid_start = ml->next_producer_id;
			out->pid_end = next;
		}
		ml->next_producer_id = next;
		return 0;
	}
	case META_REC_NODE: {
		int32_t node = (int32_t)dec_be(&d, 4);
		char *cid = dec_str(&d, &isnull);

		if (d.err || !cid || strlen(cid) != 22 || d.p != d.end || ml->have_node || dry) {
			rc = d.err ? d.err : !cid || strlen(cid) != 22 || d.p != d.end ? -EPROTO
			     : ml->have_node ? -EEXIST : 0;
			free(cid);
			return rc;
		}
		/* the node that wrote it: metalog_open refuses a local log of
		 * another node */
		ml->node_rec = node;
		memcpy(ml->cluster_id, cid, 23);
		free(cid);
		ml->have_node = 1;
		return 0;
	}
	case META_REC_BROKER_CONFIG: {
		int32_t scope = (int32_t)dec_be(&d, 4);
		char *k = dec_str(&d, &isnull), *v = dec_str(&d, &isnull);

		if (d.err || !k || d.p != d.end || dry) {
			free(k);
			free(v);
			return d.err ? d.err : !k || d.p != d.end ? -EPROTO : 0;
		}
		return broker_config_put(ml, scope, k, v);
	}
	case META_REC_FEATURE_LEVEL: {
		char *name = dec_str(&d, &isnull);
		int16_t level = (int16_t)dec_be(&d, 2);
		int64_t epoch = dec_be(&d, 8);

		rc = d.err ? d.err : !name || d.p != d.end ? -EPROTO : 0;
		if (!rc && (strcmp(name, META_FEATURE_METADATA_VERSION) || level < META_MV_MIN || level > META_MV_MAX))
			rc = -EPROTO;    /* a feature or level this build does not know */
		free(name);
		if (rc)
			return rc;
		if (epoch < 0)
			epoch = ml->apply_index;   /* proposed: its own log index (0: applied without one) */
		if (level < metalog_metadata_version(ml))
			return -EINVAL;  /* never lowered */
		if (dry)
			return 0;
		ml->mv = level;
		ml->mv_epoch = epoch;
		return 0;
	}
	case META_REC_SCRAM:
	case META_REC_REMOVE_SCRAM:
		return meta_scram_apply(&ml->scram, type, &d, dry);
	case META_REC_ACL:
	case META_REC_REMOVE_ACL:
		return meta_acl_apply(&ml->acls, type, &d, dry);
	case META_REC_REGISTER_BROKER:
	case META_REC_REGISTER_BROKER_ENDPOINTS:
	case META_REC_BROKER_FENCE:
	case META_REC_UNREGISTER_BROKER:
		rc = meta_brokers_apply(&ml->brokers, type, &d, ml->apply_index, dry);
		if (rc == 0 && out) {
			struct dec d2 = { val + 1, val + len, 0 };
			const struct meta_broker *b;

			out->broker = (int32_t)dec_be(&d2, 4);
			b = meta_brokers_find(&ml->brokers, out->broker);
			out->broker_epoch = b ? b->epoch : -1;
		}
		return rc;
	default:
		return -EPROTO;
	}
}

int metalog_rec_split(const void *rec, size_t len, int16_t *type, const uint8_t **val, size_t *vlen)
{
	const uint8_t *b = rec;

	if (!rec || len < 3)
		return -EPROTO;
	*type = (int16_t)(b[0] << 8 | b[1]);
	*val = b + 2;
	*vlen = len - 2;
	return 0;
}

int metalog_apply_at(struct metalog *ml, int64_t index, const void *rec, size_t len, struct metalog_applied *out)
{
	const uint8_t *val = NULL;
	size_t vlen = 0;
	int16_t type = 0;
	int rc = metalog_rec_split(rec, len, &type, &val, &vlen);

	if (out)
		*out = (struct metalog_applied){ .type = type, .pid_start = -1, .pid_end = -1, .broker = -1,
						 .broker_epoch = -1 };
	if (rc < 0)
		return rc;
	ml->apply_index = index;
	rc = metalog_record_apply(ml, type, val, vlen, 0, out);
	ml->apply_index = 0;
	return rc;
}

int metalog_apply(struct metalog *ml, const void *rec, size_t len, struct metalog_applied *out)
{
	return metalog_apply_at(ml, 0, rec, len, out);
}

int metalog_check(const struct metalog *ml, const void *rec, size_t len)
{
	const uint8_t *val = NULL;
	size_t vlen = 0;
	int16_t type = 0;
	int rc = metalog_rec_split(rec, len, &type, &val, &vlen);

	/* dry: record_apply changes nothing */
	return rc < 0 ? rc : metalog_record_apply((struct metalog *)ml, type, val, vlen, 1, NULL);
}

/* The image emptied: live topics move to the dead list (borrowed pointers
 * stay valid until close), broker configs, cluster id and producer ids go. */
int metalog_image_reset(struct metalog *ml)
{
	int rc = grow(&ml->dead, &ml->cap_dead, ml->ndead + ml->nlive);

	if (rc < 0)
		return rc;
	for (int i = 0; i < ml->nlive; i++) {
		ml->live[i]->deleted = 1;
		ml->dead[ml->ndead++] = ml->live[i];
	}
	ml->nlive = 0;
	for (int i = 0; i < ml->nbcfg; i++) {
		free(ml->bcfg[i].key);
		free(ml->bcfg[i].value);
	}
	ml->nbcfg = 0;
	meta_brokers_reset(&ml->brokers);
	meta_scram_reset(&ml->scram);
	meta_acl_reset(&ml->acls);
	ml->have_node = 0;
	ml->node_rec = 0;
	ml->cluster_id[0] = 0;
	ml->next_producer_id = 0;
	ml->mv = 0;
	ml->mv_epoch = 0;
	return 0;
}

int16_t metalog_metadata_version(const struct metalog *ml)
{
	return ml->mv > 0 ? ml->mv : META_MV_1;
}

int64_t metalog_features_epoch(const struct metalog *ml)
{
	return ml->mv > 0 ? ml->mv_epoch : 0;
}

void metalog_image_fini(struct metalog *ml)
{
	for (int i = 0; i < ml->nlive; i++)
		topic_free(ml->live[i]);
	for (int i = 0; i < ml->ndead; i++)
		topic_free(ml->dead[i]);
	free(ml->live);
	free(ml->dead);
	for (int i = 0; i < ml->nbcfg; i++) {
		free(ml->bcfg[i].key);
		free(ml->bcfg[i].value);
	}
	free(ml->bcfg);
	meta_brokers_reset(&ml->brokers);
	meta_scram_reset(&ml->scram);
	meta_acl_reset(&ml->acls);
}

const struct meta_topic *metalog_topic(const struct metalog *ml, const char *name)
{
	return name ? metalog_find_live(ml, name, NULL, NULL) : NULL;
}

const struct meta_topic *metalog_topic_by_id(const struct metalog *ml, const uint8_t id[16])
{
	return metalog_find_live(ml, NULL, id, NULL);
}

int metalog_topic_count(const struct metalog *ml)
{
	return ml->nlive;
}

const struct meta_topic *metalog_topic_at(const struct metalog *ml, int i)
{
	return i >= 0 && i < ml->nlive ? ml->live[i] : NULL;
}

const struct meta_broker *metalog_broker(const struct metalog *ml, int32_t id)
{
	return meta_brokers_find(&ml->brokers, id);
}

int metalog_broker_count(const struct metalog *ml)
{
	return ml->brokers.n;
}

const struct meta_broker *metalog_broker_at(const struct metalog *ml, int i)
{
	return i >= 0 && i < ml->brokers.n ? &ml->brokers.b[i] : NULL;
}

int metalog_broker_config_at(const struct metalog *ml, int i, int32_t *scope, const char **key,
			     const char **value)
{
	if (i < 0 || i >= ml->nbcfg)
		return -ENOENT;
	*scope = ml->bcfg[i].scope;
	*key = ml->bcfg[i].key;
	*value = ml->bcfg[i].value;
	return 0;
}

const struct meta_scram *metalog_scram(const struct metalog *ml)
{
	return &ml->scram;
}

const struct meta_acl *metalog_acls(const struct metalog *ml)
{
	return &ml->acls;
}

int64_t metalog_next_producer_id(const struct metalog *ml)
{
	return ml->next_producer_id;
}
