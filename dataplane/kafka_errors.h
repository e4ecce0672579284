/* dataplane/kafka_errors.h — Kafka's error codes (int16 on the wire), kept
 * apart from errno values and mapped only at the handler edge (STYLE 6).
 *
 * Thread: any (constants and pure functions); owns nothing.
 * Errors: kafka_error_name returns NULL for a code not in the table.
 *
 * One table (STYLE 22): KAFKA_ERRORS lists every code Sluice sends or
 * names, as X(NAME, code, retriable), where NAME is Kafka's own spelling
 * (org.apache.kafka.common.protocol.Errors) and retriable says whether
 * Kafka's exception for it is a RetriableException. The enum, the names
 * (sluicectl, the native client library, the coordinators' logs) and the
 * retriable flag all come from it. Kept by hand: the protocol's JSON
 * message definitions that scripts/kafka-codegen reads carry no error
 * table. Add a row here, never a local #define or a second table.
 */
#ifndef SLUICE_KAFKA_ERRORS_H
#define SLUICE_KAFKA_ERRORS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KAFKA_ERRORS(X) \
	X(UNKNOWN_SERVER_ERROR, -1, 0) \
	X(NONE, 0, 0) \
	X(OFFSET_OUT_OF_RANGE, 1, 0) \
	X(CORRUPT_MESSAGE, 2, 1) \
	X(UNKNOWN_TOPIC_OR_PARTITION, 3, 1) \
	X(LEADER_NOT_AVAILABLE, 5, 1) \
	X(NOT_LEADER_OR_FOLLOWER, 6, 1) \
	X(REQUEST_TIMED_OUT, 7, 1) \
	X(MESSAGE_TOO_LARGE, 10, 0) \
	X(OFFSET_METADATA_TOO_LARGE, 12, 0) \
	X(COORDINATOR_LOAD_IN_PROGRESS, 14, 1) \
	X(COORDINATOR_NOT_AVAILABLE, 15, 1) \
	X(NOT_COORDINATOR, 16, 1) \
	X(INVALID_TOPIC_EXCEPTION, 17, 0) \
	X(RECORD_LIST_TOO_LARGE, 18, 0) \
	X(NOT_ENOUGH_REPLICAS, 19, 1) \
	X(NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, 1) \
	X(INVALID_REQUIRED_ACKS, 21, 0) \
	X(ILLEGAL_GENERATION, 22, 0) \
	X(INCONSISTENT_GROUP_PROTOCOL, 23, 0) \
	X(INVALID_GROUP_ID, 24, 0) \
	X(UNKNOWN_MEMBER_ID, 25, 0) \
	X(INVALID_SESSION_TIMEOUT, 26, 0) \
	X(REBALANCE_IN_PROGRESS, 27, 0) \
	X(INVALID_COMMIT_OFFSET_SIZE, 28, 0) \
	X(TOPIC_AUTHORIZATION_FAILED, 29, 0) \
	X(GROUP_AUTHORIZATION_FAILED, 30, 0) \
	X(CLUSTER_AUTHORIZATION_FAILED, 31, 0) \
	X(INVALID_TIMESTAMP, 32, 0) \
	X(UNSUPPORTED_SASL_MECHANISM, 33, 0) \
	X(ILLEGAL_SASL_STATE, 34, 0) \
	X(UNSUPPORTED_VERSION, 35, 0) \
	X(TOPIC_ALREADY_EXISTS, 36, 0) \
	X(INVALID_PARTITIONS, 37, 0) \
	X(INVALID_REPLICATION_FACTOR, 38, 0) \
	X(INVALID_REPLICA_ASSIGNMENT, 39, 0) \
	X(INVALID_CONFIG, 40, 0) \
	X(NOT_CONTROLLER, 41, 1) \
	X(INVALID_REQUEST, 42, 0) \
	X(UNSUPPORTED_FOR_MESSAGE_FORMAT, 43, 0) \
	X(POLICY_VIOLATION, 44, 0) \
	X(OUT_OF_ORDER_SEQUENCE_NUMBER, 45, 0) \
	X(INVALID_PRODUCER_EPOCH, 47, 0) \
	X(INVALID_TXN_STATE, 48, 0) \
	X(INVALID_PRODUCER_ID_MAPPING, 49, 0) \
	X(INVALID_TRANSACTION_TIMEOUT, 50, 0) \
	X(CONCURRENT_TRANSACTIONS, 51, 0) \
	X(TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53, 0) \
	X(SECURITY_DISABLED, 54, 0) \
	X(OPERATION_NOT_ATTEMPTED, 55, 0) \
	X(KAFKA_STORAGE_ERROR, 56, 1) \
	X(SASL_AUTHENTICATION_FAILED, 58, 0) \
	X(UNKNOWN_PRODUCER_ID, 59, 0) \
	X(NON_EMPTY_GROUP, 68, 0) \
	X(GROUP_ID_NOT_FOUND, 69, 0) \
	X(FETCH_SESSION_ID_NOT_FOUND, 70, 1) \
	X(INVALID_FETCH_SESSION_EPOCH, 71, 1) \
	X(LISTENER_NOT_FOUND, 72, 1) \
	X(FENCED_LEADER_EPOCH, 74, 1) \
	X(UNKNOWN_LEADER_EPOCH, 75, 1) \
	X(UNSUPPORTED_COMPRESSION_TYPE, 76, 0) \
	X(MEMBER_ID_REQUIRED, 79, 0) \
	X(PREFERRED_LEADER_NOT_AVAILABLE, 80, 1) \
	X(GROUP_MAX_SIZE_REACHED, 81, 0) \
	X(FENCED_INSTANCE_ID, 82, 0) \
	X(ELIGIBLE_LEADERS_NOT_AVAILABLE, 83, 1) \
	X(ELECTION_NOT_NEEDED, 84, 1) \
	X(NO_REASSIGNMENT_IN_PROGRESS, 85, 0) \
	X(GROUP_SUBSCRIBED_TO_TOPIC, 86, 0) \
	X(INVALID_RECORD, 87, 0) \
	X(THROTTLING_QUOTA_EXCEEDED, 89, 1) \
	X(PRODUCER_FENCED, 90, 0) \
	X(RESOURCE_NOT_FOUND, 91, 0) \
	X(DUPLICATE_RESOURCE, 92, 0) \
	X(UNACCEPTABLE_CREDENTIAL, 93, 0) \
	X(INVALID_UPDATE_VERSION, 95, 0) \
	X(FEATURE_UPDATE_FAILED, 96, 0) \
	X(UNKNOWN_TOPIC_ID, 100, 1) \
	X(FETCH_SESSION_TOPIC_ID_ERROR, 106, 1) \
	X(MISMATCHED_ENDPOINT_TYPE, 114, 0) \
	X(UNSUPPORTED_ENDPOINT_TYPE, 115, 0)

