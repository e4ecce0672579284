/* control/console_api.c — the web console's JSON (see console_api.h).
 * @thread ctl */
#include "control/console_api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "control/config.h"
#include "control/ctl.h"
#include "control/ctl_homes.h"
#include "control/group.h"
#include "control/hw_profile.h"
#include "control/quorum.h"
#include "control/rate_hist.h"
#include "control/textbuf.h"
#include "control/txn.h"
#include "dataplane/broker.h"
#include "dataplane/shard.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define CONSOLE_LAG_SCAN_MS 500

static void str(struct textbuf *t, const char *s)
{
	textbuf_printf(t, "\"");
	textbuf_escaped(t, s);
	textbuf_printf(t, "\"");
}

static void ids(struct textbuf *t, const int32_t *v, int32_t n)
{
	textbuf_printf(t, "[");
	for (int32_t i = 0; i < n; i++)
		textbuf_printf(t, "%s%d", i ? ", " : "", v[i]);
	textbuf_printf(t, "]");
}

static const struct part_pub *pub_of(const struct ctl *ctl, const struct md_topic *tp, int32_t i, int32_t *shard)
{
	const struct ctl_home *h = ctl_part_home(ctl, tp->id, i);

	if (shard)
		*shard = h ? h->shard : -1;
	return h ? h->part_pub : NULL;
}

/* ---- the cluster --------------------------------------------------------- */

struct broker_walk {
	struct textbuf *t;
	int32_t self;
	int n;
};

static void broker_one(int32_t id, const char *host, int32_t port, const char *rack, int fenced, void *arg)
{
	struct broker_walk *w = arg;

	textbuf_printf(w->t, "%s{\"id\": %d, \"host\": ", w->n++ ? ", " : "", id);
	str(w->t, host);
	textbuf_printf(w->t, ", \"port\": %d, \"rack\": ", port);
	str(w->t, rack);
	textbuf_printf(w->t, ", \"fenced\": %s, \"this\": %s}", fenced ? "true" : "false",
		       id == w->self ? "true" : "false");
}

