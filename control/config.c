/* control/config.c — the configuration table, parsing and validation
 * (the properties file is read by config_file.c). See config.h.
 * @thread control */
#include "control/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storage/plog.h"

#define I32MAX INT32_MAX
#define I64MAX INT64_MAX

enum {
	CK_RET_UNIT = 0x1,   /* log.retention.minutes / .hours: resolved into .ms */
	CK_NONEMPTY = 0x2,   /* an empty value is invalid */
	CK_SET = 0x4,        /* enum whose values are sets of base words ("compact,delete") */
	CK_DYNAMIC = 0x8,    /* a broker config changed at run time that no topic has */
	CK_SENSITIVE = 0x10, /* a password or key: never shown (DescribeConfigs, /v1/config) */
};

struct config_key {
	const char *name;
	enum config_type type;
	const char *def;             /* default, parsed by the same rules as any value */
	int64_t min, max;            /* numbers */
	const char *const *values;   /* enums, NULL-terminated */
	const char *topic;           /* topic-level name, or NULL */
	const char *alias;           /* a second accepted name, or NULL */
	int (*check)(const char *v); /* extra check for strings and each list element */
	int64_t unit_ms;             /* CK_RET_UNIT: milliseconds per unit */
	unsigned flags;
	const char *doc;
};

static const char *const cleanup_values[] = { "delete", "compact", "compact,delete", NULL };
static const char *const ts_values[] = { "CreateTime", "LogAppendTime", NULL };
static const char *const durability_values[] = { "write", "sync", "memory", NULL };
/* Index = the codec id of a batch's attributes (enum compress_codec);
 * "producer" (CONFIG_COMPRESSION_PRODUCER) keeps the producer's codec. */
static const char *const pem_values[] = { "PEM", NULL };
static const char *const client_auth_values[] = { "none", "requested", "required", NULL };
static const char *const compression_values[] = { "uncompressed", "gzip", "snappy", "lz4", "zstd", "producer",
						  NULL };

static int check_listener(const char *v)
{
	char host[256];
	int port;

	return config_listener(v, host, sizeof(host), &port);
}

static int check_authorizer(const char *v)
{
	return *v && strcmp(v, "org.apache.kafka.metadata.authorizer.StandardAuthorizer") ? -1 : 0;
}

static int check_tls_protocol(const char *v)
{
	return strcmp(v, "TLSv1.2") && strcmp(v, "TLSv1.3") ? -1 : 0;
}

static int check_hostport(const char *v)
{
	char host[256];
	int port;

	return config_hostport(v, host, sizeof(host), &port);
}

static int check_hostport_or_empty(const char *v)
{
	return *v ? check_hostport(v) : 0;
}

static int check_ipv4(const char *v)
{
	struct in_addr a;

	return inet_pton(AF_INET, v, &a) == 1 ? 0 : -1;
}

static int check_ipv4_or_empty(const char *v)
{
	return *v ? check_ipv4(v) : 0;
}

/* "a.b.c.d:port": the DPDK port answers on one address of its own. */
static int check_ipv4_port_or_empty(const char *v)
{
	char host[256];
	int port;

	if (!*v)
		return 0;
	return config_hostport(v, host, sizeof(host), &port) < 0 || check_ipv4(host) < 0 ? -1 : 0;
}

