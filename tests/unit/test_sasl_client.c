/* tests/unit/test_sasl_client.c — the broker's SASL client
 * (dataplane/sasl_client.h) against the server steps (dataplane/sasl.h):
 * SCRAM-SHA-256 and -512 and PLAIN logins, a wrong password refused by
 * the server, a server that does not hold the credential caught by the
 * client (its signature), a nonce not ours; and the JAAS login's
 * username and password. */
#include <errno.h>
#include <string.h>

#include "dataplane/sasl.h"
#include "dataplane/sasl_client.h"
#include "tests/unit/helpers.h"

static struct sasl_scram_cred creds[2];
static struct sasl_plain_user pu[] = { { "broker", "broker-secret" } };
static const struct sasl_plain_users plain = { 1, pu };

static const struct sasl_scram_cred *lookup(const void *arg, const char *name, int type)
{
	(void)arg;
	return !strcmp(name, "broker") ? &creds[type - 1] : NULL;
}

static const struct sasl_creds cr = { lookup, NULL, &plain };

/* A whole login: the client's steps against the server's. 0 when both
 * say done; the failing side's code otherwise (server: <0 as sasl_step,
 * client: <0 - 100). tamper: 1 flips a byte of the server-final. */
static int login(int mech, const char *user, const char *pw, int tamper)
{
	struct sasl_client c;
	struct sasl_conn s;
	uint8_t cm[1024], sm[1024];
	size_t cl = 0, sl = 0;
	char why[160];
	int rc, crc;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_handshake(&s, sasl_mech_name(mech), strlen(sasl_mech_name(mech)), SASL_MECH_ALL, 1), 0);
	sasl_client_init(&c, mech, user, pw);
	crc = sasl_client_step(&c, NULL, 0, cm, sizeof(cm), &cl, why, sizeof(why));
	for (;;) {
		cr_assert_eq(crc, 1, "%s", why);
		rc = sasl_step(&s, &cr, cm, cl, sm, sizeof(sm), &sl, why, sizeof(why));
		if (rc < 0)
			return rc;
		if (rc == 0 && tamper && sl > 3)
			sm[2] = sm[2] == 'A' ? 'B' : 'A';   /* still base64, another signature */
		crc = sasl_client_step(&c, sm, sl, cm, sizeof(cm), &cl, why, sizeof(why));
		if (crc < 0)
			return crc - 100;
		if (crc == 0) {
			cr_assert_eq(rc, 0, "the client done before the server");
			cr_assert_str_eq(s.principal + 5, user);
			sasl_client_fini(&c);
			return 0;
		}
	}
}

Test(sasl_client, logs_in_with_each_mechanism)
{
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_256, "broker-secret", 13, NULL, 0, 4096, &creds[0]), 0);
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_512, "broker-secret", 13, NULL, 0, 8192, &creds[1]), 0);
	cr_assert_eq(login(SASL_MECH_SCRAM_SHA_256, "broker", "broker-secret", 0), 0);
	cr_assert_eq(login(SASL_MECH_SCRAM_SHA_512, "broker", "broker-secret", 0), 0);
	cr_assert_eq(login(SASL_MECH_PLAIN, "broker", "broker-secret", 0), 0);
	/* the server refuses */
	cr_assert_eq(login(SASL_MECH_SCRAM_SHA_512, "broker", "wrong", 0), -EACCES);
	cr_assert_eq(login(SASL_MECH_SCRAM_SHA_256, "nobody", "x", 0), -EACCES);
	cr_assert_eq(login(SASL_MECH_PLAIN, "broker", "wrong", 0), -EACCES);
	/* the client refuses a server signature that does not hold */
	cr_assert_eq(login(SASL_MECH_SCRAM_SHA_512, "broker", "broker-secret", 1), -EACCES - 100);
}

Test(sasl_client, refuses_a_nonce_not_ours)
{
	struct sasl_client c;
	uint8_t out[512];
	size_t n;
	char why[160];
	const char *sf = "r=somebodyelses,s=c2FsdA==,i=4096";

	sasl_client_init(&c, SASL_MECH_SCRAM_SHA_256, "broker", "pw");
	cr_assert_eq(sasl_client_step(&c, NULL, 0, out, sizeof(out), &n, why, sizeof(why)), 1);
	cr_assert_eq(strncmp((char *)out, "n,,n=broker,r=", 14), 0);
	cr_assert_eq(sasl_client_step(&c, (const uint8_t *)sf, strlen(sf), out, sizeof(out), &n, why, sizeof(why)),
		     -EPROTO);
	cr_assert(strstr(why, "nonce"));
}

Test(sasl_client, jaas_login)
{
	char u[64], p[64], err[160];

	cr_assert_eq(sasl_jaas_login("org.apache.kafka.common.security.scram.ScramLoginModule required "
				     "username=\"broker\" password=\"s3cret\";", u, sizeof(u), p, sizeof(p), err,
				     sizeof(err)), 0);
	cr_assert_str_eq(u, "broker");
	cr_assert_str_eq(p, "s3cret");
	cr_assert_eq(sasl_jaas_login("x required username=\"broker\";", u, sizeof(u), p, sizeof(p), err,
				     sizeof(err)), -EINVAL);
	cr_assert(!strstr(err, "s3cret"));
	cr_assert_eq(sasl_jaas_login("x required user_broker=\"a\" password=\"b\";", u, sizeof(u), p, sizeof(p), err,
				     sizeof(err)), -EINVAL);
	/* the whole form is read (dataplane/jaas.c), not only the two options */
	cr_assert_eq(sasl_jaas_login("x maybe username=\"broker\" password=\"s3cret\";", u, sizeof(u), p, sizeof(p),
				     err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "the control flag 'maybe'") && !strstr(err, "s3cret"), "%s", err);
	cr_assert_eq(sasl_jaas_login("x required username=\"broker\" password=s3cret;", u, sizeof(u), p, sizeof(p),
				     err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "the value of password must be in double quotes"), "%s", err);
}
