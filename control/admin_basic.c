/* control/admin_basic.c — verified HTTP Basic credentials remembered as
 * keyed digests (see admin_basic.h). @thread ctl */
#include "control/admin_basic.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "dataplane/sasl.h"
#include "dataplane/scram.h"

int admin_basic_init(struct admin_basic *c)
{
	memset(c, 0, sizeof(*c));
	c->keyed = RAND_bytes(c->key, (int)sizeof(c->key)) == 1;
	return c->keyed ? 0 : -EIO;
}

void admin_basic_clear(struct admin_basic *c)
{
	OPENSSL_cleanse(c->e, sizeof(c->e));
}

/* HMAC-SHA-256 under the process's key of the credential's type and
 * stored key, the user, a 0 and the password. 0, or -EINVAL (too long). */
static int digest_of(const struct admin_basic *c, const struct sasl_scram_cred *cred, const char *user,
		     const char *password, size_t pwlen, uint8_t out[32])
{
	uint8_t msg[1 + SASL_KEY_MAX + SASL_USER_MAX + 1 + ADMIN_BASIC_PASSWORD_MAX];
	size_t kl = (size_t)sasl_scram_key_len(cred->type), ul = strlen(user), n = 0;
	unsigned outlen = 0;
	int ok;

	if (!c->keyed || kl > SASL_KEY_MAX || ul >= SASL_USER_MAX || pwlen > ADMIN_BASIC_PASSWORD_MAX)
		return -EINVAL;
	msg[n++] = (uint8_t)cred->type;
	memcpy(msg + n, cred->stored_key, kl);
	n += kl;
	memcpy(msg + n, user, ul);
	n += ul;
	msg[n++] = 0;
	memcpy(msg + n, password, pwlen);
	n += pwlen;
	ok = HMAC(EVP_sha256(), c->key, (int)sizeof(c->key), msg, n, out, &outlen) && outlen == 32;
	OPENSSL_cleanse(msg, sizeof(msg));
	return ok ? 0 : -EIO;
}

int admin_basic_lookup(struct admin_basic *c, const struct sasl_scram_cred *cred, const char *user,
		       const char *password, size_t pwlen, int64_t now_ms, uint8_t digest[32])
{
	if (digest_of(c, cred, user, password, pwlen, digest) < 0) {
		memset(digest, 0, 32);
		return 0;
	}
	for (int i = 0; i < ADMIN_BASIC_SLOTS; i++)
		if (c->e[i].until_ms > now_ms && !CRYPTO_memcmp(c->e[i].digest, digest, 32)) {
			c->hits++;
			return 1;
		}
	return 0;
}

void admin_basic_remember(struct admin_basic *c, const uint8_t digest[32], int64_t now_ms)
{
	static const uint8_t zero[32];
	int at = 0;

	if (!c->keyed || !CRYPTO_memcmp(digest, zero, 32))
		return;   /* no key, or a password too long to have a digest */
	for (int i = 0; i < ADMIN_BASIC_SLOTS; i++) {
		if (!CRYPTO_memcmp(c->e[i].digest, digest, 32) || c->e[i].until_ms <= now_ms) {
			at = i;
			break;
		}
		if (c->e[i].until_ms < c->e[at].until_ms)
			at = i;
	}
	memcpy(c->e[at].digest, digest, 32);
	c->e[at].until_ms = now_ms + ADMIN_BASIC_TTL_MS;
}
