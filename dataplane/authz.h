/* dataplane/authz.h — the authorizer on the shard
 * (authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer):
 * whether the request's principal may do an operation on a resource, by
 * the ACL bindings of the metadata snapshot (dataplane/acl.h): no lock, a
 * few binary searches. super.users are allowed everything; without the
 * authorizer everything is allowed. The peer's address is looked up only
 * when some binding names a host.
 * Thread: the request's shard (@thread shard). */
#ifndef SLUICE_AUTHZ_H
#define SLUICE_AUTHZ_H

#include <stddef.h>

#include "dataplane/acl.h"

struct kafka_ctx;

/* 1: allowed, 0: not. name is len bytes, not NUL-terminated. */
int authz_allow(struct kafka_ctx *ctx, int op, int res, const char *name, size_t len);
/* The cluster resource ("kafka-cluster"). */
int authz_cluster(struct kafka_ctx *ctx, int op);

#endif
