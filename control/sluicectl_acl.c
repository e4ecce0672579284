/* control/sluicectl_acl.c — `sluicectl acl create|list|delete`: ACL
 * bindings through Kafka's CreateAcls (ApiKey 30), DescribeAcls (29) and
 * DeleteAcls (31), as kafka-acls does; the names of types, patterns,
 * operations and permissions are Kafka's (dataplane/acl.h), any case.
 * Exit 0 done, 1 refused (Kafka's error named), 2 bad usage.
 * @thread main */
#include <stdio.h>
#include <string.h>

#include "control/sluicectl.h"
#include "dataplane/acl.h"

static struct kafka_str ks(const char *s)
{
	return s ? (struct kafka_str){ s, (int32_t)strlen(s) } : (struct kafka_str){ NULL, -1 };
}

/* One of the enum options: its value, dflt when absent, -1 (usage
 * printed) when not a name parse knows. */
static int enum_opt(struct ctl *c, const struct args *a, const char *name, int (*parse)(const char *), int dflt)
{
	const char *v = opt_get(a, name);
	int r;

	if (!v)
		return dflt;
	if ((r = parse(v)) < 0) {
		ctl_usage(c, "--%s: '%s' is not a Kafka name for it", name, v);
		return -1;
	}
	return r;
}

/* The filter of list and delete (ANY where not given). */
static int filter_opts(struct ctl *c, const struct args *a, struct acl_filter *f)
{
	f->res = (int8_t)enum_opt(c, a, "resource-type", acl_res_parse, ACL_RES_ANY);
	f->pat = (int8_t)enum_opt(c, a, "pattern", acl_pat_parse, ACL_PAT_ANY);
	f->op = (int8_t)enum_opt(c, a, "operation", acl_op_parse, ACL_ANY);
	f->perm = (int8_t)enum_opt(c, a, "permission", acl_perm_parse, ACL_PERM_ANY);
	f->name = opt_get(a, "resource");
	f->principal = opt_get(a, "principal");
	f->host = opt_get(a, "host");
	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	return f->res < 0 || f->pat < 0 || f->op < 0 || f->perm < 0 ? 2 : 0;
}

static int cmd_acl_create(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	struct kafka_create_acls_request req;
	struct kafka_create_acls_request_acl_creation cr;
	struct kafka_create_acls_response *resp;
	struct acl_binding b;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	b.res = (int8_t)enum_opt(c, a, "resource-type", acl_res_parse, -2);
	b.pat = (int8_t)enum_opt(c, a, "pattern", acl_pat_parse, ACL_PAT_LITERAL);
	b.op = (int8_t)enum_opt(c, a, "operation", acl_op_parse, -2);
	b.perm = (int8_t)enum_opt(c, a, "permission", acl_perm_parse, ACL_PERM_ALLOW);
	b.name = opt_get(a, "resource");
	b.principal = opt_get(a, "principal");
	b.host = opt_get(a, "host") ? opt_get(a, "host") : ACL_WILDCARD;
	if (b.res == -1 || b.pat == -1 || b.op == -1 || b.perm == -1)
		return 2;
	if (b.res == -2 || b.op == -2 || !b.principal)
		return ctl_usage(c, "acl create needs --principal, --operation and --resource-type");
	if (b.res == ACL_RES_CLUSTER && !b.name)
		b.name = ACL_CLUSTER_NAME;
	if (!b.name)
		return ctl_usage(c, "acl create needs --resource (the cluster's is %s)", ACL_CLUSTER_NAME);
	kafka_create_acls_request_init(&req);
	memset(&cr, 0, sizeof(cr));
	cr.ResourceType = b.res;
	cr.ResourceName = ks(b.name);
	cr.ResourcePatternType = b.pat;
	cr.Principal = ks(b.principal);
	cr.Host = ks(b.host);
	cr.Operation = b.op;
	cr.PermissionType = b.perm;
	req.Creations.items = &cr;
	req.Creations.count = 1;
	k = ctl_client(c);
	ctl_version(c, k, KAFKA_CREATE_ACLS_KEY, 1);
	resp = ctl_call(c, k, KAFKA_CREATE_ACLS_KEY, 1, &req);
	if (resp->Results.count != 1)
		return ctl_fail(c, "CreateAcls answered %d results for one binding", resp->Results.count);
	if (resp->Results.items[0].ErrorCode)
		return ctl_kafka_error(c, resp->Results.items[0].ErrorCode, resp->Results.items[0].ErrorMessage,
				       "creating the ACL");
	if (c->json) {
		json_obj_begin(NULL);
		json_str("result", "created");
		json_obj_end();
		json_end();
	} else {
		printf("created\n");
	}
	return 0;
}

