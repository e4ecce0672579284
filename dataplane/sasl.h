/* dataplane/sasl.h — SASL authentication for the SASL_PLAINTEXT and
 * SASL_SSL listeners: the server side of PLAIN (RFC 4616) and of
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, 7677), as Kafka's
 * SaslAuthenticate carries them. Each step is CPU work only (HMAC and
 * hashes with OpenSSL's libcrypto), no I/O: it runs on the connection's
 * shard inside its SaslAuthenticate request. The credentials it checks
 * come from immutable data: the SCRAM users of the published metadata
 * snapshot (struct md_snapshot, dataplane/broker.h) and a listener's PLAIN
 * users (its JAAS user_<name>="<password>" list, parsed at start).
 *
 * Why not a SASL library: GNU SASL 2.2.0 (Debian 12's libgsasl) has no
 * SCRAM-SHA-512 (gsasl_server_support_p says 0), and Cyrus SASL looks
 * credentials up through auxprop plugins that read files or databases
 * (blocking) and loads its mechanisms with dlopen; both SCRAM variants are
 * a few HMACs over the keys Kafka already stores (docs/dependencies.md).
 *
 * Thread: a struct sasl_conn belongs to its connection's shard
 * (@thread shard); the rest is read-only once the shards serve.
 * Owns: nothing beyond its struct (fixed-size buffers: a step allocates
 * nothing).
 * Errors: see sasl_step.
 */
#ifndef SLUICE_SASL_H
#define SLUICE_SASL_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/scram.h"

/* Mechanisms, as bits of a listener's enabled set. */
enum sasl_mech {
	SASL_MECH_PLAIN = 1,
	SASL_MECH_SCRAM_SHA_256 = 2,
	SASL_MECH_SCRAM_SHA_512 = 4,
};
#define SASL_MECH_ALL (SASL_MECH_PLAIN | SASL_MECH_SCRAM_SHA_256 | SASL_MECH_SCRAM_SHA_512)

#define SASL_KEY_MAX SCRAM_KEY_MAX
#define SASL_SALT_MAX 64
#define SASL_USER_MAX 256
#define SASL_MIN_ITERATIONS 4096 /* Kafka's minimum */
#define SASL_MAX_ITERATIONS 16384 /* Kafka's maximum */
/* Before authentication every frame (ApiVersions, SaslHandshake,
 * SaslAuthenticate) is at most this long (Kafka's CVE-2022-34917: a frame
 * header alone made brokers allocate its size): a larger one closes the
 * connection before anything is allocated for it. */
#define SASL_PREAUTH_FRAME_MAX (16u * 1024)

/* One SCRAM credential as Kafka stores it (never the password). */
struct sasl_scram_cred {
	const char *name;
	int8_t type;                 /* enum sasl_scram_type */
	int32_t iterations;
	uint8_t salt_len;
	uint8_t salt[SASL_SALT_MAX];
	uint8_t stored_key[SASL_KEY_MAX], server_key[SASL_KEY_MAX];   /* the hash's size used */
};

/* A listener's PLAIN users: user_<name>="<password>" of its JAAS config. */
struct sasl_plain_user {
	char *name, *password;
};
struct sasl_plain_users {
	int n;
	struct sasl_plain_user *u;
};

/* "PLAIN" -> SASL_MECH_PLAIN ...; 0 when not one of the three. */
int sasl_mech_from_name(const char *name, size_t len);
const char *sasl_mech_name(int mech);

/* @thread any. Kafka's credential from a password: salt (random when
 * salt_len is 0, then 32 bytes), iterations, StoredKey, ServerKey. 0 or
 * -EINVAL (type, iterations outside 4096..16384). */
int sasl_scram_make(int type, const char *password, size_t pwlen, const uint8_t *salt, size_t salt_len,
		    int32_t iterations, struct sasl_scram_cred *out);

