/* control/txn_verify.c — KIP-890 part 1 verification: whether a partition is
 * in a transactional id's ongoing transaction, answered from this node's
 * coordinator state or asked of the id's coordinator on another node
 * (AddPartitionsToTxn v4 VerifyOnly); TxnOffsetCommit's check the same way
 * (see txn.h, txn_internal.h). Thread: the control thread. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/cutil.h"
#include "control/peer_kafka.h"
#include "control/txn_table.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

/* ---- verification (KIP-890 part 1) ---------------------------------------------- */

/* Whether partition topic/part is in t's ongoing transaction of producer
 * pid at epoch: 0 or the Kafka error. recv_ns: when the asking request was
 * taken up on this node's clock (UINT64_MAX: not known, another node's). */
static int16_t verify_here(struct txn_coord *tc, const struct txn *t, int64_t pid, int16_t epoch,
			   struct kafka_str topic, int32_t part, uint64_t recv_ns)
{
	if (!t || t->pid != pid)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (epoch != t->epoch)
		return KERR_INVALID_PRODUCER_EPOCH;
	if (t->state != TS_ONGOING || topic.len <= 0 || txn_tp_index(t, topic.ptr, (size_t)topic.len, part) < 0)
		return KERR_INVALID_TXN_STATE;   /* not added to this transaction */
	if (recv_ns != UINT64_MAX && recv_ns < t->begin_ns) {
		/* taken up before this transaction began: a late write of an
		 * earlier one (docs/transactions.md, Late requests) */
		tc->st.late_refused++;
		return KERR_INVALID_TXN_STATE;
	}
	return 0;
}

typedef void (*txn_verified_fn)(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns);

struct remote_verify {
	txn_verified_fn done;
	void *cookie;
};

/* The coordinator on another node answered AddPartitionsToTxn VerifyOnly. */
static void remote_verified(struct ctl *ctl, void *cookie, int err, const void *body)
{
	struct txn_coord *tc = ctl_txns(ctl);
	struct remote_verify *rv = cookie;
	const struct kafka_add_partitions_to_txn_response *r = body;
	int16_t kerr = KERR_COORDINATOR_NOT_AVAILABLE;   /* no answer: retriable */

	if (!err && r) {
		if (r->ErrorCode)
			kerr = r->ErrorCode;
		else if (r->ResultsByTransaction.count == 1 && r->ResultsByTransaction.items[0].TopicResults.count == 1 &&
			 r->ResultsByTransaction.items[0].TopicResults.items[0].ResultsByPartition.count == 1)
			kerr = r->ResultsByTransaction.items[0].TopicResults.items[0].ResultsByPartition.items[0]
				       .PartitionErrorCode;
	}
	tc->st.remote_verifies++;
	rv->done(tc, rv->cookie, kerr, 0);
	free(rv);
}

/* Kafka's answer to the producer for a coordinator's error (ReplicaManager
 * after AddPartitionsToTxnManager): a coordinator moving or busy is
 * retriable, NOT_ENOUGH_REPLICAS for clients that know no newer code. A
 * producer id that is not the transactional id's is in no transaction of
 * it: INVALID_TXN_STATE, as the partition answered it before it asked. */
static int16_t verify_error_for_producer(int16_t err)
{
	switch (err) {
	case KERR_INVALID_PRODUCER_ID_MAPPING:
		return KERR_INVALID_TXN_STATE;
	case KERR_COORDINATOR_NOT_AVAILABLE:
	case KERR_NOT_COORDINATOR:
	case KERR_COORDINATOR_LOAD_IN_PROGRESS:
	case KERR_CONCURRENT_TRANSACTIONS:
		return KERR_NOT_ENOUGH_REPLICAS;
	case KERR_PRODUCER_FENCED:
		return KERR_INVALID_PRODUCER_EPOCH;
	default:
		return err;
	}
}

/* Is topic/part in the ongoing transaction of id (pid, epoch)? Asked of
 * this node's coordinator state when the id is coordinated here, else of
 * the id's coordinator (the leader of its __transaction_state partition)
 * with AddPartitionsToTxn v4 VerifyOnly. done runs once, with 0 or the
 * Kafka code for the producer. */
static void txn_verify(struct txn_coord *tc, struct kafka_str id, int64_t pid, int16_t epoch, struct kafka_str topic,
		       int32_t part, uint64_t recv_ns, txn_verified_fn done, void *cookie)
{
	char buf[512];
	const struct md_topic *st = txn_state_topic(tc);
	int16_t err;
	int32_t idx, leader;

	if (id.len <= 0 || id.len >= (int32_t)sizeof(buf) || !st) {
		done(tc, cookie, KERR_INVALID_TXN_STATE, 0);
		return;
	}
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	idx = txn_state_partition(tc, buf);
	err = coord_load_err(&tc->load, idx);
	if (!err) {
		struct txn *t = txn_find(tc, id);

		tc->st.verifies++;
		err = verify_here(tc, t, pid, epoch, topic, part, recv_ns);
		done(tc, cookie, err, err ? 0 : t->begin_ns);
		return;
	}
	leader = st->parts[idx].leader;
	if (err == KERR_NOT_COORDINATOR && leader >= 0 && leader != tc->b->set.node_id) {
		struct kafka_add_partitions_to_txn_request q;
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_transaction tx;
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_topic tt;
		struct remote_verify *rv = xcalloc(1, sizeof(*rv));
		struct peer_kafka *pk = ctl_peers(tc->ctl);

		kafka_add_partitions_to_txn_request_init(&q);
		memset(&tx, 0, sizeof(tx));
		memset(&tt, 0, sizeof(tt));
		tt.Name = topic;
		tt.Partitions.items = &part;
		tt.Partitions.count = 1;
		tx.TransactionalId = id;
		tx.ProducerId = pid;
		tx.ProducerEpoch = epoch;
		tx.VerifyOnly = true;
		tx.Topics.items = &tt;
		tx.Topics.count = 1;
		q.Transactions.items = &tx;
		q.Transactions.count = 1;
		rv->done = done;
		rv->cookie = cookie;
		if (pk && peer_kafka_send(pk, leader, KAFKA_ADD_PARTITIONS_TO_TXN_KEY, 4, &q, remote_verified, rv) == 0)
			return;
		free(rv);
	}
	/* loading here, or no coordinator now: retriable */
	done(tc, cookie, err == KERR_COORDINATOR_LOAD_IN_PROGRESS ? err : KERR_COORDINATOR_NOT_AVAILABLE, 0);
}

