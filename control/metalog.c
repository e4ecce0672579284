/* control/metalog.c — the metadata log: encode a change, append it, wait
 * until it is durable, then apply it to the image with the same function
 * replay uses, so a reopened log rebuilds exactly the same image.
 * See metalog.h. @thread control */
#include "control/metalog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "control/config.h"
#include "control/meta_brokers.h"
#include "control/meta_acl.h"
#include "control/meta_scram.h"
#include "control/meta_parts.h"
#include "control/metalog_codec.h"
#include "storage/batch.h"
#include "storage/plog.h"

#define META_DIR "__cluster_metadata-0"
#define META_MAX_RECORD (1u << 20)        /* value bytes of one change */
#define META_BATCH_CAP (META_MAX_RECORD + 4096)
#define META_READ_CAP (4u << 20)          /* >= 2 batches, 4 KiB aligned */
#define META_TAIL_BUDGET (8u << 20)

struct metalog {
	struct store st;          /* private io_uring of the control thread */
	int has_store;            /* 0: an image without a file (metalog_image_new) */
	struct plog *pl;
	int err;                  /* 0, or the -errno that failed the log (STYLE 7) */
	int32_t node_id;
	int have_node;
	int32_t node_rec;         /* the node id the NODE record names */
	char cluster_id[23];
	int64_t next_producer_id; /* first id not yet handed out */
	int64_t records;          /* replayed at open */
	int64_t replay_at;        /* offset replay reached (where it stopped on an error) */
	/* Image. live: topics not deleted, creation order. dead: deleted
	 * topics kept until close so borrowed pointers stay valid. */
	struct meta_topic **live;
	int nlive, cap_live;
	struct meta_topic **dead;
	int ndead, cap_dead;
	/* broker configs changed at run time (BROKER_CONFIG records) */
	struct broker_cfg {
		int32_t scope;
		char *key, *value;
	} *bcfg;
	int nbcfg, cap_bcfg;
	struct meta_brokers brokers;   /* REGISTER_BROKER, BROKER_FENCE, UNREGISTER_BROKER */
	struct meta_scram scram;       /* SCRAM, REMOVE_SCRAM (control/meta_scram.h) */
	struct meta_acl acls;          /* ACL, REMOVE_ACL (control/meta_acl.h) */
	int64_t apply_index;      /* the log index of the record being applied (0: none) */
	uint8_t *bbuf;            /* batch being built */
	uint8_t *rbuf;            /* replay reads, 4 KiB aligned */
};

/* ---- the image ----------------------------------------------------------- */

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

