/* bench/handshake.h — the handshake-rate client of `sluice-bench security`
 * (bench_security.c): new connections, each taken to an answered
 * ApiVersions and closed, from N threads at once; over plain TCP, over TLS
 * (OpenSSL 3, a full handshake each: no session resumption), or over TLS
 * then SASL SCRAM-SHA-512 (dataplane/scram_client.h) before the
 * ApiVersions. The frames (ApiVersions v0, SaslHandshake v1,
 * SaslAuthenticate v0) are written by hand: librdkafka costs far more per
 * connection than the broker does.
 *
 * Thread: handshake_run from the benchmark's main thread; it starts and
 * joins its own threads, which share only the (read-only) target and
 * their own slot of the result. Errors: -errno.
 */
#ifndef SLUICE_BENCH_HANDSHAKE_H
#define SLUICE_BENCH_HANDSHAKE_H

#include <openssl/ssl.h>
#include <stdint.h>

struct handshake_target {
	int port;                   /* on 127.0.0.1 */
	SSL_CTX *ctx;               /* NULL: plain TCP; borrowed for the run */
	const char *user;           /* NULL: no SASL; else SCRAM-SHA-512 */
	const char *password;
};

struct handshake_result {
	uint64_t conns;             /* completed: the ApiVersions answer read */
	uint64_t errors;            /* connections that failed on the way */
	double seconds;
	char cipher[64];            /* the last TLS connection's suite */
	char version[16];           /* and protocol version */
	char first_error[200];
};

/* A client context trusting ca_file (PEM), TLS 1.2 and 1.3, the peer's
 * certificate checked; NULL on failure (said on stderr). */
SSL_CTX *handshake_ctx(const char *ca_file);
/* Connect, handshake, answer, close, for seconds, from nthreads threads
 * (at most 64). 0, or -errno when no connection completed at all. */
int handshake_run(const struct handshake_target *t, int nthreads, double seconds, struct handshake_result *r);

#endif
