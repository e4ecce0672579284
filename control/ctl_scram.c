/* control/ctl_scram.c — AlterUserScramCredentials on the control thread:
 * each change the shard did not refuse becomes a SCRAM or REMOVE_SCRAM
 * record (control/meta_scram.h) proposed to the metadata quorum (any
 * node: a follower forwards it to the leader); its result is filled once
 * it is applied or refused, and the request resumes on its shard when
 * every change has its result. The new users reach every node's shards in
 * the next metadata snapshot (ctl_quorum.c republishes on a SCRAM record).
 * @thread ctl */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_scram.h"
#include "control/metalog.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

struct scram_req {
	struct kafka_ctx *ctx;
	int from;
	int pending;
};

struct scram_one {
	struct scram_req *sr;
	struct coord_scram_item *it;
};

static void scram_step_done(struct scram_req *sr, struct ctl *ctl)
{
	if (--sr->pending == 0) {
		ctl_reply(ctl, sr->ctx, sr->from);
		free(sr);
	}
}

static void scram_applied(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct scram_one *o = cookie;

	(void)a;
	if (err == -ENOENT) {
		o->it->err = KERR_RESOURCE_NOT_FOUND;
		snprintf(o->it->msg, sizeof(o->it->msg), "Attempt to delete a user credential that does not exist");
	} else if (err < 0) {
		o->it->err = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(o->it->msg, sizeof(o->it->msg), "the metadata log did not take it: %s", strerror(-err));
	}
	scram_step_done(o->sr, ctl);
	free(o);
}

static void scram_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_scram *req = m->p[1];
	struct scram_req *sr = xcalloc(1, sizeof(*sr));

	sr->ctx = m->p[0];
	sr->from = (int)m->v[0];
	sr->pending = 1;   /* until every change is looked at */
	for (int i = 0; i < req->n; i++) {
		struct coord_scram_item *it = &req->items[i];
		struct metalog_rec rec;
		struct scram_one *o;
		int rc;

		if (it->err)
			continue;
		it->cred.name = it->name;
		rc = it->del ? meta_scram_build_remove(metalog_scram(ctl->ml), it->name, it->cred.type, &rec)
			     : meta_scram_build(metalog_scram(ctl->ml), &it->cred, &rec);
		if (rc < 0) {
			it->err = rc == -ENOENT ? KERR_RESOURCE_NOT_FOUND : KERR_UNACCEPTABLE_CREDENTIAL;
			snprintf(it->msg, sizeof(it->msg), "%s", rc == -ENOENT ?
				 "Attempt to delete a user credential that does not exist" : "Invalid credential");
			continue;
		}
		o = xcalloc(1, sizeof(*o));
		o->sr = sr;
		o->it = it;
		sr->pending++;
		ctl_meta_propose(ctl, &rec, scram_applied, o);
	}
	scram_step_done(sr, ctl);
}

void ctl_scram_submit(struct kafka_ctx *ctx, struct coord_scram *req)
{
	struct shard_msg m = { .fn = scram_msg, .p = { ctx, req }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
