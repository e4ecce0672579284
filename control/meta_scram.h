/* control/meta_scram.h — the SCRAM users as the metadata log records them
 * (Kafka's UserScramCredentialRecord and RemoveUserScramCredentialRecord):
 * per user and mechanism the salt, the iteration count, StoredKey and
 * ServerKey, never the password. Part of the image (control/metalog.h):
 * records are applied in log order on every node, snapshotted with the
 * rest, and published to the shards in the metadata snapshot (struct
 * md_snapshot's scram, dataplane/broker.h).
 *
 * Records (after the int16 type and the version byte):
 *  15 SCRAM_CREDENTIAL  name, int8 mechanism (1 SCRAM-SHA-256, 2
 *                       SCRAM-SHA-512), salt (int16 length + bytes),
 *                       int32 iterations, StoredKey, ServerKey (each
 *                       int16 length + bytes, the hash's size): added or
 *                       replaced
 *  16 REMOVE_SCRAM_CREDENTIAL name, int8 mechanism
 *
 * Thread: the control thread (@thread ctl), as the image. Owns its array
 * and the names in it.
 * Errors: 0 or -errno, as metalog_apply's: -EPROTO for bytes it cannot
 * read, -ENOENT (removing a credential that is not there), -EINVAL (a
 * name, mechanism, salt, iteration count or key Kafka would refuse),
 * -ENOMEM.
 */
#ifndef SLUICE_META_SCRAM_H
#define SLUICE_META_SCRAM_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/sasl.h"

struct dec;
struct enc;
struct metalog_rec;

struct meta_scram {
	struct sasl_scram_cred *c;   /* by name, then mechanism; names malloc()ed */
	int n, cap;
};

/* Apply one SCRAM record (d past the version byte); dry: check only. */
int meta_scram_apply(struct meta_scram *ms, int16_t type, struct dec *d, int dry);
/* Encode each credential as its record; put(arg, e) per record. */
int meta_scram_snapshot(const struct meta_scram *ms, struct enc *e, int (*put)(void *arg, struct enc *e),
			void *arg);
const struct sasl_scram_cred *meta_scram_find(const struct meta_scram *ms, const char *name, int type);
void meta_scram_reset(struct meta_scram *ms);

/* The record adding (or replacing) c under its name; the one removing
 * name's credential of `type` (-ENOENT when there is none). -EINVAL as
 * above. */
int meta_scram_build(const struct meta_scram *ms, const struct sasl_scram_cred *c, struct metalog_rec *out);
int meta_scram_build_remove(const struct meta_scram *ms, const char *name, int type, struct metalog_rec *out);

#endif
