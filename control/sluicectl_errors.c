/* control/sluicectl_errors.c — what an operator can do about each Kafka
 * error code; the codes and their names are dataplane/kafka_errors.h's one
 * table (KAFKA_ERRORS). See sluicectl.h. */
#include <stddef.h>

#include "control/sluicectl.h"
#include "dataplane/kafka_errors.h"

static const struct {
	int16_t code;
	const char *advice;
} kerrs[] = {
	{ KERR_UNKNOWN_SERVER_ERROR, "the broker failed unexpectedly; its stderr log says why" },
	{ KERR_OFFSET_OUT_OF_RANGE, "the offset is outside [log start, high watermark]; see `sluicectl topic describe`" },
	{ KERR_CORRUPT_MESSAGE, "a batch failed its CRC or framing; retry, and report it if it persists" },
	{ KERR_UNKNOWN_TOPIC_OR_PARTITION, "check the name with `sluicectl topic list`, or create it with `sluicectl topic create`" },
	{ KERR_LEADER_NOT_AVAILABLE, "the partition is being opened or moved; retry in a moment" },
	{ KERR_NOT_LEADER_OR_FOLLOWER, "the leader moved; retry (sluicectl refreshes metadata on each run)" },
	{ KERR_REQUEST_TIMED_OUT, "the broker did not finish in time; check its load and disk, or raise --timeout" },
	{ KERR_MESSAGE_TOO_LARGE, "the batch is above max.message.bytes; raise it on the topic (`topic alter-config --set max.message.bytes=N`) or send smaller records" },
	{ KERR_OFFSET_METADATA_TOO_LARGE, "the commit metadata is above offset.metadata.max.bytes" },
	{ KERR_COORDINATOR_LOAD_IN_PROGRESS, "the group coordinator is still loading offsets; retry in a moment" },
	{ KERR_COORDINATOR_NOT_AVAILABLE, "the group coordinator is not ready; retry in a moment" },
	{ KERR_NOT_COORDINATOR, "the coordinator moved; retry" },
	{ KERR_INVALID_TOPIC_EXCEPTION, "topic names are 1-249 characters of [a-zA-Z0-9._-]; internal topics cannot be written" },
	{ KERR_RECORD_LIST_TOO_LARGE, "send fewer records per request" },
	{ KERR_NOT_ENOUGH_REPLICAS, "fewer replicas are in sync (ISR) than min.insync.replicas: bring replicas back, or lower min.insync.replicas on the topic, or produce with --acks 1" },
	{ KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, "written on the leader, but the ISR shrank below min.insync.replicas; check the replicas" },
	{ KERR_INVALID_REQUIRED_ACKS, "acks must be -1 (all), 0 or 1" },
	{ KERR_ILLEGAL_GENERATION, "the group rebalanced; the consumer must rejoin" },
	{ KERR_INVALID_GROUP_ID, "the group id must not be empty" },
	{ KERR_UNKNOWN_MEMBER_ID, "the member left or timed out; it must rejoin" },
	{ KERR_INVALID_SESSION_TIMEOUT, "the session timeout is outside group.min.session.timeout.ms..group.max.session.timeout.ms" },
	{ KERR_REBALANCE_IN_PROGRESS, "the group is rebalancing; retry when it is Stable or Empty" },
	{ KERR_TOPIC_AUTHORIZATION_FAILED, "this client may not use the topic" },
	{ KERR_GROUP_AUTHORIZATION_FAILED, "this client may not use the group" },
	{ KERR_SECURITY_DISABLED, "the broker enforces no ACLs: set authorizer.class.name="
				  "org.apache.kafka.metadata.authorizer.StandardAuthorizer on it (docs/security.md)" },
	{ KERR_INVALID_TIMESTAMP, "the record timestamp is out of the allowed range" },
	{ KERR_UNSUPPORTED_VERSION, "the broker does not serve this request version; upgrade the broker or sluicectl" },
	{ KERR_TOPIC_ALREADY_EXISTS, "the topic exists; see `sluicectl topic describe NAME`" },
	{ KERR_INVALID_PARTITIONS, "the partition count must be at least 1 (and, to add partitions, above the current count)" },
	{ KERR_INVALID_REPLICATION_FACTOR, "the replication factor must be between 1 and the number of brokers (see `sluicectl cluster info`)" },
	{ KERR_INVALID_REPLICA_ASSIGNMENT, "the replica assignment names unknown brokers or repeats one" },
	{ KERR_INVALID_CONFIG, "check the key and value against the configuration table (docs/configuration.md, `sluicectl topic describe-config NAME --all`)" },
	{ KERR_NOT_CONTROLLER, "the controller moved; retry" },
	{ KERR_PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not live or not in sync; bring it back "
	  "(sluicectl topic describe shows the ISR) and retry" },
	{ KERR_NO_REASSIGNMENT_IN_PROGRESS, "the partition is not being reassigned: nothing to cancel" },
	{ KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica of the partition is live; start one of its brokers" },
	{ KERR_INVALID_REQUEST, "the broker refused the request as malformed or not allowed (internal topics cannot be changed)" },
	{ KERR_POLICY_VIOLATION, "a broker policy refused the change" },
	{ KERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "an idempotent producer lost a batch; restart the producer" },
	{ KERR_INVALID_PRODUCER_EPOCH, "a newer producer with the same id fenced this one" },
	{ KERR_INVALID_TXN_STATE, "the transaction is not in a state that allows this" },
	{ KERR_CONCURRENT_TRANSACTIONS, "a transaction is being completed; retry" },
	{ KERR_KAFKA_STORAGE_ERROR, "the partition's disk failed or is full: the partition is read-only; free space or fix the disk, then restart the broker" },
	{ KERR_SASL_AUTHENTICATION_FAILED, "check the credentials" },
	{ KERR_UNACCEPTABLE_CREDENTIAL, "a SCRAM user needs a name and 4096 to 16384 iterations" },
	{ KERR_RESOURCE_NOT_FOUND, "sluicectl user list shows the users there are" },
	{ KERR_NON_EMPTY_GROUP, "the group has active members; stop its consumers first (`sluicectl group describe NAME` lists them)" },
	{ KERR_GROUP_ID_NOT_FOUND, "no such group; see `sluicectl group list`" },
	{ KERR_UNSUPPORTED_COMPRESSION_TYPE, "use none, gzip, snappy, lz4 or zstd" },
	{ KERR_GROUP_SUBSCRIBED_TO_TOPIC, "a member of the group still subscribes to the topic; stop it or change its subscription first" },
	{ KERR_INVALID_RECORD, "the broker refused the record batch (bad framing or a control batch)" },
	{ KERR_PRODUCER_FENCED, "a newer producer with the same transactional id fenced this one" },
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
	const char *name = kafka_error_name(code);

	return name ? name : "KAFKA_ERROR";
}

const char *kerr_advice(int16_t code)
{
	int i = kerr_find(code);

	return i >= 0 ? kerrs[i].advice : "see the Kafka protocol's error table for this code";
}
