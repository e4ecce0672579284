/* tests/unit/test_config.c — the configuration table: defaults, every
 * type, the properties file format, errors naming the key and the line,
 * aliases, retention units, topic configs and listeners. */
#include <errno.h>

#include "control/config.h"
#include "storage/plog.h"
#include "tests/unit/helpers.h"

static struct config *c;
static char err[512];
static char *dir;

static void setup(void)
{
	dir = test_tmpdir();
	cr_assert_eq(config_create(&c), 0);
	err[0] = 0;
}

static void teardown(void)
{
	config_destroy(c);
	test_rmrf(dir);
	free(dir);
}

/* Write text to a file in the test directory; returns its path (static). */
static const char *write_file(const char *text)
{
	static char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/server.properties", dir);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
	return path;
}

TestSuite(config, .init = setup, .fini = teardown, .timeout = 30);

Test(config, defaults)
{
	cr_assert_str_eq(config_str(c, "listeners"), "PLAINTEXT://127.0.0.1:9092");
	cr_assert_str_eq(config_str(c, "advertised.listeners"), "");
	cr_assert_str_eq(config_advertised_listeners(c), "PLAINTEXT://127.0.0.1:9092");
	cr_assert_eq(config_int(c, "node.id"), 1);
	cr_assert_str_eq(config_str(c, "log.dirs"), "./data");
	cr_assert_eq(config_int(c, "num.partitions"), 1);
	cr_assert_eq(config_int(c, "default.replication.factor"), 1);
	cr_assert_eq(config_int(c, "auto.create.topics.enable"), 1);
	cr_assert_eq(config_int(c, "log.segment.bytes"), 1073741824);
	cr_assert_eq(config_int(c, "log.retention.ms"), 604800000);
	cr_assert_eq(config_int(c, "log.retention.bytes"), -1);
	cr_assert_eq(config_int(c, "log.cleanup.policy"), CONFIG_CLEANUP_DELETE);
	cr_assert_eq(config_int(c, "log.cleaner.delete.retention.ms"), 86400000);
	cr_assert_eq(config_int(c, "log.index.interval.bytes"), 4096);
	cr_assert_str_eq(config_str(c, "log.message.timestamp.type"), "CreateTime");
	cr_assert_eq(config_int(c, "message.max.bytes"), 1048588);
	cr_assert_eq(config_int(c, "socket.request.max.bytes"), 104857600);
	cr_assert_eq(config_int(c, "min.insync.replicas"), 1);
	cr_assert_eq(config_int(c, "log.retention.check.interval.ms"), 300000);
	cr_assert_eq(config_int(c, "log.durability"), PLOG_DUR_WRITE);
	cr_assert_eq(config_int(c, "shards"), 0);
	cr_assert_eq(config_int(c, "shard.tail.memory.bytes"), 268435456);
	cr_assert_eq(config_int(c, "group.initial.rebalance.delay.ms"), 3000);
	cr_assert_eq(config_int(c, "offsets.topic.num.partitions"), 50);
	cr_assert_eq(config_int(c, "offsets.retention.minutes"), 10080);
	cr_assert_eq(config_int(c, "transactional.id.expiration.ms"), 604800000);
	cr_assert_eq(config_int(c, "transaction.max.timeout.ms"), 900000);
	cr_assert_eq(config_int(c, "producer.id.expiration.ms"), 86400000);
	cr_assert_str_eq(config_str(c, "admin.listen"), "127.0.0.1:9644");
	cr_assert_eq(config_int(c, "dpdk.enable"), 0);
	cr_assert_str_eq(config_source(c, "node.id"), "default");
	cr_assert_null(config_str(c, "no.such.key"));
	cr_assert_null(config_source(c, "no.such.key"));
}

struct seen { int n, defaults; int saw_node; char node_src[64]; };

static void count_cb(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	struct seen *s = arg;

	cr_assert(key && source);
	/* a password or private key is never shown */
	cr_assert(value || !strcmp(key, "ssl.key.password") || !strcmp(key, "ssl.keystore.key"), "%s", key);
	cr_assert(!value || (strcmp(key, "ssl.key.password") && strcmp(key, "ssl.keystore.key")), "%s", key);
	s->n++;
	s->defaults += is_default;
	if (!strcmp(key, "node.id")) {
		s->saw_node = 1;
		snprintf(s->node_src, sizeof(s->node_src), "%s", source);
		cr_assert_str_eq(value, "7");
	}
	cr_assert_str_neq(key, "broker.id", "aliases are not listed");
}

Test(config, foreach_lists_every_key_with_source)
{
	struct seen s = { 0 };

	cr_assert_eq(config_set(c, "broker.id", "7", NULL, err, sizeof(err)), 0);
	config_foreach(c, count_cb, &s);
	cr_assert_geq(s.n, 31);
	cr_assert_eq(s.defaults, s.n - 1);
	cr_assert(s.saw_node);
	cr_assert_str_eq(s.node_src, "--set");
}

