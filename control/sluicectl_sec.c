/* control/sluicectl_sec.c — sluicectl as a TLS and SASL client: the
 * --command-config file (Kafka's client property names, as Kafka's CLI
 * tools take them, and librdkafka's where they differ), the OpenSSL client
 * context made from it, the blocking TLS handshake on a connected socket
 * and the HTTP Basic header for the admin endpoint. The SASL exchange
 * itself runs in sluicectl_client.c (kclient_open). See sluicectl.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "control/sluicectl.h"
#include "dataplane/jaas.h"
#include "dataplane/sasl.h"
#include "dataplane/scram.h"
#include "dataplane/tls.h"

static const char *const protocols[] = { "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL" };

/* The keys a --command-config may hold. */
static const char *const known_keys[] = {
	"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username",
	"sasl.password", "ssl.truststore.location", "ssl.truststore.type", "ssl.ca.location",
	"ssl.keystore.location", "ssl.keystore.type", "ssl.certificate.location", "ssl.key.location",
	"ssl.key.password", "ssl.endpoint.identification.algorithm", "admin.token", NULL,
};

static int bad(char *err, size_t errlen, const char *file, int line, const char *key, const char *f, ...)
	__attribute__((format(printf, 6, 7)));
static int bad(char *err, size_t errlen, const char *file, int line, const char *key, const char *f, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "%s:%d: %s: ", file, line, key);

	va_start(ap, f);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, f, ap);
	va_end(ap);
	return -EINVAL;
}

/* Kafka's JAAS form for a client: `<LoginModule> required username="u"
 * password="p";` (dataplane/jaas.c reads it). Sets s->user and
 * s->password; *module gets 'P' (PlainLoginModule) or 'S'
 * (ScramLoginModule). */
static int jaas_client(struct ctl_sec *s, const char *v, char *module, char *why, size_t whylen)
{
	struct jaas_head h;

	*module = 0;
	if (jaas_login(v, &h, s->user, sizeof(s->user), s->password, sizeof(s->password), &s->have_password, why,
		       whylen) < 0)
		return -EINVAL;
	if (h.kind == JAAS_MODULE_OTHER) {
		snprintf(why, whylen, "the login module '%.*s' is neither "
			 "org.apache.kafka.common.security.scram.ScramLoginModule nor "
			 "org.apache.kafka.common.security.plain.PlainLoginModule",
			 (int)(h.module_len > 80 ? 80 : h.module_len), h.module);
		return -EINVAL;
	}
	if (h.flag_len != 8 || strncmp(h.flag, "required", 8)) {
		snprintf(why, whylen, "the control flag must be 'required'");
		return -EINVAL;
	}
	*module = h.kind == JAAS_MODULE_PLAIN ? 'P' : 'S';
	return 0;
}

/* One logical line of a properties file: trimmed, comments and blank
 * lines skipped, a trailing backslash joining the next line. Returns the
 * line (in buf) or NULL at the end; *lineno is its first line's number. */
static char *next_line(FILE *f, char *buf, size_t cap, int *lineno, int *counter)
{
	size_t n = 0;

	for (;;) {
		char part[8192];
		size_t l;
		char *p;

		if (!fgets(part, sizeof part, f))
			return n ? buf : NULL;
		++*counter;
		if (!n)
			*lineno = *counter;
		l = strlen(part);
		while (l && (part[l - 1] == '\n' || part[l - 1] == '\r'))
			part[--l] = 0;
		p = part;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!n && (!*p || *p == '#' || *p == '!'))
			continue;
		l = strlen(p);
		if (n + l + 1 > cap)
			l = cap - n - 1;
		memcpy(buf + n, p, l);
		n += l;
		buf[n] = 0;
		if (n && buf[n - 1] == '\\') {
			buf[--n] = 0;
			continue;
		}
		return buf;
	}
}