/* The one table (STYLE 22). Order is the documentation order. */
static const struct config_key keys[] = {
	{ "listeners", CONFIG_LIST, "PLAINTEXT://127.0.0.1:9092", .check = check_listener,
	  .flags = CK_NONEMPTY,
	  .doc = "Kafka listeners, NAME://host:port, comma-separated; the first one whose name is not in "
		 "controller.listener.names is bound for clients. "
		 "An empty host binds all interfaces." },
	{ "advertised.listeners", CONFIG_LIST, "", .check = check_listener,
	  .doc = "What Metadata tells a client of this broker, per listener name: a client is given the entry "
		 "of the listener it connected to (a listener not named here: its listeners entry). Empty: the "
		 "same as listeners." },
	{ "listener.security.protocol.map", CONFIG_LIST,
	  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
	  .doc = "NAME:PROTOCOL pairs: the security protocol of each listener name (PLAINTEXT, SSL, "
		 "SASL_PLAINTEXT or SASL_SSL). A controller listener not named here is PLAINTEXT; "
		 "one mapped to SSL runs the metadata quorum and the controller channel over mutual TLS, "
		 "SASL_PLAINTEXT and SASL_SSL add SASL PLAIN (sasl.mechanism.controller.protocol; "
		 "docs/security.md)." },
	{ "sasl.enabled.mechanisms", CONFIG_LIST, "SCRAM-SHA-256,SCRAM-SHA-512",
	  .doc = "The SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners accept: PLAIN, SCRAM-SHA-256, "
		 "SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are refused at start). Per listener: "
		 "listener.name.<listener>.sasl.enabled.mechanisms. Kafka's default is GSSAPI; Sluice's is "
		 "the SCRAM pair, whose users live in the metadata log (docs/security.md)." },
	{ "authorizer.class.name", CONFIG_STRING, "", .check = check_authorizer,
	  .doc = "Empty: no authorizer, every request is allowed. "
		 "org.apache.kafka.metadata.authorizer.StandardAuthorizer: requests are checked against the "
		 "ACLs of the metadata log (docs/security.md#acls); another class is refused at start." },
	{ "super.users", CONFIG_STRING, "",
	  .doc = "Principals the authorizer allows everything, separated by semicolons (User:admin;User:ops)." },
	{ "allow.everyone.if.no.acl.found", CONFIG_BOOL, "false",
	  .doc = "With the authorizer: allow a request on a resource no ACL names (Kafka's default: false)." },
	{ "sasl.mechanism.inter.broker.protocol", CONFIG_STRING, "GSSAPI",
	  .doc = "The mechanism a broker authenticates with to others on a SASL inter-broker listener: PLAIN, "
		 "SCRAM-SHA-256 or SCRAM-SHA-512, with the username and password of that listener's "
		 "listener.name.<listener>.<mechanism>.sasl.jaas.config (docs/security.md#between-brokers)." },
	{ "sasl.mechanism.controller.protocol", CONFIG_STRING, "GSSAPI",
	  .doc = "The mechanism of a SASL controller listener (SASL_PLAINTEXT or SASL_SSL in "
		 "listener.security.protocol.map): PLAIN, with the node's own username and password and the "
		 "user_<name>=\"<password>\" it accepts in listener.name.<controller listener>.plain.sasl.jaas.config "
		 "(that key read again on SIGHUP and POST /v1/tls/reload); "
		 "SCRAM is refused there (its credentials live in the metadata log), GSSAPI is not implemented "
		 "(docs/security.md#the-controller-listener)." },
	{ "connections.max.reauth.ms", CONFIG_LONG, "0", 0, I64MAX,
	  .doc = "KIP-368's session lifetime on SASL listeners: above 0, SaslAuthenticate v1+ tells the "
		 "client this many ms, the client re-authenticates on its connection before then (the same "
		 "mechanism and principal, else the connection is closed), and a connection that sends "
		 "another request after its session ended is closed, not served. Per listener and "
		 "mechanism: listener.name.<l>.<mechanism>.connections.max.reauth.ms, else "
		 "listener.name.<l>.connections.max.reauth.ms, else this, as Kafka's (a 0 there is set, not "
		 "absent). 0 (Kafka's default): sessions never expire, SaslAuthenticate says 0, and a "
		 "SaslHandshake on an authenticated connection is answered ILLEGAL_SASL_STATE, the connection "
		 "going on (docs/security.md#re-authentication-kip-368). On a SASL controller listener (PLAIN, "
		 "resolved the same way) a connection accepted is closed once its session is over and the other "
		 "node connects again (docs/security.md#sasl-on-the-controller-listener)." },
	{ "connection.failed.authentication.delay.ms", CONFIG_INT, "100", 0, I32MAX,
	  .doc = "A failed SASL authentication is answered this long after it failed (a timer: the shard "
		 "serves others meanwhile), then the connection is closed." },
	{ "inter.broker.listener.name", CONFIG_STRING, "",
	  .doc = "The listener brokers reach each other through (replication, WriteTxnMarkers, the address the "
		 "metadata log registers), over its security protocol. Empty: security.inter.broker.protocol's." },
	{ "security.inter.broker.protocol", CONFIG_STRING, "",
	  .doc = "Instead of the above: the first listener of this protocol. Empty: the first listeners entry "
		 "that is no controller listener." },
	{ "ssl.keystore.type", CONFIG_ENUM, "PEM", .values = pem_values,
	  .doc = "The format of the SSL listeners' certificate and key: PEM only (no JKS or PKCS12)." },
	{ "ssl.keystore.location", CONFIG_STRING, "",
	  .doc = "A PEM file with the SSL listeners' private key and certificate chain (the broker's "
		 "certificate first). Either this, or ssl.keystore.certificate.chain with ssl.keystore.key, "
		 "is needed for an SSL listener; reread on SIGHUP and POST /v1/tls/reload. This key and the "
		 "ssl.* keys below may be set for one listener as listener.name.<listener>.ssl.* "
		 "(docs/security.md#one-listeners-own-certificates); a listener's keystore and truststore keys "
		 "also change at run time by AlterConfigs of the node's broker resource "
		 "(docs/security.md#changing-a-listeners-certificates-at-run-time)." },
	{ "ssl.keystore.certificate.chain", CONFIG_STRING, "",
	  .doc = "The certificate chain as PEM text (as Kafka's), or the path of a PEM file (Sluice)." },
	{ "ssl.keystore.key", CONFIG_STRING, "", .flags = CK_SENSITIVE,
	  .doc = "The private key as PEM text (as Kafka's), or the path of a PEM file (Sluice)." },
	{ "ssl.key.password", CONFIG_STRING, "", .flags = CK_SENSITIVE,
	  .doc = "The password of an encrypted private key. Empty: the key is not encrypted." },
	{ "ssl.truststore.type", CONFIG_ENUM, "PEM", .values = pem_values,
	  .doc = "The format of the trusted client CAs: PEM only." },
	{ "ssl.truststore.location", CONFIG_STRING, "",
	  .doc = "A PEM file of the CAs client certificates (ssl.client.auth) and, on an SSL inter-broker "
		 "listener, other brokers' certificates must chain to; reread on SIGHUP and POST "
		 "/v1/tls/reload (the listeners' and the inter-broker client's)." },
	{ "ssl.truststore.certificates", CONFIG_STRING, "",
	  .doc = "The trusted CA certificates as PEM text (as Kafka's), or the path of a PEM file." },
	{ "ssl.client.auth", CONFIG_ENUM, "none", .values = client_auth_values,
	  .doc = "Whether SSL listeners ask clients for a certificate: none; requested (a client without one "
		 "is served, as User:ANONYMOUS); required (mutual TLS: a client without a certificate the "
		 "truststore trusts is refused). The certificate's subject gives the principal "
		 "(ssl.principal.mapping.rules)." },
	{ "ssl.enabled.protocols", CONFIG_LIST, "TLSv1.2,TLSv1.3", .check = check_tls_protocol,
	  .flags = CK_NONEMPTY,
	  .doc = "The TLS versions SSL listeners accept: TLSv1.2 and/or TLSv1.3 (older ones are refused)." },
	{ "ssl.cipher.suites", CONFIG_LIST, "",
	  .doc = "The cipher suites SSL listeners accept, by their IANA names as Kafka's (e.g. "
		 "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256) or OpenSSL's. Empty: "
		 "OpenSSL's defaults." },
	{ "ssl.principal.mapping.rules", CONFIG_STRING, "DEFAULT",
	  .doc = "How a client certificate's subject (RFC 2253, e.g. CN=app,O=acme) becomes the principal "
		 "User:NAME, as Kafka's: RULE:pattern/replacement/[LU] (POSIX extended regex, $1.. its "
		 "groups), comma-separated, the first match wins; DEFAULT: the whole subject. No match: the "
		 "connection is refused." },
	{ "ssl.allow.dn.changes", CONFIG_BOOL, "false",
	  .doc = "Whether a listener's keystore changed at run time (AlterConfigs of "
		 "listener.name.<listener>.ssl.keystore.*) may hold a certificate of another subject than the "
		 "one it replaces; false, Kafka's default: refused (a reload by SIGHUP is not checked)." },
	{ "ssl.allow.san.changes", CONFIG_BOOL, "false",
	  .doc = "The same for the subjectAltNames: false, Kafka's default: the new certificate must have "
		 "every one the old one had." },
	{ "node.id", CONFIG_INT, "1", 0, I32MAX, .alias = "broker.id",
	  .doc = "This broker's node id." },
	{ "process.roles", CONFIG_LIST, "broker,controller", .flags = CK_NONEMPTY,
	  .doc = "This node's roles, as Kafka's KRaft mode: broker, controller, or broker,controller "
		 "(combined: alone, or a voter of a cluster's metadata quorum). controller: a voter that "
		 "serves no Kafka client and hosts no partition (its listeners only controller listeners). "
		 "broker: not a voter (its node.id not among controller.quorum.voters); it fetches the "
		 "committed metadata from the voters and needs no controller listener (docs/cluster.md)." },
	{ "controller.quorum.voters", CONFIG_LIST, "",
	  .doc = "The metadata quorum's voters, ID@HOST:PORT comma-separated (HOST an IPv4 address or a "
		 "name resolved at start). Empty, or naming only this combined node: this node alone. "
		 "Naming several, or set on a node of one role: a cluster; a controller's node.id must be "
		 "among them (its controller listener on its voter port), a broker-only node's must not, "
		 "and cluster.id must be set (docs/cluster.md)." },
	{ "controller.listener.names", CONFIG_LIST, "CONTROLLER",
	  .doc = "Names of the listeners entries the controller uses; they are not served to Kafka "
		 "clients, and a voter's port must be its controller listener's: it carries the metadata "
		 "quorum and the controller channel. (A quorum of one opens its controller port only when "
		 "listeners has its controller listener, for broker-only nodes to join it.)" },
	{ "cluster.id", CONFIG_STRING, "",
	  .doc = "The cluster this node belongs to (what `kafka-storage format -t` gives a Kafka node): "
		 "22 characters of base64url. Empty: a new data directory makes one, an existing one "
		 "keeps its own. Set: a new data directory takes it, and a directory of another "
		 "cluster is refused at start (exit 2). Required, the same on every node, when "
		 "controller.quorum.voters names several nodes or the node has one role only." },
	{ "broker.session.timeout.ms", CONFIG_INT, "9000", 100, I32MAX,
	  .doc = "The active controller fences a broker that sent no heartbeat for this long (a "
		 "BROKER_FENCE record in the metadata log); Kafka's default." },
	{ "broker.heartbeat.interval.ms", CONFIG_INT, "2000", 10, I32MAX,
	  .doc = "How often a broker heartbeats to the active controller (below "
		 "broker.session.timeout.ms); Kafka's default." },
	{ "broker.rack", CONFIG_STRING, "",
	  .doc = "This broker's rack, returned in Metadata and DescribeCluster (empty: none, null on the wire)." },
	{ "log.dirs", CONFIG_LIST, "./data", .alias = "log.dir", .flags = CK_NONEMPTY,
	  .doc = "Data directory (topic partitions and the metadata log)." },
	{ "num.partitions", CONFIG_INT, "1", 1, I32MAX,
	  .doc = "Partitions of an auto-created topic, and the default for CreateTopics." },
	{ "default.replication.factor", CONFIG_INT, "1", 1, 32767,
	  .doc = "Replication factor of an auto-created topic." },
	{ "auto.create.topics.enable", CONFIG_BOOL, "true",
	  .doc = "Create a topic when a client asks Metadata for one that does not exist." },
	{ "log.segment.bytes", CONFIG_INT, "1073741824", 16384, I32MAX, .topic = "segment.bytes",
	  .doc = "Size at which a segment file is rolled." },
	{ "log.retention.ms", CONFIG_LONG, "604800000", -1, I64MAX, .topic = "retention.ms",
	  .doc = "Delete segments whose newest record is older than this; -1: keep forever. "
		 "Wins over log.retention.minutes and log.retention.hours." },
	{ "log.retention.minutes", CONFIG_INT, "10080", -1, I32MAX, .unit_ms = 60000,
	  .flags = CK_RET_UNIT,
	  .doc = "log.retention.ms in minutes, used when log.retention.ms is not set." },
	{ "log.retention.hours", CONFIG_INT, "168", -1, I32MAX, .unit_ms = 3600000,
	  .flags = CK_RET_UNIT,
	  .doc = "log.retention.ms in hours, used when neither log.retention.ms nor "
		 "log.retention.minutes is set." },
	{ "log.retention.bytes", CONFIG_LONG, "-1", -1, I64MAX, .topic = "retention.bytes",
	  .doc = "Delete the oldest segments while a partition is larger than this; -1: no limit." },
	{ "log.cleanup.policy", CONFIG_ENUM, "delete", .values = cleanup_values,
	  .topic = "cleanup.policy", .flags = CK_SET,
	  .doc = "delete (retention), compact (keep the newest record per key) or both." },
	{ "log.cleaner.delete.retention.ms", CONFIG_LONG, "86400000", 0, I64MAX,
	  .topic = "delete.retention.ms",
	  .doc = "How long a compacted topic keeps tombstones." },
	{ "log.index.interval.bytes", CONFIG_INT, "4096", 0, I32MAX, .topic = "index.interval.bytes",
	  .doc = "Bytes of batches between two offset index entries." },
	{ "log.message.timestamp.type", CONFIG_ENUM, "CreateTime", .values = ts_values,
	  .topic = "message.timestamp.type",
	  .doc = "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock." },
	{ "compression.type", CONFIG_ENUM, "producer", .values = compression_values, .topic = "compression.type",
	  .doc = "producer keeps each batch in the codec its producer chose; any other value makes the broker "
		 "store every batch in that codec, recompressing (or decompressing, for uncompressed) a batch "
		 "whose codec differs before it is appended, as Kafka does. Costs CPU on the owner shard." },
	{ "message.max.bytes", CONFIG_INT, "1048588", 0, I32MAX, .topic = "max.message.bytes",
	  .doc = "Largest record batch accepted." },
	{ "socket.request.max.bytes", CONFIG_INT, "104857600", 1, I32MAX,
	  .doc = "Largest request frame accepted." },
	{ "queued.max.request.bytes", CONFIG_LONG, "536870912", -1, I64MAX,
	  .doc = "Memory, broker-wide, for request frames being read and handled (those above 64 KiB): "
		 "a connection whose frame does not fit stops being read until memory is given back; "
		 "a frame larger than all of it closes its connection; -1: unbounded. "
		 "Sluice departs from Kafka's default (-1) to bound the broker's memory: 512 MiB, five "
		 "frames of socket.request.max.bytes." },
	{ "max.connections", CONFIG_INT, "2147483647", 0, I32MAX,
	  .doc = "Most Kafka connections open at once, broker-wide; one more is closed as it is accepted." },
	{ "max.connections.per.ip", CONFIG_INT, "2147483647", 0, I32MAX,
	  .doc = "Most Kafka connections open at once from one client address; one more is closed as it is accepted." },
	{ "connections.max.idle.ms", CONFIG_LONG, "600000", -1, I64MAX,
	  .doc = "A connection that completes no request for this long is closed: idle, or with a frame "
		 "that has not arrived whole (slowloris). One with a request in progress, or waiting for "
		 "queued.max.request.bytes, is not idle. -1: never." },
	{ "min.insync.replicas", CONFIG_INT, "1", 1, I32MAX, .topic = "min.insync.replicas",
	  .doc = "Replicas that must be in sync (ISR) for acks=all: a partition with fewer refuses "
		 "acks=all writes with NOT_ENOUGH_REPLICAS before appending them, as Kafka does (one "
		 "broker: its ISR is that broker)." },
	{ "unclean.leader.election.enable", CONFIG_BOOL, "false", .topic = "unclean.leader.election.enable",
	  .doc = "When no live replica of a partition is in sync, elect the first live replica out of sync "
		 "(records the ISR had acknowledged may be lost) rather than leave the partition offline "
		 "until an in-sync replica comes back, as Kafka does. A topic's setting overrides it." },
	{ "log.retention.check.interval.ms", CONFIG_LONG, "300000", 1, I64MAX,
	  .doc = "How often retention runs." },
	{ "log.durability", CONFIG_ENUM, "write", .values = durability_values, .topic = "durability",
	  .doc = "Sluice: when a write is acknowledged. write: O_DIRECT write completed; "
		 "sync: written with RWF_DSYNC (power-loss safe); memory: buffered (lost on a crash; a partial "
		 "last block is written after it waited 10 ms for more records, whole blocks as they fill)." },
	{ "max.incremental.fetch.session.cache.slots", CONFIG_INT, "1000", 0, I32MAX,
	  .doc = "Fetch sessions (KIP-227) kept, shared out among the shards; 0: every fetch is a full one." },
	{ "shards", CONFIG_INT, "0", 0, 1024,
	  .doc = "Sluice: shard threads; 0: one per core." },
	{ "shard.tail.memory.bytes", CONFIG_LONG, "268435456", 1048576, I64MAX,
	  .doc = "Sluice: memory per shard for the in-memory tail of its logs." },
	{ "group.initial.rebalance.delay.ms", CONFIG_INT, "3000", 0, I32MAX,
	  .doc = "How long the first rebalance of an empty group waits for more members." },
	{ "group.min.session.timeout.ms", CONFIG_INT, "6000", 1, I32MAX,
	  .doc = "Smallest session timeout a group member may ask for." },
	{ "group.max.session.timeout.ms", CONFIG_INT, "1800000", 1, I32MAX,
	  .doc = "Largest session timeout a group member may ask for." },
	{ "group.max.size", CONFIG_INT, "2147483647", 1, I32MAX,
	  .doc = "Most members a consumer group may have; a JoinGroup beyond it gets GROUP_MAX_SIZE_REACHED." },
	{ "offsets.topic.num.partitions", CONFIG_INT, "50", 1, I32MAX,
	  .doc = "Partitions of __consumer_offsets." },
	{ "offsets.topic.replication.factor", CONFIG_INT, "3", 1, 32767,
	  .doc = "Replicas of each __consumer_offsets partition: the least of it and the cluster's voters (Kafka "
		 "refuses to create the topic below it; Sluice waits until that many brokers are registered). "
		 "An active controller that is no broker (process.roles=controller) waits for this many "
		 "brokers, as Kafka: set it for a cluster of fewer brokers." },
	{ "offsets.retention.minutes", CONFIG_INT, "10080", 1, I32MAX,
	  .doc = "How long committed offsets of an empty group are kept." },
	{ "offsets.retention.ms", CONFIG_LONG, "-1", -1, I64MAX,
	  .doc = "Sluice: offsets.retention.minutes in milliseconds, for finer control; -1: use offsets.retention.minutes." },
	{ "offsets.retention.check.interval.ms", CONFIG_LONG, "600000", 1, I64MAX,
	  .doc = "How often expired offsets are removed." },
	{ "offset.metadata.max.bytes", CONFIG_INT, "4096", 0, I32MAX,
	  .doc = "Largest metadata string of a committed offset; larger gets OFFSET_METADATA_TOO_LARGE." },
	{ "transactional.id.expiration.ms", CONFIG_INT, "604800000", 1, I32MAX,
	  .doc = "How long an idle transactional id is kept." },
	{ "transaction.max.timeout.ms", CONFIG_INT, "900000", 1, I32MAX,
	  .doc = "Largest transaction timeout a producer may ask for; InitProducerId above it gets INVALID_TRANSACTION_TIMEOUT." },
	{ "transaction.abort.timed.out.transaction.cleanup.interval.ms", CONFIG_LONG, "10000", 1, I64MAX,
	  .doc = "How often transactions open longer than their transaction.timeout.ms are aborted (their producer is fenced) and idle transactional ids expired." },
	{ "transaction.state.log.num.partitions", CONFIG_INT, "50", 1, I32MAX,
	  .doc = "Partitions of __transaction_state (fixed once created)." },
	{ "transaction.state.log.replication.factor", CONFIG_INT, "3", 1, 32767,
	  .doc = "Replicas of each __transaction_state partition: the least of it and the cluster's voters, as "
		 "offsets.topic.replication.factor." },
	{ "replica.lag.time.max.ms", CONFIG_LONG, "30000", 1, I64MAX,
	  .doc = "How long a follower may go without catching up to the leader's log end before the "
		 "leader takes it out of the ISR (a PARTITION_CHANGE in the metadata log), as Kafka does." },
	{ "leader.replication.throttled.rate", CONFIG_LONG, "9223372036854775807", 1, I64MAX, .flags = CK_DYNAMIC,
	  .doc = "Bytes per second this node, leading, sends in its answers to throttled followers "
		 "outside the ISR (the replicas a reassignment adds, or those the topic's "
		 "leader.replication.throttled.replicas names), as Kafka's; set at run time (sluicectl "
		 "partition reassign --throttle)." },
	{ "follower.replication.throttled.rate", CONFIG_LONG, "9223372036854775807", 1, I64MAX,
	  .flags = CK_DYNAMIC,
	  .doc = "Bytes per second this node, following, fetches for its throttled replicas (those a "
		 "reassignment adds, or those the topic's follower.replication.throttled.replicas "
		 "names), as Kafka's; set at run time (sluicectl partition reassign --throttle)." },
	{ "producer.id.expiration.ms", CONFIG_INT, "86400000", 1, I32MAX,
	  .doc = "How long an idle producer id's state is kept." },
	{ "native.listen", CONFIG_STRING, "", .check = check_hostport_or_empty,
	  .doc = "Sluice: host:port (IPv4) of the native datagram protocol over the kernel's UDP, one socket per shard (SO_REUSEPORT); empty: off." },
	{ "native.session.credits.bytes", CONFIG_INT, "8388608", 65536, I32MAX,
	  .doc = "Sluice: most bytes of batches a native session may have unacknowledged; beyond it a PRODUCE is refused (throttled)." },
	{ "native.session.timeout.ms", CONFIG_LONG, "60000", 1000, I64MAX,
	  .doc = "Sluice: a native session idle this long (nothing in flight) is forgotten; its client says HELLO again." },
	{ "native.reassembly.timeout.ms", CONFIG_LONG, "2000", 10, I64MAX,
	  .doc = "Sluice: a fragmented batch not complete after this long is dropped (its producer resends it)." },
	{ "native.reassembly.memory.bytes", CONFIG_LONG, "134217728", 1048576, I64MAX,
	  .doc = "Sluice: memory per shard for putting fragmented native batches together (held until each is durable); beyond it a fragmented PRODUCE is refused (throttled)." },
	{ "admin.listen", CONFIG_STRING, "127.0.0.1:9644", .check = check_hostport_or_empty,
	  .doc = "Sluice: host:port of the HTTP admin endpoint (/metrics, /v1/health, /v1/config, /v1/shards, /v1/partitions/TOPIC/N); port 0 picks one, empty turns it off. Set in a file or with --set, a port that cannot be bound stops the start; the default only turns the endpoint off, with a warning." },
	{ "admin.require.auth", CONFIG_BOOL, "false",
	  .doc = "Sluice, as Redpanda's admin_api_require_auth: every admin endpoint request needs HTTP Basic credentials of a SCRAM user of the metadata log (else 401, after connection.failed.authentication.delay.ms); a POST needs a user in super.users (else 403) (docs/security.md#the-admin-endpoint)." },
	{ "admin.ssl.enabled", CONFIG_BOOL, "false",
	  .doc = "Sluice: the admin endpoint serves HTTPS with the broker's own certificate and key (ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key; ssl.key.password), the ones its SSL listeners present; read again on SIGHUP and POST /v1/tls/reload (docs/security.md#the-admin-endpoint)." },
	{ "admin.auth.token.file", CONFIG_STRING, "",
	  .doc = "Sluice: a file of bearer tokens for the admin endpoint, one 'User:NAME TOKEN' a line ('#' comments); with admin.require.auth, 'Authorization: Bearer TOKEN' authenticates as that principal (a POST needs it in super.users). Only each token's SHA-256 is kept; a file others may read, or anyone but its owner write, stops the start. Reread on SIGHUP (docs/security.md#the-admin-endpoint)." },
	{ "admin.ssl.client.auth", CONFIG_ENUM, "none", .values = client_auth_values,
	  .doc = "Sluice: with admin.ssl.enabled, the admin endpoint asks for a client certificate (requested) or insists on one (required), checked in the handshake against ssl.truststore.* (one of another CA fails it); a verified certificate's principal (ssl.principal.mapping.rules) authenticates a request without a password (docs/security.md#the-admin-endpoint)." },
	{ "hardware.profile", CONFIG_STRING, "",
	  .doc = "Sluice: a hardware profile (a hw-profiles/*.conf file, or scripts/hwprobe's hw-profiles/local.conf: docs/hardware-profiles.md) that the web console holds this node's disk writes, disk space and network traffic against (docs/console.md); empty: none. A file that does not load stops the start, naming the file and line." },
	{ "admin.metrics.open", CONFIG_BOOL, "false",
	  .doc = "Sluice: with admin.require.auth, GET /metrics needs no credentials (every other request still does); default false: a scraper authenticates with a bearer token or Basic (docs/security.md#the-admin-endpoint)." },
	{ "dpdk.enable", CONFIG_BOOL, "false",
	  .doc = "Sluice: serve the native datagram protocol on a DPDK port too (kernel bypass): each shard polls its own queue pair. The Kafka TCP listener is unchanged. Needs dpdk.eal.args and dpdk.listen." },
	{ "dpdk.eal.args", CONFIG_STRING, "",
	  .doc = "Sluice: DPDK EAL arguments, split like a shell would (e.g. \"-a 0000:03:00.0 --file-prefix=sluice\", or \"--no-huge -m 512 --no-pci --vdev=net_tap0,iface=sl0\" without a NIC)." },
	{ "dpdk.port", CONFIG_STRING, "",
	  .doc = "Sluice: the DPDK port to use, by device name (\"0000:03:00.0\", \"net_tap0\"); empty: the first port." },
	{ "dpdk.listen", CONFIG_STRING, "", .check = check_ipv4_port_or_empty,
	  .doc = "Sluice: IPv4:port the shards answer the native protocol on over the DPDK port (the address is the port's own, answered in ARP and ICMP echo)." },
	{ "dpdk.prefix.length", CONFIG_INT, "24", 0, 32,
	  .doc = "Sluice: the subnet of dpdk.listen's address (bits); destinations outside it go through dpdk.gateway." },
	{ "dpdk.gateway", CONFIG_STRING, "", .check = check_ipv4_or_empty,
	  .doc = "Sluice: IPv4 next hop for destinations off the subnet; empty: none (answers only on-link clients)." },
	{ "dpdk.mtu", CONFIG_INT, "0", 0, 9600,
	  .doc = "Sluice: IP MTU of the DPDK port (above 1500: jumbo frames, when the port allows); 0: the port's default." },
	{ "dpdk.poll.sleep.us", CONFIG_INT, "0", 0, 100000,
	  .doc = "Sluice: with DPDK on, an idle shard sleeps at most this long between polls of its queues; 0: busy-poll (dedicated cores, lowest latency)." },
};

