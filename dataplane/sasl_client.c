/* dataplane/sasl_client.c — PLAIN's client message and the turns of
 * SCRAM's client (dataplane/scram_client.c) (see dataplane/sasl_client.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "dataplane/jaas.h"
#include "dataplane/sasl_client.h"

int sasl_jaas_login(const char *jaas, char *user, size_t ulen, char *password, size_t plen, char *err,
		    size_t errlen)
{
	bool have_password;

	if (jaas_login(jaas, NULL, user, ulen, password, plen, &have_password, err, errlen) < 0)
		return -EINVAL;
	if (!*user) {
		snprintf(err, errlen, "no username=\"...\"");
		return -EINVAL;
	}
	if (!have_password) {
		snprintf(err, errlen, "no password=\"...\" for the user %s", user);
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

static int scram_type(int mech)
{
	return mech == SASL_MECH_SCRAM_SHA_256 ? SASL_SCRAM_SHA_256 : SASL_SCRAM_SHA_512;
}

/* SCRAM's three turns (dataplane/scram_client.h): client-first, then
 * client-final from server-first, then server-final's signature checked. */
static int scram_step(struct sasl_client *c, const char *in, size_t len, uint8_t *out, size_t cap, size_t *outlen,
		      char *why, size_t whylen)
{
	int rc;

	switch (c->state) {
	case SASL_CLIENT_FIRST:
		rc = scram_client_first(&c->scram, scram_type(c->mech), c->user, NULL, (char *)out, cap, outlen);
		if (rc < 0)
			return fail(c, why, whylen, rc, rc == -EIO ? "SCRAM: no random bytes for the nonce"
								   : "SCRAM: the user name is too long");
		c->state = SASL_CLIENT_FINAL;
		return 1;
	case SASL_CLIENT_FINAL:
		rc = scram_client_final(&c->scram, c->password, strlen(c->password), in, len, (char *)out, cap, outlen,
					why, whylen);
		if (rc < 0) {
			c->state = SASL_CLIENT_FAILED;
			return rc;
		}
		c->state = SASL_CLIENT_VERIFY;
		return 1;
	case SASL_CLIENT_VERIFY:
		if ((rc = scram_client_verify(&c->scram, in, len, why, whylen)) < 0) {
			c->state = SASL_CLIENT_FAILED;
			return rc;
		}
		c->state = SASL_CLIENT_DONE;
		return 0;
	default:
		return fail(c, why, whylen, -EPROTO, "a step out of turn");
	}
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
	return scram_step(c, (const char *)in, len, out, cap, outlen, why, whylen);
}
