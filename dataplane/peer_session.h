/* dataplane/peer_session.h — the client end of a connection from this
 * broker to another on the inter-broker listener (Kafka's
 * inter.broker.listener.name, or security.inter.broker.protocol): TLS (an
 * SSL or SASL_SSL listener: OpenSSL on memory BIOs, dataplane/tls.h, the
 * other broker's certificate checked against the truststore and the
 * address it registered), then SASL (a SASL_PLAINTEXT or SASL_SSL
 * listener: SaslHandshake v1 and SaslAuthenticate v2 with the broker's own
 * credentials, dataplane/sasl_client.h), then the caller's Kafka frames.
 * No I/O here: the caller receives into peer_session_rx, feeds what came,
 * steps, and sends what peer_session_tx gives, with whatever I/O it has
 * (io_uring on a shard: dataplane/replica_fetcher.c; libuv on the control
 * thread: control/peer_kafka.c), so nothing ever blocks.
 *
 * A PLAINTEXT inter-broker listener needs no session (the callers keep
 * their plain path); on SASL_PLAINTEXT the session ends at the
 * authentication and the connection goes on in plaintext
 * (peer_session_tls says 0).
 *
 * KIP-368: the leader's SaslAuthenticate says the session's lifetime
 * (peer_session_lifetime_ms; 0: it never ends). Before it ends the caller,
 * between its requests, calls peer_session_reauth and steps the session
 * again as at the start: SaslHandshake and SaslAuthenticate on the same
 * connection (through TLS on SASL_SSL), its own frames held meanwhile.
 *
 * Thread: a struct peer_sec is made by main at start and read-only after;
 * a struct peer_session belongs to its connection's thread.
 * Owns: a session its tls_conn and its SASL frames (fixed buffers).
 * Errors: -errno, with peer_session_error saying why (never a password).
 */
#ifndef SLUICE_PEER_SESSION_H
#define SLUICE_PEER_SESSION_H

#include <stdint.h>

#include "dataplane/sasl_client.h"

struct tls_client;
struct tls_conn;

/* How this node reaches other brokers: its inter-broker listener's
 * security protocol and its own credentials. */
struct peer_sec {
	int tls, sasl;                  /* SSL/SASL_SSL; SASL_PLAINTEXT/SASL_SSL */
	struct tls_client *tls_client;  /* tls: the truststore (and keystore) */
	int mech;                       /* sasl: sasl.mechanism.inter.broker.protocol (enum sasl_mech) */
	char user[SASL_USER_MAX];       /* sasl: the JAAS config's username and password */
	char password[SASL_PASSWORD_MAX];
};

enum { PEER_SESSION_TLS, PEER_SESSION_SASL_START, PEER_SESSION_SASL_HANDSHAKE, PEER_SESSION_SASL_AUTH,
       PEER_SESSION_READY, PEER_SESSION_FAILED };

#define PEER_SESSION_FRAME_MAX 4096   /* a SASL answer */

struct peer_session {
	const struct peer_sec *sec;
	struct tls_conn *tls;           /* NULL: SASL_PLAINTEXT */
	struct sasl_client sasl;
	int state;
	int64_t lifetime_ms;            /* the last SaslAuthenticate's SessionLifetimeMs (0: none) */
	int32_t corr;
	char error[200];
	uint64_t tls_in, tls_out;       /* plaintext through OpenSSL's record layer after the handshakes */
	uint32_t in_len, out_len, out_off;
	uint8_t in[PEER_SESSION_FRAME_MAX];    /* plaintext received before READY */
	uint8_t out[PEER_SESSION_FRAME_MAX];   /* SASL frames to send (no TLS) */
};

/* A session to `host` (the other broker's registered address); NULL
 * without memory. Heap: one per connection made, rare. */
struct peer_session *peer_session_create(const struct peer_sec *sec, const char *host);
void peer_session_destroy(struct peer_session *s);

/* Where the next receive lands, and its room. */
uint8_t *peer_session_rx(struct peer_session *s, uint32_t *cap);
/* n bytes were received into peer_session_rx. 0 or -EPROTO. */
int peer_session_feed(struct peer_session *s, uint32_t n);
/* Go on with the handshakes: 1 ready (frames may go), 0 not yet (send what
 * peer_session_tx gives, receive), -EPROTO / -EACCES failed (why:
 * peer_session_error). */
int peer_session_step(struct peer_session *s);
/* Bytes to send now (0: none); they stay until peer_session_sent. */
uint32_t peer_session_tx(struct peer_session *s, const uint8_t **buf);
void peer_session_sent(struct peer_session *s, uint32_t n);

/* Ready and on TLS: the caller's frames go through these. */
static inline int peer_session_tls(const struct peer_session *s)
{
	return s && s->tls && s->state == PEER_SESSION_READY;
}
/* Encrypt len bytes (all of them: 0, or -EPROTO). */
int peer_session_write(struct peer_session *s, const uint8_t *buf, uint32_t len);
/* Decrypted bytes into buf: > 0, 0 needs more, -EPROTO / -EPIPE. */
int peer_session_read(struct peer_session *s, uint8_t *buf, uint32_t cap);
const char *peer_session_error(const struct peer_session *s);

/* KIP-368: the session's lifetime the other broker gave at the last
 * authentication, in ms (0: it never ends, or no SASL). */
static inline int64_t peer_session_lifetime_ms(const struct peer_session *s)
{
	return s && s->state == PEER_SESSION_READY ? s->lifetime_ms : 0;
}
/* Authenticate again on the connection (KIP-368): only READY with SASL and
 * nothing of the caller's in flight; then step as at the start until
 * peer_session_step says 1 again. 0, or -EINVAL (not READY, no SASL). */
int peer_session_reauth(struct peer_session *s);

#endif
