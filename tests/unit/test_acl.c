/* tests/unit/test_acl.c — the ACL matcher (dataplane/acl.h) on Kafka's
 * rules: DENY wins, implied operations, wildcard principal and host,
 * LITERAL "*", PREFIXED bindings of every prefix length,
 * allow.everyone.if.no.acl.found; DescribeAcls/DeleteAcls filters; and the
 * operation each grant allows (Kafka's implication table, and the
 * operations each resource type supports); the
 * ACL records of the metadata log (control/meta_acl.h): applied,
 * snapshotted and restored, removed, refused when Kafka would refuse them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_acl.h"
#include "control/metalog.h"
#include "dataplane/acl.h"
#include "tests/unit/helpers.h"

static struct acl_binding B(int res, const char *name, int pat, const char *principal, int op, int perm)
{
	struct acl_binding b = { (int8_t)res, (int8_t)pat, (int8_t)op, (int8_t)perm, name, principal, "*" };

	return b;
}

static int by_cmp(const void *a, const void *b)
{
	return acl_cmp(a, b);
}

/* The set of the bindings b (an array), sorted as the snapshot's; hosts:
 * how many name a host. */
static struct acl_set set_of(struct acl_binding *b, int n, int hosts)
{
	qsort(b, (size_t)n, sizeof(b[0]), by_cmp);
	return (struct acl_set){ .b = b, .n = n, .hosts = hosts };
}
#define SET_OF(b, hosts) set_of((b), (int)(sizeof(b) / sizeof((b)[0])), (hosts))

static int allowed(const struct acl_set *s, const char *who, int op, int res, const char *name)
{
	return acl_authorize(s, who, "127.0.0.1", op, res, name, 0);
}

Test(acl, deny_wins_and_operations_imply_describe)
{
	struct acl_binding b[] = {
		B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_ALLOW),
		B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:bob", ACL_ALL, ACL_PERM_ALLOW),
		B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:bob", ACL_WRITE, ACL_PERM_DENY),
		B(ACL_RES_TOPIC, "*", ACL_PAT_LITERAL, "User:*", ACL_ALTER_CONFIGS, ACL_PERM_ALLOW),
		B(ACL_RES_GROUP, "g", ACL_PAT_LITERAL, "User:carol", ACL_DESCRIBE, ACL_PERM_DENY),
		B(ACL_RES_GROUP, "g", ACL_PAT_LITERAL, "User:carol", ACL_READ, ACL_PERM_ALLOW),
	};
	struct acl_set s = SET_OF(b, 0);

	cr_assert(allowed(&s, "User:alice", ACL_WRITE, ACL_RES_TOPIC, "orders"));
	cr_assert(allowed(&s, "User:alice", ACL_DESCRIBE, ACL_RES_TOPIC, "orders"));   /* WRITE implies it */
	cr_assert(!allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "orders"));
	cr_assert(!allowed(&s, "User:alice", ACL_WRITE, ACL_RES_TOPIC, "orders2"));
	cr_assert(!allowed(&s, "User:alice", ACL_WRITE, ACL_RES_GROUP, "orders"));    /* another type */
	cr_assert(allowed(&s, "User:bob", ACL_READ, ACL_RES_TOPIC, "orders"));         /* ALL */
	cr_assert(!allowed(&s, "User:bob", ACL_WRITE, ACL_RES_TOPIC, "orders"));       /* DENY wins */
	/* LITERAL "*" and User:*: ALTER_CONFIGS implies DESCRIBE_CONFIGS, not DESCRIBE */
	cr_assert(allowed(&s, "User:zed", ACL_DESCRIBE_CONFIGS, ACL_RES_TOPIC, "anything"));
	cr_assert(!allowed(&s, "User:zed", ACL_DESCRIBE, ACL_RES_TOPIC, "anything"));
	/* a DENY is not widened: DENY DESCRIBE does not deny READ, READ's
	 * ALLOW does not override a DENY of DESCRIBE */
	cr_assert(allowed(&s, "User:carol", ACL_READ, ACL_RES_GROUP, "g"));
	cr_assert(!allowed(&s, "User:carol", ACL_DESCRIBE, ACL_RES_GROUP, "g"));
}

/* Kafka's AclEntry / StandardAuthorizer: an ALLOW of `granted` allows
 * `asked` when they are the same, granted is ALL, asked is DESCRIBE and
 * granted READ, WRITE, DELETE or ALTER, or asked is DESCRIBE_CONFIGS and
 * granted ALTER_CONFIGS. A DENY denies only what it names (or ALL). */