static void log_dirs(const struct config *cfg, struct textbuf *t)
{
	char dirs[4096], *save = NULL;
	int n = 0;

	snprintf(dirs, sizeof(dirs), "%s", config_str(cfg, "log.dirs"));
	textbuf_printf(t, "\"log_dirs\": [");
	for (char *d = strtok_r(dirs, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
		struct statvfs sv;

		while (*d == ' ')
			d++;
		textbuf_printf(t, "%s{\"path\": ", n++ ? ", " : "");
		str(t, d);
		if (statvfs(d, &sv) == 0)
			textbuf_printf(t, ", \"fs_total_bytes\": %llu, \"fs_free_bytes\": %llu}",
				       (unsigned long long)sv.f_blocks * sv.f_frsize,
				       (unsigned long long)sv.f_bavail * sv.f_frsize);
		else
			textbuf_printf(t, ", \"error\": \"%s\"}", strerror(errno));
	}
	textbuf_printf(t, "]");
}

/* the profile's limits in the console's units (bytes, bytes/s), those it has */
static void profile_json(const struct hw_profile *p, const char *path, struct textbuf *t)
{
	static const struct {
		enum hw_key k;
		const char *name;
		double scale;
	} keys[] = {
		{ HW_DISK_WRITE_MBPS, "disk_write_bytes_per_sec", 1e6 },
		{ HW_DISK_READ_MBPS, "disk_read_bytes_per_sec", 1e6 },
		{ HW_DISK_GIB, "disk_bytes", 1073741824.0 },
		{ HW_NIC_GBPS, "nic_bytes_per_sec", 1e9 / 8 },
		{ HW_CORES, "cores", 1 },
		{ HW_MEMORY_GIB, "memory_bytes", 1073741824.0 },
	};

	textbuf_printf(t, ", \"profile\": ");
	if (!p) {
		textbuf_printf(t, "null");
		return;
	}
	textbuf_printf(t, "{\"file\": ");
	str(t, path);
	textbuf_printf(t, ", \"description\": ");
	str(t, p->description);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (p->has[keys[i].k])
			textbuf_printf(t, ", \"%s\": %.0f", keys[i].name, p->v[keys[i].k] * keys[i].scale);
	textbuf_printf(t, "}");
}

void console_cluster_json(struct ctl *ctl, struct broker *b, const struct rate_hist *h, const struct hw_profile *prof,
			  const char *path, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;
	struct quorum_view qv;
	int64_t total = 0, offline = 0, under = 0, under_min = 0, held = 0, failed = 0, size_total = 0;
	int nshards = b->set.nshards < BROKER_MAX_SHARDS ? b->set.nshards : BROKER_MAX_SHARDS;
	int shard_parts[BROKER_MAX_SHARDS] = { 0 };
	int64_t shard_bytes[BROKER_MAX_SHARDS] = { 0 };
	const struct rate_sample *last = h && h->seq ? &h->s[(h->seq - 1) % RATE_HIST_LEN] : NULL;

	textbuf_printf(t, "{\"node_id\": %d, \"cluster_id\": ", b->set.node_id);
	str(t, b->set.cluster_id);
	textbuf_printf(t, ", \"status\": \"%s\"", !ctl_is_ready(ctl) ? "recovering"
						   : LD(b->stopping)  ? "stopping"
								      : "ready");
	memset(&qv, 0, sizeof(qv));
	textbuf_printf(t, ", \"controller\": %d", ctl_quorum_describe(ctl, &qv) == 0 ? qv.leader : -1);
	/* every broker registered in the metadata, fenced ones too; before
	 * any registered (a node starting), the ones the snapshot serves */
	textbuf_printf(t, ", \"brokers\": [");
	{
		struct broker_walk bw = { .t = t, .self = b->set.node_id };

		ctl_brokers_foreach(ctl, broker_one, &bw);
		for (int i = 0; !bw.n && md && i < md->nbrokers; i++)
			broker_one(md->brokers[i].id, md->brokers[i].host, md->brokers[i].port, md->brokers[i].rack, 0, &bw);
	}
	textbuf_printf(t, "]");
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			const struct md_partition *mp = &tp->parts[i];
			int32_t shard;
			const struct part_pub *u = pub_of(ctl, tp, i, &shard);

			if (u && shard >= 0 && shard < nshards) {   /* the partitions this node holds, by shard */
				shard_parts[shard]++;
				shard_bytes[shard] += LD(u->size_bytes);
				size_total += LD(u->size_bytes);
			}

			total++;
			offline += mp->leader < 0;
			under += mp->nisr < mp->nreplicas;
			under_min += mp->nisr < tp->min_insync;
			held += u != NULL;
			failed += u && LD(u->err) && LD(u->err) != -ENOSPC;
		}
	}
	textbuf_printf(t, ", \"topics\": %d, \"partitions\": {\"total\": %lld, \"online\": %lld, \"offline\": %lld, "
		       "\"under_replicated\": %lld, \"under_min_isr\": %lld, \"held_here\": %lld, \"log_failed\": %lld}",
		       md ? md->ntopics : 0, (long long)total, (long long)(total - offline), (long long)offline,
		       (long long)under, (long long)under_min, (long long)held, (long long)failed);
	textbuf_printf(t, ", \"shards\": [");
	for (int i = 0; i < nshards; i++) {
		const struct shard_stats *s = broker_shard_published(b, i).stats;
		int nparts = shard_parts[i];
		int64_t bytes = shard_bytes[i];

		textbuf_printf(t, "%s{\"shard\": %d, \"partitions\": %d, \"size_bytes\": %lld, \"connections\": %llu, "
			       "\"busy\": %.4f, \"produce_bytes\": %llu, \"fetch_bytes\": %llu}", i ? ", " : "", i, nparts,
			       (long long)bytes, (unsigned long long)LD(s->connections_open),
			       last && i < last->nshards ? (double)last->busy[i] : 0.0,
			       (unsigned long long)LD(s->produce_bytes), (unsigned long long)LD(s->fetch_bytes));
	}
	textbuf_printf(t, "], ");
	log_dirs(b->cfg, t);
	textbuf_printf(t, ", \"size_bytes\": %lld", (long long)size_total);
	profile_json(prof, path, t);
	textbuf_printf(t, "}\n");
}

