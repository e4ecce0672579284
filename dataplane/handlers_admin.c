/* dataplane/handlers_admin.c — admin APIs: decoded on the shard, carried
 * out by the control thread (control/ctl.h), answered from the shard.
 * @thread shard */
#include <stdio.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"


static int submit(struct kafka_ctx *ctx, struct ctl_req *req, int (*resume)(struct kafka_ctx *))
{
	ctx->state = req;
	ctx->pending = 1;
	ctx->resume = resume;
	ctx->sh->b->coord->submit_admin(ctx, req);
	return 0;
}

/* ---- CreateTopics ----------------------------------------------------- */

static struct kafka_str msg_str(const char *m)
{
	return m[0] ? (struct kafka_str){ m, (int32_t)strlen(m) } : (struct kafka_str){ NULL, -1 };
}

static int create_topics_done(struct kafka_ctx *ctx)
{
	struct ctl_req *req = ctx->state;
	struct kafka_create_topics_response *r = ALLOC(ctx, struct kafka_create_topics_response, 1);

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_create_topics_response_init(r);
	r->Topics.items = ALLOC(ctx, struct kafka_create_topics_response_creatable_topic_result, req->n);
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Topics.count = req->n;
	for (int i = 0; i < req->n; i++) {
		r->Topics.items[i].Name = req->topics[i].name;
		r->Topics.items[i].ErrorCode = req->topics[i].error;
		r->Topics.items[i].ErrorMessage = msg_str(req->topics[i].message);
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

/* An explicit assignment as one array, partition by partition: each
 * partition index 0..n-1 once, every partition with as many replicas (else
 * ct->preset INVALID_REPLICA_ASSIGNMENT, Kafka's messages). -1 when the
 * arena is full (the request aborted). */
static int assign_flatten(struct kafka_ctx *ctx, struct ctl_topic *ct,
			  const struct kafka_create_topics_request_creatable_replica_assignment *a, int32_t n)
{
	int32_t rf = a[0].BrokerIds.count, *ids;

	if (rf < 1) {
		ct->preset = KERR_INVALID_REPLICA_ASSIGNMENT;
		snprintf(ct->message, sizeof(ct->message),
			 "The manual partition assignment includes an empty replica list.");
		return 0;
	}
	if (!(ids = ALLOC(ctx, int32_t, (size_t)n * (size_t)rf))) {
		kafka_ctx_abort(ctx);
		return -1;
	}
	for (int32_t i = 0; i < n; i++)
		ids[(size_t)i * rf] = -1;
	for (int32_t i = 0; i < n; i++) {
		int32_t p = a[i].PartitionIndex;

		if (a[i].BrokerIds.count != rf) {
			ct->preset = KERR_INVALID_REPLICA_ASSIGNMENT;
			snprintf(ct->message, sizeof(ct->message),
				 "All partitions in the manual partition assignment must have the same number of "
				 "replicas.");
			return 0;
		}
		if (p < 0 || p >= n || ids[(size_t)p * rf] != -1) {
			ct->preset = KERR_INVALID_REPLICA_ASSIGNMENT;
			snprintf(ct->message, sizeof(ct->message),
				 "partitions should be a consecutive 0-based integer sequence");
			return 0;
		}
		memcpy(&ids[(size_t)p * rf], a[i].BrokerIds.items, (size_t)rf * sizeof(*ids));
	}
	ct->assign = ids;
	ct->nassign = n;
	ct->assign_rf = rf;
	return 0;
}

int kafka_handle_create_topics(struct kafka_ctx *ctx)
{
	struct kafka_create_topics_request *q = ctx->req.body;
	int n = q->Topics.count < 0 ? 0 : q->Topics.count;
	struct ctl_req *req = ctl_req_new(ctx, CTL_CREATE, n);

	if (!req) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	req->validate_only = q->validateOnly;
	for (int i = 0; i < n; i++) {
		struct kafka_create_topics_request_creatable_topic *t = &q->Topics.items[i];
		struct ctl_topic *ct = &req->topics[i];
		int nc = t->Configs.count < 0 ? 0 : t->Configs.count;

		ct->name = t->Name;
		ct->partitions = t->NumPartitions;
		ct->replication = t->ReplicationFactor;
		if (t->Assignments.count > 0) {
			/* manual assignment: partitions = its size (the controller
			 * checks its brokers) */
			if (t->NumPartitions != -1 || t->ReplicationFactor != -1) {
				ct->preset = KERR_INVALID_REQUEST;
				snprintf(ct->message, sizeof(ct->message),
					 "Both numPartitions or replicationFactor and replicasAssignments were set. "
					 "Both cannot be used at the same time.");
			} else if (assign_flatten(ctx, ct, t->Assignments.items, t->Assignments.count) < 0) {
				return 0;
			}
			ct->partitions = t->Assignments.count;
			ct->replication = (int16_t)ct->assign_rf;
		}
		/* the authorizer: CREATE on the cluster or on the topic */
		if (!authz_cluster(ctx, ACL_CREATE) &&
		    !authz_str(ctx, ACL_CREATE, ACL_RES_TOPIC, t->Name)) {
			ct->preset = KERR_TOPIC_AUTHORIZATION_FAILED;
			snprintf(ct->message, sizeof(ct->message), "Authorization failed.");
		}
		ct->nconfigs = nc;
		ct->keys = ALLOC(ctx, struct kafka_str, nc);
		ct->values = ALLOC(ctx, struct kafka_str, nc);
		if (!ct->keys || !ct->values) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < nc; j++) {
			ct->keys[j] = t->Configs.items[j].Name;
			ct->values[j] = t->Configs.items[j].Value;
		}
	}
	return submit(ctx, req, create_topics_done);
}

/* ---- DeleteTopics ----------------------------------------------------- */

static int delete_topics_done(struct kafka_ctx *ctx)
{
	struct ctl_req *req = ctx->state;
	struct kafka_delete_topics_response *r = ALLOC(ctx, struct kafka_delete_topics_response, 1);

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_delete_topics_response_init(r);
	r->Responses.items = ALLOC(ctx, struct kafka_delete_topics_response_deletable_topic_result, req->n);
	if (!r->Responses.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Responses.count = req->n;
	for (int i = 0; i < req->n; i++) {
		r->Responses.items[i].Name = req->topics[i].name;
		r->Responses.items[i].ErrorCode = req->topics[i].error;
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_delete_topics(struct kafka_ctx *ctx)
{
	struct kafka_delete_topics_request *q = ctx->req.body;
	int n = q->TopicNames.count < 0 ? 0 : q->TopicNames.count;
	struct ctl_req *req = ctl_req_new(ctx, CTL_DELETE, n);

	if (!req) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		struct kafka_str name = q->TopicNames.items[i];

		req->topics[i].name = name;
		if (!authz_str(ctx, ACL_DELETE, ACL_RES_TOPIC, name))
			req->topics[i].preset = KERR_TOPIC_AUTHORIZATION_FAILED;   /* the authorizer */
	}
	return submit(ctx, req, delete_topics_done);
}

/* ---- CreatePartitions ------------------------------------------------- */

static int create_partitions_done(struct kafka_ctx *ctx)
{
	struct ctl_req *req = ctx->state;
	struct kafka_create_partitions_response *r = ALLOC(ctx, struct kafka_create_partitions_response, 1);

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_create_partitions_response_init(r);
	r->Results.items = ALLOC(ctx, struct kafka_create_partitions_response_create_partitions_topic_result, req->n);
	if (!r->Results.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Results.count = req->n;
	for (int i = 0; i < req->n; i++) {
		r->Results.items[i].Name = req->topics[i].name;
		r->Results.items[i].ErrorCode = req->topics[i].error;
		r->Results.items[i].ErrorMessage = msg_str(req->topics[i].message);
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_create_partitions(struct kafka_ctx *ctx)
{
	struct kafka_create_partitions_request *q = ctx->req.body;
	int n = q->Topics.count < 0 ? 0 : q->Topics.count;
	struct ctl_req *req = ctl_req_new(ctx, CTL_CREATE_PARTITIONS, n);

	if (!req) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	req->validate_only = q->ValidateOnly;
	for (int i = 0; i < n; i++) {
		req->topics[i].name = q->Topics.items[i].Name;
		req->topics[i].partitions = q->Topics.items[i].Count;
		if (!authz_str(ctx, ACL_ALTER, ACL_RES_TOPIC, q->Topics.items[i].Name))
			req->topics[i].preset = KERR_TOPIC_AUTHORIZATION_FAILED;   /* the authorizer */
	}
	return submit(ctx, req, create_partitions_done);
}

/* ---- AlterConfigs (topics, broker defaults) -------------------------------------------- */

#define RESOURCE_TOPIC 2
#define RESOURCE_BROKER 4

static int alter_configs_done(struct kafka_ctx *ctx)
{
	struct kafka_alter_configs_request *q = ctx->req.body;
	struct ctl_req *req = ctx->state;
	struct kafka_alter_configs_response *r = ALLOC(ctx, struct kafka_alter_configs_response, 1);
	int n = q->Resources.count < 0 ? 0 : q->Resources.count;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_alter_configs_response_init(r);
	r->Responses.items = ALLOC(ctx, struct kafka_alter_configs_response_alter_configs_resource_response, n);
	if (!r->Responses.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Responses.count = n;
	for (int i = 0; i < n; i++) {
		struct kafka_alter_configs_response_alter_configs_resource_response *rr = &r->Responses.items[i];

		rr->ResourceType = q->Resources.items[i].ResourceType;
		rr->ResourceName = q->Resources.items[i].ResourceName;
		rr->ErrorCode = req->topics[i].error;
		rr->ErrorMessage = msg_str(req->topics[i].message);
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

/* One resource of an (Incremental)AlterConfigs request into ct: its name
 * and kind, and room for its nc configs (ops too when with_ops). 1: fill
 * them in; 0: the resource is refused already (ct->preset); -1: out of
 * memory (the request aborted). */
static int config_resource(struct kafka_ctx *ctx, struct ctl_topic *ct, struct kafka_str name, int8_t type,
			   int replace, int nc, int with_ops)
{
	ct->name = name;
	ct->replace = replace;
	ct->broker = type == RESOURCE_BROKER;
	if (type != RESOURCE_TOPIC && !ct->broker) {
		ct->preset = KERR_INVALID_REQUEST;
		snprintf(ct->message, sizeof(ct->message), "only TOPIC (2) and BROKER (4) resources have configs");
		return 0;
	}
	if ((ct->preset = authz_config(ctx, ACL_ALTER_CONFIGS, type, name)))
		return 0;   /* the authorizer */
	ct->nconfigs = nc;
	ct->keys = ALLOC(ctx, struct kafka_str, nc);
	ct->values = ALLOC(ctx, struct kafka_str, nc);
	ct->ops = with_ops ? ALLOC(ctx, int8_t, nc) : NULL;
	if (!ct->keys || !ct->values || (with_ops && !ct->ops)) {
		kafka_ctx_abort(ctx);
		return -1;
	}
	return 1;
}

int kafka_handle_alter_configs(struct kafka_ctx *ctx)
{
	struct kafka_alter_configs_request *q = ctx->req.body;
	int n = q->Resources.count < 0 ? 0 : q->Resources.count;
	struct ctl_req *req = ctl_req_new(ctx, CTL_ALTER_CONFIGS, n);

	if (!req) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	req->validate_only = q->ValidateOnly;
	for (int i = 0; i < n; i++) {
		struct kafka_alter_configs_request_alter_configs_resource *res = &q->Resources.items[i];
		struct ctl_topic *ct = &req->topics[i];
		int nc = res->Configs.count < 0 ? 0 : res->Configs.count;
		int rc = config_resource(ctx, ct, res->ResourceName, res->ResourceType, 1, nc, 0);

		if (rc < 0)
			return 0;
		for (int j = 0; rc && j < nc; j++) {
			ct->keys[j] = res->Configs.items[j].Name;
			ct->values[j] = res->Configs.items[j].Value;
		}
	}
	return submit(ctx, req, alter_configs_done);
}

/* ---- IncrementalAlterConfigs (topics, broker defaults) --------------------------------- */

static int incremental_alter_configs_done(struct kafka_ctx *ctx)
{
	struct kafka_incremental_alter_configs_request *q = ctx->req.body;
	struct ctl_req *req = ctx->state;
	struct kafka_incremental_alter_configs_response *r =
		ALLOC(ctx, struct kafka_incremental_alter_configs_response, 1);
	int n = q->Resources.count < 0 ? 0 : q->Resources.count;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_incremental_alter_configs_response_init(r);
	r->Responses.items = ALLOC(ctx, struct kafka_incremental_alter_configs_response_alter_configs_resource_response, n);
	if (!r->Responses.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Responses.count = n;
	for (int i = 0; i < n; i++) {
		r->Responses.items[i].ResourceType = q->Resources.items[i].ResourceType;
		r->Responses.items[i].ResourceName = q->Resources.items[i].ResourceName;
		r->Responses.items[i].ErrorCode = req->topics[i].error;
		r->Responses.items[i].ErrorMessage = msg_str(req->topics[i].message);
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_incremental_alter_configs(struct kafka_ctx *ctx)
{
	struct kafka_incremental_alter_configs_request *q = ctx->req.body;
	int n = q->Resources.count < 0 ? 0 : q->Resources.count;
	struct ctl_req *req = ctl_req_new(ctx, CTL_ALTER_CONFIGS, n);

	if (!req) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	req->validate_only = q->ValidateOnly;
	for (int i = 0; i < n; i++) {
		struct kafka_incremental_alter_configs_request_alter_configs_resource *res = &q->Resources.items[i];
		struct ctl_topic *ct = &req->topics[i];
		int nc = res->Configs.count < 0 ? 0 : res->Configs.count;
		int rc = config_resource(ctx, ct, res->ResourceName, res->ResourceType, 0, nc, 1);

		if (rc < 0)
			return 0;
		for (int j = 0; rc && j < nc; j++) {
			ct->keys[j] = res->Configs.items[j].Name;
			ct->values[j] = res->Configs.items[j].Value;
			ct->ops[j] = res->Configs.items[j].ConfigOperation;
		}
	}
	return submit(ctx, req, incremental_alter_configs_done);
}

/* ---- InitProducerId (idempotent producers) ---------------------------- */

struct pid_state {
	struct kafka_init_producer_id_response *r;
	int64_t pid;
};

static int init_producer_id_resume(struct kafka_ctx *ctx)
{
	struct pid_state *ps = ctx->state;

	if (ps->pid < 0) {
		ps->r->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;
		ps->r->ProducerId = -1;
		ps->r->ProducerEpoch = -1;
	} else {
		ps->r->ProducerId = ps->pid;
		ps->r->ProducerEpoch = 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_init_producer_id(struct kafka_ctx *ctx)
{
	struct kafka_init_producer_id_request *q = ctx->req.body;
	struct kafka_init_producer_id_response *r;
	struct pid_state *ps;

	if (q->TransactionalId.len > 0 &&
	    !authz_allow(ctx, ACL_WRITE, ACL_RES_TRANSACTIONAL_ID, q->TransactionalId.ptr, (size_t)q->TransactionalId.len)) {
		ctx->only_error = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;   /* the authorizer */
		kafka_ctx_respond(ctx);
		return 0;
	}
	if (q->TransactionalId.len > 0)
		return ctx->sh->b->coord->submit_txn(ctx);   /* the transaction coordinator's */
	/* an idempotent producer (Kafka 2.8+, KIP-679): IDEMPOTENT_WRITE on
	 * the cluster, or WRITE on some topic */
	if (q->TransactionalId.len < 0 && !authz_cluster(ctx, ACL_IDEMPOTENT_WRITE) && !authz_write_any_topic(ctx)) {
		ctx->only_error = KERR_CLUSTER_AUTHORIZATION_FAILED;
		kafka_ctx_respond(ctx);
		return 0;
	}
	r = ALLOC(ctx, struct kafka_init_producer_id_response, 1);
	ps = ALLOC(ctx, struct pid_state, 1);
	if (!r || !ps) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_init_producer_id_response_init(r);
	ctx->resp = r;
	if (q->TransactionalId.len == 0) {
		/* Kafka's rule: an empty transactional id is neither null nor an id */
		r->ErrorCode = KERR_INVALID_REQUEST;
		r->ProducerId = -1;
		r->ProducerEpoch = -1;
		kafka_ctx_respond(ctx);
		return 0;
	}
	ps->r = r;
	ps->pid = -1;
	ctx->state = ps;
	ctx->pending = 1;
	ctx->resume = init_producer_id_resume;
	ctx->sh->b->coord->submit_producer_id(ctx, &ps->pid);
	return 0;
}