static void ssl_why(char *why, size_t whylen)
{
	unsigned long e = ERR_get_error();

	if (e)
		ERR_error_string_n(e, why, whylen);
	else
		snprintf(why, whylen, "%s", strerror(errno ? errno : EINVAL));
	ERR_clear_error();
}

struct kv {
	char key[64];
	char *val;
	int line;
};

static const struct kv *kv_get(const struct kv *kv, int n, const char *key)
{
	const struct kv *r = NULL;

	for (int i = 0; i < n; i++)
		if (!strcmp(kv[i].key, key))
			r = &kv[i];   /* the last one wins, as in Java's Properties */
	return r;
}

/* The SSL_CTX for SSL and SASL_SSL from the ssl.* keys. */
static int make_ctx(struct ctl_sec *s, const char *file, const struct kv *kv, int n, char *err, size_t errlen)
{
	const struct kv *trust = kv_get(kv, n, "ssl.truststore.location"), *ca = kv_get(kv, n, "ssl.ca.location");
	const struct kv *ks = kv_get(kv, n, "ssl.keystore.location"), *cert = kv_get(kv, n, "ssl.certificate.location");
	const struct kv *key = kv_get(kv, n, "ssl.key.location"), *kpw = kv_get(kv, n, "ssl.key.password");
	char why[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		ssl_why(why, sizeof why);
		snprintf(err, errlen, "%s: cannot make a TLS context: %s", file, why);
		return -ENOMEM;
	}
	s->ssl_ctx = ctx;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (trust && ca)
		return bad(err, errlen, file, ca->line, ca->key, "give ssl.truststore.location or ssl.ca.location, not both");
	if (!trust)
		trust = ca;
	if (trust && *trust->val) {
		if (SSL_CTX_load_verify_locations(ctx, trust->val, NULL) != 1) {
			ssl_why(why, sizeof why);
			return bad(err, errlen, file, trust->line, trust->key, "cannot load the CA certificates of %s: %s",
				   trust->val, why);
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ssl_why(why, sizeof why);
		snprintf(err, errlen, "%s: cannot load the system's CA certificates: %s", file, why);
		return -EINVAL;
	}
	if (ks && cert)
		return bad(err, errlen, file, cert->line, cert->key,
			   "give ssl.keystore.location or ssl.certificate.location with ssl.key.location, not both");
	if (kpw) {   /* kpw->val lives until ctl_sec_load returns: unset below */
		SSL_CTX_set_default_passwd_cb_userdata(ctx, kpw->val);
		SSL_CTX_set_default_passwd_cb(ctx, tls_pem_password_cb);
	}
	if ((cert && !key) || (key && !cert && !ks))
		return bad(err, errlen, file, (cert ? cert : key)->line, (cert ? cert : key)->key,
			   "ssl.certificate.location and ssl.key.location go together");
	if (ks || cert) {
		const struct kv *c = ks ? ks : cert, *k = key ? key : ks;

		if (SSL_CTX_use_certificate_chain_file(ctx, c->val) != 1) {
			ssl_why(why, sizeof why);
			return bad(err, errlen, file, c->line, c->key, "cannot load a certificate from %s: %s", c->val, why);
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, k->val, SSL_FILETYPE_PEM) != 1) {
			unsigned long e = ERR_peek_last_error();

			if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
				ERR_clear_error();
				return bad(err, errlen, file, k->line, k->key,
					   "the private key does not match the certificate");
			}
			ssl_why(why, sizeof why);
			return bad(err, errlen, file, k->line, k->key, "cannot load the private key from %s%s: %s", k->val,
				   kpw ? " (is ssl.key.password its password?)" : " (encrypted? give ssl.key.password)", why);
		}
		if (SSL_CTX_check_private_key(ctx) != 1)
			return bad(err, errlen, file, k->line, k->key, "the private key does not match the certificate");
	}
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	return 0;
}

