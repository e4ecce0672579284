/* dataplane/handlers_acl.c — DescribeAcls (29), CreateAcls (30),
 * DeleteAcls (31). DescribeAcls answers from the ACL bindings of the
 * metadata snapshot on the shard; CreateAcls and DeleteAcls check each
 * binding or filter here, then the control thread proposes the ACL and
 * REMOVE_ACL records (control/ctl_acl.c) and the request resumes once each
 * is applied. Strings are copied into the request's memory: the snapshot
 * may be retired before the response is encoded. Without the authorizer
 * (authorizer.class.name unset) all three answer SECURITY_DISABLED, as
 * Kafka's.
 * @thread shard */
#include <stdio.h>
#include <string.h>

#include "dataplane/acl.h"
#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

#define NO_AUTHORIZER "No Authorizer is configured."

/* A request's string as a C string in the request's memory; NULL for a
 * null one (and for one with a NUL, which no binding holds: *bad set). */
static const char *cstr(struct kafka_ctx *ctx, const struct kafka_str *s, int *bad)
{
	char *p;

	if (!s->ptr || s->len < 0)
		return NULL;
	if (memchr(s->ptr, 0, (size_t)s->len)) {
		*bad = 1;
		return NULL;
	}
	if (!(p = ALLOC(ctx, char, s->len + 1))) {
		*bad = 1;
		return NULL;
	}
	memcpy(p, s->ptr, (size_t)s->len);
	p[s->len] = 0;
	return p;
}

/* ---- DescribeAcls (29) -------------------------------------------------- */

int kafka_handle_describe_acls(struct kafka_ctx *ctx)
{
	const struct kafka_describe_acls_request *q = ctx->req.body;
	const struct md_snapshot *md = broker_md(ctx->sh->b);
	const struct acl_set *s = md ? &md->acls : NULL;
	struct kafka_describe_acls_response *r = ALLOC(ctx, struct kafka_describe_acls_response, 1);
	struct kafka_describe_acls_response_describe_acls_resource *res;
	struct kafka_describe_acls_response_acl_description *d;
	struct acl_filter f;
	int bad = 0, n = s ? s->n : 0, nres = 0, nd = 0;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_acls_response_init(r);
	ctx->resp = r;
	f.res = q->ResourceTypeFilter;
	f.pat = q->PatternTypeFilter;
	f.op = q->Operation;
	f.perm = q->PermissionType;
	f.name = cstr(ctx, &q->ResourceNameFilter, &bad);
	f.principal = cstr(ctx, &q->PrincipalFilter, &bad);
	f.host = cstr(ctx, &q->HostFilter, &bad);
	if (!authz_cluster(ctx, ACL_DESCRIBE)) {
		r->ErrorCode = KERR_CLUSTER_AUTHORIZATION_FAILED;
		r->ErrorMessage = kafka_ctx_strdup(ctx, "DescribeAcls needs DESCRIBE on the cluster");
		kafka_ctx_respond(ctx);
		return 0;
	}
	if (!ctx->sh->b->set.authz) {
		r->ErrorCode = KERR_SECURITY_DISABLED;
		r->ErrorMessage = kafka_ctx_strdup(ctx, NO_AUTHORIZER);
		kafka_ctx_respond(ctx);
		return 0;
	}
	if (bad || acl_filter_valid(&f)) {
		r->ErrorCode = KERR_INVALID_REQUEST;
		r->ErrorMessage = kafka_ctx_strdup(ctx, "the filter has an unknown resource type, pattern, operation or "
					    "permission");
		kafka_ctx_respond(ctx);
		return 0;
	}
	res = ALLOC(ctx, struct kafka_describe_acls_response_describe_acls_resource, n);
	d = ALLOC(ctx, struct kafka_describe_acls_response_acl_description, n);
	if (!res || !d) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	/* the set is sorted by resource first: a resource's bindings are
	 * consecutive */
	for (int i = 0; i < n; i++) {
		const struct acl_binding *b = &s->b[i];
		struct kafka_describe_acls_response_describe_acls_resource *last = nres ? &res[nres - 1] : NULL;

		if (!acl_filter_match(&f, b))
			continue;
		if (!last || last->ResourceType != b->res || last->PatternType != b->pat ||
		    strcmp(last->ResourceName.ptr, b->name)) {
			last = &res[nres++];
			memset(last, 0, sizeof(*last));
			last->ResourceType = b->res;
			last->PatternType = b->pat;
			last->ResourceName = kafka_ctx_strdup(ctx, b->name);
			last->Acls.items = &d[nd];
		}
		d[nd].Principal = kafka_ctx_strdup(ctx, b->principal);
		d[nd].Host = kafka_ctx_strdup(ctx, b->host);
		d[nd].Operation = b->op;
		d[nd].PermissionType = b->perm;
		nd++;
		last->Acls.count++;
	}
	r->Resources.items = res;
	r->Resources.count = nres;
	kafka_ctx_respond(ctx);
	return 0;
}

