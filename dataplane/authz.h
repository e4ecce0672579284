/* dataplane/authz.h — the authorizer on the shard
 * (authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer):
 * whether the request's principal may do an operation on a resource, by
 * the ACL bindings of the metadata snapshot (dataplane/acl.h): no lock, a
 * few binary searches, and none when the connection remembers the
 * decision (dataplane/authz_cache.h: a fixed table in struct conn,
 * emptied when the bindings' generation changes). super.users are allowed everything; without the
 * authorizer everything is allowed. The peer's address is looked up only
 * when some binding names a host.
 * Thread: the request's shard (@thread shard). */
#ifndef SLUICE_AUTHZ_H
#define SLUICE_AUTHZ_H

#include <stddef.h>

#include "dataplane/acl.h"
#include "dataplane/kafka/kafka_wire.h"

struct kafka_ctx;

/* The cluster resource's name as a request carries names. */
#define ACL_CLUSTER_STR ((struct kafka_str){ ACL_CLUSTER_NAME, (int32_t)sizeof(ACL_CLUSTER_NAME) - 1 })

/* 1: allowed, 0: not. name is len bytes, not NUL-terminated. */
int authz_allow(struct kafka_ctx *ctx, int op, int res, const char *name, size_t len);
/* Kafka's authorizeByResourceType(WRITE, TOPIC): whether the principal
 * may WRITE some topic (InitProducerId of an idempotent producer, beside
 * IDEMPOTENT_WRITE on the cluster): a topic named "hardcode" allowed by
 * authz_allow, else acl_write_any_topic over the snapshot's WRITE index
 * (dataplane/acl.h). 1: allowed, 0: not. */
int authz_write_any_topic(struct kafka_ctx *ctx);
/* The cluster resource ("kafka-cluster"). */
int authz_cluster(struct kafka_ctx *ctx, int op);

/* authz_allow for a name as a request carries it (null: ""). */
static inline int authz_str(struct kafka_ctx *ctx, int op, int res, struct kafka_str s)
{
	return authz_allow(ctx, op, res, s.ptr, s.len > 0 ? (size_t)s.len : 0);
}

/* The "authorized operations" bit field (Metadata, DescribeCluster,
 * DescribeGroups): bit op set for each operation of `ops` (a resource
 * type's, dataplane/acl_ops.h) the principal may do on the resource. */
int32_t authz_ops(struct kafka_ctx *ctx, int res, struct kafka_str name, int32_t ops);

/* For a request whose response has a top-level ErrorCode in every
 * version served: unless op on the cluster is allowed, answer it
 * CLUSTER_AUTHORIZATION_FAILED alone and return 1 (the request is
 * answered); else 0. */
int authz_cluster_or_refuse(struct kafka_ctx *ctx, int op);

/* A config resource's check (DescribeConfigs, AlterConfigs,
 * IncrementalAlterConfigs): op on the topic for a TOPIC (2) resource, on
 * the cluster for a BROKER (4) or BROKER_LOGGER (8) one. 0: allowed (or a
 * type the handler refuses itself), else TOPIC_ or CLUSTER_AUTHORIZATION_FAILED. */
int16_t authz_config(struct kafka_ctx *ctx, int op, int8_t type, struct kafka_str name);

#endif
