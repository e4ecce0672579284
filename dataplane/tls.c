/* dataplane/tls.c — TLS for the SSL listeners on memory BIOs (OpenSSL 3).
 * See dataplane/tls.h. */
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <regex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "dataplane/tls.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

/* One reloadable SSL_CTX: main (SIGHUP) or the control thread (POST
 * /v1/tls/reload) swaps it, one reload at a time (a second at the same
 * moment is refused, -EBUSY); a connection's thread takes the current one
 * inside a window counted in taking (around the load and SSL_new, whose SSL
 * keeps its own reference), and the swap frees the replaced context's
 * reference once it has seen that window empty. */
struct tls_slot {
	SSL_CTX *ctx;                  /* current: seq-cst store by the reloader, load by connections */
	int taking;                    /* threads between loading ctx and their SSL_new's reference */
	int reloading;                 /* a reload is under way */
	uint64_t reloads;
};

struct tls_server {
	struct tls_conf conf;          /* strings owned (strdup) */
	struct tls_slot slot;
};

struct tls_client {
	struct tls_conf conf;          /* strings owned (strdup) */
	struct tls_slot slot;
};

struct tls_conn {
	SSL *ssl;
	BIO *rbio, *wbio;              /* ciphertext in (we write it), out (we read it) */
	const char *rules;             /* the server's ssl.principal.mapping.rules; NULL: a client */
	int established, counted;
	char principal[256];
	char error[128];
	uint32_t tx_len, tx_off;       /* ciphertext in tx being sent */
	uint8_t tx[TLS_TX_SIZE];
	uint8_t rx[TLS_RX_SIZE];
};

/* ---- the server's context (main thread) ------------------------------- */

static void ssl_err(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256];

	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errlen, "%s: %s", what, e ? buf : "failed");
	ERR_clear_error();
}

static int is_pem_text(const char *s)
{
	return !strncmp(s, "-----BEGIN", 10);
}

int tls_pem_password_cb(char *buf, int size, int rw, void *u)
{
	const char *pw = u;
	int n = (int)strlen(pw);

	(void)rw;
	if (n > size)
		n = size;
	memcpy(buf, pw, (size_t)n);
	return n;
}

/* A BIO over PEM text or a file. */
static BIO *pem_bio(const char *item)
{
	return is_pem_text(item) ? BIO_new_mem_buf(item, -1) : BIO_new_file(item, "r");
}

/* The certificate chain (first the leaf) from a keystore item into ctx. */
static int load_chain(SSL_CTX *ctx, const char *key, const char *item, char *err, size_t errlen)
{
	BIO *bio = pem_bio(item);
	X509 *x;
	int n = 0;

	if (!bio) {
		snprintf(err, errlen, "%s: cannot open %s: %s", key, item, strerror(errno));
		return -EINVAL;
	}
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		int ok = n == 0 ? SSL_CTX_use_certificate(ctx, x) : SSL_CTX_add1_chain_cert(ctx, x);

		X509_free(x);
		if (!ok) {
			BIO_free(bio);
			ssl_err(err, errlen, key);
			return -EINVAL;
		}
		n++;
	}
	ERR_clear_error();   /* the end of the file reads as an error */
	BIO_free(bio);
	if (!n) {
		snprintf(err, errlen, "%s: no PEM certificate in %s", key, is_pem_text(item) ? "the value" : item);
		return -EINVAL;
	}
	return 0;
}

static int load_key(SSL_CTX *ctx, const char *key, const char *item, const char *password, char *err,
		    size_t errlen)
{
	BIO *bio = pem_bio(item);
	EVP_PKEY *pk;

	if (!bio) {
		snprintf(err, errlen, "%s: cannot open %s: %s", key, item, strerror(errno));
		return -EINVAL;
	}
	pk = PEM_read_bio_PrivateKey(bio, NULL, tls_pem_password_cb, (void *)password);
	BIO_free(bio);
	if (!pk) {
		ssl_err(err, errlen, *password ? "ssl.keystore.key (with ssl.key.password)" : key);
		return -EINVAL;
	}
	if (!SSL_CTX_use_PrivateKey(ctx, pk) || !SSL_CTX_check_private_key(ctx)) {
		EVP_PKEY_free(pk);
		ssl_err(err, errlen, "the private key does not match the certificate");
		return -EINVAL;
	}
	EVP_PKEY_free(pk);
	return 0;
}

static int load_trust(SSL_CTX *ctx, const char *item, char *err, size_t errlen)
{
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();
	BIO *bio = pem_bio(item);
	X509 *x;
	int n = 0;

	if (!bio || !names) {
		BIO_free(bio);
		sk_X509_NAME_free(names);
		snprintf(err, errlen, "ssl.truststore: cannot open %s: %s", item, strerror(errno));
		return -EINVAL;
	}
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		X509_STORE_add_cert(st, x);
		sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(x)));
		X509_free(x);
		n++;
	}
	ERR_clear_error();
	BIO_free(bio);
	if (!n) {
		sk_X509_NAME_pop_free(names, X509_NAME_free);
		snprintf(err, errlen, "ssl.truststore: no PEM certificate in %s", is_pem_text(item) ? "the value" : item);
		return -EINVAL;
	}
	SSL_CTX_set_client_CA_list(ctx, names);   /* the CAs a client is asked for */
	return 0;
}