static void row(struct ctl *c, struct table *t, int res, struct kafka_str name, int pat, struct kafka_str principal,
		struct kafka_str host, int op, int perm)
{
	if (c->json) {
		json_obj_begin(NULL);
		json_str("resource_type", acl_res_name(res));
		json_strn("resource", name.ptr, name.len);
		json_str("pattern", acl_pat_name(pat));
		json_strn("principal", principal.ptr, principal.len);
		json_strn("host", host.ptr, host.len);
		json_str("operation", acl_op_name(op));
		json_str("permission", acl_perm_name(perm));
		json_obj_end();
	} else {
		table_add(t, acl_res_name(res), kstr(name), acl_pat_name(pat), kstr(principal), kstr(host),
			  acl_op_name(op), acl_perm_name(perm));
	}
}

static const char *heads[] = { "TYPE", "RESOURCE", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION" };

static void out_begin(struct ctl *c, struct table *t, const char *key)
{
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin(key);
	} else {
		table_init(t, 7, heads);
	}
}

static void out_end(struct ctl *c, struct table *t)
{
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else {
		table_print(t);
		table_fini(t);
	}
}

static int cmd_acl_list(struct ctl *c, const struct args *a)
{
	struct acl_filter f;
	struct kclient *k;
	struct kafka_describe_acls_request q;
	struct kafka_describe_acls_response *r;
	struct table t;
	int rc = filter_opts(c, a, &f);

	if (rc)
		return rc;
	kafka_describe_acls_request_init(&q);
	q.ResourceTypeFilter = f.res;
	q.ResourceNameFilter = ks(f.name);
	q.PatternTypeFilter = f.pat;
	q.PrincipalFilter = ks(f.principal);
	q.HostFilter = ks(f.host);
	q.Operation = f.op;
	q.PermissionType = f.perm;
	k = ctl_client(c);
	ctl_version(c, k, KAFKA_DESCRIBE_ACLS_KEY, 1);
	r = ctl_call(c, k, KAFKA_DESCRIBE_ACLS_KEY, 1, &q);
	if (r->ErrorCode)
		return ctl_kafka_error(c, r->ErrorCode, r->ErrorMessage, "listing ACLs");
	out_begin(c, &t, "acls");
	for (int32_t i = 0; i < r->Resources.count; i++) {
		const struct kafka_describe_acls_response_describe_acls_resource *res = &r->Resources.items[i];

		for (int32_t j = 0; j < res->Acls.count; j++) {
			const struct kafka_describe_acls_response_acl_description *d = &res->Acls.items[j];

			row(c, &t, res->ResourceType, res->ResourceName, res->PatternType, d->Principal, d->Host,
			    d->Operation, d->PermissionType);
		}
	}
	out_end(c, &t);
	return 0;
}