int ctl_sec_load(struct ctl_sec *s, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	struct kv kv[32];
	int n = 0, counter = 0, line = 0, rc = 0;
	char buf[16384], why[300], module = 0;
	const struct kv *v;

	memset(s, 0, sizeof(*s));
	s->verify_host = true;   /* Kafka's default: ssl.endpoint.identification.algorithm=https */
	s->file = file;
	if (!f) {
		snprintf(err, errlen, "--command-config %s: %s", file, strerror(errno));
		return -errno;
	}
	while (next_line(f, buf, sizeof buf, &line, &counter)) {
		char *p = buf, *kend, *val;
		size_t kl;
		int known = 0;

		/* key = value, key: value or key value, as Java's Properties */
		while (*p && *p != '=' && *p != ':' && *p != ' ' && *p != '\t')
			p++;
		kend = p;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '=' || *p == ':')
			p++;
		while (*p == ' ' || *p == '\t')
			p++;
		val = p;
		kl = (size_t)(kend - buf);
		for (size_t l = strlen(val); l && (val[l - 1] == ' ' || val[l - 1] == '\t');)
			val[--l] = 0;
		for (int i = 0; known_keys[i]; i++)
			known |= strlen(known_keys[i]) == kl && !strncmp(known_keys[i], buf, kl);
		if (!known) {
			char keyname[64];
			size_t l = kl < sizeof keyname ? kl : sizeof keyname - 1;

			memcpy(keyname, buf, l);
			keyname[l] = 0;
			rc = bad(err, errlen, file, line, keyname,
				 "unknown key (sluicectl takes security.protocol, sasl.mechanism, sasl.jaas.config, "
				 "sasl.username, sasl.password, ssl.truststore.location, ssl.truststore.type, "
				 "ssl.ca.location, ssl.keystore.location, ssl.keystore.type, ssl.certificate.location, "
				 "ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm)");
			goto out;
		}
		if (n == (int)(sizeof kv / sizeof kv[0])) {
			rc = bad(err, errlen, file, line, "", "more than %d keys", n);
			goto out;
		}
		memcpy(kv[n].key, buf, kl);
		kv[n].key[kl] = 0;
		kv[n].line = line;
		if (!(kv[n].val = strdup(val))) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		n++;
	}
	if ((v = kv_get(kv, n, "security.protocol"))) {
		s->protocol = -1;
		for (int i = 0; i < 4; i++)
			if (!strcasecmp(v->val, protocols[i]))
				s->protocol = i;
		if (s->protocol < 0) {
			rc = bad(err, errlen, file, v->line, v->key,
				 "'%s' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v->val);
			goto out;
		}
	}
	if ((v = kv_get(kv, n, "sasl.mechanism")) || (v = kv_get(kv, n, "sasl.mechanisms"))) {
		s->mech = sasl_mech_from_name(v->val, strlen(v->val));
		if (!s->mech) {
			rc = bad(err, errlen, file, v->line, v->key, "'%s' is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
				 v->val);
			goto out;
		}
	} else {
		s->mech = SASL_MECH_PLAIN;   /* Kafka's client default is GSSAPI; sluicectl has none */
		if (s->protocol >= SEC_SASL_PLAINTEXT) {
			snprintf(err, errlen, "%s: security.protocol=%s needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or "
				 "SCRAM-SHA-512)", file, protocols[s->protocol]);
			rc = -EINVAL;
			goto out;
		}
	}
	if ((v = kv_get(kv, n, "sasl.jaas.config"))) {
		if (jaas_client(s, v->val, &module, why, sizeof why) < 0) {
			rc = bad(err, errlen, file, v->line, v->key, "%s", why);
			goto out;
		}
		if ((module == 'P') != (s->mech == SASL_MECH_PLAIN)) {
			rc = bad(err, errlen, file, v->line, v->key, "%s goes with %s, not sasl.mechanism=%s",
				 module == 'P' ? "PlainLoginModule" : "ScramLoginModule",
				 module == 'P' ? "PLAIN" : "SCRAM-SHA-256 or SCRAM-SHA-512", sasl_mech_name(s->mech));
			goto out;
		}
	}
	if ((v = kv_get(kv, n, "sasl.username"))) {
		if (!*v->val || strlen(v->val) >= sizeof(s->user)) {
			rc = bad(err, errlen, file, v->line, v->key, "empty or longer than %zu bytes", sizeof(s->user) - 1);
			goto out;
		}
		snprintf(s->user, sizeof s->user, "%s", v->val);
	}
	if ((v = kv_get(kv, n, "sasl.password"))) {
		if (strlen(v->val) >= sizeof(s->password)) {
			rc = bad(err, errlen, file, v->line, v->key, "longer than %zu bytes", sizeof(s->password) - 1);
			goto out;
		}
		snprintf(s->password, sizeof s->password, "%s", v->val);
		s->have_password = true;
	}
	for (const char *const *t = (const char *const[]){ "ssl.truststore.type", "ssl.keystore.type", NULL }; *t; t++)
		if ((v = kv_get(kv, n, *t)) && strcasecmp(v->val, "PEM")) {
			rc = bad(err, errlen, file, v->line, v->key, "'%s': only PEM is read (no JKS or PKCS12)", v->val);
			goto out;
		}
	if ((v = kv_get(kv, n, "admin.token"))) {
		if (!*v->val || strlen(v->val) >= sizeof(s->token) || strpbrk(v->val, " \t")) {
			rc = bad(err, errlen, file, v->line, v->key, "one token of 1 to %zu bytes, no spaces",
				 sizeof(s->token) - 1);
			goto out;
		}
		snprintf(s->token, sizeof s->token, "%s", v->val);
	}
	if ((v = kv_get(kv, n, "ssl.endpoint.identification.algorithm"))) {
		if (!strcasecmp(v->val, "https"))
			s->verify_host = true;
		else if (!*v->val || !strcmp(v->val, "\"\"") || !strcasecmp(v->val, "none"))
			s->verify_host = false;
		else {
			rc = bad(err, errlen, file, v->line, v->key, "'%s' is not https or empty", v->val);
			goto out;
		}
	}
	if (s->protocol >= SEC_SASL_PLAINTEXT && (!s->user[0] || !s->have_password)) {
		snprintf(err, errlen, "%s: security.protocol=%s needs a user name and a password: sasl.jaas.config "
			 "(username=\"...\" password=\"...\") or sasl.username and sasl.password", file,
			 protocols[s->protocol]);
		rc = -EINVAL;
		goto out;
	}
	/* also for PLAINTEXT: an https admin endpoint uses it */
	rc = make_ctx(s, file, kv, n, err, errlen);
out:
	for (int i = 0; i < n; i++) {
		OPENSSL_cleanse(kv[i].val, strlen(kv[i].val));
		free(kv[i].val);
	}
	OPENSSL_cleanse(buf, sizeof buf);
	fclose(f);
	return rc;
}

