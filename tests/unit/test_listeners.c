/* tests/unit/test_listeners.c — the client listeners from Kafka's keys
 * (control/listeners.h): names through listener.security.protocol.map,
 * advertised.listeners per name, the inter-broker listener first, and the
 * refusals that name their key; and ssl.principal.mapping.rules
 * (dataplane/tls.h) as Kafka applies them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/config.h"
#include "control/listeners.h"
#include "control/quorum_transport.h"
#include "dataplane/broker.h"
#include "dataplane/peer_session.h"
#include "dataplane/sasl.h"
#include "dataplane/tls.h"
#include "tests/unit/helpers.h"

static struct config *c;
static struct broker_settings set;
static char err[512];

static void setup(void)
{
	cr_assert_eq(config_create(&c), 0);
	memset(&set, 0, sizeof(set));
	err[0] = 0;
}

static void teardown(void)
{
	config_destroy(c);
}

static void put(const char *k, const char *v)
{
	cr_assert_eq(config_set(c, k, v, NULL, err, sizeof(err)), 0, "%s=%s: %s", k, v, err);
}

TestSuite(listeners, .init = setup, .fini = teardown);

Test(listeners, named_listeners_with_their_protocols_and_advertised_addresses)
{
	put("listeners", "CLIENT://127.0.0.1:9092,SECURE://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094");
	put("listener.security.protocol.map", "CLIENT:PLAINTEXT,SECURE:SSL,CONTROLLER:PLAINTEXT");
	put("advertised.listeners", "SECURE://public.example.com:19093");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.nlisteners, 2, "the controller listener is not a client's");
	cr_assert_str_eq(set.listeners[0].name, "CLIENT");
	cr_assert_eq(set.listeners[0].tls, 0);
	cr_assert_str_eq(set.listeners[0].adv_host, "127.0.0.1");
	cr_assert_str_eq(set.listeners[1].name, "SECURE");
	cr_assert_eq(set.listeners[1].tls, 1);
	cr_assert_str_eq(set.listeners[1].adv_host, "public.example.com");
	cr_assert_eq(set.listeners[1].adv_port, 19093);
	cr_assert_eq(set.listen_port, 9092);
	cr_assert_eq(set.adv_port, 9092);
}

Test(listeners, the_inter_broker_listener_comes_first)
{
	put("listeners", "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092,INTERNAL://10.0.0.1:9095");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT");
	put("inter.broker.listener.name", "INTERNAL");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(set.listeners[0].name, "INTERNAL");
	cr_assert_str_eq(set.adv_host, "10.0.0.1");
	cr_assert_eq(set.adv_port, 9095);
	cr_assert_str_eq(set.listeners[1].name, "SSL");
	cr_assert_str_eq(set.listeners[2].name, "PLAINTEXT");
}

Test(listeners, refusals_name_the_key)
{
	put("listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093");
	put("inter.broker.listener.name", "NOPE");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "inter.broker.listener.name"), "%s", err);
	put("inter.broker.listener.name", "");
	put("listeners", "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert(set.listeners[1].sasl && set.listeners[1].tls);
	cr_assert_eq(set.listeners[1].sasl_mechs, SASL_MECH_SCRAM_SHA_256 | SASL_MECH_SCRAM_SHA_512);
	/* KIP-368: the broker's lifetime, one listener's for one mechanism */
	put("connections.max.reauth.ms", "3600000");
	put("listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms", "2000");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.listeners[1].reauth_ms[sasl_mech_index(SASL_MECH_SCRAM_SHA_256)], 3600000);
	cr_assert_eq(set.listeners[1].reauth_ms[sasl_mech_index(SASL_MECH_SCRAM_SHA_512)], 2000);
	/* the listener's own, between the two as Kafka reads them: its 0 is
	 * set (no re-authentication there), not absent */
	put("listener.name.sasl_ssl.connections.max.reauth.ms", "0");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.listeners[1].reauth_ms[sasl_mech_index(SASL_MECH_SCRAM_SHA_256)], 0);
	cr_assert_eq(set.listeners[1].reauth_ms[sasl_mech_index(SASL_MECH_SCRAM_SHA_512)], 2000);
	put("listener.name.sasl_ssl.connections.max.reauth.ms", "5000");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.listeners[1].reauth_ms[sasl_mech_index(SASL_MECH_SCRAM_SHA_256)], 5000);
	cr_assert_neq(config_set(c, "listener.name.sasl_ssl.connections.max.reauth.ms", "-5", NULL, err, sizeof(err)),
		      0);
	cr_assert(strstr(err, "listener.name.sasl_ssl.connections.max.reauth.ms"), "%s", err);
	put("listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms", "-1");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms"), "%s", err);
	put("listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms", "0");
	put("connections.max.reauth.ms", "0");
	put("sasl.enabled.mechanisms", "GSSAPI");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -ENOTSUP);
	cr_assert(strstr(err, "sasl.enabled.mechanisms") && strstr(err, "GSSAPI"), "%s", err);
	put("listener.name.sasl_ssl.sasl.enabled.mechanisms", "PLAIN");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.sasl_ssl.plain.sasl.jaas.config"), "%s", err);
	put("listener.name.sasl_ssl.plain.sasl.jaas.config", "PlainLoginModule required user_a=\"b;");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.sasl_ssl.plain.sasl.jaas.config") && !strstr(err, "\"b"), "%s", err);
	put("listener.name.sasl_ssl.plain.sasl.jaas.config",
	    "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"s3cret\" user_bob=\"x\";");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.listeners[1].sasl_mechs, SASL_MECH_PLAIN);
	cr_assert_eq(set.listeners[1].plain->n, 2);
	cr_assert_str_eq(set.listeners[1].plain->u[0].name, "alice");
	cr_assert_str_eq(set.listeners[1].plain->u[0].password, "s3cret");
	put("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512");
	put("listeners", "CLIENT://127.0.0.1:9092");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.security.protocol.map"), "%s", err);
	put("listener.security.protocol.map", "CLIENT:TLS");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.security.protocol.map"), "%s", err);
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL");
	put("listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "port"), "%s", err);
	put("listeners", "PLAINTEXT://127.0.0.1:9092");
	put("advertised.listeners", "SSL://x:1");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "advertised.listeners"), "%s", err);
	cr_assert_neq(config_set(c, "ssl.enabled.protocols", "TLSv1.1,TLSv1.2", NULL, err, sizeof(err)), 0);
	cr_assert(strstr(err, "ssl.enabled.protocols"), "%s", err);
}