#define NKEYS ((int)(sizeof(keys) / sizeof(keys[0])))

/* Kafka's topic-level keys that have no broker default above: accepted and
 * ignored (Kafka's own behaviour, or nothing to do on one broker that
 * always preallocates), or refused until Sluice implements them. A
 * refused key still takes `noop`, the value that changes nothing (Kafka's
 * default), so tools that send every key back as they read it keep
 * working. */
enum { TK_IGNORED = 1, TK_REFUSED = 2, TK_ROLES = 3 /* applied by the control thread's roles */ };

struct topic_only {
	const char *name;
	int what;
	char type;             /* b: true/false; n: integer >= min; r: ratio 0..1; s: any string */
	int64_t min;
	const char *noop;      /* TK_REFUSED: the value accepted (and ignored) anyway */
	const char *why;       /* TK_IGNORED: the reason, for the warning and the docs */
};

#define KAFKA_LONG_MAX "9223372036854775807"

static const struct topic_only topic_only_keys[] = {
	{ "message.format.version", TK_IGNORED, 's', 0, NULL,
	  "deprecated: Kafka 3.x ignores it too, every batch is stored in format v2 (magic 2)" },
	{ "message.downconversion.enable", TK_IGNORED, 'b', 0, NULL,
	  "Sluice never converts batches to older formats" },
	{ "preallocate", TK_IGNORED, 'b', 0, NULL, "Sluice always preallocates segments" },
	{ "file.delete.delay.ms", TK_IGNORED, 'n', 0, NULL,
	  "Sluice removes a segment's file as soon as retention drops it" },
	{ "segment.index.bytes", TK_IGNORED, 'n', 4, NULL, "Sluice's offset index grows with its segment" },
	{ "segment.jitter.ms", TK_IGNORED, 'n', 0, NULL, "segments are rolled by size only" },
	{ "min.cleanable.dirty.ratio", TK_IGNORED, 'r', 0, NULL,
	  "Sluice's cleaner takes a compacted partition each time one of its segments is sealed" },
	/* '*' or partition:broker,... (control/ctl_roles.c applies them) */
	{ "follower.replication.throttled.replicas", TK_ROLES, 't', 0, NULL, NULL },
	{ "leader.replication.throttled.replicas", TK_ROLES, 't', 0, NULL, NULL },
	{ "local.retention.ms", TK_IGNORED, 'n', -2, NULL,
	  "applies only with remote.storage.enable=true, as in Kafka" },
	{ "local.retention.bytes", TK_IGNORED, 'n', -2, NULL,
	  "applies only with remote.storage.enable=true, as in Kafka" },
	{ "remote.storage.enable", TK_REFUSED, 'b', 0, "false", NULL },
	{ "flush.messages", TK_REFUSED, 'n', 1, KAFKA_LONG_MAX, NULL },
	{ "flush.ms", TK_REFUSED, 'n', 0, KAFKA_LONG_MAX, NULL },
	{ "segment.ms", TK_REFUSED, 'n', 1, "604800000", NULL },
	{ "max.compaction.lag.ms", TK_REFUSED, 'n', 1, KAFKA_LONG_MAX, NULL },
	{ "min.compaction.lag.ms", TK_REFUSED, 'n', 0, "0", NULL },
	{ "message.timestamp.difference.max.ms", TK_REFUSED, 'n', 0, KAFKA_LONG_MAX, NULL },
	{ "message.timestamp.before.max.ms", TK_REFUSED, 'n', 0, KAFKA_LONG_MAX, NULL },
	{ "message.timestamp.after.max.ms", TK_REFUSED, 'n', 0, KAFKA_LONG_MAX, NULL },
	{ "compression.gzip.level", TK_REFUSED, 'n', -1, "-1", NULL },
	{ "compression.lz4.level", TK_REFUSED, 'n', 1, "9", NULL },
	{ "compression.zstd.level", TK_REFUSED, 'n', -131072, "3", NULL },
};

