/* control/admin_tls.c — the admin endpoint's TLS on libmicrohttpd's
 * GnuTLS (see admin_tls.h). */
#include "control/admin_tls.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>

#include "control/config.h"
#include "dataplane/tls.h"

#define ADMIN_CHAIN_MAX 16

/* One identity: the chain and key as GnuTLS hands them to a handshake
 * (which keeps pointers to them, not copies, for its session's life). */
struct admin_cert {
	struct admin_cert *prev;      /* served before; a session may still hold it */
	unsigned conns;               /* open connections that started while this was current */
	gnutls_pcert_st pcert[ADMIN_CHAIN_MAX];
	unsigned npcert;
	gnutls_privkey_t key;
};

/* @thread ctl, all of it. Invariant: a connection that started while
 * certificate C was current holds C or a newer one (its handshake takes
 * the current one, and certificates only get newer), so C and every newer
 * one are in use while C->conns > 0; the oldest kept certificate is freed
 * once it is not current and its conns is 0 (prune), which bounds what is
 * kept by the reloads since the oldest open connection started. */
static struct admin_cert *cur;
static int client_auth;           /* ADMIN_CLIENT_* */
static gnutls_x509_trust_list_t trust;   /* the CAs client certificates chain to; reread with cur */

/* A PEM item as the ssl.keystore.* keys give it: PEM text, or the path
 * of a PEM file, read whole into *out (heap, NUL-terminated). */
static int pem_read(const char *key, const char *item, char **out, char *err, size_t errlen)
{
	FILE *f;
	long n;

	*out = NULL;
	if (!strncmp(item, "-----BEGIN", 10))
		return (*out = strdup(item)) ? 0 : -ENOMEM;
	if (!(f = fopen(item, "r"))) {
		snprintf(err, errlen, "%s: cannot read %s: %s", key, item, strerror(errno));
		return -EINVAL;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(*out = calloc(1, (size_t)n + 1)) || fread(*out, 1, (size_t)n, f) != (size_t)n) {
		snprintf(err, errlen, "%s: cannot read %s", key, item);
		fclose(f);
		free(*out);
		*out = NULL;
		return -EINVAL;
	}
	fclose(f);
	return 0;
}

static void pem_free(char *p)
{
	if (p) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
}

/* The broker's certificate chain and key for HTTPS (admin.ssl.enabled),
 * the ones of the SSL listeners: ssl.keystore.location (both in one
 * file: GnuTLS takes the certificates and the key out of it), or
 * ssl.keystore.certificate.chain and ssl.keystore.key. */
static int keystore_pem(const struct config *cfg, char **cert, char **key, char *err, size_t errlen)
{
	const char *ks = config_str(cfg, "ssl.keystore.location");
	const char *ch = config_str(cfg, "ssl.keystore.certificate.chain"), *k = config_str(cfg, "ssl.keystore.key");
	int rc;

	*cert = *key = NULL;
	if (*ks) {
		if ((rc = pem_read("ssl.keystore.location", ks, cert, err, errlen)) < 0)
			return rc;
		if (!(*key = strdup(*cert)))
			return -ENOMEM;
		return 0;
	}
	if (!*ch || !*k) {
		snprintf(err, errlen, "admin.ssl.enabled: needs the broker's certificate and key: ssl.keystore.location, "
			 "or ssl.keystore.certificate.chain with ssl.keystore.key");
		return -EINVAL;
	}
	if ((rc = pem_read("ssl.keystore.certificate.chain", ch, cert, err, errlen)) < 0 ||
	    (rc = pem_read("ssl.keystore.key", k, key, err, errlen)) < 0)
		return rc;
	return 0;
}

static void cert_free(struct admin_cert *c)
{
	for (unsigned i = 0; i < c->npcert; i++)
		gnutls_pcert_deinit(&c->pcert[i]);
	if (c->key)
		gnutls_privkey_deinit(c->key);
	free(c);
}

