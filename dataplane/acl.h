/* dataplane/acl.h — ACL bindings as Kafka models them
 * (org.apache.kafka.common.acl.AclBinding) and their matcher: a sorted,
 * immutable set that the control thread builds from the metadata log
 * (control/meta_acl.h) and publishes in the metadata snapshot (struct
 * md_snapshot's acls, dataplane/broker.h), where shards read it without a
 * lock.
 *
 * A binding: resource type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID),
 * resource name, pattern (LITERAL, or PREFIXED: every resource whose name
 * starts with it; a LITERAL "*" is every resource of the type), principal
 * ("User:alice", "User:*" every one), host ("*" every one), operation
 * (enum acl_op, dataplane/acl_ops.h; ALL any), permission (ALLOW, DENY).
 *
 * Kafka's rule (StandardAuthorizer): a DENY that matches wins; else an
 * ALLOW that matches allows, where ALLOW of READ, WRITE, DELETE or ALTER
 * also allows DESCRIBE and ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS;
 * else, when no binding at all names the resource (whatever its
 * principal), allow.everyone.if.no.acl.found decides; else denied.
 *
 * The set is sorted by (resource type, pattern, name, principal, host,
 * operation, permission): a check looks up the resource's LITERAL name,
 * the LITERAL "*" and, for each prefix of the name, the PREFIXED bindings
 * of exactly that prefix, each a binary search — never a scan of the set.
 *
 * Beside it, an index for Kafka's authorizeByResourceType (InitProducerId
 * of an idempotent producer: may the principal WRITE some topic?): the
 * TOPIC bindings whose operation is WRITE or ALL, sorted by (principal,
 * permission, pattern, name, host), so a check reads only the bindings of
 * the principal and of "User:*" (acl_write_any_topic).
 *
 * A set carries a generation (gen): it changes whenever the bindings do,
 * and only then, so a decision remembered with the generation it was
 * made under (the per-connection cache, dataplane/authz_cache.h) is still
 * right while the generation is the same.
 *
 * Thread: any (pure functions on the caller's data; a set is read-only
 * once built). */
#ifndef SLUICE_ACL_H
#define SLUICE_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/acl_ops.h"

/* org.apache.kafka.common.resource.ResourceType */
enum acl_res {
	ACL_RES_UNKNOWN = 0,
	ACL_RES_ANY = 1,               /* filters only */
	ACL_RES_TOPIC = 2,
	ACL_RES_GROUP = 3,
	ACL_RES_CLUSTER = 4,
	ACL_RES_TRANSACTIONAL_ID = 5,
};

/* org.apache.kafka.common.resource.PatternType */
enum acl_pat {
	ACL_PAT_UNKNOWN = 0,
	ACL_PAT_ANY = 1,               /* filters: any pattern, the exact name */
	ACL_PAT_MATCH = 2,             /* filters: every binding that applies to the name */
	ACL_PAT_LITERAL = 3,
	ACL_PAT_PREFIXED = 4,
};

/* org.apache.kafka.common.acl.AclPermissionType */
enum acl_perm {
	ACL_PERM_UNKNOWN = 0,
	ACL_PERM_ANY = 1,              /* filters only */
	ACL_PERM_DENY = 2,
	ACL_PERM_ALLOW = 3,
};

#define ACL_CLUSTER_NAME "kafka-cluster"
#define ACL_WILDCARD "*"
#define ACL_STR_MAX 4096           /* longest name, principal or host (bytes) */

struct acl_binding {
	int8_t res, pat;
	int8_t op, perm;
	const char *name, *principal, *host;
};

/* A filter (DescribeAcls, DeleteAcls): ANY in a field matches every
 * value; NULL strings match every one. */
struct acl_filter {
	int8_t res, pat, op, perm;
	const char *name, *principal, *host;
};

struct acl_set {
	const struct acl_binding *b;   /* sorted by acl_cmp */
	int n;
	int hosts;                     /* bindings whose host is not "*" (0: the peer's address
					* is never needed) */
	uint64_t gen;                  /* the bindings' generation (>= 1 in a published set;
					* 0: none given, nothing may be remembered by it) */
	const struct acl_binding *w;   /* the TOPIC bindings of operation WRITE or ALL, sorted
					* by acl_w_cmp (the same strings as b); NULL: no index,
					* acl_write_any_topic answers 0 */
	int nw;
};

/* The set's order; 0 for the same binding. */
int acl_cmp(const struct acl_binding *x, const struct acl_binding *y);
/* Kafka's checks of a new binding: 0, or -EINVAL (an unknown or filter-only
 * type, pattern, operation or permission; an empty or too long name,
 * principal or host; a principal without "Type:"; the cluster resource
 * named other than "kafka-cluster" or not LITERAL). */
int acl_binding_valid(const struct acl_binding *b);
/* Whether a filter is one DescribeAcls/DeleteAcls may carry: -EINVAL for
 * UNKNOWN fields. */
int acl_filter_valid(const struct acl_filter *f);
int acl_filter_match(const struct acl_filter *f, const struct acl_binding *b);
/* The index of the binding, or -(insertion point) - 1. */
int acl_find(const struct acl_set *s, const struct acl_binding *b);

/* Whether principal at host may do op on (res, name): 1 yes, 0 no, by the
 * rule above (super users are the caller's). */
int acl_authorize(const struct acl_set *s, const char *principal, const char *host, int op, int res,
		  const char *name, int allow_if_none);
/* The same for a name of len bytes (not NUL-terminated). */
int acl_authorize_n(const struct acl_set *s, const char *principal, const char *host, int op, int res,
		    const char *name, size_t len, int allow_if_none);

/* The index's order: (principal, permission, pattern, name, host). */
int acl_w_cmp(const struct acl_binding *x, const struct acl_binding *y);
/* Kafka's authorizeByResourceType(WRITE, TOPIC) past its first check
 * (the caller's: a super user, or the name "hardcode" allowed by
 * acl_authorize): 1 when some ALLOW of WRITE (or ALL) on topics for the
 * principal (or "User:*") at host is not dominated by a DENY of the same
 * (a LITERAL "*" DENY dominates everything; a LITERAL ALLOW is dominated
 * by a LITERAL DENY of its name; either by a PREFIXED DENY of a prefix of
 * its name), or a LITERAL "*" ALLOW; else 0. Reads only the index's
 * bindings of the principal and of "User:*". */
int acl_write_any_topic(const struct acl_set *s, const char *principal, const char *host);

/* Names for text (sluicectl, logs); "UNKNOWN" for others. The parsers
 * take Kafka's names, any case; -EINVAL for others. */
const char *acl_res_name(int res);
const char *acl_pat_name(int pat);
const char *acl_op_name(int op);
const char *acl_perm_name(int perm);
int acl_res_parse(const char *s);
int acl_pat_parse(const char *s);
int acl_op_parse(const char *s);
int acl_perm_parse(const char *s);

#endif