enum kafka_error {
#define KAFKA_ERROR_ENUM(name, code, retriable) KERR_##name = (code),
	KAFKA_ERRORS(KAFKA_ERROR_ENUM)
#undef KAFKA_ERROR_ENUM
};

/* @thread any. Kafka's name of code ("NOT_COORDINATOR"), or NULL when it is
 * not in the table. */
static inline const char *kafka_error_name(int16_t code)
{
	switch (code) {
#define KAFKA_ERROR_NAME(name, c, retriable) case (c): return #name;
	KAFKA_ERRORS(KAFKA_ERROR_NAME)
#undef KAFKA_ERROR_NAME
	default:
		return NULL;
	}
}

/* @thread any. Whether a client retries code as it is (Kafka's
 * RetriableException); false for codes not in the table. */
static inline bool kafka_error_retriable(int16_t code)
{
	switch (code) {
#define KAFKA_ERROR_RETRIABLE(name, c, retriable) case (c): return (retriable);
	KAFKA_ERRORS(KAFKA_ERROR_RETRIABLE)
#undef KAFKA_ERROR_RETRIABLE
	default:
		return false;
	}
}

/* The Kafka error of an append that failed with -errno (nothing appended).
 *
 * -ENOBUFS: the shard's tail memory is all in dirty or referenced chunks
 * (writes and fetch responses in flight), a state that passes within a
 * loop turn or two. Kafka has no code for "broker memory full";
 * REQUEST_TIMED_OUT is what a Kafka broker answers when it could not
 * complete a produce in time, and every client retries it with backoff.
 * KAFKA_STORAGE_ERROR (what this was) says the log directory failed:
 * clients refresh metadata looking for a new leader, operators look for a
 * broken disk, and nothing is wrong with either. The batch was not
 * appended, so a retry cannot duplicate it (earlier batches of the same
 * partition in the same request were: dataplane/handlers_data.c
 * part_append_all).
 *
 * -EMSGSIZE: a batch larger than the log can ever take (a segment, the
 * largest tail chunk, the shard's tail memory): MESSAGE_TOO_LARGE, which
 * clients do not retry. */
static inline int16_t kafka_append_error(int err)
{
	switch (err) {
	case -ENOENT:
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	case -ENOBUFS:
		return KERR_REQUEST_TIMED_OUT;
	case -EMSGSIZE:
		/* larger than the log can ever take (storage/plog.c
		 * plog_append): a retry cannot succeed */
		return KERR_MESSAGE_TOO_LARGE;
	case -EBADMSG:
		/* compression.type: the records did not decompress */
		return KERR_CORRUPT_MESSAGE;
	default:
		return KERR_KAFKA_STORAGE_ERROR;
	}
}

#endif
