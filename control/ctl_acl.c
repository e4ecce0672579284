/* control/ctl_acl.c — CreateAcls and DeleteAcls on the control thread:
 * each binding the shard did not refuse becomes an ACL or REMOVE_ACL
 * record (control/meta_acl.h) proposed to the metadata quorum (any node:
 * a follower forwards it to the leader); its result is filled once it is
 * applied or refused, and the request resumes on its shard when every
 * binding has its result. A binding already there (create) or already
 * gone (delete) is no error and writes nothing. The bindings reach every
 * node's shards in the next metadata snapshot (ctl_quorum.c republishes
 * on an ACL record).
 * @thread ctl */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_acl.h"
#include "control/metalog.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

struct acl_req {
	struct kafka_ctx *ctx;
	int from;
	int pending;
};

struct acl_one {
	struct acl_req *ar;
	struct coord_acl_item *it;
};

static void acl_step_done(struct acl_req *ar, struct ctl *ctl)
{
	if (--ar->pending == 0) {
		/* the bindings published before the answer: a client that
		 * has it finds them on every shard at its next request (the
		 * per-connection caches see the new generation) */
		if (ctl->brokers_changed) {
			ctl->brokers_changed = 0;
			ctl_publish_brokers(ctl);
		}
		ctl_reply(ctl, ar->ctx, ar->from);
		free(ar);
	}
}

static void acl_applied(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct acl_one *o = cookie;

	(void)a;
	if (err < 0 && err != -ENOENT) {   /* -ENOENT: removed meanwhile, as asked */
		o->it->err = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(o->it->msg, sizeof(o->it->msg), "the metadata log did not take it: %s", strerror(-err));
	}
	acl_step_done(o->ar, ctl);
	free(o);
}

static void acl_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_acl *req = m->p[1];
	struct acl_req *ar = xcalloc(1, sizeof(*ar));

	ar->ctx = m->p[0];
	ar->from = (int)m->v[0];
	ar->pending = 1;   /* until every binding is looked at */
	for (int i = 0; i < req->n; i++) {
		struct coord_acl_item *it = &req->items[i];
		struct metalog_rec rec;
		struct acl_one *o;
		int rc;

		if (it->err)
			continue;
		rc = it->del ? meta_acl_build_remove(metalog_acls(ctl->ml), &it->b, &rec)
			     : meta_acl_build(metalog_acls(ctl->ml), &it->b, &rec);
		if (rc == -ENOENT || (rc == 0 && !rec.len))
			continue;   /* gone already, or there already */
		if (rc < 0) {
			it->err = rc == -EINVAL ? KERR_INVALID_REQUEST : KERR_UNKNOWN_SERVER_ERROR;
			snprintf(it->msg, sizeof(it->msg), "%s", rc == -EINVAL ? "Invalid ACL binding" : strerror(-rc));
			continue;
		}
		o = xcalloc(1, sizeof(*o));
		o->ar = ar;
		o->it = it;
		ar->pending++;
		ctl_meta_propose(ctl, &rec, acl_applied, o);
	}
	acl_step_done(ar, ctl);
}

void ctl_acl_submit(struct kafka_ctx *ctx, struct coord_acl *req)
{
	struct shard_msg m = { .fn = acl_msg, .p = { ctx, req }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
