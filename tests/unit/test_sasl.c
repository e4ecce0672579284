/* tests/unit/test_sasl.c — SASL's mechanisms (dataplane/sasl.h) against an
 * independent client written here on OpenSSL and against RFC 7677's
 * SCRAM-SHA-256 example, PLAIN against a JAAS user list, the
 * pre-authentication gate, --add-scram's argument; and the SCRAM records
 * of the metadata log (control/meta_scram.h): applied, snapshotted and
 * restored, removed, refused when Kafka would refuse them. */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "control/meta_scram.h"
#include "control/metalog.h"
#include "dataplane/sasl.h"
#include "tests/unit/helpers.h"

static struct sasl_scram_cred creds[2];
static struct sasl_plain_user pu[] = { { "alice", "alice-secret" }, { "bob", "bob-secret" } };
static const struct sasl_plain_users plain = { 2, pu };

static const struct sasl_scram_cred *lookup(const void *arg, const char *name, int type)
{
	(void)arg;
	return !strcmp(name, "admin") ? &creds[type - 1] : NULL;
}

static const struct sasl_creds cr = { lookup, NULL, &plain };

static int b64dec(const char *in, uint8_t *out)
{
	size_t n = strlen(in);
	int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);

	return len - (in[n - 1] == '=') - (in[n - 2] == '=');
}

/* RFC 7677's SCRAM-SHA-256 example: the credential made from "pencil"
 * gives the RFC's proof and server signature for its AuthMessage. */
Test(sasl, scram_sha256_credential_matches_rfc7677)
{
	static const char am[] = "n=user,r=rOprNGfwEbeRWgbNEkqO,"
				 "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
				 "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
	uint8_t salt[32], proof[48], want_sig[48], sig[64], ck[32], stored[32];
	struct sasl_scram_cred c;
	unsigned int n;
	int sl = b64dec("W22ZaJ0SNY7soEsUEjb6gQ==", salt);

	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_256, "pencil", 6, salt, (size_t)sl, 4096, &c), 0);
	cr_assert_eq(b64dec("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", proof), 32);
	HMAC(EVP_sha256(), c.stored_key, 32, (const uint8_t *)am, strlen(am), sig, &n);
	for (int i = 0; i < 32; i++)
		ck[i] = proof[i] ^ sig[i];
	EVP_Digest(ck, 32, stored, NULL, EVP_sha256(), NULL);
	cr_assert_eq(memcmp(stored, c.stored_key, 32), 0, "StoredKey");
	cr_assert_eq(b64dec("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", want_sig), 32);
	HMAC(EVP_sha256(), c.server_key, 32, (const uint8_t *)am, strlen(am), sig, &n);
	cr_assert_eq(memcmp(sig, want_sig, 32), 0, "ServerSignature");
}

/* A whole exchange with a client written here: the right password
 * authenticates (and the server's signature checks), a wrong one fails. */