Test(config, every_type_parsed)
{
	/* int */
	cr_assert_eq(config_set(c, "num.partitions", " 12 ", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "num.partitions"), 12);
	cr_assert_str_eq(config_str(c, "num.partitions"), "12");
	cr_assert_eq(config_set(c, "num.partitions", "+3", "--set", err, sizeof(err)), 0);
	cr_assert_str_eq(config_str(c, "num.partitions"), "3");
	/* long */
	cr_assert_eq(config_set(c, "log.retention.bytes", "9223372036854775807", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.bytes"), INT64_MAX);
	cr_assert_eq(config_set(c, "log.retention.bytes", "9223372036854775808", "--set", err, sizeof(err)), -EINVAL);
	/* bool */
	cr_assert_eq(config_set(c, "auto.create.topics.enable", "FALSE", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "auto.create.topics.enable"), 0);
	cr_assert_str_eq(config_str(c, "auto.create.topics.enable"), "false");
	cr_assert_eq(config_set(c, "dpdk.enable", "true", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "dpdk.enable"), 1);
	cr_assert_eq(config_set(c, "dpdk.enable", "yes", "--set", err, sizeof(err)), -EINVAL);
	/* enum */
	cr_assert_eq(config_set(c, "log.durability", "sync", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.durability"), PLOG_DUR_SYNC);
	cr_assert_eq(config_set(c, "log.durability", "memory", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.durability"), PLOG_DUR_MEMORY);
	cr_assert_eq(config_set(c, "log.message.timestamp.type", "LogAppendTime", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.message.timestamp.type"), CONFIG_TS_LOG_APPEND_TIME);
	cr_assert_eq(config_set(c, "log.message.timestamp.type", "logappendtime", "--set", err, sizeof(err)), -EINVAL);
	/* enum of sets */
	cr_assert_eq(config_set(c, "log.cleanup.policy", "compact", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.cleanup.policy"), CONFIG_CLEANUP_COMPACT);
	cr_assert_eq(config_set(c, "log.cleanup.policy", "delete , compact", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.cleanup.policy"), CONFIG_CLEANUP_COMPACT_DELETE);
	cr_assert_str_eq(config_str(c, "log.cleanup.policy"), "compact,delete");
	cr_assert_eq(config_set(c, "log.cleanup.policy", "compact,,delete", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "log.cleanup.policy", "", "--set", err, sizeof(err)), -EINVAL);
	/* string */
	cr_assert_eq(config_set(c, "admin.listen", "0.0.0.0:9000", "--set", err, sizeof(err)), 0);
	cr_assert_str_eq(config_str(c, "admin.listen"), "0.0.0.0:9000");
	cr_assert_eq(config_set(c, "admin.listen", "nope", "--set", err, sizeof(err)), -EINVAL);
	/* list */
	cr_assert_eq(config_set(c, "listeners", "PLAINTEXT://a:1 , INTERNAL://b:2", "--set", err, sizeof(err)), 0);
	cr_assert_str_eq(config_str(c, "listeners"), "PLAINTEXT://a:1,INTERNAL://b:2");
	cr_assert_eq(config_set(c, "listeners", "PLAINTEXT://a:1,", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "listeners", "", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "advertised.listeners", "", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "log.dirs", "/a,/b", "--set", err, sizeof(err)), 0);
	cr_assert_str_eq(config_str(c, "log.dirs"), "/a,/b");
}

Test(config, numbers_are_plain_integers_in_range)
{
	static const char *bad[] = { "", "abc", "0x10", "1e6", "10k", "1.5", " - 1", "--1", "1 2" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(config_set(c, "num.partitions", bad[i], "--set", err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
	cr_assert_eq(config_set(c, "num.partitions", "0", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "num.partitions", "2147483648", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "log.segment.bytes", "16383", "--set", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "log.segment.bytes") && strstr(err, "16383") && strstr(err, "16384"), "%s", err);
	cr_assert_eq(config_set(c, "log.segment.bytes", "16384", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "shards", "1025", "--set", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "[0, 1024]"), "%s", err);
	cr_assert_eq(config_int(c, "num.partitions"), 1, "a rejected value changes nothing");
}

Test(config, errors_name_key_value_and_allowed)
{
	cr_assert_eq(config_set(c, "foo", "1", "--set", err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "--set: unknown configuration key 'foo'");
	cr_assert_eq(config_set(c, "log.durability", "fast", NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--set") && strstr(err, "log.durability") && strstr(err, "'fast'") &&
		  strstr(err, "'write'") && strstr(err, "'sync'") && strstr(err, "'memory'"), "%s", err);
	cr_assert_eq(config_set_arg(c, "log.retention.bytes=1000", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.bytes"), 1000);
	cr_assert_str_eq(config_source(c, "log.retention.bytes"), "--set");
	cr_assert_eq(config_set_arg(c, "listeners=PLAINTEXT://h:1", err, sizeof(err)), 0);
	cr_assert_eq(config_set_arg(c, "num.partitions", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "KEY=VALUE"), "%s", err);
	cr_assert_eq(config_set_arg(c, "bogus=1", err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "--set: unknown configuration key 'bogus'");
	cr_assert_eq(config_set(c, "num.partitions", NULL, NULL, err, sizeof(err)), -EINVAL);
	/* err may be NULL */
	cr_assert_eq(config_set(c, "foo", "1", NULL, NULL, 0), -ENOENT);
}

Test(config, dpdk_addresses_checked)
{
	cr_assert_eq(config_set(c, "dpdk.listen", "10.0.0.1:9093", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "dpdk.listen", "", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "dpdk.listen", "broker.local:9093", "--set", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "dpdk.listen") && strstr(err, "IPv4:port"), "%s", err);
	cr_assert_eq(config_set(c, "dpdk.listen", "10.0.0.1", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "dpdk.gateway", "10.0.0.254", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "dpdk.gateway", "10.0.0", "--set", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "dpdk.gateway") && strstr(err, "IPv4 address"), "%s", err);
	cr_assert_eq(config_set(c, "dpdk.prefix.length", "33", "--set", err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_set(c, "dpdk.mtu", "9000", "--set", err, sizeof(err)), 0);
}

Test(config, file_format)
{
	const char *p = write_file(
		"# a comment\n"
		"! another comment\n"
		"\n"
		"   num.partitions = 4   \n"
		"node.id:9\n"
		"log.dirs /var/lib/sluice\n"
		"listeners=PLAINTEXT://10.0.0.1:9093,\\\n"
		"          INTERNAL://10.0.0.1:9094\n"
		"log.cleanup.policy = compact\\\n"
		"   ,delete\n"
		"# a comment ending in a backslash does not continue \\\n"
		"message.max.bytes=2000000\r\n"
		"admin.listen=\\u0031\\u0032\\u0037.0.0.1:9645\n"
		"log.retention.bytes=-1");   /* no final newline */

	cr_assert_eq(config_load_file(c, p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(config_int(c, "num.partitions"), 4);
	cr_assert_eq(config_int(c, "node.id"), 9);
	cr_assert_str_eq(config_str(c, "log.dirs"), "/var/lib/sluice");
	cr_assert_str_eq(config_str(c, "listeners"), "PLAINTEXT://10.0.0.1:9093,INTERNAL://10.0.0.1:9094");
	cr_assert_eq(config_int(c, "log.cleanup.policy"), CONFIG_CLEANUP_COMPACT_DELETE);
	cr_assert_eq(config_int(c, "message.max.bytes"), 2000000);
	cr_assert_str_eq(config_str(c, "admin.listen"), "127.0.0.1:9645");
	char want[4300];

	snprintf(want, sizeof(want), "%s:4", p);
	cr_assert_str_eq(config_source(c, "num.partitions"), want);
	snprintf(want, sizeof(want), "%s:7", p);
	cr_assert_str_eq(config_source(c, "listeners"), want, "a continued line reports its first line");
	snprintf(want, sizeof(want), "%s:12", p);
	cr_assert_str_eq(config_source(c, "message.max.bytes"), want);
	cr_assert_str_eq(config_source(c, "socket.request.max.bytes"), "default");
	/* --set after the file overrides it */
	cr_assert_eq(config_set(c, "num.partitions", "6", "--set", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "num.partitions"), 6);
	cr_assert_str_eq(config_source(c, "num.partitions"), "--set");
}

Test(config, file_errors_name_file_and_line)
{
	char want[4300];
	const char *p = write_file("num.partitions=2\n# c\nfoo.bar=1\n");

	cr_assert_eq(config_load_file(c, p, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "%s:3: unknown configuration key 'foo.bar'", p);
	cr_assert_str_eq(err, want);

	p = write_file("\n\nlog.segment.bytes=1000\n");
	cr_assert_eq(config_load_file(c, p, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:3: invalid value '1000' for configuration key 'log.segment.bytes'", p);
	cr_assert(!strncmp(err, want, strlen(want)), "%s", err);

	p = write_file("log.dirs=/x\nlog.durability=\\\n  fast\n");
	cr_assert_eq(config_load_file(c, p, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:2:", p);
	cr_assert(!strncmp(err, want, strlen(want)) && strstr(err, "'fast'"), "%s", err);

	snprintf(want, sizeof(want), "%s/missing.properties", dir);
	cr_assert_eq(config_load_file(c, want, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "missing.properties"), "%s", err);
}

Test(config, aliases)
{
	const char *p = write_file("broker.id=5\nlog.dir=/srv/data\n");

	cr_assert_eq(config_load_file(c, p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(config_int(c, "node.id"), 5);
	cr_assert_eq(config_int(c, "broker.id"), 5);
	cr_assert_str_eq(config_str(c, "log.dirs"), "/srv/data");
	cr_assert_eq(config_set(c, "node.id", "6", NULL, err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "broker.id"), 6);
	cr_assert_eq(config_set(c, "broker.id", "x", NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "broker.id"), "the error names the key as written: %s", err);
}

Test(config, retention_units_most_precise_wins)
{
	cr_assert_eq(config_set(c, "log.retention.hours", "2", "f:1", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), 2 * 3600000);
	cr_assert_str_eq(config_source(c, "log.retention.ms"), "f:1");
	cr_assert_eq(config_set(c, "log.retention.minutes", "30", "f:2", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), 30 * 60000);
	/* hours set after minutes does not win */
	cr_assert_eq(config_set(c, "log.retention.hours", "5", "f:3", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), 30 * 60000);
	cr_assert_eq(config_set(c, "log.retention.ms", "1234", "f:4", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), 1234);
	/* nor minutes after ms */
	cr_assert_eq(config_set(c, "log.retention.minutes", "1", "f:5", err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), 1234);
	cr_assert_str_eq(config_source(c, "log.retention.ms"), "f:4");
}

Test(config, retention_forever)
{
	struct config *d;

	cr_assert_eq(config_set(c, "log.retention.hours", "-1", NULL, err, sizeof(err)), 0);
	cr_assert_eq(config_int(c, "log.retention.ms"), -1);
	cr_assert_eq(config_set(c, "log.retention.ms", "-2", NULL, err, sizeof(err)), -EINVAL);
	cr_assert_eq(config_create(&d), 0);
	cr_assert_eq(config_set(d, "log.retention.hours", "2147483647", NULL, err, sizeof(err)), 0);
	cr_assert_eq(config_int(d, "log.retention.ms"), 2147483647ll * 3600000);
	config_destroy(d);
}

Test(config, topic_config_validation)
{
	static const char *ok[][2] = {
		{ "cleanup.policy", "compact" }, { "cleanup.policy", "delete,compact" },
		{ "retention.ms", "-1" }, { "retention.ms", "86400000" }, { "retention.bytes", "1048576" },
		{ "segment.bytes", "16384" }, { "max.message.bytes", "100" },
		{ "message.timestamp.type", "LogAppendTime" }, { "delete.retention.ms", "0" },
		{ "min.insync.replicas", "2" }, { "index.interval.bytes", "1024" }, { "durability", "sync" },
	};
	static const char *bad[][2] = {
		{ "cleanup.policy", "forever" }, { "retention.ms", "-5" }, { "segment.bytes", "1" },
		{ "max.message.bytes", "big" }, { "message.timestamp.type", "Now" },
		{ "min.insync.replicas", "0" }, { "durability", "fsync" },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_assert_eq(topic_config_validate(ok[i][0], ok[i][1], err, sizeof(err)), 0,
			     "%s=%s: %s", ok[i][0], ok[i][1], err);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(topic_config_validate(bad[i][0], bad[i][1], err, sizeof(err)), -EINVAL,
			     "%s=%s", bad[i][0], bad[i][1]);
		cr_assert(strstr(err, bad[i][0]) && strstr(err, bad[i][1]), "%s", err);
	}
	cr_assert_eq(topic_config_validate("log.retention.ms", "1", err, sizeof(err)), -ENOENT,
		     "broker-level names are not topic keys");
	cr_assert_eq(topic_config_validate("foo", "1", err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "foo"));

	int n = 0;

	while (topic_config_key_at(n))
		n++;
	cr_assert_eq(n, 12);
	cr_assert_str_eq(topic_config_broker_key("max.message.bytes"), "message.max.bytes");
	cr_assert_str_eq(topic_config_broker_key("durability"), "log.durability");
}

Test(config, topic_config_defaults_follow_broker)
{
	cr_assert_str_eq(topic_config_default(c, "retention.ms"), "604800000");
	cr_assert_eq(config_set(c, "log.retention.hours", "1", NULL, err, sizeof(err)), 0);
	cr_assert_str_eq(topic_config_default(c, "retention.ms"), "3600000");
	cr_assert_str_eq(topic_config_default(c, "cleanup.policy"), "delete");
	cr_assert_str_eq(topic_config_default(c, "durability"), "write");
	cr_assert_str_eq(topic_config_default(c, "max.message.bytes"), "1048588");
	cr_assert_null(topic_config_default(c, "nope"));
}

Test(config, topic_config_to_plog_mapping)
{
	struct plog_config pc;

	cr_assert_eq(topic_config_to_plog(c, NULL, NULL, 0, &pc), 0);
	cr_assert_eq(pc.segment_bytes, 1073741824);
	cr_assert_eq(pc.index_interval, 4096);
	cr_assert_eq(pc.max_batch, 1048588);
	cr_assert_eq(pc.retention_ms, 604800000);
	cr_assert_eq(pc.retention_bytes, -1);
	cr_assert_eq(pc.compact, 0);
	cr_assert_eq(pc.delete_retention_ms, 86400000);
	cr_assert_eq(pc.durability, PLOG_DUR_WRITE);
	cr_assert_eq(pc.initial_extent, 64 * 1024, "plog's own defaults are kept");

	/* broker defaults flow through */
	cr_assert_eq(config_set(c, "log.durability", "sync", NULL, err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "log.segment.bytes", "1048576", NULL, err, sizeof(err)), 0);
	cr_assert_eq(topic_config_to_plog(c, NULL, NULL, 0, &pc), 0);
	cr_assert_eq(pc.durability, PLOG_DUR_SYNC);
	cr_assert_eq(pc.segment_bytes, 1048576);

	/* overrides win */
	const char *k1[] = { "durability", "retention.ms", "retention.bytes", "max.message.bytes",
			     "cleanup.policy", "delete.retention.ms", "index.interval.bytes" };
	const char *v1[] = { "memory", "60000", "5000000", "2000", "compact,delete", "10", "512" };

	cr_assert_eq(topic_config_to_plog(c, k1, v1, 7, &pc), 0);
	cr_assert_eq(pc.durability, PLOG_DUR_MEMORY);
	cr_assert_eq(pc.retention_ms, 60000);
	cr_assert_eq(pc.retention_bytes, 5000000);
	cr_assert_eq(pc.max_batch, 2000);
	cr_assert_eq(pc.compact, 1);
	cr_assert_eq(pc.delete_retention_ms, 10);
	cr_assert_eq(pc.index_interval, 512);

	/* compact alone: no time or size retention */
	const char *k2[] = { "retention.ms", "cleanup.policy" };
	const char *v2[] = { "1000", "compact" };

	cr_assert_eq(topic_config_to_plog(c, k2, v2, 2, &pc), 0);
	cr_assert_eq(pc.compact, 1);
	cr_assert_eq(pc.retention_ms, -1);
	cr_assert_eq(pc.retention_bytes, -1);

	/* errors */
	const char *k3[] = { "retention.ms" }, *v3[] = { "soon" }, *k4[] = { "nope" };

	cr_assert_eq(topic_config_to_plog(c, k3, v3, 1, &pc), -EINVAL);
	cr_assert_eq(topic_config_to_plog(c, k4, v3, 1, &pc), -ENOENT);
}

/* Kafka's other topic keys: accepted and ignored (with a reason for the
 * broker's warning), or refused with "Sluice does not support KEY yet"
 * unless the value changes nothing. */
Test(config, kafka_topic_keys_ignored_or_refused)
{
	static const char *ignored[][2] = {
		{ "message.format.version", "2.8" }, { "preallocate", "true" }, { "segment.index.bytes", "10485760" },
		{ "min.cleanable.dirty.ratio", "0.5" },
		{ "local.retention.ms", "-2" }, { "message.downconversion.enable", "true" },
		{ "file.delete.delay.ms", "60000" },
	};
	static const char *refused[][2] = {
		{ "flush.ms", "1000" }, { "flush.messages", "1" }, { "segment.ms", "60000" },
		{ "remote.storage.enable", "true" }, { "min.compaction.lag.ms", "5" },
		{ "message.timestamp.after.max.ms", "3600000" }, { "compression.zstd.level", "9" },
	};

	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
		cr_assert_eq(topic_config_validate(ignored[i][0], ignored[i][1], err, sizeof(err)), 0, "%s: %s",
			     ignored[i][0], err);
		cr_assert_not_null(topic_config_ignored(ignored[i][0]));
		cr_assert(topic_config_known(ignored[i][0]));
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char want[128];

		cr_assert_eq(topic_config_validate(refused[i][0], refused[i][1], err, sizeof(err)), -EINVAL, "%s",
			     refused[i][0]);
		snprintf(want, sizeof(want), "Sluice does not support %s yet", refused[i][0]);
		cr_assert(strstr(err, want), "%s", err);
	}
	/* the value that changes nothing is taken */
	cr_assert_eq(topic_config_validate("flush.ms", "9223372036854775807", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(topic_config_validate("remote.storage.enable", "false", err, sizeof(err)), 0, "%s", err);
	/* values are still checked */
	cr_assert_eq(topic_config_validate("preallocate", "maybe", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "preallocate") && strstr(err, "maybe"), "%s", err);
	cr_assert_eq(topic_config_validate("min.cleanable.dirty.ratio", "2", err, sizeof(err)), -EINVAL);
	cr_assert_null(topic_config_ignored("retention.ms"), "honoured keys are not ignored");
	/* the throttled-replica lists: honoured (the roles), checked as
	 * Kafka's ThrottledReplicaListValidator */
	{
		static const char *good[] = { "*", "", "0:1", "0:1,1:2", " 0 : 1 , 2:3 ", " * " };
		static const char *bad[] = { "x", "0", "0:", ":1", "0:1,", "*,0:1", "0:1:2", "-1:2", "0;1" };

		for (int side = 0; side < 2; side++) {
			const char *key = side ? "leader.replication.throttled.replicas"
					       : "follower.replication.throttled.replicas";

			cr_assert(topic_config_known(key));
			cr_assert_null(topic_config_ignored(key), "%s is honoured", key);
			for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
				cr_assert_eq(topic_config_validate(key, good[i], err, sizeof(err)), 0, "'%s': %s", good[i],
					     err);
			for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
				cr_assert_eq(topic_config_validate(key, bad[i], err, sizeof(err)), -EINVAL, "'%s'", bad[i]);
				cr_assert(strstr(err, "must be the literal '*' or a list of replicas"), "%s", err);
			}
		}
	}
	cr_assert(!topic_config_known("retention.msec"));

	/* ignored keys change nothing in storage */
	struct plog_config a, b;
	const char *k[] = { "message.format.version", "preallocate" }, *v[] = { "2.8", "false" };

	cr_assert_eq(topic_config_to_plog(c, NULL, NULL, 0, &a), 0);
	cr_assert_eq(topic_config_to_plog(c, k, v, 2, &b), 0);
	cr_assert(!memcmp(&a, &b, sizeof(a)));
}

Test(config, compression_type)
{
	struct plog_config pc;
	const char *k[] = { "compression.type" };
	static const char *const vals[] = { "uncompressed", "gzip", "snappy", "lz4", "zstd" };

	cr_assert_eq(topic_config_to_plog(c, NULL, NULL, 0, &pc), 0);
	cr_assert_eq(pc.compression, -1, "producer: as sent");
	for (int i = 0; i < 5; i++) {
		const char *v[] = { vals[i] };

		cr_assert_eq(topic_config_to_plog(c, k, v, 1, &pc), 0);
		cr_assert_eq(pc.compression, i, "%s", vals[i]);
	}
	cr_assert_eq(topic_config_validate("compression.type", "brotli", err, sizeof(err)), -EINVAL);
	cr_assert_eq(topic_config_validate("compression.type", "none", err, sizeof(err)), -EINVAL,
		     "Kafka spells it uncompressed");
	cr_assert_eq(config_set(c, "compression.type", "zstd", NULL, err, sizeof(err)), 0);
	cr_assert_eq(topic_config_to_plog(c, NULL, NULL, 0, &pc), 0);
	cr_assert_eq(pc.compression, 4, "the broker default flows through");
}

struct lkey_seen {
	int n;
	const char *value, *source;
	int password_shown, jaas_shown;
};

static void lkey_cb(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	struct lkey_seen *s = arg;

	(void)is_default;
	if (strncmp(key, "listener.name.", 14))
		return;
	s->n++;
	if (!strcmp(key, "listener.name.ssl.ssl.keystore.location")) {
		s->value = value;
		s->source = source;
	}
	s->password_shown |= strstr(key, "ssl.key.password") && value;
	s->jaas_shown |= strstr(key, "sasl.jaas.config") && value;
}

/* A listener's keystore and truststore (Kafka's per-broker dynamic
 * listener configs): dynamic, on a node's resource only; the broker-wide
 * keys and a listener's other keys are not; passwords never shown. */
Test(config, dynamic_listener_store_keys)
{
	struct config *d;
	struct lkey_seen s = { 0 };

	cr_assert_eq(config_dynamic_validate("listener.name.ssl.ssl.keystore.location", "/x.pem", err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(config_dynamic_validate("listener.name.EXTERNAL.ssl.key.password", NULL, err, sizeof(err)), 0);
	cr_assert(config_dynamic("listener.name.ssl.ssl.truststore.certificates"));
	cr_assert(config_dynamic_per_broker("listener.name.ssl.ssl.keystore.key"));
	cr_assert(!config_dynamic_per_broker("log.retention.ms") && !config_dynamic_per_broker("ssl.keystore.location"));
	cr_assert_eq(config_dynamic_validate("ssl.keystore.location", "/x.pem", err, sizeof(err)), -EPERM);
	cr_assert(strstr(err, "only per-listener using the listener prefix"), "%s", err);
	cr_assert_eq(config_dynamic_validate("listener.name.ssl.ssl.client.auth", "required", err, sizeof(err)), -EPERM);
	cr_assert(strstr(err, "Cannot update these configs dynamically"), "%s", err);
	cr_assert_eq(config_dynamic_validate("listener.name.ssl.ssl.nope", "1", err, sizeof(err)), -ENOENT);
	cr_assert(config_sensitive("listener.name.ssl.ssl.key.password") && config_sensitive("ssl.keystore.key") &&
		  config_sensitive("listener.name.x.plain.sasl.jaas.config"));
	cr_assert(!config_sensitive("listener.name.ssl.ssl.keystore.location") && !config_sensitive("listeners"));

	/* the file's value, then a dynamic one over it (in a copy): listed with
	 * its source; a password listed without its value */
	cr_assert_eq(config_set(c, "listener.name.SSL.ssl.keystore.location", "/file.pem", "f:1", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "listener.name.ssl.ssl.key.password", "pw", "f:2", err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "listener.name.x.plain.sasl.jaas.config", "a b=\"c\";", "f:3", err, sizeof(err)), 0);
	cr_assert_eq(config_dup(c, &d), 0);
	cr_assert_eq(config_set(d, "listener.name.ssl.ssl.keystore.location", "/new.pem", "dynamic-broker", err,
				sizeof(err)), 0);
	config_foreach(d, lkey_cb, &s);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.value, "/new.pem");
	cr_assert_str_eq(s.source, "dynamic-broker");
	cr_assert(!s.password_shown && !s.jaas_shown);
	cr_assert_str_eq(config_listener_str(d, "SSL", "ssl.keystore.location"), "/new.pem");
	cr_assert_str_eq(config_listener_str(c, "SSL", "ssl.keystore.location"), "/file.pem");
	cr_assert_str_eq(config_source(c, "listener.name.ssl.ssl.keystore.location"), "f:1");
	config_destroy(d);
}

/* AlterConfigs on the broker resource: the topic defaults only. */
Test(config, dynamic_broker_keys)
{
	struct config *d;

	cr_assert_eq(config_dynamic_validate("log.retention.ms", "1000", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(config_dynamic_validate("compression.type", "gzip", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(config_dynamic_validate("log.retention.ms", NULL, err, sizeof(err)), 0, "delete");
	cr_assert_eq(config_dynamic_validate("num.partitions", "3", err, sizeof(err)), -EPERM);
	cr_assert(strstr(err, "Cannot update these configs dynamically") && strstr(err, "num.partitions"), "%s", err);
	cr_assert_eq(config_dynamic_validate("log.retention.hours", "1", err, sizeof(err)), -EPERM);
	cr_assert_eq(config_dynamic_validate("nope", "1", err, sizeof(err)), -ENOENT);
	cr_assert_eq(config_dynamic_validate("log.retention.ms", "soon", err, sizeof(err)), -EINVAL);
	cr_assert(config_dynamic("message.max.bytes") && !config_dynamic("listeners"));

	/* a copy: same values and sources, changes stay in the copy */
	cr_assert_eq(config_set(c, "log.retention.bytes", "5000", "f.properties:3", err, sizeof(err)), 0);
	cr_assert_eq(config_dup(c, &d), 0);
	cr_assert_str_eq(config_str(d, "log.retention.bytes"), "5000");
	cr_assert_str_eq(config_source(d, "log.retention.bytes"), "f.properties:3");
	cr_assert_str_eq(config_source(d, "log.retention.ms"), "default");
	cr_assert_eq(config_set(d, "log.retention.ms", "1000", "dynamic-default", err, sizeof(err)), 0);
	cr_assert_eq(config_int(d, "log.retention.ms"), 1000);
	cr_assert_eq(config_int(c, "log.retention.ms"), 604800000);
	config_destroy(d);
}

Test(config, listener_parsing)
{
	char host[64];
	int port;

	cr_assert_eq(config_listener("PLAINTEXT://127.0.0.1:9092", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "127.0.0.1");
	cr_assert_eq(port, 9092);
	cr_assert_eq(config_listener("PLAINTEXT://broker-1.example.com:19092,SSL://x:1", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "broker-1.example.com");
	cr_assert_eq(port, 19092);
	cr_assert_eq(config_listener("INTERNAL://[::1]:9093", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(port, 9093);
	cr_assert_eq(config_listener("PLAINTEXT://:9092", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "0.0.0.0");
	cr_assert_eq(config_listener("PLAINTEXT://h:0", host, sizeof(host), &port), 0);
	cr_assert_eq(port, 0);
	cr_assert_eq(config_listener(config_str(c, "listeners"), host, sizeof(host), &port), 0);
	cr_assert_eq(port, 9092);

	static const char *bad[] = {
		"", "127.0.0.1:9092", "PLAINTEXT://127.0.0.1", "PLAINTEXT://127.0.0.1:", "PLAINTEXT://h:65536",
		"PLAINTEXT://h:-1", "PLAINTEXT://h:+1", "PLAINTEXT://h:90a", "://h:1", "PLAIN TEXT://h:1",
		"PLAINTEXT://[::1:9092", "PLAINTEXT://::1:9092", "PLAINTEXT://h/x:1", "PLAINTEXT//h:1",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(config_listener(bad[i], host, sizeof(host), &port), -EINVAL, "'%s'", bad[i]);
	cr_assert_eq(config_listener(NULL, host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(config_listener("PLAINTEXT://a-long-host-name:1", host, 4, &port), -ENAMETOOLONG);
	/* listeners values are validated with the same parser */
	cr_assert_eq(config_set(c, "listeners", "PLAINTEXT://h:99999", NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "listeners") && strstr(err, "99999"), "%s", err);
	cr_assert_eq(config_hostport("localhost:9644", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "localhost");
	cr_assert_eq(port, 9644);
}

Test(config, doc_markdown_has_every_key)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct seen s = { 0 };

	config_doc_markdown(f);
	fclose(f);
	cr_assert(strstr(buf, "| Key | Type | Default | Description |"));
	cr_assert(strstr(buf, "| `log.segment.bytes` | int | `1073741824` |"), "%s", buf);
	cr_assert(strstr(buf, "Topic-level: `segment.bytes`"));
	cr_assert(strstr(buf, "Alias: `broker.id`"));
	cr_assert(strstr(buf, "'compact,delete'"));
	int rows = 0;

	for (char *p = buf; (p = strstr(p, "\n| `")); p++)
		rows++;
	cr_assert_eq(config_set(c, "node.id", "7", NULL, err, sizeof(err)), 0);
	config_foreach(c, count_cb, &s);
	cr_assert_eq(rows, s.n, "one row per key");
	free(buf);
}

/* docs/configuration.md's table is the generated one (run from the
 * repository root, as make test does; `make docs` rewrites it). */
Test(config, docs_table_is_generated)
{
	char *gen = NULL, *page = NULL;
	size_t glen = 0, plen = 0;
	FILE *f = open_memstream(&gen, &glen), *r = fopen("docs/configuration.md", "r");

	if (!r) {
		fclose(f);
		free(gen);
		cr_skip_test("docs/configuration.md not found (not run from the repository root)");
	}
	config_doc_markdown(f);
	fclose(f);
	page = malloc(1 << 20);
	plen = fread(page, 1, (1 << 20) - 1, r);
	page[plen] = 0;
	fclose(r);
	const char *b = strstr(page, "<!-- config-table:begin -->\n");
	const char *e = strstr(page, "<!-- config-table:end -->");

	cr_assert(b && e, "docs/configuration.md has no config-table markers");
	b += strlen("<!-- config-table:begin -->\n");
	cr_assert(e - b == (ptrdiff_t)glen && !memcmp(b, gen, glen),
		  "docs/configuration.md's table differs from config_doc_markdown(); run make docs");
	free(gen);
	free(page);
}

/* config_doc_properties: the packaged /etc/sluice/sluiced.properties
 * (config-doc --properties) loads, sets only the keys given (every other
 * key keeps its default), and names every key. */
static void nondefault_cb(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	int *n = arg;

	(void)value;
	(void)source;
	if (!is_default)
		cr_assert_str_eq(key, "log.dirs", "%s is set by the commented file", key);
	(*n)++;
}

Test(config, doc_properties_loads_with_only_the_keys_given)
{
	char path[512], *buf = NULL;
	size_t len = 0;
	const char *set[] = { "log.dirs=/var/lib/sluice" };
	FILE *f = open_memstream(&buf, &len), *o;
	int keys = 0, lines = 0;

	config_doc_properties(f, set, 1);
	fclose(f);
	snprintf(path, sizeof(path), "%s/sluiced.properties", dir);
	cr_assert((o = fopen(path, "w")) && fwrite(buf, 1, len, o) == len && fclose(o) == 0);
	cr_assert_eq(config_load_file(c, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(config_str(c, "log.dirs"), "/var/lib/sluice");
	cr_assert(strstr(buf, "\nlog.dirs=/var/lib/sluice\n") && strstr(buf, "# (default: ./data)\n"), "%s", buf);
	cr_assert(strstr(buf, "\n#log.segment.bytes=1073741824\n"), "%s", buf);
	cr_assert(strstr(buf, "\n# node.id (int; alias broker.id)\n"), "%s", buf);
	config_foreach(c, nondefault_cb, &keys);
	for (char *p = buf; (p = strstr(p, "\n#")); p++)
		if (p[2] != ' ' && p[2] != '\n')
			lines++;   /* "#key=default" */
	cr_assert_eq(lines + 1, keys, "one key line per key (%d commented, %d keys)", lines, keys);
	free(buf);
}
