/* dataplane/handlers_data.c — the data path APIs: ApiVersions, Metadata,
 * Produce, ListOffsets (Fetch: handlers_fetch.c). Each partition's part runs on its owner
 * shard, locally or through the ring, and the response leaves when every
 * part has answered. @thread shard */
#include <errno.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/cluster_view.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/part_err.h"
#include "dataplane/part_proxy.h"
#include "dataplane/part_role.h"
#include "dataplane/producer.h"
#include "dataplane/shard_core.h"
#include "dataplane/topic_name.h"
#include "storage/batch.h"



/* ---- ApiVersions ------------------------------------------------------ */

int kafka_handle_api_versions(struct kafka_ctx *ctx)
{
	struct kafka_api_versions_response *r = ALLOC(ctx, struct kafka_api_versions_response, 1);
	struct kafka_api_versions_response_api_version *keys =
		ALLOC(ctx, struct kafka_api_versions_response_api_version, KAFKA_API_COUNT);
	const struct md_snapshot *md = broker_md(ctx->sh->b);

	if (!r || !keys) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_api_versions_response_init(r);
	kafka_api_versions_fill(r, keys, KAFKA_API_COUNT);
	if (!ctx->req.body)   /* a version we do not speak: v0 with the error */
		r->ErrorCode = KERR_UNSUPPORTED_VERSION;
	else if (md && md->mv_max > 0) {
		/* v3+'s tagged fields (written only from v3): this node's
		 * range of metadata.version and the cluster's finalized level
		 * (KIP-584; the levels are Sluice's, control/meta_features.h) */
		struct kafka_api_versions_response_supported_feature_key *sf =
			ALLOC(ctx, struct kafka_api_versions_response_supported_feature_key, 1);
		struct kafka_api_versions_response_finalized_feature_key *ff =
			ALLOC(ctx, struct kafka_api_versions_response_finalized_feature_key, 1);
		static const char mv[] = "metadata.version";

		if (!sf || !ff) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		sf->Name = (struct kafka_str){ mv, (int32_t)sizeof(mv) - 1 };
		sf->MinVersion = md->mv_min;
		sf->MaxVersion = md->mv_max;
		ff->Name = sf->Name;
		ff->MinVersionLevel = md->mv;
		ff->MaxVersionLevel = md->mv;
		r->SupportedFeatures.items = sf;
		r->SupportedFeatures.count = 1;
		r->FinalizedFeatures.items = ff;
		r->FinalizedFeatures.count = 1;
		r->FinalizedFeaturesEpoch = md->mv_epoch;
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

/* ---- Metadata --------------------------------------------------------- */

/* Whether broker id is among the nb brokers told to this client. */
static int metadata_listed(const struct cluster_node *nodes, int nb, int32_t id)
{
	for (int i = 0; i < nb; i++)
		if (nodes[i].id == id)
			return 1;
	return 0;
}

/* Whether broker id is registered and unfenced (in the snapshot's brokers). */
static int metadata_live(const struct md_snapshot *md, int32_t id)
{
	for (int i = 0; md && i < md->nbrokers; i++)
		if (md->brokers[i].id == id)
			return 1;
	return 0;
}

/* nodes (NULL: every broker is listed) and nb: the brokers this client is
 * told of; a partition led by another has leader -1 and, as Kafka's
 * metadata cache answers: LISTENER_NOT_FOUND (v6+) when that leader is a
 * live broker without an endpoint for the listener the client came in
 * on, LEADER_NOT_AVAILABLE before v6 and when the leader is not live. */
static void metadata_fill_topic(struct kafka_ctx *ctx, struct kafka_metadata_response_metadata_response_topic *rt,
				const struct md_topic *t, struct kafka_str name, const struct cluster_node *nodes,
				int nb)
{
	rt->Name = name;
	rt->IsInternal = false;
	rt->Partitions.count = 0;
	rt->Partitions.items = NULL;
	rt->TopicAuthorizedOperations = INT32_MIN;   /* v8+: not asked for */
	if (!t && !name.ptr) {
		/* v10+: asked by an id this cluster does not know */
		rt->ErrorCode = KERR_UNKNOWN_TOPIC_ID;
		return;
	}
	if (!t) {
		/* an illegal name can never exist: a producer fails at once
		 * instead of waiting out its message timeout */
		rt->ErrorCode = topic_name_valid(name.ptr, name.len) ? KERR_UNKNOWN_TOPIC_OR_PARTITION
								     : KERR_INVALID_TOPIC_EXCEPTION;
		return;
	}
	rt->ErrorCode = 0;
	rt->Name = (struct kafka_str){ t->name, t->name_len };
	if (((const struct kafka_metadata_request *)ctx->req.body)->IncludeTopicAuthorizedOperations)
		rt->TopicAuthorizedOperations = authz_ops(ctx, ACL_RES_TOPIC, rt->Name, ACL_TOPIC_OPS);
	memcpy(rt->TopicId.b, t->id, 16);           /* v10+ (KIP-516) */
	rt->IsInternal = t->internal;
	rt->Partitions.items = ALLOC(ctx, struct kafka_metadata_response_metadata_response_partition, t->nparts);
	if (!rt->Partitions.items) {
		rt->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;
		return;
	}
	rt->Partitions.count = t->nparts;
	for (int32_t i = 0; i < t->nparts; i++) {
		struct kafka_metadata_response_metadata_response_partition *p = &rt->Partitions.items[i];
		const struct md_partition *mp = &t->parts[i];

		/* the lists borrow the snapshot's arrays (read-only; valid for
		 * this turn, as the names) */
		p->ErrorCode = mp->leader < 0 ? KERR_LEADER_NOT_AVAILABLE : 0;
		p->PartitionIndex = i;
		p->LeaderId = mp->leader;
		p->LeaderEpoch = mp->leader_epoch;   /* v7+: the epoch the partition stamps */
		p->ReplicaNodes.items = (int32_t *)mp->replicas;
		p->ReplicaNodes.count = mp->nreplicas;
		p->IsrNodes.items = (int32_t *)mp->isr;
		p->IsrNodes.count = mp->nisr;
		p->OfflineReplicas.items = NULL;
		p->OfflineReplicas.count = 0;
		if (nodes && mp->leader >= 0 && !metadata_listed(nodes, nb, mp->leader)) {
			p->ErrorCode = ctx->req.header.RequestApiVersion >= 6 &&
						       metadata_live(broker_md(ctx->sh->b), mp->leader)
					       ? KERR_LISTENER_NOT_FOUND
					       : KERR_LEADER_NOT_AVAILABLE;
			p->LeaderId = -1;
		}
	}
}

/* Metadata v10-11 define TopicId and a nullable name in the request, but
 * Kafka takes neither before v12: such a request is INVALID_REQUEST for
 * every topic (Kafka's handleTopicMetadataRequest). */
static int metadata_ids_refused(const struct kafka_ctx *ctx)
{
	const struct kafka_metadata_request *q = ctx->req.body;
	static const uint8_t zero[16];

	if (ctx->req.header.RequestApiVersion < 10 || ctx->req.header.RequestApiVersion >= 12)
		return 0;
	for (int i = 0; i < q->Topics.count; i++)
		if (!q->Topics.items[i].Name.ptr || memcmp(q->Topics.items[i].TopicId.b, zero, 16))
			return 1;
	return 0;
}

static int metadata_respond(struct kafka_ctx *ctx)
{
	struct kafka_metadata_request *q = ctx->req.body;
	struct kafka_metadata_response *r = ALLOC(ctx, struct kafka_metadata_response, 1);
	struct broker *b = ctx->sh->b;
	struct md_snapshot *md = broker_md(b);
	int cap = 1 + (md ? md->nbrokers : 0), nb, others = 0;
	struct kafka_metadata_response_metadata_response_broker *br =
		ALLOC(ctx, struct kafka_metadata_response_metadata_response_broker, cap);
	struct cluster_node *nodes = ALLOC(ctx, struct cluster_node, cap);
	int all = q->Topics.count < 0 || (q->Topics.count == 0 && ctx->req.header.RequestApiVersion == 0);
	int n = all ? (md ? md->ntopics : 0) : q->Topics.count;
	int refused = !all && metadata_ids_refused(ctx);
	const struct cluster_node *partial;

	if (!r || !br || !nodes) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_metadata_response_init(r);
	nb = cluster_view_brokers(b, ctx->c->listener, md, nodes, cap);
	for (int i = 0; i < nb; i++) {
		br[i].NodeId = nodes[i].id;
		br[i].Host = nodes[i].host;
		br[i].Port = nodes[i].port;
		br[i].Rack = nodes[i].rack;
	}
	for (int i = 0; md && i < md->nbrokers; i++)
		others += md->brokers[i].id != b->set.node_id;
	partial = nb - 1 < others ? nodes : NULL;   /* NULL: every broker listed, nothing to check */
	r->Brokers.items = br;
	r->Brokers.count = nb;
	r->ClusterId = cluster_view_id(b);
	r->ControllerId = cluster_view_controller(b, md);
	/* v8-10, as DescribeCluster: none without DESCRIBE on the cluster */
	r->ClusterAuthorizedOperations = !q->IncludeClusterAuthorizedOperations ? INT32_MIN
					 : !authz_cluster(ctx, ACL_DESCRIBE) ? 0
					 : authz_ops(ctx, ACL_RES_CLUSTER, ACL_CLUSTER_STR, ACL_CLUSTER_OPS);
	r->Topics.items = ALLOC(ctx, struct kafka_metadata_response_metadata_response_topic, n);
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Topics.count = 0;
	for (int i = 0; i < n; i++) {
		struct kafka_metadata_response_metadata_response_topic *rt = &r->Topics.items[r->Topics.count];
		const struct md_topic *t;
		struct kafka_str name;

		if (all) {
			t = md->topics[i];
			name = (struct kafka_str){ t->name, t->name_len };
			/* the authorizer: what the principal may not DESCRIBE is left out */
			if (!authz_allow(ctx, ACL_DESCRIBE, ACL_RES_TOPIC, t->name, (size_t)t->name_len))
				continue;
		} else if (!q->Topics.items[i].Name.ptr) {
			/* v10+: a topic asked by id (null name) */
			name = (struct kafka_str){ NULL, -1 };
			t = md_find_id(md, q->Topics.items[i].TopicId.b);
		} else {
			name = q->Topics.items[i].Name;
			t = name.len > 0 ? md_find(md, name.ptr, name.len) : NULL;
		}
		r->Topics.count++;
		if (refused) {
			/* (a name is not nullable in a v10-11 response) */
			metadata_fill_topic(ctx, rt, NULL, name.ptr ? name : (struct kafka_str){ "", 0 }, NULL, 0);
			rt->ErrorCode = KERR_INVALID_REQUEST;
		} else if (!all && (t || name.ptr) &&
			   !authz_allow(ctx, ACL_DESCRIBE, ACL_RES_TOPIC, t ? t->name : name.ptr,
					t ? (size_t)t->name_len : name.len > 0 ? (size_t)name.len : 0)) {
			/* the authorizer (an id no topic has is UNKNOWN_TOPIC_ID
			 * first, as Kafka); asked by id, the name stays null */
			metadata_fill_topic(ctx, rt, NULL, name, NULL, 0);
			rt->ErrorCode = KERR_TOPIC_AUTHORIZATION_FAILED;
		} else {
			metadata_fill_topic(ctx, rt, t, name, partial, nb);
		}
		if (!all && rt->ErrorCode)
			rt->TopicId = q->Topics.items[i].TopicId;
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_metadata(struct kafka_ctx *ctx)
{
	struct kafka_metadata_request *q = ctx->req.body;
	struct md_snapshot *md = broker_md(ctx->sh->b);
	int allow = ctx->sh->b->set.auto_create &&
		    (ctx->req.header.RequestApiVersion < 4 || q->AllowAutoTopicCreation);
	struct kafka_str *missing;
	int nmissing = 0;

	if (!allow || q->Topics.count <= 0 || metadata_ids_refused(ctx))
		return metadata_respond(ctx);
	missing = ALLOC(ctx, struct kafka_str, q->Topics.count);
	if (!missing)
		return metadata_respond(ctx);
	for (int i = 0; i < q->Topics.count; i++) {
		struct kafka_str n = q->Topics.items[i].Name;

		/* illegal and internal names are never auto-created */
		if (topic_name_valid(n.ptr, n.len) && !topic_name_internal(n.ptr, n.len) && !md_find(md, n.ptr, n.len) &&
		    (authz_cluster(ctx, ACL_CREATE) || authz_allow(ctx, ACL_CREATE, ACL_RES_TOPIC, n.ptr, (size_t)n.len)))
			missing[nmissing++] = n;   /* the authorizer: CREATE on the cluster or the topic */
	}
	if (!nmissing)
		return metadata_respond(ctx);
	/* auto.create.topics.enable: the control thread creates them, then
	 * the response shows them (invalid names come back unknown) */
	ctx->pending = 1;
	ctx->resume = metadata_respond;
	ctl_request_auto_create(ctx, missing, nmissing);
	return 0;
}

/* ---- Produce ---------------------------------------------------------- */

/* Where a partition's outcome goes: the request and its response slot;
 * what it writes (to dispatch it again once its transaction is verified). */
struct produce_part {
	struct kafka_ctx *ctx;
	struct kafka_produce_response_partition_produce_response *pr;
	struct part *part;
	int owner;
	const uint8_t *rec;
	uint32_t len;
	int32_t min_insync;
	int verified;                    /* asked the coordinator already */
	struct kafka_str topic;
	struct coord_txn_verify v;       /* the verification (KIP-890), while asked */
};

static void produce_dispatch(struct shard *sh, struct produce_part *pp);
static int produce_verify(struct shard *sh, struct produce_part *pp);

static int16_t batch_err_to_kafka(int err)
{
	switch (-err) {
	case BATCH_ERR_TOO_LARGE:
		return KERR_MESSAGE_TOO_LARGE;
	case BATCH_ERR_INFLATE:
		return KERR_MESSAGE_TOO_LARGE;
	case BATCH_ERR_MAGIC:
	case BATCH_ERR_COUNT:
	case BATCH_ERR_ATTRIBUTES:
	case BATCH_ERR_INNER:
		return KERR_INVALID_RECORD;
	case BATCH_ERR_CODEC:
		return KERR_UNSUPPORTED_COMPRESSION_TYPE;
	default:
		return KERR_CORRUPT_MESSAGE;
	}
}

/* On the connection's shard: one partition of a produce is done: at base
 * (err 0), or refused with an enum part_err or -errno. */
static void produce_ack(struct shard *sh, struct kafka_ctx *ctx, void *slot, int64_t base, int err,
			int64_t log_start)
{
	struct produce_part *pp = slot;
	struct kafka_produce_response_partition_produce_response *pr = pp ? pp->pr : NULL;

	if (err == PART_ERR_TXN_UNKNOWN && pp && produce_verify(sh, pp))
		return;   /* the coordinator is asked; dispatched again if verified */
	if (pr) {
		if (err > 0) {
			pr->ErrorCode = part_err_to_kafka(err);   /* idempotence, transactions */
			pr->BaseOffset = -1;
		} else if (err) {
			pr->ErrorCode = part_err_to_kafka(err);
			pr->BaseOffset = -1;
			/* counted by the shard that answers */
			shard_stat_add(&sh->stats.produce_rejected[pr->ErrorCode == KERR_MESSAGE_TOO_LARGE ?
								   SHARD_REJECT_SIZE : SHARD_REJECT_OTHER], 1);
		} else {
			pr->BaseOffset = base;
			pr->LogStartOffset = log_start;
		}
	}
	kafka_ctx_sub_done(ctx);
}

static void produce_ack_msg(void *self, struct shard_msg *m)
{
	produce_ack(self, m->p[0], m->p[1], m->v[0], (int)m->v[1], m->v[2]);
}

/* On the owner: the partition's outcome, back to the request's shard. */
static void produce_route(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	struct produce_part *pp = cookie;

	if (pp->ctx->sh == owner) {
		produce_ack(owner, pp->ctx, pp, base, err, log_start);
	} else {
		struct shard_msg m = { .fn = produce_ack_msg, .p = { pp->ctx, pp }, .v = { base, err, log_start } };

		shard_send(owner, pp->ctx->sh->id, &m);
	}
}

/* ---- KIP-890: a transactional batch where no transaction of its
 * producer is open yet ------------------------------------------------- */

/* On the request's shard: the owner took the transaction (or refused). */
static void produce_begun(void *self, void *cookie, int err)
{
	struct shard *sh = self;
	struct produce_part *pp = cookie;

	if (err) {
		produce_ack(sh, pp->ctx, pp, -1, err, -1);
		return;
	}
	produce_dispatch(sh, pp);
}

/* On the request's shard: the coordinator's answer. */
static void produce_verified(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct coord_txn_verify *v = m->p[0];
	struct produce_part *pp = v->cookie;
	struct part_proxy px;

	if (v->err) {
		pp->pr->ErrorCode = v->err;
		pp->pr->BaseOffset = -1;
		shard_stat_add(&sh->stats.produce_rejected[SHARD_REJECT_TXN], 1);
		kafka_ctx_sub_done(pp->ctx);
		return;
	}
	/* in the producer's transaction: the partition takes its batches
	 * from now on, then this one is written */
	part_proxy_init_shard(&px, sh);
	part_proxy_txn_begin_at(&px, pp->owner, pp->part, v->pid, v->epoch, v->since_ns, produce_begun, pp);
}

/* The owner knows no transaction of the batch's producer: ask its
 * coordinator (once per partition of a request). 1 when asked. */
static int produce_verify(struct shard *sh, struct produce_part *pp)
{
	struct kafka_produce_request *q = pp->ctx->req.body;

	if (pp->verified || q->TransactionalId.len <= 0 || !sh->b->coord->submit_txn_verify ||
	    pp->len < BATCH_HEADER_SIZE)
		return 0;
	pp->verified = 1;
	pp->v = (struct coord_txn_verify){ .id = q->TransactionalId, .topic = pp->topic,
					   .partition = pp->pr->Index, .pid = batch_producer_id(pp->rec),
					   .epoch = batch_producer_epoch(pp->rec), .recv_ns = pp->ctx->recv_ns,
					   .from = sh->id, .done = produce_verified, .cookie = pp };
	sh->b->coord->submit_txn_verify(pp->ctx, &pp->v);
	return 1;
}

/* On the owner shard of a partition another shard's request writes. */
static void produce_remote_msg(void *self, struct shard_msg *m)
{
	struct part_produce_req req = { .rec = m->p[1], .len = (uint32_t)m->v[0], .acks = (int)m->v[1],
					.recv_ns = (uint64_t)m->v[2], .timeout_ms = (int32_t)m->v[3],
					.min_insync = (int32_t)((uint64_t)m->v[0] >> 32) };

	(void)self;
	part_produce(m->p[0], &req, produce_route, m->p[2]);
}

static int produce_finish(struct kafka_ctx *ctx)
{
	struct kafka_produce_request *q = ctx->req.body;

	if (q->Acks == 0) {
		kafka_ctx_done(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_produce(struct kafka_ctx *ctx)
{
	struct kafka_produce_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_produce_response *r = ALLOC(ctx, struct kafka_produce_response, 1);
	int acks_ok = q->Acks == 0 || q->Acks == 1 || q->Acks == -1, txn_denied = 0;

	shard_stat_add(&sh->stats.produce_requests, 1);
	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_produce_response_init(r);
	r->Responses.items = ALLOC(ctx, struct kafka_produce_response_topic_produce_response, q->TopicData.count);
	if (!r->Responses.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Responses.count = q->TopicData.count < 0 ? 0 : q->TopicData.count;
	ctx->resp = r;
	ctx->resume = produce_finish;
	ctx->pending = 1;   /* held until every partition is dispatched */
	/* the authorizer (docs/security.md#acls): a transactional id needs
	 * WRITE on it; each topic WRITE (which also covers idempotence, as
	 * Kafka 3's IDEMPOTENT_WRITE or WRITE on the topic) */
	if (q->TransactionalId.len > 0 &&
	    !authz_allow(ctx, ACL_WRITE, ACL_RES_TRANSACTIONAL_ID, q->TransactionalId.ptr, (size_t)q->TransactionalId.len))
		txn_denied = 1;
	for (int i = 0; i < r->Responses.count; i++) {
		struct kafka_produce_request_topic_produce_data *td = &q->TopicData.items[i];
		struct kafka_produce_response_topic_produce_response *rt = &r->Responses.items[i];
		const struct md_topic *t = td->Name.len > 0 ? md_find(md, td->Name.ptr, td->Name.len) : NULL;
		int np = td->PartitionData.count < 0 ? 0 : td->PartitionData.count;
		int denied = txn_denied ? KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED :
			     !authz_allow(ctx, ACL_WRITE, ACL_RES_TOPIC, td->Name.ptr,
					  td->Name.len > 0 ? (size_t)td->Name.len : 0) ? KERR_TOPIC_AUTHORIZATION_FAILED : 0;
		struct produce_part *pps;

		rt->Name = td->Name;
		rt->PartitionResponses.items = ALLOC(ctx, struct kafka_produce_response_partition_produce_response, np);
		if (!rt->PartitionResponses.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		rt->PartitionResponses.count = np;
		pps = ALLOC(ctx, struct produce_part, np);
		if (!pps) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++) {
			struct kafka_produce_request_partition_produce_data *pd = &td->PartitionData.items[j];
			struct kafka_produce_response_partition_produce_response *pr = &rt->PartitionResponses.items[j];
			const struct md_partition *mp;
			int16_t led = md_part_led(t, pd->Index, sh->b->set.node_id, &mp);
			const uint8_t *rec = pd->Records.ptr;
			uint32_t len = pd->Records.len > 0 ? (uint32_t)pd->Records.len : 0, at = 0;
			int16_t err = 0;

			pr->Index = pd->Index;
			pr->ErrorCode = 0;
			pr->BaseOffset = -1;
			pr->LogAppendTimeMs = -1;
			pr->LogStartOffset = -1;
			if (!acks_ok)
				err = KERR_INVALID_REQUIRED_ACKS;
			else if (denied)
				err = (int16_t)denied;
			else if (ctx->req.header.RequestApiVersion < 3)
				/* v0-2 carry legacy MessageSets (magic 0/1): advertised only
				 * so librdkafka <= 2.11 enables its codecs; refused here */
				err = KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT;
			else if (!mp)
				err = led;   /* unknown, or led by another broker */
			else if (t->internal)
				/* like Kafka: clients do not write the coordinator's logs */
				err = KERR_INVALID_TOPIC_EXCEPTION;
			else if (!len)
				err = KERR_CORRUPT_MESSAGE;
			else if (q->Acks == -1 && md_part_isr_size(mp) < t->min_insync)
				/* Kafka's rule, before anything is appended: acks=all
				 * needs min.insync.replicas replicas in sync */
				err = KERR_NOT_ENOUGH_REPLICAS;
			/* every batch is checked before any is appended: a partition's
			 * records are taken whole or not at all */
			while (!err && at < len) {
				struct batch_info bi;
				int rc = batch_validate(rec + at, len - at, t->max_message_bytes, BATCH_V_PRODUCE, &bi);

				/* a compressed batch's records are checked too, as
				 * they decompress (bounded memory: the shard's window) */
				if (rc == 0 && (bi.attributes & BATCH_ATTR_CODEC_MASK))
					rc = batch_check_records(sh->compress, rec + at, &bi, BATCH_V_PRODUCE);
				if (rc < 0) {
					err = batch_err_to_kafka(rc);
					break;
				}
				if (bi.attributes & BATCH_ATTR_CONTROL) {
					err = KERR_INVALID_RECORD;   /* markers come from the coordinator only */
					break;
				}
				if ((bi.attributes & BATCH_ATTR_TRANSACTIONAL) &&
				    (batch_producer_id(rec + at) < 0 || batch_producer_epoch(rec + at) < 0)) {
					err = KERR_INVALID_RECORD;   /* a transaction needs a producer */
					break;
				}
				if ((bi.attributes & BATCH_ATTR_TRANSACTIONAL) && q->TransactionalId.len <= 0) {
					/* Kafka's answer to transactional records without
					 * the transactional id they belong to */
					err = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
					break;
				}
				if (batch_producer_id(rec + at) >= 0 &&
				    (at != 0 || bi.size != len || batch_base_sequence(rec + at) < 0)) {
					/* an idempotent producer sends one batch per
					 * partition, with a sequence */
					err = KERR_INVALID_RECORD;
					break;
				}
				if (t->log_append_time) {
					uint8_t *b = (uint8_t *)rec + at;   /* our own frame buffer */

					be16_store(b + OF_Attributes, bi.attributes | BATCH_ATTR_LOG_APPEND_TIME);
					be64_store(b + OF_MaxTimestamp, (uint64_t)sh->now_ms);
					be32_store(b + OF_Crc, batch_compute_crc(b, bi.size));
					pr->LogAppendTimeMs = sh->now_ms;
				}
				at += bi.size;
			}
			if (err) {
				pr->ErrorCode = err;
				shard_stat_add(&sh->stats.produce_rejected[err == KERR_CORRUPT_MESSAGE ? SHARD_REJECT_CRC
						: err == KERR_MESSAGE_TOO_LARGE ? SHARD_REJECT_SIZE
						: err == KERR_INVALID_RECORD ? SHARD_REJECT_INVALID : SHARD_REJECT_OTHER], 1);
				continue;
			}
			ctx->pending++;
			pps[j] = (struct produce_part){ .ctx = ctx, .pr = pr, .part = md_part_owner(mp), .owner = mp->owner_shard,
							.rec = rec, .len = len, .min_insync = t->min_insync,
							.topic = td->Name };
			produce_dispatch(sh, &pps[j]);
		}
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}

/* A partition's records to its owner (again, after a verification). */
static void produce_dispatch(struct shard *sh, struct produce_part *pp)
{
	struct kafka_ctx *ctx = pp->ctx;
	struct kafka_produce_request *q = ctx->req.body;

	if (pp->owner == sh->id) {
		struct part_produce_req req = { .rec = pp->rec, .len = pp->len, .acks = q->Acks,
						.recv_ns = ctx->recv_ns, .timeout_ms = q->TimeoutMs,
						.min_insync = pp->min_insync };

		part_produce(pp->part, &req, produce_route, pp);
	} else {
		struct shard_msg m = { .fn = produce_remote_msg, .p = { pp->part, (void *)pp->rec, pp },
				       /* v[0]: the length, min.insync.replicas above it */
				       .v = { (int64_t)((uint64_t)pp->len | (uint64_t)(uint32_t)pp->min_insync << 32),
					      q->Acks, (int64_t)ctx->recv_ns, q->TimeoutMs } };

		shard_send(sh, pp->owner, &m);
	}
}

/* ---- ListOffsets ------------------------------------------------------ */

struct lo_item {
	struct kafka_list_offsets_response_list_offsets_partition_response *pr;
	struct part *part;
	int64_t ts;
	struct kafka_ctx *ctx;
	int isolation;
	int32_t current_epoch;           /* v4+: the client's leader epoch, -1: none (KIP-320) */
	struct plog_time q;              /* by timestamp: the walk on the owner */
	struct rbuf_wait wait;           /* waiting for one of the owner's read buffers */
};

static void lo_done_msg(void *self, struct shard_msg *m)
{
	struct lo_item *it = m->p[0];

	(void)self;
	kafka_ctx_sub_done(it->ctx);
}

/* On the owner: the partition's answer is in it->pr; back to the request. */
static void lo_answered(struct shard *sh, struct lo_item *it)
{
	if (it->ctx->sh == sh) {
		kafka_ctx_sub_done(it->ctx);
	} else {
		struct shard_msg r = { .fn = lo_done_msg, .p = { it } };

		shard_send(sh, it->ctx->sh->id, &r);
	}
}

/* The walk by timestamp ended: answer, and give the buffer back. */
static void lo_time_finish(struct shard *sh, struct lo_item *it)
{
	struct plog_time *q = &it->q;
	uint8_t *buf = q->buf;

	if (q->err == 0) {
		it->pr->Offset = q->offset;
		it->pr->Timestamp = q->timestamp;
		if (it->part->pl)
			it->pr->LeaderEpoch = plog_epoch_for_offset(it->part->pl, q->offset);
	} else {
		it->pr->Offset = -1;
	}
	q->buf = NULL;
	lo_answered(sh, it);          /* it may be gone after this */
	part_rbuf_put(sh, buf);
}

/* A walk that went to the disk ended, from its read's completion. */
static void lo_time_done(struct plog_time *q)
{
	struct lo_item *it = q->arg;
	lo_time_finish(it->part->sh, it);
}

static void lo_time_start(struct shard *sh, struct lo_item *it);

/* A read buffer is free for a lookup that waited. */
static void lo_buf_ready(struct shard *sh, struct rbuf_wait *w)
{
	lo_time_start(sh, (struct lo_item *)((char *)w - offsetof(struct lo_item, wait)));
}

/* By timestamp: a walk of reads on the owner's ring, into one of its read
 * buffers (a lookup without one waits for the next freed: part_rbuf_wait). */
static void lo_time_start(struct shard *sh, struct lo_item *it)
{
	if (it->part->deleted || !it->part->pl) {
		it->pr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		it->pr->Offset = -1;
		lo_answered(sh, it);
		return;
	}
	uint8_t *buf = part_rbuf_take(sh);

	if (!buf) {
		it->wait.ready = lo_buf_ready;
		part_rbuf_wait(sh, &it->wait);
		return;
	}
	it->q = (struct plog_time){ .ts = it->ts, .buf = buf, .buf_cap = SHARD_RBUF_SIZE, .done = lo_time_done,
				    .arg = it };
	if (plog_find_time(it->part->pl, &it->q) == 0)
		return;                     /* a disk read in flight */
	lo_time_finish(sh, it);
}

static void lo_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct lo_item *it = m->p[0];
	struct plog *pl = it->part->pl;
	int err;

	it->pr->Timestamp = -1;
	if (it->part->deleted) {
		it->pr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		it->pr->Offset = -1;
	} else if ((err = part_epoch_check(it->current_epoch, pl->leader_epoch)) != 0) {
		it->pr->ErrorCode = part_err_to_kafka(err);   /* KIP-320 */
		it->pr->Offset = -1;
	} else if (it->ts == -1) {
		/* read_committed sees the log end at the last stable offset */
		it->pr->Offset = it->isolation == 1 ? part_lso(it->part) : pl->high_watermark;
		it->pr->LeaderEpoch = pl->leader_epoch;        /* v4+, as Kafka answers the latest */
	} else if (it->ts == -2) {
		it->pr->Offset = pl->log_start;
		it->pr->LeaderEpoch = plog_epoch_for_offset(pl, pl->log_start);
	} else {
		lo_time_start(sh, it);
		return;
	}
	lo_answered(sh, it);
}

static int lo_finish(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_list_offsets(struct kafka_ctx *ctx)
{
	struct kafka_list_offsets_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_list_offsets_response *r = ALLOC(ctx, struct kafka_list_offsets_response, 1);

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_list_offsets_response_init(r);
	r->Topics.count = q->Topics.count < 0 ? 0 : q->Topics.count;
	r->Topics.items = ALLOC(ctx, struct kafka_list_offsets_response_list_offsets_topic_response, r->Topics.count);
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	ctx->resp = r;
	ctx->resume = lo_finish;
	ctx->pending = 1;
	for (int i = 0; i < r->Topics.count; i++) {
		struct kafka_list_offsets_request_list_offsets_topic *qt = &q->Topics.items[i];
		struct kafka_list_offsets_response_list_offsets_topic_response *rt = &r->Topics.items[i];
		/* the authorizer: DESCRIBE on the topic, else every partition
		 * TOPIC_AUTHORIZATION_FAILED (Kafka's, before existence) */
		int allowed = authz_str(ctx, ACL_DESCRIBE, ACL_RES_TOPIC, qt->Name);
		const struct md_topic *t = allowed && qt->Name.len > 0 ? md_find(md, qt->Name.ptr, qt->Name.len) : NULL;
		int np = qt->Partitions.count < 0 ? 0 : qt->Partitions.count;

		rt->Name = qt->Name;
		rt->Partitions.count = np;
		rt->Partitions.items = ALLOC(ctx, struct kafka_list_offsets_response_list_offsets_partition_response, np);
		if (!rt->Partitions.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++) {
			struct kafka_list_offsets_request_list_offsets_partition *qp = &qt->Partitions.items[j];
			struct kafka_list_offsets_response_list_offsets_partition_response *pr = &rt->Partitions.items[j];
			const struct md_partition *mp;
			int16_t led = md_part_led(t, qp->PartitionIndex, ctx->sh->b->set.node_id, &mp);
			struct lo_item *it;

			pr->PartitionIndex = qp->PartitionIndex;
			pr->ErrorCode = 0;
			pr->Timestamp = -1;
			pr->Offset = -1;
			pr->LeaderEpoch = -1;
			if (!allowed || !mp) {
				pr->ErrorCode = allowed ? led : KERR_TOPIC_AUTHORIZATION_FAILED;
				continue;
			}
			it = ALLOC(ctx, struct lo_item, 1);
			if (!it) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			*it = (struct lo_item){ .pr = pr, .part = md_part_owner(mp), .ts = qp->Timestamp, .ctx = ctx,
						 .isolation = q->IsolationLevel,
						 .current_epoch = qp->CurrentLeaderEpoch };   /* -1 before v4 */
			ctx->pending++;
			struct shard_msg m = { .fn = lo_on_owner, .p = { it } };
			shard_send(sh, mp->owner_shard, &m);
		}
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}

/* ---- FindCoordinator -------------------------------------------------- */

/* The coordinator of a group or transactional id is the leader of its
 * partition of the internal topic (cluster_view_coordinator), the same
 * answer on every node. (librdkafka also reads FindCoordinator v0 as the
 * sign of a broker that takes LZ4.) */
int kafka_handle_find_coordinator(struct kafka_ctx *ctx)
{
	struct kafka_find_coordinator_request *q = ctx->req.body;
	struct kafka_find_coordinator_response *r = ALLOC(ctx, struct kafka_find_coordinator_response, 1);
	struct broker *b = ctx->sh->b;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_find_coordinator_response_init(r);
	if (q->KeyType != 0 && q->KeyType != 1) {
		r->ErrorCode = KERR_INVALID_REQUEST;
		r->ErrorMessage = (struct kafka_str){ "key type must be 0 (group) or 1 (transaction)", 45 };
		r->NodeId = -1;
		r->Host = (struct kafka_str){ "", 0 };
		r->Port = -1;
	} else {
		struct cluster_node c;
		/* the authorizer: DESCRIBE on the group or the transactional id */
		int16_t deny = authz_str(ctx, ACL_DESCRIBE, q->KeyType ? ACL_RES_TRANSACTIONAL_ID : ACL_RES_GROUP, q->Key)
				       ? 0 : q->KeyType ? KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
						       : KERR_GROUP_AUTHORIZATION_FAILED;
		int16_t err = deny ? deny : cluster_view_coordinator(b, ctx->c->listener, broker_md(b), (int8_t)q->KeyType, q->Key.ptr,
						       q->Key.len > 0 ? (size_t)q->Key.len : 0, &c);

		r->ErrorMessage = (struct kafka_str){ NULL, -1 };
		if (err) {
			r->ErrorCode = err;
			r->NodeId = -1;
			r->Host = (struct kafka_str){ "", 0 };
			r->Port = -1;
		} else {
			r->NodeId = c.id;
			r->Host = c.host;
			r->Port = c.port;
		}
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}