/* @thread any. The same from the salted password (Hi(password, salt,
 * i), what AlterUserScramCredentials carries): -EINVAL for a length that
 * is not the hash's, an empty salt, iterations outside 4096..16384. */
int sasl_scram_from_salted(int type, const uint8_t *salted, size_t salted_len, const uint8_t *salt, size_t salt_len,
			   int32_t iterations, struct sasl_scram_cred *out);

/* @thread any. Whether password is the one cred was made from: Hi() of
 * it with cred's salt and iteration count gives cred's StoredKey and
 * ServerKey (HTTP Basic on the admin endpoint). 1 yes, 0 no, -EIO. */
int sasl_scram_check_password(const struct sasl_scram_cred *cred, const char *password, size_t pwlen);

/* @thread main. Kafka's kafka-storage --add-scram argument,
 * "SCRAM-SHA-512=[name=admin,password=admin-secret]" (iterations= too,
 * default 4096), into a credential with a random salt; *name (heap, the caller frees it)
 * is out->name. -EINVAL with err (never quoting the password). */
int sasl_add_scram_parse(const char *arg, struct sasl_scram_cred *out, char **name, char *err, size_t errlen);

/* Parse a JAAS config's user_<name>="<password>" options (Kafka's
 * PlainLoginModule) into *out (heap: sasl_plain_users_free):
 * 0, -EINVAL with err (never quoting a password). @thread main */
int sasl_jaas_parse(const char *jaas, struct sasl_plain_users *out, char *err, size_t errlen);
void sasl_plain_users_free(struct sasl_plain_users *u);

/* What a step looks credentials up in: a SCRAM user by name and type
 * (NULL: none) and the PLAIN users (NULL: none). */
struct sasl_creds {
	const struct sasl_scram_cred *(*scram)(const void *arg, const char *name, int type);
	const void *arg;
	const struct sasl_plain_users *plain;
};

enum sasl_state { SASL_WANT_HANDSHAKE, SASL_WANT_AUTH, SASL_SCRAM_FINAL, SASL_DONE, SASL_FAILED };

struct sasl_conn {
	int state;                   /* enum sasl_state */
	int mech;                    /* chosen at the handshake */
	int raw;                     /* a v0 handshake: the tokens follow as bare size-prefixed
				      * frames (no Kafka header), as kafka-python 2.0 sends them */
	char principal[5 + SASL_USER_MAX];  /* "User:<name>" once SASL_DONE */
	/* KIP-368 (connections.max.reauth.ms): the session ends at expire_ns
	 * (shard clock; UINT64_MAX: never, set when the connection is made);
	 * a client that authenticated with SaslAuthenticate v1+ (reauth_ok)
	 * may authenticate again, SaslHandshake v1 then SaslAuthenticate, as
	 * the same principal (prev_principal) with the same mechanism. */
	uint64_t expire_ns;
	int reauth_ok;
	int reauth;                  /* a re-authentication in progress */
	uint64_t reauth_start_ns;    /* (shard clock) when the last re-authentication began,
				      * 0: none yet (sasl_reauth_too_soon) */
	char prev_principal[5 + SASL_USER_MAX];
	/* SCRAM between its two messages */
	struct sasl_scram_cred cred;
	char user[SASL_USER_MAX];
	char gs2[128];               /* the client's GS2 header, as sent */
	char nonce[128];             /* client nonce + ours */
	char auth[1024];             /* client-first-bare "," server-first */
	size_t auth_len;
};

/* Kafka's codes for a handshake refused. */
#define SASL_ERR_UNSUPPORTED_MECHANISM 33
#define SASL_ERR_ILLEGAL_STATE 34

/* A SaslHandshake naming mechanism `name` (version: the request's; v0's
 * tokens come bare, s->raw): 0, the state moves on; SASL_ERR_ILLEGAL_STATE
 * (not the first, unless it begins a re-authentication: after SASL_DONE
 * with reauth_ok, at v1+), SASL_ERR_UNSUPPORTED_MECHANISM (not in
 * `enabled`, or a re-authentication naming another mechanism). */
