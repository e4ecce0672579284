/* dataplane/scram_client.h — the client side of SCRAM-SHA-256 and
 * SCRAM-SHA-512 (RFC 5802, 7677), as Kafka's SaslAuthenticate carries it:
 * client-first, client-final with the proof, and the check of the
 * server's signature (a server that does not know the password is not
 * believed). Pure steps over caller buffers, no I/O, built on the
 * primitives the server side uses (dataplane/scram.h); sluicectl
 * (control/sluicectl_client.c) drives it over its blocking socket.
 *
 * Thread: a struct scram_client belongs to its caller (@thread any).
 * Owns: nothing beyond its struct (fixed buffers; scram_client_fini
 * wipes the keys).
 * Errors: -EINVAL (a name or message too long), -EPROTO (a server message
 * that does not parse, or a nonce that is not ours), -EACCES (the
 * server's signature does not hold), -EIO (no random bytes).
 */
#ifndef SLUICE_SCRAM_CLIENT_H
#define SLUICE_SCRAM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/scram.h"

struct scram_client {
	int type;                       /* enum sasl_scram_type */
	char nonce[64];                 /* ours */
	char bare[600];                 /* client-first-bare */
	size_t bare_len;
	uint8_t server_sig[SCRAM_KEY_MAX];  /* expected in server-final */
};

/* Start: the client-first message for user (escaped as saslname) into
 * out (*outlen bytes). nonce: NULL for a fresh random one (a test gives
 * its own). 0 or -errno. */
int scram_client_first(struct scram_client *c, int type, const char *user, const char *nonce, char *out, size_t cap,
		       size_t *outlen);
/* The server-first message in: the client-final message (with the
 * proof made from password) out. 0 or -errno (why says what). */
int scram_client_final(struct scram_client *c, const char *password, size_t pwlen, const char *in, size_t len,
		       char *out, size_t cap, size_t *outlen, char *why, size_t whylen);
/* The server-final message in: 0 when its signature is the one the
 * password gives; -EACCES (an "e=" error from the server, or a signature
 * that does not hold) or -EPROTO, why saying which. */
int scram_client_verify(struct scram_client *c, const char *in, size_t len, char *why, size_t whylen);
void scram_client_fini(struct scram_client *c);

#endif