#define NTOPIC_ONLY ((int)(sizeof(topic_only_keys) / sizeof(topic_only_keys[0])))

static const struct topic_only *topic_only_find(const char *name)
{
	for (int i = 0; i < NTOPIC_ONLY; i++)
		if (!strcmp(topic_only_keys[i].name, name))
			return &topic_only_keys[i];
	return NULL;
}

/* One value per table entry. Invariant: str is the canonical text of num
 * (numbers, bools, enums) and both are valid for the entry. */
struct config_slot {
	char *str;
	int64_t num;
	char *source;
	int explicit_set;   /* set by config_set (not a default, not derived) */
};

/* Kafka's per-listener keys, listener.name.<listener>.<key> (the keys
 * LISTENER_SUFFIXES names), kept as given: the listener name is matched
 * without case, as Kafka lower-cases it. */
struct config_lkey {
	char *key, *value;
	char *source;   /* "FILE:LINE", "--set", or "dynamic-broker" (AlterConfigs of this node) */
};

static const char *const listener_suffixes[] = { "sasl.enabled.mechanisms", "plain.sasl.jaas.config",
						 "scram-sha-256.sasl.jaas.config", "scram-sha-512.sasl.jaas.config",
						 "connections.max.reauth.ms", "plain.connections.max.reauth.ms",
						 "scram-sha-256.connections.max.reauth.ms",
						 "scram-sha-512.connections.max.reauth.ms",
						 /* an SSL listener's own TLS, over the ssl.* keys of
						  * the same name (validated by their entries) */
						 "ssl.keystore.type", "ssl.keystore.location",
						 "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
						 "ssl.truststore.type", "ssl.truststore.location",
						 "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
						 "ssl.cipher.suites", "ssl.principal.mapping.rules", "ssl.allow.dn.changes",
						 "ssl.allow.san.changes", NULL };