static int scram_login(int type, const char *user, const char *password, int tamper)
{
	const EVP_MD *md = type == SASL_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
	int kl = sasl_scram_key_len(type);
	struct sasl_conn s;
	char first[128], final[512], am[1024], why[160], nonce[128], salt64[128];
	uint8_t out[512], salt[64], salted[64], ck[64], stored[64], csig[64], proof[64], sk[64], ssig[64];
	char proof64[128], ssig64[128];
	size_t outlen;
	unsigned int n;
	int i, rc;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_handshake(&s, type == SASL_SCRAM_SHA_256 ? "SCRAM-SHA-256" : "SCRAM-SHA-512", 13,
				    SASL_MECH_ALL, 1), 0);
	snprintf(first, sizeof(first), "n,,n=%s,r=clientnonce123", user);
	rc = sasl_step(&s, &cr, (const uint8_t *)first, strlen(first), out, sizeof(out), &outlen, why, sizeof(why));
	if (rc < 0)
		return rc;
	cr_assert_eq(rc, 1, "%s", why);
	out[outlen] = 0;
	cr_assert_eq(sscanf((char *)out, "r=%127[^,],s=%127[^,],i=%d", nonce, salt64, &i), 3, "%s", out);
	cr_assert(!strncmp(nonce, "clientnonce123", 14));
	PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, b64dec(salt64, salt), i, md, kl, salted);
	HMAC(md, salted, kl, (const uint8_t *)"Client Key", 10, ck, &n);
	EVP_Digest(ck, (size_t)kl, stored, NULL, md, NULL);
	snprintf(am, sizeof(am), "%s,%s,c=biws,r=%s", first + 3, (char *)out, nonce);
	HMAC(md, stored, kl, (const uint8_t *)am, strlen(am), csig, &n);
	for (int j = 0; j < kl; j++)
		proof[j] = ck[j] ^ csig[j] ^ (tamper && j == 0);
	EVP_EncodeBlock((unsigned char *)proof64, proof, kl);
	snprintf(final, sizeof(final), "c=biws,r=%s,p=%s", nonce, proof64);
	rc = sasl_step(&s, &cr, (const uint8_t *)final, strlen(final), out, sizeof(out), &outlen, why, sizeof(why));
	if (rc < 0)
		return rc;
	cr_assert_eq(rc, 0);
	out[outlen] = 0;
	HMAC(md, salted, kl, (const uint8_t *)"Server Key", 10, sk, &n);
	HMAC(md, sk, kl, (const uint8_t *)am, strlen(am), ssig, &n);
	EVP_EncodeBlock((unsigned char *)ssig64, ssig, kl);
	cr_assert(!strncmp((char *)out, "v=", 2) && !strcmp((char *)out + 2, ssig64), "%s", out);
	cr_assert_str_eq(s.principal, "User:admin");
	return 0;
}

Test(sasl, scram_exchanges_with_an_independent_client)
{
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_256, "admin-secret", 12, NULL, 0, 4096, &creds[0]), 0);
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_512, "admin-secret", 12, NULL, 0, 8192, &creds[1]), 0);
	creds[0].name = creds[1].name = "admin";
	cr_assert_eq(scram_login(SASL_SCRAM_SHA_256, "admin", "admin-secret", 0), 0);
	cr_assert_eq(scram_login(SASL_SCRAM_SHA_512, "admin", "admin-secret", 0), 0);
	cr_assert_eq(scram_login(SASL_SCRAM_SHA_512, "admin", "wrong", 0), -EACCES);
	cr_assert_eq(scram_login(SASL_SCRAM_SHA_256, "admin", "admin-secret", 1), -EACCES);
	cr_assert_eq(scram_login(SASL_SCRAM_SHA_256, "nobody", "x", 0), -EACCES);
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_256, "x", 1, NULL, 0, 100, &creds[0]), -EINVAL);
}

Test(sasl, plain_checks_the_jaas_users)
{
	struct sasl_conn s;
	uint8_t out[64];
	size_t n;
	char why[160];

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_SCRAM_SHA_512, 1), SASL_ERR_UNSUPPORTED_MECHANISM);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), SASL_ERR_ILLEGAL_STATE);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	cr_assert_str_eq(s.principal, "User:alice");
	memset(&s, 0, sizeof(s));
	s.state = SASL_WANT_AUTH;
	s.mech = SASL_MECH_PLAIN;
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"bob\0alice\0alice-secret", 22, out, sizeof(out), &n, why,
			       sizeof(why)), -EACCES);   /* another authorization id */
	cr_assert_eq(s.state, SASL_FAILED);
	cr_assert(!strstr(why, "alice-secret"));
}

/* KIP-368: a second handshake after the authentication begins a
 * re-authentication only for a v1+ client, with the session's mechanism;
 * another principal fails it; an expired session lets only SaslHandshake by. */