static int cert_load(const struct config *cfg, struct admin_cert **out, char *err, size_t errlen)
{
	char *cert = NULL, *key = NULL;
	const char *pw = config_str(cfg, "ssl.key.password");
	struct admin_cert *c = NULL;
	gnutls_datum_t cd, kd;
	int rc;

	*out = NULL;
	if ((rc = keystore_pem(cfg, &cert, &key, err, errlen)) < 0)
		goto out;
	if (!(c = calloc(1, sizeof(*c)))) {
		rc = -ENOMEM;
		goto out;
	}
	cd.data = (unsigned char *)cert;
	cd.size = (unsigned)strlen(cert);
	kd.data = (unsigned char *)key;
	kd.size = (unsigned)strlen(key);
	c->npcert = ADMIN_CHAIN_MAX;
	if ((rc = gnutls_pcert_list_import_x509_raw(c->pcert, &c->npcert, &cd, GNUTLS_X509_FMT_PEM, 0)) < 0) {
		c->npcert = 0;
		snprintf(err, errlen, "admin.ssl.enabled: the certificate chain (ssl.keystore.*) does not load: %s",
			 gnutls_strerror(rc));
		rc = -EINVAL;
		goto out;
	}
	if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
	    (rc = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, *pw ? pw : NULL, 0)) < 0) {
		snprintf(err, errlen, "admin.ssl.enabled: the private key (ssl.keystore.*, ssl.key.password) does not "
			 "load: %s", gnutls_strerror(rc));
		rc = -EINVAL;
		goto out;
	}
	*out = c;
	c = NULL;
	rc = 0;
out:
	if (c)
		cert_free(c);
	pem_free(cert);
	pem_free(key);
	return rc;
}

/* The trusted CAs' PEM text (ssl.truststore.location or
 * ssl.truststore.certificates) into *pem (heap; free it): 0, or -errno. */
static int trust_pem(const struct config *cfg, char **pem, char *err, size_t errlen)
{
	const char *loc = config_str(cfg, "ssl.truststore.location");
	const char *certs = config_str(cfg, "ssl.truststore.certificates");

	*pem = NULL;
	if (*loc)
		return pem_read("ssl.truststore.location", loc, pem, err, errlen);
	if (*certs)
		return (*pem = strdup(certs)) ? 0 : -ENOMEM;
	snprintf(err, errlen, "admin.ssl.client.auth: needs the CAs client certificates chain to: "
		 "ssl.truststore.location or ssl.truststore.certificates");
	return -EINVAL;
}

