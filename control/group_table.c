/* control/group_table.c — the group coordinator's tables: groups by id,
 * their members and which member owns which partition, their committed
 * offsets; and the response memory the coordinator's answers are built in
 * (group_alloc and friends). The membership state machine (group.c) and
 * the committed offsets (group_offsets.c) build on it. @thread ctl, but
 * for the protocol blobs' reference counts (see struct gblob).
 * Shared state: group_table.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/group_table.h"
#include "control/hmap.h"
#include "dataplane/kafka_ctx.h"


/* A member's protocol metadata (struct gmember's pmeta[i] points at data).
 * The responses that carry it (JoinGroup to the leader, DescribeGroups)
 * hold a reference instead of a copy: a shard encodes them after the
 * coordinator has moved on, maybe past the member's leaving. The member
 * holds one reference and each response one (dropped by group_mem_free on
 * the shard when the request ends); the last one frees it. refs: atomic,
 * as those are two threads. A 60 MiB JoinGroup thus costs its frame, this
 * copy and the encoded response, not a fourth copy in the response
 * memory. */
struct gblob {
	int refs;
	_Alignas(16) uint8_t data[];
};

static uint8_t *gblob_new(const uint8_t *src, int32_t n)
{
	struct gblob *b = xcalloc(1, sizeof(*b) + (size_t)n + 1);

	b->refs = 1;
	if (n)
		memcpy(b->data, src, (size_t)n);
	return b->data;
}

static void gblob_unref(uint8_t *data)
{
	struct gblob *b;

	if (!data)
		return;
	b = (struct gblob *)(void *)(data - offsetof(struct gblob, data));
	if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
}

/* ---- response memory --------------------------------------------------- */

void *group_alloc(struct group_call *call, size_t n)
{
	struct gmem *m = call->mem;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!n)
		n = 16;
	if (!m || m->cap - m->used < n) {
		size_t cap = n > 16384 ? n : 16384;

		m = malloc(sizeof(*m) + cap);
		if (!m)
			abort();
		m->next = call->mem;
		m->used = 0;
		m->cap = cap;
		m->blob = NULL;
		call->mem = m;
	}
	p = m->data + m->used;
	m->used += n;
	memset(p, 0, n);
	return p;
}


struct kafka_str group_str(struct group_call *call, const char *s)
{
	char *p;
	size_t n;

	if (!s)
		return (struct kafka_str){ NULL, -1 };
	n = strlen(s);
	p = group_alloc(call, n + 1);
	memcpy(p, s, n);
	return (struct kafka_str){ p, (int32_t)n };
}

struct kafka_bytes group_bytes(struct group_call *call, const uint8_t *b, int32_t n)
{
	uint8_t *p;

	if (!b || n < 0)
		return (struct kafka_bytes){ NULL, n < 0 ? -1 : 0 };
	p = group_alloc(call, (size_t)n);
	memcpy(p, b, (size_t)n);
	return (struct kafka_bytes){ p, n };
}

/* A member's metadata in a response: referenced (struct gblob), not
 * copied; the reference goes when the response memory does. */
struct kafka_bytes group_bytes_ref(struct group_call *call, uint8_t *blob, int32_t n)
{
	struct gblob *b;
	struct gmem *m;

	if (!blob || n < 0)
		return (struct kafka_bytes){ NULL, n < 0 ? -1 : 0 };
	b = (struct gblob *)(void *)(blob - offsetof(struct gblob, data));
	m = malloc(sizeof(*m));
	if (!m)
		abort();
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	m->used = m->cap = 0;
	m->blob = blob;
	if (call->mem) {
		/* behind the chunk galloc fills */
		m->next = call->mem->next;
		call->mem->next = m;
	} else {
		m->next = NULL;
		call->mem = m;
	}
	return (struct kafka_bytes){ blob, n };
}

/* A wire string copied into the response memory (null stays null). */
struct kafka_str group_kcopy(struct group_call *call, struct kafka_str s)
{
	char *p;

	if (s.len < 0 || !s.ptr)
		return (struct kafka_str){ NULL, -1 };
	p = group_alloc(call, (size_t)s.len + 1);
	memcpy(p, s.ptr, (size_t)s.len);
	return (struct kafka_str){ p, s.len };
}

void group_mem_free(struct gmem *m)
{
	while (m) {
		struct gmem *nx = m->next;

		gblob_unref(m->blob);
		free(m);
		m = nx;
	}
}

/* Hand the request back to its shard: it encodes ctx->resp. */
void group_reply(struct group_coord *gc, struct kafka_ctx *ctx)
{
	struct group_call *call = ctx->state;

	ctl_reply(gc->ctl, ctx, call->from);
}


/* ---- groups, members, offsets ------------------------------------------- */

/* by enum gstate, as Kafka names them */
const char *const group_state_names[] = { "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead" };

