/* control/group_lag.c — the lag scan (see group.h): each committed
 * partition's high watermark and oldest unconsumed record, asked of its
 * owner shard; the SIGUSR1 report (group_report) and the metrics view
 * (group_foreach). @thread ctl unless tagged. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_homes.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group_table.h"
#include "dataplane/part_proxy.h"
#include "storage/slog.h"

/* ---- lag: high watermark and oldest unconsumed record ------------------------ */

struct lagq {
	struct part_lag_req req;      /* the query on the owner */
	struct group_coord *gc;
	char *group, *topic;
	int32_t part;
};

static void report_print(struct group_coord *gc)
{
	int64_t now = ctl_wall_ms(gc->ctl);
	int ng = 0, np = 0;

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		int n = 0, k = 0;
		struct goffset **all;

		if (!g)
			continue;
		ng++;
		slog(SLOG_INFO, "group %s: state %s, generation %d, protocol %s/%s, %d member(s)", g->id,
			group_state_names[g->state], g->generation, g->ptype ? g->ptype : "-", g->protocol ? g->protocol : "-",
			g->nmembers);
		for (struct gmember *m = g->members; m; m = m->next)
			slog(SLOG_INFO, "  member %s%s%s client %s host %s", m->id, m->instance ? " instance " : "",
				m->instance ? m->instance : "", m->client_id, m->host);
		n = (int)g->offsets.n;
		all = xcalloc((size_t)n, sizeof(*all));
		for (uint32_t j = 0; j < g->offsets.cap; j++)
			if (g->offsets.v[j])
				all[k++] = g->offsets.v[j];
		qsort(all, (size_t)n, sizeof(*all), group_offset_cmp);
		for (int j = 0; j < n; j++) {
			struct goffset *o = all[j];
			struct gmember *own = group_owner_of(g, o->topic, o->part);
			char lag[32] = "?", age[32] = "?";

			if (o->hw >= 0)
				snprintf(lag, sizeof(lag), "%lld", (long long)(o->hw > o->offset ? o->hw - o->offset : 0));
			if (o->hw >= 0)
				snprintf(age, sizeof(age), "%lld", (long long)(o->oldest_ts < 0 ? 0
						: (now > o->oldest_ts ? now - o->oldest_ts : 0)));
			slog(SLOG_INFO, "  %s-%d committed %lld high-watermark %lld lag %s "
				"oldest-unconsumed-age-ms %s owner %s", o->topic, o->part, (long long)o->offset,
				(long long)o->hw, lag, age, own ? own->id : "-");
			np++;
		}
		free(all);
	}
	slog(SLOG_INFO, "group coordinator: %llu joins, %llu syncs, %llu heartbeats, %llu leaves, "
		"%llu rebalances, %llu members expired; %llu partitions committed, %llu refused (stale generation "
		"%llu, unknown member %llu, rebalance in progress %llu, owned by another member %llu, fenced %llu)",
		(unsigned long long)gc->st.joins, (unsigned long long)gc->st.syncs,
		(unsigned long long)gc->st.heartbeats, (unsigned long long)gc->st.leaves,
		(unsigned long long)gc->st.rebalances, (unsigned long long)gc->st.members_expired,
		(unsigned long long)gc->st.commits, (unsigned long long)gc->st.commit_refused,
		(unsigned long long)gc->st.commit_refused_generation, (unsigned long long)gc->st.commit_refused_member,
		(unsigned long long)gc->st.commit_refused_rebalance, (unsigned long long)gc->st.commit_refused_owner,
		(unsigned long long)gc->st.commit_refused_fenced);
	slog(SLOG_INFO, "group report: %d group(s), %d committed partition(s)", ng, np);
}

static void lag_scan_done(struct group_coord *gc);

/* On the control thread: one partition's answer. */
static void lag_result(void *self, void *cookie, int64_t hw, int64_t oldest_ts)
{
	struct lagq *q = cookie;
	struct group_coord *gc = q->gc;
	struct group *g = group_find(gc, q->group);
	struct goffset *o = g ? group_offset_find(g, q->topic, q->part) : NULL;

	(void)self;
	if (o && o->offset == q->req.committed) {
		o->hw = hw;
		o->oldest_ts = oldest_ts;
	}
	free(q->group);
	free(q->topic);
	free(q);
	if (--gc->lag_queries == 0)
		lag_scan_done(gc);
}

static void lag_scan_done(struct group_coord *gc)
{
	if (gc->report_wanted)
		report_print(gc);
	gc->report_wanted = 0;
}

void group_report(struct group_coord *gc)
{
	gc->report_wanted = 1;
	group_lag_scan(gc);
}

void group_lag_scan(struct group_coord *gc)
{
	const struct md_snapshot *md = gc->b->md;

	if (gc->lag_queries)
		return;   /* one scan at a time: the one under way answers */
	gc->lag_queries = 1;   /* held while the queries go out */
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		for (uint32_t j = 0; g && j < g->offsets.cap; j++) {
			struct goffset *o = g->offsets.v[j];
			const struct md_topic *t;
			struct lagq *q;

			if (!o)
				continue;
			/* the last scan's values stay until this one answers */
			t = md ? md_find(md, o->topic, (int32_t)strlen(o->topic)) : NULL;
			if (!t || o->part < 0 || o->part >= t->nparts || ctl_part_open_on(gc->ctl, t->id, o->part) < 0) {
				o->hw = -1;
				o->oldest_ts = -1;
				continue;
			}
			q = xcalloc(1, sizeof(*q));
			q->gc = gc;
			q->group = sdup(g->id);
			q->topic = sdup(o->topic);
			q->part = o->part;
			q->req.committed = o->offset;
			q->req.done = lag_result;
			q->req.cookie = q;
			gc->lag_queries++;
			{
				struct part_proxy px;

				part_proxy_lag(ctl_part_proxy(gc->ctl, &px), ctl_part_open_on(gc->ctl, t->id, o->part),
					       part_addr_of(t->id, o->part), &q->req);
			}
		}
	}
	if (--gc->lag_queries == 0)
		lag_scan_done(gc);
}