/* ssl.cipher.suites: Kafka names them as IANA does (TLS_ECDHE_RSA_WITH_
 * AES_128_GCM_SHA256), OpenSSL has names of its own (ECDHE-RSA-AES128-
 * GCM-SHA256); either is taken. TLS 1.3 suites have one name. */
static int set_ciphers(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
	char v12[2048] = "", v13[512] = "";
	const char *p = list;
	STACK_OF(SSL_CIPHER) *all;
	SSL *probe;

	if (!*list)
		return 0;
	/* every TLS 1.2 suite OpenSSL has, to look names up in */
	if (!SSL_CTX_set_cipher_list(ctx, "ALL:COMPLEMENTOFALL") || !(probe = SSL_new(ctx))) {
		ssl_err(err, errlen, "ssl.cipher.suites");
		return -EINVAL;
	}
	all = SSL_get_ciphers(probe);
	while (*p) {
		char name[128];
		size_t n = strcspn(p, ",");
		const char *os = NULL;

		while (n && isspace((unsigned char)*p)) {
			p++;
			n--;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(n < 127 ? n : 127), p);
		for (size_t e = strlen(name); e && isspace((unsigned char)name[e - 1]); e--)
			name[e - 1] = 0;
		p += n;
		if (*p == ',')
			p++;
		if (!*name)
			continue;
		for (int i = 0; i < sk_SSL_CIPHER_num(all); i++) {
			const SSL_CIPHER *c = sk_SSL_CIPHER_value(all, i);
			const char *std = SSL_CIPHER_standard_name(c);

			if ((std && !strcmp(std, name)) || !strcmp(SSL_CIPHER_get_name(c), name)) {
				os = SSL_CIPHER_get_name(c);
				if (!strcmp(SSL_CIPHER_get_version(c), "TLSv1.3")) {
					snprintf(v13 + strlen(v13), sizeof(v13) - strlen(v13), "%s%s", *v13 ? ":" : "", os);
					os = "";
				}
				break;
			}
		}
		if (!os) {
			SSL_free(probe);
			snprintf(err, errlen, "ssl.cipher.suites: unknown cipher suite '%s' (IANA names as Kafka's, "
				 "e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256)", name);
			return -EINVAL;
		}
		if (*os)
			snprintf(v12 + strlen(v12), sizeof(v12) - strlen(v12), "%s%s", *v12 ? ":" : "", os);
	}
	SSL_free(probe);
	/* a list of one version's suites only leaves the other version out */
	if (*v12 ? !SSL_CTX_set_cipher_list(ctx, v12) : !SSL_CTX_set_cipher_list(ctx, "DEFAULT")) {
		ssl_err(err, errlen, "ssl.cipher.suites");
		return -EINVAL;
	}
	if (!*v12)
		SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	if (!SSL_CTX_set_ciphersuites(ctx, v13)) {
		ssl_err(err, errlen, "ssl.cipher.suites");
		return -EINVAL;
	}
	if (!*v13)
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_get_min_proto_version(ctx) > SSL_CTX_get_max_proto_version(ctx) &&
	    SSL_CTX_get_max_proto_version(ctx)) {
		snprintf(err, errlen, "ssl.cipher.suites: no suite of a protocol in ssl.enabled.protocols");
		return -EINVAL;
	}
	return 0;
}

