/* control/admin_tls.h — the admin endpoint's TLS (admin.ssl.enabled) on
 * libmicrohttpd's GnuTLS: the broker's certificate and key handed to each
 * handshake from here (so SIGHUP renews them), the client certificate
 * asked for and checked (admin.ssl.client.auth), and a verified client
 * certificate's principal (ssl.principal.mapping.rules, through the
 * listeners' own code in dataplane/tls.c).
 *
 * Thread: ctl (@thread ctl): libmicrohttpd runs handshakes from the
 * control thread's loop. Owns: the certificates served, the current one
 * and those before it (a handshake may hold them; freed at the stop).
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

/* The broker's certificate and key (ssl.keystore.*) loaded, and
 * admin.ssl.client.auth read: 0, or -errno with err. */
int admin_tls_load(const struct config *cfg, char *err, size_t errlen);
/* The handshake callback for MHD_OPTION_HTTPS_CERT_CALLBACK. */
void *admin_tls_cert_callback(void);
int admin_tls_client_auth(void);
/* The trusted CAs' PEM text (ssl.truststore.location or
 * ssl.truststore.certificates) into *pem (heap; free it): 0, or -errno. */
int admin_tls_trust_pem(const struct config *cfg, char **pem, char *err, size_t errlen);
/* The connection's client certificate: 1 with its principal in out
 * (verified against the trusted CAs, mapped), 0 without one, -EACCES
 * with why (not trusted, no rule maps it). */
int admin_tls_peer(struct MHD_Connection *conn, const char *rules, char *out, size_t outlen, const char **why);
/* SIGHUP: the certificate and key read again (0), or -errno with err
 * and the previous ones kept. */
int admin_tls_reload(const struct config *cfg, char *err, size_t errlen);
void admin_tls_fini(void);

#endif
