/* dataplane/handlers.h — what the Kafka request handlers
 * (dataplane/handlers_*.c) offer the rest of the shard: the map of a
 * partition's produce outcome to Kafka's codes, the wake of long-polls
 * when new data arrives, the release of a fetch's data holds, and the
 * topic auto-creation one handler asks of another.
 *
 * Thread: the shard (@thread shard): each runs on the shard named below,
 * directly or as a ring message ({fn, arg}, STYLE 15).
 * Owns: nothing of its own; the request (struct kafka_ctx) stays its
 * connection's shard's.
 * Errors: err arguments are -errno or a partition's enum part_err (mapped
 * to Kafka codes here, at the handler edge: part_err_to_kafka); the
 * functions return nothing.
 */
#ifndef SLUICE_HANDLERS_H
#define SLUICE_HANDLERS_H

#include <stdint.h>

struct data_hold;
struct kafka_ctx;
struct kafka_str;
struct shard;
struct shard_msg;

/* @thread any: the Kafka code for a partition's produce outcome: 0, an
 * enum part_err (positive) or -errno (kafka_append_error). The one map at
 * the edge, for Produce and the native PRODUCE. */
int16_t part_err_to_kafka(int err);

/* @thread shard (the requesting one): a partition a long-polling Fetch
 * watches has new data (or is gone): wake the shard's parked requests. */
void fetch_wake_msg(void *self, struct shard_msg *m);

/* @thread shard: give back one data hold of a fetch response (a tail
 * chunk or a read buffer, on its owner shard). */
void fetch_release_hold(struct shard *sh, struct data_hold *h);

/* @thread shard: Metadata named topics that do not exist: ask the control
 * thread to create them (auto.create.topics.enable); the request resumes
 * (ctx->resume, set by the caller) when it has (dataplane/handlers_admin.c). */
void ctl_request_auto_create(struct kafka_ctx *ctx, struct kafka_str *names, int n);

#endif