/* ---- topics -------------------------------------------------------------- */

struct topic_sums {
	int64_t size, records, pbytes, fbytes, offline, under;
};

static void topic_sum(const struct ctl *ctl, const struct md_topic *tp, struct topic_sums *s)
{
	memset(s, 0, sizeof(*s));
	for (int32_t i = 0; i < tp->nparts; i++) {
		const struct part_pub *u = pub_of(ctl, tp, i, NULL);

		s->offline += tp->parts[i].leader < 0;
		s->under += tp->parts[i].nisr < tp->parts[i].nreplicas;
		if (!u)
			continue;
		s->size += LD(u->size_bytes);
		s->records += (int64_t)LD(u->produce_records);
		s->pbytes += (int64_t)LD(u->produce_bytes);
		s->fbytes += (int64_t)LD(u->fetch_bytes);
	}
}

/* cleanup.policy as set on the topic, else as its storage config says */
static const char *cleanup_policy(const struct md_topic *tp)
{
	for (int i = 0; i < tp->nconfigs; i++)
		if (!strcmp(tp->config_keys[i], "cleanup.policy") && tp->config_values[i])
			return tp->config_values[i];
	return tp->cfg.compact ? "compact" : "delete";
}

static void topic_head(const struct md_topic *tp, struct textbuf *t)
{
	textbuf_printf(t, "\"name\": ");
	str(t, tp->name);
	textbuf_printf(t, ", \"partitions\": %d, \"replication_factor\": %d, \"internal\": %s, \"retention_ms\": %lld, "
		       "\"retention_bytes\": %lld, \"cleanup_policy\": ", tp->nparts,
		       tp->nparts ? tp->parts[0].nreplicas : 0, tp->internal ? "true" : "false",
		       (long long)tp->cfg.retention_ms, (long long)tp->cfg.retention_bytes);
	str(t, cleanup_policy(tp));
}

void console_topics_json(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;

	textbuf_printf(t, "{\"topics\": [");
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];
		struct topic_sums s;

		topic_sum(ctl, tp, &s);
		textbuf_printf(t, "%s\n  {", k ? "," : "");
		topic_head(tp, t);
		textbuf_printf(t, ", \"size_bytes\": %lld, \"produce_records\": %lld, \"produce_bytes\": %lld, "
			       "\"fetch_bytes\": %lld, \"offline\": %lld, \"under_replicated\": %lld}",
			       (long long)s.size, (long long)s.records, (long long)s.pbytes, (long long)s.fbytes,
			       (long long)s.offline, (long long)s.under);
	}
	textbuf_printf(t, "\n]}\n");
}

