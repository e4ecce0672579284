/* tests/fuzz/fuzz_sasl_preauth.c — libFuzzer target: what a SASL
 * listener's connection does with its bytes before it has authenticated.
 * The input is the byte stream of one connection, frames of an int32 size
 * and a body, taken up as dataplane/conn.c does: sasl_preauth_refuse
 * first (a frame over 16 KiB, an ApiKey other than ApiVersions,
 * SaslHandshake and SaslAuthenticate: the connection closes), then the
 * request decoded (kafka_request_decode) and a SaslHandshake or
 * SaslAuthenticate carried out on the connection's state
 * (sasl_handshake, sasl_step: PLAIN against a JAAS user list, SCRAM-SHA-256
 * and -512 against a credential), a bare token after a v0 handshake
 * straight to sasl_step. Traps if a refused frame would have been taken
 * up, if a step answers more than its buffer, or if the state says
 * authenticated without a principal.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/sasl.h"

#define MAX_LEN (1u << 16)

static uint8_t arena_mem[(16u + 8u) * MAX_LEN + 4096u];
static struct sasl_scram_cred creds[2];
static struct sasl_plain_user plain_u[1] = { { "alice", "alice-secret" } };
static const struct sasl_plain_users plain = { 1, plain_u };

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

static const struct sasl_scram_cred *lookup(const void *arg, const char *name, int type)
{
	(void)arg;
	return !strcmp(name, "admin") ? &creds[type == SASL_SCRAM_SHA_256 ? 0 : 1] : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	const struct sasl_creds cr = { lookup, NULL, &plain };
	struct sasl_conn s;
	size_t off = 0;

	if (!inited) {
		static const uint8_t salt[16] = "0123456789abcdef";

		check(sasl_scram_make(SASL_SCRAM_SHA_256, "admin-secret", 12, salt, 16, 4096, &creds[0]) == 0);
		check(sasl_scram_make(SASL_SCRAM_SHA_512, "admin-secret", 12, salt, 16, 4096, &creds[1]) == 0);
		creds[0].name = creds[1].name = "admin";
		inited = 1;
	}
	memset(&s, 0, sizeof(s));
	while (size - off >= 4) {
		uint32_t n = (uint32_t)data[off] << 24 | (uint32_t)data[off + 1] << 16 | (uint32_t)data[off + 2] << 8 |
			     data[off + 3];
		const uint8_t *body = data + off + 4;
		uint32_t avail = (uint32_t)(size - off - 4);
		uint8_t out[512];
		char why[160];
		size_t outlen;
		struct kafka_request req;
		struct kafka_arena a;
		int rc;

		if (n < 8 && !sasl_raw_expected(&s))
			return 0;   /* conn.c closes a frame under 8 bytes */
		if (sasl_preauth_refuse(&s, n, body, avail)) {
			check(s.state != SASL_DONE);
			return 0;   /* closed: nothing of the frame is read */
		}
		if (avail < n)
			return 0;   /* the frame never arrives whole */
		off += 4 + n;
		check(s.state == SASL_DONE || n <= SASL_PREAUTH_FRAME_MAX);
		if (s.state == SASL_DONE)
			return 0;   /* authenticated: the ordinary request path (fuzz_kafka_request) */
		if (sasl_raw_expected(&s)) {
			rc = sasl_step(&s, &cr, body, n, out, sizeof(out), &outlen, why, sizeof(why));
			check(outlen <= sizeof(out));
			if (rc < 0)
				return 0;   /* failed: closed after the delay */
			continue;
		}
		kafka_arena_init(&a, arena_mem, kafka_arena_bound(n));
		if (kafka_request_decode(body, n, &a, &req) != 0)
			return 0;   /* closed (or UNSUPPORTED_VERSION for an ApiVersions) */
		switch (req.header.RequestApiKey) {
		case KAFKA_SASL_HANDSHAKE_KEY: {
			const struct kafka_sasl_handshake_request *q = req.body;

			if (sasl_handshake(&s, q->Mechanism.ptr ? q->Mechanism.ptr : "",
					   q->Mechanism.len > 0 ? (size_t)q->Mechanism.len : 0, SASL_MECH_ALL,
					   req.header.RequestApiVersion) != 0)
				return 0;   /* answered, closed */
			break;
		}
		case KAFKA_SASL_AUTHENTICATE_KEY: {
			const struct kafka_sasl_authenticate_request *q = req.body;

			if (s.state != SASL_WANT_AUTH && s.state != SASL_SCRAM_FINAL)
				return 0;   /* ILLEGAL_SASL_STATE, closed */
			rc = sasl_step(&s, &cr, q->AuthBytes.ptr ? q->AuthBytes.ptr : (const uint8_t *)"",
				       q->AuthBytes.len > 0 ? (size_t)q->AuthBytes.len : 0, out, sizeof(out), &outlen, why,
				       sizeof(why));
			check(outlen <= sizeof(out));
			if (rc < 0)
				return 0;
			break;
		}
		default:
			check(req.header.RequestApiKey == KAFKA_API_VERSIONS_KEY);
			break;
		}
		if (s.state == SASL_DONE)
			check(!strncmp(s.principal, "User:", 5) && s.principal[5]);
	}
	return 0;
}
