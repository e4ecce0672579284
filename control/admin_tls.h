/* control/admin_tls.h — the admin endpoint's TLS (admin.ssl.enabled) on
 * libmicrohttpd's GnuTLS: the broker's certificate and key handed to each
 * handshake from here (so SIGHUP renews them), the client certificate
 * asked for and checked (admin.ssl.client.auth), and a verified client
 * certificate's principal (ssl.principal.mapping.rules, through the
 * listeners' own code in dataplane/tls.c).
 *
 * Thread: ctl (@thread ctl): libmicrohttpd runs handshakes from the
 * control thread's loop. Owns: the certificates served, the current one
 * and those before it that a connection open since may hold (counted per
 * connection from its start, admin_tls_conn_start/end, and freed when
 * none may: reloads are unbounded), and the trusted CAs (read again with
 * the certificate).
 * One admin endpoint per process: the handshake callback has no argument,
 * so the current identity is this file's. Errors: 0 or -errno with err
 * naming the key.
 */
#ifndef SLUICE_ADMIN_TLS_H
#define SLUICE_ADMIN_TLS_H

#include <stddef.h>

struct config;
struct MHD_Connection;

enum { ADMIN_CLIENT_NONE, ADMIN_CLIENT_REQUESTED, ADMIN_CLIENT_REQUIRED };

/* The broker's certificate and key (ssl.keystore.*) loaded,
 * admin.ssl.client.auth read and, unless none, the CAs client certificates
 * must chain to (ssl.truststore.*): 0, or -errno with err (then
 * admin_tls_fini). */
int admin_tls_load(const struct config *cfg, char *err, size_t errlen);
/* The handshake callback for MHD_OPTION_HTTPS_CERT_CALLBACK. */
void *admin_tls_cert_callback(void);
int admin_tls_client_auth(void);
/* The connection's client certificate: 1 with its principal in out
 * (verified against the trusted CAs, mapped), 0 without one, -EACCES
 * with why (not trusted, no rule maps it). */
int admin_tls_peer(struct MHD_Connection *conn, const char *rules, char *out, size_t outlen, const char **why);
/* SIGHUP and POST /v1/tls/reload: the certificate, key and trusted CAs
 * read again (0), or -errno with err and the previous ones kept. */
int admin_tls_reload(const struct config *cfg, char *err, size_t errlen);
void admin_tls_fini(void);

/* libmicrohttpd's MHD_CONNECTION_NOTIFY_STARTED and _CLOSED: a connection
 * began (what it returns goes to admin_tls_conn_end) and ended. */
void *admin_tls_conn_start(void);
void admin_tls_conn_end(void *started);
/* Certificates held: the current one and those open connections may hold. */
unsigned admin_tls_held(void);

#endif