/* ---- CreateAcls (30), DeleteAcls (31) ------------------------------------ */

struct acl_req {
	struct coord_acl req;
	int nfilters;
	int *first;                  /* DeleteAcls: each filter's first item */
};

static int create_resume(struct kafka_ctx *ctx)
{
	struct acl_req *st = ctx->state;
	struct kafka_create_acls_response *r = ctx->resp;

	for (int i = 0; i < st->req.n; i++) {
		const struct coord_acl_item *it = &st->req.items[i];

		kafka_ctx_result_error(ctx, &r->Results.items[i].ErrorCode, &r->Results.items[i].ErrorMessage, it->err,
				       it->msg);
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_create_acls(struct kafka_ctx *ctx)
{
	const struct kafka_create_acls_request *q = ctx->req.body;
	int n = q->Creations.count > 0 ? q->Creations.count : 0;
	struct kafka_create_acls_response *r = ALLOC(ctx, struct kafka_create_acls_response, 1);
	struct kafka_create_acls_response_acl_creation_result *res =
		ALLOC(ctx, struct kafka_create_acls_response_acl_creation_result, n);
	struct acl_req *st = ALLOC(ctx, struct acl_req, 1);
	struct coord_acl_item *items = ALLOC(ctx, struct coord_acl_item, n);
	int allowed = authz_cluster(ctx, ACL_ALTER);

	if (!r || !res || !st || !items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_create_acls_response_init(r);
	ctx->resp = r;
	ctx->state = st;
	memset(st, 0, sizeof(*st));
	memset(items, 0, sizeof(*items) * (size_t)(n ? n : 1));
	memset(res, 0, sizeof(*res) * (size_t)(n ? n : 1));
	for (int i = 0; i < n; i++) {
		const struct kafka_create_acls_request_acl_creation *c = &q->Creations.items[i];
		struct coord_acl_item *it = &items[i];
		int bad = 0;

		it->b.res = c->ResourceType;
		it->b.pat = c->ResourcePatternType;
		it->b.op = c->Operation;
		it->b.perm = c->PermissionType;
		it->b.name = cstr(ctx, &c->ResourceName, &bad);
		it->b.principal = cstr(ctx, &c->Principal, &bad);
		it->b.host = cstr(ctx, &c->Host, &bad);
		if (!allowed)
			COORD_REFUSE(it, KERR_CLUSTER_AUTHORIZATION_FAILED, "CreateAcls needs ALTER on the cluster");
		else if (!ctx->sh->b->set.authz)
			COORD_REFUSE(it, KERR_SECURITY_DISABLED, NO_AUTHORIZER);
		else if (bad || acl_binding_valid(&it->b))
			COORD_REFUSE(it, KERR_INVALID_REQUEST, "Invalid ACL binding: an unknown or filter-only type, "
			       "or an empty name, principal or host");
	}
	r->Results.items = res;
	r->Results.count = n;
	st->req.n = n;
	st->req.items = items;
	ctx->pending = 1;
	ctx->resume = create_resume;
	ctx->sh->b->coord->submit_acl(ctx, &st->req);
	return 0;
}

static int delete_resume(struct kafka_ctx *ctx)
{
	struct acl_req *st = ctx->state;
	struct kafka_delete_acls_response *r = ctx->resp;

	for (int f = 0; f < st->nfilters; f++) {
		struct kafka_delete_acls_response_delete_acls_filter_result *fr = &r->FilterResults.items[f];

		for (int j = 0; !fr->ErrorCode && j < fr->MatchingAcls.count; j++) {
			const struct coord_acl_item *it = &st->req.items[st->first[f] + j];

			kafka_ctx_result_error(ctx, &fr->MatchingAcls.items[j].ErrorCode,
					       &fr->MatchingAcls.items[j].ErrorMessage, it->err, it->msg);
		}
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_delete_acls(struct kafka_ctx *ctx)
{
	const struct kafka_delete_acls_request *q = ctx->req.body;
	const struct md_snapshot *md = broker_md(ctx->sh->b);
	const struct acl_set *s = md ? &md->acls : NULL;
	int nf = q->Filters.count > 0 ? q->Filters.count : 0, ns = s ? s->n : 0, total = 0;
	struct kafka_delete_acls_response *r = ALLOC(ctx, struct kafka_delete_acls_response, 1);
	struct kafka_delete_acls_response_delete_acls_filter_result *fr =
		ALLOC(ctx, struct kafka_delete_acls_response_delete_acls_filter_result, nf);
	struct acl_req *st = ALLOC(ctx, struct acl_req, 1);
	struct acl_filter *filters = ALLOC(ctx, struct acl_filter, nf);
	int *first = ALLOC(ctx, int, nf);
	int allowed = authz_cluster(ctx, ACL_ALTER);
	struct coord_acl_item *items;

	if (!r || !fr || !st || !filters || !first) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_delete_acls_response_init(r);
	ctx->resp = r;
	ctx->state = st;
	memset(st, 0, sizeof(*st));
	memset(fr, 0, sizeof(*fr) * (size_t)(nf ? nf : 1));
	/* each filter, and how many bindings it matches */
	for (int i = 0; i < nf; i++) {
		const struct kafka_delete_acls_request_delete_acls_filter *x = &q->Filters.items[i];
		struct acl_filter *f = &filters[i];
		int bad = 0;

		f->res = x->ResourceTypeFilter;
		f->pat = x->PatternTypeFilter;
		f->op = x->Operation;
		f->perm = x->PermissionType;
		f->name = cstr(ctx, &x->ResourceNameFilter, &bad);
		f->principal = cstr(ctx, &x->PrincipalFilter, &bad);
		f->host = cstr(ctx, &x->HostFilter, &bad);
		fr[i].ErrorMessage = (struct kafka_str){ NULL, -1 };
		first[i] = total;
		if (!allowed) {
			fr[i].ErrorCode = KERR_CLUSTER_AUTHORIZATION_FAILED;
			fr[i].ErrorMessage = kafka_ctx_strdup(ctx, "DeleteAcls needs ALTER on the cluster");
			continue;
		}
		if (!ctx->sh->b->set.authz) {
			fr[i].ErrorCode = KERR_SECURITY_DISABLED;
			fr[i].ErrorMessage = kafka_ctx_strdup(ctx, NO_AUTHORIZER);
			continue;
		}
		if (bad || acl_filter_valid(f)) {
			fr[i].ErrorCode = KERR_INVALID_REQUEST;
			fr[i].ErrorMessage = kafka_ctx_strdup(ctx, "the filter has an unknown resource type, pattern, "
						       "operation or permission");
			continue;
		}
		for (int j = 0; j < ns; j++)
			fr[i].MatchingAcls.count += acl_filter_match(f, &s->b[j]);
		total += fr[i].MatchingAcls.count;
	}
	items = ALLOC(ctx, struct coord_acl_item, total);
	if (!items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	/* one item per match: a binding two filters match is removed by the
	 * first item's record; the second finds it gone, which is no error */
	for (int i = 0; i < nf; i++) {
		struct kafka_delete_acls_response_delete_acls_matching_acl *m =
			ALLOC(ctx, struct kafka_delete_acls_response_delete_acls_matching_acl, fr[i].MatchingAcls.count);
		int k = 0;

		if (!m) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		fr[i].MatchingAcls.items = m;
		for (int j = 0; !fr[i].ErrorCode && j < ns; j++) {
			const struct acl_binding *b = &s->b[j];
			struct coord_acl_item *it = &items[first[i] + k];

			if (!acl_filter_match(&filters[i], b))
				continue;
			memset(it, 0, sizeof(*it));
			it->del = 1;
			it->b = *b;
			memset(&m[k], 0, sizeof(m[k]));
			m[k].ResourceType = b->res;
			m[k].PatternType = b->pat;
			m[k].Operation = b->op;
			m[k].PermissionType = b->perm;
			m[k].ResourceName = kafka_ctx_strdup(ctx, b->name);
			m[k].Principal = kafka_ctx_strdup(ctx, b->principal);
			m[k].Host = kafka_ctx_strdup(ctx, b->host);
			it->b.name = m[k].ResourceName.ptr;
			it->b.principal = m[k].Principal.ptr;
			it->b.host = m[k].Host.ptr;
			k++;
		}
	}
	r->FilterResults.items = fr;
	r->FilterResults.count = nf;
	st->nfilters = nf;
	st->first = first;
	st->req.n = total;
	st->req.items = items;
	ctx->pending = 1;
	ctx->resume = delete_resume;
	ctx->sh->b->coord->submit_acl(ctx, &st->req);
	return 0;
}