/* A listener's stores, which AlterConfigs of the node may change as
 * listener.name.<l>.<key> (Kafka's per-broker dynamic listener configs,
 * its SslConfigs.RECONFIGURABLE_CONFIGS that Sluice reads). */
static const char *const listener_dynamic[] = { "ssl.keystore.location", "ssl.keystore.certificate.chain",
						"ssl.keystore.key", "ssl.key.password", "ssl.truststore.location",
						"ssl.truststore.certificates", NULL };

static int in_list(const char *const *l, const char *s)
{
	for (int i = 0; s && l[i]; i++)
		if (!strcmp(l[i], s))
			return 1;
	return 0;
}

struct config {
	struct config_slot slot[NKEYS];
	struct config_lkey *lkeys;
	int nlkeys;
};

static const char SRC_DEFAULT[] = "default";

static void errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int key_find(const char *name)
{
	for (int i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name) || (keys[i].alias && !strcmp(keys[i].alias, name)))
			return i;
	return -1;
}

static int key_find_topic(const char *name)
{
	for (int i = 0; i < NKEYS; i++)
		if (keys[i].topic && !strcmp(keys[i].topic, name))
			return i;
	return -1;
}

static char *trim_dup(const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return strndup(s, n);
}

/* Kafka-style plain integer: [+-]digits, range-checked. */
static int parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	const char *p = s;
	int neg = 0;
	uint64_t v = 0, lim;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!*p)
		return -EINVAL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (lim - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	if (*out < min || *out > max)
		return -ERANGE;
	return 0;
}

/* "compact, delete" -> "compact,delete": a set of base words in the table's
 * canonical order. Returns 0 and writes buf, or -EINVAL. */
static int canon_set(const char *v, char *buf, size_t n)
{
	static const char *const words[] = { "compact", "delete" };
	int have[2] = { 0, 0 }, any = 0;
	const char *p = v;

	while (1) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char *w = trim_dup(p, len);
		int found = 0;

		if (!w)
			return -ENOMEM;
		for (int i = 0; i < 2; i++)
			if (!strcmp(w, words[i])) {
				have[i] = found = any = 1;
			}
		free(w);
		if (!found)
			return -EINVAL;
		if (!e)
			break;
		p = e + 1;
	}
	if (!any)
		return -EINVAL;
	snprintf(buf, n, "%s%s%s", have[0] ? "compact" : "", have[0] && have[1] ? "," : "",
		 have[1] ? "delete" : "");
	return 0;
}

static const char *type_name(const struct config_key *k)
{
	switch (k->type) {
	case CONFIG_INT: return "int";
	case CONFIG_LONG: return "long";
	case CONFIG_BOOL: return "boolean";
	case CONFIG_STRING: return "string";
	case CONFIG_ENUM: return "enum";
	case CONFIG_LIST: return "list";
	}
	return "?";
}

