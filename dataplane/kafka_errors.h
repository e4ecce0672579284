/* dataplane/kafka_errors.h — Kafka's error codes (int16 on the wire), kept
 * apart from errno values and mapped only at the handler edge (STYLE 6). */
#ifndef SLUICE_KAFKA_ERRORS_H
#define SLUICE_KAFKA_ERRORS_H

#include <errno.h>
#include <stdint.h>

enum kafka_error {
	KERR_UNKNOWN_SERVER_ERROR = -1,
	KERR_NONE = 0,
	KERR_OFFSET_OUT_OF_RANGE = 1,
	KERR_CORRUPT_MESSAGE = 2,
	KERR_UNKNOWN_TOPIC_OR_PARTITION = 3,
	KERR_LEADER_NOT_AVAILABLE = 5,
	KERR_NOT_LEADER_OR_FOLLOWER = 6,
	KERR_REQUEST_TIMED_OUT = 7,
	KERR_MESSAGE_TOO_LARGE = 10,
	KERR_OFFSET_METADATA_TOO_LARGE = 12,
	KERR_COORDINATOR_NOT_AVAILABLE = 15,
	KERR_NOT_COORDINATOR = 16,
	KERR_INVALID_TOPIC_EXCEPTION = 17,
	KERR_RECORD_LIST_TOO_LARGE = 18,
	KERR_NOT_ENOUGH_REPLICAS = 19,
	KERR_INVALID_REQUIRED_ACKS = 21,
	KERR_INVALID_GROUP_ID = 24,
	KERR_INVALID_TIMESTAMP = 32,
	KERR_UNSUPPORTED_VERSION = 35,
	KERR_TOPIC_ALREADY_EXISTS = 36,
	KERR_INVALID_PARTITIONS = 37,
	KERR_INVALID_REPLICATION_FACTOR = 38,
	KERR_INVALID_CONFIG = 40,
	KERR_INVALID_REQUEST = 42,
	KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
	KERR_POLICY_VIOLATION = 44,
	/* KERR_OUT_OF_ORDER_SEQUENCE_NUMBER 45, KERR_INVALID_PRODUCER_EPOCH 47:
	 * dataplane/producer.h */
	KERR_INVALID_TXN_STATE = 48,
	KERR_INVALID_PRODUCER_ID_MAPPING = 49,
	KERR_INVALID_TRANSACTION_TIMEOUT = 50,
	KERR_CONCURRENT_TRANSACTIONS = 51,
	KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
	KERR_OPERATION_NOT_ATTEMPTED = 55,
	KERR_KAFKA_STORAGE_ERROR = 56,
	KERR_UNSUPPORTED_COMPRESSION_TYPE = 76,
	KERR_INVALID_RECORD = 87,
	KERR_PRODUCER_FENCED = 90,
};

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