/* inter.broker.listener.name or security.inter.broker.protocol over SSL
 * or SASL: the broker's client side (listeners_peer_sec) and what it
 * refuses, naming the key. */
Test(listeners, a_secured_inter_broker_listener)
{
	struct peer_sec sec;
	struct tls_conf tc = { .keystore_location = "", .cert_chain = "", .key = "", .key_password = "",
			       .truststore = "", .cipher_suites = "", .tls12 = 1, .tls13 = 1 };

	put("listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), 0, "PLAINTEXT: nothing to do");
	put("security.inter.broker.protocol", "SSL");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(set.listeners[0].name, "SSL");
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "ssl.truststore.location"), "%s", err);
	put("inter.broker.listener.name", "SASL_PLAINTEXT");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "security.inter.broker.protocol"), "both: %s", err);
	put("security.inter.broker.protocol", "");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(set.listeners[0].name, "SASL_PLAINTEXT");
	/* Kafka's default mechanism, GSSAPI, is not there */
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "sasl.mechanism.inter.broker.protocol"), "%s", err);
	put("sasl.mechanism.inter.broker.protocol", "PLAIN");
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "not enabled"), "%s", err);
	put("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512");
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"), "%s", err);
	put("listener.name.SASL_PLAINTEXT.scram-sha-512.sasl.jaas.config",
	    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\";");
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "password"), "%s", err);
	put("listener.name.SASL_PLAINTEXT.scram-sha-512.sasl.jaas.config",
	    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" "
	    "password=\"b-secret\";");
	cr_assert_eq(listeners_peer_sec(c, &set, &tc, &sec, err, sizeof(err)), 1, "%s", err);
	cr_assert(sec.sasl && !sec.tls && sec.mech == SASL_MECH_SCRAM_SHA_512);
	cr_assert_str_eq(sec.user, "broker");
	cr_assert_str_eq(sec.password, "b-secret");
}

/* The controller listener's protocol (the first name of
 * controller.listener.names in listener.security.protocol.map):
 * PLAINTEXT by default, SSL with mutual TLS whatever ssl.client.auth says,
 * SASL_SSL as SSL, SASL_PLAINTEXT as PLAINTEXT (SASL: below). */