int sasl_handshake(struct sasl_conn *s, const char *name, size_t len, unsigned enabled, int version);

/* Kafka's limit on KIP-368 (KafkaChannel.maybeBeginServerReauthentication):
 * a re-authentication may not begin within SASL_REAUTH_MIN_NS of the
 * start of the one before (the first after the authentication may come
 * at any time). For a SaslHandshake of `version` at now_ns (shard clock):
 * 1 when it would begin a re-authentication too soon (Kafka answers it
 * ILLEGAL_SASL_STATE as a handshake on an authenticated connection, and
 * the session goes on: nothing here changes); else 0, and when it begins
 * one, its start is noted. Call it before sasl_handshake. */
#define SASL_REAUTH_MIN_NS 1000000000ull
int sasl_reauth_too_soon(struct sasl_conn *s, int version, uint64_t now_ns);

/* One SaslAuthenticate token. Returns 1: go on, out holds the challenge
 * (*outlen bytes); 0: authenticated, out holds the last message
 * (SCRAM's server-final, PLAIN's empty) and s->principal is set; -EACCES:
 * the credentials do not hold (an unknown user, a wrong password); -EPROTO:
 * a message that does not parse; -EPERM: a re-authentication that proved
 * another principal than the session's. On failure why says what for the log
 * (never a password or a proof). */
int sasl_step(struct sasl_conn *s, const struct sasl_creds *cr, const uint8_t *in, size_t len, uint8_t *out,
	      size_t cap, size_t *outlen, char *why, size_t whylen);

/* The index of a mechanism (0 PLAIN, 1 SCRAM-SHA-256, 2 SCRAM-SHA-512). */
static inline int sasl_mech_index(int mech)
{
	return mech == SASL_MECH_PLAIN ? 0 : mech == SASL_MECH_SCRAM_SHA_256 ? 1 : 2;
}

/* Whether the connection's next frame is a bare SASL token (a v0
 * handshake, the authentication not over). */
static inline int sasl_raw_expected(const struct sasl_conn *s)
{
	return s->raw && (s->state == SASL_WANT_AUTH || s->state == SASL_SCRAM_FINAL);
}

/* Before authentication (dataplane/conn.c): may a frame of `size` bytes
 * whose first `avail` bytes are at body be taken up? 1: close the
 * connection (a frame over SASL_PREAUTH_FRAME_MAX, or an ApiKey other
 * than ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36);
 * a bare token after a v0 handshake has none); 0: go on (after the
 * authentication, always). Pure: the fuzz target tests/fuzz/fuzz_sasl_preauth.c
 * drives it. */
static inline int sasl_preauth_refuse(const struct sasl_conn *s, uint32_t size, const uint8_t *body, uint32_t avail)
{
	int key;

	if (s->state == SASL_DONE)
		return 0;
	if (size > SASL_PREAUTH_FRAME_MAX)
		return 1;
	if (avail < 2 || sasl_raw_expected(s))
		return 0;
	key = (int16_t)((uint16_t)body[0] << 8 | body[1]);
	return key != 18 && key != 17 && key != 36;
}

/* After now_ns >= s->expire_ns (the caller's one comparison per request):
 * must a frame whose first `avail` bytes are at body close the
 * connection? 1 for any request but a SaslHandshake (which may begin a
 * re-authentication) once the session is over (KIP-368: Kafka closes
 * "due to expired session"); 0 during a re-authentication (the
 * pre-authentication rule holds then). Pure. */
static inline int sasl_session_expired(const struct sasl_conn *s, const uint8_t *body, uint32_t avail)
{
	if (s->state != SASL_DONE)
		return 0;
	return avail < 2 || (int16_t)((uint16_t)body[0] << 8 | body[1]) != 17;
}

#endif
