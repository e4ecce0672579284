/* control/config.h — the broker's configuration: one table of keys
 * ({name, type, range, default, doc, topic-level name}) that drives parsing,
 * validation, DescribeConfigs and the documentation (STYLE 22).
 *
 * Thread: the control thread (@thread control). A struct config is built at
 * start-up (defaults, then the file, then --set) and read-only afterwards;
 * once frozen it may be read from any thread without locks because nothing
 * writes it again.
 * Owns: every value string and source string it holds. Strings returned by
 * config_str()/config_source() are borrowed until the next config_set() of
 * that key or config_destroy().
 * Errors: 0 or -errno. -ENOENT: unknown key; -EINVAL: bad value or syntax;
 * -ENOMEM; -errno from opening/reading the file. When err is non-NULL it
 * receives one line naming the source ("FILE:LINE" or "--set"), the key,
 * the value and what is allowed.
 *
 * Numbers are plain decimal integers as Kafka's Long.parseLong takes them
 * (optional sign, digits; no hex, no unit suffix), range-checked. Booleans
 * are true/false (any case). Enums are case-sensitive. Aliases: broker.id
 * for node.id, log.dir for log.dirs (the later setting wins).
 * log.retention.ms / .minutes / .hours: the most precise one that was set
 * explicitly wins, as in Kafka; a negative value means forever (-1).
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct plog_config;

enum config_type {
	CONFIG_INT,      /* int32 */
	CONFIG_LONG,     /* int64 */
	CONFIG_BOOL,     /* true/false; config_int gives 0/1 */
	CONFIG_STRING,
	CONFIG_ENUM,     /* one of the allowed values; config_int gives the index */
	CONFIG_LIST,     /* comma-separated, each element trimmed */
};

/* Enum indexes returned by config_int(). */
enum config_cleanup_policy {
	CONFIG_CLEANUP_DELETE = 0,
	CONFIG_CLEANUP_COMPACT = 1,
	CONFIG_CLEANUP_COMPACT_DELETE = 2,
};
enum config_timestamp_type {
	CONFIG_TS_CREATE_TIME = 0,
	CONFIG_TS_LOG_APPEND_TIME = 1,
};
/* compression.type: 0..4 are the batch codecs (enum compress_codec:
 * uncompressed, gzip, snappy, lz4, zstd); then "producer". */
#define CONFIG_COMPRESSION_PRODUCER 5
/* log.durability: same order as enum plog_durability (write, sync, memory). */

struct config;

/* All defaults. @thread control */
int config_create(struct config **out);
void config_destroy(struct config *c);

/* A copy of c (values, sources), for the cluster-wide defaults changed at
 * run time: the control thread builds a new struct config from the static
 * one and publishes it, read-only, with the metadata snapshot. */
int config_dup(const struct config *c, struct config **out);

/* Keys that AlterConfigs / IncrementalAlterConfigs on the broker resource
 * may change at run time: the topic defaults (keys with a topic-level
 * name), as Kafka's cluster-wide dynamic configs, and a listener's
 * keystore and truststore (listener.name.<l>.ssl.keystore.location,
 * .ssl.keystore.certificate.chain, .ssl.keystore.key, .ssl.key.password,
 * .ssl.truststore.location, .ssl.truststore.certificates), which only a
 * node's own resource may set (config_dynamic_per_broker), as Kafka's
 * per-broker dynamic configs. @thread any (pure) */
int config_dynamic(const char *key);
int config_dynamic_per_broker(const char *key);
/* Check one such change (value NULL: delete). -ENOENT unknown key, -EPERM
 * not dynamic ("Cannot update these configs dynamically: KEY"; the
 * broker-wide ssl.* store keys: "These security configs can be
 * dynamically updated only per-listener using the listener prefix: KEY"),
 * -EINVAL bad value. */
int config_dynamic_validate(const char *key, const char *value, char *err, size_t errlen);
/* A key whose value is never shown nor logged: a password, a private key,
 * a listener's JAAS config (listener.name.<l>. keys among them). @thread
 * any (pure) */
int config_sensitive(const char *key);

/* Kafka's properties format: key=value, key:value or key value; # and !
 * comment lines; blank lines; whitespace trimmed around key and value;
 * backslash line continuation and escapes (\t \n \\ \= \: \uXXXX).
 * Stops at the first error; source of each key is "FILE:LINE". */
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);

/* Set one key (name or alias). source is recorded and prefixes errors;
 * NULL means "--set". */
int config_set(struct config *c, const char *key, const char *value, const char *source,
	       char *err, size_t errlen);

/* "KEY=VALUE" as given to --set (split at the first '='), source "--set".
 * -EINVAL without '='. */
int config_set_arg(struct config *c, const char *arg, char *err, size_t errlen);

/* ints, longs, bools (0/1), enums (index). 0 for strings, lists and
 * unknown keys (a programming error). */