static int kafka_implies(int granted, int asked)
{
	if (granted == asked || granted == ACL_ALL)
		return 1;
	if (asked == ACL_DESCRIBE)
		return granted == ACL_READ || granted == ACL_WRITE || granted == ACL_DELETE || granted == ACL_ALTER;
	return asked == ACL_DESCRIBE_CONFIGS && granted == ACL_ALTER_CONFIGS;
}

Test(acl, every_grant_against_every_operation)
{
	for (int granted = ACL_ALL; granted <= ACL_IDEMPOTENT_WRITE; granted++) {
		for (int perm = ACL_PERM_DENY; perm <= ACL_PERM_ALLOW; perm++) {
			struct acl_binding b[] = {
				B(ACL_RES_TOPIC, "t", ACL_PAT_LITERAL, "User:a", granted, perm),
				/* every other operation allowed: a DENY shows what it takes away */
				B(ACL_RES_TOPIC, "t", ACL_PAT_LITERAL, "User:a", ACL_ALL, ACL_PERM_ALLOW),
			};
			/* an ALLOW alone; a DENY beside the ALLOW of ALL */
			struct acl_set s = perm == ACL_PERM_ALLOW ? set_of(b, 1, 0) : SET_OF(b, 0);

			for (int asked = ACL_READ; asked <= ACL_IDEMPOTENT_WRITE; asked++) {
				int want = perm == ACL_PERM_ALLOW ? kafka_implies(granted, asked)
								  : !(granted == asked || granted == ACL_ALL);

				cr_assert_eq(allowed(&s, "User:a", asked, ACL_RES_TOPIC, "t"), want,
					     "%s %s, asked %s", acl_perm_name(perm), acl_op_name(granted), acl_op_name(asked));
			}
		}
	}
}

/* The "authorized operations" bits each resource type can carry (Kafka's
 * AclEntry.supportedOperations). */
Test(acl, supported_operations)
{
	cr_assert_eq(ACL_TOPIC_OPS, (1 << ACL_READ) | (1 << ACL_WRITE) | (1 << ACL_CREATE) | (1 << ACL_DESCRIBE) |
					    (1 << ACL_DELETE) | (1 << ACL_ALTER) | (1 << ACL_DESCRIBE_CONFIGS) |
					    (1 << ACL_ALTER_CONFIGS));
	cr_assert_eq(ACL_GROUP_OPS, (1 << ACL_READ) | (1 << ACL_DESCRIBE) | (1 << ACL_DELETE));
	cr_assert_eq(ACL_CLUSTER_OPS, (1 << ACL_CREATE) | (1 << ACL_CLUSTER_ACTION) | (1 << ACL_DESCRIBE_CONFIGS) |
					      (1 << ACL_ALTER_CONFIGS) | (1 << ACL_IDEMPOTENT_WRITE) | (1 << ACL_ALTER) |
					      (1 << ACL_DESCRIBE));
}

Test(acl, prefixed_literal_wildcards_and_the_default)
{
	struct acl_binding b[] = {
		B(ACL_RES_TOPIC, "team-", ACL_PAT_PREFIXED, "User:alice", ACL_READ, ACL_PERM_ALLOW),
		B(ACL_RES_TOPIC, "team-secret", ACL_PAT_LITERAL, "User:alice", ACL_READ, ACL_PERM_DENY),
		B(ACL_RES_TOPIC, "t", ACL_PAT_PREFIXED, "User:bob", ACL_READ, ACL_PERM_ALLOW),
		B(ACL_RES_TOPIC, "team-a", ACL_PAT_PREFIXED, "User:bob", ACL_ALL, ACL_PERM_DENY),
		B(ACL_RES_TRANSACTIONAL_ID, "tx", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_ALLOW),
	};
	struct acl_set s = SET_OF(b, 0);

	cr_assert(allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "team-x"));
	cr_assert(allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "team-"));
	cr_assert(!allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "team"));
	cr_assert(!allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "team-secret"));   /* LITERAL DENY */
	cr_assert(allowed(&s, "User:alice", ACL_READ, ACL_RES_TOPIC, "team-secret2"));
	/* prefixes of every length: "t" allows, "team-a" denies */
	cr_assert(allowed(&s, "User:bob", ACL_READ, ACL_RES_TOPIC, "team-b"));
	cr_assert(!allowed(&s, "User:bob", ACL_READ, ACL_RES_TOPIC, "team-abc"));
	cr_assert(!allowed(&s, "User:bob", ACL_READ, ACL_RES_TOPIC, "x"));
	/* allow.everyone.if.no.acl.found: only where no binding names the
	 * resource, whoever its principal */
	cr_assert(acl_authorize(&s, "User:eve", "h", ACL_READ, ACL_RES_TOPIC, "other", 1));
	cr_assert(!acl_authorize(&s, "User:eve", "h", ACL_READ, ACL_RES_TOPIC, "other", 0));
	cr_assert(!acl_authorize(&s, "User:eve", "h", ACL_READ, ACL_RES_TOPIC, "team-x", 1));
	cr_assert(acl_authorize(&s, "User:eve", "h", ACL_READ, ACL_RES_GROUP, "team-x", 1));
	cr_assert(!acl_authorize(&s, "User:eve", "h", ACL_WRITE, ACL_RES_TRANSACTIONAL_ID, "tx", 1));
	cr_assert(acl_authorize(NULL, "User:eve", "h", ACL_WRITE, ACL_RES_TOPIC, "a", 1));
	cr_assert(!acl_authorize(NULL, "User:eve", "h", ACL_WRITE, ACL_RES_TOPIC, "a", 0));
}