Test(listeners, the_controller_listener_protocol)
{
	struct tls_conf tc;

	put("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 0, "not in the map: PLAINTEXT");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 0, "%s", err);
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL");
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(set.nlisteners, 1, "the controller listener is not a client's");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "ssl.keystore.location") && strstr(err, "CONTROLLER"), "%s", err);
	put("ssl.keystore.location", "/etc/sluice/node.pem");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "ssl.truststore.location"), "mutual TLS needs the CA: %s", err);
	put("ssl.truststore.location", "/etc/sluice/ca.pem");
	put("ssl.client.auth", "none");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 1, "%s", err);
	cr_assert_eq(tc.client_auth, TLS_CLIENT_AUTH_REQUIRED);
	cr_assert_str_eq(tc.keystore_location, "/etc/sluice/node.pem");
	cr_assert_str_eq(tc.truststore, "/etc/sluice/ca.pem");
	/* its own listener.name.controller.ssl.* keys, as any listener's:
	 * the keystore and the truststore each taken whole */
	put("listener.name.controller.ssl.keystore.location", "/etc/sluice/quorum.pem");
	put("listener.name.controller.ssl.truststore.location", "/etc/sluice/quorum-ca.pem");
	cr_assert_eq(listeners_check_keys(c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 1, "%s", err);
	cr_assert_str_eq(tc.keystore_location, "/etc/sluice/quorum.pem");
	cr_assert_str_eq(tc.truststore, "/etc/sluice/quorum-ca.pem");
	/* the first name is the one used */
	put("controller.listener.names", "QUORUM,CONTROLLER");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,QUORUM:PLAINTEXT");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 0, "%s", err);
	put("controller.listener.names", "CONTROLLER");
	/* SASL_SSL: the same TLS; SASL_PLAINTEXT: none */
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 1, "%s", err);
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT");
	cr_assert_eq(listeners_controller_tls(c, &tc, err, sizeof(err)), 0, "%s", err);
}

/* SASL on the controller listener: PLAIN only (SCRAM refused with Kafka's
 * reason, GSSAPI not implemented), the node's login and its users from
 * listener.name.<l>.plain.sasl.jaas.config, each error naming its key. */