static int ctx_build(const struct tls_conf *c, SSL_CTX **out, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	int rc;

	if (!ctx) {
		ssl_err(err, errlen, "SSL_CTX_new");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, c->tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, c->tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
	/* no renegotiation (a client could make the server work for it);
	 * the record layer leaves a partially written buffer to us */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (*c->keystore_location) {
		rc = load_chain(ctx, "ssl.keystore.location", c->keystore_location, err, errlen);
		if (rc == 0)
			rc = load_key(ctx, "ssl.keystore.location", c->keystore_location, c->key_password, err, errlen);
	} else {
		rc = load_chain(ctx, "ssl.keystore.certificate.chain", c->cert_chain, err, errlen);
		if (rc == 0)
			rc = load_key(ctx, "ssl.keystore.key", c->key, c->key_password, err, errlen);
	}
	if (rc == 0 && *c->truststore)
		rc = load_trust(ctx, c->truststore, err, errlen);
	if (rc == 0)
		rc = set_ciphers(ctx, c->cipher_suites, err, errlen);
	if (rc < 0) {
		SSL_CTX_free(ctx);
		return rc;
	}
	if (c->client_auth != TLS_CLIENT_AUTH_NONE)
		SSL_CTX_set_verify(ctx,
				   SSL_VERIFY_PEER |
				   (c->client_auth == TLS_CLIENT_AUTH_REQUIRED ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
				   NULL);
	*out = ctx;
	return 0;
}

/* The client side's context: the truststore (needed), the keystore when
 * set (for a listener's ssl.client.auth: mutual TLS between brokers), the
 * protocols and suites. */
static int client_ctx_build(const struct tls_conf *c, SSL_CTX **out, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	int rc = 0;

	if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
		ssl_err(err, errlen, "SSL_CTX_new");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, c->tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, c->tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (*c->keystore_location) {
		rc = load_chain(ctx, "ssl.keystore.location", c->keystore_location, err, errlen);
		if (rc == 0)
			rc = load_key(ctx, "ssl.keystore.location", c->keystore_location, c->key_password, err, errlen);
	} else if (*c->cert_chain && *c->key) {
		rc = load_chain(ctx, "ssl.keystore.certificate.chain", c->cert_chain, err, errlen);
		if (rc == 0)
			rc = load_key(ctx, "ssl.keystore.key", c->key, c->key_password, err, errlen);
	}
	if (rc == 0)
		rc = load_trust(ctx, c->truststore, err, errlen);
	if (rc == 0)
		rc = set_ciphers(ctx, c->cipher_suites, err, errlen);
	if (rc < 0) {
		SSL_CTX_free(ctx);
		return rc;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	*out = ctx;
	return 0;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : ""); /* style: allow start-up */
}

/* A copy of conf whose strings are owned; 0 or -ENOMEM. */
static int conf_copy(struct tls_conf *to, const struct tls_conf *from)
{
	*to = *from;
	to->keystore_location = dup_or_empty(from->keystore_location);
	to->cert_chain = dup_or_empty(from->cert_chain);
	to->key = dup_or_empty(from->key);
	to->key_password = dup_or_empty(from->key_password);
	to->truststore = dup_or_empty(from->truststore);
	to->cipher_suites = dup_or_empty(from->cipher_suites);
	to->principal_rules = dup_or_empty(from->principal_rules && *from->principal_rules ?
					   from->principal_rules : "DEFAULT");
	return to->keystore_location && to->cert_chain && to->key && to->key_password && to->truststore &&
	       to->cipher_suites && to->principal_rules ? 0 : -ENOMEM;
}

static void conf_free(struct tls_conf *c)
{
	if (c->key_password)
		OPENSSL_cleanse((char *)c->key_password, strlen(c->key_password));
	if (c->key && is_pem_text(c->key))
		OPENSSL_cleanse((char *)c->key, strlen(c->key));
	free((char *)c->keystore_location);
	free((char *)c->cert_chain);
	free((char *)c->key);
	free((char *)c->key_password);
	free((char *)c->truststore);
	free((char *)c->cipher_suites);
	free((char *)c->principal_rules);
}

/* An SSL of the slot's current context, inside the window slot_swap waits
 * out before it frees a replaced one. NULL without memory. */
static SSL *slot_ssl_new(struct tls_slot *sl)
{
	SSL *ssl;

	__atomic_fetch_add(&sl->taking, 1, __ATOMIC_SEQ_CST);
	ssl = SSL_new(__atomic_load_n(&sl->ctx, __ATOMIC_SEQ_CST));
	__atomic_fetch_sub(&sl->taking, 1, __ATOMIC_RELEASE);
	return ssl;
}

/* Build a new context with build(conf) and swap it in; on failure the old
 * one stays. 0 or -errno with err. */
static int slot_reload(struct tls_slot *sl, const struct tls_conf *conf,
		       int (*build)(const struct tls_conf *, SSL_CTX **, char *, size_t), char *err, size_t errlen)
{
	SSL_CTX *ctx, *cur;
	int rc, idle = 0;

	if (!__atomic_compare_exchange_n(&sl->reloading, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		snprintf(err, errlen, "another reload is under way");
		return -EBUSY;
	}
	if ((rc = build(conf, &ctx, err, errlen)) == 0) {
		cur = sl->ctx;
		__atomic_store_n(&sl->ctx, ctx, __ATOMIC_SEQ_CST);
		/* A thread that loaded cur before the store may not have made
		 * its SSL (which takes its own reference) yet: wait until no
		 * thread is in that window. One seen empty after the store is
		 * enough: a thread entering later loads the new context. The
		 * window is one SSL_new, so this waits microseconds. */
		while (__atomic_load_n(&sl->taking, __ATOMIC_SEQ_CST))
			sched_yield();
		SSL_CTX_free(cur);     /* the slot's reference; open connections keep theirs */
		__atomic_fetch_add(&sl->reloads, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&sl->reloading, 0, __ATOMIC_RELEASE);
	return rc;
}

/* A certificate's subject, RFC 2253, into out. */
static void subject_of(X509 *x, char *out, size_t len)
{
	BIO *b = BIO_new(BIO_s_mem());
	int n = 0;

	*out = 0;
	if (!b)
		return;
	X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253);
	n = BIO_read(b, out, (int)len - 1);
	out[n > 0 ? n : 0] = 0;
	BIO_free(b);
}

/* Every subjectAltName of a is one of b's. */
static int sans_within(X509 *a, X509 *b)
{
	GENERAL_NAMES *na = X509_get_ext_d2i(a, NID_subject_alt_name, NULL, NULL);
	GENERAL_NAMES *nb = X509_get_ext_d2i(b, NID_subject_alt_name, NULL, NULL);
	int ok = 1;

	for (int i = 0; ok && na && i < sk_GENERAL_NAME_num(na); i++) {
		int found = 0;

		for (int j = 0; !found && nb && j < sk_GENERAL_NAME_num(nb); j++)
			found = !GENERAL_NAME_cmp(sk_GENERAL_NAME_value(na, i), sk_GENERAL_NAME_value(nb, j));
		ok = found;
	}
	GENERAL_NAMES_free(na);
	GENERAL_NAMES_free(nb);
	return ok;
}

/* Kafka's checks of a listener's stores changed at run time (its
 * SslFactory): the new certificate keeps the old one's subject
 * (ssl.allow.dn.changes) and every subjectAltName it had
 * (ssl.allow.san.changes); a keystore is neither added nor removed; a
 * truststore is not added to a listener that had none. 0 or -EINVAL. */
static int stores_compatible(const struct tls_conf *cur, const struct tls_conf *next, SSL_CTX *was, SSL_CTX *ctx,
			     char *err, size_t errlen)
{
	X509 *a = was ? SSL_CTX_get0_certificate(was) : NULL, *b = SSL_CTX_get0_certificate(ctx);
	char da[256], db[256];

	if (!a != !b) {
		snprintf(err, errlen, a ? "Cannot remove the SSL keystore from an existing listener for which a keystore "
			 "was configured" : "Cannot add SSL keystore to an existing listener for which no keystore was "
			 "configured");
		return -EINVAL;
	}
	if (!*cur->truststore && *next->truststore) {
		snprintf(err, errlen, "ssl.truststore: Cannot add SSL truststore to an existing listener for which no "
			 "truststore was configured");
		return -EINVAL;
	}
	if (!a)
		return 0;
	subject_of(a, da, sizeof(da));
	subject_of(b, db, sizeof(db));
	if (!cur->allow_dn_changes && X509_NAME_cmp(X509_get_subject_name(a), X509_get_subject_name(b)) &&
	    strcasecmp(da, db)) {
		snprintf(err, errlen, "ssl.keystore: Keystore DistinguishedName does not match: existing %.100s, new "
			 "%.100s (ssl.allow.dn.changes)", da, db);
		return -EINVAL;
	}
	if (!cur->allow_san_changes && !sans_within(a, b)) {
		snprintf(err, errlen, "ssl.keystore: Keystore SubjectAltNames do not match: the new certificate of %.100s "
			 "lacks some of the existing one's (ssl.allow.san.changes)", db);
		return -EINVAL;
	}
	return 0;
}

/* cur with the keystore and truststore of next (borrowed): what a
 * listener's dynamic ssl.* keys change; the protocols, suites, client
 * authentication and principal rules stay cur's. */
static struct tls_conf conf_with_stores(const struct tls_conf *cur, const struct tls_conf *next)
{
	struct tls_conf t = *cur;

	t.keystore_location = next->keystore_location ? next->keystore_location : "";
	t.cert_chain = next->cert_chain ? next->cert_chain : "";
	t.key = next->key ? next->key : "";
	t.key_password = next->key_password ? next->key_password : "";
	t.truststore = next->truststore ? next->truststore : "";
	return t;
}

/* Build a context from cur with next's stores and, when it loads, swap it
 * in and keep next's stores in cur (strings copied; the replaced ones
 * cleansed and freed), all under the slot's reload flag, so a reload on
 * another thread never reads a store string being replaced. On failure
 * the old context and stores stay. 0 or -errno with err. */
static int slot_reconf(struct tls_slot *sl, struct tls_conf *cur, const struct tls_conf *next,
		       int (*build)(const struct tls_conf *, SSL_CTX **, char *, size_t), char *err, size_t errlen)
{
	struct tls_conf t = conf_with_stores(cur, next), old;
	SSL_CTX *ctx, *was;
	int rc, idle = 0;

	if (!__atomic_compare_exchange_n(&sl->reloading, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		snprintf(err, errlen, "another reload is under way");
		return -EBUSY;
	}
	if ((rc = build(&t, &ctx, err, errlen)) == 0 && (rc = stores_compatible(cur, &t, sl->ctx, ctx, err, errlen)) < 0)
		SSL_CTX_free(ctx);
	if (rc == 0) {
		old = *cur;
		cur->keystore_location = dup_or_empty(t.keystore_location);
		cur->cert_chain = dup_or_empty(t.cert_chain);
		cur->key = dup_or_empty(t.key);
		cur->key_password = dup_or_empty(t.key_password);
		cur->truststore = dup_or_empty(t.truststore);
		if (!cur->keystore_location || !cur->cert_chain || !cur->key || !cur->key_password || !cur->truststore) {
			free((char *)cur->keystore_location);
			free((char *)cur->cert_chain);
			free((char *)cur->key);
			free((char *)cur->key_password);
			free((char *)cur->truststore);
			*cur = old;
			SSL_CTX_free(ctx);
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		} else {
			/* only the stores are old's own now */
			old.cipher_suites = NULL;
			old.principal_rules = NULL;
			conf_free(&old);
			was = sl->ctx;
			__atomic_store_n(&sl->ctx, ctx, __ATOMIC_SEQ_CST);
			while (__atomic_load_n(&sl->taking, __ATOMIC_SEQ_CST))
				sched_yield();   /* as slot_reload */
			SSL_CTX_free(was);
			__atomic_fetch_add(&sl->reloads, 1, __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&sl->reloading, 0, __ATOMIC_RELEASE);
	return rc;
}

/* Whether cur with next's stores builds a context (made and freed) that
 * stores_compatible takes, under the slot's reload flag (the current
 * context read). */
static int conf_check(struct tls_slot *sl, const struct tls_conf *cur, const struct tls_conf *next,
		      int (*build)(const struct tls_conf *, SSL_CTX **, char *, size_t), char *err, size_t errlen)
{
	struct tls_conf t = conf_with_stores(cur, next);
	SSL_CTX *ctx;
	int rc, idle = 0;

	if (!__atomic_compare_exchange_n(&sl->reloading, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		snprintf(err, errlen, "another reload is under way");
		return -EBUSY;
	}
	if ((rc = build(&t, &ctx, err, errlen)) == 0) {
		rc = stores_compatible(cur, &t, sl->ctx, ctx, err, errlen);
		SSL_CTX_free(ctx);
	}
	__atomic_store_n(&sl->reloading, 0, __ATOMIC_RELEASE);
	return rc;
}

/* One handshake between srv and cli over a BIO pair, in memory (no
 * hostname checked, as Kafka's validation): 0, or -EINVAL with why. */
static int handshake_pair(SSL *srv, SSL *cli, char *err, size_t errlen)
{
	BIO *a = NULL, *b = NULL;

	if (!BIO_new_bio_pair(&a, 0, &b, 0)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	SSL_set_bio(srv, a, a);
	SSL_set_bio(cli, b, b);
	SSL_set_accept_state(srv);
	SSL_set_connect_state(cli);
	for (int i = 0; i < 64; i++) {
		int rc = SSL_do_handshake(cli), rs = SSL_do_handshake(srv);
		int ec = rc == 1 ? 0 : SSL_get_error(cli, rc), es = rs == 1 ? 0 : SSL_get_error(srv, rs);

		if (rc == 1 && rs == 1)
			return 0;
		if ((ec && ec != SSL_ERROR_WANT_READ && ec != SSL_ERROR_WANT_WRITE) ||
		    (es && es != SSL_ERROR_WANT_READ && es != SSL_ERROR_WANT_WRITE)) {
			long v = SSL_get_verify_result(cli) != X509_V_OK ? SSL_get_verify_result(cli)
									  : SSL_get_verify_result(srv);

			ERR_clear_error();
			snprintf(err, errlen, "%s", v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake failed");
			return -EINVAL;
		}
	}
	snprintf(err, errlen, "the handshake did not finish");
	return -EINVAL;
}

int tls_client_create(const struct tls_conf *c, struct tls_client **out, char *err, size_t errlen)
{
	struct tls_client *cl;
	int rc;

	if (!*c->truststore) {
		snprintf(err, errlen, "ssl.truststore.location: an SSL inter-broker listener needs the CA certificates "
			 "other brokers' certificates are checked against");
		return -EINVAL;
	}
	if (!(cl = calloc(1, sizeof(*cl)))) /* style: allow start-up */
		return -ENOMEM;
	if ((rc = conf_copy(&cl->conf, c)) < 0 || (rc = client_ctx_build(&cl->conf, &cl->slot.ctx, err, errlen)) < 0) {
		tls_client_destroy(cl);
		return rc;
	}
	*out = cl;
	return 0;
}

int tls_client_reload(struct tls_client *cl, char *err, size_t errlen)
{
	return slot_reload(&cl->slot, &cl->conf, client_ctx_build, err, errlen);
}

int tls_client_check(struct tls_client *cl, const struct tls_conf *next, char *err, size_t errlen)
{
	if (!next->truststore || !*next->truststore) {
		snprintf(err, errlen, "ssl.truststore.location: an SSL inter-broker listener needs the CA certificates "
			 "other brokers' certificates are checked against");
		return -EINVAL;
	}
	return conf_check(&cl->slot, &cl->conf, next, client_ctx_build, err, errlen);
}

int tls_client_reconf(struct tls_client *cl, const struct tls_conf *next, char *err, size_t errlen)
{
	if (!next->truststore || !*next->truststore) {
		snprintf(err, errlen, "ssl.truststore.location: an SSL inter-broker listener needs the CA certificates "
			 "other brokers' certificates are checked against");
		return -EINVAL;
	}
	return slot_reconf(&cl->slot, &cl->conf, next, client_ctx_build, err, errlen);
}

uint64_t tls_client_reloads(const struct tls_client *cl)
{
	return __atomic_load_n(&cl->slot.reloads, __ATOMIC_RELAXED);
}

void tls_client_destroy(struct tls_client *cl)
{
	if (!cl)
		return;
	SSL_CTX_free(cl->slot.ctx);
	conf_free(&cl->conf);
	free(cl);
}

int tls_server_create(const struct tls_conf *conf, struct tls_server **out, char *err, size_t errlen)
{
	struct tls_server *s = calloc(1, sizeof(*s)); /* style: allow start-up */
	int rc;

	if (!s)
		return -ENOMEM;
	if ((rc = conf_copy(&s->conf, conf)) < 0 ||
	    (rc = tls_principal_rules_check(s->conf.principal_rules, err, errlen)) < 0 ||
	    (rc = ctx_build(&s->conf, &s->slot.ctx, err, errlen)) < 0) {
		tls_server_destroy(s);
		return rc;
	}
	*out = s;
	return 0;
}

int tls_server_reload(struct tls_server *s, char *err, size_t errlen)
{
	return slot_reload(&s->slot, &s->conf, ctx_build, err, errlen);
}

int tls_server_check(struct tls_server *s, const struct tls_conf *next, char *err, size_t errlen)
{
	return conf_check(&s->slot, &s->conf, next, ctx_build, err, errlen);
}

int tls_pair_check(struct tls_server *s, struct tls_client *cl, const struct tls_conf *next, char *err,
		   size_t errlen)
{
	struct tls_conf ts = conf_with_stores(&s->conf, next), tc = conf_with_stores(&cl->conf, next);
	SSL_CTX *ns = NULL, *nc = NULL;
	SSL *os = NULL, *oc = NULL, *s1 = NULL, *c1 = NULL;
	char why[256];
	int rc;

	if ((rc = ctx_build(&ts, &ns, err, errlen)) < 0 || (rc = client_ctx_build(&tc, &nc, err, errlen)) < 0)
		goto out;
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	/* the current contexts through the window reloads wait out */
	if (!(os = slot_ssl_new(&s->slot)) || !(oc = slot_ssl_new(&cl->slot)) || !(s1 = SSL_new(ns)) ||
	    !(c1 = SSL_new(nc)))
		goto out;
	if ((rc = handshake_pair(os, c1, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "the new truststore and keystore fail a handshake with this node's current "
			 "certificate: %s", why);
		goto out;
	}
	if ((rc = handshake_pair(s1, oc, why, sizeof(why))) < 0)
		snprintf(err, errlen, "the new certificate fails a handshake with this node's current truststore "
			 "(other brokers may not trust it yet: add its CA to every truststore first): %s", why);
out:
	SSL_free(os);
	SSL_free(oc);
	SSL_free(s1);
	SSL_free(c1);
	SSL_CTX_free(ns);
	SSL_CTX_free(nc);
	return rc;
}

int tls_server_same_stores(const struct tls_server *s, const struct tls_conf *next)
{
	struct tls_conf t = conf_with_stores(&s->conf, next);

	return !strcmp(t.keystore_location, s->conf.keystore_location) && !strcmp(t.cert_chain, s->conf.cert_chain) &&
	       !strcmp(t.key, s->conf.key) && !strcmp(t.key_password, s->conf.key_password) &&
	       !strcmp(t.truststore, s->conf.truststore);
}

int tls_server_reconf(struct tls_server *s, const struct tls_conf *next, char *err, size_t errlen)
{
	return slot_reconf(&s->slot, &s->conf, next, ctx_build, err, errlen);
}

uint64_t tls_server_reloads(const struct tls_server *s)
{
	return __atomic_load_n(&s->slot.reloads, __ATOMIC_RELAXED);
}

void tls_server_destroy(struct tls_server *s)
{
	if (!s)
		return;
	SSL_CTX_free(s->slot.ctx);
	conf_free(&s->conf);
	free(s);
}

int tls_ktls_probe(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	/* on a socket not connected, a kernel with the TLS ULP says ENOTCONN;
	 * one without it ENOENT */
	if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", 3) < 0 && errno != ENOTCONN)
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- ssl.principal.mapping.rules ---------------------------------------- */

/* One rule at *pp: DEFAULT, or RULE:pattern/replacement/[LU]. 1 and the
 * rule's parts, 0 at the end, -EINVAL on anything else. */
static int next_rule(const char **pp, int *is_default, char *pat, size_t patlen, char *rep, size_t replen,
		     char *cased)
{
	const char *p = *pp, *a, *b;

	while (*p == ',' || isspace((unsigned char)*p))
		p++;
	if (!*p)
		return 0;
	*cased = 0;
	if (!strncmp(p, "DEFAULT", 7)) {
		*is_default = 1;
		*pp = p + 7;
		return 1;
	}
	if (strncmp(p, "RULE:", 5))
		return -EINVAL;
	a = strchr(p + 5, '/');
	b = a ? strchr(a + 1, '/') : NULL;
	if (!a || !b || (size_t)(a - p - 5) >= patlen || (size_t)(b - a - 1) >= replen)
		return -EINVAL;
	*is_default = 0;
	snprintf(pat, patlen, "%.*s", (int)(a - p - 5), p + 5);
	snprintf(rep, replen, "%.*s", (int)(b - a - 1), a + 1);
	p = b + 1;
	if (*p == 'L' || *p == 'U')
		*cased = *p++;
	*pp = p;
	return 1;
}

int tls_principal_rules_check(const char *rules, char *err, size_t errlen)
{
	const char *p = rules;
	char pat[512], rep[256], cased;
	int def, rc;

	while ((rc = next_rule(&p, &def, pat, sizeof(pat), rep, sizeof(rep), &cased)) > 0) {
		regex_t re;
		char full[520];

		if (def)
			continue;
		snprintf(full, sizeof(full), "^(%s)$", pat);
		if (regcomp(&re, full, REG_EXTENDED) != 0) {
			snprintf(err, errlen, "ssl.principal.mapping.rules: bad pattern '%s' (POSIX extended regex)", pat);
			return -EINVAL;
		}
		regfree(&re);
	}
	if (rc < 0) {
		snprintf(err, errlen, "ssl.principal.mapping.rules: cannot parse at '%.60s' (expected DEFAULT or "
			 "RULE:pattern/replacement/[LU], comma-separated)", p);
		return -EINVAL;
	}
	return 0;
}

int tls_principal_map(const char *rules, const char *dn, char *out, size_t outlen)
{
	const char *p = rules;
	char pat[512], rep[256], cased;
	int def;

	while (next_rule(&p, &def, pat, sizeof(pat), rep, sizeof(rep), &cased) > 0) {
		regmatch_t m[10];
		regex_t re;
		char full[520];
		size_t o = 0;

		if (def) {
			snprintf(out, outlen, "%s", dn);
			return 0;
		}
		snprintf(full, sizeof(full), "^(%s)$", pat);
		if (regcomp(&re, full, REG_EXTENDED) != 0)
			continue;
		if (regexec(&re, dn, 10, m, 0) != 0) {
			regfree(&re);
			continue;
		}
		/* $1.. are the pattern's groups: ours wraps it in one more */
		for (const char *r = rep; *r && o + 1 < outlen; r++) {
			if (*r == '$' && isdigit((unsigned char)r[1]) && r[1] != '0' && r[1] - '0' + 1 < 10) {
				int g = r[1] - '0' + 1;

				for (regoff_t k = m[g].rm_so; m[g].rm_so >= 0 && k < m[g].rm_eo && o + 1 < outlen; k++)
					out[o++] = dn[k];
				r++;
				continue;
			}
			out[o++] = *r;
		}
		out[o] = 0;
		regfree(&re);
		for (size_t k = 0; cased && k < o; k++)
			out[k] = (char)(cased == 'L' ? tolower((unsigned char)out[k]) : toupper((unsigned char)out[k]));
		return 0;
	}
	return -ENOENT;
}

/* ---- a connection (its shard) ------------------------------------------- */

struct tls_conn *tls_conn_new(struct tls_server *s)
{
	struct tls_conn *t = malloc(sizeof(*t)); /* style: allow per connection */

	if (!t)
		return NULL;
	memset(t, 0, offsetof(struct tls_conn, tx));
	t->rules = s->conf.principal_rules;
	t->ssl = slot_ssl_new(&s->slot);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio) {
		SSL_free(t->ssl);
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		free(t);
		return NULL;
	}
	/* an empty memory BIO says "retry", not end of file */
	BIO_set_mem_eof_return(t->rbio, -1);
	SSL_set_bio(t->ssl, t->rbio, t->wbio);   /* the SSL owns them now */
	SSL_set_accept_state(t->ssl);
	return t;
}

struct tls_conn *tls_conn_new_client(struct tls_client *cl, const char *host)
{
	struct tls_conn *t = malloc(sizeof(*t)); /* style: allow per connection */
	X509_VERIFY_PARAM *vp;
	struct in6_addr a6;
	struct in_addr a4;

	if (!t)
		return NULL;
	memset(t, 0, offsetof(struct tls_conn, tx));
	t->ssl = slot_ssl_new(&cl->slot);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio)
		goto bad;
	BIO_set_mem_eof_return(t->rbio, -1);
	SSL_set_bio(t->ssl, t->rbio, t->wbio);   /* the SSL owns them now */
	/* the certificate must name the address the broker registered
	 * (Kafka's ssl.endpoint.identification.algorithm=https) */
	vp = SSL_get0_param(t->ssl);
	if (inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1) {
		if (!X509_VERIFY_PARAM_set1_ip_asc(vp, host))
			goto bad;
	} else {
		if (!SSL_set1_host(t->ssl, host) || !SSL_set_tlsext_host_name(t->ssl, host))
			goto bad;
	}
	SSL_set_connect_state(t->ssl);
	return t;
bad:
	if (t->ssl && SSL_get_rbio(t->ssl) == t->rbio)
		t->rbio = t->wbio = NULL;            /* freed with the SSL */
	SSL_free(t->ssl);
	BIO_free(t->rbio);
	BIO_free(t->wbio);
	free(t);
	return NULL;
}

void tls_conn_free(struct tls_conn *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t);
}

uint8_t *tls_conn_rx(struct tls_conn *t)
{
	return t->rx;
}

int tls_conn_feed(struct tls_conn *t, uint32_t n)
{
	return BIO_write(t->rbio, t->rx, (int)n) == (int)n ? 0 : -ENOMEM;
}

static void conn_error(struct tls_conn *t)
{
	unsigned long e = ERR_get_error();
	long v = SSL_get_verify_result(t->ssl);

	if (v != X509_V_OK)
		snprintf(t->error, sizeof(t->error), "certificate verify failed: %s", X509_verify_cert_error_string(v));
	else if (e)
		ERR_error_string_n(e, t->error, sizeof(t->error));
	else if (!t->error[0])
		snprintf(t->error, sizeof(t->error), "the peer broke the session");
	ERR_clear_error();
}

int tls_cert_principal(const char *rules, const void *x509, char *out, size_t outlen)
{
	char dn[512] = "", mapped[240];
	BIO *b;
	int n;

	if (!(b = BIO_new(BIO_s_mem())))
		return -ENOMEM;
	/* RFC 2253, as Java's X500Principal.getName() gives it to Kafka's rules */
	X509_NAME_print_ex(b, X509_get_subject_name(x509), 0, XN_FLAG_RFC2253);
	n = BIO_read(b, dn, (int)sizeof(dn) - 1);
	dn[n > 0 ? n : 0] = 0;
	BIO_free(b);
	if (tls_principal_map(rules, dn, mapped, sizeof(mapped)) < 0)
		return -ENOENT;
	snprintf(out, outlen, "User:%s", mapped);
	return 0;
}

static void set_principal(struct tls_conn *t)
{
	X509 *peer = SSL_get0_peer_certificate(t->ssl);

	snprintf(t->principal, sizeof(t->principal), "User:ANONYMOUS");
	if (peer && tls_cert_principal(t->rules, peer, t->principal, sizeof(t->principal)) == -ENOENT)
		t->principal[0] = 0;   /* no rule matched: refused */
}

int tls_conn_read(struct tls_conn *t, uint8_t *buf, uint32_t cap)
{
	int n = SSL_read(t->ssl, buf, (int)cap), e;

	if (!t->established && SSL_is_init_finished(t->ssl) && !t->rules) {
		t->established = 1;   /* a client: the server's certificate was verified */
	} else if (!t->established && SSL_is_init_finished(t->ssl)) {
		t->established = 1;
		set_principal(t);
		if (!t->principal[0]) {
			snprintf(t->error, sizeof(t->error), "no ssl.principal.mapping.rules rule matches the client");
			return -EPROTO;
		}
	}
	if (n > 0)
		return n;
	e = SSL_get_error(t->ssl, n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	if (e == SSL_ERROR_ZERO_RETURN)
		return -EPIPE;
	conn_error(t);
	return -EPROTO;
}

int tls_conn_write(struct tls_conn *t, struct msghdr *msg, size_t *left, size_t max)
{
	size_t done = 0;

	while (done < max && msg->msg_iovlen) {
		struct iovec *v = msg->msg_iov;
		size_t n = v->iov_len < max - done ? v->iov_len : max - done;
		size_t w = 0;

		if (n && SSL_write_ex(t->ssl, v->iov_base, n, &w) != 1) {
			conn_error(t);
			return -EPROTO;
		}
		done += w;
		*left -= w;
		if (w == v->iov_len) {
			msg->msg_iov++;
			msg->msg_iovlen--;
		} else {
			v->iov_base = (uint8_t *)v->iov_base + w;
			v->iov_len -= w;
		}
	}
	return (int)done;
}

uint32_t tls_conn_tx(struct tls_conn *t, const uint8_t **buf)
{
	if (t->tx_off == t->tx_len) {
		int n = BIO_read(t->wbio, t->tx, (int)sizeof(t->tx));

		t->tx_off = 0;
		t->tx_len = n > 0 ? (uint32_t)n : 0;
	}
	*buf = t->tx + t->tx_off;
	return t->tx_len - t->tx_off;
}

void tls_conn_sent(struct tls_conn *t, uint32_t n)
{
	t->tx_off += n;
}

int tls_conn_established(struct tls_conn *t)
{
	if (!t->established || t->counted)
		return 0;
	t->counted = 1;
	return 1;
}

const char *tls_conn_principal(const struct tls_conn *t)
{
	return t->principal;
}

const char *tls_conn_error(const struct tls_conn *t)
{
	return t->error;
}
