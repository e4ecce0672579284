/* dataplane/sasl.c — PLAIN and SCRAM-SHA-256/512 server steps, SCRAM
 * credentials from passwords, JAAS user lists. See dataplane/sasl.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "dataplane/jaas.h"
#include "dataplane/sasl.h"

static const struct {
	const char *name;
	int mech;
} mechs[] = {
	{ "PLAIN", SASL_MECH_PLAIN },
	{ "SCRAM-SHA-256", SASL_MECH_SCRAM_SHA_256 },
	{ "SCRAM-SHA-512", SASL_MECH_SCRAM_SHA_512 },
};

int sasl_mech_from_name(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(mechs) / sizeof(mechs[0]); i++)
		if (strlen(mechs[i].name) == len && !memcmp(mechs[i].name, name, len))
			return mechs[i].mech;
	return 0;
}

const char *sasl_mech_name(int mech)
{
	for (size_t i = 0; i < sizeof(mechs) / sizeof(mechs[0]); i++)
		if (mechs[i].mech == mech)
			return mechs[i].name;
	return "?";
}

int sasl_scram_from_salted(int type, const uint8_t *salted, size_t salted_len, const uint8_t *salt, size_t salt_len,
			   int32_t iterations, struct sasl_scram_cred *out)
{
	int kl = sasl_scram_key_len(type);
	uint8_t client_key[SASL_KEY_MAX];

	if (!kl || (size_t)kl != salted_len || iterations < SASL_MIN_ITERATIONS || iterations > SASL_MAX_ITERATIONS ||
	    !salt_len || salt_len > SASL_SALT_MAX)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->type = (int8_t)type;
	out->iterations = iterations;
	memcpy(out->salt, salt, salt_len);
	out->salt_len = (uint8_t)salt_len;
	scram_hmac(type, salted, (size_t)kl, "Client Key", 10, client_key);
	scram_hash(type, client_key, (size_t)kl, out->stored_key);
	scram_hmac(type, salted, (size_t)kl, "Server Key", 10, out->server_key);
	OPENSSL_cleanse(client_key, sizeof(client_key));
	return 0;
}

int sasl_scram_make(int type, const char *password, size_t pwlen, const uint8_t *salt, size_t salt_len,
		    int32_t iterations, struct sasl_scram_cred *out)
{
	int kl = sasl_scram_key_len(type), rc;
	uint8_t salted[SASL_KEY_MAX], rnd[32];

	if (!kl || iterations < SASL_MIN_ITERATIONS || iterations > SASL_MAX_ITERATIONS || salt_len > SASL_SALT_MAX)
		return -EINVAL;
	if (!salt_len) {
		if (RAND_bytes(rnd, sizeof(rnd)) != 1)
			return -EIO;
		salt = rnd;
		salt_len = sizeof(rnd);
	}
	if (scram_salt_password(type, password, pwlen, salt, salt_len, iterations, salted) < 0)
		return -EIO;
	rc = sasl_scram_from_salted(type, salted, (size_t)kl, salt, salt_len, iterations, out);
	OPENSSL_cleanse(salted, sizeof(salted));
	return rc;
}

int sasl_scram_check_password(const struct sasl_scram_cred *cred, const char *password, size_t pwlen)
{
	struct sasl_scram_cred c;
	int kl = sasl_scram_key_len(cred->type), ok;

	if (!kl || sasl_scram_make(cred->type, password, pwlen, cred->salt, cred->salt_len, cred->iterations, &c) < 0)
		return -EIO;
	ok = !CRYPTO_memcmp(c.stored_key, cred->stored_key, (size_t)kl) &&
	     !CRYPTO_memcmp(c.server_key, cred->server_key, (size_t)kl);
	OPENSSL_cleanse(&c, sizeof(c));
	return ok;
}

/* ---- JAAS ------------------------------------------------------------- */

void sasl_plain_users_free(struct sasl_plain_users *u)
{
	for (int i = 0; u && i < u->n; i++) {
		free(u->u[i].name);
		OPENSSL_cleanse(u->u[i].password, strlen(u->u[i].password));
		free(u->u[i].password);
	}
	if (u) {
		free(u->u);
		u->u = NULL;
		u->n = 0;
	}
}

/* One user_<name>="<password>" option: PLAIN's user; the rest (the
 * broker's own username and password, for inter-broker SASL) is not. */