int console_topic_json(struct ctl *ctl, struct broker *b, const char *name, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;
	const struct md_topic *tp = md ? md_find(md, name, (int32_t)strlen(name)) : NULL;

	if (!tp)
		return -ENOENT;
	textbuf_printf(t, "{");
	topic_head(tp, t);
	textbuf_printf(t, ", \"configs\": {");
	for (int i = 0; i < tp->nconfigs; i++) {
		textbuf_printf(t, "%s", i ? ", " : "");
		str(t, tp->config_keys[i]);
		textbuf_printf(t, ": ");
		str(t, tp->config_values[i] ? tp->config_values[i] : "");
	}
	textbuf_printf(t, "}, \"partition_list\": [");
	for (int32_t i = 0; i < tp->nparts; i++) {
		const struct md_partition *mp = &tp->parts[i];
		int32_t shard;
		const struct part_pub *u = pub_of(ctl, tp, i, &shard);

		textbuf_printf(t, "%s\n  {\"partition\": %d, \"leader\": %d, \"leader_epoch\": %d, \"replicas\": ",
			       i ? "," : "", i, mp->leader, mp->leader_epoch);
		ids(t, mp->replicas, mp->nreplicas);
		textbuf_printf(t, ", \"isr\": ");
		ids(t, mp->isr, mp->nisr);
		/* shard -1 and no offsets: not held on this node */
		textbuf_printf(t, ", \"shard\": %d", shard);
		if (u)
			textbuf_printf(t, ", \"log_start_offset\": %lld, \"high_watermark\": %lld, \"log_end_offset\": %lld, "
				       "\"last_stable_offset\": %lld, \"size_bytes\": %lld, \"produce_records\": %llu, "
				       "\"produce_bytes\": %llu, \"fetch_bytes\": %llu, \"error\": \"%s\"",
				       (long long)LD(u->log_start), (long long)LD(u->high_watermark), (long long)LD(u->log_end),
				       (long long)LD(u->last_stable), (long long)LD(u->size_bytes),
				       (unsigned long long)LD(u->produce_records), (unsigned long long)LD(u->produce_bytes),
				       (unsigned long long)LD(u->fetch_bytes), LD(u->err) ? strerror((int)-LD(u->err)) : "");
		textbuf_printf(t, "}");
	}
	textbuf_printf(t, "\n]}\n");
	return 0;
}

/* ---- groups -------------------------------------------------------------- */

struct group_walk {
	struct textbuf *t;
	int64_t now_ms;               /* wall */
	int n;                        /* groups written (the list) or offsets (one group) */
	const char *open;             /* the group whose entry is open (the list) */
	int64_t lag;                  /* the open group's summed lag, -1: none known */
	int parts;
	int members;                  /* members written (one group) */
	int events;                   /* rebalance events written (one group) */
	int lags;                     /* lag samples written (one group) */
};

/* lag of one committed partition, -1 unknown (no lag scan answer yet) */
static int64_t lag_of(const struct group_offset_view *o)
{
	if (o->high_watermark < 0)
		return -1;
	return o->high_watermark > o->committed ? o->high_watermark - o->committed : 0;
}

static void list_close(struct group_walk *w)
{
	if (!w->open)
		return;
	textbuf_printf(w->t, ", \"partitions\": %d, \"lag\": %lld}", w->parts, (long long)w->lag);
	w->open = NULL;
}

static void list_visit(const struct group_view *g, const struct group_offset_view *o, void *arg)
{
	struct group_walk *w = arg;
	int64_t lag;

	if (!o) {
		list_close(w);
		textbuf_printf(w->t, "%s\n  {\"group\": ", w->n++ ? "," : "");
		str(w->t, g->id);
		textbuf_printf(w->t, ", \"state\": \"%s\", \"generation\": %d, \"members\": %d, \"protocol\": ", g->state,
			       g->generation, g->members);
		str(w->t, g->protocol);
		w->open = g->id;
		w->lag = -1;
		w->parts = 0;
		return;
	}
	w->parts++;
	lag = lag_of(o);
	if (lag >= 0)
		w->lag = (w->lag < 0 ? 0 : w->lag) + lag;
}

static void scan(struct ctl *ctl, struct broker *b, struct group_coord *gc)
{
	if (!LD(b->stopping))
		group_lag_scan_every(gc, ctl_now_ms(ctl), CONSOLE_LAG_SCAN_MS);
}

void console_groups_json(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	struct group_coord *gc = ctl_groups(ctl);
	struct group_walk w = { .t = t, .now_ms = ctl_wall_ms(ctl) };

	textbuf_printf(t, "{\"groups\": [");
	if (gc) {
		group_foreach(gc, list_visit, &w);
		list_close(&w);
		scan(ctl, b, gc);
	}
	textbuf_printf(t, "\n]}\n");
}

