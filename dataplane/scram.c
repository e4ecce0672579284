/* dataplane/scram.c — SCRAM's primitives. See dataplane/scram.h. */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "dataplane/scram.h"

int sasl_scram_key_len(int type)
{
	return type == SASL_SCRAM_SHA_256 ? 32 : type == SASL_SCRAM_SHA_512 ? 64 : 0;
}

static const EVP_MD *scram_md(int type)
{
	return type == SASL_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
}

void scram_hmac(int type, const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t *out)
{
	unsigned int n = 0;

	HMAC(scram_md(type), key, (int)klen, msg, mlen, out, &n);
}

void scram_hash(int type, const void *in, size_t len, uint8_t *out)
{
	EVP_Digest(in, len, out, NULL, scram_md(type), NULL);
}

int scram_salt_password(int type, const char *password, size_t pwlen, const uint8_t *salt, size_t salt_len,
			int32_t iterations, uint8_t *out)
{
	return PKCS5_PBKDF2_HMAC(password, (int)pwlen, salt, (int)salt_len, iterations, scram_md(type),
				 sasl_scram_key_len(type), out) == 1 ? 0 : -EIO;
}

size_t scram_b64_enc(const uint8_t *in, size_t len, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

int scram_b64_dec(const char *in, size_t len, uint8_t *out, size_t cap)
{
	int n, pad = 0;

	if (len % 4 || len / 4 * 3 > cap)
		return -1;
	if (!len)
		return 0;
	if ((n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len)) < 0)
		return -1;
	pad = (in[len - 1] == '=') + (in[len - 2] == '=');
	return n - pad;
}

int scram_nonce(char *out, size_t cap)
{
	uint8_t rnd[18];

	if (cap < 25 || RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	scram_b64_enc(rnd, sizeof(rnd), out);
	return 0;
}

int scram_attr(const char **pp, const char *e, char a, const char **v, size_t *vlen)
{
	const char *p = *pp, *c;

	if (e - p < 2 || p[0] != a || p[1] != '=')
		return -1;
	p += 2;
	c = memchr(p, ',', (size_t)(e - p));
	*v = p;
	*vlen = c ? (size_t)(c - p) : (size_t)(e - p);
	*pp = c ? c + 1 : e;
	return 0;
}