void group_lag_sample(struct group_coord *gc)
{
	const struct md_snapshot *md = gc->b->md;
	int64_t now = ctl_wall_ms(gc->ctl);

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		int64_t lag = -1;

		if (!g || !g->offsets.n)
			continue;
		for (uint32_t j = 0; j < g->offsets.cap; j++) {
			const struct goffset *o = g->offsets.v[j];
			const struct md_topic *t;
			const struct ctl_home *h;
			int64_t hw;

			if (!o || !(t = md ? md_find(md, o->topic, (int32_t)strlen(o->topic)) : NULL) || o->part < 0 ||
			    o->part >= t->nparts || !(h = ctl_part_home(gc->ctl, t->id, o->part)) || !h->part_pub)
				continue;   /* not held here: its lag is its leader's to tell */
			hw = __atomic_load_n(&h->part_pub->high_watermark, __ATOMIC_RELAXED);
			lag = (lag < 0 ? 0 : lag) + (hw > o->offset ? hw - o->offset : 0);
		}
		if (lag < 0)
			continue;
		g->lag_hist[g->nlag++ % GROUP_LAG_HIST] = (struct group_lag_sample){ now, lag };
	}
}

void group_lag_scan_every(struct group_coord *gc, int64_t now_ms, int64_t min_gap_ms)
{
	if (gc->lag_scanned && now_ms - gc->lag_scan_ms < min_gap_ms)
		return;
	gc->lag_scanned = 1;
	gc->lag_scan_ms = now_ms;
	group_lag_scan(gc);
}

static void view_one(const struct group *g, group_visit_fn *fn, void *arg)
{
	struct group_view v = {
		.id = g->id,
		.state = group_state_names[g->state],
		.generation = g->generation,
		.members = g->nmembers,
		.protocol_type = g->ptype ? g->ptype : "",
		.protocol = g->protocol ? g->protocol : "",
		.leader = g->leader ? g->leader : "",
	};

	fn(&v, NULL, arg);
	for (uint32_t j = 0; j < g->offsets.cap; j++) {
		const struct goffset *o = g->offsets.v[j];
		struct group_offset_view ov;

		if (!o)
			continue;
		ov.topic = o->topic;
		ov.partition = o->part;
		ov.committed = o->offset;
		ov.high_watermark = o->hw;
		ov.oldest_unconsumed_ts = o->oldest_ts;
		fn(&v, &ov, arg);
	}
}

void group_foreach(const struct group_coord *gc, group_visit_fn *fn, void *arg)
{
	for (uint32_t i = 0; i < gc->groups.cap; i++)
		if (gc->groups.v[i])
			view_one(gc->groups.v[i], fn, arg);
}

int group_view_one(const struct group_coord *gc, const char *id, group_visit_fn *fn, group_member_fn *member,
		   group_event_fn *event, group_lag_fn *lagf, void *arg)
{
	static const char *const kinds[] = { "join", "rejoin", "leave", "session_timeout", "assignment_too_large",
					     "generation" };
	const struct group *g = group_find((struct group_coord *)gc, id);
	const char **topics;
	int32_t *parts;

	if (!g || g->dead)
		return -ENOENT;
	view_one(g, fn, arg);
	/* each member's share of the assignment (the slow path: a scan of
	 * the owners per member) */
	topics = xcalloc(g->owners.n ? g->owners.n : 1, sizeof(*topics));
	parts = xcalloc(g->owners.n ? g->owners.n : 1, sizeof(*parts));
	for (const struct gmember *m = g->members; m; m = m->next) {
		struct group_member_view mv = { .id = m->id, .instance = m->instance ? m->instance : "",
						.client_id = m->client_id ? m->client_id : "",
						.host = m->host ? m->host : "", .topics = topics, .parts = parts };

		for (uint32_t j = 0; j < g->owners.cap; j++) {
			const struct gowner *w = g->owners.v[j];

			if (w && w->m == m) {
				topics[mv.nassigned] = w->topic;
				parts[mv.nassigned++] = w->part;
			}
		}
		member(&mv, arg);
	}
	free(topics);
	free(parts);
	_Static_assert(GROUP_EVENT_GENERATION == 5, "kinds names five causes and the generation");
	for (uint32_t i = g->nevents > GROUP_EVENTS ? g->nevents - GROUP_EVENTS : 0; i < g->nevents; i++) {
		const struct group_event *e = &g->events[i % GROUP_EVENTS];
		struct group_event_view ev = { .time_ms = e->wall_ms, .generation = e->generation,
					       .what = kinds[e->kind], .members = e->members, .who = e->who };

		event(&ev, arg);
	}
	for (uint32_t i = g->nlag > GROUP_LAG_HIST ? g->nlag - GROUP_LAG_HIST : 0; i < g->nlag; i++)
		lagf(g->lag_hist[i % GROUP_LAG_HIST].wall_ms, g->lag_hist[i % GROUP_LAG_HIST].lag, arg);
	return 0;
}