/* What the key allows, for error messages and the docs. */
static void allowed_text(const struct config_key *k, char *buf, size_t n)
{
	size_t at = 0;

	buf[0] = 0;
	switch (k->type) {
	case CONFIG_INT:
	case CONFIG_LONG:
		if (k->max == I64MAX || (k->type == CONFIG_INT && k->max == I32MAX))
			snprintf(buf, n, "an integer >= %" PRId64, k->min);
		else
			snprintf(buf, n, "an integer in [%" PRId64 ", %" PRId64 "]", k->min, k->max);
		break;
	case CONFIG_BOOL:
		snprintf(buf, n, "true or false");
		break;
	case CONFIG_ENUM:
		at += (size_t)snprintf(buf, n, "one of");
		for (int i = 0; k->values[i] && at < n; i++)
			at += (size_t)snprintf(buf + at, n - at, "%s '%s'", i ? "," : "", k->values[i]);
		break;
	case CONFIG_STRING:
		snprintf(buf, n, "%s", k->check == check_hostport ? "host:port"
				       : k->check == check_hostport_or_empty ? "host:port, or empty"
				       : k->check == check_ipv4_port_or_empty ? "IPv4:port, or empty"
				       : k->check == check_ipv4_or_empty ? "an IPv4 address, or empty"
				       : k->check == check_authorizer ? "org.apache.kafka.metadata.authorizer.StandardAuthorizer "
									"(the only authorizer), or empty"
				       : "a string");
		break;
	case CONFIG_LIST:
		snprintf(buf, n, "%s", k->check == check_listener ? "a comma-separated list of NAME://host:port"
			 : k->check == check_tls_protocol ? "a comma-separated list of TLSv1.2, TLSv1.3"
			 : "a comma-separated list");
		break;
	}
}

/* Validate and canonicalize v for key k: *str gets a malloc'd canonical
 * string, *num the number/index. */
static int value_parse(const struct config_key *k, const char *v, char **str, int64_t *num)
{
	char buf[64];
	int64_t x = 0;
	int rc;

	*str = NULL;
	*num = 0;
	switch (k->type) {
	case CONFIG_INT:
	case CONFIG_LONG:
		if ((rc = parse_int(v, k->min, k->max, &x)) < 0)
			return -EINVAL;
		snprintf(buf, sizeof(buf), "%" PRId64, x);
		v = buf;
		break;
	case CONFIG_BOOL:
		if (!strcasecmp(v, "true"))
			x = 1;
		else if (strcasecmp(v, "false"))
			return -EINVAL;
		v = x ? "true" : "false";
		break;
	case CONFIG_ENUM:
		if (k->flags & CK_SET) {
			if ((rc = canon_set(v, buf, sizeof(buf))) < 0)
				return rc;
			v = buf;
		}
		for (x = 0; k->values[x] && strcmp(k->values[x], v); x++)
			;
		if (!k->values[x])
			return -EINVAL;
		break;
	case CONFIG_STRING:
		if ((k->flags & CK_NONEMPTY) && !*v)
			return -EINVAL;
		if (k->check && k->check(v) < 0)
			return -EINVAL;
		break;
	case CONFIG_LIST: {
		/* trim each element; no empty elements; each passes check */
		size_t n = strlen(v) + 1, at = 0;
		char *out = malloc(n);
		const char *p = v;

		if (!out)
			return -ENOMEM;
		out[0] = 0;
		if ((k->flags & CK_NONEMPTY) && !*v) {
			free(out);
			return -EINVAL;
		}
		while (*v) {
			const char *e = strchr(p, ',');
			size_t len = e ? (size_t)(e - p) : strlen(p);
			char *w = trim_dup(p, len);

			if (!w) {
				free(out);
				return -ENOMEM;
			}
			if (!*w || (k->check && k->check(w) < 0)) {
				free(w);
				free(out);
				return -EINVAL;
			}
			at += (size_t)snprintf(out + at, n - at, "%s%s", at ? "," : "", w);
			free(w);
			if (!e)
				break;
			p = e + 1;
		}
		*str = out;
		return 0;
	}
	}
	*num = x;
	*str = strdup(v);
	return *str ? 0 : -ENOMEM;
}

static int slot_set(struct config_slot *s, char *str, int64_t num, const char *source)
{
	char *src = source == SRC_DEFAULT ? (char *)SRC_DEFAULT : strdup(source);

	if (!src) {
		free(str);
		return -ENOMEM;
	}
	free(s->str);
	if (s->source != SRC_DEFAULT)
		free(s->source);
	s->str = str;
	s->num = num;
	s->source = src;
	return 0;
}

/* log.retention.ms when it was not set itself: the most precise unit that
 * was set (minutes, then hours), else its default. */
static int retention_resolve(struct config *c)
{
	int ms = key_find("log.retention.ms");
	int min = key_find("log.retention.minutes");
	int hr = key_find("log.retention.hours");
	int from = c->slot[min].explicit_set ? min : c->slot[hr].explicit_set ? hr : -1;
	char buf[32], *str;
	int64_t v;

	if (c->slot[ms].explicit_set || from < 0)
		return 0;
	v = c->slot[from].num < 0 ? -1 : c->slot[from].num * keys[from].unit_ms;
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	if (!(str = strdup(buf)))
		return -ENOMEM;
	return slot_set(&c->slot[ms], str, v, c->slot[from].source);
}

int config_create(struct config **out)
{
	struct config *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	for (int i = 0; i < NKEYS; i++) {
		char *str;
		int64_t num;
		int rc = value_parse(&keys[i], keys[i].def, &str, &num);

		if (rc == 0)
			rc = slot_set(&c->slot[i], str, num, SRC_DEFAULT);
		if (rc < 0) {
			config_destroy(c);
			return rc;
		}
	}
	*out = c;
	return 0;
}

void config_destroy(struct config *c)
{
	if (!c)
		return;
	for (int i = 0; i < NKEYS; i++) {
		free(c->slot[i].str);
		if (c->slot[i].source != SRC_DEFAULT)
			free(c->slot[i].source);
	}
	for (int i = 0; i < c->nlkeys; i++) {
		free(c->lkeys[i].key);
		free(c->lkeys[i].value);
		free(c->lkeys[i].source);
	}
	free(c->lkeys);
	free(c);
}

/* listener.name.<listener>.<suffix>: the suffix, or NULL when the key is
 * not of that form. */
static const char *lkey_suffix(const char *key)
{
	const char *p = key + strlen("listener.name."), *dot;

	if (strncmp(key, "listener.name.", strlen("listener.name.")) || !(dot = strchr(p, '.')) || dot == p)
		return NULL;
	return dot + 1;
}

/* Set key (a later one of the same name without case replaces it, its
 * spelling and source with it). */
static int lkey_put(struct config *c, const char *key, const char *value, const char *source)
{
	struct config_lkey *n;
	char *v = strdup(value), *k = strdup(key), *src = strdup(source ? source : "--set");

	if (!v || !k || !src) {
		free(v);
		free(k);
		free(src);
		return -ENOMEM;
	}
	for (int i = 0; i < c->nlkeys; i++)
		if (!strcasecmp(c->lkeys[i].key, key)) {
			free(c->lkeys[i].key);
			free(c->lkeys[i].value);
			free(c->lkeys[i].source);
			c->lkeys[i] = (struct config_lkey){ k, v, src };
			return 0;
		}
	n = realloc(c->lkeys, sizeof(*n) * (size_t)(c->nlkeys + 1)); /* style: allow config, at start */
	if (!n) {
		free(v);
		free(k);
		free(src);
		return -ENOMEM;
	}
	c->lkeys = n;
	c->lkeys[c->nlkeys++] = (struct config_lkey){ k, v, src };
	return 0;
}

int config_listener_key(const struct config *c, int i, const char **key)
{
	if (i < 0 || i >= c->nlkeys)
		return 0;
	*key = c->lkeys[i].key;
	return 1;
}

const char *config_listener_str(const struct config *c, const char *listener, const char *suffix)
{
	size_t ln = strlen(listener);

	for (int i = 0; i < c->nlkeys; i++) {
		const char *k = c->lkeys[i].key + strlen("listener.name.");

		if (!strncasecmp(k, listener, ln) && k[ln] == '.' && !strcmp(k + ln + 1, suffix))
			return c->lkeys[i].value;
	}
	return NULL;
}

int config_dup(const struct config *c, struct config **out)
{
	struct config *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	for (int i = 0; i < NKEYS; i++) {
		const struct config_slot *s = &c->slot[i];

		d->slot[i].num = s->num;
		d->slot[i].explicit_set = s->explicit_set;
		d->slot[i].source = s->source == SRC_DEFAULT ? (char *)SRC_DEFAULT : strdup(s->source);
		d->slot[i].str = s->str ? strdup(s->str) : NULL;
		if (!d->slot[i].source || (s->str && !d->slot[i].str)) {
			config_destroy(d);
			return -ENOMEM;
		}
	}
	for (int i = 0; i < c->nlkeys; i++)
		if (lkey_put(d, c->lkeys[i].key, c->lkeys[i].value, c->lkeys[i].source) < 0) {
			config_destroy(d);
			return -ENOMEM;
		}
	*out = d;
	return 0;
}

