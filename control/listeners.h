/* control/listeners.h — the broker's Kafka client listeners from Kafka's
 * keys: listeners (NAME://host:port, comma-separated), the security
 * protocol of each name (listener.security.protocol.map), what clients of
 * each are told (advertised.listeners, by name) and which one other
 * brokers use (inter.broker.listener.name). Controller listeners
 * (controller.listener.names) are left to control/node_role.h.
 *
 * Thread: main, at start-up (reads the frozen config); listeners_tls_reload
 * on main (SIGHUP) or the control thread (POST /v1/tls/reload);
 * listeners_controller_sasl_reload on the control thread (both); the
 * listeners' dynamic stores (listeners_tls_check, listeners_tls_apply) on
 * the control thread, from the config in effect it builds.
 * Errors: 0, or -EINVAL / -ENOTSUP with err naming the key and what to do
 * (sluiced exits 2).
 */
#ifndef SLUICE_LISTENERS_H
#define SLUICE_LISTENERS_H

#include <stddef.h>

struct config;
struct broker_settings;
struct tls_conf;

/* Fill set->listeners (the inter-broker listener first) and its copy in
 * set->listen_host/port, adv_host/port. A node with no broker role has
 * none. */
int listeners_resolve(const struct config *c, int broker, struct broker_settings *set, char *err, size_t errlen);
/* Whether set->listeners[li] is an SSL (or SASL_SSL) listener: 1 and tc
 * filled from its ssl.* keys, each listener.name.<li>.ssl.* over the
 * broker's ssl.* (strings borrowed from c), or -EINVAL naming the key of a
 * missing or contradicting one; 0 for a listener without TLS. */
int listeners_tls_conf(const struct config *c, const struct broker_settings *set, int li, struct tls_conf *tc,
		       char *err, size_t errlen);
/* Every listener.name.<l>.* key names a listener of this node (listeners)
 * or of listener.security.protocol.map: 0, or -EINVAL naming the key. */
int listeners_check_keys(const struct config *c, char *err, size_t errlen);

/* The controller listener (the first name of controller.listener.names,
 * its protocol from listener.security.protocol.map): 0 PLAINTEXT (or not
 * in the map); 1 SSL, tc filled from the ssl.* keys with
 * ssl.client.auth=required (the keystore and the truststore needed), and
 * SASL_SSL the same; 0 for SASL_PLAINTEXT; -EINVAL, with err naming the
 * key. */
int listeners_controller_tls(const struct config *c, struct tls_conf *tc, char *err, size_t errlen);

/* A SASL controller listener (SASL_PLAINTEXT, SASL_SSL): its PLAIN
 * login and users from listener.name.<l>.plain.sasl.jaas.config into out
 * (out->users heap: sasl_plain_users_free), 1; 0 when it is not SASL;
 * -EINVAL (SCRAM-*, no JAAS config, no username, password or user_) or
 * -ENOTSUP (another mechanism) with err naming the key (never a
 * password). out->lifetime_ms: connections.max.reauth.ms for PLAIN on
 * that listener, resolved as for a client listener. @thread main */
struct qt_sasl;
int listeners_controller_sasl(const struct config *c, struct qt_sasl *out, char *err, size_t errlen);

/* SIGHUP and POST /v1/tls/reload: the controller listener's JAAS config
 * (listener.name.<l>.plain.sasl.jaas.config) read again from the command
 * line's --config files and --set, as at start; the other keys are not
 * looked at (they need a restart). Valid by listeners_controller_sasl's
 * rules: b->quorum_sasl's login and users replaced (connections made and
 * accepted from then on use them), 1, err saying what was taken (never a
 * password); else the previous ones stay and -EINVAL (or -errno of the
 * file) with err naming the key and the file. Counted either way
 * (b->quorum_port->sasl_reloads). -ENOENT: no SASL controller listener.
 * @thread ctl (b->quorum_sasl's owner once the threads run) */
struct broker;
int listeners_controller_sasl_reload(struct broker *b, char *err, size_t errlen);

/* How this node reaches other brokers (dataplane/peer_session.h): the
 * inter-broker listener's protocol; for TLS a client context from tc, that
 * listener's TLS conf (listeners_tls_conf; the truststore needed); for
 * SASL sasl.mechanism.inter.broker.protocol and the username and password
 * of that listener's <mechanism>.sasl.jaas.config.
 * 1: sec is filled (sec->tls_client to free with tls_client_destroy); 0:
 * PLAINTEXT, nothing to do; -errno with err naming the key. */
struct peer_sec;
int listeners_peer_sec(const struct config *c, const struct broker_settings *set, const struct tls_conf *tc,
		       struct peer_sec *sec, char *err, size_t errlen);

/* Every TLS context of the broker read again from its files: each SSL
 * listener's (b->tls), the inter-broker client's (b->peer_sec) and an SSL
 * controller listener's server and client (b->quorum_tls); new
 * connections use them, open ones keep theirs. Each stands alone: one that
 * fails keeps its previous certificates, the others take their new ones.
 * The contexts reloaded (> 0); -ENOENT without any; or the first failure's
 * -errno with err naming the listener and the key or file. */
int listeners_tls_reload(struct broker *b, char *err, size_t errlen);

/* Kafka's dynamic listener configs: a listener's keystore and truststore
 * keys (listener.name.<l>.ssl.keystore.location, ...) changed by
 * AlterConfigs on this node's broker resource (control/ctl_admin.c), kept
 * in the metadata log and in effect in the control thread's config.
 *
 * listeners_tls_find: the index of this node's SSL (or SASL_SSL) listener
 * called name (len bytes, without case), or -1.
 * listeners_tls_check: listener li's stores as c gives them (its
 * listener.name.<l>.ssl.* over the broker's ssl.*) load, for its server
 * and, on the inter-broker listener, for this node's client side: 0, or
 * -EINVAL with err saying which key and why (never a password).
 * listeners_tls_apply: each SSL listener whose stores in c differ from
 * the ones its context was made of, or whose force[li] is set (the same
 * path named again rereads it, as Kafka's), takes them (tls_server_reconf,
 * the inter-broker client with it): connections made after use them, open
 * ones keep theirs. The listeners changed (>= 0), or the first failure's
 * -errno with err naming the listener (that one keeps its certificates,
 * the others take theirs). @thread control */
struct broker;
int listeners_tls_find(const struct broker_settings *set, const char *name, size_t len);
int listeners_tls_check(struct broker *b, const struct config *c, int li, char *err, size_t errlen);
int listeners_tls_apply(struct broker *b, const struct config *c, const unsigned char *force, char *err,
			size_t errlen);

#endif
