/* tests/fuzz/fuzz_tls_entry.c — libFuzzer target: the server side of an SSL
 * or SASL_SSL listener's connection as bytes from an unauthenticated peer
 * arrive, before and during the handshake. The TLS state is made as a
 * listener makes it (dataplane/tls.c: tls_server_create from a keystore
 * and truststore given as PEM text, tls_conn_new per connection), and the
 * input is fed as dataplane/conn.c feeds what it receives: in pieces into
 * tls_conn_rx / tls_conn_feed, each followed by tls_conn_read into the
 * connection's input buffer until it wants more, tls_conn_established,
 * and the ciphertext the server wants to send taken (tls_conn_tx /
 * tls_conn_sent) and thrown away; a failure ends the connection with its
 * alert taken, as conn_tls_recv does.
 *
 * The first 4 input bytes are a header: byte 0 picks the listener (bits
 * 0-1: TLS 1.2 and 1.3, 1.3 only, 1.2 only, or 1.2 and 1.3 with
 * ssl.client.auth=required, which makes a TLS 1.2 client's Certificate
 * message, sent in the clear, parsed), bytes 1-3 the sizes of the pieces
 * the rest arrives in, in turn (0: all that is left, at most one receive
 * of TLS_RX_SIZE). A fuzzer cannot complete a handshake (it would need the
 * key exchange's secrets, and the server's random is fresh each time), so
 * what this reaches is the record layer and the handshake's parsing up to
 * the failure: the pre-authentication request decoding past it is
 * fuzz_sasl_preauth's. Traps if the handshake ever says it is over or
 * plaintext comes out (a peer that cannot know the keys got through), or
 * if the thread's OpenSSL error queue is left with an entry (the next
 * connection on the shard would report it as its own failure).
 * OpenSSL itself is not instrumented (the system's library): the
 * server's answers stand in for its coverage (answers, below), and the
 * seed ClientHellos in the corpus carry the rest.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "dataplane/tls.h"

/* A self-signed P-256 certificate for CN=fuzz-broker and its key, made
 * once with `openssl req -x509 -newkey ec -pkeyopt
 * ec_paramgen_curve:P-256 -nodes -days 36500 -subj /CN=fuzz-broker`
 * (ECDSA: the server signs on every ClientHello it accepts, and P-256
 * signs in microseconds where RSA takes a millisecond). It is its own
 * CA for the listener that asks for client certificates. */
static const char cert_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBgzCCASmgAwIBAgIUFhvVicJpubR5onZVk3T+HOyIHZYwCgYIKoZIzj0EAwIw\n"
	"FjEUMBIGA1UEAwwLZnV6ei1icm9rZXIwIBcNMjYxMjAyMTY1MTQyWhgPMjEyNjEx\n"
	"MDgxNjUxNDJaMBYxFDASBgNVBAMMC2Z1enotYnJva2VyMFkwEwYHKoZIzj0CAQYI\n"
	"KoZIzj0DAQcDQgAEWkYj2v9iFCWbVpRvnpnPK4YNWLSjtKHU7Ry91QugqsLJx1Vo\n"
	"3bSC0QLHjPaO84cys0ORFEys5zFRCACsPqCLNqNTMFEwHQYDVR0OBBYEFJ3N9C6v\n"
	"dPH6JdHQUYnFkB0DTiOAMB8GA1UdIwQYMBaAFJ3N9C6vdPH6JdHQUYnFkB0DTiOA\n"
	"MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAObiHBXCxQai/9pg\n"
	"FYSvTOsAhwjuW+w1B17mjGdYbEjYAiBOjn8Bz+vvFtEJ9mE814mjFM0eYDS/gazn\n"
	"k2VsOwXB7Q==\n"
	"-----END CERTIFICATE-----\n";