static void one_visit(const struct group_view *g, const struct group_offset_view *o, void *arg)
{
	struct group_walk *w = arg;
	int64_t lag;

	if (!o) {
		textbuf_printf(w->t, "{\"group\": ");
		str(w->t, g->id);
		textbuf_printf(w->t, ", \"state\": \"%s\", \"generation\": %d, \"protocol_type\": ", g->state,
			       g->generation);
		str(w->t, g->protocol_type);
		textbuf_printf(w->t, ", \"protocol\": ");
		str(w->t, g->protocol);
		textbuf_printf(w->t, ", \"leader\": ");
		str(w->t, g->leader);
		textbuf_printf(w->t, ", \"offsets\": [");
		return;
	}
	lag = lag_of(o);
	textbuf_printf(w->t, "%s\n  {\"topic\": ", w->n++ ? "," : "");
	str(w->t, o->topic);
	textbuf_printf(w->t, ", \"partition\": %d, \"committed\": %lld, \"high_watermark\": %lld, \"lag\": %lld, "
		       "\"oldest_unconsumed_ms\": %lld, \"oldest_unconsumed_age_ms\": %lld}",
		       o->partition, (long long)o->committed, (long long)o->high_watermark, (long long)lag,
		       (long long)o->oldest_unconsumed_ts,
		       (long long)(o->oldest_unconsumed_ts >= 0 && w->now_ms > o->oldest_unconsumed_ts
					   ? w->now_ms - o->oldest_unconsumed_ts
					   : lag == 0 ? 0 : -1));
}

static void member_visit(const struct group_member_view *m, void *arg)
{
	struct group_walk *w = arg;

	textbuf_printf(w->t, "%s\n  {\"member_id\": ", w->members++ ? "," : "\n], \"members\": [");
	str(w->t, m->id);
	textbuf_printf(w->t, ", \"instance_id\": ");
	str(w->t, m->instance);
	textbuf_printf(w->t, ", \"client_id\": ");
	str(w->t, m->client_id);
	textbuf_printf(w->t, ", \"host\": ");
	str(w->t, m->host);
	textbuf_printf(w->t, ", \"assignment\": [");
	for (int i = 0; i < m->nassigned; i++) {
		textbuf_printf(w->t, "%s{\"topic\": ", i ? ", " : "");
		str(w->t, m->topics[i]);
		textbuf_printf(w->t, ", \"partition\": %d}", m->parts[i]);
	}
	textbuf_printf(w->t, "]}");
}

static void event_visit(const struct group_event_view *e, void *arg)
{
	struct group_walk *w = arg;

	if (!w->events++)
		textbuf_printf(w->t, "%s\n], \"rebalances\": [", w->members ? "" : "\n], \"members\": [");
	textbuf_printf(w->t, "%s\n  {\"time_ms\": %lld, \"what\": \"%s\", \"generation\": %d, \"members\": %d, "
		       "\"who\": ", w->events > 1 ? "," : "", (long long)e->time_ms, e->what, e->generation, e->members);
	str(w->t, e->who);
	textbuf_printf(w->t, "}");
}

static void lag_visit(int64_t time_ms, int64_t lag, void *arg)
{
	struct group_walk *w = arg;

	if (!w->events && !w->lags)
		textbuf_printf(w->t, "%s\n], \"rebalances\": [", w->members ? "" : "\n], \"members\": [");
	if (!w->lags++)
		textbuf_printf(w->t, "\n], \"lag_history\": [");
	textbuf_printf(w->t, "%s[%lld, %lld]", w->lags > 1 ? ", " : "", (long long)time_ms, (long long)lag);
}

