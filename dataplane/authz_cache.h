/* dataplane/authz_cache.h — the authorizer's decisions remembered per
 * connection (dataplane/authz.c): a small fixed table in struct conn, so
 * a connection that produces to the same topics request after request
 * pays the ACL matcher (dataplane/acl.h) once per topic and operation,
 * not once per request.
 *
 * An entry is (resource type, operation, resource name) -> allowed or
 * not, for the connection's principal and address. The table holds the
 * generation of the ACL set its entries were decided under (acl_set.gen,
 * published with the metadata snapshot): a check that finds another
 * generation empties it first, so a binding created or deleted takes
 * effect at the next check after the shard has loaded the snapshot that
 * has it. The principal's change (a SASL authentication, a
 * re-authentication) empties it too (authz_cache_reset). super.users and
 * allow.everyone.if.no.acl.found are read at start and never change.
 * Names longer than AUTHZ_CACHE_NAME bytes are not remembered (checked
 * every time); when the table is full the oldest entry goes (round
 * robin).
 *
 * Thread: the connection's shard (@thread shard), as the connection.
 * Owns nothing outside itself (no allocation, no pointer). */
#ifndef SLUICE_AUTHZ_CACHE_H
#define SLUICE_AUTHZ_CACHE_H

#include <stdint.h>
#include <string.h>

#define AUTHZ_CACHE_WAYS 8
#define AUTHZ_CACHE_NAME 60     /* an entry is 64 bytes */

/* The operation code of "WRITE on some topic" (InitProducerId of an
 * idempotent producer, acl_write_any_topic), beside enum acl_op's. */
#define AUTHZ_OP_WRITE_ANY 0x40

struct authz_cache_ent {
	uint8_t res;                /* enum acl_res; 0: an empty entry */
	uint8_t op;                 /* enum acl_op, or AUTHZ_OP_WRITE_ANY */
	uint8_t len;                /* of name */
	uint8_t allowed;
	char name[AUTHZ_CACHE_NAME];
};

struct authz_cache {
	uint64_t gen;               /* the ACL generation of the entries; 0: none */
	uint32_t next;              /* the entry the next miss replaces */
	struct authz_cache_ent e[AUTHZ_CACHE_WAYS];
};

_Static_assert(sizeof(struct authz_cache_ent) == 64, "an entry is one cache line");

/* Forget every decision (a new principal). */
static inline void authz_cache_reset(struct authz_cache *ac)
{
	memset(ac, 0, sizeof(*ac));
}

#endif