void ctl_sec_default_ctx(struct ctl_sec *s)
{
	if (s->ssl_ctx || !(s->ssl_ctx = SSL_CTX_new(TLS_client_method())))
		return;
	s->verify_host = true;
	SSL_CTX_set_min_proto_version(s->ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(s->ssl_ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_default_verify_paths(s->ssl_ctx);
}

void ctl_sec_fini(struct ctl_sec *s)
{
	if (s->ssl_ctx)
		SSL_CTX_free(s->ssl_ctx);
	OPENSSL_cleanse(s, sizeof(*s));
}

const char *ctl_sec_protocol(const struct ctl_sec *s)
{
	return protocols[s->protocol];
}

int ctl_sec_wait(void *ssl, int fd, int ssl_rc, int64_t deadline)
{
	int e = SSL_get_error(ssl, ssl_rc);

	if (e == SSL_ERROR_WANT_READ)
		return ctl_wait_fd(fd, POLLIN, deadline);
	if (e == SSL_ERROR_WANT_WRITE)
		return ctl_wait_fd(fd, POLLOUT, deadline);
	return e == SSL_ERROR_ZERO_RETURN ? -ECONNRESET : -EPROTO;
}

int ctl_sec_tls_connect(const struct ctl_sec *s, int fd, const char *host, int timeout_ms, void **out, char *err,
			size_t errlen)
{
	int64_t deadline = mono_ms() + timeout_ms;
	SSL *ssl = s->ssl_ctx ? SSL_new(s->ssl_ctx) : NULL;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	char why[256];
	int rc;

	*out = NULL;
	if (!ssl || SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		snprintf(err, errlen, "cannot start TLS");
		return -ENOMEM;
	}
	if (!is_ip)
		SSL_set_tlsext_host_name(ssl, host);
	if (s->verify_host) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);

		if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1 : SSL_set1_host(ssl, host) != 1) {
			SSL_free(ssl);
			snprintf(err, errlen, "cannot set the host name to verify");
			return -EINVAL;
		}
	}
	ERR_clear_error();
	while ((rc = SSL_connect(ssl)) != 1) {
		int w = ctl_sec_wait(ssl, fd, rc, deadline);

		if (w == 0)
			continue;
		if (w == -EPROTO) {
			long v = SSL_get_verify_result(ssl);

			if (v != X509_V_OK)
				snprintf(err, errlen, "TLS: the broker's certificate is not trusted: %s%s",
					 X509_verify_cert_error_string(v),
					 v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH
						 ? " (ssl.endpoint.identification.algorithm= turns the check off)"
						 : " (ssl.truststore.location names the CA to trust)");
			else {
				ssl_why(why, sizeof why);
				snprintf(err, errlen, "TLS handshake failed: %s", why);
			}
		} else {
			snprintf(err, errlen, "TLS handshake: %s", w == -ETIMEDOUT ? "timed out" : strerror(-w));
		}
		SSL_free(ssl);
		return w == 0 ? -EPROTO : w;
	}
	*out = ssl;
	return 0;
}

