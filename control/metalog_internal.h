/* control/metalog_internal.h — the metadata log's own state, shared by
 * the files that make it up and by nothing else:
 *   metalog_image.c    the image: its topics, broker configs, brokers,
 *                      SCRAM users and ACLs, looked up and changed; a
 *                      record applied is the only way it changes
 *   metalog_build.c    the builders: a change validated against the image
 *                      and encoded as a record, to be committed or proposed
 *   metalog_snapshot.c the image as a snapshot, and an image rebuilt from
 *                      one
 *   metalog.c          the local file: open, replay, commit, close; the
 *                      synchronous changes (build, then commit)
 * Each builds only on those listed above it (scripts/check-layers).
 *
 * Thread: everything here is the control thread's (@thread ctl); nothing
 * locks. Errors: 0 or -errno, as control/metalog.h says.
 */
#ifndef SLUICE_METALOG_INTERNAL_H
#define SLUICE_METALOG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "control/meta_acl.h"
#include "control/meta_brokers.h"
#include "control/meta_scram.h"
#include "control/metalog.h"
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
	int16_t mv;               /* metadata.version finalized (FEATURE_LEVEL; 1: none) */
	int64_t mv_epoch;         /* the log index of its FEATURE_LEVEL record (0: none) */
	int64_t apply_index;      /* the log index of the record being applied (0: none) */
	uint8_t *bbuf;            /* batch being built */
	uint8_t *rbuf;            /* replay reads, 4 KiB aligned */
};

/* A record built into buf (of META_MAX_RECORD + 2 bytes) */
#define ENC_INIT(ml, buf) { (buf), 0, META_MAX_RECORD + 2, 0 }

/* ---- metalog_image.c ---------------------------------------------------- */

/* The live topic called name, or with that id (at: its index), or NULL. */
struct meta_topic *metalog_find_live(const struct metalog *ml, const char *name, const uint8_t *id, int *at);
/* A record's bytes: int16 type (big-endian), then the value. -EPROTO. */
int metalog_rec_split(const void *rec, size_t len, int16_t *type, const uint8_t **val, size_t *vlen);
/* Apply one record's value to the image (see metalog_image.c). */
int metalog_record_apply(struct metalog *ml, int16_t type, const uint8_t *val, size_t len, int dry,
			 struct metalog_applied *out);
/* The image emptied (see metalog_image.c); -ENOMEM. */
int metalog_image_reset(struct metalog *ml);
/* Everything the image holds freed, at close. */
void metalog_image_fini(struct metalog *ml);

#endif