int64_t config_int(const struct config *c, const char *key);
/* The value as a canonical string (decimal for numbers, "true"/"false",
 * the enum name, the list as given but trimmed). NULL for an unknown key. */
const char *config_str(const struct config *c, const char *key);
/* "default", "FILE:LINE" or "--set" (or the caller's source); a
 * listener.name.<l>. key's too. NULL if unknown (or not set). */
const char *config_source(const struct config *c, const char *key);

/* Every key in table order, with value and source (DescribeConfigs,
 * /v1/config), then the listener.name.<l>. keys set. Aliases are not
 * listed; their values are under the primary name. A sensitive key's
 * value (a password, a private key, a JAAS config) is NULL. */
void config_foreach(const struct config *c,
		    void (*fn)(const char *key, const char *value, const char *source,
			       int is_default, void *arg),
		    void *arg);

/* Kafka's per-listener key listener.name.<listener>.<suffix> (the
 * listener's name without case; suffix sasl.enabled.mechanisms,
 * <mechanism>.sasl.jaas.config, <mechanism>.connections.max.reauth.ms or
 * one of the ssl.* keys of a listener's TLS, whose value the global key's
 * entry validated and made canonical), or NULL when not set. */
const char *config_listener_str(const struct config *c, const char *listener, const char *suffix);
/* The i-th per-listener key set, as given (0 <= i): 1 with *key
 * (borrowed like config_str), 0 past the last. */
int config_listener_key(const struct config *c, int i, const char **key);

/* advertised.listeners, or listeners when it is empty (what Metadata
 * returns). Borrowed like config_str. */
const char *config_advertised_listeners(const struct config *c);

/* Topic-level configs: cleanup.policy, compression.type, retention.ms,
 * retention.bytes, segment.bytes, max.message.bytes,
 * message.timestamp.type, delete.retention.ms, min.insync.replicas,
 * index.interval.bytes and durability (Sluice). Each maps to its
 * broker-level default key and is validated by the same table entry.
 * Kafka's other topic keys are either accepted and ignored
 * (topic_config_ignored gives the reason) or refused with -EINVAL and
 * "Sluice does not support KEY yet" (except the value that changes
 * nothing, Kafka's default). -ENOENT: an unknown key. @thread any (pure) */
int topic_config_validate(const char *key, const char *value, char *err, size_t errlen);
/* The reason a key is accepted and ignored (for the broker's warning), or
 * NULL for a key Sluice honours (or does not know). */
const char *topic_config_ignored(const char *key);
/* 1 for any key topic_config_validate knows (honoured, ignored or refused). */
int topic_config_known(const char *key);
/* The broker-level key a topic key defaults from; NULL if unknown. */
const char *topic_config_broker_key(const char *key);
/* The broker-level effective default as a string; NULL for an unknown key. */
const char *topic_config_default(const struct config *c, const char *key);
/* Iterate topic-level keys in table order: i = 0.. until NULL. */
const char *topic_config_key_at(int i);

/* Storage config for a topic: plog defaults, then broker defaults, then the
 * n overrides (validated: -ENOENT / -EINVAL). cleanup.policy=compact alone
 * disables time and size retention (as in Kafka); compact,delete keeps
 * both. Ignored keys are skipped. */
int topic_config_to_plog(const struct config *c, const char *const *keys,
			 const char *const *values, int n, struct plog_config *out);

/* Parse the first listener of "NAME://host:port[,...]" into host and port.
 * Host may be a name, an IPv4 address or [IPv6] (returned without the
 * brackets); an empty host means all interfaces and gives "0.0.0.0".
 * -EINVAL for anything else (no "://", no or bad port, port > 65535),
 * -ENAMETOOLONG if host does not fit. */
int config_listener(const char *listeners, char *host, size_t hostlen, int *port);

/* Parse "host:port" (admin.listen). Same rules as one listener without the
 * "NAME://" prefix. */
int config_hostport(const char *s, char *host, size_t hostlen, int *port);

/* One key of the table, for the documentation writers (config_print.c):
 * every string is the table's own (static), allowed what the key takes
 * ("an integer in [1, 1048576]", "one of 'write', 'sync', 'memory'"). */
struct config_key_info {
	const char *name, *type_name, *def, *doc;
	const char *alias, *topic; /* NULL when the key has none */
	enum config_type type;
	char allowed[256];
};
/* The i-th key in table order: 0, or -ENOENT past the last. */
int config_key_at(int i, struct config_key_info *out);

/* The documentation table as markdown: one row per key: name, type,
 * default, description (with range, allowed values, alias and topic-level
 * name). */
void config_doc_markdown(FILE *f);

/* The same table as a commented properties file that sluiced reads: per
 * key, its doc as # lines and `#key=default`; a key given in set
 * ("key=value", nset of them) is written uncommented with that value (the
 * packaged sluiced.properties: log.dirs=/var/lib/sluice). */
void config_doc_properties(FILE *f, const char *const *set, int nset);

#endif