int console_group_json(struct ctl *ctl, struct broker *b, const char *id, struct textbuf *t)
{
	struct group_coord *gc = ctl_groups(ctl);
	struct group_walk w = { .t = t, .now_ms = ctl_wall_ms(ctl) };

	if (!gc || group_view_one(gc, id, one_visit, member_visit, event_visit, lag_visit, &w) < 0)
		return -ENOENT;
	if (!w.members && !w.events && !w.lags)
		textbuf_printf(t, "\n], \"members\": [");
	if (!w.events && !w.lags)
		textbuf_printf(t, "\n], \"rebalances\": [");
	if (!w.lags)
		textbuf_printf(t, "\n], \"lag_history\": [");
	textbuf_printf(t, "]}\n");
	scan(ctl, b, gc);
	return 0;
}

/* ---- transactions ------------------------------------------------------------ */

struct txn_walk {
	struct ctl *ctl;
	struct broker *b;
	struct textbuf *t;
	int64_t now_ms;
	int n, parts;
};

static void txn_visit(const struct txn_view *v, const char *topic, int32_t partition, void *arg)
{
	struct txn_walk *w = arg;
	const struct md_topic *tp;
	const struct part_pub *u;

	if (!topic) {
		if (w->n)
			textbuf_printf(w->t, "]}");
		textbuf_printf(w->t, "%s\n  {\"transactional_id\": ", w->n++ ? "," : "");
		str(w->t, v->id);
		textbuf_printf(w->t, ", \"producer_id\": %lld, \"epoch\": %d, \"state\": \"%s\", \"open\": %s, "
			       "\"timeout_ms\": %d, \"start_ms\": %lld, \"age_ms\": %lld, \"partitions\": [",
			       (long long)v->pid, v->epoch, v->state, v->open ? "true" : "false", v->timeout_ms,
			       (long long)v->start_ms,
			       (long long)(v->open && v->start_ms > 0 && w->now_ms > v->start_ms ? w->now_ms - v->start_ms : -1));
		w->parts = 0;
		return;
	}
	tp = w->b->md ? md_find(w->b->md, topic, (int32_t)strlen(topic)) : NULL;
	u = tp && partition >= 0 && partition < tp->nparts ? pub_of(w->ctl, tp, partition, NULL) : NULL;
	textbuf_printf(w->t, "%s{\"topic\": ", w->parts++ ? ", " : "");
	str(w->t, topic);
	textbuf_printf(w->t, ", \"partition\": %d", partition);
	if (u)
		textbuf_printf(w->t, ", \"last_stable_offset\": %lld, \"high_watermark\": %lld",
			       (long long)LD(u->last_stable), (long long)LD(u->high_watermark));
	textbuf_printf(w->t, "}");
}

void console_transactions_json(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;
	struct txn_coord *tc = ctl_txns(ctl);
	struct txn_walk w = { .ctl = ctl, .b = b, .t = t, .now_ms = ctl_wall_ms(ctl) };
	int n = 0;

	textbuf_printf(t, "{\"transactions\": [");
	if (tc)
		txn_foreach(tc, txn_visit, &w);
	if (w.n)
		textbuf_printf(t, "]}");
	/* what read_committed consumers wait for: partitions held here whose
	 * last stable offset is below the high watermark */
	textbuf_printf(t, "\n], \"held_back\": [");
	for (int k = 0; md && k < md->ntopics; k++)
		for (int32_t i = 0; i < md->topics[k]->nparts; i++) {
			const struct part_pub *u = pub_of(ctl, md->topics[k], i, NULL);
			int64_t lso, hw;

			if (!u || (lso = LD(u->last_stable)) >= (hw = LD(u->high_watermark)))
				continue;
			textbuf_printf(t, "%s\n  {\"topic\": ", n++ ? "," : "");
			str(t, md->topics[k]->name);
			textbuf_printf(t, ", \"partition\": %d, \"last_stable_offset\": %lld, \"high_watermark\": %lld, "
				       "\"records_held\": %lld}", i, (long long)lso, (long long)hw, (long long)(hw - lso));
		}
	textbuf_printf(t, "\n]}\n");
}
