/* control/listeners.c — the broker's Kafka client listeners (see
 * control/listeners.h). @thread main */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "control/config.h"
#include "control/listeners.h"
#include "control/quorum_tls.h"
#include "control/quorum_transport.h"
#include "dataplane/broker.h"
#include "dataplane/jaas.h"
#include "dataplane/peer_session.h"
#include "dataplane/sasl.h"
#include "dataplane/tls.h"

/* The next comma-separated item of *pp, trimmed, into buf: 1, 0 at the
 * end, -1 when it does not fit. */
static int next_item(const char **pp, char *buf, size_t len)
{
	const char *p = *pp, *e;
	size_t n;

	while (*p == ',' || isspace((unsigned char)*p))
		p++;
	if (!*p)
		return 0;
	e = strchr(p, ',');
	n = e ? (size_t)(e - p) : strlen(p);
	*pp = p + n;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	if (n >= len)
		return -1;
	memcpy(buf, p, n);
	buf[n] = 0;
	return 1;
}

/* Whether name is an element of the comma-separated list. */
static int in_list(const char *list, const char *name)
{
	const char *p = list;
	char item[256];

	while (next_item(&p, item, sizeof(item)) > 0)
		if (!strcmp(item, name))
			return 1;
	return 0;
}

/* The protocol listener.security.protocol.map gives name, into proto; 0,
 * -ENOENT when it names none, -EINVAL for a bad map. */
static int map_protocol(const char *map, const char *name, char *proto, size_t len, char *err, size_t errlen)
{
	static const char *const known[] = { "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL" };
	const char *p = map;
	char item[256];
	int rc, found = -ENOENT;

	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		char *colon = rc > 0 ? strchr(item, ':') : NULL;
		unsigned i;

		if (!colon || colon == item) {
			snprintf(err, errlen, "listener.security.protocol.map: cannot parse '%.100s' (expected "
				 "NAME:PROTOCOL, comma-separated)", rc > 0 ? item : "an entry too long");
			return -EINVAL;
		}
		*colon = 0;
		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (!strcasecmp(colon + 1, known[i]))
				break;
		if (i == sizeof(known) / sizeof(known[0])) {
			snprintf(err, errlen, "listener.security.protocol.map: %s:%s: unknown security protocol "
				 "(PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", item, colon + 1);
			return -EINVAL;
		}
		if (!strcmp(item, name) && found == -ENOENT) {
			snprintf(proto, len, "%s", known[i]);
			found = 0;
		}
	}
	return found;
}

/* Split NAME://host:port. */
static int parse_entry(const char *key, const char *item, char *name, size_t namelen, char *host, size_t hostlen,
		       int *port, char *err, size_t errlen)
{
	const char *sep = strstr(item, "://");

	if (!sep || sep == item || (size_t)(sep - item) >= namelen || config_listener(item, host, hostlen, port) < 0) {
		snprintf(err, errlen, "%s: cannot parse '%.200s' (expected NAME://HOST:PORT)", key, item);
		return -EINVAL;
	}
	memcpy(name, item, (size_t)(sep - item));
	name[sep - item] = 0;
	return 0;
}

/* KIP-368's session lifetime on listener name, by sasl_mech_index(): the
 * listener's for the mechanism, else the listener's, else the broker's
 * (Kafka's SaslChannelBuilder on the listener-prefixed configs: a 0 given
 * wins over the broker's). 0, or -EINVAL naming the key. */
static int listener_reauth(const struct config *c, const char *name, int64_t out[3], char *err, size_t errlen)
{
	static const char *const mech_keys[3] = { "plain.connections.max.reauth.ms",
						  "scram-sha-256.connections.max.reauth.ms",
						  "scram-sha-512.connections.max.reauth.ms" };
	const char *lv = config_listener_str(c, name, "connections.max.reauth.ms");
	long long base = lv ? strtoll(lv, NULL, 10) : (long long)config_int(c, "connections.max.reauth.ms");
	char key[200];

	for (int i = 0; i < 3; i++) {
		const char *v = config_listener_str(c, name, mech_keys[i]);
		char *end;
		long long ms;

		out[i] = base;
		if (!v)
			continue;
		errno = 0;
		ms = strtoll(v, &end, 10);
		if (errno || end == v || *end || ms < 0) {
			snprintf(key, sizeof(key), "listener.name.%s.%s", name, mech_keys[i]);
			for (char *k = key; *k; k++)
				*k = (char)tolower((unsigned char)*k);
			snprintf(err, errlen, "%s: '%.64s' is not a number of milliseconds >= 0", key, v);
			return -EINVAL;
		}
		out[i] = ms;
	}
	return 0;
}

