/* tests/unit/test_scram_client.c — SCRAM's client side
 * (dataplane/scram_client.h): RFC 7677's SCRAM-SHA-256 example message by
 * message, whole exchanges with the broker's server side (dataplane/sasl.h)
 * for both hashes, a wrong password, a server that does not know the
 * password, a nonce that is not ours; and the password check the admin
 * endpoint's HTTP Basic uses (sasl_scram_check_password). */
#include <errno.h>
#include <string.h>

#include "dataplane/sasl.h"
#include "dataplane/scram_client.h"
#include "tests/unit/helpers.h"

Test(scram_client, rfc7677_example)
{
	static const char sfirst[] = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
	static const char cfinal[] = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
				     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
	struct scram_client c;
	char out[512], why[128];
	size_t n;

	cr_assert_eq(scram_client_first(&c, SASL_SCRAM_SHA_256, "user", "rOprNGfwEbeRWgbNEkqO", out, sizeof(out), &n), 0);
	cr_assert_str_eq(out, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
	cr_assert_eq(n, strlen(out));
	cr_assert_eq(scram_client_final(&c, "pencil", 6, sfirst, strlen(sfirst), out, sizeof(out), &n, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(out, cfinal);
	cr_assert_eq(scram_client_verify(&c, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", 46, why, sizeof(why)), 0);
	cr_assert_eq(scram_client_verify(&c, "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", 46, why, sizeof(why)),
		     -EACCES);
	cr_assert_eq(scram_client_verify(&c, "e=invalid-proof", 15, why, sizeof(why)), -EACCES);
	cr_assert(strstr(why, "invalid-proof"));
	/* a server nonce that does not extend ours */
	cr_assert_eq(scram_client_final(&c, "pencil", 6, "r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", 41, out,
					sizeof(out), &n, why, sizeof(why)), -EPROTO);
	/* an iteration count that would only make the client spin */
	cr_assert_eq(scram_client_final(&c, "pencil", 6, "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999",
					61, out, sizeof(out), &n, why, sizeof(why)), -EPROTO);
	/* saslname escapes */
	cr_assert_eq(scram_client_first(&c, SASL_SCRAM_SHA_512, "a,b=c", "xyz", out, sizeof(out), &n), 0);
	cr_assert_str_eq(out, "n,,n=a=2Cb=3Dc,r=xyz");
}

static struct sasl_scram_cred creds[2];

static const struct sasl_scram_cred *lookup(const void *arg, const char *name, int type)
{
	(void)arg;
	return !strcmp(name, "admin") ? &creds[type - 1] : NULL;
}

/* The client against the broker's server: 0, or the failing side's -errno. */
static int login(int type, const char *password)
{
	struct sasl_creds cr = { lookup, NULL, NULL };
	struct sasl_conn s;
	struct scram_client c;
	char msg[512], why[160];
	uint8_t out[512];
	size_t n, outlen;
	int rc;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_handshake(&s, type == SASL_SCRAM_SHA_256 ? "SCRAM-SHA-256" : "SCRAM-SHA-512", 13,
				    SASL_MECH_ALL, 1), 0);
	cr_assert_eq(scram_client_first(&c, type, "admin", NULL, msg, sizeof(msg), &n), 0);
	rc = sasl_step(&s, &cr, (const uint8_t *)msg, n, out, sizeof(out), &outlen, why, sizeof(why));
	cr_assert_eq(rc, 1, "%s", why);
	rc = scram_client_final(&c, password, strlen(password), (const char *)out, outlen, msg, sizeof(msg), &n, why,
				sizeof(why));
	cr_assert_eq(rc, 0, "%s", why);
	rc = sasl_step(&s, &cr, (const uint8_t *)msg, n, out, sizeof(out), &outlen, why, sizeof(why));
	if (rc < 0)
		return rc;
	cr_assert_str_eq(s.principal, "User:admin");
	rc = scram_client_verify(&c, (const char *)out, outlen, why, sizeof(why));
	scram_client_fini(&c);
	return rc;
}

Test(scram_client, exchanges_with_the_server_side)
{
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_256, "admin-secret", 12, NULL, 0, 4096, &creds[0]), 0);
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_512, "admin-secret", 12, NULL, 0, 8192, &creds[1]), 0);
	creds[0].name = creds[1].name = "admin";
	cr_assert_eq(login(SASL_SCRAM_SHA_256, "admin-secret"), 0);
	cr_assert_eq(login(SASL_SCRAM_SHA_512, "admin-secret"), 0);
	cr_assert_eq(login(SASL_SCRAM_SHA_512, "wrong"), -EACCES);
}

Test(scram_client, password_check)
{
	struct sasl_scram_cred c;

	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_512, "s3cret", 6, NULL, 0, 4096, &c), 0);
	cr_assert_eq(sasl_scram_check_password(&c, "s3cret", 6), 1);
	cr_assert_eq(sasl_scram_check_password(&c, "s3cres", 6), 0);
	cr_assert_eq(sasl_scram_check_password(&c, "s3cret!", 7), 0);
	cr_assert_eq(sasl_scram_check_password(&c, "", 0), 0);
}