static int plain_user(void *arg, const struct jaas_option *o, char *err, size_t errlen)
{
	struct sasl_plain_users *out = arg;
	struct sasl_plain_user *n;

	if (o->klen <= 5 || strncmp(o->key, "user_", 5))
		return 0;
	if (o->klen - 5 >= SASL_USER_MAX) {
		snprintf(err, errlen, "the user name of %.45s... is longer than %d bytes", o->key, SASL_USER_MAX - 1);
		return -EINVAL;
	}
	if (!(n = realloc(out->u, sizeof(*n) * (size_t)(out->n + 1)))) /* style: allow at start */
		goto nomem;
	out->u = n;
	n[out->n].name = strndup(o->key + 5, o->klen - 5);
	n[out->n].password = strndup(o->val, o->vlen);
	if (!n[out->n].name || !n[out->n].password) {
		free(n[out->n].name);
		free(n[out->n].password);
		goto nomem;
	}
	out->n++;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

int sasl_jaas_parse(const char *jaas, struct sasl_plain_users *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (jaas_parse(jaas, NULL, plain_user, out, err, errlen) < 0) {
		sasl_plain_users_free(out);
		return -EINVAL;
	}
	return 0;
}

/* ---- steps ------------------------------------------------------------ */

static int fail(char *why, size_t whylen, int rc, const char *what)
{
	snprintf(why, whylen, "%s", what);
	return rc;
}

static void set_principal(struct sasl_conn *s, const char *user)
{
	snprintf(s->principal, sizeof(s->principal), "User:%s", user);
	s->state = SASL_DONE;
}

static int plain_step(struct sasl_conn *s, const struct sasl_creds *cr, const uint8_t *in, size_t len, char *why,
		      size_t whylen)
{
	const uint8_t *z1 = memchr(in, 0, len), *z2;
	const char *authz = (const char *)in, *user, *pw;
	size_t authz_len, user_len, pw_len;

	if (!z1 || !(z2 = memchr(z1 + 1, 0, len - (size_t)(z1 + 1 - in))))
		return fail(why, whylen, -EPROTO, "PLAIN: a message that is not authzid NUL user NUL password");
	authz_len = (size_t)(z1 - in);
	user = (const char *)z1 + 1;
	user_len = (size_t)(z2 - z1 - 1);
	pw = (const char *)z2 + 1;
	pw_len = len - (size_t)(z2 + 1 - in);
	if (!user_len || user_len >= SASL_USER_MAX)
		return fail(why, whylen, -EPROTO, "PLAIN: an empty or overlong user name");
	memcpy(s->user, user, user_len);
	s->user[user_len] = 0;
	if (authz_len && (authz_len != user_len || memcmp(authz, user, user_len)))
		return fail(why, whylen, -EACCES, "PLAIN: an authorization id other than the user name");
	for (int i = 0; cr->plain && i < cr->plain->n; i++) {
		const struct sasl_plain_user *u = &cr->plain->u[i];

		if (strcmp(u->name, s->user))
			continue;
		if (strlen(u->password) != pw_len || CRYPTO_memcmp(u->password, pw, pw_len))
			return fail(why, whylen, -EACCES, "PLAIN: wrong password");
		set_principal(s, s->user);
		return 0;
	}
	return fail(why, whylen, -EACCES, "PLAIN: unknown user");
}

static int scram_first(struct sasl_conn *s, const struct sasl_creds *cr, const char *in, size_t len, uint8_t *out,
		       size_t cap, size_t *outlen, char *why, size_t whylen)
{
	const char *e = in + len, *p = in, *bare, *v, *c;
	size_t vlen, n = 0, ul = 0;
	int type = s->mech == SASL_MECH_SCRAM_SHA_256 ? SASL_SCRAM_SHA_256 : SASL_SCRAM_SHA_512;
	const struct sasl_scram_cred *cred;
	char snonce[32], salt64[SASL_SALT_MAX * 2];
	int m;

	/* gs2-header: n or y (no channel binding), then [a=authzid] */
	if (len < 3 || (p[0] != 'n' && p[0] != 'y') || p[1] != ',')
		return fail(why, whylen, len && p[0] == 'p' ? -EACCES : -EPROTO,
			    "SCRAM: channel binding is not supported, or a bad GS2 header");
	p += 2;
	if (!(c = memchr(p, ',', (size_t)(e - p))))
		return fail(why, whylen, -EPROTO, "SCRAM: a bad GS2 header");
	bare = c + 1;
	if ((size_t)(bare - in) >= sizeof(s->gs2))
		return fail(why, whylen, -EPROTO, "SCRAM: an overlong authorization id");
	memcpy(s->gs2, in, (size_t)(bare - in));
	s->gs2[bare - in] = 0;
	p = bare;
	if (scram_attr(&p, e, 'n', &v, &vlen) < 0)
		return fail(why, whylen, -EPROTO, "SCRAM: no user name");
	for (size_t i = 0; i < vlen; i++) {   /* saslname: =2C is ',' and =3D '=' */
		char ch = v[i];

		if (ch == '=') {
			if (i + 3 > vlen)
				return fail(why, whylen, -EPROTO, "SCRAM: a bad escape in the user name");
			ch = !strncmp(v + i, "=2C", 3) ? ',' : !strncmp(v + i, "=3D", 3) ? '=' : 0;
			if (!ch)
				return fail(why, whylen, -EPROTO, "SCRAM: a bad escape in the user name");
			i += 2;
		}
		if (ul + 1 >= sizeof(s->user))
			return fail(why, whylen, -EPROTO, "SCRAM: an overlong user name");
		s->user[ul++] = ch;
	}
	s->user[ul] = 0;
	if (!ul)
		return fail(why, whylen, -EPROTO, "SCRAM: an empty user name");
	if (p[-1] != ',' && p != e)
		return fail(why, whylen, -EPROTO, "SCRAM: a bad client-first message");
	if (scram_attr(&p, e, 'r', &v, &vlen) < 0 || !vlen || vlen + 24 >= sizeof(s->nonce))
		return fail(why, whylen, -EPROTO, "SCRAM: no or an overlong nonce");
	/* extensions (Kafka's tokenauth=true asks for a delegation token:
	 * there are none here) */
	if (p < e && memmem(p, (size_t)(e - p), "tokenauth=true", 14))
		return fail(why, whylen, -EACCES, "SCRAM: delegation tokens are not supported");
	if (!(cred = cr->scram ? cr->scram(cr->arg, s->user, type) : NULL))
		return fail(why, whylen, -EACCES, "SCRAM: unknown user");
	s->cred = *cred;
	if (scram_nonce(snonce, sizeof(snonce)) < 0)
		return fail(why, whylen, -EACCES, "SCRAM: no random bytes for the nonce");
	memcpy(s->nonce, v, vlen);
	snprintf(s->nonce + vlen, sizeof(s->nonce) - vlen, "%s", snonce);
	scram_b64_enc(cred->salt, cred->salt_len, salt64);
	m = snprintf((char *)out, cap, "r=%s,s=%s,i=%d", s->nonce, salt64, cred->iterations);
	if (m < 0 || (size_t)m >= cap)
		return fail(why, whylen, -EPROTO, "SCRAM: the challenge does not fit");
	n = (size_t)(e - bare);
	if (n + 1 + (size_t)m >= sizeof(s->auth))
		return fail(why, whylen, -EPROTO, "SCRAM: an overlong client-first message");
	memcpy(s->auth, bare, n);
	s->auth[n++] = ',';
	memcpy(s->auth + n, out, (size_t)m);
	s->auth_len = n + (size_t)m;
	*outlen = (size_t)m;
	s->state = SASL_SCRAM_FINAL;
	return 1;
}

static int scram_final(struct sasl_conn *s, const char *in, size_t len, uint8_t *out, size_t cap, size_t *outlen,
		       char *why, size_t whylen)
{
	const char *e = in + len, *p = in, *v, *proof_at;
	size_t vlen, am_len;
	int type = s->cred.type, kl = sasl_scram_key_len(type), m;
	char gs2_64[200], am[2048], sig64[SASL_KEY_MAX * 2];
	uint8_t proof[SASL_KEY_MAX + 3], client_sig[SASL_KEY_MAX], client_key[SASL_KEY_MAX], stored[SASL_KEY_MAX];
	uint8_t server_sig[SASL_KEY_MAX];
	int plen;

	if (scram_attr(&p, e, 'c', &v, &vlen) < 0)
		return fail(why, whylen, -EPROTO, "SCRAM: no channel binding attribute");
	scram_b64_enc((const uint8_t *)s->gs2, strlen(s->gs2), gs2_64);
	if (vlen != strlen(gs2_64) || memcmp(v, gs2_64, vlen))
		return fail(why, whylen, -EACCES, "SCRAM: the channel binding does not match the GS2 header");
	/* the nonce ends with ours (Kafka's ScramSaslServer checks endsWith:
	 * librdkafka sends its own nonce in front of the whole of ours) */
	if (scram_attr(&p, e, 'r', &v, &vlen) < 0 || vlen < strlen(s->nonce) ||
	    memcmp(v + vlen - strlen(s->nonce), s->nonce, strlen(s->nonce)))
		return fail(why, whylen, -EACCES, "SCRAM: the nonce does not match");
	/* the proof is the last attribute */
	proof_at = NULL;
	for (const char *q = p; q + 2 <= e; q++)
		if ((q == in || q[-1] == ',') && q[0] == 'p' && q[1] == '=')
			proof_at = q;
	if (!proof_at || proof_at == in)
		return fail(why, whylen, -EPROTO, "SCRAM: no proof");
	plen = scram_b64_dec(proof_at + 2, (size_t)(e - proof_at - 2), proof, sizeof(proof));
	if (plen != kl)
		return fail(why, whylen, -EACCES, "SCRAM: a proof of the wrong length");
	/* AuthMessage: client-first-bare, server-first, client-final without proof */
	am_len = s->auth_len + 1 + (size_t)(proof_at - 1 - in);
	if (am_len > sizeof(am))
		return fail(why, whylen, -EPROTO, "SCRAM: an overlong client-final message");
	memcpy(am, s->auth, s->auth_len);
	am[s->auth_len] = ',';
	memcpy(am + s->auth_len + 1, in, (size_t)(proof_at - 1 - in));
	scram_hmac(type, s->cred.stored_key, (size_t)kl, am, am_len, client_sig);
	for (int i = 0; i < kl; i++)
		client_key[i] = proof[i] ^ client_sig[i];
	scram_hash(type, client_key, (size_t)kl, stored);
	if (CRYPTO_memcmp(stored, s->cred.stored_key, (size_t)kl))
		return fail(why, whylen, -EACCES, "SCRAM: wrong password");
	scram_hmac(type, s->cred.server_key, (size_t)kl, am, am_len, server_sig);
	scram_b64_enc(server_sig, (size_t)kl, sig64);
	m = snprintf((char *)out, cap, "v=%s", sig64);
	if (m < 0 || (size_t)m >= cap)
		return fail(why, whylen, -EPROTO, "SCRAM: the answer does not fit");
	*outlen = (size_t)m;
	set_principal(s, s->user);
	OPENSSL_cleanse(&s->cred, sizeof(s->cred));
	return 0;
}

int sasl_handshake(struct sasl_conn *s, const char *name, size_t len, unsigned enabled, int version)
{
	int mech = sasl_mech_from_name(name, len);

	if (s->state == SASL_DONE && s->reauth_ok && version >= 1) {
		/* KIP-368: a re-authentication, with the session's mechanism */
		if (mech != s->mech)
			return SASL_ERR_UNSUPPORTED_MECHANISM;
		memcpy(s->prev_principal, s->principal, sizeof(s->prev_principal));
		s->reauth = 1;
	} else if (s->state != SASL_WANT_HANDSHAKE) {
		return SASL_ERR_ILLEGAL_STATE;
	}
	if (!mech || !(enabled & (unsigned)mech))
		return SASL_ERR_UNSUPPORTED_MECHANISM;
	s->mech = mech;
	s->state = SASL_WANT_AUTH;
	s->raw = version < 1;
	return 0;
}

int sasl_reauth_too_soon(struct sasl_conn *s, int version, uint64_t now_ns)
{
	if (s->state != SASL_DONE || !s->reauth_ok || version < 1)
		return 0;   /* no re-authentication: sasl_handshake decides */
	if (s->reauth_start_ns && now_ns - s->reauth_start_ns < SASL_REAUTH_MIN_NS)
		return 1;
	s->reauth_start_ns = now_ns ? now_ns : 1;
	return 0;
}

int sasl_step(struct sasl_conn *s, const struct sasl_creds *cr, const uint8_t *in, size_t len, uint8_t *out,
	      size_t cap, size_t *outlen, char *why, size_t whylen)
{
	int rc;

	*outlen = 0;
	why[0] = 0;
	if (s->state == SASL_WANT_AUTH && s->mech == SASL_MECH_PLAIN)
		rc = plain_step(s, cr, in, len, why, whylen);
	else if (s->state == SASL_WANT_AUTH)
		rc = scram_first(s, cr, (const char *)in, len, out, cap, outlen, why, whylen);
	else if (s->state == SASL_SCRAM_FINAL)
		rc = scram_final(s, (const char *)in, len, out, cap, outlen, why, whylen);
	else
		rc = fail(why, whylen, -EPROTO, "a SaslAuthenticate out of turn");
	if (rc == 0 && s->reauth) {
		s->reauth = 0;
		if (strcmp(s->principal, s->prev_principal)) {
			snprintf(why, whylen, "Cannot change principals during re-authentication from %.64s: %.64s",
				 s->prev_principal, s->principal);
			rc = -EPERM;
		}
	}
	if (rc < 0) {
		s->state = SASL_FAILED;
		OPENSSL_cleanse(&s->cred, sizeof(s->cred));
	}
	return rc;
}

/* ---- --add-scram ------------------------------------------------------ */

/* The next key=value of "[k=v,k="v",...]" from *pp: 1, 0 at the ']', -1
 * for bad syntax. */
static int kv_next(const char **pp, char *k, size_t kcap, char *v, size_t vcap)
{
	const char *p = *pp, *s;
	size_t n;

	if (*p == ',')
		p++;
	if (*p == ']') {
		*pp = p + 1;
		return 0;
	}
	s = p;
	while (*p && *p != '=' && *p != ',' && *p != ']')
		p++;
	if (*p != '=' || (n = (size_t)(p - s)) == 0 || n >= kcap)
		return -1;
	memcpy(k, s, n);
	k[n] = 0;
	p++;
	if (*p == '"') {
		s = ++p;
		while (*p && *p != '"')
			p++;
		if (*p != '"')
			return -1;
		n = (size_t)(p - s);
		p++;
	} else {
		s = p;
		while (*p && *p != ',' && *p != ']')
			p++;
		n = (size_t)(p - s);
	}
	if (n >= vcap)
		return -1;
	memcpy(v, s, n);
	v[n] = 0;
	*pp = p;
	return 1;
}

int sasl_add_scram_parse(const char *arg, struct sasl_scram_cred *out, char **name, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '='), *p;
	char k[32], v[1024], user[SASL_USER_MAX] = "", pw[1024] = "";
	int type, iterations = SASL_MIN_ITERATIONS, have_pw = 0, rc;

	*name = NULL;
	type = !eq ? 0 : sasl_mech_from_name(arg, (size_t)(eq - arg));
	if (type != SASL_MECH_SCRAM_SHA_256 && type != SASL_MECH_SCRAM_SHA_512) {
		snprintf(err, errlen, "expected SCRAM-SHA-256=[name=NAME,password=PASSWORD] or SCRAM-SHA-512=[...]");
		return -EINVAL;
	}
	type = type == SASL_MECH_SCRAM_SHA_256 ? SASL_SCRAM_SHA_256 : SASL_SCRAM_SHA_512;
	if (eq[1] != '[') {
		snprintf(err, errlen, "expected '[' after the mechanism");
		return -EINVAL;
	}
	p = eq + 2;
	while ((rc = kv_next(&p, k, sizeof(k), v, sizeof(v))) > 0) {
		if (!strcmp(k, "name")) {
			if (strlen(v) >= sizeof(user)) {
				snprintf(err, errlen, "name: longer than %d bytes", SASL_USER_MAX - 1);
				return -EINVAL;
			}
			memcpy(user, v, strlen(v) + 1);
		} else if (!strcmp(k, "password")) {
			snprintf(pw, sizeof(pw), "%s", v);
			have_pw = 1;
		} else if (!strcmp(k, "iterations")) {
			char *end;
			long it = strtol(v, &end, 10);

			if (*end || it < SASL_MIN_ITERATIONS || it > SASL_MAX_ITERATIONS) {
				snprintf(err, errlen, "iterations: %s is not between %d and %d", v, SASL_MIN_ITERATIONS,
					 SASL_MAX_ITERATIONS);
				return -EINVAL;
			}
			iterations = (int)it;
		} else {
			snprintf(err, errlen, "unknown key '%s' (name, password, iterations)", k);
			return -EINVAL;
		}
	}
	if (rc < 0 || *p) {
		snprintf(err, errlen, "expected [key=value,...] (a value with ',' or ']' in double quotes)");
		return -EINVAL;
	}
	if (!user[0] || !have_pw) {
		snprintf(err, errlen, "both name= and password= are needed");
		return -EINVAL;
	}
	rc = sasl_scram_make(type, pw, strlen(pw), NULL, 0, iterations, out);
	OPENSSL_cleanse(pw, sizeof(pw));
	if (rc < 0 || !(*name = strdup(user))) {
		snprintf(err, errlen, "cannot make the credential");
		return rc < 0 ? rc : -ENOMEM;
	}
	out->name = *name;
	return 0;
}
