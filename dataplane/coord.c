/* dataplane/coord.c — the shard's side of asking the control thread (see
 * dataplane/coord.h): an admin request built in the request's arena, and
 * the topic auto-creation Metadata asks for. @thread shard */
#include <stdio.h>
#include <string.h>

#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"

struct ctl_req *ctl_req_new(struct kafka_ctx *ctx, int kind, int n)
{
	struct ctl_req *req = ALLOC(ctx, struct ctl_req, 1);

	if (!req)
		return NULL;
	memset(req, 0, sizeof(*req));
	req->kind = kind;
	req->n = n;
	req->topics = ALLOC(ctx, struct ctl_topic, n);
	if (!req->topics)
		return NULL;
	memset(req->topics, 0, sizeof(*req->topics) * (size_t)(n > 0 ? n : 1));
	return req;
}

void ctl_request_auto_create(struct kafka_ctx *ctx, struct kafka_str *names, int n)
{
	struct ctl_req *req = ctl_req_new(ctx, CTL_AUTO_CREATE, n);

	if (!req) {
		kafka_ctx_sub_done(ctx);
		return;
	}
	for (int i = 0; i < n; i++) {
		req->topics[i].name = names[i];
		req->topics[i].partitions = -1;
		req->topics[i].replication = -1;
	}
	ctx->sh->b->coord->submit_admin(ctx, req);
}

void coord_refuse(int16_t *err, char *msg, size_t cap, int16_t code, const char *text)
{
	if (*err)
		return;
	*err = code;
	snprintf(msg, cap, "%s", text);
}
