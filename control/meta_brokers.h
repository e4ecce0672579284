/* control/meta_brokers.h — the brokers of the cluster as the metadata log
 * records them (Kafka's RegisterBrokerRecord, BrokerRegistrationChange
 * and UnregisterBrokerRecord): each broker's id, incarnation (a random id
 * per process start), broker epoch (the log index of its registration:
 * a restarted broker registers again and gets a larger one), the listener
 * clients reach it on, its rack, and whether it is fenced (registered but
 * not, or no longer, allowed to lead: a new registration starts fenced, a
 * heartbeat from a caught-up broker unfences it, a missed session fences
 * it). Part of the image (control/metalog.h): records are applied in log
 * order on every node, through metalog_apply_at.
 *
 * Thread: the control thread (@thread ctl), as the image. Owns its array.
 * Errors: 0 or -errno, as metalog_apply's: -EPROTO for bytes it cannot
 * read, -ENOENT (no such broker, or a stale epoch), -EEXIST (the same
 * incarnation registered twice), -EINVAL, -ENOMEM.
 */
#ifndef SLUICE_META_BROKERS_H
#define SLUICE_META_BROKERS_H

#include <stdint.h>

struct dec;
struct enc;

struct meta_broker {
	int32_t id;
	uint8_t incarnation[16];
	int64_t epoch;               /* the log index of its registration */
	char host[256];
	int32_t port;
	char rack[256];              /* "" = none */
	int fenced;
	/* its native replication address (dpdk.listen: the shards' replication
	 * queue pairs), network order; port 0: none, followers fetch over TCP.
	 * Written after the rack only when set, so a broker without DPDK
	 * registers with the same bytes as before. */
	uint32_t repl_ip;
	int32_t repl_port;
};

struct meta_brokers {
	struct meta_broker *b;       /* by id, ascending */
	int n, cap;
};

/* Apply one record of a broker type (META_REC_REGISTER_BROKER ...): d is
 * past the version byte; index is the record's log index (the epoch of a
 * registration proposed with -1). dry: check only. */
int meta_brokers_apply(struct meta_brokers *mb, int16_t type, struct dec *d, int64_t index, int dry);
/* Encode each broker as the REGISTER_BROKER (with its epoch) and, when
 * unfenced, BROKER_FENCE records that rebuild it; put(arg, e) per record
 * (e holds one record: type, version, fields). First error returned. */
int meta_brokers_snapshot(const struct meta_brokers *mb, struct enc *e, int (*put)(void *arg, struct enc *e),
			  void *arg);
const struct meta_broker *meta_brokers_find(const struct meta_brokers *mb, int32_t id);
void meta_brokers_reset(struct meta_brokers *mb);

#endif
