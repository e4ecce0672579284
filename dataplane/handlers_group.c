/* dataplane/handlers_group.c — the group and transaction APIs: decoded on the shard, carried
 * out by the group or transaction coordinator on the control thread (reached
 * through coord_ops, dataplane/coord.h),
 * encoded back on the shard. FindCoordinator is in handlers_data.c: on one
 * node this broker coordinates every group and transaction.
 * @thread shard */
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"

int kafka_handle_offset_commit(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_offset_fetch(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_join_group(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_heartbeat(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_leave_group(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_sync_group(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_describe_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_list_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_delete_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_offset_delete(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_txn_offset_commit(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }

/* the transaction APIs: carried out by the transaction coordinator
 * (InitProducerId, which may need no coordinator, is in handlers_admin.c) */
int kafka_handle_add_partitions_to_txn(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_txn(ctx); }
int kafka_handle_add_offsets_to_txn(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_txn(ctx); }
int kafka_handle_end_txn(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_txn(ctx); }