static struct meta_topic *find_live(const struct metalog *ml, const char *name, const uint8_t *id, int *at)
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
static int record_apply(struct metalog *ml, int16_t type, const uint8_t *val, size_t len, int dry,
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
		if (!d.err && (find_live(ml, t->name, NULL, NULL) || find_live(ml, NULL, t->id, NULL)))
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
		if (!(t = find_live(ml, NULL, id, NULL)))
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
		if (!(t = find_live(ml, NULL, id, NULL)))
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
		if (d.err || !k || d.p != d.end || !(t = find_live(ml, NULL, id, NULL)) || dry) {
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
		if (!(t = find_live(ml, NULL, id, &at)))
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
	case META_REC_SCRAM:
	case META_REC_REMOVE_SCRAM:
		return meta_scram_apply(&ml->scram, type, &d, dry);
	case META_REC_ACL:
	case META_REC_REMOVE_ACL:
		return meta_acl_apply(&ml->acls, type, &d, dry);
	case META_REC_REGISTER_BROKER:
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

/* ---- records ------------------------------------------------------------ */

/* A record's bytes: int16 type (big-endian), then the value. */
static int rec_split(const void *rec, size_t len, int16_t *type, const uint8_t **val, size_t *vlen)
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
	int rc = rec_split(rec, len, &type, &val, &vlen);

	if (out)
		*out = (struct metalog_applied){ .type = type, .pid_start = -1, .pid_end = -1, .broker = -1,
						 .broker_epoch = -1 };
	if (rc < 0)
		return rc;
	ml->apply_index = index;
	rc = record_apply(ml, type, val, vlen, 0, out);
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
	int rc = rec_split(rec, len, &type, &val, &vlen);

	/* dry: record_apply changes nothing */
	return rc < 0 ? rc : record_apply((struct metalog *)ml, type, val, vlen, 1, NULL);
}

void metalog_rec_free(struct metalog_rec *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = 0;
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
	if ((rc = rec_split(rec, len, &type, &val, &vlen)) < 0)
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
	rc = record_apply(ml, type, val, vlen, 0, out);
	if (rc < 0)
		ml->err = rc;   /* durable but not in the image: failed until reopened (replay applies it) */
	return rc;
}

/* Finish a record built in e (type first): a malloc()ed copy in *out. */
#define ENC_INIT(ml, buf) { (buf), 0, META_MAX_RECORD + 2, 0 }

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

static int build_commit(struct metalog *ml, int rc, struct metalog_rec *r, struct metalog_applied *out);

/* ---- public -------------------------------------------------------------- */

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
				rc = record_apply(ml, type, rv.value, (size_t)rv.value_len, 0, NULL);
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
			fprintf(stderr, "sluiced: the metadata log is damaged: %s. Sluice will not start without "
				"its topics. Restore %s from a backup (or, to start this node with no topics, "
				"move that directory aside); the files were left as they are\n",
				ml->st.problem, path);
		free(path);
		ml->pl = NULL;
		metalog_close(ml);
		return rc;
	}
	if ((rc = replay(ml)) < 0) {
		fprintf(stderr, "sluiced: the metadata log %s cannot be replayed: %s (a record at offset %"
			PRId64 " is damaged or of an unknown kind). Sluice will not start without its topics. "
			"Restore that directory from a backup (or, to start this node with no topics, move it "
			"aside)\n", path, strerror(-rc), ml->replay_at);
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

const struct meta_topic *metalog_topic(const struct metalog *ml, const char *name)
{
	return name ? find_live(ml, name, NULL, NULL) : NULL;
}

const struct meta_topic *metalog_topic_by_id(const struct metalog *ml, const uint8_t id[16])
{
	return find_live(ml, NULL, id, NULL);
}

int metalog_topic_count(const struct metalog *ml)
{
	return ml->nlive;
}

const struct meta_topic *metalog_topic_at(const struct metalog *ml, int i)
{
	return i >= 0 && i < ml->nlive ? ml->live[i] : NULL;
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
	if (find_live(ml, name, NULL, NULL))
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
	while (find_live(ml, NULL, id, NULL));
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
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;

	out->buf = NULL;
	out->len = 0;
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
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;

	out->buf = NULL;
	out->len = 0;
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
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;
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

int metalog_build_partition_change(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				   const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				   struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;
	int rc;

	out->buf = NULL;
	out->len = 0;
	if (!t)
		return -ENOENT;
	if ((rc = meta_parts_build_change(&e, t, partition, leader, isr, nisr, replicas, nreplicas)) <= 0)
		return rc;               /* an error, or nothing to write */
	return rec_finish(&e, out);
}

int metalog_build_partition_reassign(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				     const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				     const int32_t *adding, int nadding, const int32_t *removing, int nremoving,
				     struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;
	int rc;

	out->buf = NULL;
	out->len = 0;
	if (!t)
		return -ENOENT;
	if ((rc = meta_parts_build_reassign(&e, t, partition, leader, isr, nisr, replicas, nreplicas, adding,
					    nadding, removing, nremoving)) < 0)
		return rc;
	return rec_finish(&e, out);
}

int metalog_build_config(const struct metalog *ml, const char *name, const char *key, const char *value,
			 struct metalog_rec *out)
{
	struct enc e = ENC_INIT(ml, ml->rbuf);
	struct meta_topic *t = name ? find_live(ml, name, NULL, NULL) : NULL;
	int rc, have = 0;

	out->buf = NULL;
	out->len = 0;
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
	enc_type(&e, META_REC_REGISTER_BROKER);
	enc_i32(&e, id);
	enc_bytes(&e, incarnation, 16);
	enc_i64(&e, -1);         /* the epoch: this record's log index */
	enc_str(&e, host);
	enc_i32(&e, port);
	enc_str(&e, rack && rack[0] ? rack : NULL);
	if (repl_port > 0) {
		enc_i32(&e, (int32_t)repl_ip);
		enc_i32(&e, repl_port);
	}
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

/* ---- the local file's synchronous changes: build, then commit ----------- */

static int build_commit(struct metalog *ml, int rc, struct metalog_rec *r, struct metalog_applied *out)
{
	if (rc == 0 && r->len)
		rc = metalog_commit(ml, r->buf, r->len, out);
	metalog_rec_free(r);
	return rc;
}

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

int64_t metalog_next_producer_ids(struct metalog *ml, int32_t block)
{
	struct metalog_rec r;
	struct metalog_applied a = { 0 };
	int rc = build_commit(ml, metalog_build_producer_ids(ml, block, &r), &r, &a);

	return rc < 0 ? rc : a.pid_start;
}

/* ---- snapshots ----------------------------------------------------------- */

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

/* The image emptied: live topics move to the dead list (borrowed pointers
 * stay valid until close), broker configs, cluster id and producer ids go. */
static int image_reset(struct metalog *ml)
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
	if ((rc = image_reset(ml)) < 0)
		return rc;
	return metalog_snapshot_each(buf, len, restore_one, ml);
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