void ctl_sec_tls_close(void *ssl)
{
	if (ssl) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
}

int ctl_sec_token_file(struct ctl_sec *s, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char buf[sizeof(s->token) + 2], *p, *e;

	if (!f) {
		snprintf(err, errlen, "--admin-token-file %s: %s", file, strerror(errno));
		return -EINVAL;
	}
	p = fgets(buf, sizeof buf, f);
	fclose(f);
	if (p) {
		while (*p == ' ' || *p == '\t')
			p++;
		for (e = p + strlen(p); e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*e = 0;
	}
	if (!p || !*p || strlen(p) >= sizeof(s->token) || strpbrk(p, " \t")) {
		OPENSSL_cleanse(buf, sizeof buf);
		snprintf(err, errlen, "--admin-token-file %s: want one token (1 to %zu bytes, no spaces) on the first line",
			 file, sizeof(s->token) - 1);
		return -EINVAL;
	}
	snprintf(s->token, sizeof s->token, "%s", p);
	OPENSSL_cleanse(buf, sizeof buf);
	return 0;
}

int ctl_sec_basic(const struct ctl_sec *s, char *out, size_t cap)
{
	char raw[sizeof(s->user) + sizeof(s->password) + 2];
	int n;

	if (!s->user[0] || !s->have_password)
		return 0;
	n = snprintf(raw, sizeof raw, "%s:%s", s->user, s->password);
	if (n < 0 || (size_t)n >= sizeof raw || ((size_t)n + 2) / 3 * 4 + 1 > cap) {
		OPENSSL_cleanse(raw, sizeof raw);
		return -EINVAL;
	}
	scram_b64_enc((const uint8_t *)raw, (size_t)n, out);
	OPENSSL_cleanse(raw, sizeof raw);
	return 1;
}