/* A SASL listener's mechanisms (listener.name.<l>.sasl.enabled.mechanisms,
 * else sasl.enabled.mechanisms) and PLAIN's users (its
 * listener.name.<l>.plain.sasl.jaas.config). */
static int listener_sasl(const struct config *c, struct broker_listener *one, char *err, size_t errlen)
{
	char key[160], item[64];
	const char *mechs = config_listener_str(c, one->name, "sasl.enabled.mechanisms"), *p, *jaas;

	if (listener_reauth(c, one->name, one->reauth_ms, err, errlen) < 0)
		return -EINVAL;

	if (mechs)
		snprintf(key, sizeof(key), "listener.name.%s.sasl.enabled.mechanisms", one->name);
	else
		snprintf(key, sizeof(key), "sasl.enabled.mechanisms");
	for (char *k = key; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	p = mechs ? mechs : config_str(c, "sasl.enabled.mechanisms");
	one->sasl_mechs = 0;
	while (next_item(&p, item, sizeof(item)) != 0) {
		int m = sasl_mech_from_name(item, strlen(item));

		if (!m) {
			snprintf(err, errlen, "%s: %s: %s (Sluice has PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; GSSAPI "
				 "(Kerberos) and OAUTHBEARER are not implemented: docs/security.md)", key, item,
				 !strcmp(item, "GSSAPI") || !strcmp(item, "OAUTHBEARER") ? "not implemented"
											 : "unknown mechanism");
			return -ENOTSUP;
		}
		one->sasl_mechs |= (unsigned)m;
	}
	if (!one->sasl_mechs) {
		snprintf(err, errlen, "%s: the SASL listener %s has no mechanism enabled", key, one->name);
		return -EINVAL;
	}
	if (!(one->sasl_mechs & SASL_MECH_PLAIN))
		return 0;
	snprintf(key, sizeof(key), "listener.name.%s.plain.sasl.jaas.config", one->name);
	for (char *k = key; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	if (!(jaas = config_listener_str(c, one->name, "plain.sasl.jaas.config"))) {
		snprintf(err, errlen, "%s: the listener %s enables PLAIN, whose users are this JAAS config's "
			 "user_<name>=\"<password>\" options (Kafka's PlainLoginModule): set it "
			 "(docs/security.md)", key, one->name);
		return -EINVAL;
	}
	if (!(one->plain = calloc(1, sizeof(*one->plain))))
		return -ENOMEM;
	{
		char why[256];

		if (sasl_jaas_parse(jaas, one->plain, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s: %s", key, why);
			free(one->plain);
			one->plain = NULL;
			return -EINVAL;
		}
	}
	return 0;
}

int listeners_resolve(const struct config *c, int broker, struct broker_settings *set, char *err, size_t errlen)
{
	const char *ctl = config_str(c, "controller.listener.names");
	const char *map = config_str(c, "listener.security.protocol.map");
	const char *inter = config_str(c, "inter.broker.listener.name");
	const char *inter_proto = config_str(c, "security.inter.broker.protocol");
	const char *p = config_str(c, "listeners");
	struct broker_listener *l = set->listeners;
	char item[512], proto[32];
	int n = 0, rc, first = -1;

	set->nlisteners = 0;
	if (*inter && *inter_proto) {
		snprintf(err, errlen, "security.inter.broker.protocol: set it or inter.broker.listener.name, not both "
			 "(as Kafka)");
		return -EINVAL;
	}
	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		struct broker_listener one = { 0 };

		if (rc < 0 || parse_entry("listeners", item, one.name, sizeof(one.name), one.host, sizeof(one.host),
					  &one.port, err, errlen) < 0) {
			if (rc < 0)
				snprintf(err, errlen, "listeners: an entry is too long");
			return -EINVAL;
		}
		rc = map_protocol(map, one.name, proto, sizeof(proto), err, errlen);
		if (rc == -EINVAL)
			return rc;
		if (rc == -ENOENT) {
			if (in_list(ctl, one.name))
				continue;   /* a controller listener: PLAINTEXT, as Kafka's default */
			snprintf(err, errlen, "listeners: %s: listener.security.protocol.map gives no security protocol "
				 "for the name %s (add %s:PLAINTEXT or %s:SSL to it)", item, one.name, one.name, one.name);
			return -EINVAL;
		}
		if (in_list(ctl, one.name))
			continue;   /* listeners_controller_tls, listeners_controller_sasl */
		if (!broker)
			continue;   /* node_role refuses a client listener on a controller only */
		if (n == BROKER_MAX_LISTENERS) {
			snprintf(err, errlen, "listeners: more than %d client listeners", BROKER_MAX_LISTENERS);
			return -EINVAL;
		}
		for (int i = 0; i < n; i++)
			if (!strcmp(l[i].name, one.name) || l[i].port == one.port) {
				snprintf(err, errlen, "listeners: %s: %s", item,
					 !strcmp(l[i].name, one.name) ? "the listener name is used twice"
								      : "the port is another listener's");
				return -EINVAL;
			}
		one.tls = !strcmp(proto, "SSL") || !strcmp(proto, "SASL_SSL");
		one.sasl = !strncmp(proto, "SASL_", 5);
		if (one.sasl && (rc = listener_sasl(c, &one, err, errlen)) < 0)
			return rc;
		snprintf(one.adv_host, sizeof(one.adv_host), "%s", one.host);
		one.adv_port = one.port;
		if (*inter ? !strcmp(one.name, inter) : *inter_proto ? first < 0 && !strcasecmp(proto, inter_proto)
									: first < 0)
			first = n;
		l[n++] = one;
	}
	/* what each listener's clients are told */
	p = config_advertised_listeners(c);
	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		char name[64], host[256];
		int port, i;

		if (rc < 0 || parse_entry("advertised.listeners", item, name, sizeof(name), host, sizeof(host), &port,
					  err, errlen) < 0) {
			if (rc < 0)
				snprintf(err, errlen, "advertised.listeners: an entry is too long");
			return -EINVAL;
		}
		if (in_list(ctl, name))
			continue;
		for (i = 0; i < n && strcmp(l[i].name, name); i++)
			;
		if (i == n) {
			if (!broker)
				continue;
			snprintf(err, errlen, "advertised.listeners: %s: no listener is named %s in listeners", item,
				 name);
			return -EINVAL;
		}
		snprintf(l[i].adv_host, sizeof(l[i].adv_host), "%s", host);
		l[i].adv_port = port;
	}
	for (int i = 0; i < n; i++)
		if (!strcmp(l[i].adv_host, "0.0.0.0") || !l[i].adv_host[0])
			gethostname(l[i].adv_host, sizeof(l[i].adv_host));
	if (!broker || !n)
		return 0;
	if (first < 0 && *inter_proto) {
		snprintf(err, errlen, "security.inter.broker.protocol: no client listener in listeners is %s",
			 inter_proto);
		return -EINVAL;
	}
	if (first < 0) {
		snprintf(err, errlen, "inter.broker.listener.name: %s is not a client listener in listeners", inter);
		return -EINVAL;
	}
	if (first) {   /* the inter-broker listener first */
		struct broker_listener t = l[first];

		memmove(&l[1], &l[0], sizeof(l[0]) * (size_t)first);
		l[0] = t;
	}
	set->nlisteners = n;
	snprintf(set->listen_host, sizeof(set->listen_host), "%s", l[0].host);
	set->listen_port = l[0].port;
	snprintf(set->adv_host, sizeof(set->adv_host), "%s", l[0].adv_host);
	set->adv_port = l[0].adv_port;
	return 0;
}

/* The listener's value of an ssl.* key (listener.name.<l>.<key>), else the
 * broker's; own 1: the listener's or "" (a group of keys the listener
 * sets, taken whole), 0: the broker's, -1: either. The key it came from
 * into used (lower-cased, for errors). */
static const char *ssl_str(const struct config *c, const char *listener, const char *key, int own, char *used,
			   size_t len)
{
	const char *v = own ? config_listener_str(c, listener, key) : NULL;

	if (!v && own <= 0) {
		snprintf(used, len, "%s", key);
		return config_str(c, key);
	}
	snprintf(used, len, "listener.name.%s.%s", listener, key);
	for (char *k = used; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	return v ? v : "";
}

/* tc for the listener called name: its listener.name.<name>.ssl.* keys
 * over the broker's ssl.* ones (err names the key). */
static int tls_conf_named(const struct config *c, const char *name, struct tls_conf *tc, char *err, size_t errlen)
{
	const char *p, *ca;
	char item[64], k_ks[160], k_ch[160], k_key[160], k_ts[160], k_ca[160], k_x[160];
	int own_ks, own_ts;

	memset(tc, 0, sizeof(*tc));
	/* A keystore (location, or chain and key) or a truststore (location
	 * or certificates) is taken whole: a listener that names one of its
	 * keys has its own, the broker's is not mixed in. */
	own_ks = config_listener_str(c, name, "ssl.keystore.location") ||
		 config_listener_str(c, name, "ssl.keystore.certificate.chain") ||
		 config_listener_str(c, name, "ssl.keystore.key");
	own_ts = config_listener_str(c, name, "ssl.truststore.location") ||
		 config_listener_str(c, name, "ssl.truststore.certificates");
	tc->keystore_location = ssl_str(c, name, "ssl.keystore.location", own_ks, k_ks, sizeof(k_ks));
	tc->cert_chain = ssl_str(c, name, "ssl.keystore.certificate.chain", own_ks, k_ch, sizeof(k_ch));
	tc->key = ssl_str(c, name, "ssl.keystore.key", own_ks, k_key, sizeof(k_key));
	tc->key_password = ssl_str(c, name, "ssl.key.password", -1, k_x, sizeof(k_x));
	tc->truststore = ssl_str(c, name, "ssl.truststore.location", own_ts, k_ts, sizeof(k_ts));
	if (!*tc->truststore && !*(tc->truststore = ssl_str(c, name, "ssl.truststore.certificates", own_ts, k_ts,
							     sizeof(k_ts))))
		ssl_str(c, name, "ssl.truststore.location", own_ts, k_ts, sizeof(k_ts));   /* named when missing */
	ca = ssl_str(c, name, "ssl.client.auth", -1, k_ca, sizeof(k_ca));
	tc->client_auth = !strcmp(ca, "required") ? TLS_CLIENT_AUTH_REQUIRED
			: !strcmp(ca, "requested") ? TLS_CLIENT_AUTH_REQUESTED : TLS_CLIENT_AUTH_NONE;
	tc->cipher_suites = ssl_str(c, name, "ssl.cipher.suites", -1, k_x, sizeof(k_x));
	tc->principal_rules = ssl_str(c, name, "ssl.principal.mapping.rules", -1, k_x, sizeof(k_x));
	tc->allow_dn_changes = !strcmp(ssl_str(c, name, "ssl.allow.dn.changes", -1, k_x, sizeof(k_x)), "true");
	tc->allow_san_changes = !strcmp(ssl_str(c, name, "ssl.allow.san.changes", -1, k_x, sizeof(k_x)), "true");
	p = ssl_str(c, name, "ssl.enabled.protocols", -1, k_x, sizeof(k_x));
	while (next_item(&p, item, sizeof(item)) > 0) {
		tc->tls12 |= !strcmp(item, "TLSv1.2");
		tc->tls13 |= !strcmp(item, "TLSv1.3");
	}
	if (!*tc->keystore_location && (!*tc->cert_chain || !*tc->key)) {
		snprintf(err, errlen, "%s: the SSL listener %s needs a certificate and its key: set "
			 "ssl.keystore.location (a PEM file with both), or ssl.keystore.certificate.chain and "
			 "ssl.keystore.key, for every SSL listener or as listener.name.%s.ssl.* for this one "
			 "(docs/security.md)", k_ks, name, name);
		return -EINVAL;
	}
	if (*tc->keystore_location && (*tc->cert_chain || *tc->key)) {
		snprintf(err, errlen, "%s: set it or %s and %s, not both", k_ks, k_ch, k_key);
		return -EINVAL;
	}
	if (tc->client_auth != TLS_CLIENT_AUTH_NONE && !*tc->truststore) {
		snprintf(err, errlen, "%s: ssl.client.auth=%s (%s) needs the CA certificates client certificates are "
			 "checked against (ssl.truststore.location)", k_ts, ca, k_ca);
		return -EINVAL;
	}
	return 1;
}

/* Whether name is a listener of this node (listeners) or named by
 * listener.security.protocol.map (a node of a cluster sharing one file). */
static int listener_known(const struct config *c, const char *name)
{
	const char *lists[2] = { config_str(c, "listeners"), config_str(c, "listener.security.protocol.map") };
	char item[512];

	for (int i = 0; i < 2; i++) {
		const char *p = lists[i];
		int rc;

		while ((rc = next_item(&p, item, sizeof(item))) != 0) {
			char *sep = rc > 0 ? strstr(item, i == 0 ? "://" : ":") : NULL;

			if (sep && (size_t)(sep - item) == strlen(name) && !strncasecmp(item, name, strlen(name)))
				return 1;
		}
	}
	return 0;
}

int listeners_check_keys(const struct config *c, char *err, size_t errlen)
{
	const char *key;

	for (int i = 0; config_listener_key(c, i, &key); i++) {
		const char *l = key + strlen("listener.name."), *dot = strchr(l, '.');
		char name[128];

		snprintf(name, sizeof(name), "%.*s", (int)(dot - l) < 127 ? (int)(dot - l) : 127, l);
		if (!listener_known(c, name)) {
			snprintf(err, errlen, "%s: no listener is named %s (listeners, listener.security.protocol.map; "
				 "listener names are matched without case)", key, name);
			return -EINVAL;
		}
	}
	return 0;
}

int listeners_tls_conf(const struct config *c, const struct broker_settings *set, int li, struct tls_conf *tc,
		       char *err, size_t errlen)
{
	if (li < 0 || li >= set->nlisteners || !set->listeners[li].tls)
		return 0;
	return tls_conf_named(c, set->listeners[li].name, tc, err, errlen);
}

int listeners_controller_tls(const struct config *c, struct tls_conf *tc, char *err, size_t errlen)
{
	const char *p = config_str(c, "controller.listener.names");
	char name[128], proto[32];
	int rc;

	/* the first name is the one this node reaches the controllers by
	 * (and, on a controller, the one its port serves), as Kafka */
	if (next_item(&p, name, sizeof(name)) <= 0)
		return 0;
	rc = map_protocol(config_str(c, "listener.security.protocol.map"), name, proto, sizeof(proto), err, errlen);
	if (rc == -EINVAL)
		return rc;
	if (rc == -ENOENT || !strcmp(proto, "PLAINTEXT") || !strcmp(proto, "SASL_PLAINTEXT"))
		return 0;
	if ((rc = tls_conf_named(c, name, tc, err, errlen)) < 0)
		return rc;
	if (!*tc->truststore) {
		snprintf(err, errlen, "ssl.truststore.location: the SSL controller listener %s needs the CA "
			 "certificates the controllers' certificates are checked against (both ways: mutual TLS)", name);
		return -EINVAL;
	}
	tc->client_auth = TLS_CLIENT_AUTH_REQUIRED;   /* whatever ssl.client.auth says, as Kafka's controllers */
	return 1;
}

/* The controller listener when it is SASL (the first name of
 * controller.listener.names, its protocol from the map) and its mechanism
 * PLAIN: 1 with name, proto and key (its JAAS config's key, lower case);
 * 0 when it is not SASL; -EINVAL / -ENOTSUP with err naming the key. */
static int controller_sasl_listener(const struct config *c, char *name, size_t namelen, char *proto,
				    size_t protolen, char *key, size_t keylen, char *err, size_t errlen)
{
	const char *p = config_str(c, "controller.listener.names");
	const char *mech = config_str(c, "sasl.mechanism.controller.protocol");
	int rc;

	if (next_item(&p, name, namelen) <= 0)
		return 0;
	rc = map_protocol(config_str(c, "listener.security.protocol.map"), name, proto, protolen, err, errlen);
	if (rc == -EINVAL)
		return rc;
	if (rc == -ENOENT || strncmp(proto, "SASL_", 5))
		return 0;
	if (!strncmp(mech, "SCRAM-", 6)) {
		snprintf(err, errlen, "sasl.mechanism.controller.protocol: %s cannot be used on the controller "
			 "listener %s: SCRAM credentials live in the metadata log that this listener replicates, so a "
			 "controller could not authenticate before it has that log (Kafka refuses it in KRaft too); "
			 "use PLAIN", mech, name);
		return -EINVAL;
	}
	if (strcmp(mech, "PLAIN")) {
		snprintf(err, errlen, "sasl.mechanism.controller.protocol: %s: the controller listener %s is %s; "
			 "Sluice has PLAIN there (GSSAPI, Kafka's default, and OAUTHBEARER are not implemented: "
			 "docs/security.md#the-controller-listener)", mech, name, proto);
		return -ENOTSUP;
	}
	snprintf(key, keylen, "listener.name.%s.plain.sasl.jaas.config", name);
	for (char *k = key; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	return 1;
}

/* The controller listener's JAAS config (jaas, NULL when not set) into
 * out->login and out->users: 0, or -EINVAL with why (never a password;
 * out->users freed, the password cleared). */
static int controller_jaas(const char *name, const char *proto, const char *jaas, struct qt_sasl *out,
			   char *why, size_t whylen)
{
	bool have_password = false;
	int rc;

	if (!jaas) {
		snprintf(why, whylen, "the controller listener %s is %s with PLAIN: this JAAS config gives the "
			 "node's own username=\"...\" password=\"...\" and the user_<name>=\"<password>\" it accepts "
			 "(org.apache.kafka.common.security.plain.PlainLoginModule required ...;)", name, proto);
		return -EINVAL;
	}
	rc = jaas_login(jaas, NULL, out->login.user, sizeof(out->login.user), out->login.password,
			sizeof(out->login.password), &have_password, why, whylen);
	if (rc == 0 && (!out->login.user[0] || !have_password)) {
		snprintf(why, whylen, "no %s=\"...\": the node's own login (what it connects to the other "
			 "controllers with) is needed", out->login.user[0] ? "password" : "username");
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = sasl_jaas_parse(jaas, &out->users, why, whylen);
	if (rc == 0 && !out->users.n) {
		snprintf(why, whylen, "no user_<name>=\"<password>\": the controller listener %s would accept "
			 "nobody (not even this node's own username)", name);
		sasl_plain_users_free(&out->users);
		rc = -EINVAL;
	}
	if (rc < 0) {
		memset(out->login.password, 0, sizeof(out->login.password));
		return -EINVAL;
	}
	out->login.sasl = 1;
	out->login.mech = SASL_MECH_PLAIN;
	return 0;
}

int listeners_controller_sasl(const struct config *c, struct qt_sasl *out, char *err, size_t errlen)
{
	char name[128], proto[32], key[200], why[256];
	int64_t reauth[3];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = controller_sasl_listener(c, name, sizeof(name), proto, sizeof(proto), key, sizeof(key), err,
					   errlen)) <= 0)
		return rc;
	if (controller_jaas(name, proto, config_listener_str(c, name, "plain.sasl.jaas.config"), out, why,
			    sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", key, why);
		return -EINVAL;
	}
	/* the session's lifetime: the client listeners' resolution of
	 * connections.max.reauth.ms, PLAIN's */
	if ((rc = listener_reauth(c, name, reauth, err, errlen)) < 0) {
		sasl_plain_users_free(&out->users);
		memset(out->login.password, 0, sizeof(out->login.password));
		return rc;
	}
	out->lifetime_ms = reauth[sasl_mech_index(SASL_MECH_PLAIN)];
	out->fail_delay_ms = (unsigned)config_int(c, "connection.failed.authentication.delay.ms");
	return 1;
}

/* A struct config as sluiced built it at start, but for the flags that
 * do not set keys: each --config file in order, then each --set. files
 * gets the files' names (for messages). 0, or -errno with err (the
 * file, its line and the key). */
static int config_again(const struct broker *b, struct config **out, char *files, size_t fileslen, char *err,
			size_t errlen)
{
	struct config *c;
	size_t fl = 0;
	int rc;

	*files = 0;
	if ((rc = config_create(&c)) < 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	for (int i = 1; i + 1 < b->argc; i++)
		if (!strcmp(b->argv[i], "--config")) {
			if ((rc = config_load_file(c, b->argv[i + 1], err, errlen)) < 0) {
				config_destroy(c);
				return rc;
			}
			if (fl < fileslen)
				fl += (size_t)snprintf(files + fl, fileslen - fl, "%s%s", fl ? ", " : "", b->argv[i + 1]);
		}
	for (int i = 1; i + 1 < b->argc; i++) {
		if (!strcmp(b->argv[i], "--set") && (rc = config_set_arg(c, b->argv[i + 1], err, errlen)) < 0) {
			config_destroy(c);
			return rc;
		}
		if (strcmp(b->argv[i], "--help") && strcmp(b->argv[i], "-h"))
			i++;   /* every other flag takes a value */
	}
	if (!*files)
		snprintf(files, fileslen, "the command line (no --config)");
	*out = c;
	return 0;
}

int listeners_controller_sasl_reload(struct broker *b, char *err, size_t errlen)
{
	struct qt_sasl *sa = b->quorum_sasl, fresh;
	struct qt_counters *qc = b->quorum_port;
	struct config *c = NULL;
	char name[128], proto[32], key[200], why[384], files[512];
	int rc;

	*err = 0;
	if (!sa || controller_sasl_listener(b->cfg, name, sizeof(name), proto, sizeof(proto), key, sizeof(key),
					    why, sizeof(why)) <= 0) {
		snprintf(err, errlen, "no SASL controller listener: no JAAS config to reload");
		return -ENOENT;
	}
	memset(&fresh, 0, sizeof(fresh));
	if ((rc = config_again(b, &c, files, sizeof(files), why, sizeof(why))) < 0) {
		snprintf(err, errlen, "%s not read again: %s", key, why);
	} else if ((rc = controller_jaas(name, proto, config_listener_str(c, name, "plain.sasl.jaas.config"),
				       &fresh, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "%s in %s: %s", key, files, why);
	} else {
		/* the connections accepted from now on check these users, the
		 * ones made from now on send this login */
		sasl_plain_users_free(&sa->users);
		memset(sa->login.password, 0, sizeof(sa->login.password));
		sa->login = fresh.login;
		sa->users = fresh.users;
		memset(&fresh, 0, sizeof(fresh));
		snprintf(err, errlen, "%s in %s: %d user%s accepted, connecting as %s", key, files, sa->users.n,
			 sa->users.n == 1 ? "" : "s", sa->login.user);
		rc = 1;
	}
	config_destroy(c);
	if (qc)
		qc->sasl_reloads[rc < 0]++;
	return rc;
}

int listeners_peer_sec(const struct config *c, const struct broker_settings *set, const struct tls_conf *tc,
		       struct peer_sec *sec, char *err, size_t errlen)
{
	const struct broker_listener *ib = &set->listeners[0];
	const char *mech = config_str(c, "sasl.mechanism.inter.broker.protocol"), *jaas;
	char key[200], why[200];
	int rc;

	memset(sec, 0, sizeof(*sec));
	if (!set->nlisteners || (!ib->tls && !ib->sasl))
		return 0;
	sec->tls = ib->tls;
	sec->sasl = ib->sasl;
	if (ib->tls && (rc = tls_client_create(tc, &sec->tls_client, err, errlen)) < 0)
		return rc;
	if (!ib->sasl)
		return 1;
	sec->mech = sasl_mech_from_name(mech, strlen(mech));
	if (!sec->mech) {
		snprintf(err, errlen, "sasl.mechanism.inter.broker.protocol: %s: the inter-broker listener %s is %s; "
			 "name PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (docs/security.md)", mech, ib->name,
			 ib->tls ? "SASL_SSL" : "SASL_PLAINTEXT");
		goto bad;
	}
	if (!(ib->sasl_mechs & (unsigned)sec->mech)) {
		snprintf(err, errlen, "sasl.mechanism.inter.broker.protocol: %s is not enabled on the inter-broker "
			 "listener %s (its sasl.enabled.mechanisms)", mech, ib->name);
		goto bad;
	}
	snprintf(key, sizeof(key), "%s.sasl.jaas.config", mech);
	for (char *k = key; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	if (!(jaas = config_listener_str(c, ib->name, key))) {
		snprintf(err, errlen, "listener.name.%s.%s: the broker's own username and password for SASL "
			 "between brokers (%s required username=\"...\" password=\"...\";) are needed for the "
			 "inter-broker listener %s", ib->name, key, sec->mech == SASL_MECH_PLAIN ?
			 "org.apache.kafka.common.security.plain.PlainLoginModule" :
			 "org.apache.kafka.common.security.scram.ScramLoginModule", ib->name);
		for (char *k = err + strlen("listener.name."); *k && *k != ':'; k++)
			*k = (char)tolower((unsigned char)*k);
		goto bad;
	}
	if (sasl_jaas_login(jaas, sec->user, sizeof(sec->user), sec->password, sizeof(sec->password), why,
			    sizeof(why)) < 0) {
		snprintf(err, errlen, "listener.name.%s.%s: %s", ib->name, key, why);
		goto bad;
	}
	return 1;
bad:
	tls_client_destroy(sec->tls_client);
	sec->tls_client = NULL;
	return -EINVAL;
}

int listeners_tls_reload(struct broker *b, char *err, size_t errlen)
{
	struct tls_client *cl = b->peer_sec ? b->peer_sec->tls_client : NULL;
	char why[384];
	int n = 0, first = 0;

	*err = 0;
	for (int i = 0; i < b->set.nlisteners; i++) {
		int rc;

		if (!b->tls[i])
			continue;
		if ((rc = tls_server_reload(b->tls[i], why, sizeof(why))) < 0) {
			if (!first) {
				first = rc;
				snprintf(err, errlen, "listener %s: %s", b->set.listeners[i].name, why);
			}
			continue;
		}
		n++;
	}
	if (cl) {
		int rc = tls_client_reload(cl, why, sizeof(why));

		if (rc < 0 && !first) {
			first = rc;
			snprintf(err, errlen, "the inter-broker client (listener %s): %s", b->set.listeners[0].name, why);
		}
		n += rc == 0;
	}
	if (b->quorum_tls) {   /* the controller port's, both sides */
		struct tls_server *qs = b->quorum_tls->server;
		struct tls_client *qc = b->quorum_tls->client;
		int rc = tls_server_reload(qs, why, sizeof(why));

		if (rc < 0 && !first) {
			first = rc;
			snprintf(err, errlen, "the controller listener: %s", why);
		}
		n += rc == 0;
		rc = tls_client_reload(qc, why, sizeof(why));
		if (rc < 0 && !first) {
			first = rc;
			snprintf(err, errlen, "the controller listener (its connections out): %s", why);
		}
		n += rc == 0;
	}
	if (first)
		return first;
	if (!n) {
		snprintf(err, errlen, "no SSL listener: nothing to reload");
		return -ENOENT;
	}
	return n;
}

int listeners_tls_find(const struct broker_settings *set, const char *name, size_t len)
{
	for (int i = 0; i < set->nlisteners; i++)
		if (set->listeners[i].tls && strlen(set->listeners[i].name) == len &&
		    !strncasecmp(set->listeners[i].name, name, len))
			return i;
	return -1;
}

/* listener li's conf from c; 1, or -EINVAL with err. */
static int tls_conf_of(const struct broker *b, const struct config *c, int li, struct tls_conf *tc, char *err,
		       size_t errlen)
{
	int rc = listeners_tls_conf(c, &b->set, li, tc, err, errlen);

	if (rc == 0) {
		snprintf(err, errlen, "listener %s has no TLS", b->set.listeners[li].name);
		return -EINVAL;
	}
	return rc;
}

/* The inter-broker client's, when li is the inter-broker listener. */
static struct tls_client *client_of(const struct broker *b, int li)
{
	return li == 0 && b->peer_sec && b->peer_sec->tls ? b->peer_sec->tls_client : NULL;
}

int listeners_tls_check(struct broker *b, const struct config *c, int li, char *err, size_t errlen)
{
	struct tls_client *cl;
	struct tls_conf tc;
	char why[384];
	int rc;

	if (li < 0 || li >= b->set.nlisteners || !b->tls[li]) {
		snprintf(err, errlen, "no SSL listener");
		return -EINVAL;
	}
	if ((rc = tls_conf_of(b, c, li, &tc, err, errlen)) < 0)
		return rc;
	if ((rc = tls_server_check(b->tls[li], &tc, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "listener %s: %s", b->set.listeners[li].name, why);
		return -EINVAL;
	}
	if ((cl = client_of(b, li)) && (rc = tls_client_check(cl, &tc, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "listener %s (this node's connections to other brokers): %s",
			 b->set.listeners[li].name, why);
		return -EINVAL;
	}
	if (cl && (rc = tls_pair_check(b->tls[li], cl, &tc, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "listener %s (the inter-broker listener): %s", b->set.listeners[li].name, why);
		return -EINVAL;
	}
	return 0;
}

int listeners_tls_apply(struct broker *b, const struct config *c, const unsigned char *force, char *err,
			size_t errlen)
{
	char why[384];
	int n = 0, first = 0;

	*err = 0;
	for (int i = 0; i < b->set.nlisteners; i++) {
		struct tls_client *cl = client_of(b, i);
		struct tls_conf tc;
		int rc;

		if (!b->tls[i])
			continue;
		if ((rc = tls_conf_of(b, c, i, &tc, why, sizeof(why))) >= 0 &&
		    (!force || !force[i]) && tls_server_same_stores(b->tls[i], &tc))
			continue;
		if (rc >= 0 && (rc = tls_server_reconf(b->tls[i], &tc, why, sizeof(why))) >= 0 && cl &&
		    (rc = tls_client_reconf(cl, &tc, why, sizeof(why))) < 0) {
			/* the server took them; the client keeps its old ones */
			if (!first)
				snprintf(err, errlen, "listener %s (this node's connections to other brokers): %s",
					 b->set.listeners[i].name, why);
			first = first ? first : rc;
			continue;
		}
		if (rc < 0) {
			if (!first)
				snprintf(err, errlen, "listener %s: %s", b->set.listeners[i].name, why);
			first = first ? first : rc;
			continue;
		}
		n++;
	}
	return first ? first : n;
}
