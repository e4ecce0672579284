/* control/meta_acl.h — the ACL bindings as the metadata log records them
 * (Kafka's AccessControlEntryRecord and RemoveAccessControlEntryRecord,
 * keyed by the binding itself rather than an id). Part of the image
 * (control/metalog.h): records are applied in log order on every node,
 * snapshotted with the rest, and published to the shards in the metadata
 * snapshot (struct md_snapshot's acls, dataplane/broker.h), where the
 * authorizer reads them (dataplane/acl.h).
 *
 * Records (after the int16 type and the version byte):
 *  18 ACL         int8 resource type, resource name, int8 pattern type,
 *                 principal, host, int8 operation, int8 permission (the
 *                 codes of dataplane/acl.h): added (one already there
 *                 changes nothing)
 *  19 REMOVE_ACL  the same fields: that binding removed
 *
 * Thread: the control thread (@thread ctl), as the image. Owns its array
 * and the strings in it.
 * Errors: 0 or -errno, as metalog_apply's: -EPROTO for bytes it cannot
 * read, -ENOENT (removing a binding that is not there), -EINVAL (a binding
 * acl_binding_valid refuses), -ENOMEM.
 */
#ifndef SLUICE_META_ACL_H
#define SLUICE_META_ACL_H

#include <stdint.h>

#include "dataplane/acl.h"

struct dec;
struct enc;
struct metalog_rec;

struct meta_acl {
	struct acl_binding *b;   /* sorted by acl_cmp; strings malloc()ed */
	int n, cap;
	uint64_t changes;        /* bumped by every change of the bindings (a binding added or
				  * removed, a reset), never going back: the published set's
				  * generation is changes + 1 (acl_set.gen) */
};

/* Apply one ACL record (d past the version byte); dry: check only. */
int meta_acl_apply(struct meta_acl *ma, int16_t type, struct dec *d, int dry);
/* Encode each binding as its record; put(arg, e) per record. */
int meta_acl_snapshot(const struct meta_acl *ma, struct enc *e, int (*put)(void *arg, struct enc *e), void *arg);
void meta_acl_reset(struct meta_acl *ma);
/* The bindings as a set for acl_authorize and acl_filter_match, its hosts
 * counted, its generation set, no WRITE index (borrowed until the next
 * change). */
struct acl_set meta_acl_set(const struct meta_acl *ma);
/* A copy of the bindings for the metadata snapshot, as meta_acl_set's
 * but in one allocation: the array, the WRITE index (acl_set.w: the TOPIC
 * bindings of WRITE or ALL, sorted by acl_w_cmp), then the strings; out->b
 * malloc()ed (free() it: the index goes with it), NULL with 0 bindings;
 * -ENOMEM (*out is then the empty set, of generation 0). */
int meta_acl_copy(const struct meta_acl *ma, struct acl_set *out);

/* The record adding b (0 with out->len 0 when it is there already); the
 * one removing it (-ENOENT when it is not). -EINVAL as above. */
int meta_acl_build(const struct meta_acl *ma, const struct acl_binding *b, struct metalog_rec *out);
int meta_acl_build_remove(const struct meta_acl *ma, const struct acl_binding *b, struct metalog_rec *out);

#endif
