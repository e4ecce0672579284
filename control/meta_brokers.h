/* control/meta_brokers.h — the brokers of the cluster as the metadata log
 * records them (Kafka's RegisterBrokerRecord, BrokerRegistrationChange
 * and UnregisterBrokerRecord): each broker's id, incarnation (a random id
 * per process start), broker epoch (the log index of its registration:
 * a restarted broker registers again and gets a larger one), the listeners
 * it advertises (the inter-broker one's address apart), its rack, and whether it is fenced (registered but
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

/* A listener of a broker as it advertises it (Kafka's
 * BrokerEndpoint): listener name, host, port, security protocol (Kafka's
 * ids: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL). */
#define META_BROKER_MAX_ENDPOINTS 8
struct meta_endpoint {
	char name[64];
	char host[256];
	int32_t port;
	int16_t protocol;
};

struct meta_broker {
	int32_t id;
	uint8_t incarnation[16];
	int64_t epoch;               /* the log index of its registration */
	char host[256];              /* its inter-broker listener (inter.broker.listener.name): */
	int32_t port;                /* what peers and replica fetchers reach */
	char rack[256];              /* "" = none */
	/* every listener it advertises (REGISTER_BROKER_ENDPOINTS), the
	 * inter-broker one among them; 0: registered by a REGISTER_BROKER
	 * record (one endpoint, host/port above, name unknown: clients of
	 * every listener are told it, as before the endpoints) */
	int nendpoints;
	int inter;                   /* the inter-broker one's index (host/port above are its) */
	struct meta_endpoint endpoints[META_BROKER_MAX_ENDPOINTS];
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

/* Apply one record of a broker type (META_REC_REGISTER_BROKER,
 * META_REC_REGISTER_BROKER_ENDPOINTS ...): d is
 * past the version byte; index is the record's log index (the epoch of a
 * registration proposed with -1). dry: check only. */
int meta_brokers_apply(struct meta_brokers *mb, int16_t type, struct dec *d, int64_t index, int dry);
/* Encode each broker as the REGISTER_BROKER_ENDPOINTS (REGISTER_BROKER for
 * one registered by that record) with its epoch and, when
 * unfenced, BROKER_FENCE records that rebuild it; put(arg, e) per record
 * (e holds one record: type, version, fields). First error returned. */
int meta_brokers_snapshot(const struct meta_brokers *mb, struct enc *e, int (*put)(void *arg, struct enc *e),
			  void *arg);
/* Encode a REGISTER_BROKER / REGISTER_BROKER_ENDPOINTS record (type,
 * fields; the version byte as enc_type writes it) into e: epoch -1 for a
 * proposal. */
void meta_brokers_enc_register(struct enc *e, int32_t id, const uint8_t inc[16], int64_t epoch, const char *host,
			       int32_t port, const char *rack, uint32_t repl_ip, int32_t repl_port);
void meta_brokers_enc_endpoints(struct enc *e, int32_t id, const uint8_t inc[16], int64_t epoch, const char *rack,
				uint32_t repl_ip, int32_t repl_port, const char *inter, const struct meta_endpoint *eps,
				int nep);
const struct meta_broker *meta_brokers_find(const struct meta_brokers *mb, int32_t id);
void meta_brokers_reset(struct meta_brokers *mb);

#endif