int config_dynamic(const char *key)
{
	int i = key_find(key);

	return (i >= 0 && (keys[i].topic != NULL || (keys[i].flags & CK_DYNAMIC))) || config_dynamic_per_broker(key);
}

int config_dynamic_per_broker(const char *key)
{
	return key_find(key) < 0 && in_list(listener_dynamic, lkey_suffix(key));
}

int config_sensitive(const char *key)
{
	const char *suf = key_find(key) < 0 ? lkey_suffix(key) : key;
	int i = suf ? key_find(suf) : -1;
	size_t n = suf ? strlen(suf) : 0;

	if (suf && n >= strlen("sasl.jaas.config") && !strcmp(suf + n - strlen("sasl.jaas.config"), "sasl.jaas.config"))
		return 1;   /* a listener's JAAS config holds passwords */
	return i >= 0 && (keys[i].flags & CK_SENSITIVE);
}

static int key_validate(const struct config_key *k, const char *name, const char *value,
			const char *source, char *err, size_t errlen, char **str, int64_t *num);

int config_dynamic_validate(const char *key, const char *value, char *err, size_t errlen)
{
	int i = key_find(key), rc;
	char *str, *v;
	int64_t num;

	if (i < 0 && lkey_suffix(key)) {
		const char *suf = lkey_suffix(key);
		int g = key_find(suf);

		if (!in_list(listener_suffixes, suf)) {
			errf(err, errlen, "unknown configuration key '%s'", key);
			return -ENOENT;
		}
		if (!in_list(listener_dynamic, suf)) {
			errf(err, errlen, "Cannot update these configs dynamically: %s (read at start: change the config "
			     "file and restart; a listener's keystore and truststore keys may change)", key);
			return -EPERM;
		}
		if (!value)
			return 0;
		if (!(v = trim_dup(value, strlen(value))))
			return -ENOMEM;
		rc = key_validate(&keys[g], key, v, "dynamic", err, errlen, &str, &num);
		free(v);
		free(str);
		return rc;
	}
	if (i < 0) {
		errf(err, errlen, "unknown configuration key '%s'", key);
		return -ENOENT;
	}
	if (in_list(listener_dynamic, keys[i].name)) {
		/* Kafka's words: the broker-wide key is read at start; a
		 * listener's own is what changes */
		errf(err, errlen, "These security configs can be dynamically updated only per-listener using the "
		     "listener prefix: %s (listener.name.<listener>.%s)", key, keys[i].name);
		return -EPERM;
	}
	if (!keys[i].topic && !(keys[i].flags & CK_DYNAMIC)) {
		errf(err, errlen, "Cannot update these configs dynamically: %s (read at start: change the config "
		     "file and restart)", key);
		return -EPERM;
	}
	if (!value)
		return 0;
	if (!(v = trim_dup(value, strlen(value))))
		return -ENOMEM;
	rc = key_validate(&keys[i], key, v, "dynamic", err, errlen, &str, &num);
	free(v);
	free(str);
	return rc;
}

static int key_validate(const struct config_key *k, const char *name, const char *value,
			const char *source, char *err, size_t errlen, char **str, int64_t *num)
{
	int rc = value_parse(k, value, str, num);

	if (rc == -EINVAL) {
		char allowed[256];

		allowed_text(k, allowed, sizeof(allowed));
		errf(err, errlen, "%s: invalid value '%s' for configuration key '%s': expected %s",
		     source, value, name, allowed);
	} else if (rc < 0) {
		errf(err, errlen, "%s: %s: %s", source, name, strerror(-rc));
	}
	return rc;
}

int config_set(struct config *c, const char *key, const char *value, const char *source,
	       char *err, size_t errlen)
{
	int i = key_find(key), rc;
	char *str, *v;
	int64_t num;

	if (!source)
		source = "--set";
	if (!value) {
		errf(err, errlen, "%s: no value for configuration key '%s'", source, key);
		return -EINVAL;
	}
	if (i < 0 && lkey_suffix(key)) {
		const char *suf = lkey_suffix(key);

		for (int j = 0; listener_suffixes[j]; j++)
			if (!strcmp(suf, listener_suffixes[j])) {
				int g = strncmp(suf, "ssl.", 4) && strcmp(suf, "connections.max.reauth.ms") ? -1
													: key_find(suf);

				if (!(v = trim_dup(value, strlen(value))))
					return -ENOMEM;
				if (g >= 0) {
					/* the global key's rules, its canonical text kept */
					rc = key_validate(&keys[g], key, v, source, err, errlen, &str, &num);
					free(v);
					if (rc < 0)
						return rc;
					v = str;
				}
				rc = lkey_put(c, key, v, source);
				free(v);
				return rc;
			}
		errf(err, errlen, "%s: unknown configuration key '%s' (Sluice takes listener.name.<listener>. "
		     "with sasl.enabled.mechanisms, <mechanism>.sasl.jaas.config, "
		     "[<mechanism>.]connections.max.reauth.ms and the ssl.* keys of a listener's TLS only)", source, key);
		return -ENOENT;
	}
	if (i < 0) {
		errf(err, errlen, "%s: unknown configuration key '%s'", source, key);
		return -ENOENT;
	}
	if (!(v = trim_dup(value, strlen(value))))
		return -ENOMEM;
	rc = key_validate(&keys[i], key, v, source, err, errlen, &str, &num);
	free(v);
	if (rc < 0)
		return rc;
	if ((rc = slot_set(&c->slot[i], str, num, source)) < 0)
		return rc;
	c->slot[i].explicit_set = 1;
	if ((keys[i].flags & CK_RET_UNIT) || !strcmp(keys[i].name, "log.retention.ms"))
		return retention_resolve(c);
	return 0;
}

int config_set_arg(struct config *c, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	char *key;
	int rc;

	if (!eq) {
		errf(err, errlen, "--set: expected KEY=VALUE, got '%s'", arg);
		return -EINVAL;
	}
	if (!(key = trim_dup(arg, (size_t)(eq - arg))))
		return -ENOMEM;
	rc = config_set(c, key, eq + 1, "--set", err, errlen);
	free(key);
	return rc;
}

int64_t config_int(const struct config *c, const char *key)
{
	int i = key_find(key);

	if (i < 0 || keys[i].type == CONFIG_STRING || keys[i].type == CONFIG_LIST)
		return 0;
	return c->slot[i].num;
}

const char *config_str(const struct config *c, const char *key)
{
	int i = key_find(key);

	return i < 0 ? NULL : c->slot[i].str;
}

const char *config_source(const struct config *c, const char *key)
{
	int i = key_find(key);

	for (int j = 0; i < 0 && j < c->nlkeys; j++)
		if (!strcasecmp(c->lkeys[j].key, key))
			return c->lkeys[j].source;
	return i < 0 ? NULL : c->slot[i].source;
}

void config_foreach(const struct config *c,
		    void (*fn)(const char *key, const char *value, const char *source,
			       int is_default, void *arg),
		    void *arg)
{
	for (int i = 0; i < NKEYS; i++)
		fn(keys[i].name, (keys[i].flags & CK_SENSITIVE) ? NULL : c->slot[i].str, c->slot[i].source,
		   c->slot[i].source == SRC_DEFAULT, arg);
	for (int i = 0; i < c->nlkeys; i++)
		fn(c->lkeys[i].key, config_sensitive(c->lkeys[i].key) ? NULL : c->lkeys[i].value, c->lkeys[i].source, 0,
		   arg);
}

const char *config_advertised_listeners(const struct config *c)
{
	const char *a = config_str(c, "advertised.listeners");

	return a && *a ? a : config_str(c, "listeners");
}

/* A throttled-replica list: "", "*", or "partition:broker" entries
 * (non-negative integers) separated by commas, spaces around them. */