static int trust_load(const struct config *cfg, gnutls_x509_trust_list_t *out, char *err, size_t errlen)
{
	gnutls_x509_trust_list_t t;
	gnutls_datum_t d;
	char *pem;
	int rc;

	*out = NULL;
	if ((rc = trust_pem(cfg, &pem, err, errlen)) < 0)
		return rc;
	if (gnutls_x509_trust_list_init(&t, 0) < 0) {
		free(pem);
		return -ENOMEM;
	}
	d.data = (unsigned char *)pem;
	d.size = (unsigned)strlen(pem);
	rc = gnutls_x509_trust_list_add_trust_mem(t, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
	free(pem);
	if (rc <= 0) {
		gnutls_x509_trust_list_deinit(t, 1);
		snprintf(err, errlen, "admin.ssl.client.auth: no CA certificate in ssl.truststore.*%s%s",
			 rc < 0 ? ": " : "", rc < 0 ? gnutls_strerror(rc) : "");
		return -EINVAL;
	}
	*out = t;
	return 0;
}

/* Free the oldest certificates no connection may hold (see cur). */
static void prune(void)
{
	for (;;) {
		struct admin_cert **link = &cur, *oldest;

		while (*link && (*link)->prev)
			link = &(*link)->prev;
		oldest = *link;
		if (!oldest || oldest == cur || oldest->conns)
			return;
		*link = NULL;
		cert_free(oldest);
	}
}

int admin_tls_load(const struct config *cfg, char *err, size_t errlen)
{
	const char *ca = config_str(cfg, "admin.ssl.client.auth");
	int rc;

	client_auth = !strcmp(ca, "required") ? ADMIN_CLIENT_REQUIRED
		    : !strcmp(ca, "requested") ? ADMIN_CLIENT_REQUESTED : ADMIN_CLIENT_NONE;
	if ((rc = cert_load(cfg, &cur, err, errlen)) < 0)
		return rc;
	if (client_auth != ADMIN_CLIENT_NONE && (rc = trust_load(cfg, &trust, err, errlen)) < 0)
		return rc;   /* the caller's admin_tls_fini frees cur */
	return 0;
}

int admin_tls_reload(const struct config *cfg, char *err, size_t errlen)
{
	gnutls_x509_trust_list_t t = NULL;
	struct admin_cert *c;
	int rc = cert_load(cfg, &c, err, errlen);

	if (rc < 0)
		return rc;
	if (client_auth != ADMIN_CLIENT_NONE && (rc = trust_load(cfg, &t, err, errlen)) < 0) {
		cert_free(c);
		return rc;
	}
	c->prev = cur;
	cur = c;
	if (t) {
		/* checks run within a callback of this thread: none holds it now */
		gnutls_x509_trust_list_deinit(trust, 1);
		trust = t;
	}
	prune();
	return 0;
}

void admin_tls_fini(void)
{
	while (cur) {
		struct admin_cert *p = cur->prev;

		cert_free(cur);
		cur = p;
	}
	if (trust)
		gnutls_x509_trust_list_deinit(trust, 1);
	trust = NULL;
}

void *admin_tls_conn_start(void)
{
	prune();   /* those whose last connection closed earlier (its session is gone now) */
	if (cur)
		cur->conns++;
	return cur;
}

void admin_tls_conn_end(void *started)
{
	struct admin_cert *c = started;

	if (c)
		c->conns--;   /* freed by a later prune: GnuTLS may still clear the session */
}

unsigned admin_tls_held(void)
{
	unsigned n = 0;

	for (struct admin_cert *c = cur; c; c = c->prev)
		n++;
	return n;
}

/* The peer's certificate chain against the trusted CAs (read again on each
 * reload): 0 trusted, 1 none sent, -EACCES not trusted. */
static int peer_verify(gnutls_session_t s)
{
	gnutls_x509_crt_t crts[ADMIN_CHAIN_MAX];
	const gnutls_datum_t *peers;
	unsigned n = 0, k = 0, status = 0;
	int rc = -1;

	if (!(peers = gnutls_certificate_get_peers(s, &n)) || !n)
		return 1;
	if (!trust || n > ADMIN_CHAIN_MAX)
		return -EACCES;
	for (; k < n; k++)
		if (gnutls_x509_crt_init(&crts[k]) < 0)
			break;
		else if (gnutls_x509_crt_import(crts[k], &peers[k], GNUTLS_X509_FMT_DER) < 0) {
			gnutls_x509_crt_deinit(crts[k]);
			break;
		}
	if (k == n)
		rc = gnutls_x509_trust_list_verify_crt(trust, crts, n, 0, &status, NULL);
	while (k)
		gnutls_x509_crt_deinit(crts[--k]);
	return rc >= 0 && !status ? 0 : -EACCES;
}

/* admin.ssl.client.auth=required: the handshake fails without a
 * certificate the trusted CAs vouch for. */
static int verify_cb(gnutls_session_t s)
{
	return peer_verify(s) == 0 ? 0 : -1;
}

int admin_tls_client_auth(void)
{
	return client_auth;
}

/* Each handshake asks for the server's certificate here (after the
 * ClientHello, before the server's Certificate and CertificateRequest):
 * the current one is given, and a client certificate asked for: with
 * admin.ssl.client.auth=required it is insisted on and checked in the
 * handshake against the trusted CAs of this file (none, or one of another
 * CA, fails it); with requested admin_tls_peer checks it at the request
 * (with verification in the handshake, GnuTLS fails a handshake that
 * brings no certificate). libmicrohttpd is given no trusted CAs: its
 * GnuTLS credentials are made once, at the start, and could not be read
 * again. */
static int cert_cb(gnutls_session_t s, const gnutls_datum_t *req_ca, int nreq, const gnutls_pk_algorithm_t *pk,
		   int npk, gnutls_pcert_st **pcert, unsigned int *n, gnutls_privkey_t *key)
{
	(void)req_ca;
	(void)nreq;
	(void)pk;
	(void)npk;
	if (!cur)
		return -1;
	if (client_auth == ADMIN_CLIENT_REQUIRED) {
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
		gnutls_session_set_verify_function(s, verify_cb);
	} else if (client_auth == ADMIN_CLIENT_REQUESTED) {
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
	}
	*pcert = cur->pcert;
	*n = cur->npcert;
	*key = cur->key;
	return 0;
}

void *admin_tls_cert_callback(void)
{
	return (void *)(gnutls_certificate_retrieve_function2 *)cert_cb;
}

int admin_tls_peer(struct MHD_Connection *conn, const char *rules, char *out, size_t outlen, const char **why)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
	const gnutls_datum_t *peers;
	const unsigned char *p;
	unsigned n = 0;
	X509 *x;
	int rc;

	if (!s || client_auth == ADMIN_CLIENT_NONE || !(peers = gnutls_certificate_get_peers(s, &n)) || !n)
		return 0;
	if (peer_verify(s) != 0) {
		*why = "a client certificate the trusted CAs (ssl.truststore.*) do not vouch for";
		return -EACCES;
	}
	p = peers[0].data;
	if (!(x = d2i_X509(NULL, &p, (long)peers[0].size))) {
		*why = "a client certificate that does not parse";
		return -EACCES;
	}
	rc = tls_cert_principal(rules, x, out, outlen);
	X509_free(x);
	if (rc < 0) {
		*why = "a client certificate no ssl.principal.mapping.rules rule maps";
		return -EACCES;
	}
	return 1;
}