Test(sasl, reauthentication_keeps_the_mechanism_and_the_principal)
{
	struct sasl_conn s;
	uint8_t out[64], k17[2] = { 0, 17 }, k3[2] = { 0, 3 };
	size_t n;
	char why[160];

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	cr_assert_eq(sasl_session_expired(&s, k3, 2), 1);
	cr_assert_eq(sasl_session_expired(&s, k17, 2), 0);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), SASL_ERR_ILLEGAL_STATE);   /* v0 auth */
	s.reauth_ok = 1;
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 0), SASL_ERR_ILLEGAL_STATE);   /* a v0 handshake */
	cr_assert_eq(sasl_handshake(&s, "SCRAM-SHA-256", 13, SASL_MECH_ALL, 1), SASL_ERR_UNSUPPORTED_MECHANISM);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_session_expired(&s, k3, 2), 0);   /* re-authenticating: the pre-auth rule holds */
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	cr_assert_eq(s.state, SASL_DONE);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0bob\0bob-secret", 15, out, sizeof(out), &n, why,
			       sizeof(why)), -EPERM);
	cr_assert(strstr(why, "User:alice") && strstr(why, "User:bob"), "%s", why);
	cr_assert_eq(s.state, SASL_FAILED);
}

Test(sasl, preauth_gate_takes_only_the_three_apis_small)
{
	struct sasl_conn s = { 0 };
	uint8_t k18[2] = { 0, 18 }, k17[2] = { 0, 17 }, k36[2] = { 0, 36 }, k0[2] = { 0, 0 }, k3[2] = { 0, 3 };

	cr_assert_eq(sasl_preauth_refuse(&s, 20, k18, 2), 0);
	cr_assert_eq(sasl_preauth_refuse(&s, 20, k17, 2), 0);
	cr_assert_eq(sasl_preauth_refuse(&s, 20, k36, 2), 0);
	cr_assert_eq(sasl_preauth_refuse(&s, 20, k0, 2), 1);
	cr_assert_eq(sasl_preauth_refuse(&s, 20, k3, 2), 1);
	cr_assert_eq(sasl_preauth_refuse(&s, 100u << 20, k18, 0), 1);   /* the header alone */
	cr_assert_eq(sasl_preauth_refuse(&s, SASL_PREAUTH_FRAME_MAX + 1, k18, 2), 1);
	s.state = SASL_DONE;
	cr_assert_eq(sasl_preauth_refuse(&s, 100u << 20, k0, 2), 0);
}

