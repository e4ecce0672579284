/* control/meta_features.h — Sluice's feature levels (Kafka's finalized
 * features, KIP-584/KIP-778), in one place: what each level of
 * "metadata.version" lets a node write into the metadata log, and the
 * range this build supports.
 *
 * The level numbers are Sluice's own (Kafka's metadata.version numbers
 * name Kafka releases' record sets; Sluice's records are not Kafka's):
 *   1  records 1..19 (TOPIC .. REMOVE_ACL): what every build before the
 *      levels writes; a log without a FEATURE_LEVEL record is at level 1
 *   2  adds REGISTER_BROKER_ENDPOINTS (20: a registration with every
 *      listener) and FEATURE_LEVEL (21)
 * A node writes a record only when the finalized level allows it
 * (metalog_metadata_version); the level is raised by a FEATURE_LEVEL
 * record (UpdateFeatures on the active controller, control/ctl_features.c)
 * once every registered broker supports it, and never lowered.
 *
 * Thread: any (pure, and a value read once from the environment).
 */
#ifndef SLUICE_META_FEATURES_H
#define SLUICE_META_FEATURES_H

#include <stdint.h>

#define META_FEATURE_METADATA_VERSION "metadata.version"

enum meta_mv {
	META_MV_1 = 1,             /* records 1..19 */
	META_MV_2 = 2,             /* + REGISTER_BROKER_ENDPOINTS (20), FEATURE_LEVEL (21) */
};
#define META_MV_MIN META_MV_1
#define META_MV_MAX META_MV_2      /* this build's highest */
#define META_MV_ENDPOINTS META_MV_2 /* the first level that writes record 20 */

/* The highest level this node says it supports: META_MV_MAX, or lower
 * with the test knob SLUICE_TEST_METADATA_VERSION_MAX=N (1 <= N <= MAX;
 * docs/cluster.md), which stands in for an older build in tests: such a
 * node registers and heartbeats as an older one would, and the active
 * controller refuses a level above it. Read once; a bad value is
 * ignored with a message on stderr. @thread any */
int16_t meta_features_local_max(void);

#endif
