/* dataplane/sasl_client.c — PLAIN and SCRAM client messages (see
 * dataplane/sasl_client.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "dataplane/sasl_client.h"

/* The value of key="value" in a JAAS config (the first, whole-word). */
static int jaas_value(const char *jaas, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);

	for (const char *p = jaas; (p = strstr(p, key)); p += kl) {
		const char *v, *e;

		if (p > jaas && p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\n')
			continue;
		if (p[kl] != '=' || p[kl + 1] != '"')
			continue;
		v = p + kl + 2;
		if (!(e = strchr(v, '"')) || (size_t)(e - v) >= cap)
			return -EINVAL;
		memcpy(out, v, (size_t)(e - v));
		out[e - v] = 0;
		return 0;
	}
	return -ENOENT;
}

int sasl_jaas_login(const char *jaas, char *user, size_t ulen, char *password, size_t plen, char *err,
		    size_t errlen)
{
	if (jaas_value(jaas, "username", user, ulen) < 0 || !*user) {
		snprintf(err, errlen, "no username=\"...\" (or one too long)");
		return -EINVAL;
	}
	if (jaas_value(jaas, "password", password, plen) < 0) {
		snprintf(err, errlen, "no password=\"...\" for the user %s (or one too long)", user);
		return -EINVAL;
	}
	return 0;
}

void sasl_client_init(struct sasl_client *c, int mech, const char *user, const char *password)
{
	memset(c, 0, sizeof(*c));
	c->mech = mech;
	snprintf(c->user, sizeof(c->user), "%s", user);
	snprintf(c->password, sizeof(c->password), "%s", password);
	c->state = SASL_CLIENT_FIRST;
}

void sasl_client_fini(struct sasl_client *c)
{
	OPENSSL_cleanse(c, sizeof(*c));
}

static int fail(struct sasl_client *c, char *why, size_t whylen, int rc, const char *what)
{
	snprintf(why, whylen, "%s", what);
	c->state = SASL_CLIENT_FAILED;
	return rc;
}

/* SCRAM's attribute `a` in the comma-separated in..in+len: its value. */
static int attr_of(const char *in, size_t len, char a, const char **v, size_t *vlen)
{
	const char *e = in + len;

	for (const char *p = in; p + 1 < e; p++) {
		if ((p == in || p[-1] == ',') && p[0] == a && p[1] == '=') {
			const char *c = memchr(p + 2, ',', (size_t)(e - p - 2));

			*v = p + 2;
			*vlen = c ? (size_t)(c - p - 2) : (size_t)(e - p - 2);
			return 0;
		}
	}
	return -1;
}

static int scram_type(int mech)
{
	return mech == SASL_MECH_SCRAM_SHA_256 ? SASL_SCRAM_SHA_256 : SASL_SCRAM_SHA_512;
}

/* client-first: n,,n=<user>,r=<nonce> (',' and '=' escaped) */
static int scram_first(struct sasl_client *c, uint8_t *out, size_t cap, size_t *outlen, char *why, size_t whylen)
{
	uint8_t rnd[24];
	char name[SASL_USER_MAX * 3];
	size_t n = 0;
	int m;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return fail(c, why, whylen, -EIO, "SCRAM: no random bytes for the nonce");
	sasl_b64_encode(rnd, sizeof(rnd), c->nonce);
	for (const char *p = c->user; *p; p++) {
		const char *esc = *p == ',' ? "=2C" : *p == '=' ? "=3D" : NULL;

		if (esc) {
			memcpy(name + n, esc, 3);
			n += 3;
		} else {
			name[n++] = *p;
		}
	}
	name[n] = 0;
	m = snprintf((char *)out, cap, "n,,n=%s,r=%s", name, c->nonce);
	if (m < 0 || (size_t)m >= cap || (size_t)m - 3 >= sizeof(c->auth))
		return fail(c, why, whylen, -EPROTO, "SCRAM: the user name is too long");
	memcpy(c->auth, out + 3, (size_t)m - 3);   /* client-first-bare */
	c->auth_len = (size_t)m - 3;
	*outlen = (size_t)m;
	c->state = SASL_CLIENT_FINAL;
	return 1;
}