static int throttled_list_ok(const char *v)
{
	while (*v == ' ')
		v++;
	if (!*v)
		return 1;
	if (*v == '*') {
		for (v++; *v == ' '; v++)
			;
		return !*v;
	}
	for (;;) {
		for (int side = 0; side < 2; side++) {
			const char *d = v;

			while (*v >= '0' && *v <= '9')
				v++;
			if (v == d || v - d > 10)
				return 0;
			while (*v == ' ')
				v++;
			if (side == 0 && *v++ != ':')
				return 0;
			while (side == 0 && *v == ' ')
				v++;
		}
		if (!*v)
			return 1;
		if (*v++ != ',')
			return 0;
		while (*v == ' ')
			v++;
	}
}

/* A topic-only key's value: refused unless it is the no-op, else checked
 * by its type. */
static int topic_only_validate(const struct topic_only *o, const char *v, char *err, size_t errlen)
{
	int64_t x;
	char *end;
	double r;

	if (o->what == TK_REFUSED && (!o->noop || strcmp(v, o->noop))) {
		errf(err, errlen, "Sluice does not support %s yet%s%s%s", o->name, o->noop ? " (only " : "",
		     o->noop ? o->noop : "", o->noop ? ", which changes nothing, is accepted)" : "");
		return -EINVAL;
	}
	switch (o->type) {
	case 'b':
		if (strcasecmp(v, "true") && strcasecmp(v, "false"))
			break;
		return 0;
	case 't':
		if (throttled_list_ok(v))
			return 0;
		/* Kafka's ThrottledReplicaListValidator */
		errf(err, errlen, "%s must be the literal '*' or a list of replicas in the following format: "
		     "[partitionId]:[brokerId],[partitionId]:[brokerId],...", o->name);
		return -EINVAL;
	case 'n':
		if (parse_int(v, o->min, I64MAX, &x) < 0)
			break;
		return 0;
	case 'r':
		r = strtod(v, &end);
		if (!*v || *end || !(r >= 0 && r <= 1))
			break;
		return 0;
	default:
		return 0;
	}
	errf(err, errlen, "invalid value '%s' for topic configuration key '%s': expected %s", v, o->name,
	     o->type == 'b' ? "true or false" : o->type == 'r' ? "a number in [0, 1]" : "an integer");
	return -EINVAL;
}

int topic_config_validate(const char *key, const char *value, char *err, size_t errlen)
{
	int i = key_find_topic(key), rc;
	const struct topic_only *o = i < 0 ? topic_only_find(key) : NULL;
	char *str, *v;
	int64_t num;

	if (i < 0 && !o) {
		errf(err, errlen, "unknown topic configuration key '%s'", key);
		return -ENOENT;
	}
	if (!value) {
		errf(err, errlen, "null value for topic configuration key '%s'", key);
		return -EINVAL;
	}
	if (!(v = trim_dup(value, strlen(value))))
		return -ENOMEM;
	if (o) {
		rc = topic_only_validate(o, v, err, errlen);
		free(v);
		return rc;
	}
	rc = key_validate(&keys[i], key, v, "topic", err, errlen, &str, &num);
	free(v);
	free(str);
	return rc;
}

const char *topic_config_ignored(const char *key)
{
	const struct topic_only *o = topic_only_find(key);

	return o && o->what != TK_ROLES ? o->why ? o->why : "it changes nothing" : NULL;
}

int topic_config_known(const char *key)
{
	return key_find_topic(key) >= 0 || topic_only_find(key);
}

const char *topic_config_broker_key(const char *key)
{
	int i = key_find_topic(key);

	return i < 0 ? NULL : keys[i].name;
}

const char *topic_config_default(const struct config *c, const char *key)
{
	int i = key_find_topic(key);

	return i < 0 ? NULL : c->slot[i].str;
}

const char *topic_config_key_at(int i)
{
	for (int k = 0; k < NKEYS; k++)
		if (keys[k].topic && i-- == 0)
			return keys[k].topic;
	return NULL;
}

int topic_config_to_plog(const struct config *c, const char *const *tkeys,
			 const char *const *values, int n, struct plog_config *out)
{
	int64_t v[NKEYS];
	int policy;

	for (int i = 0; i < NKEYS; i++)
		v[i] = c->slot[i].num;
	for (int j = 0; j < n; j++) {
		int i = key_find_topic(tkeys[j]), rc;
		char *str, *t;
		int64_t num;

		if (i < 0 && topic_only_find(tkeys[j]))
			continue;   /* accepted and ignored */
		if (i < 0)
			return -ENOENT;
		if (!values[j])
			continue;   /* null: the broker default */
		if (!(t = trim_dup(values[j], strlen(values[j]))))
			return -ENOMEM;
		rc = value_parse(&keys[i], t, &str, &num);
		free(t);
		free(str);
		if (rc < 0)
			return rc;
		v[i] = num;
	}
	plog_config_defaults(out);
	out->segment_bytes = (uint64_t)v[key_find("log.segment.bytes")];
	out->index_interval = (uint32_t)v[key_find("log.index.interval.bytes")];
	out->max_batch = (uint32_t)v[key_find("message.max.bytes")];
	out->retention_ms = v[key_find("log.retention.ms")];
	out->retention_bytes = v[key_find("log.retention.bytes")];
	out->delete_retention_ms = v[key_find("log.cleaner.delete.retention.ms")];
	out->durability = (int)v[key_find("log.durability")];
	out->compression = (int)v[key_find("compression.type")];
	if (out->compression == CONFIG_COMPRESSION_PRODUCER)
		out->compression = -1;
	policy = (int)v[key_find("log.cleanup.policy")];
	out->compact = policy != CONFIG_CLEANUP_DELETE;
	if (policy == CONFIG_CLEANUP_COMPACT) {
		out->retention_ms = -1;
		out->retention_bytes = -1;
	}
	if (out->retention_ms < 0)
		out->retention_ms = -1;
	return 0;
}

static int port_parse(const char *p, int *port)
{
	int64_t v;

	if (parse_int(p, 0, 65535, &v) < 0 || *p == '+' || *p == '-')
		return -EINVAL;
	*port = (int)v;
	return 0;
}

int config_hostport(const char *s, char *host, size_t hostlen, int *port)
{
	const char *h = s, *colon;
	size_t hl;

	if (*s == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':' || rb == s + 1)
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
		for (const char *q = h; q < rb; q++)
			if (!isxdigit((unsigned char)*q) && *q != ':' && *q != '.')
				return -EINVAL;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
		for (const char *q = s; q < colon; q++)
			if (!isalnum((unsigned char)*q) && *q != '.' && *q != '-' && *q != '_')
				return -EINVAL;   /* also rejects an unbracketed IPv6 */
	}
	if (port_parse(colon + 1, port) < 0)
		return -EINVAL;
	if (hl == 0) {
		h = "0.0.0.0";
		hl = 7;
	}
	if (hl + 1 > hostlen)
		return -ENAMETOOLONG;
	memcpy(host, h, hl);
	host[hl] = 0;
	return 0;
}

int config_listener(const char *listeners, char *host, size_t hostlen, int *port)
{
	const char *sep, *end, *p;
	char one[512];
	size_t n;

	if (!listeners)
		return -EINVAL;
	while (isspace((unsigned char)*listeners))
		listeners++;
	end = strchr(listeners, ',');
	n = end ? (size_t)(end - listeners) : strlen(listeners);
	while (n && isspace((unsigned char)listeners[n - 1]))
		n--;
	if (n >= sizeof(one))
		return -EINVAL;
	memcpy(one, listeners, n);
	one[n] = 0;
	sep = strstr(one, "://");
	if (!sep || sep == one)
		return -EINVAL;
	for (p = one; p < sep; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return -EINVAL;
	return config_hostport(sep + 3, host, hostlen, port);
}

int config_key_at(int i, struct config_key_info *out)
{
	const struct config_key *k;

	if (i < 0 || i >= NKEYS)
		return -ENOENT;
	k = &keys[i];
	out->name = k->name;
	out->type = k->type;
	out->type_name = type_name(k);
	out->def = k->def;
	out->doc = k->doc;
	out->alias = k->alias;
	out->topic = k->topic;
	allowed_text(k, out->allowed, sizeof(out->allowed));
	return 0;
}
