/* control/ctl_topic.c — the metadata snapshot the shards read, and the operations that
 * open, close and reconfigure partitions on their owner shards
 * (see control/ctl_internal.h for how the control thread is split).
 *
 * The one place in control/ that writes the partition homes into the
 * snapshot (md_partition owner_shard and pub, which the shards read): a
 * topic's entry gets them from the control thread's book
 * (control/ctl_homes.h) as it is built (owner shard) and as it is
 * published (ctl_publish: the published block of each partition whose
 * owner answered its open). Nothing in control/ reads them back
 * (scripts/check-layers, rule 6): the control thread asks its book. A
 * topic's entry is written only before it is published; once published
 * it is read-only, replaced whole by the next snapshot.
 *
 * Also the one reader of the entries' partitions among the control
 * thread's decisions: an entry is built from the metadata image and the
 * book (the leader epoch told, ctl_home_epoch), and the book notes what
 * each entry published told (book_told); whether a published entry still
 * follows the image is asked here (ctl_topic_follows). The rest of
 * control/ holds an entry only as a handle to give back (replaced,
 * retired), looked up through control/ctl_served.c. */

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/fd_budget.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/meta_acl.h"
#include "control/meta_scram.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "control/placement.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/topic_name.h"
#include "storage/slog.h"

/* One partition open in flight: the cookie of part_proxy_open, freed when
 * it answers. t and mp are the entry of an operation's topic, not
 * published before the operation ends (ctl_op_step). */
struct ctl_open {
	struct ctl_op *op;
	char *dir;                   /* malloc'd; kept in op->made if the open made it */
	struct md_topic *t;
	struct md_partition *mp;
	struct part_open_report rep; /* filled on the owner */
};

static int32_t place(const struct md_topic *t, int32_t idx, int nshards);

/* ---- snapshots -------------------------------------------------------- */

