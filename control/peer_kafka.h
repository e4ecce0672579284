/* control/peer_kafka.h — the inter-broker Kafka client: what this node's
 * control thread asks of other brokers in Kafka's own protocol
 * (WriteTxnMarkers from the transaction coordinator, AddPartitionsToTxn
 * VerifyOnly from a partition leader), on the metadata quorum's libuv loop
 * (control/quorum.h), never blocking. One connection per peer broker, to
 * the client listener it registered (the metadata image's brokers, as the
 * published snapshot has them); correlation ids match the answers; a
 * connection is made when a request needs it and again after it broke.
 * Kafka's TransactionMarkerChannelManager keeps its connections the same
 * way (one per destination broker, through its NetworkClient). On a
 * secured inter-broker listener each connection runs TLS and/or SASL
 * first (dataplane/peer_session.h, the same client as the replica
 * fetcher's), then its frames through it. When the other broker's
 * SaslAuthenticate gives the session a lifetime (KIP-368), the connection
 * authenticates again before it ends, between requests: once nothing
 * written is unanswered, the requests made meanwhile held until it is done.
 *
 * Thread: the control thread (@thread ctl); the completions run there,
 * from the loop's turn (ctl_quorum_poll) or from peer_kafka_tick.
 * Owns: its connections, the frames it sends, the arena a response is
 * decoded in (valid during the completion only).
 * Errors: -errno. A request whose answer is lost (the connection broke,
 * REQUEST_TIMEOUT_MS passed, the broker is not registered, the answer does
 * not decode) completes with the error; the caller retries as it sees fit.
 */
#ifndef SLUICE_PEER_KAFKA_H
#define SLUICE_PEER_KAFKA_H

#include <stdint.h>

struct ctl;
struct peer_kafka;

/* body: the decoded response (struct kafka_<api>_response), NULL when err. */
typedef void (*peer_kafka_done)(struct ctl *ctl, void *cookie, int err, const void *body);

/* @thread ctl */
struct peer_kafka *peer_kafka_new(struct ctl *ctl);
/* Send request body (struct kafka_<api>_request, encoded at once: it may
 * go after the call) of api_key at version to broker `node`. 0: done runs
 * once, later (never from inside this call); -errno: it never runs
 * (-ENOTCONN: no loop to run it on, -ENOENT: no such broker registered,
 * -EINVAL: the body does not encode). */
int peer_kafka_send(struct peer_kafka *pk, int32_t node, int16_t api_key, int16_t version, const void *body,
		    peer_kafka_done done, void *cookie);
/* Timers: requests past their deadline fail (and their connection closes).
 * Returns the work done. */
int peer_kafka_tick(struct peer_kafka *pk);
/* Before the quorum's loop closes: every connection closed, every request
 * dropped without its completion. */
void peer_kafka_close(struct peer_kafka *pk);
/* After the loop has run the closes. */
void peer_kafka_free(struct peer_kafka *pk);

struct peer_kafka_stats {
	uint64_t sent, answered, failed, connects;
	uint64_t auth_failures;        /* TLS or SASL handshakes with a broker that failed */
	uint64_t reauths_ok, reauths_failed;   /* KIP-368 re-authentications on a connection */
};
const struct peer_kafka_stats *peer_kafka_stats(const struct peer_kafka *pk);

#endif
