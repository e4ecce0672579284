/* dataplane/part_err.h — why a partition refuses, beside -errno (enum
 * part_err), and the one map of a partition's outcome to Kafka's codes
 * (part_err_to_kafka), used at the edges that answer Kafka clients:
 * Produce, the native PRODUCE, and the transaction coordinator's
 * registration of a partition (part_txn_begin, through part_proxy).
 *
 * Thread: any (constants and a pure function); owns nothing.
 * Errors: the partition's own reasons are positive, so that one int
 * carries either them or -errno; never a Kafka code on the owner.
 */
#ifndef SLUICE_PART_ERR_H
#define SLUICE_PART_ERR_H

#include <stdint.h>

#include "dataplane/kafka_errors.h"
#include "dataplane/producer.h"

/* Why a partition refuses a produce or a transaction, beside -errno. */
enum part_err {
	PART_ERR_OUT_OF_ORDER = PRODUCER_OUT_OF_ORDER,   /* idempotence: a sequence gap */
	PART_ERR_OLD_EPOCH = PRODUCER_OLD_EPOCH,         /* an older producer epoch: fenced */
	PART_ERR_TXN_STATE = 3,                          /* a transactional batch outside its transaction */
	PART_ERR_PRODUCERS_FULL = 4,                     /* the producer table cannot grow (no memory):
							  * a transaction cannot begin here now */
	PART_ERR_FENCED_EPOCH = 5,                       /* KIP-320: the client's leader epoch is older */
	PART_ERR_UNKNOWN_EPOCH = 6,                      /* KIP-320: the client's leader epoch is newer */
	PART_ERR_NOT_LEADER = 7,                         /* this node stopped leading before the ISR had it */
	PART_ERR_TIMED_OUT = 8,                          /* acks=all: the ISR did not have it in time */
	PART_ERR_AFTER_APPEND = 9,                       /* acks=all: the ISR had it, but had shrunk
							  * below min.insync.replicas meanwhile */
	PART_ERR_TXN_UNKNOWN = 10,                       /* a transactional batch of a producer with no
							  * transaction open here (at its epoch): the
							  * leader asks the coordinator (KIP-890) */
};

/* @thread any: the Kafka code for a partition's outcome: 0, an enum
 * part_err (positive) or -errno (kafka_append_error). */
static inline int16_t part_err_to_kafka(int err);

/* @thread any: a request's current leader epoch (Fetch v9+, ListOffsets
 * v4+, OffsetForLeaderEpoch v2+) against the partition's (KIP-320): 0
 * when it is -1 (no check) or equal, PART_ERR_FENCED_EPOCH when older,
 * PART_ERR_UNKNOWN_EPOCH when newer (the broker has not learnt it yet). */
static inline int part_epoch_check(int32_t current, int32_t partition_epoch)
{
	if (current == -1 || current == partition_epoch)
		return 0;
	return current < partition_epoch ? PART_ERR_FENCED_EPOCH : PART_ERR_UNKNOWN_EPOCH;
}

static inline int16_t part_err_to_kafka(int err)
{
	switch (err) {
	case 0:
		return KERR_NONE;
	case PART_ERR_OUT_OF_ORDER:
		return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	case PART_ERR_OLD_EPOCH:
		return KERR_INVALID_PRODUCER_EPOCH;
	case PART_ERR_TXN_STATE:
	case PART_ERR_TXN_UNKNOWN:
		return KERR_INVALID_TXN_STATE;
	case PART_ERR_PRODUCERS_FULL:
		return KERR_COORDINATOR_NOT_AVAILABLE;   /* retriable: the client tries again */
	case PART_ERR_FENCED_EPOCH:
		return KERR_FENCED_LEADER_EPOCH;
	case PART_ERR_UNKNOWN_EPOCH:
		return KERR_UNKNOWN_LEADER_EPOCH;
	case PART_ERR_NOT_LEADER:
		return KERR_NOT_LEADER_OR_FOLLOWER;
	case PART_ERR_TIMED_OUT:
		return KERR_REQUEST_TIMED_OUT;
	case PART_ERR_AFTER_APPEND:
		return KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
	default:
		return err < 0 ? kafka_append_error(err) : KERR_UNKNOWN_SERVER_ERROR;
	}
}

#endif
