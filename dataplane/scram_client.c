/* dataplane/scram_client.c — SCRAM's client steps. See
 * dataplane/scram_client.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "dataplane/scram_client.h"

static int fail(char *why, size_t whylen, int rc, const char *what)
{
	snprintf(why, whylen, "%s", what);
	return rc;
}

int scram_client_first(struct scram_client *c, int type, const char *user, const char *nonce, char *out, size_t cap,
		       size_t *outlen)
{
	size_t n = 0;
	int m;

	memset(c, 0, sizeof(*c));
	if (!sasl_scram_key_len(type))
		return -EINVAL;
	c->type = type;
	if (nonce) {
		if (strlen(nonce) >= sizeof(c->nonce) || !*nonce)
			return -EINVAL;
		memcpy(c->nonce, nonce, strlen(nonce) + 1);
	} else if (scram_nonce(c->nonce, sizeof(c->nonce)) < 0) {
		return -EIO;
	}
	/* client-first-bare: n=<saslname>,r=<nonce>; ',' is =2C and '=' =3D */
	memcpy(c->bare, "n=", 2);
	n = 2;
	for (const char *u = user; *u; u++) {
		const char *esc = *u == ',' ? "=2C" : *u == '=' ? "=3D" : NULL;
		size_t l = esc ? 3 : 1;

		if (n + l + 1 >= sizeof(c->bare))
			return -EINVAL;
		memcpy(c->bare + n, esc ? esc : u, l);
		n += l;
	}
	m = snprintf(c->bare + n, sizeof(c->bare) - n, ",r=%s", c->nonce);
	if (m < 0 || (size_t)m >= sizeof(c->bare) - n)
		return -EINVAL;
	c->bare_len = n + (size_t)m;
	m = snprintf(out, cap, "n,,%s", c->bare);
	if (m < 0 || (size_t)m >= cap)
		return -EINVAL;
	*outlen = (size_t)m;
	return 0;
}

int scram_client_final(struct scram_client *c, const char *password, size_t pwlen, const char *in, size_t len,
		       char *out, size_t cap, size_t *outlen, char *why, size_t whylen)
{
	const char *e = in + len, *p = in, *r, *s, *i;
	size_t rlen, slen, ilen, wlen, am_len;
	int kl = sasl_scram_key_len(c->type), salt_len, m;
	uint8_t salt[128], salted[SCRAM_KEY_MAX], ck[SCRAM_KEY_MAX], stored[SCRAM_KEY_MAX], sig[SCRAM_KEY_MAX];
	uint8_t sk[SCRAM_KEY_MAX], proof[SCRAM_KEY_MAX];
	char am[2048], iters[16], proof64[SCRAM_KEY_MAX * 2];
	long it;
	char *end;

	if (len && in[0] == 'e' && len > 1 && in[1] == '=')
		return fail(why, whylen, -EACCES, "the server refused the client-first message");
	if (scram_attr(&p, e, 'r', &r, &rlen) < 0 || scram_attr(&p, e, 's', &s, &slen) < 0 ||
	    scram_attr(&p, e, 'i', &i, &ilen) < 0)
		return fail(why, whylen, -EPROTO, "a server-first message that is not r=..,s=..,i=..");
	/* the server's nonce starts with ours and adds its own */
	if (rlen <= strlen(c->nonce) || memcmp(r, c->nonce, strlen(c->nonce)))
		return fail(why, whylen, -EPROTO, "the server's nonce does not start with ours");
	if (ilen == 0 || ilen >= sizeof(iters))
		return fail(why, whylen, -EPROTO, "a bad iteration count");
	memcpy(iters, i, ilen);
	iters[ilen] = 0;
	it = strtol(iters, &end, 10);
	/* 4096 is RFC 7677's floor; Kafka's ceiling is 16384: a larger count
	 * would only make us spin */
	if (*end || it < 4096 || it > 16384)
		return fail(why, whylen, -EPROTO, "an iteration count outside 4096..16384");
	salt_len = scram_b64_dec(s, slen, salt, sizeof(salt));
	if (salt_len <= 0)
		return fail(why, whylen, -EPROTO, "a bad salt");
	/* client-final-without-proof: c=biws (base64 of "n,,"),r=<nonce> */
	m = snprintf(out, cap, "c=biws,r=%.*s", (int)rlen, r);
	if (m < 0 || (size_t)m >= cap)
		return fail(why, whylen, -EINVAL, "the client-final message does not fit");
	wlen = (size_t)m;
	am_len = c->bare_len + 1 + len + 1 + wlen;
	if (am_len > sizeof(am))
		return fail(why, whylen, -EINVAL, "an overlong server-first message");
	memcpy(am, c->bare, c->bare_len);
	am[c->bare_len] = ',';
	memcpy(am + c->bare_len + 1, in, len);
	am[c->bare_len + 1 + len] = ',';
	memcpy(am + c->bare_len + 2 + len, out, wlen);
	if (scram_salt_password(c->type, password, pwlen, salt, (size_t)salt_len, (int32_t)it, salted) < 0)
		return fail(why, whylen, -EIO, "PBKDF2 failed");
	scram_hmac(c->type, salted, (size_t)kl, "Client Key", 10, ck);
	scram_hash(c->type, ck, (size_t)kl, stored);
	scram_hmac(c->type, stored, (size_t)kl, am, am_len, sig);
	for (int j = 0; j < kl; j++)
		proof[j] = ck[j] ^ sig[j];
	scram_hmac(c->type, salted, (size_t)kl, "Server Key", 10, sk);
	scram_hmac(c->type, sk, (size_t)kl, am, am_len, c->server_sig);
	scram_b64_enc(proof, (size_t)kl, proof64);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(ck, sizeof(ck));
	OPENSSL_cleanse(sk, sizeof(sk));
	m = snprintf(out + wlen, cap - wlen, ",p=%s", proof64);
	if (m < 0 || (size_t)m >= cap - wlen)
		return fail(why, whylen, -EINVAL, "the client-final message does not fit");
	*outlen = wlen + (size_t)m;
	return 0;
}

int scram_client_verify(struct scram_client *c, const char *in, size_t len, char *why, size_t whylen)
{
	const char *e = in + len, *p = in, *v;
	size_t vlen;
	uint8_t sig[SCRAM_KEY_MAX + 3];
	int kl = sasl_scram_key_len(c->type), n;

	if (scram_attr(&p, e, 'e', &v, &vlen) == 0) {
		snprintf(why, whylen, "the server refused: %.*s", (int)(vlen > 100 ? 100 : vlen), v);
		return -EACCES;
	}
	p = in;
	if (scram_attr(&p, e, 'v', &v, &vlen) < 0)
		return fail(why, whylen, -EPROTO, "a server-final message without v=");
	n = scram_b64_dec(v, vlen, sig, sizeof(sig));
	if (n != kl || CRYPTO_memcmp(sig, c->server_sig, (size_t)kl))
		return fail(why, whylen, -EACCES, "the server's signature does not hold: it does not know the password");
	return 0;
}

void scram_client_fini(struct scram_client *c)
{
	OPENSSL_cleanse(c, sizeof(*c));
}