Test(acl, hosts)
{
	struct acl_binding b[] = {
		B(ACL_RES_TOPIC, "a", ACL_PAT_LITERAL, "User:alice", ACL_READ, ACL_PERM_ALLOW),
	};
	struct acl_set s;

	b[0].host = "10.0.0.1";
	s = SET_OF(b, 1);
	cr_assert(acl_authorize(&s, "User:alice", "10.0.0.1", ACL_READ, ACL_RES_TOPIC, "a", 0));
	cr_assert(!acl_authorize(&s, "User:alice", "10.0.0.2", ACL_READ, ACL_RES_TOPIC, "a", 0));
}

Test(acl, filters_and_validation)
{
	struct acl_binding lit = B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:a", ACL_READ, ACL_PERM_ALLOW);
	struct acl_binding pre = B(ACL_RES_TOPIC, "ord", ACL_PAT_PREFIXED, "User:a", ACL_READ, ACL_PERM_ALLOW);
	struct acl_binding star = B(ACL_RES_TOPIC, "*", ACL_PAT_LITERAL, "User:b", ACL_WRITE, ACL_PERM_DENY);
	struct acl_filter f = { ACL_RES_ANY, ACL_PAT_ANY, ACL_ANY, ACL_PERM_ANY, NULL, NULL, NULL };
	struct acl_binding bad;

	cr_assert(acl_filter_match(&f, &lit) && acl_filter_match(&f, &pre) && acl_filter_match(&f, &star));
	f.name = "orders";
	cr_assert(acl_filter_match(&f, &lit) && !acl_filter_match(&f, &pre) && !acl_filter_match(&f, &star));
	f.pat = ACL_PAT_MATCH;
	cr_assert(acl_filter_match(&f, &lit) && acl_filter_match(&f, &pre) && acl_filter_match(&f, &star));
	f.pat = ACL_PAT_PREFIXED;
	cr_assert(!acl_filter_match(&f, &lit) && !acl_filter_match(&f, &pre));
	f.name = "ord";
	cr_assert(acl_filter_match(&f, &pre));
	f.pat = ACL_PAT_ANY;
	f.name = NULL;
	f.principal = "User:b";
	cr_assert(!acl_filter_match(&f, &lit) && acl_filter_match(&f, &star));
	f.principal = NULL;
	f.perm = ACL_PERM_ALLOW;
	cr_assert(acl_filter_match(&f, &lit) && !acl_filter_match(&f, &star));
	f.perm = ACL_PERM_ANY;
	f.op = ACL_WRITE;
	cr_assert(!acl_filter_match(&f, &lit) && acl_filter_match(&f, &star));
	cr_assert_eq(acl_filter_valid(&f), 0);
	f.res = ACL_RES_UNKNOWN;
	cr_assert_eq(acl_filter_valid(&f), -EINVAL);

	cr_assert_eq(acl_binding_valid(&lit), 0);
	bad = lit;
	bad.op = ACL_ANY;
	cr_assert_eq(acl_binding_valid(&bad), -EINVAL);
	bad = lit;
	bad.pat = ACL_PAT_MATCH;
	cr_assert_eq(acl_binding_valid(&bad), -EINVAL);
	bad = lit;
	bad.principal = "alice";
	cr_assert_eq(acl_binding_valid(&bad), -EINVAL);
	bad = lit;
	bad.name = "";
	cr_assert_eq(acl_binding_valid(&bad), -EINVAL);
	bad = lit;
	bad.res = ACL_RES_CLUSTER;
	cr_assert_eq(acl_binding_valid(&bad), -EINVAL);
	bad.name = ACL_CLUSTER_NAME;
	cr_assert_eq(acl_binding_valid(&bad), 0);
	cr_assert_eq(acl_op_parse("cluster-action"), ACL_CLUSTER_ACTION);
	cr_assert_eq(acl_res_parse("Transactional_Id"), ACL_RES_TRANSACTIONAL_ID);
	cr_assert_eq(acl_perm_parse("nope"), -EINVAL);
	cr_assert_str_eq(acl_op_name(ACL_IDEMPOTENT_WRITE), "IDEMPOTENT_WRITE");
}