Test(listeners, the_controller_listener_sasl)
{
	struct qt_sasl qs;

	put("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 0, "not SASL");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), -ENOTSUP, "Kafka's default, GSSAPI");
	cr_assert(strstr(err, "sasl.mechanism.controller.protocol") && strstr(err, "GSSAPI"), "%s", err);
	put("sasl.mechanism.controller.protocol", "SCRAM-SHA-512");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "sasl.mechanism.controller.protocol") && strstr(err, "metadata log"), "%s", err);
	put("sasl.mechanism.controller.protocol", "PLAIN");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.controller.plain.sasl.jaas.config"), "%s", err);
	put("listener.name.controller.plain.sasl.jaas.config",
	    "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"pw-a\";");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "username") && !strstr(err, "pw-a"), "%s", err);
	put("listener.name.controller.plain.sasl.jaas.config",
	    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"pw-a\";");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), -EINVAL, "nobody accepted");
	cr_assert(strstr(err, "user_") && !strstr(err, "pw-a"), "%s", err);
	put("listener.name.controller.plain.sasl.jaas.config",
	    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"pw-a\" "
	    "user_a=\"pw-a\" user_b=\"pw-b\";");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 1, "%s", err);
	cr_assert_str_eq(qs.login.user, "a");
	cr_assert_str_eq(qs.login.password, "pw-a");
	cr_assert_eq(qs.login.sasl, 1);
	cr_assert_eq(qs.login.tls, 0);
	cr_assert_eq(qs.users.n, 2);
	cr_assert_eq(qs.lifetime_ms, 0, "sessions never end by default");
	sasl_plain_users_free(&qs.users);

	/* connections.max.reauth.ms: the listener's for PLAIN, else the
	 * listener's, else the broker's, as for a client listener */
	put("connections.max.reauth.ms", "60000");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 1, "%s", err);
	cr_assert_eq(qs.lifetime_ms, 60000);
	sasl_plain_users_free(&qs.users);
	put("listener.name.controller.connections.max.reauth.ms", "0");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 1, "%s", err);
	cr_assert_eq(qs.lifetime_ms, 0, "a 0 set on the listener wins");
	sasl_plain_users_free(&qs.users);
	put("listener.name.controller.plain.connections.max.reauth.ms", "3000");
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 1, "%s", err);
	cr_assert_eq(qs.lifetime_ms, 3000);
	sasl_plain_users_free(&qs.users);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(listeners, the_controller_listeners_jaas_config_reloads)
{
	char *dir = test_tmpdir(), path[600], text[1400], *argv[8];
	struct qt_counters qc = { 0 };
	struct qt_sasl qs;
	struct broker *b = calloc(1, sizeof(*b));
	const char *jaas = "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
			   "PlainLoginModule required username=\"%s\" password=\"%s\" %s;\n";
	const char *head = "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
			   "controller.listener.names=CONTROLLER\n"
			   "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT\n"
			   "sasl.mechanism.controller.protocol=PLAIN\n";
	int n;

	cr_assert(b);
	snprintf(path, sizeof(path), "%s/server.properties", dir);
	n = snprintf(text, sizeof(text), "%s", head);
	snprintf(text + n, sizeof(text) - (size_t)n, jaas, "ctl", "old", "user_ctl=\"old\"");
	write_file(path, text);
	cr_assert_eq(config_load_file(c, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(listeners_controller_sasl(c, &qs, err, sizeof(err)), 1, "%s", err);
	argv[0] = "sluiced";
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = "--shards";
	argv[4] = "1";
	argv[5] = NULL;
	b->cfg = c;
	b->argc = 5;
	b->argv = argv;
	b->quorum_port = &qc;
	cr_assert_eq(listeners_controller_sasl_reload(b, err, sizeof(err)), -ENOENT, "no SASL listener given");
	b->quorum_sasl = &qs;

	/* the new user beside the old, then the new login */
	snprintf(text + n, sizeof(text) - (size_t)n, jaas, "ctl2", "new", "user_ctl=\"old\" user_ctl2=\"new\"");
	write_file(path, text);
	cr_assert_eq(listeners_controller_sasl_reload(b, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "listener.name.controller.plain.sasl.jaas.config") && strstr(err, path) &&
		  !strstr(err, "new\"") && strstr(err, "2 users"), "%s", err);
	cr_assert_str_eq(qs.login.user, "ctl2");
	cr_assert_str_eq(qs.login.password, "new");
	cr_assert_eq(qs.users.n, 2);
	cr_assert_eq(qc.sasl_reloads[0], 1);

	/* one that does not validate: named with its file, the previous stay */
	snprintf(text + n, sizeof(text) - (size_t)n, jaas, "ctl3", "", "");
	write_file(path, text);
	cr_assert_eq(listeners_controller_sasl_reload(b, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.controller.plain.sasl.jaas.config") && strstr(err, path), "%s", err);
	cr_assert_str_eq(qs.login.user, "ctl2");
	cr_assert_eq(qs.users.n, 2);
	cr_assert_eq(qc.sasl_reloads[1], 1);
	/* the key gone, a file that does not read: the same */
	write_file(path, head);
	cr_assert_eq(listeners_controller_sasl_reload(b, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.controller.plain.sasl.jaas.config") && strstr(err, path), "%s", err);
	write_file(path, "no.such.key=1\n");
	cr_assert(listeners_controller_sasl_reload(b, err, sizeof(err)) < 0);
	cr_assert(strstr(err, path), "%s", err);
	cr_assert_eq(qc.sasl_reloads[1], 3);
	cr_assert_str_eq(qs.login.password, "new");

	/* --set wins over the file, as at start */
	snprintf(text + n, sizeof(text) - (size_t)n, jaas, "ctl2", "new", "user_ctl2=\"new\"");
	write_file(path, text);
	argv[3] = "--set";
	argv[4] = "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
		  "PlainLoginModule required username=\"s\" password=\"s\" user_s=\"s\";";
	cr_assert_eq(listeners_controller_sasl_reload(b, err, sizeof(err)), 1, "%s", err);
	cr_assert_str_eq(qs.login.user, "s");
	cr_assert_eq(qs.users.n, 1);
	cr_assert_eq(qc.sasl_reloads[0], 2);

	sasl_plain_users_free(&qs.users);
	unlink(path);
	rmdir(dir);
	free(dir);
	free(b);
}

Test(listeners, principal_mapping_rules_as_kafka)
{
	char out[256];

	cr_assert_eq(tls_principal_map("DEFAULT", "CN=app,O=acme", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "CN=app,O=acme");
	cr_assert_eq(tls_principal_map("RULE:^CN=([^,]*),O=(.*)$/$1@$2/L,DEFAULT", "CN=App,O=Acme", out, sizeof(out)),
		     0);
	cr_assert_str_eq(out, "app@acme");
	cr_assert_eq(tls_principal_map("RULE:^CN=([a-z]+),O=acme$/$1/U", "CN=app,O=acme", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "APP");
	cr_assert_eq(tls_principal_map("RULE:^CN=x$/y/", "CN=app,O=acme", out, sizeof(out)), -ENOENT,
		     "no rule matches: refused");
	cr_assert_eq(tls_principal_rules_check("RULE:^CN=(.*)$/$1/,DEFAULT", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(tls_principal_rules_check("RULE:^CN=(/", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "ssl.principal.mapping.rules"), "%s", err);
	cr_assert_eq(tls_principal_rules_check("SOMETHING", err, sizeof(err)), -EINVAL);
}

/* listener.name.<l>.ssl.* over the broker's ssl.* (the name without case),
 * a keystore or truststore taken whole, and the keys naming no listener
 * refused naming the key. */
Test(listeners, per_listener_ssl_keys)
{
	struct tls_conf tc;

	put("listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9094");
	put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,EXTERNAL:SASL_SSL,SPARE:SSL");
	put("sasl.enabled.mechanisms", "SCRAM-SHA-512");
	put("ssl.keystore.location", "/broker.pem");
	put("ssl.truststore.location", "/ca.pem");
	put("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256");
	put("listener.name.EXTERNAL.ssl.keystore.certificate.chain", "/ext-chain.pem");
	put("listener.name.external.ssl.keystore.key", "/ext-key.pem");
	put("listener.name.external.ssl.client.auth", "required");
	put("listener.name.external.ssl.enabled.protocols", "TLSv1.3");
	put("listener.name.spare.ssl.client.auth", "requested");   /* a name only in the map: taken */
	cr_assert_eq(config_set(c, "listener.name.ssl.ssl.client.auth", "maybe", NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.ssl.ssl.client.auth"), "%s", err);
	cr_assert_eq(listeners_resolve(c, 1, &set, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(listeners_check_keys(c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(listeners_tls_conf(c, &set, 0, &tc, err, sizeof(err)), 0, "PLAINTEXT has no TLS");
	/* SSL: the broker's keys */
	cr_assert_eq(listeners_tls_conf(c, &set, 1, &tc, err, sizeof(err)), 1, "%s", err);
	cr_assert_str_eq(tc.keystore_location, "/broker.pem");
	cr_assert_str_eq(tc.truststore, "/ca.pem");
	cr_assert_eq(tc.client_auth, TLS_CLIENT_AUTH_NONE);
	cr_assert(tc.tls12 && tc.tls13);
	/* EXTERNAL: its own keystore, whole (not the broker's location), the
	 * broker's truststore and suites */
	cr_assert_eq(listeners_tls_conf(c, &set, 2, &tc, err, sizeof(err)), 1, "%s", err);
	cr_assert_str_eq(tc.keystore_location, "");
	cr_assert_str_eq(tc.cert_chain, "/ext-chain.pem");
	cr_assert_str_eq(tc.key, "/ext-key.pem");
	cr_assert_str_eq(tc.truststore, "/ca.pem");
	cr_assert_str_eq(tc.cipher_suites, "TLS_AES_128_GCM_SHA256");
	cr_assert_eq(tc.client_auth, TLS_CLIENT_AUTH_REQUIRED);
	cr_assert(!tc.tls12 && tc.tls13);
	/* a listener's own truststore, empty: named when client auth needs it */
	put("listener.name.external.ssl.truststore.certificates", "");
	cr_assert_eq(listeners_tls_conf(c, &set, 2, &tc, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.external.ssl.truststore.location"), "%s", err);
	/* a name no listener has */
	put("listener.name.extrnal.ssl.key.password", "x");
	cr_assert_eq(listeners_check_keys(c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listener.name.extrnal.ssl.key.password") && strstr(err, "extrnal"), "%s", err);
}
