/* dataplane/tls.h — TLS for the SSL listeners, with OpenSSL 3 on memory
 * BIOs: the connection (dataplane/conn.c) receives and sends ciphertext
 * with its ordinary io_uring operations and hands it to and takes it from
 * here; the handshake goes on as bytes arrive, so it never blocks the
 * shard. After the handshake the record layer stays OpenSSL's (this
 * kernel has no kTLS: see docs/security.md); tls_ktls_probe says whether
 * the kernel could take it.
 *
 * Threads: a struct tls_server (one per SSL listener) and a struct
 * tls_client (the inter-broker listener's client side) are made by main at
 * start-up (before the shards serve) and reloaded by main (SIGHUP) or the
 * control thread (the admin endpoint's POST /v1/tls/reload, and a
 * listener's ssl.* keys changed at run time: tls_server_reconf), one at a time
 * each (a second at the same moment is refused, -EBUSY): a reload swaps
 * the SSL_CTX; a connection's thread (a shard, or the control thread for
 * its inter-broker requests) takes the current one when it makes its SSL,
 * inside a window counted in the server or client (an atomic counter
 * around the load and SSL_new, whose SSL keeps its own reference), and the
 * reload frees the replaced context's reference once it has seen that
 * window empty, so no thread ever holds a freed one and reloads are
 * unbounded. A struct tls_conn belongs to the thread of its connection
 * (@thread shard or ctl), all of it.
 * Owns: a server or client its conf (copied) and its current SSL_CTX
 * reference; a tls_conn its SSL (with both BIOs) and
 * its ciphertext buffers.
 * Errors: 0/count or -errno, with err naming the key or file at start.
 */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>   /* struct msghdr */
#include <sys/uio.h>

/* What an SSL listener needs, as its config keys give it (strings are
 * copied). A PEM item is either PEM text (Kafka's
 * ssl.keystore.certificate.chain, ssl.keystore.key,
 * ssl.truststore.certificates) or a path to a PEM file. */
struct tls_conf {
	const char *keystore_location;  /* ssl.keystore.location: chain and key in one file, or "" */
	const char *cert_chain;         /* ssl.keystore.certificate.chain (text or file), or "" */
	const char *key;                /* ssl.keystore.key (text or file), or "" */
	const char *key_password;       /* ssl.key.password, or "" */
	const char *truststore;         /* ssl.truststore.location or .certificates, or "" */
	int client_auth;                /* ssl.client.auth: 0 none, 1 requested, 2 required */
	int tls12, tls13;               /* ssl.enabled.protocols */
	const char *cipher_suites;      /* ssl.cipher.suites (IANA or OpenSSL names, comma-separated), or "" */
	const char *principal_rules;    /* ssl.principal.mapping.rules */
	int allow_dn_changes;           /* ssl.allow.dn.changes (a keystore changed at run time) */
	int allow_san_changes;          /* ssl.allow.san.changes */
};

enum tls_client_auth { TLS_CLIENT_AUTH_NONE, TLS_CLIENT_AUTH_REQUESTED, TLS_CLIENT_AUTH_REQUIRED };

struct tls_server;
struct tls_client;
struct tls_conn;

/* OpenSSL's pem_password_cb giving the password u (a NUL-terminated
 * string) for an encrypted PEM key: the broker's keystore and sluicectl's
 * client key. Any thread. */
int tls_pem_password_cb(char *buf, int size, int rw, void *u);

/* @thread main. Load the certificates (a bad one: -EINVAL, err naming the
 * key and file). */
int tls_server_create(const struct tls_conf *conf, struct tls_server **out, char *err, size_t errlen);
/* @thread main or control. Read the certificate, key and trust files again; new
 * connections use them, open ones keep theirs. On failure the old ones
 * stay. Returns 0 or -errno with err. */
int tls_server_reload(struct tls_server *s, char *err, size_t errlen);
/* A listener's keystore and truststore changed at run time (Kafka's
 * dynamic listener.name.<l>.ssl.* keys, control/listeners.h): the
 * keystore location or chain and key, the key's password and the
 * truststore of next (the rest of next is not read: protocols, suites,
 * client authentication and principal rules stay the server's).
 * tls_server_check: whether they load (a context made and freed) and pass
 * Kafka's checks of a changed store (the certificate keeps its subject and
 * subjectAltNames unless ssl.allow.dn.changes / ssl.allow.san.changes; no
 * keystore added or removed; no truststore added to a listener without
 * one), 0 or -EINVAL with err naming the key and file or why (never the
 * password);
 * tls_server_reconf: they replace the server's and a new context is
 * swapped in as a reload does (connections made after use it, open ones
 * keep theirs; later reloads reread the new files), or on failure nothing
 * changes. @thread control (a reload at the same moment: -EBUSY) */
int tls_server_check(struct tls_server *s, const struct tls_conf *next, char *err, size_t errlen);
int tls_server_reconf(struct tls_server *s, const struct tls_conf *next, char *err, size_t errlen);
/* 1 when next's stores are the ones the server has (the same keys'
 * values, not the files' contents). @thread control (the stores' writer) */
int tls_server_same_stores(const struct tls_server *s, const struct tls_conf *next);
/* Reloads done, a tls_server_reconf among them (any thread, relaxed). */
uint64_t tls_server_reloads(const struct tls_server *s);
/* @thread main, after the shards stopped. */
void tls_server_destroy(struct tls_server *s);