/* server-first r=<nonce>,s=<salt>,i=<n> -> client-final c=biws,r=<nonce>,p=<proof> */
static int scram_final(struct sasl_client *c, const char *in, size_t len, uint8_t *out, size_t cap, size_t *outlen,
		       char *why, size_t whylen)
{
	int type = scram_type(c->mech), kl = sasl_scram_key_len(type), slen, m;
	const char *r, *s, *i;
	size_t rlen, s64len, ilen, wo;
	uint8_t salt[SASL_SALT_MAX * 2], salted[SASL_KEY_MAX], client_key[SASL_KEY_MAX], stored[SASL_KEY_MAX];
	uint8_t sig[SASL_KEY_MAX];
	char num[16], proof64[SASL_KEY_MAX * 2];
	long iters;

	if (attr_of(in, len, 'r', &r, &rlen) < 0 || attr_of(in, len, 's', &s, &s64len) < 0 ||
	    attr_of(in, len, 'i', &i, &ilen) < 0 || ilen >= sizeof(num))
		return fail(c, why, whylen, -EPROTO, "SCRAM: a server-first message that does not parse");
	if (rlen <= strlen(c->nonce) || memcmp(r, c->nonce, strlen(c->nonce)))
		return fail(c, why, whylen, -EACCES, "SCRAM: the server's nonce does not start with ours");
	memcpy(num, i, ilen);
	num[ilen] = 0;
	iters = strtol(num, NULL, 10);
	if (iters < SASL_MIN_ITERATIONS || iters > SASL_MAX_ITERATIONS)
		return fail(c, why, whylen, -EACCES, "SCRAM: the server's iteration count is out of range");
	if ((slen = sasl_b64_decode(s, s64len, salt, sizeof(salt))) <= 0)
		return fail(c, why, whylen, -EPROTO, "SCRAM: a bad salt");
	/* Hi(): iters HMACs, a few milliseconds once per connection */
	if (sasl_scram_salt(type, c->password, strlen(c->password), salt, (size_t)slen, (int32_t)iters, salted) < 0)
		return fail(c, why, whylen, -EIO, "SCRAM: PBKDF2 failed");
	/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
	m = snprintf(c->auth + c->auth_len, sizeof(c->auth) - c->auth_len, ",%.*s,c=biws,r=%.*s", (int)len, in,
		     (int)rlen, r);
	if (m < 0 || (size_t)m >= sizeof(c->auth) - c->auth_len)
		return fail(c, why, whylen, -EPROTO, "SCRAM: an overlong server-first message");
	wo = (size_t)m - (len + 2);                  /* "c=biws,r=..." */
	c->auth_len += (size_t)m;
	sasl_hmac(type, salted, (size_t)kl, "Client Key", 10, client_key);
	sasl_hash(type, client_key, (size_t)kl, stored);
	sasl_hmac(type, stored, (size_t)kl, c->auth, c->auth_len, sig);
	for (int k = 0; k < kl; k++)
		client_key[k] ^= sig[k];             /* the proof */
	sasl_b64_encode(client_key, (size_t)kl, proof64);
	sasl_hmac(type, salted, (size_t)kl, "Server Key", 10, c->server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(client_key, sizeof(client_key));
	m = snprintf((char *)out, cap, "%.*s,p=%s", (int)wo, c->auth + c->auth_len - wo, proof64);
	if (m < 0 || (size_t)m >= cap)
		return fail(c, why, whylen, -EPROTO, "SCRAM: the client-final message does not fit");
	*outlen = (size_t)m;
	c->state = SASL_CLIENT_VERIFY;
	return 1;
}

/* server-final v=<signature> (or e=<error>) */
static int scram_verify(struct sasl_client *c, const char *in, size_t len, char *why, size_t whylen)
{
	int type = scram_type(c->mech), kl = sasl_scram_key_len(type), n;
	const char *v;
	size_t vlen;
	uint8_t got[SASL_KEY_MAX + 3], want[SASL_KEY_MAX];

	if (attr_of(in, len, 'e', &v, &vlen) == 0)
		return fail(c, why, whylen, -EACCES, "SCRAM: the server refused the proof");
	if (attr_of(in, len, 'v', &v, &vlen) < 0 || (n = sasl_b64_decode(v, vlen, got, sizeof(got))) != kl)
		return fail(c, why, whylen, -EPROTO, "SCRAM: a server-final message that does not parse");
	sasl_hmac(type, c->server_key, (size_t)kl, c->auth, c->auth_len, want);
	if (CRYPTO_memcmp(got, want, (size_t)kl))
		return fail(c, why, whylen, -EACCES, "SCRAM: the server's signature is wrong (not the broker "
			    "that holds our credential)");
	c->state = SASL_CLIENT_DONE;
	return 0;
}

int sasl_client_step(struct sasl_client *c, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
		     size_t *outlen, char *why, size_t whylen)
{
	*outlen = 0;
	why[0] = 0;
	if (c->mech == SASL_MECH_PLAIN) {
		size_t ul = strlen(c->user), pl = strlen(c->password);

		if (c->state == SASL_CLIENT_FINAL) {
			c->state = SASL_CLIENT_DONE;
			return 0;
		}
		if (c->state != SASL_CLIENT_FIRST || ul + pl + 2 > cap)
			return fail(c, why, whylen, -EPROTO, "PLAIN: out of turn, or too long");
		out[0] = 0;                          /* no authorization id */
		memcpy(out + 1, c->user, ul);
		out[1 + ul] = 0;
		memcpy(out + 2 + ul, c->password, pl);
		*outlen = ul + pl + 2;
		c->state = SASL_CLIENT_FINAL;
		return 1;
	}
	if (c->mech != SASL_MECH_SCRAM_SHA_256 && c->mech != SASL_MECH_SCRAM_SHA_512)
		return fail(c, why, whylen, -EPROTO, "an unknown mechanism");
	switch (c->state) {
	case SASL_CLIENT_FIRST:
		return scram_first(c, out, cap, outlen, why, whylen);
	case SASL_CLIENT_FINAL:
		return scram_final(c, (const char *)in, len, out, cap, outlen, why, whylen);
	case SASL_CLIENT_VERIFY:
		return scram_verify(c, (const char *)in, len, why, whylen);
	default:
		return fail(c, why, whylen, -EPROTO, "a step out of turn");
	}
}