static int restore_into(void *arg, const void *rec, size_t len)
{
	return metalog_apply(arg, rec, len, NULL);
}

Test(acl, records_apply_snapshot_and_remove)
{
	struct metalog *ml, *ml2;
	struct metalog_rec r;
	struct acl_binding b = B(ACL_RES_TOPIC, "orders", ACL_PAT_PREFIXED, "User:alice", ACL_WRITE, ACL_PERM_ALLOW);
	struct acl_binding d = B(ACL_RES_GROUP, "g", ACL_PAT_LITERAL, "User:*", ACL_READ, ACL_PERM_DENY);
	struct acl_set copy;
	struct acl_set s;
	void *snap;
	size_t len;

	cr_assert_eq(metalog_image_new(1, &ml), 0);
	cr_assert_eq(meta_acl_build(metalog_acls(ml), &b, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);   /* again: no change */
	metalog_rec_free(&r);
	cr_assert_eq(meta_acl_build(metalog_acls(ml), &b, &r), 0);
	cr_assert_eq(r.len, 0);                                    /* there already: nothing to write */
	cr_assert_eq(meta_acl_build(metalog_acls(ml), &d, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	s = meta_acl_set(metalog_acls(ml));
	cr_assert_eq(s.n, 2);
	cr_assert(acl_authorize(&s, "User:alice", "h", ACL_WRITE, ACL_RES_TOPIC, "orders-eu", 0));
	/* the snapshot's copy, one allocation */
	cr_assert_eq(meta_acl_copy(metalog_acls(ml), &copy), 0);
	cr_assert_eq(copy.n, 2);
	cr_assert_eq(copy.gen, s.gen);
	cr_assert(acl_authorize(&copy, "User:alice", "h", ACL_WRITE, ACL_RES_TOPIC, "orders-eu", 0));
	cr_assert(!acl_authorize(&copy, "User:bob", "h", ACL_READ, ACL_RES_GROUP, "g", 1));
	free((void *)copy.b);
	/* a snapshot rebuilds them */
	cr_assert_eq(metalog_snapshot(ml, &snap, &len), 0);
	cr_assert_eq(metalog_image_new(1, &ml2), 0);
	cr_assert_eq(metalog_snapshot_each(snap, len, restore_into, ml2), 0);
	s = meta_acl_set(metalog_acls(ml2));
	cr_assert_eq(s.n, 2);
	cr_assert_eq(acl_find(&s, &b) >= 0 && acl_find(&s, &d) >= 0, 1);
	free(snap);
	metalog_close(ml2);
	/* removal; a second one is -ENOENT */
	cr_assert_eq(meta_acl_build_remove(metalog_acls(ml), &b, &r), 0);
	cr_assert_eq(metalog_check(ml, r.buf, r.len), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(metalog_check(ml, r.buf, r.len), -ENOENT);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), -ENOENT);
	metalog_rec_free(&r);
	cr_assert_eq(meta_acl_build_remove(metalog_acls(ml), &b, &r), -ENOENT);
	cr_assert_eq(meta_acl_set(metalog_acls(ml)).n, 1);
	/* what Kafka refuses is never built */
	b.op = ACL_ANY;
	cr_assert_eq(meta_acl_build(metalog_acls(ml), &b, &r), -EINVAL);
	metalog_close(ml);
}

/* Apply binding b (del: remove it) to ml's image. */
static void put(struct metalog *ml, const struct acl_binding *b, int del)
{
	struct metalog_rec r;

	cr_assert_eq(del ? meta_acl_build_remove(metalog_acls(ml), b, &r) : meta_acl_build(metalog_acls(ml), b, &r), 0);
	if (r.len)
		cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
}

/* Kafka's authorizeByResourceType(WRITE, TOPIC) over the snapshot's WRITE
 * index: only the principal's (and User:*'s) WRITE/ALL topic bindings
 * count; a LITERAL deny of the name, a PREFIXED deny of any prefix of it
 * or a LITERAL "*" deny dominates an allow; a LITERAL "*" allow allows. */
static int write_any(struct metalog *ml, const char *who, const char *host)
{
	struct acl_set s;
	int got;

	cr_assert_eq(meta_acl_copy(metalog_acls(ml), &s), 0);
	got = acl_write_any_topic(&s, who, host);
	free((void *)s.b);
	return got;
}

Test(acl, write_on_any_topic)
{
	struct metalog *ml;
	struct acl_binding
		lit = B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_ALLOW),
		lit_deny = B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_DENY),
		pre = B(ACL_RES_TOPIC, "team-a", ACL_PAT_PREFIXED, "User:*", ACL_ALL, ACL_PERM_ALLOW),
		pre_deny = B(ACL_RES_TOPIC, "team", ACL_PAT_PREFIXED, "User:alice", ACL_ALL, ACL_PERM_DENY),
		read = B(ACL_RES_TOPIC, "*", ACL_PAT_LITERAL, "User:alice", ACL_READ, ACL_PERM_ALLOW),
		group = B(ACL_RES_GROUP, "orders", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_ALLOW),
		star = B(ACL_RES_TOPIC, "*", ACL_PAT_LITERAL, "User:bob", ACL_WRITE, ACL_PERM_ALLOW),
		star_deny = B(ACL_RES_TOPIC, "*", ACL_PAT_LITERAL, "User:*", ACL_WRITE, ACL_PERM_DENY),
		hosted = B(ACL_RES_TOPIC, "x", ACL_PAT_LITERAL, "User:carol", ACL_WRITE, ACL_PERM_ALLOW);

	hosted.host = "10.0.0.1";
	cr_assert_eq(metalog_image_new(1, &ml), 0);
	cr_assert(!write_any(ml, "User:alice", "h"));   /* no bindings at all */
	put(ml, &read, 0);
	put(ml, &group, 0);
	cr_assert(!write_any(ml, "User:alice", "h"));   /* READ, or another resource type: no */
	put(ml, &lit, 0);
	cr_assert(write_any(ml, "User:alice", "h"));
	cr_assert(!write_any(ml, "User:bob", "h"));
	put(ml, &lit_deny, 0);                          /* the LITERAL deny of its name */
	cr_assert(!write_any(ml, "User:alice", "h"));
	put(ml, &pre, 0);                               /* User:* ALL on PREFIXED team-a */
	cr_assert(write_any(ml, "User:alice", "h"));
	cr_assert(write_any(ml, "User:bob", "h"));
	put(ml, &pre_deny, 0);                          /* a PREFIXED deny of a prefix of it */
	cr_assert(!write_any(ml, "User:alice", "h"));
	cr_assert(write_any(ml, "User:bob", "h"));
	put(ml, &star, 0);
	cr_assert(write_any(ml, "User:bob", "h"));
	put(ml, &pre, 1);
	cr_assert(write_any(ml, "User:bob", "h"));      /* the LITERAL "*" allow */
	cr_assert(!write_any(ml, "User:alice", "h"));
	put(ml, &star_deny, 0);                         /* a "*" deny for everyone dominates */
	cr_assert(!write_any(ml, "User:bob", "h"));
	put(ml, &hosted, 0);                            /* hosts */
	cr_assert(!write_any(ml, "User:carol", "10.0.0.1"));   /* (still the "*" deny) */
	put(ml, &star_deny, 1);
	cr_assert(write_any(ml, "User:carol", "10.0.0.1"));
	cr_assert(!write_any(ml, "User:carol", "10.0.0.2"));
	metalog_close(ml);
}

/* The generation changes with every change of the bindings, and only then. */
Test(acl, generations)
{
	struct metalog *ml;
	struct acl_binding b = B(ACL_RES_TOPIC, "orders", ACL_PAT_LITERAL, "User:alice", ACL_WRITE, ACL_PERM_ALLOW);
	uint64_t g0, g1, g2;

	cr_assert_eq(metalog_image_new(1, &ml), 0);
	g0 = meta_acl_set(metalog_acls(ml)).gen;
	cr_assert(g0 >= 1);
	put(ml, &b, 0);
	g1 = meta_acl_set(metalog_acls(ml)).gen;
	cr_assert_gt(g1, g0);
	put(ml, &b, 0);                                 /* there already: no change */
	cr_assert_eq(meta_acl_set(metalog_acls(ml)).gen, g1);
	put(ml, &b, 1);
	g2 = meta_acl_set(metalog_acls(ml)).gen;
	cr_assert_gt(g2, g1);                           /* the same bindings as at g0, a new generation */
	metalog_close(ml);
}