/* @thread main. The client side, for this broker's connections to others
 * on an SSL inter-broker listener (dataplane/peer_session.h): the
 * truststore (needed: -EINVAL naming it), and the keystore when set (for
 * ssl.client.auth); the protocols and suites of conf (strings copied).
 * Shared by every thread once made. */
int tls_client_create(const struct tls_conf *conf, struct tls_client **out, char *err, size_t errlen);
/* @thread main or control. Read the keystore and truststore files again;
 * connections made after use them, open ones keep theirs. On failure the
 * old ones stay. 0 or -errno with err. */
int tls_client_reload(struct tls_client *c, char *err, size_t errlen);
/* The client side's tls_server_check / tls_server_reconf (the
 * inter-broker listener's stores changed at run time): the truststore
 * needed. @thread control */
int tls_client_check(struct tls_client *c, const struct tls_conf *next, char *err, size_t errlen);
int tls_client_reconf(struct tls_client *c, const struct tls_conf *next, char *err, size_t errlen);
/* The inter-broker listener's change checked as Kafka checks it: a
 * handshake (in memory, no hostname) of its current server with a client
 * of next's stores, and of a server of next's stores with its current
 * client, so that the node still trusts itself both ways (a CA is added to
 * the truststores before certificates of it are used). 0 or -EINVAL with
 * err saying which and why. @thread control */
int tls_pair_check(struct tls_server *s, struct tls_client *c, const struct tls_conf *next, char *err,
		   size_t errlen);
/* Reloads done, a tls_client_reconf among them (any thread, relaxed). */
uint64_t tls_client_reloads(const struct tls_client *c);
/* @thread main, after every thread that connects stopped. */
void tls_client_destroy(struct tls_client *c);

/* Whether the kernel has the TLS upper-layer protocol (kTLS): 0 yes, or
 * -errno (ENOENT: the kernel was built without CONFIG_TLS). */
int tls_ktls_probe(void);

/* Parse ssl.principal.mapping.rules (-EINVAL, err naming the rule). */
int tls_principal_rules_check(const char *rules, char *err, size_t errlen);
/* Map a subject DN ("CN=a,O=b", RFC 2253) through the rules into out:
 * 0, or -ENOENT when no rule matches (the connection is refused, as
 * Kafka does). */
int tls_principal_map(const char *rules, const char *dn, char *out, size_t outlen);
/* A certificate's principal ("User:" and its subject DN, RFC 2253,
 * through the rules) into out: 0, -ENOENT when no rule matches, -ENOMEM.
 * x509: an OpenSSL X509 *. Any thread (the listeners' and the admin
 * endpoint's). */
int tls_cert_principal(const char *rules, const void *x509, char *out, size_t outlen);

/* ---- a connection's TLS (@thread shard) ------------------------------- */

#define TLS_RX_SIZE (17u * 1024)      /* one receive of ciphertext */
#define TLS_TX_SIZE (64u * 1024)      /* ciphertext taken per send */

/* The server side of an accepted connection; NULL without memory. */
struct tls_conn *tls_conn_new(struct tls_server *s);
/* The client side of a connection to `host` (an address: its certificate
 * must name it), on the thread of that connection; NULL without memory. The
 * rest of the calls below are the same for both sides; a client's first
 * tls_conn_read writes its ClientHello. */
struct tls_conn *tls_conn_new_client(struct tls_client *c, const char *host);
void tls_conn_free(struct tls_conn *t);
/* Where the next receive of ciphertext lands (TLS_RX_SIZE bytes). */
uint8_t *tls_conn_rx(struct tls_conn *t);
/* n bytes of ciphertext were received into tls_conn_rx: take them. */
int tls_conn_feed(struct tls_conn *t, uint32_t n);
/* Decrypt into buf (cap bytes, > 0), going on with the handshake as
 * needed. Returns the plaintext bytes (> 0); 0: it needs more
 * ciphertext; -EPIPE: the peer closed the session (close_notify);
 * -EPROTO: a handshake or record failure (the connection closes). */
int tls_conn_read(struct tls_conn *t, uint8_t *buf, uint32_t cap);
/* Encrypt up to `max` bytes of plaintext from iov (advancing it past
 * what was taken, *left lessened). Returns the plaintext bytes taken or
 * -EPROTO. */
int tls_conn_write(struct tls_conn *t, struct msghdr *msg, size_t *left, size_t max);
/* Ciphertext waiting to be sent: *buf and its length (0: none). The
 * bytes stay until tls_conn_sent. */
uint32_t tls_conn_tx(struct tls_conn *t, const uint8_t **buf);
/* n bytes of what tls_conn_tx gave were sent. */
void tls_conn_sent(struct tls_conn *t, uint32_t n);
/* The handshake is over: 1 the first time it is seen over (the caller
 * counts it), then 0. */
int tls_conn_established(struct tls_conn *t);
/* The client's principal ("User:..." from its certificate through
 * ssl.principal.mapping.rules; "User:ANONYMOUS" without one) once
 * established. */
const char *tls_conn_principal(const struct tls_conn *t);
/* Why the last failure happened (OpenSSL's reason), for a counter or log. */
const char *tls_conn_error(const struct tls_conn *t);

#endif
