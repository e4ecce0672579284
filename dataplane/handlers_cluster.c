/* dataplane/handlers_cluster.c — DescribeCluster (KIP-700; v1's
 * EndpointType, KIP-919): the cluster id, the controller and the brokers,
 * as Metadata gives them (dataplane/cluster_view.h). This listener is a
 * broker's: it describes the brokers (EndpointType 1) and refuses the rest
 * as Kafka's broker listener does.
 *
 * @thread shard (any shard answers; nothing is asked of another thread).
 */
#include <limits.h>
#include <stdio.h>

#include "dataplane/authz.h"
#include "dataplane/cluster_view.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

/* DescribeCluster's EndpointType (org.apache.kafka.clients.admin.EndpointType) */
enum { ENDPOINT_BROKER = 1, ENDPOINT_CONTROLLER = 2 };

#define MISMATCHED_MSG "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"

/* A request for another endpoint type: Kafka's error and message, and
 * nothing else (the cluster id empty, the controller -1, no brokers). v0
 * cannot ask (its EndpointType is the default, 1). 0, or -ENOMEM. */
static int refuse_endpoint(struct kafka_ctx *ctx, struct kafka_describe_cluster_response *r, int8_t type)
{
	char *msg;

	if (type == ENDPOINT_CONTROLLER) {
		r->ErrorCode = KERR_MISMATCHED_ENDPOINT_TYPE;
		r->ErrorMessage = (struct kafka_str){ MISMATCHED_MSG, (int32_t)sizeof(MISMATCHED_MSG) - 1 };
		return 0;
	}
	msg = ALLOC(ctx, char, 48);
	if (!msg)
		return -ENOMEM;
	r->ErrorCode = KERR_UNSUPPORTED_ENDPOINT_TYPE;
	r->ErrorMessage = (struct kafka_str){ msg, snprintf(msg, 48, "Unsupported endpoint type %d", type) };
	return 0;
}

int kafka_handle_describe_cluster(struct kafka_ctx *ctx)
{
	struct kafka_describe_cluster_request *q = ctx->req.body;
	struct kafka_describe_cluster_response *r = ALLOC(ctx, struct kafka_describe_cluster_response, 1);
	struct broker *b = ctx->sh->b;
	const struct md_snapshot *md = broker_md(b);
	int cap = 1 + (md ? md->nbrokers : 0), nb;
	struct kafka_describe_cluster_response_describe_cluster_broker *br =
		ALLOC(ctx, struct kafka_describe_cluster_response_describe_cluster_broker, cap);
	struct cluster_node *nodes = ALLOC(ctx, struct cluster_node, cap);

	if (!r || !br || !nodes) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_cluster_response_init(r);
	ctx->resp = r;
	if (q->EndpointType != ENDPOINT_BROKER) {
		if (refuse_endpoint(ctx, r, q->EndpointType) < 0) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		kafka_ctx_respond(ctx);
		return 0;
	}
	nb = cluster_view_brokers(b, ctx->c->listener, md, nodes, cap);
	for (int i = 0; i < nb; i++) {
		br[i].BrokerId = nodes[i].id;
		br[i].Host = nodes[i].host;
		br[i].Port = nodes[i].port;
		br[i].Rack = nodes[i].rack;
	}
	r->Brokers.items = br;
	r->Brokers.count = nb;
	r->EndpointType = ENDPOINT_BROKER;
	r->ClusterId = cluster_view_id(b);
	r->ControllerId = cluster_view_controller(b, md);
	/* no check (Kafka's broker answers anyone); the operations allowed
	 * when asked, none without DESCRIBE on the cluster */
	r->ClusterAuthorizedOperations = !q->IncludeClusterAuthorizedOperations ? INT_MIN
					 : !authz_cluster(ctx, ACL_DESCRIBE) ? 0
					 : authz_ops(ctx, ACL_RES_CLUSTER, ACL_CLUSTER_STR, ACL_CLUSTER_OPS);
	kafka_ctx_respond(ctx);
	return 0;
}