struct offsets_verify {
	struct group_coord *gc;
	group_txn_checked_fn *done;
	void *cookie;
};

static void offsets_verified(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns)
{
	struct offsets_verify *ov = cookie;

	(void)tc;
	(void)since_ns;
	ov->done(ov->gc, ov->cookie, err);
	free(ov);
}

/* TxnOffsetCommit's check (group_set_txn_check): this node's state when
 * it coordinates the id, else the id's coordinator on another node, asked
 * whether the group's offsets partition is in the transaction (as a
 * partition leader asks, AddPartitionsToTxn VerifyOnly). */
void txn_offsets_check(void *arg, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
			      uint64_t recv_ns, group_txn_checked_fn *done, void *cookie)
{
	struct txn_coord *tc = arg;
	struct offsets_verify *ov;

	if (txn_key_err(tc, id) != KERR_NOT_COORDINATOR) {
		done(tc->gc, cookie, txn_check_offsets(tc, id, pid, epoch, opart, recv_ns));
		return;
	}
	ov = xcalloc(1, sizeof(*ov));
	*ov = (struct offsets_verify){ tc->gc, done, cookie };
	txn_verify(tc, id, pid, epoch, (struct kafka_str){ GROUP_OFFSETS_TOPIC, (int32_t)strlen(GROUP_OFFSETS_TOPIC) },
		   opart, UINT64_MAX, offsets_verified, ov);
}

/* A shard's verification (struct coord_txn_verify), answered to it. */
static void shard_verified(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns)
{
	struct coord_txn_verify *v = cookie;
	struct shard_msg m = { .fn = v->done, .p = { v } };

	v->err = verify_error_for_producer(err);
	v->since_ns = since_ns;
	ctl_send_msg(tc->ctl, v->from, &m);
}

static void verify_msg(void *self, struct shard_msg *m)
{
	struct txn_coord *tc = ctl_txns(self);
	struct coord_txn_verify *v = m->p[0];

	txn_verify(tc, v->id, v->pid, v->epoch, v->topic, v->partition, v->recv_ns, shard_verified, v);
}

void txn_verify_submit(struct kafka_ctx *ctx, struct coord_txn_verify *v)
{
	struct shard_msg m = { .fn = verify_msg, .p = { v } };

	kafka_ctx_send_ctl(ctx, &m);
}

/* AddPartitionsToTxn v4+ (from partition leaders): VerifyOnly answered
 * from the state here, each transaction of the batch on its own. Adding
 * partitions (VerifyOnly false, KIP-890 part 2) is not served:
 * INVALID_REQUEST. */
void txn_handle_verify_only(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_add_partitions_to_txn_request *q = ctx->req.body;
	struct kafka_add_partitions_to_txn_response *r = ctx->resp;

	for (int i = 0; i < r->ResultsByTransaction.count; i++) {
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx = &q->Transactions.items[i];
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_result *rr = &r->ResultsByTransaction.items[i];
		int16_t terr = txn_key_err(tc, tx->TransactionalId);
		struct txn *t = terr ? NULL : txn_find(tc, tx->TransactionalId);

		if (!terr && !tx->VerifyOnly)
			terr = KERR_INVALID_REQUEST;
		for (int j = 0; j < rr->TopicResults.count; j++) {
			struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
				&rr->TopicResults.items[j];

			for (int k = 0; k < rt->ResultsByPartition.count; k++) {
				struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_partition_result *pr =
					&rt->ResultsByPartition.items[k];

				tc->st.verifies++;
				pr->PartitionErrorCode =
					terr ? terr
					     : verify_here(tc, t, tx->ProducerId, tx->ProducerEpoch, rt->Name,
							   pr->PartitionIndex, UINT64_MAX);
			}
		}
	}
	txn_answer_now(tc, ctx);
}

int16_t txn_check_offsets(struct txn_coord *tc, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
			  uint64_t recv_ns)
{
	struct txn *t = txn_find(tc, id);
	int16_t err = txn_key_err(tc, id);

	if (err)
		/* loading here (the id's coordinator on another node is asked
		 * by txn_offsets_check instead): retriable */
		return err == KERR_COORDINATOR_LOAD_IN_PROGRESS ? err : KERR_COORDINATOR_NOT_AVAILABLE;
	err = txn_check_producer(tc, t, pid, epoch);
	if (err == KERR_CONCURRENT_TRANSACTIONS && t->state == TS_ONGOING)
		err = 0;   /* registrations of other partitions in flight */
	if (err)
		return err;
	if (t->state != TS_ONGOING || recv_ns < t->begin_ns ||
	    txn_tp_index(t, GROUP_OFFSETS_TOPIC, strlen(GROUP_OFFSETS_TOPIC), opart) < 0)
		return KERR_INVALID_TXN_STATE;   /* AddOffsetsToTxn first, in this transaction */
	return 0;
}
