/* control/sluicectl_acl.c — `sluicectl acl create|list|delete`: ACL
 * bindings through Kafka's CreateAcls (ApiKey 30), DescribeAcls (29) and
 * DeleteAcls (31), as kafka-acls does; the names of types, patterns,
 * operations and permissions are Kafka's (dataplane/acl.h), any case.
 * Exit 0 done, 1 refused (Kafka's error named), 2 bad usage.
 * @thread main */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "control/sluicectl.h"
#include "dataplane/acl.h"

static struct kafka_str ks(const char *s)
{
	return s ? (struct kafka_str){ s, (int32_t)strlen(s) } : (struct kafka_str){ NULL, -1 };
}

/* The binding's options, one table for create and for the filters of
 * list and delete: each enum option's parser, its default in a filter
 * (ANY) and in create (REQUIRED: it must be given). */
#define REQUIRED (-2)
static const struct {
	const char *name;
	int (*parse)(const char *);
	size_t off;                 /* its int8_t in struct acl_filter */
	int8_t any, create;
} enum_opts[] = {
	{ "resource-type", acl_res_parse, offsetof(struct acl_filter, res), ACL_RES_ANY, REQUIRED },
	{ "pattern", acl_pat_parse, offsetof(struct acl_filter, pat), ACL_PAT_ANY, ACL_PAT_LITERAL },
	{ "operation", acl_op_parse, offsetof(struct acl_filter, op), ACL_ANY, REQUIRED },
	{ "permission", acl_perm_parse, offsetof(struct acl_filter, perm), ACL_PERM_ANY, ACL_PERM_ALLOW },
};

/* The options into f (create: create's defaults, and the host "*");
 * 0, or 2 with the usage error printed. */
static int binding_opts(struct ctl *c, const struct args *a, bool create, struct acl_filter *f)
{
	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	for (size_t i = 0; i < sizeof enum_opts / sizeof enum_opts[0]; i++) {
		const char *v = opt_get(a, enum_opts[i].name);
		int r = v ? enum_opts[i].parse(v) : create ? enum_opts[i].create : enum_opts[i].any;

		if (v && r < 0)
			return ctl_usage(c, "--%s: '%s' is not a Kafka name for it", enum_opts[i].name, v);
		*(int8_t *)((char *)f + enum_opts[i].off) = (int8_t)r;
	}
	f->name = opt_get(a, "resource");
	f->principal = opt_get(a, "principal");
	f->host = opt_get(a, "host");
	if (create && !f->host)
		f->host = ACL_WILDCARD;
	return 0;
}

static int cmd_acl_create(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	struct kafka_create_acls_request req;
	struct kafka_create_acls_request_acl_creation cr;
	struct kafka_create_acls_response *resp;
	struct acl_filter b;
	int rc = binding_opts(c, a, true, &b);

	if (rc)
		return rc;
	if (b.res == REQUIRED || b.op == REQUIRED || !b.principal)
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
	int rc = binding_opts(c, a, false, &f);

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
	int rc = binding_opts(c, a, false, &f);

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

/* create's and list's */
static const struct opt_spec binding_spec[] = {
	FILTER_OPTS,
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec delete_opts[] = {
	FILTER_OPTS,
	{ "all", 0, NULL, "every ACL when no other filter is given" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd acl_cmds[] = {
	{ "acl", "create", "", "add an ACL binding (CreateAcls)", binding_spec,
	  "sluicectl acl create -p User:alice -o WRITE -t TOPIC -r orders\n"
	  "sluicectl acl create -p User:alice -o READ -t TOPIC -r team- --pattern PREFIXED\n"
	  "sluicectl acl create -p User:* -o WRITE -t TOPIC -r secret --permission DENY",
	  cmd_acl_create },
	{ "acl", "list", "", "the ACL bindings a filter matches (DescribeAcls)", binding_spec,
	  "sluicectl acl list\nsluicectl acl list -p User:alice\nsluicectl acl list -t TOPIC -r orders --pattern MATCH",
	  cmd_acl_list },
	{ "acl", "delete", "", "remove the ACL bindings a filter matches, and list them (DeleteAcls)", delete_opts,
	  "sluicectl acl delete -p User:alice -t TOPIC\nsluicectl acl delete --all", cmd_acl_delete },
};

const int acl_ncmds = sizeof acl_cmds / sizeof acl_cmds[0];