static int cmd_acl_delete(struct ctl *c, const struct args *a)
{
	struct acl_filter f;
	struct kclient *k;
	struct kafka_delete_acls_request q;
	struct kafka_delete_acls_request_delete_acls_filter df;
	struct kafka_delete_acls_response *r;
	struct table t;
	int rc = filter_opts(c, a, &f);

	if (rc)
		return rc;
	if (f.res == ACL_RES_ANY && !f.name && !f.principal && !opt_has(a, "all"))
		return ctl_usage(c, "acl delete needs --resource-type, --resource or --principal (or --all)");
	kafka_delete_acls_request_init(&q);
	memset(&df, 0, sizeof(df));
	df.ResourceTypeFilter = f.res;
	df.ResourceNameFilter = ks(f.name);
	df.PatternTypeFilter = f.pat;
	df.PrincipalFilter = ks(f.principal);
	df.HostFilter = ks(f.host);
	df.Operation = f.op;
	df.PermissionType = f.perm;
	q.Filters.items = &df;
	q.Filters.count = 1;
	k = ctl_client(c);
	ctl_version(c, k, KAFKA_DELETE_ACLS_KEY, 1);
	r = ctl_call(c, k, KAFKA_DELETE_ACLS_KEY, 1, &q);
	if (r->FilterResults.count != 1)
		return ctl_fail(c, "DeleteAcls answered %d results for one filter", r->FilterResults.count);
	if (r->FilterResults.items[0].ErrorCode)
		return ctl_kafka_error(c, r->FilterResults.items[0].ErrorCode, r->FilterResults.items[0].ErrorMessage,
				       "deleting ACLs");
	out_begin(c, &t, "deleted");
	for (int32_t i = 0; i < r->FilterResults.items[0].MatchingAcls.count; i++) {
		const struct kafka_delete_acls_response_delete_acls_matching_acl *m =
			&r->FilterResults.items[0].MatchingAcls.items[i];

		if (m->ErrorCode)
			rc = ctl_kafka_error(c, m->ErrorCode, m->ErrorMessage, "deleting an ACL");
		row(c, &t, m->ResourceType, m->ResourceName, m->PatternType, m->Principal, m->Host, m->Operation,
		    m->PermissionType);
	}
	out_end(c, &t);
	return rc;
}

#define FILTER_OPTS                                                                                          \
	{ "resource-type", 't', "TYPE", "TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID" },                         \
	{ "resource", 'r', "NAME", "the resource's name (LITERAL \"*\": every one)" },                         \
	{ "pattern", 0, "PATTERN", "LITERAL or PREFIXED (list, delete: also ANY, MATCH)" },                   \
	{ "principal", 'p', "PRINCIPAL", "User:NAME, or User:* for every one" },                              \
	{ "host", 0, "HOST", "an address, or * (create's default)" },                                          \
	{ "operation", 'o', "OP", "READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "             \
				  "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL" },                \
	{ "permission", 0, "PERM", "ALLOW (create's default) or DENY" }

static const struct opt_spec create_opts[] = {
	FILTER_OPTS,
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec list_opts[] = {
	FILTER_OPTS,
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec delete_opts[] = {
	FILTER_OPTS,
	{ "all", 0, NULL, "every ACL when no other filter is given" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd acl_cmds[] = {
	{ "acl", "create", "", "add an ACL binding (CreateAcls)", create_opts,
	  "sluicectl acl create -p User:alice -o WRITE -t TOPIC -r orders\n"
	  "sluicectl acl create -p User:alice -o READ -t TOPIC -r team- --pattern PREFIXED\n"
	  "sluicectl acl create -p User:* -o WRITE -t TOPIC -r secret --permission DENY",
	  cmd_acl_create },
	{ "acl", "list", "", "the ACL bindings a filter matches (DescribeAcls)", list_opts,
	  "sluicectl acl list\nsluicectl acl list -p User:alice\nsluicectl acl list -t TOPIC -r orders --pattern MATCH",
	  cmd_acl_list },
	{ "acl", "delete", "", "remove the ACL bindings a filter matches, and list them (DeleteAcls)", delete_opts,
	  "sluicectl acl delete -p User:alice -t TOPIC\nsluicectl acl delete --all", cmd_acl_delete },
};

const int acl_ncmds = sizeof acl_cmds / sizeof acl_cmds[0];
