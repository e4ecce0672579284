/* control/ctl_features.c — UpdateFeatures on the control thread (Kafka's
 * kafka-features upgrade, KIP-584/KIP-778): the active controller raises
 * the finalized metadata.version with a FEATURE_LEVEL record
 * (control/metalog.h; the levels: control/meta_features.h) once every
 * registered broker supports the new level, as its heartbeats to this
 * controller say (a broker of an older build says nothing: level 1; a
 * broker that has not heartbeated here since it registered or since this
 * node took over is not known yet, and the update is refused until it
 * has). The level is never lowered: a downgrade of any kind is refused
 * (older records could not express what the newer ones wrote), as Kafka
 * refuses metadata.version downgrades it cannot make safely.
 *
 * Per update, Kafka's codes: 0 done (or validated, or the level already
 * there); INVALID_UPDATE_VERSION (95) for an unknown feature, a level
 * outside what this build or a broker supports, a downgrade, a deletion;
 * at the top NOT_CONTROLLER (41) on a node that is not the active
 * controller (the admin client sends to the one Metadata names).
 * @thread ctl */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_brokers.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "storage/slog.h"

struct feat_req {
	struct kafka_ctx *ctx;
	int from;
	int pending;
};

struct feat_one {
	struct feat_req *fr;
	struct coord_feature_update *it;
};

static void feat_step_done(struct feat_req *fr, struct ctl *ctl)
{
	if (--fr->pending == 0) {
		if (ctl->brokers_changed) {
			ctl->brokers_changed = 0;
			ctl_publish_brokers(ctl);   /* ApiVersions says the new level from here on */
		}
		ctl_reply(ctl, fr->ctx, fr->from);
		free(fr);
	}
}

static void feat_applied(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct feat_one *o = cookie;

	(void)a;
	if (err < 0) {
		o->it->err = KERR_FEATURE_UPDATE_FAILED;
		snprintf(o->it->msg, sizeof(o->it->msg), "the metadata log did not take the FEATURE_LEVEL record: %s",
			 strerror(-err));
	}
	feat_step_done(o->fr, ctl);
	free(o);
}

/* 0 when every registered broker (and this controller) supports level,
 * else INVALID_UPDATE_VERSION with a message naming the first that does
 * not. */
static int16_t brokers_support(const struct ctl *ctl, int16_t level, char *msg, size_t cap)
{
	if (meta_features_local_max() < level) {
		snprintf(msg, cap, "node %d (the active controller) supports metadata.version up to %d, not %d",
			 ctl->b->set.node_id, meta_features_local_max(), level);
		return KERR_INVALID_UPDATE_VERSION;
	}
	for (int i = 0; i < metalog_broker_count(ctl->ml); i++) {
		const struct meta_broker *b = metalog_broker_at(ctl->ml, i);
		int16_t max = ctl_brokers_supported_max(ctl, b->id);

		if (max == 0) {
			snprintf(msg, cap, "broker %d has not said which metadata.version levels it supports (no "
				 "heartbeat to this controller since it registered at epoch %lld): try again",
				 b->id, (long long)b->epoch);
			return KERR_INVALID_UPDATE_VERSION;
		}
		if (max < level) {
			snprintf(msg, cap, "broker %d supports metadata.version up to %d, not %d: upgrade it first",
				 b->id, max, level);
			return KERR_INVALID_UPDATE_VERSION;
		}
	}
	return 0;
}

/* The result of one update, or 0 to write it (*rec built). */
static int16_t feat_check(struct ctl *ctl, struct coord_feature_update *it, int validate_only,
			  struct metalog_rec *rec)
{
	int16_t cur = metalog_metadata_version(ctl->ml), err;
	int rc;

	rec->buf = NULL;
	rec->len = 0;
	if (!it->name || strcmp(it->name, META_FEATURE_METADATA_VERSION)) {
		snprintf(it->msg, sizeof(it->msg), "feature %s is not supported: Sluice finalizes metadata.version only",
			 it->name ? it->name : "(null)");
		return KERR_INVALID_UPDATE_VERSION;
	}
	if (it->upgrade_type < 1 || it->upgrade_type > 3) {
		snprintf(it->msg, sizeof(it->msg), "unknown upgrade type %d", it->upgrade_type);
		return KERR_INVALID_UPDATE_VERSION;
	}
	if (it->level < 1) {
		snprintf(it->msg, sizeof(it->msg), "metadata.version cannot be deleted (a level below 1 was asked)");
		return KERR_INVALID_UPDATE_VERSION;
	}
	if (it->level < cur) {
		if (it->upgrade_type == 1)
			snprintf(it->msg, sizeof(it->msg), "cannot lower metadata.version from %d to %d with an upgrade "
				 "(upgrade type UPGRADE)", cur, it->level);
		else
			snprintf(it->msg, sizeof(it->msg), "metadata.version cannot be lowered from %d to %d: the log "
				 "holds records of level %d that nodes of a lower level cannot read", cur, it->level, cur);
		return KERR_INVALID_UPDATE_VERSION;
	}
	if (it->level > META_MV_MAX) {
		snprintf(it->msg, sizeof(it->msg), "metadata.version %d is beyond this build's (1 to %d)", it->level,
			 META_MV_MAX);
		return KERR_INVALID_UPDATE_VERSION;
	}
	if (it->level == cur)
		return 0;   /* there already: nothing to write */
	if ((err = brokers_support(ctl, it->level, it->msg, sizeof(it->msg))) != 0)
		return err;
	if (validate_only)
		return 0;
	rc = metalog_build_feature_level(ctl->ml, it->name, it->level, rec);
	if (rc < 0) {
		snprintf(it->msg, sizeof(it->msg), "cannot build the FEATURE_LEVEL record: %s", strerror(-rc));
		return KERR_INVALID_UPDATE_VERSION;
	}
	return 0;
}

static void features_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_features *req = m->p[1];
	struct feat_req *fr = xcalloc(1, sizeof(*fr));

	fr->ctx = m->p[0];
	fr->from = (int)m->v[0];
	fr->pending = 1;   /* until every update is looked at */
	if (!ctl_elect_active(ctl)) {
		req->err = KERR_NOT_CONTROLLER;
		snprintf(req->msg, sizeof(req->msg), "node %d is not the active controller", ctl->b->set.node_id);
		feat_step_done(fr, ctl);
		return;
	}
	for (int i = 0; i < req->n; i++) {
		struct coord_feature_update *it = &req->items[i];
		struct metalog_rec rec;
		struct feat_one *o;

		if (it->err)
			continue;
		it->err = feat_check(ctl, it, req->validate_only, &rec);
		if (it->err || !rec.len)
			continue;
		o = xcalloc(1, sizeof(*o));
		o->fr = fr;
		o->it = it;
		fr->pending++;
		slog(SLOG_NOTICE, "metadata.version %d -> %d (UpdateFeatures)",
			metalog_metadata_version(ctl->ml), it->level);
		ctl_meta_propose(ctl, &rec, feat_applied, o);
	}
	feat_step_done(fr, ctl);
}

void ctl_features_submit(struct kafka_ctx *ctx, struct coord_features *req)
{
	struct shard_msg m = { .fn = features_msg, .p = { ctx, req }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