static int group_eq(const void *item, const void *key)
{
	return !strcmp(((const struct group *)item)->id, key);
}


static int offset_eq(const void *item, const void *key)
{
	const struct goffset *o = item;
	const struct tpkey *k = key;

	return o->part == k->part && !strcmp(o->topic, k->topic);
}

static int owner_eq(const void *item, const void *key)
{
	const struct gowner *o = item;
	const struct tpkey *k = key;

	return o->part == k->part && !strcmp(o->topic, k->topic);
}

struct group *group_find(struct group_coord *gc, const char *id)
{
	int64_t i = hmap_find(&gc->groups, hmap_hash_str(id), group_eq, id);

	return i < 0 ? NULL : gc->groups.v[i];
}

struct group *group_findk(struct group_coord *gc, struct kafka_str id)
{
	char buf[512];

	if (id.len < 0 || (size_t)id.len >= sizeof(buf))
		return NULL;
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	return group_find(gc, buf);
}

struct group *group_new(struct group_coord *gc, const char *id)
{
	struct group *g = xcalloc(1, sizeof(*g));

	g->id = sdup(id);
	g->state = G_EMPTY;
	g->empty_since = ctl_wall_ms(gc->ctl);
	hmap_put(&gc->groups, hmap_hash_str(id), g);
	return g;
}

struct goffset *group_offset_find(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->offsets, group_hash_tp(topic, part), offset_eq, &k);

	return i < 0 ? NULL : g->offsets.v[i];
}

void group_offset_set(struct group *g, const char *topic, int32_t part, int64_t off, int32_t epoch,
		       const char *meta, int64_t ts)
{
	struct goffset *o = group_offset_find(g, topic, part);

	if (!o) {
		o = xcalloc(1, sizeof(*o));
		o->topic = sdup(topic);
		o->part = part;
		o->hw = -1;           /* unknown until a lag scan answers */
		o->oldest_ts = -1;
		hmap_put(&g->offsets, group_hash_tp(topic, part), o);
	}
	o->offset = off;
	o->epoch = epoch;
	free(o->meta);
	o->meta = sdup(meta ? meta : "");
	o->commit_ts = ts;
}

void group_offset_del(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->offsets, group_hash_tp(topic, part), offset_eq, &k);
	struct goffset *o;

	if (i < 0)
		return;
	o = g->offsets.v[i];
	hmap_del_at(&g->offsets, (uint32_t)i);
	free(o->topic);
	free(o->meta);
	free(o);
}

void group_owners_clear(struct group *g)
{
	for (uint32_t i = 0; i < g->owners.cap; i++) {
		struct gowner *o = g->owners.v[i];

		if (o) {
			free(o->topic);
			free(o);
		}
	}
	hmap_free(&g->owners);
}

struct gmember *group_owner_of(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->owners, group_hash_tp(topic, part), owner_eq, &k);

	return i < 0 ? NULL : ((struct gowner *)g->owners.v[i])->m;
}

/* The partitions a consumer-protocol assignment gives m. */
void group_owners_add(struct group *g, struct gmember *m)
{
	struct kafka_consumer_protocol_assignment a;
	struct kafka_cursor c;
	struct kafka_arena ar;
	void *mem;
	int16_t ver;

	if (!m->assign || m->assign_len < 2)
		return;
	mem = malloc(kafka_arena_bound((size_t)m->assign_len));
	if (!mem)
		return;
	kafka_arena_init(&ar, mem, kafka_arena_bound((size_t)m->assign_len));
	kafka_cursor_init(&c, m->assign, (size_t)m->assign_len);
	ver = kafka_cursor_int16(&c);
	if (ver > 3)
		ver = 3;   /* newer versions add fields after these */
	kafka_consumer_protocol_assignment_init(&a);
	if (ver >= 0 && kafka_consumer_protocol_assignment_decode(&c, &ar, ver, &a) == 0) {
		for (int32_t i = 0; i < a.AssignedPartitions.count; i++) {
			struct kafka_consumer_protocol_assignment_topic_partition *tp = &a.AssignedPartitions.items[i];
			char *topic = kdup(tp->Topic);

			for (int32_t j = 0; topic && j < tp->Partitions.count; j++) {
				struct gowner *o;

				if (group_owner_of(g, topic, tp->Partitions.items[j]))
					continue;   /* the leader gave it twice: the first owner stands */
				o = xcalloc(1, sizeof(*o));
				o->topic = sdup(topic);
				o->part = tp->Partitions.items[j];
				o->m = m;
				hmap_put(&g->owners, group_hash_tp(topic, o->part), o);
			}
			free(topic);
		}
	}
	free(mem);
}

void group_owners_drop_member(struct group *g, struct gmember *m)
{
	for (uint32_t i = 0; i < g->owners.cap;) {
		struct gowner *o = g->owners.v[i];

		if (o && o->m == m) {
			hmap_del_at(&g->owners, i);
			free(o->topic);
			free(o);
			continue;   /* slot i now holds a shifted entry */
		}
		i++;
	}
}

