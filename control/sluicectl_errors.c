/* control/sluicectl_errors.c — Kafka error codes by name, each with what an
 * operator can do about it (one table, STYLE 22); see sluicectl.h. */
#include <stddef.h>

#include "control/sluicectl.h"

static const struct {
	int16_t code;
	const char *name;
	const char *advice;
} kerrs[] = {
	{ -1, "UNKNOWN_SERVER_ERROR", "the broker failed unexpectedly; its stderr log says why" },
	{ 1, "OFFSET_OUT_OF_RANGE", "the offset is outside [log start, high watermark]; see `sluicectl topic describe`" },
	{ 2, "CORRUPT_MESSAGE", "a batch failed its CRC or framing; retry, and report it if it persists" },
	{ 3, "UNKNOWN_TOPIC_OR_PARTITION", "check the name with `sluicectl topic list`, or create it with `sluicectl topic create`" },
	{ 5, "LEADER_NOT_AVAILABLE", "the partition is being opened or moved; retry in a moment" },
	{ 6, "NOT_LEADER_OR_FOLLOWER", "the leader moved; retry (sluicectl refreshes metadata on each run)" },
	{ 7, "REQUEST_TIMED_OUT", "the broker did not finish in time; check its load and disk, or raise --timeout" },
	{ 10, "MESSAGE_TOO_LARGE", "the batch is above max.message.bytes; raise it on the topic (`topic alter-config --set max.message.bytes=N`) or send smaller records" },
	{ 12, "OFFSET_METADATA_TOO_LARGE", "the commit metadata is above offset.metadata.max.bytes" },
	{ 14, "COORDINATOR_LOAD_IN_PROGRESS", "the group coordinator is still loading offsets; retry in a moment" },
	{ 15, "COORDINATOR_NOT_AVAILABLE", "the group coordinator is not ready; retry in a moment" },
	{ 16, "NOT_COORDINATOR", "the coordinator moved; retry" },
	{ 17, "INVALID_TOPIC_EXCEPTION", "topic names are 1-249 characters of [a-zA-Z0-9._-]; internal topics cannot be written" },
	{ 18, "RECORD_LIST_TOO_LARGE", "send fewer records per request" },
	{ 19, "NOT_ENOUGH_REPLICAS", "fewer replicas are in sync (ISR) than min.insync.replicas: bring replicas back, or lower min.insync.replicas on the topic, or produce with --acks 1" },
	{ 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "written on the leader, but the ISR shrank below min.insync.replicas; check the replicas" },
	{ 21, "INVALID_REQUIRED_ACKS", "acks must be -1 (all), 0 or 1" },
	{ 22, "ILLEGAL_GENERATION", "the group rebalanced; the consumer must rejoin" },
	{ 24, "INVALID_GROUP_ID", "the group id must not be empty" },
	{ 25, "UNKNOWN_MEMBER_ID", "the member left or timed out; it must rejoin" },
	{ 26, "INVALID_SESSION_TIMEOUT", "the session timeout is outside group.min.session.timeout.ms..group.max.session.timeout.ms" },
	{ 27, "REBALANCE_IN_PROGRESS", "the group is rebalancing; retry when it is Stable or Empty" },
	{ 29, "TOPIC_AUTHORIZATION_FAILED", "this client may not use the topic" },
	{ 30, "GROUP_AUTHORIZATION_FAILED", "this client may not use the group" },
	{ 32, "INVALID_TIMESTAMP", "the record timestamp is out of the allowed range" },
	{ 35, "UNSUPPORTED_VERSION", "the broker does not serve this request version; upgrade the broker or sluicectl" },
	{ 36, "TOPIC_ALREADY_EXISTS", "the topic exists; see `sluicectl topic describe NAME`" },
	{ 37, "INVALID_PARTITIONS", "the partition count must be at least 1 (and, to add partitions, above the current count)" },
	{ 38, "INVALID_REPLICATION_FACTOR", "the replication factor must be between 1 and the number of brokers (see `sluicectl cluster info`)" },
	{ 39, "INVALID_REPLICA_ASSIGNMENT", "the replica assignment names unknown brokers or repeats one" },
	{ 40, "INVALID_CONFIG", "check the key and value against the configuration table (docs/configuration.md, `sluicectl topic describe-config NAME --all`)" },
	{ 41, "NOT_CONTROLLER", "the controller moved; retry" },
	{ 42, "INVALID_REQUEST", "the broker refused the request as malformed or not allowed (internal topics cannot be changed)" },
	{ 44, "POLICY_VIOLATION", "a broker policy refused the change" },
	{ 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "an idempotent producer lost a batch; restart the producer" },
	{ 47, "INVALID_PRODUCER_EPOCH", "a newer producer with the same id fenced this one" },
	{ 48, "INVALID_TXN_STATE", "the transaction is not in a state that allows this" },
	{ 51, "CONCURRENT_TRANSACTIONS", "a transaction is being completed; retry" },
	{ 56, "KAFKA_STORAGE_ERROR", "the partition's disk failed or is full: the partition is read-only; free space or fix the disk, then restart the broker" },
	{ 58, "SASL_AUTHENTICATION_FAILED", "check the credentials" },
	{ 68, "NON_EMPTY_GROUP", "the group has active members; stop its consumers first (`sluicectl group describe NAME` lists them)" },
	{ 69, "GROUP_ID_NOT_FOUND", "no such group; see `sluicectl group list`" },
	{ 76, "UNSUPPORTED_COMPRESSION_TYPE", "use none, gzip, snappy, lz4 or zstd" },
	{ 86, "GROUP_SUBSCRIBED_TO_TOPIC", "a member of the group still subscribes to the topic; stop it or change its subscription first" },
	{ 87, "INVALID_RECORD", "the broker refused the record batch (bad framing or a control batch)" },
	{ 90, "PRODUCER_FENCED", "a newer producer with the same transactional id fenced this one" },
};

static int kerr_find(int16_t code)
{
	for (size_t i = 0; i < sizeof kerrs / sizeof kerrs[0]; i++)
		if (kerrs[i].code == code)
			return (int)i;
	return -1;
}

const char *kerr_name(int16_t code)
{
	int i = kerr_find(code);

	return i >= 0 ? kerrs[i].name : "KAFKA_ERROR";
}

const char *kerr_advice(int16_t code)
{
	int i = kerr_find(code);

	return i >= 0 ? kerrs[i].advice : "see the Kafka protocol's error table for this code";
}
