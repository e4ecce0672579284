/* dataplane/acl_ops.h — Kafka's ACL operation codes
 * (org.apache.kafka.common.acl.AclOperation) and the operations each
 * resource type supports, as the "authorized operations" bit fields of
 * DescribeCluster, DescribeGroups and Metadata carry them (the bits a
 * principal may do: authz_ops, dataplane/authz.h; without the authorizer
 * every one).
 * dataplane/acl.h has the ACL bindings and their matcher.
 * Thread: any (constants only). */
#ifndef SLUICE_ACL_OPS_H
#define SLUICE_ACL_OPS_H

enum acl_op {
	ACL_UNKNOWN = 0,
	ACL_ANY = 1,             /* filters only */
	ACL_ALL = 2,
	ACL_READ = 3,
	ACL_WRITE = 4,
	ACL_CREATE = 5,
	ACL_DELETE = 6,
	ACL_ALTER = 7,
	ACL_DESCRIBE = 8,
	ACL_CLUSTER_ACTION = 9,
	ACL_DESCRIBE_CONFIGS = 10,
	ACL_ALTER_CONFIGS = 11,
	ACL_IDEMPOTENT_WRITE = 12,
};

/* The cluster resource: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
 * DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE. */
#define ACL_CLUSTER_OPS \
	((1 << ACL_CREATE) | (1 << ACL_ALTER) | (1 << ACL_DESCRIBE) | (1 << ACL_CLUSTER_ACTION) | \
	 (1 << ACL_DESCRIBE_CONFIGS) | (1 << ACL_ALTER_CONFIGS) | (1 << ACL_IDEMPOTENT_WRITE))
/* A topic: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
 * ALTER_CONFIGS. */
#define ACL_TOPIC_OPS \
	((1 << ACL_READ) | (1 << ACL_WRITE) | (1 << ACL_CREATE) | (1 << ACL_DELETE) | (1 << ACL_ALTER) | \
	 (1 << ACL_DESCRIBE) | (1 << ACL_DESCRIBE_CONFIGS) | (1 << ACL_ALTER_CONFIGS))
/* A group: READ, DESCRIBE, DELETE (328). */
#define ACL_GROUP_OPS ((1 << ACL_READ) | (1 << ACL_DESCRIBE) | (1 << ACL_DELETE))

#endif