static int topic_cmp(const void *a, const void *b)
{
	const struct md_topic *x = *(const struct md_topic *const *)a, *y = *(const struct md_topic *const *)b;
	int32_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, (size_t)n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static int topic_id_cmp(const void *a, const void *b)
{
	const struct md_topic *x = *(const struct md_topic *const *)a, *y = *(const struct md_topic *const *)b;

	return memcmp(x->id, y->id, sizeof(x->id));
}

/* The SCRAM users into md: one allocation, the credentials then their
 * names (freed with the snapshot). Without memory the snapshot has none
 * (logins fail until the next publish) rather than stale ones. */
static void md_scram_copy(struct md_snapshot *md, const struct meta_scram *ms)
{
	size_t names = 0;
	char *p;

	for (int i = 0; i < ms->n; i++)
		names += strlen(ms->c[i].name) + 1;
	md->nscram = 0;
	md->scram = malloc(sizeof(*md->scram) * (size_t)ms->n + names + 1);
	if (!md->scram)
		return;
	p = (char *)(md->scram + ms->n);
	for (int i = 0; i < ms->n; i++) {
		size_t n = strlen(ms->c[i].name) + 1;

		md->scram[i] = ms->c[i];
		memcpy(p, ms->c[i].name, n);
		md->scram[i].name = p;
		p += n;
	}
	md->nscram = ms->n;
}

/* The book's note of what the owner and the snapshot were told of mp's
 * leader (ctl_homes.h): the next entry built keeps that epoch while the
 * leader is the same. */
static void book_told(struct ctl_home *h, const struct md_partition *mp)
{
	h->told = 1;
	h->told_leader = mp->leader;
	h->told_epoch = mp->leader_epoch;
}

/* The homes of a topic about to be published, from the control thread's
 * book: each partition's owner shard, and its published block once the
 * owner answered its open (an open still in flight stays unseen by the
 * shards until its operation publishes). */
static void topic_stamp_homes(struct ctl *ctl, struct md_topic *t)
{
	for (int32_t i = 0; i < t->nparts; i++) {
		struct ctl_home *h = ctl_home_find(ctl->homes, t->id, i);
		struct md_partition *mp = &t->parts[i];

		mp->owner_shard = h ? h->shard : place(t, i, ctl->b->set.nshards);
		mp->pub = h && h->opened ? h->part_pub : NULL;
		if (h)
			book_told(h, mp);
	}
}

/* Publish old + added - removed. */
static void ctl_publish(struct ctl *ctl, struct md_topic **add, int nadd, struct md_topic **del, int ndel,
			struct md_topic **rep, int nrep)
{
	struct broker *b = ctl->b;
	struct md_snapshot *old = b->md, *md = calloc(1, sizeof(*md));
	int n = 0, cap = (old ? old->ntopics : 0) + nadd;

	md->topics = calloc((size_t)(cap ? cap : 1), sizeof(*md->topics));
	for (int i = 0; old && i < old->ntopics; i++) {
		int gone = 0;

		for (int j = 0; j < ndel; j++)
			gone |= old->topics[i] == del[j];
		for (int j = 0; j < nrep; j++)
			gone |= old->topics[i] == rep[j];
		if (!gone)
			md->topics[n++] = old->topics[i];
	}
	for (int i = 0; i < nadd; i++) {
		topic_stamp_homes(ctl, add[i]);
		md->topics[n++] = add[i];
	}
	md->ntopics = n;
	qsort(md->topics, (size_t)n, sizeof(*md->topics), topic_cmp);
	md->by_id = xcalloc((size_t)(n ? n : 1), sizeof(*md->by_id));
	memcpy(md->by_id, md->topics, (size_t)n * sizeof(*md->by_id));
	qsort(md->by_id, (size_t)n, sizeof(*md->by_id), topic_id_cmp);
	/* the brokers clients may be sent to: registered and unfenced */
	md->brokers = xcalloc((size_t)metalog_broker_count(ctl->ml) + 1, sizeof(*md->brokers));
	for (int i = 0; i < metalog_broker_count(ctl->ml); i++) {
		const struct meta_broker *mb = metalog_broker_at(ctl->ml, i);
		struct md_broker *o = &md->brokers[md->nbrokers];

		if (mb->fenced)
			continue;
		o->id = mb->id;
		o->port = mb->port;
		snprintf(o->host, sizeof(o->host), "%s", mb->host);
		snprintf(o->rack, sizeof(o->rack), "%s", mb->rack);
		o->nendpoints = mb->nendpoints;
		for (int k = 0; k < mb->nendpoints && k < (int)(sizeof(o->endpoints) / sizeof(o->endpoints[0])); k++) {
			snprintf(o->endpoints[k].name, sizeof(o->endpoints[k].name), "%s", mb->endpoints[k].name);
			snprintf(o->endpoints[k].host, sizeof(o->endpoints[k].host), "%s", mb->endpoints[k].host);
			o->endpoints[k].port = mb->endpoints[k].port;
		}
		md->nbrokers++;
	}
	md_scram_copy(md, metalog_scram(ctl->ml));
	/* the bindings, their WRITE index and their generation (without
	 * memory: none until the next publish, under generation 0, which no
	 * connection remembers a decision by) */
	(void)meta_acl_copy(metalog_acls(ctl->ml), &md->acls);
	md->mv = metalog_metadata_version(ctl->ml);
	md->mv_epoch = metalog_features_epoch(ctl->ml);
	md->mv_min = META_MV_MIN;
	md->mv_max = meta_features_local_max();
	md->version = ++ctl->version;
	md->cfg = ctl->eff;
	__atomic_store_n(&b->md, md, __ATOMIC_RELEASE);
	if (old) {
		struct retired *r = calloc(1, sizeof(*r));

		r->version = md->version;
		r->snap = old;
		if (old->cfg != md->cfg)
			r->cfg = (struct config *)old->cfg;
		r->next = ctl->retired;
		ctl->retired = r;
	}
	for (int j = 0; j < ndel + nrep; j++) {
		struct retired *r = calloc(1, sizeof(*r));

		r->version = md->version;
		r->topic = j < ndel ? del[j] : rep[j - ndel];
		r->next = ctl->retired;
		ctl->retired = r;
	}
}

void ctl_publish_brokers(struct ctl *ctl)
{
	if (ctl->b->md)
		ctl_publish(ctl, NULL, 0, NULL, 0, NULL, 0);
}

int ctl_topic_stale(const struct ctl *ctl, const struct meta_topic *mt)
{
	const struct md_topic *t = ctl_topic_served_of(ctl, mt);

	return t && !ctl_topic_follows(t, mt);
}

void ctl_republish(struct ctl *ctl, const struct meta_topic *const *mts, int n)
{
	struct md_topic **add, **rep;

	if (n <= 0)
		return;
	add = xcalloc((size_t)n, sizeof(*add));
	rep = xcalloc((size_t)n, sizeof(*rep));
	for (int i = 0; i < n; i++) {
		rep[i] = ctl_topic_served_of(ctl, mts[i]);
		add[i] = ctl_topic_build(ctl, mts[i]);
	}
	ctl_publish(ctl, add, n, NULL, 0, rep, n);
	free(add);
	free(rep);
}

void ctl_topic_free(struct md_topic *t)
{
	for (int i = 0; i < t->nconfigs; i++) {
		free(t->config_keys[i]);
		free(t->config_values[i]);
	}
	free(t->config_keys);
	free(t->config_values);
	free(t->parts);
	free(t->ids);
	free(t->name);
	free(t);
}

/* Whether this node is a replica of mp (it opens only those). */
static int ctl_part_hosted(const struct ctl *ctl, const struct md_partition *mp)
{
	return md_part_hosted(mp, ctl->b->set.node_id);
}

int ctl_topic_follows(const struct md_topic *t, const struct meta_topic *mt)
{
	if (t->nparts != mt->partitions)
		return 1;   /* partitions being added: their operation publishes */
	for (int32_t i = 0; i < t->nparts; i++) {
		const struct md_partition *mp = &t->parts[i];
		const struct meta_part *p = &mt->parts[i];

		if (mp->leader != p->leader || mp->leader_epoch < p->leader_epoch || mp->nisr != p->nisr ||
		    memcmp(mp->isr, p->isr, (size_t)p->nisr * sizeof(*p->isr)) || mp->nreplicas != p->nreplicas ||
		    memcmp(mp->replicas, p->replicas, (size_t)p->nreplicas * sizeof(*p->replicas)))
			return 0;
	}
	return 1;
}

/* What a retired entry holds: an old snapshot's array, a topic no longer
 * published, a replaced broker config. */
static void retired_free(struct retired *r)
{
	if (r->snap) {
		free(r->snap->topics);
		free(r->snap->by_id);
		free(r->snap->brokers);
		free(r->snap->scram);
		free((void *)r->snap->acls.b);
		free(r->snap);
	}
	if (r->topic)
		ctl_topic_free(r->topic);
	config_destroy(r->cfg);
	free(r);
}

/* Free what no shard can still be looking at. Parked requests keep
 * partition pointers, never snapshot pointers, across loop turns. */
void ctl_reclaim(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	uint64_t seen = UINT64_MAX;
	struct retired **pp = &ctl->retired;

	for (int i = 0; i < b->set.nshards; i++) {
		uint64_t v = broker_shard_md_seen(b, i);

		if (v < seen)
			seen = v;
	}
	while (*pp) {
		struct retired *r = *pp;

		if (r->version <= seen) {
			*pp = r->next;
			retired_free(r);
		} else {
			pp = &r->next;
		}
	}
}

/* A close or a config change answered (they do not fail). */
void ctl_part_done(void *self, void *cookie, int err)
{
	struct ctl *ctl = self;
	struct ctl_op *op = cookie;

	(void)err;
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
}

/* A partition open answered (its directory, allocated by topic_open_parts,
 * and its report are the cookie's): keep the directory it made, count
 * what recovery read and say what it cut or moved aside. */
static void ctl_part_opened(void *self, void *cookie, int err, const struct part_open_report *rep)
{
	struct ctl *ctl = self;
	struct ctl_open *o = cookie;
	struct ctl_op *op = o->op;
	char *dir = o->dir;
	struct ctl_home *h = ctl_home_find(ctl->homes, o->t->id, o->mp->index);

	if (h)   /* (none: dropped by a retire or close sent meanwhile) */
		h->opened = err == 0 ? 1 : -1;
	if (err == 0) {
		/* the log holds a later epoch than the metadata log: Metadata
		 * says the one the partition stamps (o->t is not published yet:
		 * this completes its entry), and the book keeps it for the
		 * entries built after this one */
		if (rep->leader_epoch > o->mp->leader_epoch)
			o->mp->leader_epoch = rep->leader_epoch;
		if (h)
			book_told(h, o->mp);
		/* leader or follower (ctl_roles.c) */
		ctl_role_opened(ctl, o->t->name, o->t->id, o->mp->index,
				o->mp->leader == ctl->b->set.node_id && o->mp->nreplicas == 1);
	}
	ctl->fd_opening--;
	if (rep->made && op->req) {
		/* kept: removed again if the topic is dropped (ctl_drop_failed) */
		if (op->nmade == op->made_cap) {
			op->made_cap = op->made_cap ? op->made_cap * 2 : 64;
			op->made = realloc(op->made, (size_t)op->made_cap * sizeof(*op->made));
			op->made_for = realloc(op->made_for, (size_t)op->made_cap * sizeof(*op->made_for));
			op->made_rm = realloc(op->made_rm, (size_t)op->made_cap);
			if (!op->made || !op->made_for || !op->made_rm)
				abort();   /* the control thread cannot go on without memory */
		}
		op->made[op->nmade] = dir;
		op->made_for[op->nmade] = o->t;
		op->made_rm[op->nmade++] = 0;
		dir = NULL;
	}
	if (err < 0 && !op->failed) {
		op->failed = 1;
		snprintf(op->fail_msg, sizeof(op->fail_msg), "cannot open partition %s: %s",
			 o->dir, strerror(-err));
	}
	if (err == 0 && !op->req) {
		/* start-up: what recovery read, cut or found damaged */
		op->rec_parts++;
		op->rec.segments += rep->segments;
		op->rec.segments_trusted += rep->segments_trusted;
		op->rec.bytes_scanned += rep->bytes_scanned;
		op->rec.bytes_trusted += rep->bytes_trusted;
		op->rec.damaged += rep->damaged;
		if (rep->noteworthy)
			slog(SLOG_INFO, "recovered %s-%d: %s", o->t->name, o->mp->index, rep->line);
	}
	free(dir);
	free(o);
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
}

static int32_t place(const struct md_topic *t, int32_t idx, int nshards)
{
	uint32_t h = 2166136261u;

	for (int32_t i = 0; i < t->name_len; i++)
		h = (h ^ (uint8_t)t->name[i]) * 16777619u;
	return (int32_t)((h + (uint32_t)idx) % (uint32_t)nshards);
}

/* ---- placement across brokers ----------------------------------------- */

int ctl_place_brokers(struct ctl *ctl, struct placement_broker **out)
{
	int n = metalog_broker_count(ctl->ml), k = 0, self = 0;
	struct placement_broker *b = xcalloc((size_t)n + 1, sizeof(*b));

	for (int i = 0; i < n; i++) {
		const struct meta_broker *mb = metalog_broker_at(ctl->ml, i);

		if (mb->fenced && mb->id != ctl->b->set.node_id)
			continue;
		self |= mb->id == ctl->b->set.node_id;
		b[k++] = (struct placement_broker){ mb->id, mb->rack };
	}
	if (!self && !ctl->b->set.controller_only)   /* a controller only hosts nothing */
		b[k++] = (struct placement_broker){ ctl->b->set.node_id, ctl->b->set.rack };
	*out = b;
	return k;
}

/* Kafka draws the start at random; a hash of the name spreads topics'
 * first leaders as well and gives the same answer on every retry. */
static uint32_t place_start(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h;
}

int ctl_place(struct ctl *ctl, const char *name, int32_t first, int32_t n, int rf, int pin_self, int32_t **out,
	      int *avail)
{
	struct placement_broker *b;
	int nb = ctl_place_brokers(ctl, &b), rc;
	int32_t *ids = xcalloc((size_t)n * (size_t)(rf > 0 ? rf : 1), sizeof(*ids));

	*avail = nb;
	rc = placement_assign(b, nb, first, n, rf, place_start(name), ids);
	free(b);
	if (rc < 0) {
		free(ids);
		return rc;
	}
	for (int32_t p = 0; pin_self && p < n; p++) {
		int32_t *r = &ids[(size_t)p * rf], self = ctl->b->set.node_id;
		int at = rf - 1;

		for (int i = 0; i < rf; i++)
			if (r[i] == self)
				at = i;
		/* this node first: it leads (the coordinators stay here) */
		memmove(r + 1, r, (size_t)at * sizeof(*r));
		r[0] = self;
	}
	*out = ids;
	return 0;
}

/* Build the snapshot entry of a topic from the metadata log. */
struct md_topic *ctl_topic_build(struct ctl *ctl, const struct meta_topic *mt)
{
	struct md_topic *t = calloc(1, sizeof(*t));
	const char **k, **v;

	t->name = strdup(mt->name);
	t->name_len = (int32_t)strlen(mt->name);
	memcpy(t->id, mt->id, 16);
	t->nparts = mt->partitions;
	t->parts = calloc((size_t)mt->partitions, sizeof(*t->parts));
	t->nconfigs = mt->nconfigs;
	t->config_keys = calloc((size_t)(mt->nconfigs + 1), sizeof(char *));
	t->config_values = calloc((size_t)(mt->nconfigs + 1), sizeof(char *));
	k = calloc((size_t)(mt->nconfigs + 1), sizeof(char *));
	v = calloc((size_t)(mt->nconfigs + 1), sizeof(char *));
	for (int i = 0; i < mt->nconfigs; i++) {
		t->config_keys[i] = strdup(mt->config_keys[i]);
		t->config_values[i] = strdup(mt->config_values[i]);
		k[i] = t->config_keys[i];
		v[i] = t->config_values[i];
	}
	topic_config_to_plog(ctl->eff, k, v, mt->nconfigs, &t->cfg);
	free(k);
	free(v);
	{
		const char *mmb = NULL, *tst = NULL, *mir = NULL;

		for (int i = 0; i < t->nconfigs; i++) {
			if (!strcmp(t->config_keys[i], "min.insync.replicas"))
				mir = t->config_values[i];
			if (!strcmp(t->config_keys[i], "max.message.bytes"))
				mmb = t->config_values[i];
			if (!strcmp(t->config_keys[i], "message.timestamp.type"))
				tst = t->config_values[i];
		}
		t->max_message_bytes = (uint32_t)(mmb ? strtoul(mmb, NULL, 10)
						     : (unsigned long)config_int(ctl->eff, "message.max.bytes"));
		t->log_append_time = tst ? !strcmp(tst, "LogAppendTime")
				     : config_int(ctl->eff, "log.message.timestamp.type") == CONFIG_TS_LOG_APPEND_TIME;
		t->cfg.max_batch = t->max_message_bytes + 64;
		t->min_insync = (int32_t)(mir ? strtol(mir, NULL, 10) : config_int(ctl->eff, "min.insync.replicas"));
	}
	t->internal = topic_name_internal(t->name, t->name_len);
	{
		size_t nids = 0;
		int32_t *at;

		for (int32_t i = 0; i < t->nparts; i++)
			nids += (size_t)mt->parts[i].nreplicas + (size_t)mt->parts[i].nisr;
		at = t->ids = xcalloc(nids + 1, sizeof(*t->ids));
		for (int32_t i = 0; i < t->nparts; i++) {
			const struct meta_part *p = &mt->parts[i];
			struct md_partition *mp = &t->parts[i];

			mp->index = i;
			mp->owner_shard = place(t, i, ctl->b->set.nshards);
			/* the image's, or the later one the book says was told
			 * (ctl_home_epoch) */
			mp->leader_epoch = ctl_home_epoch(ctl_home_find(ctl->homes, t->id, i), p->leader,
							  p->leader_epoch);
			mp->leader = p->leader;
			mp->nreplicas = p->nreplicas;
			mp->nisr = p->nisr;
			memcpy(at, p->replicas, (size_t)p->nreplicas * sizeof(*at));
			mp->replicas = at;
			at += p->nreplicas;
			memcpy(at, p->isr, (size_t)p->nisr * sizeof(*at));
			mp->isr = at;
			at += p->nisr;
		}
	}
	return t;
}

/* Ask the owner shards to open partitions [from, t->nparts) this node
 * hosts and has not opened. */
void ctl_topic_open_parts(struct ctl *ctl, struct ctl_op *op, struct md_topic *t, int32_t from)
{
	for (int32_t i = from; i < t->nparts; i++) {
		struct ctl_open *o;
		struct ctl_home *h;
		struct part_proxy px;

		if (!ctl_part_hosted(ctl, &t->parts[i]))
			continue;   /* another broker's: not opened here */
		h = ctl_home_add(ctl->homes, t->id, i, t->parts[i].owner_shard);
		if (h->opened == 1)
			continue;   /* open already */
		h->opened = 0;  /* (again, after a failed open: its block too) */
		o = xcalloc(1, sizeof(*o));

		if (asprintf(&o->dir, "%s/%s-%d", ctl->b->set.data_dir, t->name, i) < 0)
			abort();
		o->op = op;
		o->t = t;
		o->mp = &t->parts[i];
		op->pending++;
		ctl->fd_opening++;
		if (op->fd_claimed > 0) {
			/* the claim becomes an open in flight */
			op->fd_claimed--;
			ctl->fd_claimed--;
		}
		part_proxy_open(ctl_part_proxy(ctl, &px), h->shard, o->dir, t, o->mp, h->part_pub, &o->rep,
				ctl_part_opened, o);
	}
}

/* Tell each partition of new entry nt that is open on this node the
 * config nt carries (one pending each). */
void ctl_topic_tell_config(struct ctl *ctl, struct ctl_op *op, const struct md_topic *nt)
{
	for (int32_t i = 0; i < nt->nparts; i++) {
		int32_t shard = ctl_part_open_on(ctl, nt->id, i);
		struct part_proxy px;

		if (shard < 0)
			continue;   /* not open on this node */
		op->pending++;
		part_proxy_set_config(ctl_part_proxy(ctl, &px), shard, part_addr_of(nt->id, i), &nt->cfg, ctl_part_done,
				      op);
	}
}

/* Retire each partition of served topic t that is open on this node: out
 * of the book, closed on its shard (one pending each). */
void ctl_topic_retire_parts(struct ctl *ctl, struct ctl_op *op, const struct md_topic *t)
{
	for (int32_t j = 0; j < t->nparts; j++) {
		int32_t shard = ctl_home_take(ctl->homes, t->id, j);
		struct part_proxy px;

		if (shard < 0)
			continue;   /* not open here */
		op->pending++;
		part_proxy_retire(ctl_part_proxy(ctl, &px), shard, part_addr_of(t->id, j), ctl_part_done, op);
	}
}

/* Claim descriptors for `need` new partitions (one each: the active
 * segment's file; more come with more segments, out of the reserve), or
 * refuse the topic before anything is written or opened. Counted once per
 * request; opens still in flight from earlier requests count as used, and
 * so do earlier claims whose opens are not sent yet (a create opens its
 * partitions once its record is applied, turns later: two creates that
 * each fit alone must not both pass). */
int ctl_fd_claim(struct ctl *ctl, struct ctl_op *op, struct ctl_topic *ct, int64_t need)
{
	int64_t in_use, limit = 0;

	if (op->fd_free == INT64_MIN) {
		if (fd_usage(&in_use, &limit) < 0) {
			op->fd_free = INT64_MAX;   /* cannot tell: the opens will */
			return 0;
		}
		op->fd_limit = limit;
		op->fd_free = limit == INT64_MAX ? INT64_MAX
			      : limit - in_use - ctl->fd_opening - ctl->fd_claimed - fd_reserve(limit);
	}
	limit = op->fd_limit;
	if (need <= op->fd_free) {
		if (op->fd_free != INT64_MAX) {
			op->fd_free -= need;
			op->fd_claimed += need;
			ctl->fd_claimed += need;
		}
		return 0;
	}
	ct->error = KERR_INVALID_PARTITIONS;
	snprintf(ct->message, sizeof(ct->message),
		 "%d partitions need %d file descriptors; %d are free of the limit of %d (RLIMIT_NOFILE) "
		 "beyond %d kept in reserve: raise ulimit -n or LimitNOFILE=",
		 (int)need, (int)need, (int)(op->fd_free > 0 ? op->fd_free : 0), (int)limit, (int)fd_reserve(limit));
	return -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Partition idx of a topic being dropped leaves the book; its log closes
 * if it opened. */
static void ctl_close_dropped(struct ctl *ctl, struct ctl_op *op, const struct md_topic *t, int32_t idx)
{
	int32_t shard = ctl_home_take(ctl->homes, t->id, idx);
	struct part_proxy px;

	if (shard < 0)
		return;
	op->pending++;
	part_proxy_close(ctl_part_proxy(ctl, &px), shard, part_addr_of(t->id, idx), ctl_part_done, op);
}

static void ctl_step_propose(struct ctl *ctl, struct ctl_op *op, const char *name, int partitions,
			     struct metalog_rec *r, int rc);

/* A topic some of whose partitions could not be opened (too many open
 * files, a full or failing disk) is not published: its opened partitions
 * are closed again (op->pending counts the answers), the directories its
 * opens made are marked for removal, and the request gets the error. */
static void ctl_drop_failed(struct ctl *ctl, struct ctl_op *op)
{
	for (int i = 0; i < op->ncreated; i++) {
		struct md_topic *t = op->created[i];
		int bad = 0;

		for (int32_t j = 0; j < t->nparts; j++)
			bad |= ctl_part_open_on(ctl, t->id, j) < 0 && ctl_part_hosted(ctl, &t->parts[j]);
		if (!bad && !op->drop[i])
			continue;
		if (op->created_for[i]) {
			struct ctl_topic *ct = op->created_for[i];

			ct->error = KERR_KAFKA_STORAGE_ERROR;
			snprintf(ct->message, sizeof(ct->message), "%s", op->fail_msg);
		}
		for (int j = 0; j < op->nreplaced; j++) {
			struct md_topic *old = op->replaced[j];

			if (old && !strcmp(old->name, t->name)) {
				/* CreatePartitions: the old layout stays; only the new
				 * partitions that did open are closed */
				for (int32_t k = old->nparts; k < t->nparts; k++)
					ctl_close_dropped(ctl, op, t, k);
				op->replaced[j] = op->replaced[--op->nreplaced];
				goto dropped;
			}
		}
		if (op->req && op->req->kind != CTL_CREATE_PARTITIONS) {
			struct metalog_rec r;
			int rc = metalog_build_delete_topic(ctl->ml, t->name, &r);

			ctl_step_propose(ctl, op, t->name, 0, &r, rc);
		}
		for (int32_t k = 0; k < t->nparts; k++)
			ctl_close_dropped(ctl, op, t, k);
dropped:
		for (int k = 0; k < op->nmade; k++)
			op->made_rm[k] |= op->made_for[k] == t;
		slog(SLOG_WARN, "topic %s not created: %s", t->name, op->fail_msg);
		ctl_topic_free(t);
		op->created[i] = op->created[op->ncreated - 1];
		op->created_for[i] = op->created_for[op->ncreated - 1];
		op->drop[i] = op->drop[op->ncreated - 1];
		op->ncreated--;
		i--;
	}
}

/* A record of ctl_op_step's own (the new count of CreatePartitions, the
 * removal of a topic that was not created), answered: the op steps on
 * once none is left. */
struct ctl_step_rec {
	struct ctl_op *op;
	char name[256];
	int partitions;              /* 1: a PARTITIONS record (else REMOVE_TOPIC) */
};

static void ctl_step_rec_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_step_rec *sr = cookie;
	struct ctl_op *op = sr->op;

	(void)a;
	if (err < 0 && sr->partitions) {
		/* the topic is dropped like one whose partitions did not open */
		for (int i = 0; i < op->ncreated; i++)
			if (!strcmp(op->created[i]->name, sr->name))
				op->drop[i] = 1;
		if (!op->failed) {
			op->failed = 1;
			snprintf(op->fail_msg, sizeof(op->fail_msg), "metadata log: %s", strerror(-err));
		}
	} else if (err < 0) {
		slog(SLOG_WARN, "topic %s not created, but its record could not be removed from the "
				"metadata log: %s", sr->name, strerror(-err));
	}
	free(sr);
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
}

static void ctl_step_propose(struct ctl *ctl, struct ctl_op *op, const char *name, int partitions,
			     struct metalog_rec *r, int rc)
{
	struct ctl_step_rec *sr = calloc(1, sizeof(*sr));

	if (!sr)
		abort();   /* the control thread's own bookkeeping */
	sr->op = op;
	sr->partitions = partitions;
	snprintf(sr->name, sizeof(sr->name), "%s", name);
	op->pending++;
	if (rc < 0)
		ctl_meta_refuse(ctl, rc, ctl_step_rec_done, sr);
	else
		ctl_meta_propose(ctl, r, ctl_step_rec_done, sr);
}

/* CreatePartitions: every new partition of a topic opened; now the
 * metadata log says so (a proposal each, counted in op->pending). A topic
 * whose record is refused is dropped like one whose partitions did not
 * open. */
static void ctl_commit_partitions(struct ctl *ctl, struct ctl_op *op)
{
	for (int i = 0; i < op->ncreated; i++) {
		struct md_topic *t = op->created[i];
		struct metalog_rec r;
		int opened = 1, rc;

		for (int32_t j = 0; j < t->nparts; j++)
			opened &= ctl_part_open_on(ctl, t->id, j) >= 0 || !ctl_part_hosted(ctl, &t->parts[j]);
		if (!opened)
			continue;
		/* the new count, then the placement of the new partitions (as
		 * ctl_admin.c built them into t) */
		const struct meta_topic *mt = metalog_topic(ctl->ml, t->name);
		struct metalog_rec *recs = NULL;
		int nrecs = 0, rf = mt && mt->partitions < t->nparts ? t->parts[mt->partitions].nreplicas : 0;
		int32_t from = mt ? mt->partitions : 0, *ids = NULL;

		rc = mt ? 0 : -ENOENT;
		if (rc == 0 && from < t->nparts) {
			ids = xcalloc((size_t)(t->nparts - from) * (size_t)rf, sizeof(*ids));
			for (int32_t j = from; j < t->nparts; j++)
				memcpy(&ids[(size_t)(j - from) * rf], t->parts[j].replicas, (size_t)rf * sizeof(*ids));
		}
		if (rc == 0)
			rc = metalog_build_partitions_placed(ctl->ml, t->name, t->nparts, rf, ids, &recs, &nrecs);
		free(ids);
		if (rc < 0) {
			ctl_step_propose(ctl, op, t->name, 1, &r, rc);
			continue;
		}
		for (int k = 0; k < nrecs; k++)
			ctl_step_propose(ctl, op, t->name, 1, &recs[k], 0);
		free(recs);
	}
}

void ctl_op_step(struct ctl *ctl, struct ctl_op *op)
{
	struct ctl_req *req = op->req;

	if (req && req->kind == CTL_CREATE_PARTITIONS && !op->dropping && !op->committed) {
		op->committed = 1;
		ctl_commit_partitions(ctl, op);
		if (op->pending)
			return;   /* again when the records were applied */
	}
	if (op->failed && req && !op->dropping) {
		op->dropping = 1;
		ctl_drop_failed(ctl, op);
		if (op->pending)
			return;   /* again when the shards have closed them */
	}
	/* a dropped topic's directories that its opens made (closed now) */
	for (int i = 0; i < op->nmade; i++) {
		if (op->made_rm[i])
			nftw(op->made[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(op->made[i]);
	}
	free(op->made);
	free(op->made_for);
	free(op->made_rm);

	ctl_publish(ctl, op->created, op->ncreated, op->deleted, op->ndeleted, op->replaced, op->nreplaced);
	/* Roles again for what this op opened: a partition's role went out as
	 * it opened (ctl_role_opened, from the image of that moment), and a
	 * partition record applied between that and this publish found no
	 * served entry (ctl_roles_refresh looks at the published snapshot),
	 * so it reached nobody: a node restarting while its partitions'
	 * leader moved kept the old leader (itself, or a dead one) and never
	 * fetched from the new one. role_send skips what was told already.
	 * Also partitions opened before their records (roles_pending). */
	if (ctl->roles_pending || op->ncreated) {
		ctl->roles_pending = 0;
		ctl->roles_changed = 1;
	}
	/* deleted topics: their logs are closed, remove the files */
	for (int i = 0; i < op->ndeleted; i++)
		for (int32_t j = 0; j < op->deleted[i]->nparts; j++) {
			char dir[4400];

			snprintf(dir, sizeof(dir), "%s/%s-%d", ctl->b->set.data_dir, op->deleted[i]->name, j);
			nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		}
	if (req)
		ctl_reply(ctl, req->ctx, req->from);
	else
		op->started(ctl, op);   /* start-up: ctl.c goes on from here */
	/* what was claimed and never opened (validate_only, a refused
	 * record, a failed create) is free again */
	ctl->fd_claimed -= op->fd_claimed;
	free(op->created);
	free(op->created_for);
	free(op->drop);
	free(op->deleted);
	free(op->replaced);
	free(op);
	ctl->ops_open--;
}

/* The broker config in effect: the static one (file, --set), then the
 * cluster-wide defaults changed at run time, then this node's own. A
 * record the static config now refuses (a key made static, a value out of
 * a new range) is skipped with a warning. */
int ctl_build_cfg(struct ctl *ctl, struct config **out)
{
	struct config *c;
	int rc = config_dup(ctl->cfg, &c);

	if (rc < 0)
		return rc;
	for (int pass = 0; pass < 2; pass++) {
		int32_t scope;
		const char *k, *v;

		for (int i = 0; metalog_broker_config_at(ctl->ml, i, &scope, &k, &v) == 0; i++) {
			char err[512];

			/* a listener's stores are a node's own (a cluster-wide one is
			 * refused when proposed) */
			if (pass == 0 ? scope != META_SCOPE_CLUSTER || config_dynamic_per_broker(k)
				      : scope != ctl->b->set.node_id)
				continue;
			if (!config_dynamic(k) ||
			    config_set(c, k, v, pass ? "dynamic-broker" : "dynamic-default", err, sizeof(err)) < 0)
				slog(SLOG_WARN, "broker config %s=%s of the metadata log not applied",
					k, config_sensitive(k) ? "(sensitive, not shown)" : v);
		}
	}
	*out = c;
	return 0;
}

/* Teardown, the shards stopped: the snapshot, its topics, what is
 * retired, the effective configs and the published blocks. */
void ctl_topics_fini(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	struct md_snapshot *md = b->md;
	struct config *mdcfg = md ? (struct config *)md->cfg : NULL;

	for (int i = 0; md && i < md->ntopics; i++)
		ctl_topic_free(md->topics[i]);
	if (md) {
		free(md->topics);
		free(md->by_id);
		free(md->brokers);
		free(md->scram);
		free((void *)md->acls.b);
		free(md);
	}
	b->md = NULL;
	while (ctl->retired) {
		struct retired *r = ctl->retired;

		ctl->retired = r->next;
		retired_free(r);
	}
	if (mdcfg != ctl->eff)
		config_destroy(mdcfg);
	config_destroy(ctl->eff);
	ctl->eff = NULL;
	ctl_homes_free(ctl->homes);
	ctl->homes = NULL;
}
