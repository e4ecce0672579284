/* dataplane/handlers_config.c — DescribeConfigs (answered on the shard
 * from the snapshot and the broker config it carries, read-only) and DeleteRecords
 * (on each partition's owner shard). @thread shard */
#include <stdio.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/topic_name.h"


/* Kafka's ConfigSource values. */
enum { CFG_SRC_TOPIC = 1, CFG_SRC_DYNAMIC_BROKER = 2, CFG_SRC_DYNAMIC_DEFAULT_BROKER = 3, CFG_SRC_STATIC_BROKER = 4,
       CFG_SRC_DEFAULT = 5 };

/* A broker key's source (config_source: "default", "dynamic-default",
 * "dynamic-broker" as control/ctl.c sets them at run time, else the file
 * or --set) as Kafka's ConfigSource. */
static int8_t source_of(const char *source)
{
	if (!source || !strcmp(source, "default"))
		return CFG_SRC_DEFAULT;
	if (!strcmp(source, "dynamic-default"))
		return CFG_SRC_DYNAMIC_DEFAULT_BROKER;
	if (!strcmp(source, "dynamic-broker"))
		return CFG_SRC_DYNAMIC_BROKER;
	return CFG_SRC_STATIC_BROKER;
}

static struct kafka_str str(const char *s)
{
	return s ? (struct kafka_str){ s, (int32_t)strlen(s) } : (struct kafka_str){ NULL, -1 };
}

static int wanted(const struct kafka_describe_configs_request_describe_configs_resource *res, const char *key)
{
	if (res->ConfigurationKeys.count < 0)
		return 1;
	for (int i = 0; i < res->ConfigurationKeys.count; i++)
		if (kafka_str_eq(res->ConfigurationKeys.items[i], key))
			return 1;
	return 0;
}

struct broker_walk {
	struct kafka_ctx *ctx;
	const struct kafka_describe_configs_request_describe_configs_resource *res;
	struct kafka_describe_configs_response_describe_configs_resource_result *items;
	int n, cap;
};

static void broker_count(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	(void)key;
	(void)value;
	(void)source;
	(void)is_default;
	++*(int *)arg;
}

static void broker_entry(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	struct broker_walk *w = arg;
	struct kafka_describe_configs_response_describe_configs_resource_result *e;

	if (!wanted(w->res, key) || w->n >= w->cap)
		return;
	e = &w->items[w->n++];
	memset(e, 0, sizeof(*e));
	e->Name = str(key);
	e->Value = str(value);
	e->IsSensitive = value == NULL;   /* a password or key (null, as Kafka sends it) */
	/* the topic defaults and a listener's stores change at run time
	 * (AlterConfigs on the broker resource); the rest is read at start */
	e->ReadOnly = !w->ctx->sh->b->coord->key_dynamic(key);
	e->IsDefault = is_default;
	e->ConfigSource = is_default ? CFG_SRC_DEFAULT : source_of(source);
	e->Synonyms.count = 0;
}