struct gmember *group_member_find(struct group *g, struct kafka_str id)
{
	for (struct gmember *m = g->members; m; m = m->next)
		if (keq(id, m->id))
			return m;
	return NULL;
}

struct gmember *group_member_by_instance(struct group *g, struct kafka_str inst)
{
	if (inst.len < 0)
		return NULL;
	for (struct gmember *m = g->members; m; m = m->next)
		if (m->instance && keq(inst, m->instance))
			return m;
	return NULL;
}

void group_member_set_protocols(struct gmember *m, const struct kafka_join_group_request *q)
{
	for (int i = 0; i < m->nprot; i++) {
		free(m->pname[i]);
		gblob_unref(m->pmeta[i]);
	}
	free(m->pname);
	free(m->pmeta);
	free(m->pmeta_len);
	m->nprot = q->Protocols.count > 0 ? q->Protocols.count : 0;
	m->pname = xcalloc((size_t)m->nprot, sizeof(char *));
	m->pmeta = xcalloc((size_t)m->nprot, sizeof(uint8_t *));
	m->pmeta_len = xcalloc((size_t)m->nprot, sizeof(int32_t));
	for (int i = 0; i < m->nprot; i++) {
		const struct kafka_join_group_request_join_group_request_protocol *p = &q->Protocols.items[i];

		m->pname[i] = kdup(p->Name);
		if (!m->pname[i])
			m->pname[i] = sdup("");
		m->pmeta_len[i] = p->Metadata.len > 0 ? p->Metadata.len : 0;
		m->pmeta[i] = gblob_new(p->Metadata.ptr, m->pmeta_len[i]);
	}
}

/* Same protocols, same metadata, same order. */
int group_member_same_protocols(const struct gmember *m, const struct kafka_join_group_request *q)
{
	if (m->nprot != q->Protocols.count)
		return 0;
	for (int i = 0; i < m->nprot; i++) {
		const struct kafka_join_group_request_join_group_request_protocol *p = &q->Protocols.items[i];

		if (!keq(p->Name, m->pname[i]) || p->Metadata.len != m->pmeta_len[i] ||
		    (m->pmeta_len[i] && memcmp(p->Metadata.ptr, m->pmeta[i], (size_t)m->pmeta_len[i])))
			return 0;
	}
	return 1;
}

int group_member_supports(const struct gmember *m, const char *protocol)
{
	for (int i = 0; i < m->nprot; i++)
		if (!strcmp(m->pname[i], protocol))
			return i;
	return -1;
}

void group_member_free(struct gmember *m)
{
	for (int i = 0; i < m->nprot; i++) {
		free(m->pname[i]);
		gblob_unref(m->pmeta[i]);
	}
	free(m->pname);
	free(m->pmeta);
	free(m->pmeta_len);
	free(m->assign);
	free(m->id);
	free(m->instance);
	free(m->client_id);
	free(m->host);
	free(m);
}

void group_free(struct group *g)
{
	while (g->members) {
		struct gmember *m = g->members;

		g->members = m->next;
		group_member_free(m);
	}
	while (g->pending) {
		struct gpending *p = g->pending;

		g->pending = p->next;
		free(p->id);
		free(p);
	}
	for (uint32_t i = 0; i < g->offsets.cap; i++) {
		struct goffset *o = g->offsets.v[i];

		if (o) {
			free(o->topic);
			free(o->meta);
			free(o);
		}
	}
	hmap_free(&g->offsets);
	group_owners_clear(g);
	while (g->txn) {
		struct gtxn *x = g->txn;

		g->txn = x->next;
		free(x->topic);
		free(x->meta);
		free(x);
	}
	free(g->id);
	free(g->ptype);
	free(g->protocol);
	free(g->leader);
	free(g);
}

void group_remove(struct group_coord *gc, struct group *g)
{
	int64_t i = hmap_find(&gc->groups, hmap_hash_str(g->id), group_eq, g->id);

	if (i >= 0 && gc->groups.v[i] == g)
		hmap_del_at(&gc->groups, (uint32_t)i);
	g->dead = 1;
	g->state = G_DEAD;
	if (!g->writes)
		group_free(g);
}


void group_event_add(struct group_coord *gc, struct group *g, int kind, const char *who)
{
	struct group_event *e = &g->events[g->nevents++ % GROUP_EVENTS];

	e->wall_ms = ctl_wall_ms(gc->ctl);
	e->generation = g->generation;
	e->kind = (int16_t)kind;
	e->members = (int16_t)(g->nmembers < INT16_MAX ? g->nmembers : INT16_MAX);
	snprintf(e->who, sizeof(e->who), "%s", who ? who : "");
}