Test(sasl, jaas_and_add_scram_arguments)
{
	struct sasl_plain_users u;
	struct sasl_scram_cred c;
	char err[256], *name;

	cr_assert_eq(sasl_jaas_parse("org.apache.kafka.common.security.plain.PlainLoginModule required "
				     "username=\"a\" password=\"b\" user_a=\"b\" user_x=\"y=;z\";", &u, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(u.n, 2);
	cr_assert_str_eq(u.u[1].password, "y=;z");
	sasl_plain_users_free(&u);
	cr_assert_eq(sasl_jaas_parse("user_a=\"secret", &u, err, sizeof(err)), -EINVAL);
	cr_assert(!strstr(err, "secret"), "%s", err);
	cr_assert_eq(sasl_add_scram_parse("SCRAM-SHA-512=[name=admin,password=\"p,w]\",iterations=8192]", &c, &name,
					  err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.name, "admin");
	cr_assert_eq(c.iterations, 8192);
	cr_assert_eq(c.type, SASL_SCRAM_SHA_512);
	free(name);
	cr_assert_eq(sasl_add_scram_parse("SCRAM-SHA-1=[name=a,password=b]", &c, &name, err, sizeof(err)), -EINVAL);
	cr_assert_eq(sasl_add_scram_parse("SCRAM-SHA-256=[name=a,password=hush,iterations=10]", &c, &name, err,
					  sizeof(err)), -EINVAL);
	cr_assert(!strstr(err, "hush"), "%s", err);
	cr_assert_eq(sasl_add_scram_parse("SCRAM-SHA-256=[name=a,pass=hush]", &c, &name, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "pass") && !strstr(err, "hush"), "%s", err);
}

static int restore_into(void *arg, const void *rec, size_t len)
{
	return metalog_apply(arg, rec, len, NULL);
}

Test(sasl, scram_records_apply_snapshot_and_remove)
{
	struct metalog *ml, *ml2;
	struct metalog_rec r;
	struct sasl_scram_cred c;
	const struct sasl_scram_cred *got;
	void *snap;
	size_t len;

	cr_assert_eq(metalog_image_new(1, &ml), 0);
	cr_assert_eq(sasl_scram_make(SASL_SCRAM_SHA_512, "pw", 2, NULL, 0, 4096, &c), 0);
	c.name = "bob";
	cr_assert_eq(meta_scram_build(metalog_scram(ml), &c, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	c.name = "alice";
	c.type = SASL_SCRAM_SHA_512;
	cr_assert_eq(meta_scram_build(metalog_scram(ml), &c, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	metalog_rec_free(&r);
	cr_assert_eq(metalog_scram(ml)->n, 2);
	cr_assert_str_eq(metalog_scram(ml)->c[0].name, "alice");   /* by name */
	got = meta_scram_find(metalog_scram(ml), "bob", SASL_SCRAM_SHA_512);
	cr_assert(got && got->iterations == 4096 && !memcmp(got->server_key, c.server_key, 64));
	cr_assert_null(meta_scram_find(metalog_scram(ml), "bob", SASL_SCRAM_SHA_256));
	/* a snapshot rebuilds them */
	cr_assert_eq(metalog_snapshot(ml, &snap, &len), 0);
	cr_assert_eq(metalog_image_new(1, &ml2), 0);
	cr_assert_eq(metalog_snapshot_each(snap, len, restore_into, ml2), 0);
	cr_assert_eq(metalog_scram(ml2)->n, 2);
	got = meta_scram_find(metalog_scram(ml2), "bob", SASL_SCRAM_SHA_512);
	cr_assert(got && !memcmp(got->stored_key, c.stored_key, 64) && got->salt_len == c.salt_len);
	free(snap);
	metalog_close(ml2);
	/* removal; a second one is -ENOENT at build */
	cr_assert_eq(meta_scram_build_remove(metalog_scram(ml), "bob", SASL_SCRAM_SHA_512, &r), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), 0);
	cr_assert_eq(metalog_apply(ml, r.buf, r.len, NULL), -ENOENT);
	metalog_rec_free(&r);
	cr_assert_eq(meta_scram_build_remove(metalog_scram(ml), "bob", SASL_SCRAM_SHA_512, &r), -ENOENT);
	/* what Kafka refuses is never built */
	c.iterations = 100;
	cr_assert_eq(meta_scram_build(metalog_scram(ml), &c, &r), -EINVAL);
	c.iterations = 4096;
	c.name = "";
	cr_assert_eq(meta_scram_build(metalog_scram(ml), &c, &r), -EINVAL);
	metalog_close(ml);
}

/* KIP-368 as Kafka limits it (KafkaChannel.maybeBeginServerReauthentication):
 * a re-authentication may not begin within a second of the start of the one
 * before; the first may come at once; a refused one changes nothing. */
Test(sasl, one_reauthentication_a_second)
{
	struct sasl_conn s;
	uint8_t out[64];
	size_t n;
	char why[160];
	const uint64_t t0 = 5000000000ull;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(sasl_reauth_too_soon(&s, 1, t0), 0);   /* the first authentication: not one */
	cr_assert_eq(s.reauth_start_ns, 0);
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	s.reauth_ok = 1;
	cr_assert_eq(sasl_reauth_too_soon(&s, 1, t0 + 1), 0);   /* the first re-authentication: at once */
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	cr_assert_eq(sasl_reauth_too_soon(&s, 1, t0 + 1 + SASL_REAUTH_MIN_NS - 1), 1);   /* too soon */
	cr_assert_eq(s.state, SASL_DONE);                                                 /* the session goes on */
	cr_assert_eq(sasl_reauth_too_soon(&s, 0, t0 + 2), 0);   /* a v0 handshake is no re-authentication */
	cr_assert_eq(sasl_reauth_too_soon(&s, 1, t0 + 1 + SASL_REAUTH_MIN_NS), 0);       /* a second later */
	cr_assert_eq(sasl_handshake(&s, "PLAIN", 5, SASL_MECH_ALL, 1), 0);
	cr_assert_eq(sasl_step(&s, &cr, (const uint8_t *)"\0alice\0alice-secret", 19, out, sizeof(out), &n, why,
			       sizeof(why)), 0);
	cr_assert_eq(sasl_reauth_too_soon(&s, 1, t0 + 1 + SASL_REAUTH_MIN_NS + 1), 1);
}