int kafka_handle_describe_configs(struct kafka_ctx *ctx)
{
	struct kafka_describe_configs_request *q = ctx->req.body;
	struct broker *b = ctx->sh->b;
	struct md_snapshot *md = broker_md(b);
	const struct config *cfg = md && md->cfg ? md->cfg : b->cfg;   /* with the run-time changes */
	struct kafka_describe_configs_response *r = ALLOC(ctx, struct kafka_describe_configs_response, 1);
	int n = q->Resources.count < 0 ? 0 : q->Resources.count;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_configs_response_init(r);
	r->Results.items = ALLOC(ctx, struct kafka_describe_configs_response_describe_configs_result, n);
	if (!r->Results.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Results.count = n;
	for (int i = 0; i < n; i++) {
		const struct kafka_describe_configs_request_describe_configs_resource *res = &q->Resources.items[i];
		struct kafka_describe_configs_response_describe_configs_result *rr = &r->Results.items[i];

		memset(rr, 0, sizeof(*rr));
		rr->ResourceType = res->ResourceType;
		rr->ResourceName = res->ResourceName;
		rr->ErrorMessage = (struct kafka_str){ NULL, -1 };
		if ((rr->ErrorCode = authz_config(ctx, ACL_DESCRIBE_CONFIGS, res->ResourceType, res->ResourceName)))
			continue;   /* the authorizer's refusal */
		if (res->ResourceType == 2) {
			const struct md_topic *t = res->ResourceName.len > 0
				? md_find(md, res->ResourceName.ptr, res->ResourceName.len) : NULL;
			int nk = 0;

			if (!t) {
				rr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			while (ctx->sh->b->coord->topic_key_at(nk))
				nk++;
			rr->Configs.items = ALLOC(ctx, struct kafka_describe_configs_response_describe_configs_resource_result,
						  nk + t->nconfigs);
			if (!rr->Configs.items) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			rr->Configs.count = 0;
			for (int k = 0; k < nk; k++) {
				const char *key = ctx->sh->b->coord->topic_key_at(k), *val = NULL;
				struct kafka_describe_configs_response_describe_configs_resource_result *e;

				if (!wanted(res, key))
					continue;
				for (int j = 0; j < t->nconfigs; j++)
					if (!strcmp(t->config_keys[j], key))
						val = t->config_values[j];
				e = &rr->Configs.items[rr->Configs.count++];
				memset(e, 0, sizeof(*e));
				e->Name = str(key);
				if (val) {
					e->Value = str(val);
					e->ConfigSource = CFG_SRC_TOPIC;
				} else {
					const char *bk = ctx->sh->b->coord->topic_broker_key(key);

					e->Value = str(ctx->sh->b->coord->topic_default(cfg, key));
					e->IsDefault = true;
					e->ConfigSource = bk ? source_of(ctx->sh->b->coord->key_source(cfg, bk)) : CFG_SRC_DEFAULT;
				}
				e->Synonyms.count = 0;
			}
			/* keys accepted and ignored (message.format.version...):
			 * shown as set */
			for (int j = 0; j < t->nconfigs; j++) {
				struct kafka_describe_configs_response_describe_configs_resource_result *e;

				if (ctx->sh->b->coord->topic_broker_key(t->config_keys[j]) || !wanted(res, t->config_keys[j]))
					continue;
				e = &rr->Configs.items[rr->Configs.count++];
				memset(e, 0, sizeof(*e));
				e->Name = str(t->config_keys[j]);
				e->Value = str(t->config_values[j]);
				e->ConfigSource = CFG_SRC_TOPIC;
				e->Synonyms.count = 0;
			}
		} else if (res->ResourceType == 4) {
			struct broker_walk w = { ctx, res, NULL, 0, 0 };

			ctx->sh->b->coord->foreach_key(cfg, broker_count, &w.cap);   /* the listener keys too */

			w.items = ALLOC(ctx, struct kafka_describe_configs_response_describe_configs_resource_result, w.cap);
			if (!w.items) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			ctx->sh->b->coord->foreach_key(cfg, broker_entry, &w);
			rr->Configs.items = w.items;
			rr->Configs.count = w.n;
		} else {
			rr->ErrorCode = KERR_INVALID_REQUEST;
			rr->ErrorMessage = str("only TOPIC (2) and BROKER (4) resources have configs");
		}
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

/* ---- DeleteRecords ---------------------------------------------------- */

struct dr_item {
	struct kafka_delete_records_response_delete_records_partition_result *pr;
	struct part *part;
	int64_t offset;
	struct kafka_ctx *ctx;
	struct plog_delete del;      /* on the owner: the new start being saved */
};

static void dr_done_msg(void *self, struct shard_msg *m)
{
	(void)self;
	kafka_ctx_sub_done(((struct dr_item *)m->p[0])->ctx);
}

/* On the owner: the partition's answer, back to the request. */
static void dr_answer(struct shard *sh, struct dr_item *it, int rc)
{
	it->pr->ErrorCode = rc == 0 ? 0 : rc == -ERANGE ? KERR_OFFSET_OUT_OF_RANGE
			    : rc == -ENOENT ? KERR_UNKNOWN_TOPIC_OR_PARTITION : KERR_KAFKA_STORAGE_ERROR;
	it->pr->LowWatermark = it->part->pl ? it->part->pl->log_start : -1;
	if (it->ctx->sh == sh) {
		kafka_ctx_sub_done(it->ctx);
	} else {
		struct shard_msg r = { .fn = dr_done_msg, .p = { it } };

		shard_send(sh, it->ctx->sh->id, &r);
	}
}

/* On the owner: the new log start is durable (or its save failed). */
static void dr_saved(struct plog_delete *d)
{
	struct dr_item *it = d->arg;

	dr_answer(it->part->sh, it, d->err);
}

static void dr_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct dr_item *it = m->p[0];
	int rc = -ENOENT;

	if (!it->part->deleted) {
		it->del = (struct plog_delete){ .offset = it->offset, .done = dr_saved, .arg = it };
		if (plog_delete_records(it->part->pl, &it->del) == 0)
			return;          /* saved on the ring: dr_saved answers */
		rc = it->del.err;
	}
	dr_answer(sh, it, rc);
}

static int dr_finish(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_delete_records(struct kafka_ctx *ctx)
{
	struct kafka_delete_records_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_delete_records_response *r = ALLOC(ctx, struct kafka_delete_records_response, 1);
	int n = q->Topics.count < 0 ? 0 : q->Topics.count;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_delete_records_response_init(r);
	r->Topics.items = ALLOC(ctx, struct kafka_delete_records_response_delete_records_topic_result, n);
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Topics.count = n;
	ctx->resp = r;
	ctx->resume = dr_finish;
	ctx->pending = 1;
	for (int i = 0; i < n; i++) {
		struct kafka_delete_records_request_delete_records_topic *qt = &q->Topics.items[i];
		struct kafka_delete_records_response_delete_records_topic_result *rt = &r->Topics.items[i];
		/* the authorizer: DELETE on the topic (Kafka's, before existence) */
		int allowed = authz_str(ctx, ACL_DELETE, ACL_RES_TOPIC, qt->Name);
		const struct md_topic *t = allowed && qt->Name.len > 0 ? md_find(md, qt->Name.ptr, qt->Name.len) : NULL;
		int np = qt->Partitions.count < 0 ? 0 : qt->Partitions.count;

		rt->Name = qt->Name;
		rt->Partitions.count = np;
		rt->Partitions.items = ALLOC(ctx, struct kafka_delete_records_response_delete_records_partition_result, np);
		if (!rt->Partitions.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++) {
			struct kafka_delete_records_response_delete_records_partition_result *pr = &rt->Partitions.items[j];
			int32_t idx = qt->Partitions.items[j].PartitionIndex;
			struct dr_item *it;
			const struct md_partition *mp;
			int16_t led = md_part_led(t, idx, sh->b->set.node_id, &mp);

			pr->PartitionIndex = idx;
			pr->LowWatermark = -1;
			pr->ErrorCode = 0;
			if (!allowed || !mp) {
				/* refused; unknown, or led by another broker */
				pr->ErrorCode = allowed ? led : KERR_TOPIC_AUTHORIZATION_FAILED;
				continue;
			}
			if (t->internal) {
				/* Kafka: records of an internal topic are not deleted */
				pr->ErrorCode = KERR_INVALID_TOPIC_EXCEPTION;
				continue;
			}
			it = ALLOC(ctx, struct dr_item, 1);
			if (!it) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			*it = (struct dr_item){ .pr = pr, .part = md_part_owner(&t->parts[idx]), .offset = qt->Partitions.items[j].Offset, .ctx = ctx };
			ctx->pending++;
			struct shard_msg m = { .fn = dr_on_owner, .p = { it } };
			shard_send(sh, t->parts[idx].owner_shard, &m);
		}
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}
