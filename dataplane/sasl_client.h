/* dataplane/sasl_client.h — the client side of SASL PLAIN (RFC 4616) and
 * SCRAM-SHA-256/512 (RFC 5802, 7677) as one stepper: the messages a broker
 * sends to authenticate itself to another (replication and the
 * inter-broker requests on a SASL listener: dataplane/peer_session.h),
 * with the credentials of its own JAAS config (Kafka's
 * listener.name.<listener>.<mechanism>.sasl.jaas.config username and
 * password). CPU work only, no I/O: each step runs where its connection
 * lives (a shard, or the control thread), on fixed-size buffers. SCRAM's
 * steps are dataplane/scram_client.h's (shared with sluicectl); this adds
 * PLAIN's one message and the turn-taking.
 *
 * Thread: a struct sasl_client belongs to its connection's thread.
 * Owns: nothing beyond its struct.
 * Errors: see sasl_client_step.
 */
#ifndef SLUICE_SASL_CLIENT_H
#define SLUICE_SASL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/sasl.h"
#include "dataplane/scram_client.h"

#define SASL_PASSWORD_MAX 256

enum { SASL_CLIENT_FIRST, SASL_CLIENT_FINAL, SASL_CLIENT_VERIFY, SASL_CLIENT_DONE, SASL_CLIENT_FAILED };

struct sasl_client {
	int state;
	int mech;                         /* enum sasl_mech */
	char user[SASL_USER_MAX];
	char password[SASL_PASSWORD_MAX];
	struct scram_client scram;        /* SCRAM's nonce, client-first-bare, expected signature */
};

/* A login's username and password from a JAAS config (Kafka's
 * `... required username="u" password="p";`): 0, or -EINVAL when either
 * is missing or too long (err never quotes the password). @thread any */
int sasl_jaas_login(const char *jaas, char *user, size_t ulen, char *password, size_t plen, char *err,
		    size_t errlen);

/* Start with mechanism mech (one of enum sasl_mech). */
void sasl_client_init(struct sasl_client *c, int mech, const char *user, const char *password);
/* Wipe the password and the keys. */
void sasl_client_fini(struct sasl_client *c);

/* The next message. in: the server's last one (ignored for the first).
 * Returns 1: out holds the message to send (*outlen bytes); 0: done (the
 * server's final message checked: SCRAM's server signature); -EACCES: the
 * server refused, or its signature does not hold; -EPROTO: its message
 * does not parse, or its nonce is not ours; -EINVAL: a message too long;
 * -EIO: no random bytes. why says what on failure. */
int sasl_client_step(struct sasl_client *c, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
		     size_t *outlen, char *why, size_t whylen);

#endif