static const char key_pem[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgsTONoPu9cvqELKv8\n"
	"eoGfG9j5+svmpz8pZZN2ooqhFXChRANCAARaRiPa/2IUJZtWlG+emc8rhg1YtKO0\n"
	"odTtHL3VC6CqwsnHVWjdtILRAseM9o7zhzKzQ5EUTKznMVEIAKw+oIs2\n"
	"-----END PRIVATE KEY-----\n";

#define NLISTENERS 4
static struct tls_server *listeners[NLISTENERS];
static uint8_t in[1u << 16];   /* the connection's input buffer */
static int trace;              /* FUZZ_TLS_ENTRY_TRACE set: what the server answers, on stderr */

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct { int tls12, tls13, client_auth; } kinds[NLISTENERS] = {
		{ 1, 1, TLS_CLIENT_AUTH_NONE },
		{ 0, 1, TLS_CLIENT_AUTH_NONE },
		{ 1, 0, TLS_CLIENT_AUTH_NONE },
		{ 1, 1, TLS_CLIENT_AUTH_REQUIRED },
	};
	char err[256];

	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_TLS_ENTRY_TRACE") != NULL;
	for (int i = 0; i < NLISTENERS; i++) {
		struct tls_conf conf = {
			.keystore_location = "", .cert_chain = cert_pem, .key = key_pem, .key_password = "",
			.truststore = kinds[i].client_auth ? cert_pem : "", .client_auth = kinds[i].client_auth,
			.tls12 = kinds[i].tls12, .tls13 = kinds[i].tls13, .cipher_suites = "", .principal_rules = "",
		};

		if (tls_server_create(&conf, &listeners[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "fuzz_tls_entry: listener %d: %s\n", i, err);
			abort();
		}
	}
	return 0;
}

/* OpenSSL here is the system's library, without the fuzzer's coverage
 * instrumentation: what the server answers is its signal instead, as
 * extra counters libFuzzer reads (one per alert description the server
 * sends in the clear, one per handshake message type it sends in the
 * clear, one per OpenSSL reason a connection failed for), so an input
 * that gets a new answer is kept. */
#define ANSWER_ALERT 0
#define ANSWER_HANDSHAKE 256
#define ANSWER_REASON 512
__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t answers[512 + 2048];

/* Take and throw away what the server wants to send, as the sends would,
 * counting the records' alerts and handshake messages. */
static void drain(struct tls_conn *t)
{
	const uint8_t *p;
	uint32_t n;

	while ((n = tls_conn_tx(t, &p)) > 0) {
		for (uint32_t o = 0; o + 5 < n;) {
			uint32_t len = (uint32_t)p[o + 3] << 8 | p[o + 4];

			if (trace)
				fprintf(stderr, "fuzz_tls_entry: server sends record type %u, %u bytes: %02x %02x\n",
					p[o], len, p[o + 5], o + 6 < n ? p[o + 6] : 0);
			if (p[o] == 21 && len >= 2 && o + 6 < n)
				answers[ANSWER_ALERT + p[o + 6]]++;   /* its description */
			else if (p[o] == 22)
				answers[ANSWER_HANDSHAKE + p[o + 5]]++;
			o += 5 + len;
		}
		tls_conn_sent(t, n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_conn *t;
	uint32_t piece[3];
	size_t off = 4;
	int i = 0, n = 0;

	if (size < 4)
		return 0;
	t = tls_conn_new(listeners[data[0] & 3]);
	check(t != NULL);
	for (int k = 0; k < 3; k++)
		piece[k] = data[1 + k] ? data[1 + k] : TLS_RX_SIZE;
	while (off < size && n >= 0) {
		uint32_t len = piece[i++ % 3];

		if (len > size - off)
			len = (uint32_t)(size - off);
		memcpy(tls_conn_rx(t), data + off, len);   /* one receive */
		off += len;
		check(tls_conn_feed(t, len) == 0);
		n = tls_conn_read(t, in, sizeof(in));
		check(n <= 0);                      /* no plaintext without the keys */
		check(!tls_conn_established(t));
		drain(t);                           /* the handshake's messages, or the alert */
	}
	if (trace)
		fprintf(stderr, "fuzz_tls_entry: %s\n", n == -EPROTO ? tls_conn_error(t) : n ? "closed" : "wants more");
	if (n == -EPROTO) {
		const char *why = tls_conn_error(t);

		check(why[0] != 0);                 /* a failure says why */
		if (!strncmp(why, "error:", 6))     /* "error:0A00007B:SSL routines::bad signature" */
			answers[ANSWER_REASON + (strtoul(why + 6, NULL, 16) & 0x7fffff) % 2048]++;
	}
	check(ERR_peek_error() == 0);
	tls_conn_free(t);
	return 0;
}
