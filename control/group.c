/* control/group.c — the group coordinator (see group.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "control/config.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/txn.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/shard.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

/* Kafka error codes of the group APIs (kept here: only the coordinator
 * uses them). */
enum {
	KERR_ILLEGAL_GENERATION = 22,
	KERR_INCONSISTENT_GROUP_PROTOCOL = 23,
	KERR_UNKNOWN_MEMBER_ID = 25,
	KERR_INVALID_SESSION_TIMEOUT = 26,
	KERR_REBALANCE_IN_PROGRESS = 27,
	KERR_INVALID_COMMIT_OFFSET_SIZE = 28,
	KERR_NON_EMPTY_GROUP = 68,
	KERR_GROUP_ID_NOT_FOUND = 69,
	KERR_MEMBER_ID_REQUIRED = 79,
	KERR_GROUP_MAX_SIZE_REACHED = 81,
	KERR_FENCED_INSTANCE_ID = 82,
	KERR_GROUP_SUBSCRIBED_TO_TOPIC = 86,
};

enum gstate { G_EMPTY, G_PREPARING, G_COMPLETING, G_STABLE, G_DEAD };
static const char *const state_names[] = { "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead" };

/* ---- a small open-addressing hash map of pointers ------------------------ */

struct hmap {
	void **v;
	uint64_t *h;
	uint32_t cap, n;          /* cap: power of two or 0 */
};

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static uint64_t hash_str(const char *s)
{
	return hash_bytes(14695981039346656037ull, s, strlen(s));
}

static uint64_t hash_tp(const char *topic, int32_t part)
{
	return hash_bytes(hash_str(topic), &part, sizeof(part));
}

static void hmap_put(struct hmap *m, uint64_t h, void *v);

static void hmap_grow(struct hmap *m)
{
	struct hmap old = *m;

	m->cap = old.cap ? old.cap * 2 : 16;
	m->n = 0;
	m->v = calloc(m->cap, sizeof(*m->v));
	m->h = calloc(m->cap, sizeof(*m->h));
	if (!m->v || !m->h)
		abort();
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.v[i])
			hmap_put(m, old.h[i], old.v[i]);
	free(old.v);
	free(old.h);
}

static void hmap_put(struct hmap *m, uint64_t h, void *v)
{
	uint32_t i;

	if ((m->n + 1) * 10 > m->cap * 7)
		hmap_grow(m);
	for (i = (uint32_t)h & (m->cap - 1); m->v[i]; i = (i + 1) & (m->cap - 1))
		;
	m->v[i] = v;
	m->h[i] = h;
	m->n++;
}

/* The slot holding an item equal to key, or -1. */
static int64_t hmap_find(const struct hmap *m, uint64_t h, int (*eq)(const void *item, const void *key),
			 const void *key)
{
	if (!m->cap)
		return -1;
	for (uint32_t i = (uint32_t)h & (m->cap - 1); m->v[i]; i = (i + 1) & (m->cap - 1))
		if (m->h[i] == h && eq(m->v[i], key))
			return i;
	return -1;
}

/* Remove slot i (backward-shift deletion keeps probe chains whole). */
static void hmap_del_at(struct hmap *m, uint32_t i)
{
	uint32_t mask = m->cap - 1, j = i;

	m->v[i] = NULL;
	m->n--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!m->v[j])
			return;
		home = (uint32_t)m->h[j] & mask;
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->v[i] = m->v[j];
			m->h[i] = m->h[j];
			m->v[j] = NULL;
			i = j;
		}
	}
}

static void hmap_free(struct hmap *m)
{
	free(m->v);
	free(m->h);
	memset(m, 0, sizeof(*m));
}

/* ---- state ----------------------------------------------------------------- */

struct goffset {
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t commit_ts;
	/* from the last lag scan (group_report) */
	int64_t hw;                   /* -1: unknown */
	int64_t oldest_ts;            /* timestamp of the record at `offset`; -1: none (caught up) */
};

struct gowner {               /* who owns a partition in the current assignment */
	char *topic;
	int32_t part;
	struct gmember *m;
};

struct gmember {
	char *id, *instance, *client_id, *host;
	int32_t session_ms, rebalance_ms;
	int nprot;
	char **pname;
	uint8_t **pmeta;
	int32_t *pmeta_len;
	uint8_t *assign;
	int32_t assign_len;
	struct kafka_ctx *join;       /* a JoinGroup waiting for the rebalance */
	struct kafka_ctx *sync;       /* a SyncGroup waiting for the leader */
	int64_t deadline;             /* session expiry (monotonic ms) */
	struct gmember *next;
};

struct gpending {             /* a member id handed out with MEMBER_ID_REQUIRED */
	char *id;
	int64_t deadline;
	struct gpending *next;
};

struct group {
	char *id;
	enum gstate state;
	int32_t generation;
	char *ptype, *protocol, *leader;
	struct gmember *members;
	int nmembers;
	struct gpending *pending;
	int64_t rebalance_deadline;   /* PREPARING: complete by then at the latest */
	int64_t delay_deadline;       /* PREPARING from empty: wait this long for more joins */
	int64_t empty_since;          /* wall ms */
	struct hmap offsets;          /* struct goffset */
	struct hmap owners;           /* struct gowner, from the consumer assignment */
	int writes;                   /* appends in flight */
	int dead;                     /* deleted: freed when no write is in flight */
	struct gtxn *txn;             /* offsets of open transactions (TxnOffsetCommit) */
};

struct gtxn {                 /* an offset committed inside a transaction, not yet decided */
	int64_t pid;
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t ts;
	struct gtxn *next;
};

struct gmem {
	struct gmem *next;
	size_t used, cap;
	uint8_t *blob;                /* or a reference to a member's metadata (cap 0) */
	_Alignas(16) unsigned char data[];
};

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

struct gentry {               /* one record of an offsets append */
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t ts;
	int del;
	int16_t *err;                 /* the response slot, or NULL */
};

struct gwrite {
	struct group_coord *gc;
	struct group *g;
	struct kafka_ctx *ctx;        /* NULL: expiry */
	uint8_t *batch;
	int n;
	struct gentry *e;
	int remove_group;             /* DeleteGroups: drop the group once durable */
	int64_t txn_pid;              /* TxnOffsetCommit: the producer; -1: plain offsets */
};

struct group_coord {
	struct ctl *ctl;
	struct broker *b;
	const struct config *cfg;
	struct hmap groups;           /* struct group */
	const struct md_topic *otopic;
	int32_t min_session, max_session, max_size, initial_delay;
	int64_t retention_ms, retention_check_ms, next_expiry;
	int32_t max_meta;
	int stopping;
	int dirty;                    /* membership changed: deadlines may be earlier */
	int64_t next_due;             /* the earliest deadline at the last scan */
	int replays;
	void (*replay_done)(struct ctl *ctl);
	int lag_queries;              /* outstanding in the current lag scan */
	int report_wanted;            /* print the report when the scan completes (SIGUSR1) */
	struct group_stats st;
};

static char *sdup(const char *s)
{
	return s ? kdup((struct kafka_str){ s, (int32_t)strlen(s) }) : NULL;
}

static int keq(struct kafka_str s, const char *c)
{
	if (s.len < 0 || !c)
		return s.len < 0 && !c;
	return strlen(c) == (size_t)s.len && !memcmp(s.ptr, c, (size_t)s.len);
}

static int kempty(struct kafka_str s)
{
	return s.len <= 0;
}

/* ---- response memory --------------------------------------------------- */

static void *galloc(struct group_call *call, size_t n)
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

#define GALLOC(call, type, n) ((type *)galloc((call), sizeof(type) * (size_t)((n) > 0 ? (n) : 1)))

static struct kafka_str gstr(struct group_call *call, const char *s)
{
	char *p;
	size_t n;

	if (!s)
		return (struct kafka_str){ NULL, -1 };
	n = strlen(s);
	p = galloc(call, n + 1);
	memcpy(p, s, n);
	return (struct kafka_str){ p, (int32_t)n };
}

static struct kafka_bytes gbytes(struct group_call *call, const uint8_t *b, int32_t n)
{
	uint8_t *p;

	if (!b || n < 0)
		return (struct kafka_bytes){ NULL, n < 0 ? -1 : 0 };
	p = galloc(call, (size_t)n);
	memcpy(p, b, (size_t)n);
	return (struct kafka_bytes){ p, n };
}

/* A member's metadata in a response: referenced (struct gblob), not
 * copied; the reference goes when the response memory does. */
static struct kafka_bytes gbytes_ref(struct group_call *call, uint8_t *blob, int32_t n)
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
static struct kafka_str kcopy(struct group_call *call, struct kafka_str s)
{
	char *p;

	if (s.len < 0 || !s.ptr)
		return (struct kafka_str){ NULL, -1 };
	p = galloc(call, (size_t)s.len + 1);
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
static void reply(struct group_coord *gc, struct kafka_ctx *ctx)
{
	struct group_call *call = ctx->state;

	ctl_reply(gc->ctl, ctx, call->from);
}

static struct group_call *call_of(struct kafka_ctx *ctx)
{
	return ctx->state;
}

/* ---- groups, members, offsets ------------------------------------------- */

static int group_eq(const void *item, const void *key)
{
	return !strcmp(((const struct group *)item)->id, key);
}

struct tpkey {
	const char *topic;
	int32_t part;
};

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

static struct group *group_find(struct group_coord *gc, const char *id)
{
	int64_t i = hmap_find(&gc->groups, hash_str(id), group_eq, id);

	return i < 0 ? NULL : gc->groups.v[i];
}

static struct group *group_findk(struct group_coord *gc, struct kafka_str id)
{
	char buf[512];

	if (id.len < 0 || (size_t)id.len >= sizeof(buf))
		return NULL;
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	return group_find(gc, buf);
}

static struct group *group_new(struct group_coord *gc, const char *id)
{
	struct group *g = xcalloc(1, sizeof(*g));

	g->id = sdup(id);
	g->state = G_EMPTY;
	g->empty_since = wall_ms();
	hmap_put(&gc->groups, hash_str(id), g);
	return g;
}

static struct goffset *offset_find(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->offsets, hash_tp(topic, part), offset_eq, &k);

	return i < 0 ? NULL : g->offsets.v[i];
}

static void offset_set(struct group *g, const char *topic, int32_t part, int64_t off, int32_t epoch,
		       const char *meta, int64_t ts)
{
	struct goffset *o = offset_find(g, topic, part);

	if (!o) {
		o = xcalloc(1, sizeof(*o));
		o->topic = sdup(topic);
		o->part = part;
		hmap_put(&g->offsets, hash_tp(topic, part), o);
	}
	o->offset = off;
	o->epoch = epoch;
	free(o->meta);
	o->meta = sdup(meta ? meta : "");
	o->commit_ts = ts;
}

static void offset_del(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->offsets, hash_tp(topic, part), offset_eq, &k);
	struct goffset *o;

	if (i < 0)
		return;
	o = g->offsets.v[i];
	hmap_del_at(&g->offsets, (uint32_t)i);
	free(o->topic);
	free(o->meta);
	free(o);
}

static void owners_clear(struct group *g)
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

static struct gmember *owner_of(struct group *g, const char *topic, int32_t part)
{
	struct tpkey k = { topic, part };
	int64_t i = hmap_find(&g->owners, hash_tp(topic, part), owner_eq, &k);

	return i < 0 ? NULL : ((struct gowner *)g->owners.v[i])->m;
}

/* The partitions a consumer-protocol assignment gives m. */
static void owners_add(struct group *g, struct gmember *m)
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

				if (owner_of(g, topic, tp->Partitions.items[j]))
					continue;   /* the leader gave it twice: the first owner stands */
				o = xcalloc(1, sizeof(*o));
				o->topic = sdup(topic);
				o->part = tp->Partitions.items[j];
				o->m = m;
				hmap_put(&g->owners, hash_tp(topic, o->part), o);
			}
			free(topic);
		}
	}
	free(mem);
}

static void owners_drop_member(struct group *g, struct gmember *m)
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

static struct gmember *member_find(struct group *g, struct kafka_str id)
{
	for (struct gmember *m = g->members; m; m = m->next)
		if (keq(id, m->id))
			return m;
	return NULL;
}

static struct gmember *member_by_instance(struct group *g, struct kafka_str inst)
{
	if (inst.len < 0)
		return NULL;
	for (struct gmember *m = g->members; m; m = m->next)
		if (m->instance && keq(inst, m->instance))
			return m;
	return NULL;
}

static void member_set_protocols(struct gmember *m, const struct kafka_join_group_request *q)
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
static int member_same_protocols(const struct gmember *m, const struct kafka_join_group_request *q)
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

static int member_supports(const struct gmember *m, const char *protocol)
{
	for (int i = 0; i < m->nprot; i++)
		if (!strcmp(m->pname[i], protocol))
			return i;
	return -1;
}

static void member_free(struct gmember *m)
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

static void group_free(struct group *g)
{
	while (g->members) {
		struct gmember *m = g->members;

		g->members = m->next;
		member_free(m);
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
	owners_clear(g);
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

static void group_remove(struct group_coord *gc, struct group *g)
{
	int64_t i = hmap_find(&gc->groups, hash_str(g->id), group_eq, g->id);

	if (i >= 0 && gc->groups.v[i] == g)
		hmap_del_at(&gc->groups, (uint32_t)i);
	g->dead = 1;
	g->state = G_DEAD;
	if (!g->writes)
		group_free(g);
}

/* ---- answers to the membership calls ------------------------------------- */

static void join_error(struct group_coord *gc, struct kafka_ctx *ctx, int16_t err, const char *member)
{
	struct group_call *call = call_of(ctx);
	struct kafka_join_group_response *r = GALLOC(call, struct kafka_join_group_response, 1);

	kafka_join_group_response_init(r);
	r->ErrorCode = err;
	r->GenerationId = -1;
	r->ProtocolName = gstr(call, "");
	r->Leader = gstr(call, "");
	r->MemberId = gstr(call, member ? member : "");
	r->Members.count = 0;
	r->Members.items = GALLOC(call, struct kafka_join_group_response_join_group_response_member, 0);
	ctx->resp = r;
	reply(gc, ctx);
}

/* Answer m's waiting JoinGroup with the current generation; the leader
 * gets every member's metadata for the chosen protocol. */
static void join_answer(struct group_coord *gc, struct group *g, struct gmember *m)
{
	struct kafka_ctx *ctx = m->join;
	struct group_call *call = call_of(ctx);
	struct kafka_join_group_response *r = GALLOC(call, struct kafka_join_group_response, 1);
	int leader = g->leader && !strcmp(g->leader, m->id);

	m->join = NULL;
	kafka_join_group_response_init(r);
	r->ErrorCode = 0;
	r->GenerationId = g->generation;
	r->ProtocolName = gstr(call, g->protocol ? g->protocol : "");
	r->Leader = gstr(call, g->leader ? g->leader : "");
	r->MemberId = gstr(call, m->id);
	r->Members.count = leader ? g->nmembers : 0;
	r->Members.items = GALLOC(call, struct kafka_join_group_response_join_group_response_member, r->Members.count);
	if (leader) {
		int i = 0;

		for (struct gmember *x = g->members; x; x = x->next, i++) {
			int pi = g->protocol ? member_supports(x, g->protocol) : -1;

			r->Members.items[i].MemberId = gstr(call, x->id);
			r->Members.items[i].GroupInstanceId = gstr(call, x->instance);
			r->Members.items[i].Metadata = pi >= 0 ? gbytes_ref(call, x->pmeta[pi], x->pmeta_len[pi])
							       : (struct kafka_bytes){ NULL, 0 };
		}
	}
	ctx->resp = r;
	reply(gc, ctx);
}

static void sync_answer(struct group_coord *gc, struct kafka_ctx *ctx, int16_t err, const uint8_t *a, int32_t alen)
{
	struct group_call *call = call_of(ctx);
	struct kafka_sync_group_response *r = GALLOC(call, struct kafka_sync_group_response, 1);

	kafka_sync_group_response_init(r);
	r->ErrorCode = err;
	r->Assignment = err ? (struct kafka_bytes){ NULL, 0 } : gbytes(call, a, a ? alen : 0);
	if (!r->Assignment.ptr)
		r->Assignment = (struct kafka_bytes){ (const uint8_t *)"", 0 };
	ctx->resp = r;
	reply(gc, ctx);
}

/* ---- the rebalance state machine ------------------------------------------ */

static void member_remove(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err);

static void prepare_rebalance(struct group_coord *gc, struct group *g, enum group_rebalance_cause cause)
{
	int64_t now = mono_ms();
	int32_t rt = 0;

	if (g->state == G_COMPLETING) {
		/* the leader's assignment will not come for this generation */
		for (struct gmember *m = g->members; m; m = m->next)
			if (m->sync) {
				sync_answer(gc, m->sync, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
				m->sync = NULL;
			}
	}
	if (g->state == G_PREPARING)
		return;
	for (struct gmember *m = g->members; m; m = m->next)
		rt = m->rebalance_ms > rt ? m->rebalance_ms : rt;
	g->rebalance_deadline = now + rt;
	g->delay_deadline = g->state == G_EMPTY ? now + gc->initial_delay : 0;
	if (g->delay_deadline > g->rebalance_deadline)
		g->delay_deadline = g->rebalance_deadline;
	g->state = G_PREPARING;
	gc->st.rebalance_causes[cause]++;
}

static int all_joined(const struct group *g)
{
	if (g->pending)
		return 0;
	for (const struct gmember *m = g->members; m; m = m->next)
		if (!m->join)
			return 0;
	return 1;
}

static char *select_protocol(const struct group *g)
{
	const struct gmember *first = g->members;
	int best = -1, best_votes = -1;

	if (!first)
		return NULL;
	/* candidates: the first member's protocols every member supports;
	 * each member votes for the first candidate in its own order */
	for (int i = 0; i < first->nprot; i++) {
		const char *cand = first->pname[i];
		int ok = 1, votes = 0;

		for (const struct gmember *m = g->members; m && ok; m = m->next)
			ok = member_supports(m, cand) >= 0;
		if (!ok)
			continue;
		for (const struct gmember *m = g->members; m; m = m->next)
			for (int j = 0; j < m->nprot; j++) {
				int all = 1;

				for (const struct gmember *x = g->members; x && all; x = x->next)
					all = member_supports(x, m->pname[j]) >= 0;
				if (!all)
					continue;
				votes += !strcmp(m->pname[j], cand);
				break;
			}
		if (votes > best_votes) {
			best = i;
			best_votes = votes;
		}
	}
	return best >= 0 ? sdup(first->pname[best]) : NULL;
}

static void complete_join(struct group_coord *gc, struct group *g)
{
	int64_t now = mono_ms();

	/* members that did not rejoin in time are out; so are ids handed out
	 * with MEMBER_ID_REQUIRED that never came back */
	for (struct gmember *m = g->members, *nx; m; m = nx) {
		nx = m->next;
		if (!m->join)
			member_remove(gc, g, m, 0);
	}
	while (g->pending) {
		struct gpending *p = g->pending;

		g->pending = p->next;
		free(p->id);
		free(p);
	}
	g->generation++;
	gc->st.rebalances++;
	free(g->protocol);
	g->protocol = NULL;
	if (!g->members) {
		g->state = G_EMPTY;
		g->empty_since = wall_ms();
		free(g->leader);
		g->leader = NULL;
		owners_clear(g);
		return;
	}
	g->protocol = select_protocol(g);
	if (!g->leader || !member_find(g, (struct kafka_str){ g->leader, (int32_t)strlen(g->leader) })) {
		free(g->leader);
		g->leader = sdup(g->members->id);
	}
	g->state = G_COMPLETING;
	for (struct gmember *m = g->members; m; m = m->next) {
		m->deadline = now + m->session_ms;
		join_answer(gc, g, m);
	}
}

static void maybe_complete_join(struct group_coord *gc, struct group *g)
{
	int64_t now = mono_ms();

	if (g->state != G_PREPARING)
		return;
	if (now >= g->rebalance_deadline || (all_joined(g) && now >= g->delay_deadline))
		complete_join(gc, g);
}

/* Take m out of the group; a call it has waiting gets err (0: it has
 * none, or it is answered elsewhere). */
static void member_remove(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err)
{
	struct gmember **pp;

	for (pp = &g->members; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (!*pp)
		return;
	*pp = m->next;
	g->nmembers--;
	if (m->join)
		join_error(gc, m->join, err ? err : KERR_UNKNOWN_MEMBER_ID, m->id);
	if (m->sync)
		sync_answer(gc, m->sync, err ? err : KERR_UNKNOWN_MEMBER_ID, NULL, 0);
	owners_drop_member(g, m);
	if (g->leader && !strcmp(g->leader, m->id)) {
		free(g->leader);
		g->leader = NULL;
	}
	member_free(m);
}

/* A member left or timed out: the others rebalance. */
static void member_gone(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err,
			enum group_rebalance_cause cause)
{
	member_remove(gc, g, m, err);
	if (g->state == G_STABLE || g->state == G_COMPLETING)
		prepare_rebalance(gc, g, cause);
	if (g->state == G_EMPTY && !g->members)
		return;
	maybe_complete_join(gc, g);
}

static char *new_member_id(const struct kafka_ctx *ctx, struct kafka_str instance)
{
	static uint64_t seq;
	const struct kafka_str cid = instance.len > 0 ? instance : ctx->req.header.ClientId;
	char *id;
	uint8_t r[16];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		uint64_t x = ++seq ^ (uint64_t)wall_ms();

		memcpy(r, &x, 8);
		memset(r + 8, 0, 8);
	}
	if (asprintf(&id, "%.*s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		     cid.len > 0 ? (cid.len > 200 ? 200 : cid.len) : 0, cid.len > 0 ? cid.ptr : "",
		     r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14],
		     r[15]) < 0)
		abort();
	return id;
}

static struct gmember *member_add(struct group *g, struct kafka_ctx *ctx, const struct kafka_join_group_request *q,
				  char *id)
{
	struct gmember *m = xcalloc(1, sizeof(*m)), **pp;

	m->id = id;
	m->instance = kdup(q->GroupInstanceId);
	m->client_id = kdup(ctx->req.header.ClientId);
	if (!m->client_id)
		m->client_id = sdup("");
	m->host = sdup(call_of(ctx)->host);
	member_set_protocols(m, q);
	for (pp = &g->members; *pp; pp = &(*pp)->next)
		;
	*pp = m;   /* in join order: the first is the leader of a new group */
	g->nmembers++;
	return m;
}

/* The protocol type and protocols fit the group's members. */
static int group_accepts(const struct group *g, const struct kafka_join_group_request *q)
{
	if (kempty(q->ProtocolType) || q->Protocols.count <= 0)
		return 0;
	if (!g->members)
		return 1;
	if (!g->ptype || !keq(q->ProtocolType, g->ptype))
		return 0;
	for (int i = 0; i < q->Protocols.count; i++) {
		char *name = kdup(q->Protocols.items[i].Name);
		int all = name != NULL;

		for (const struct gmember *m = g->members; m && all; m = m->next)
			all = member_supports(m, name) >= 0;
		free(name);
		if (all)
			return 1;
	}
	return 0;
}

static void handle_join(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_join_group_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	int32_t rebalance_ms = q->RebalanceTimeoutMs > 0 ? q->RebalanceTimeoutMs : q->SessionTimeoutMs;
	struct group *g;
	struct gmember *m;
	char gid[512];

	gc->st.joins++;
	if (gc->stopping) {
		join_error(gc, ctx, KERR_NOT_COORDINATOR, NULL);
		return;
	}
	if (kempty(q->GroupId) || q->GroupId.len >= (int32_t)sizeof(gid)) {
		join_error(gc, ctx, KERR_INVALID_GROUP_ID, NULL);
		return;
	}
	if (q->SessionTimeoutMs < gc->min_session || q->SessionTimeoutMs > gc->max_session) {
		join_error(gc, ctx, KERR_INVALID_SESSION_TIMEOUT, NULL);
		return;
	}
	memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
	gid[q->GroupId.len] = 0;
	g = group_find(gc, gid);
	if (!g && !kempty(q->MemberId)) {
		join_error(gc, ctx, KERR_UNKNOWN_MEMBER_ID, NULL);
		return;
	}
	if (!g)
		g = group_new(gc, gid);
	if (!group_accepts(g, q)) {
		join_error(gc, ctx, KERR_INCONSISTENT_GROUP_PROTOCOL, NULL);
		return;
	}
	if (kempty(q->MemberId)) {
		struct gmember *old = member_by_instance(g, q->GroupInstanceId);

		if (old) {
			/* a static member is back (a restart): it takes over its old
			 * membership under a new id, the old id is fenced */
			int same = member_same_protocols(old, q);

			if (old->join)
				join_error(gc, old->join, KERR_FENCED_INSTANCE_ID, old->id);
			old->join = NULL;
			if (old->sync)
				sync_answer(gc, old->sync, KERR_FENCED_INSTANCE_ID, NULL, 0);
			old->sync = NULL;
			if (g->leader && !strcmp(g->leader, old->id)) {
				free(g->leader);
				g->leader = NULL;
			}
			free(old->id);
			old->id = new_member_id(ctx, q->GroupInstanceId);
			if (!g->leader)
				g->leader = sdup(old->id);
			old->session_ms = q->SessionTimeoutMs;
			old->rebalance_ms = rebalance_ms;
			old->deadline = mono_ms() + old->session_ms;
			free(old->client_id);
			old->client_id = kdup(ctx->req.header.ClientId);
			if (!old->client_id)
				old->client_id = sdup("");
			old->join = ctx;
			if (g->state == G_STABLE && same) {
				/* nothing changed: no rebalance; it syncs and gets its
				 * assignment back */
				join_answer(gc, g, old);
				return;
			}
			member_set_protocols(old, q);
			prepare_rebalance(gc, g, GROUP_REBALANCE_REJOIN);
			maybe_complete_join(gc, g);
			return;
		}
		if (g->nmembers >= gc->max_size) {
			join_error(gc, ctx, KERR_GROUP_MAX_SIZE_REACHED, NULL);
			return;
		}
		if (ver >= 4 && q->GroupInstanceId.len < 0) {
			/* KIP-394: hand out the id first, so a client that times
			 * out and retries does not leave a ghost member behind */
			struct gpending *p = xcalloc(1, sizeof(*p));

			p->id = new_member_id(ctx, q->GroupInstanceId);
			p->deadline = mono_ms() + q->SessionTimeoutMs;
			p->next = g->pending;
			g->pending = p;
			join_error(gc, ctx, KERR_MEMBER_ID_REQUIRED, p->id);
			return;
		}
		m = member_add(g, ctx, q, new_member_id(ctx, q->GroupInstanceId));
	} else {
		struct gpending **pp;

		for (pp = &g->pending; *pp && !keq(q->MemberId, (*pp)->id); pp = &(*pp)->next)
			;
		if (*pp) {
			struct gpending *p = *pp;

			*pp = p->next;
			m = member_add(g, ctx, q, p->id);
			free(p);
		} else {
			m = member_find(g, q->MemberId);
			if (!m) {
				struct gmember *si = member_by_instance(g, q->GroupInstanceId);

				join_error(gc, ctx, si ? KERR_FENCED_INSTANCE_ID : KERR_UNKNOWN_MEMBER_ID, NULL);
				return;
			}
			if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance)) {
				join_error(gc, ctx, KERR_FENCED_INSTANCE_ID, NULL);
				return;
			}
			if (m->join) /* a retry on another connection replaces it */
				join_error(gc, m->join, KERR_REBALANCE_IN_PROGRESS, m->id);
			m->join = ctx;
			m->session_ms = q->SessionTimeoutMs;
			m->rebalance_ms = rebalance_ms;
			m->deadline = mono_ms() + m->session_ms;
			if ((g->state == G_STABLE || g->state == G_COMPLETING) && member_same_protocols(m, q) &&
			    !(g->state == G_STABLE && g->leader && !strcmp(g->leader, m->id))) {
				/* a follower rejoining with nothing changed: current
				 * generation, no rebalance */
				join_answer(gc, g, m);
				return;
			}
			member_set_protocols(m, q);
			prepare_rebalance(gc, g, GROUP_REBALANCE_REJOIN);
			maybe_complete_join(gc, g);
			return;
		}
	}
	m->session_ms = q->SessionTimeoutMs;
	m->rebalance_ms = rebalance_ms;
	m->deadline = mono_ms() + m->session_ms;
	m->join = ctx;
	if (!g->ptype)
		g->ptype = kdup(q->ProtocolType);
	else if (g->nmembers == 1 && !keq(q->ProtocolType, g->ptype)) {
		free(g->ptype);
		g->ptype = kdup(q->ProtocolType);
	}
	if (g->state == G_PREPARING && g->delay_deadline) {
		/* the first rebalance of an empty group waits a little longer
		 * for each newcomer (group.initial.rebalance.delay.ms) */
		int64_t d = mono_ms() + gc->initial_delay;

		g->delay_deadline = d < g->rebalance_deadline ? d : g->rebalance_deadline;
	}
	prepare_rebalance(gc, g, GROUP_REBALANCE_JOIN);
	maybe_complete_join(gc, g);
}

/* Total bytes of what the leader assigns, against what one record of the
 * offsets topic may hold (Kafka stores the assignment there too). */
static int64_t assignment_bytes(const struct kafka_sync_group_request *q)
{
	int64_t n = 0;

	for (int32_t i = 0; i < q->Assignments.count; i++)
		n += q->Assignments.items[i].Assignment.len > 0 ? q->Assignments.items[i].Assignment.len : 0;
	return n;
}

static void handle_sync(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_sync_group_request *q = ctx->req.body;
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m;

	gc->st.syncs++;
	if (gc->stopping) {
		sync_answer(gc, ctx, KERR_NOT_COORDINATOR, NULL, 0);
		return;
	}
	if (kempty(q->GroupId)) {
		sync_answer(gc, ctx, KERR_INVALID_GROUP_ID, NULL, 0);
		return;
	}
	m = g ? member_find(g, q->MemberId) : NULL;
	if (!m) {
		struct gmember *si = g ? member_by_instance(g, q->GroupInstanceId) : NULL;

		sync_answer(gc, ctx, si ? KERR_FENCED_INSTANCE_ID : KERR_UNKNOWN_MEMBER_ID, NULL, 0);
		return;
	}
	if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance)) {
		sync_answer(gc, ctx, KERR_FENCED_INSTANCE_ID, NULL, 0);
		return;
	}
	if (q->GenerationId != g->generation) {
		sync_answer(gc, ctx, KERR_ILLEGAL_GENERATION, NULL, 0);
		return;
	}
	m->deadline = mono_ms() + m->session_ms;
	switch (g->state) {
	case G_PREPARING:
		sync_answer(gc, ctx, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
		return;
	case G_STABLE:
		sync_answer(gc, ctx, 0, m->assign, m->assign_len);
		return;
	case G_COMPLETING:
		break;
	default:
		sync_answer(gc, ctx, KERR_UNKNOWN_MEMBER_ID, NULL, 0);
		return;
	}
	if (m->sync)
		sync_answer(gc, m->sync, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
	m->sync = ctx;
	if (!g->leader || strcmp(g->leader, m->id))
		return;   /* a follower waits for the leader's assignment */
	if (assignment_bytes(q) > (int64_t)(gc->otopic ? gc->otopic->max_message_bytes : 1048588)) {
		/* Kafka keeps the assignment in one record of the offsets topic
		 * and answers a too-large one with UNKNOWN_SERVER_ERROR to
		 * everyone, then rebalances */
		fprintf(stderr, "sluiced: group %s: the assignment of generation %d is %lld bytes, more than "
			"max.message.bytes of %s; members are told UNKNOWN_SERVER_ERROR\n",
			g->id, g->generation, (long long)assignment_bytes(q), GROUP_OFFSETS_TOPIC);
		for (struct gmember *x = g->members; x; x = x->next)
			if (x->sync) {
				sync_answer(gc, x->sync, KERR_UNKNOWN_SERVER_ERROR, NULL, 0);
				x->sync = NULL;
			}
		prepare_rebalance(gc, g, GROUP_REBALANCE_ASSIGNMENT);
		return;
	}
	owners_clear(g);
	for (struct gmember *x = g->members; x; x = x->next) {
		free(x->assign);
		x->assign = NULL;
		x->assign_len = 0;
		for (int32_t i = 0; i < q->Assignments.count; i++) {
			const struct kafka_sync_group_request_sync_group_request_assignment *a = &q->Assignments.items[i];

			if (!keq(a->MemberId, x->id))
				continue;
			x->assign_len = a->Assignment.len > 0 ? a->Assignment.len : 0;
			x->assign = xcalloc(1, (size_t)x->assign_len + 1);
			if (x->assign_len)
				memcpy(x->assign, a->Assignment.ptr, (size_t)x->assign_len);
			break;
		}
		if (g->ptype && !strcmp(g->ptype, "consumer"))
			owners_add(g, x);
	}
	g->state = G_STABLE;
	for (struct gmember *x = g->members; x; x = x->next)
		if (x->sync) {
			struct kafka_ctx *s = x->sync;

			x->sync = NULL;
			sync_answer(gc, s, 0, x->assign, x->assign_len);
		}
}

static void handle_heartbeat(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_heartbeat_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_heartbeat_response *r = GALLOC(call, struct kafka_heartbeat_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m = g ? member_find(g, q->MemberId) : NULL;

	gc->st.heartbeats++;
	kafka_heartbeat_response_init(r);
	ctx->resp = r;
	if (kempty(q->GroupId))
		r->ErrorCode = KERR_INVALID_GROUP_ID;
	else if (!m)
		r->ErrorCode = g && member_by_instance(g, q->GroupInstanceId) ? KERR_FENCED_INSTANCE_ID
									       : KERR_UNKNOWN_MEMBER_ID;
	else if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance))
		r->ErrorCode = KERR_FENCED_INSTANCE_ID;
	else if (q->GenerationId != g->generation)
		r->ErrorCode = KERR_ILLEGAL_GENERATION;
	else {
		m->deadline = mono_ms() + m->session_ms;
		r->ErrorCode = g->state == G_PREPARING ? KERR_REBALANCE_IN_PROGRESS : 0;
	}
	reply(gc, ctx);
}

static void handle_leave(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_leave_group_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = call_of(ctx);
	struct kafka_leave_group_response *r = GALLOC(call, struct kafka_leave_group_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	int32_t n = ver >= 3 ? q->Members.count : 1;

	gc->st.leaves++;
	kafka_leave_group_response_init(r);
	ctx->resp = r;
	r->Members.count = ver >= 3 ? (n > 0 ? n : 0) : 0;
	r->Members.items = GALLOC(call, struct kafka_leave_group_response_member_response, r->Members.count);
	if (kempty(q->GroupId)) {
		r->ErrorCode = KERR_INVALID_GROUP_ID;
		r->Members.count = 0;
		reply(gc, ctx);
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		struct kafka_str id = ver >= 3 ? q->Members.items[i].MemberId : q->MemberId;
		struct kafka_str inst = ver >= 3 ? q->Members.items[i].GroupInstanceId : (struct kafka_str){ NULL, -1 };
		struct gmember *m = NULL;
		int16_t err = 0;

		if (g && inst.len >= 0) {
			m = member_by_instance(g, inst);
			if (m && !kempty(id) && !keq(id, m->id))
				err = KERR_FENCED_INSTANCE_ID;
		} else if (g) {
			m = member_find(g, id);
		}
		if (!err && !m && g) {
			/* an id handed out with MEMBER_ID_REQUIRED: forget it */
			for (struct gpending **pp = &g->pending; *pp; pp = &(*pp)->next)
				if (keq(id, (*pp)->id)) {
					struct gpending *p = *pp;

					*pp = p->next;
					free(p->id);
					free(p);
					err = -2;
					break;
				}
			if (err == -2) {
				err = 0;
				maybe_complete_join(gc, g);
			} else {
				err = KERR_UNKNOWN_MEMBER_ID;
			}
		} else if (!err && !m) {
			err = KERR_UNKNOWN_MEMBER_ID;
		}
		if (!err && m)
			member_gone(gc, g, m, 0, GROUP_REBALANCE_LEAVE);
		if (ver >= 3) {
			r->Members.items[i].MemberId = kcopy(call, id.len >= 0 ? id : (struct kafka_str){ "", 0 });
			r->Members.items[i].GroupInstanceId = kcopy(call, inst);
			r->Members.items[i].ErrorCode = err;
		} else {
			r->ErrorCode = err;
		}
	}
	reply(gc, ctx);
}

/* ---- offsets: persistence ---------------------------------------------------- */

/* Java's String.hashCode over the group id, as Kafka picks the partition. */
static int32_t offsets_partition(const struct group_coord *gc, const char *group)
{
	return java_key_partition(group, gc->otopic ? gc->otopic->nparts : 1);
}


static void offsets_appended(void *self, struct shard_msg *m);

/* A transaction's offset, durable in the log, waiting for the marker. */
static void txn_pending_set(struct group *g, int64_t pid, struct gentry *e)
{
	struct gtxn *x;

	for (x = g->txn; x; x = x->next)
		if (x->pid == pid && x->part == e->part && !strcmp(x->topic, e->topic))
			break;
	if (x) {
		free(x->topic);
		free(x->meta);
	} else {
		x = xcalloc(1, sizeof(*x));
		x->next = g->txn;
		g->txn = x;
	}
	x->pid = pid;
	x->topic = e->topic;
	x->part = e->part;
	x->offset = e->offset;
	x->epoch = e->epoch;
	x->meta = e->meta;
	x->ts = e->ts;
}

/* On the owner shard of an offsets partition: append and have the
 * completion sent to the control thread once durable. */
static void shard_offsets_append(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = m->p[0];
	struct gwrite *gw = m->p[1];
	int64_t base = -1;
	int rc = p->deleted ? -ENOENT : plog_append(p->pl, gw->batch, (uint32_t)m->v[0], &base);

	if (rc == -ENOBUFS) {
		store_flush(&sh->st);
		rc = plog_append(p->pl, gw->batch, (uint32_t)m->v[0], &base);
	}
	if (rc == 0) {
		struct ack_wait w = { .need = p->pl->next_offset, .base_offset = base, .from = (int)m->v[1],
				      .ctx = (struct kafka_ctx *)gw, .notify = offsets_appended };

		if (part_wait_ack(p, &w) == 0) {
			part_progress(p);
			return;
		}
		rc = -ENOBUFS;
	}
	{
		struct shard_msg r = { .fn = offsets_appended, .p = { gw }, .v = { -1, rc } };

		shard_send(sh, (int)m->v[1], &r);
	}
}

static void call_write_done(struct group_coord *gc, struct kafka_ctx *ctx);

/* On the control thread: an offsets batch is durable (or failed). */
static void offsets_appended(void *self, struct shard_msg *m)
{
	struct gwrite *gw = m->p[0];
	struct group_coord *gc = gw->gc;
	struct group *g = gw->g;
	int err = (int)m->v[1];

	(void)self;
	for (int i = 0; i < gw->n; i++) {
		struct gentry *e = &gw->e[i];

		if (err) {
			if (e->err)
				*e->err = KERR_COORDINATOR_NOT_AVAILABLE;
		} else if (!g->dead && gw->txn_pid >= 0) {
			txn_pending_set(g, gw->txn_pid, e);   /* takes topic and meta */
			e->topic = e->meta = NULL;
		} else if (!g->dead) {
			if (e->del)
				offset_del(g, e->topic, e->part);
			else
				offset_set(g, e->topic, e->part, e->offset, e->epoch, e->meta, e->ts);
		}
		if (!err && !e->del)
			gc->st.commits++;
		if (!err && e->del && !e->err)
			gc->st.offsets_expired++;
		free(e->topic);
		free(e->meta);
	}
	if (err)
		fprintf(stderr, "sluiced: group %s: writing %d offset record(s) to %s failed: %s\n", g->id, gw->n,
			GROUP_OFFSETS_TOPIC, strerror(-err));
	free(gw->e);
	free(gw->batch);
	g->writes--;
	if (!err && gw->remove_group && !g->dead)
		group_remove(gc, g);
	else if (g->dead && !g->writes)
		group_free(g);
	else if (!err && !gw->ctx && g->state == G_EMPTY && !g->members && !g->offsets.n && !g->writes)
		group_remove(gc, g);   /* expiry took the last offset of an empty group */
	if (gw->ctx)
		call_write_done(gc, gw->ctx);
	free(gw);
}

/* Write entries e[0..n) of group g as one batch; the call (if any) is
 * answered when every write it started is durable. Takes e. */
static int offsets_write(struct group_coord *gc, struct group *g, struct kafka_ctx *ctx, struct gentry *e, int n,
			 int remove_group, int64_t txn_pid, int16_t txn_epoch)
{
	const struct md_topic *t = gc->otopic;
	int32_t idx = offsets_partition(gc, g->id);
	const struct md_partition *mp;
	struct batch_builder bb;
	struct gwrite *gw;
	size_t cap = 128;
	int64_t now = wall_ms();
	ssize_t len;
	uint8_t *kv;

	if (!t || !t->parts[idx].part) {
		for (int i = 0; i < n; i++) {
			if (e[i].err)
				*e[i].err = KERR_COORDINATOR_NOT_AVAILABLE;
			free(e[i].topic);
			free(e[i].meta);
		}
		free(e);
		return -ENOENT;
	}
	mp = &t->parts[idx];
	for (int i = 0; i < n; i++)
		cap += 64 + 2 * (strlen(g->id) + strlen(e[i].topic) + (e[i].meta ? strlen(e[i].meta) : 0)) + 64;
	gw = xcalloc(1, sizeof(*gw));
	gw->gc = gc;
	gw->g = g;
	gw->ctx = ctx;
	gw->e = e;
	gw->n = n;
	gw->remove_group = remove_group;
	gw->txn_pid = txn_pid;
	gw->batch = xcalloc(1, cap);
	kv = xcalloc(1, cap);
	batch_builder_init(&bb, gw->batch, cap, now);
	for (int i = 0; i < n; i++) {
		size_t kl = 0, vl = 0;
		uint8_t *k = kv, *v;

		kl += put16(k + kl, 1);
		kl += putstr(k + kl, g->id);
		kl += putstr(k + kl, e[i].topic);
		kl += put32(k + kl, e[i].part);
		v = k + kl;
		if (!e[i].del) {
			vl += put16(v + vl, 3);
			vl += put64(v + vl, e[i].offset);
			vl += put32(v + vl, e[i].epoch);
			vl += putstr(v + vl, e[i].meta ? e[i].meta : "");
			vl += put64(v + vl, e[i].ts);
		}
		if (batch_builder_add(&bb, i, now, k, (int32_t)kl, e[i].del ? NULL : v, e[i].del ? -1 : (int32_t)vl,
				      NULL, 0, 0) < 0)
			abort();   /* cap is an upper bound */
	}
	free(kv);
	/* a transaction's offsets: its producer's transactional batch, decided
	 * by the marker the transaction coordinator writes after it */
	len = txn_pid >= 0 ? batch_builder_finish(&bb, BATCH_ATTR_TRANSACTIONAL, -1, txn_pid, txn_epoch, -1)
			   : batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	if (len < 0)
		abort();
	if (ctx)
		call_of(ctx)->writes++;
	g->writes++;
	{
		struct shard_msg m = { .fn = shard_offsets_append, .p = { mp->part, gw },
				       .v = { len, broker_ctl_index(gc->b) } };

		ctl_send_msg(gc->ctl, mp->shard, &m);
	}
	return 0;
}

/* ---- offsets: the calls ------------------------------------------------------ */

static const struct md_topic *topic_of(struct group_coord *gc, struct kafka_str name)
{
	const struct md_snapshot *md = gc->b->md;

	return md && name.len > 0 ? md_find(md, name.ptr, name.len) : NULL;
}

static void call_write_done(struct group_coord *gc, struct kafka_ctx *ctx)
{
	if (--call_of(ctx)->writes == 0)
		reply(gc, ctx);
}

static void handle_commit(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_commit_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = call_of(ctx);
	struct kafka_offset_commit_response *r = GALLOC(call, struct kafka_offset_commit_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m = NULL;
	int16_t gerr = 0;
	int total = 0, n = 0;
	struct gentry *e;
	int64_t now = wall_ms();

	kafka_offset_commit_response_init(r);
	ctx->resp = r;
	r->Topics.count = q->Topics.count > 0 ? q->Topics.count : 0;
	r->Topics.items = GALLOC(call, struct kafka_offset_commit_response_offset_commit_response_topic, r->Topics.count);
	for (int32_t i = 0; i < r->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;

	/* the group-level checks, in Kafka's order (validateOffsetCommit:
	 * the member, then its generation, then the group's state) */
	if (kempty(q->GroupId) || q->GroupId.len >= 512) {
		gerr = KERR_INVALID_GROUP_ID;
	} else if (!g) {
		if (q->GenerationIdOrMemberEpoch < 0) {
			char gid[512];

			memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
			gid[q->GroupId.len] = 0;
			g = group_new(gc, gid);   /* offsets only: no member ever joins it */
		} else {
			gerr = KERR_ILLEGAL_GENERATION;
			gc->st.commit_refused_generation++;
		}
	}
	if (!gerr && g) {
		struct gmember *si = ver >= 7 ? member_by_instance(g, q->GroupInstanceId) : NULL;

		int as_member = q->GenerationIdOrMemberEpoch >= 0 || !kempty(q->MemberId) ||
				(ver >= 7 && q->GroupInstanceId.len >= 0);

		m = member_find(g, q->MemberId);
		if (!as_member) {
			/* a simple commit: only to a group without members */
			m = NULL;
			if (g->members || g->state != G_EMPTY) {
				gerr = KERR_UNKNOWN_MEMBER_ID;
				gc->st.commit_refused_member++;
			}
		} else if (si && !keq(q->MemberId, si->id)) {
			gerr = KERR_FENCED_INSTANCE_ID;
			gc->st.commit_refused_fenced++;
		} else if (!m) {
			gerr = KERR_UNKNOWN_MEMBER_ID;
			gc->st.commit_refused_member++;
		} else if (q->GenerationIdOrMemberEpoch != g->generation) {
			gerr = KERR_ILLEGAL_GENERATION;
			gc->st.commit_refused_generation++;
		} else if (g->state == G_COMPLETING) {
			/* its generation is current but the leader's assignment
			 * has not come: which partitions it owns is not known */
			gerr = KERR_REBALANCE_IN_PROGRESS;
			gc->st.commit_refused_rebalance++;
		}
		if (m && !gerr)
			m->deadline = mono_ms() + m->session_ms;
	}
	if (gerr && gerr != KERR_INVALID_GROUP_ID)
		gc->st.commit_refused += (uint64_t)total;
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < r->Topics.count; i++) {
		const struct kafka_offset_commit_request_offset_commit_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_commit_response_offset_commit_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);

		rt->Name = kcopy(call, qt->Name.len >= 0 ? qt->Name : (struct kafka_str){ "", 0 });
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_commit_response_offset_commit_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			const struct kafka_offset_commit_request_offset_commit_request_partition *qp =
				&qt->Partitions.items[j];
			struct kafka_offset_commit_response_offset_commit_response_partition *rp = &rt->Partitions.items[j];
			char *topic;

			rp->PartitionIndex = qp->PartitionIndex;
			if (gerr) {
				rp->ErrorCode = gerr;
				continue;
			}
			if (!t || qp->PartitionIndex < 0 || qp->PartitionIndex >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			if (qp->CommittedMetadata.len > gc->max_meta) {
				rp->ErrorCode = KERR_OFFSET_METADATA_TOO_LARGE;
				continue;
			}
			topic = kdup(qt->Name);
			if (m && g->owners.n) {
				struct gmember *owner = owner_of(g, topic, qp->PartitionIndex);

				if (owner && owner != m) {
					/* Sluice: the partition belongs to another member of
					 * this generation: a late commit of a stale owner
					 * must not move the new owner's position */
					rp->ErrorCode = KERR_ILLEGAL_GENERATION;
					gc->st.commit_refused_owner++;
					gc->st.commit_refused++;
					free(topic);
					continue;
				}
			}
			e[n].topic = topic;
			e[n].part = qp->PartitionIndex;
			e[n].offset = qp->CommittedOffset;
			e[n].epoch = ver >= 6 ? qp->CommittedLeaderEpoch : -1;
			e[n].meta = kdup(qp->CommittedMetadata);
			e[n].ts = now;
			e[n].err = &rp->ErrorCode;
			n++;
		}
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, -1, -1) < 0) {
		if (n == 0)
			free(e);
		reply(gc, ctx);
	}
}

/* TxnOffsetCommit: offsets inside a producer's transaction. Written now
 * (a transactional batch of the producer in __consumer_offsets), visible
 * to OffsetFetch once the transaction commits (group_txn_end). */
static void handle_txn_commit(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_txn_offset_commit_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = call_of(ctx);
	struct kafka_txn_offset_commit_response *r = GALLOC(call, struct kafka_txn_offset_commit_response, 1);
	struct group *g = NULL;
	int16_t gerr = 0;
	int total = 0, n = 0;
	struct gentry *e;
	int64_t now = wall_ms();
	char gid[512];

	kafka_txn_offset_commit_response_init(r);
	ctx->resp = r;
	r->Topics.count = q->Topics.count > 0 ? q->Topics.count : 0;
	r->Topics.items = GALLOC(call, struct kafka_txn_offset_commit_response_txn_offset_commit_response_topic,
				 r->Topics.count);
	for (int32_t i = 0; i < r->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	if (kempty(q->GroupId) || q->GroupId.len >= (int32_t)sizeof(gid)) {
		gerr = KERR_INVALID_GROUP_ID;
	} else {
		memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
		gid[q->GroupId.len] = 0;
		gerr = txn_check_offsets(ctl_txns(gc->ctl), q->TransactionalId, q->ProducerId, q->ProducerEpoch,
					 offsets_partition(gc, gid), ctx->recv_ns);
	}
	if (!gerr && ver >= 3 && (g = group_find(gc, gid))) {
		/* KIP-447: the consumer's group metadata travels with the
		 * offsets; a zombie consumer of an older generation is refused
		 * as its plain commit would be */
		struct gmember *si = q->GroupInstanceId.len >= 0 ? member_by_instance(g, q->GroupInstanceId) : NULL;

		if (si && !keq(q->MemberId, si->id))
			gerr = KERR_FENCED_INSTANCE_ID;
		else if (!kempty(q->MemberId) && !member_find(g, q->MemberId))
			gerr = KERR_UNKNOWN_MEMBER_ID;
		else if (q->GenerationId >= 0 && q->GenerationId != g->generation)
			gerr = KERR_ILLEGAL_GENERATION;
		if (gerr)
			gc->st.commit_refused += (uint64_t)total;
	} else if (!gerr && ver >= 3 && (!kempty(q->MemberId) || q->GenerationId >= 0)) {
		gerr = KERR_ILLEGAL_GENERATION;   /* a member of a group that does not exist */
	}
	if (!gerr && !(g = group_find(gc, gid)))
		g = group_new(gc, gid);
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < r->Topics.count; i++) {
		const struct kafka_txn_offset_commit_request_txn_offset_commit_request_topic *qt = &q->Topics.items[i];
		struct kafka_txn_offset_commit_response_txn_offset_commit_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);

		rt->Name = kcopy(call, qt->Name.len >= 0 ? qt->Name : (struct kafka_str){ "", 0 });
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_txn_offset_commit_response_txn_offset_commit_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			const struct kafka_txn_offset_commit_request_txn_offset_commit_request_partition *qp =
				&qt->Partitions.items[j];
			struct kafka_txn_offset_commit_response_txn_offset_commit_response_partition *rp =
				&rt->Partitions.items[j];

			rp->PartitionIndex = qp->PartitionIndex;
			if (gerr) {
				rp->ErrorCode = gerr;
				continue;
			}
			if (!t || qp->PartitionIndex < 0 || qp->PartitionIndex >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			if (qp->CommittedMetadata.len > gc->max_meta) {
				rp->ErrorCode = KERR_OFFSET_METADATA_TOO_LARGE;
				continue;
			}
			e[n].topic = kdup(qt->Name);
			e[n].part = qp->PartitionIndex;
			e[n].offset = qp->CommittedOffset;
			e[n].epoch = ver >= 2 ? qp->CommittedLeaderEpoch : -1;
			e[n].meta = kdup(qp->CommittedMetadata);
			e[n].ts = now;
			e[n].err = &rp->ErrorCode;
			n++;
		}
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, q->ProducerId, q->ProducerEpoch) < 0) {
		if (n == 0)
			free(e);
		reply(gc, ctx);
	}
}

int32_t group_offsets_partition(const struct group_coord *gc, const char *group)
{
	return offsets_partition(gc, group);
}

void group_txn_end(struct group_coord *gc, int32_t opart, int64_t pid, int commit)
{
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		struct gtxn **pp;

		if (!g || !g->txn || offsets_partition(gc, g->id) != opart)
			continue;
		pp = &g->txn;
		while (*pp) {
			struct gtxn *x = *pp;

			if (x->pid != pid) {
				pp = &x->next;
				continue;
			}
			*pp = x->next;
			if (commit) {
				offset_set(g, x->topic, x->part, x->offset, x->epoch, x->meta, x->ts);
				gc->st.commits++;
			}
			free(x->topic);
			free(x->meta);
			free(x);
		}
	}
}

static void fetch_partition(struct group_call *call, struct group *g, const char *topic, int32_t part,
			    struct kafka_offset_fetch_response_offset_fetch_response_partition *rp)
{
	const struct goffset *o = g && topic ? offset_find(g, topic, part) : NULL;

	rp->PartitionIndex = part;
	rp->CommittedOffset = o ? o->offset : -1;
	rp->CommittedLeaderEpoch = o ? o->epoch : -1;
	rp->Metadata = gstr(call, o && o->meta ? o->meta : "");
	rp->ErrorCode = 0;
}

static int tp_cmp(const void *a, const void *b)
{
	const struct goffset *x = *(const struct goffset *const *)a, *y = *(const struct goffset *const *)b;
	int c = strcmp(x->topic, y->topic);

	return c ? c : (x->part > y->part) - (x->part < y->part);
}

static void handle_fetch(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_fetch_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_offset_fetch_response *r = GALLOC(call, struct kafka_offset_fetch_response, 1);
	struct group *g = group_findk(gc, q->GroupId);

	kafka_offset_fetch_response_init(r);
	ctx->resp = r;
	if (kempty(q->GroupId)) {
		r->ErrorCode = KERR_INVALID_GROUP_ID;
		r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, 0);
		reply(gc, ctx);
		return;
	}
	if (q->Topics.count < 0) {
		/* every offset of the group, by topic */
		int n = g ? (int)g->offsets.n : 0, k = 0, nt = 0;
		struct goffset **all = xcalloc((size_t)n, sizeof(*all));

		for (uint32_t i = 0; g && i < g->offsets.cap; i++)
			if (g->offsets.v[i])
				all[k++] = g->offsets.v[i];
		qsort(all, (size_t)n, sizeof(*all), tp_cmp);
		for (int i = 0; i < n; i++)
			nt += i == 0 || strcmp(all[i]->topic, all[i - 1]->topic);
		r->Topics.count = nt;
		r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, nt);
		for (int i = 0, t = -1; i < n; i++) {
			struct kafka_offset_fetch_response_offset_fetch_response_topic *rt;
			int j = i;

			if (i && !strcmp(all[i]->topic, all[i - 1]->topic))
				continue;
			rt = &r->Topics.items[++t];
			while (j < n && !strcmp(all[j]->topic, all[i]->topic))
				j++;
			rt->Name = gstr(call, all[i]->topic);
			rt->Partitions.count = j - i;
			rt->Partitions.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_partition,
						      j - i);
			for (int x = i; x < j; x++)
				fetch_partition(call, g, all[x]->topic, all[x]->part, &rt->Partitions.items[x - i]);
		}
		free(all);
		reply(gc, ctx);
		return;
	}
	r->Topics.count = q->Topics.count;
	r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, q->Topics.count);
	for (int32_t i = 0; i < q->Topics.count; i++) {
		const struct kafka_offset_fetch_request_offset_fetch_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_fetch_response_offset_fetch_response_topic *rt = &r->Topics.items[i];
		char *topic = kdup(qt->Name);
		int32_t np = qt->PartitionIndexes.count > 0 ? qt->PartitionIndexes.count : 0;

		rt->Name = gstr(call, topic ? topic : "");
		rt->Partitions.count = np;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_partition, np);
		for (int32_t j = 0; j < np; j++)
			fetch_partition(call, g, topic, qt->PartitionIndexes.items[j], &rt->Partitions.items[j]);
		free(topic);
	}
	reply(gc, ctx);
}

/* ListGroups v4's StatesFilter (KIP-518): empty or null lists every
 * group; names compare without case, as Kafka's do. */
static int state_wanted(const struct kafka_list_groups_request *q, const char *state)
{
	if (q->StatesFilter.count <= 0)
		return 1;
	for (int32_t i = 0; i < q->StatesFilter.count; i++) {
		struct kafka_str f = q->StatesFilter.items[i];

		if (f.len == (int32_t)strlen(state) && !strncasecmp(f.ptr, state, (size_t)f.len))
			return 1;
	}
	return 0;
}

static void handle_list(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_list_groups_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_list_groups_response *r = GALLOC(call, struct kafka_list_groups_response, 1);
	int k = 0;

	kafka_list_groups_response_init(r);
	ctx->resp = r;
	r->Groups.items = GALLOC(call, struct kafka_list_groups_response_listed_group, gc->groups.n);
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (!g || !state_wanted(q, state_names[g->state]))
			continue;
		r->Groups.items[k].GroupId = gstr(call, g->id);
		r->Groups.items[k].ProtocolType = gstr(call, g->ptype ? g->ptype : "");
		r->Groups.items[k].GroupState = gstr(call, state_names[g->state]);
		k++;
	}
	r->Groups.count = k;
	reply(gc, ctx);
}

static void handle_describe(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_describe_groups_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_describe_groups_response *r = GALLOC(call, struct kafka_describe_groups_response, 1);
	int32_t n = q->Groups.count > 0 ? q->Groups.count : 0;

	kafka_describe_groups_response_init(r);
	ctx->resp = r;
	r->Groups.count = n;
	r->Groups.items = GALLOC(call, struct kafka_describe_groups_response_described_group, n);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_describe_groups_response_described_group *rg = &r->Groups.items[i];
		struct group *g = group_findk(gc, q->Groups.items[i]);
		char *gid = kdup(q->Groups.items[i]);
		int k = 0;

		rg->GroupId = gstr(call, gid ? gid : "");
		free(gid);
		rg->AuthorizedOperations = INT32_MIN;
		rg->Members.items = GALLOC(call, struct kafka_describe_groups_response_described_group_member,
					   g ? g->nmembers : 0);
		if (kempty(q->Groups.items[i])) {
			rg->ErrorCode = KERR_INVALID_GROUP_ID;
			rg->GroupState = gstr(call, "");
			rg->ProtocolType = gstr(call, "");
			rg->ProtocolData = gstr(call, "");
			continue;
		}
		if (!g) {
			/* Kafka describes a group it does not know as Dead */
			rg->GroupState = gstr(call, state_names[G_DEAD]);
			rg->ProtocolType = gstr(call, "");
			rg->ProtocolData = gstr(call, "");
			continue;
		}
		rg->GroupState = gstr(call, state_names[g->state]);
		rg->ProtocolType = gstr(call, g->ptype ? g->ptype : "");
		rg->ProtocolData = gstr(call, g->state == G_STABLE && g->protocol ? g->protocol : "");
		for (struct gmember *m = g->members; m; m = m->next, k++) {
			struct kafka_describe_groups_response_described_group_member *rm = &rg->Members.items[k];
			int pi = g->protocol ? member_supports(m, g->protocol) : -1;

			rm->MemberId = gstr(call, m->id);
			rm->GroupInstanceId = gstr(call, m->instance);
			rm->ClientId = gstr(call, m->client_id);
			rm->ClientHost = gstr(call, m->host);
			/* Kafka sends metadata and assignment only when Stable */
			rm->MemberMetadata = g->state == G_STABLE && pi >= 0 ? gbytes_ref(call, m->pmeta[pi], m->pmeta_len[pi])
									     : (struct kafka_bytes){ (const uint8_t *)"", 0 };
			rm->MemberAssignment = g->state == G_STABLE && m->assign ? gbytes(call, m->assign, m->assign_len)
										 : (struct kafka_bytes){ (const uint8_t *)"", 0 };
		}
		rg->Members.count = k;
	}
	reply(gc, ctx);
}

/* Tombstones for every offset of g (or those matching topic/partition
 * lists of an OffsetDelete). */
static struct gentry *all_tombstones(struct group *g, int *n)
{
	struct gentry *e = xcalloc(g->offsets.n, sizeof(*e));
	int k = 0;

	for (uint32_t i = 0; i < g->offsets.cap; i++) {
		struct goffset *o = g->offsets.v[i];

		if (!o)
			continue;
		e[k].topic = sdup(o->topic);
		e[k].part = o->part;
		e[k].del = 1;
		k++;
	}
	*n = k;
	return e;
}

static void handle_delete_groups(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_delete_groups_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_delete_groups_response *r = GALLOC(call, struct kafka_delete_groups_response, 1);
	int32_t n = q->GroupsNames.count > 0 ? q->GroupsNames.count : 0;

	kafka_delete_groups_response_init(r);
	ctx->resp = r;
	r->Results.count = n;
	r->Results.items = GALLOC(call, struct kafka_delete_groups_response_deletable_group_result, n);
	call->writes++;   /* held until every group is handled */
	for (int32_t i = 0; i < n; i++) {
		struct kafka_delete_groups_response_deletable_group_result *rr = &r->Results.items[i];
		struct group *g = group_findk(gc, q->GroupsNames.items[i]);
		char *gid = kdup(q->GroupsNames.items[i]);
		struct gentry *e;
		int ne;

		rr->GroupId = gstr(call, gid ? gid : "");
		free(gid);
		if (kempty(q->GroupsNames.items[i])) {
			rr->ErrorCode = KERR_INVALID_GROUP_ID;
			continue;
		}
		if (!g || g->dead) {
			rr->ErrorCode = KERR_GROUP_ID_NOT_FOUND;
			continue;
		}
		if (g->members || g->state != G_EMPTY) {
			rr->ErrorCode = KERR_NON_EMPTY_GROUP;
			continue;
		}
		e = all_tombstones(g, &ne);
		if (ne == 0) {
			free(e);
			group_remove(gc, g);
			continue;
		}
		for (int j = 0; j < ne; j++)
			e[j].err = &rr->ErrorCode;
		offsets_write(gc, g, ctx, e, ne, 1, -1, -1);
	}
	call_write_done(gc, ctx);
}

/* The topics the members subscribe to (consumer protocol metadata). */
static int subscribed(const struct group *g, const char *topic)
{
	for (const struct gmember *m = g->members; m; m = m->next) {
		int pi = g->protocol ? member_supports(m, g->protocol) : (m->nprot ? 0 : -1);
		struct kafka_consumer_protocol_subscription s;
		struct kafka_cursor c;
		struct kafka_arena ar;
		void *mem;
		int16_t ver;
		int hit = 0;

		if (pi < 0 || m->pmeta_len[pi] < 2)
			continue;
		mem = malloc(kafka_arena_bound((size_t)m->pmeta_len[pi]));
		if (!mem)
			return 1;
		kafka_arena_init(&ar, mem, kafka_arena_bound((size_t)m->pmeta_len[pi]));
		kafka_cursor_init(&c, m->pmeta[pi], (size_t)m->pmeta_len[pi]);
		ver = kafka_cursor_int16(&c);
		kafka_consumer_protocol_subscription_init(&s);
		if (ver >= 0 && kafka_consumer_protocol_subscription_decode(&c, &ar, ver > 3 ? 3 : ver, &s) == 0)
			for (int32_t i = 0; i < s.Topics.count && !hit; i++)
				hit = keq(s.Topics.items[i], topic);
		free(mem);
		if (hit)
			return 1;
	}
	return 0;
}

static void handle_offset_delete(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_delete_request *q = ctx->req.body;
	struct group_call *call = call_of(ctx);
	struct kafka_offset_delete_response *r = GALLOC(call, struct kafka_offset_delete_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	int32_t nt = q->Topics.count > 0 ? q->Topics.count : 0;
	int total = 0, n = 0;
	struct gentry *e;

	kafka_offset_delete_response_init(r);
	ctx->resp = r;
	r->Topics.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_topic, 0);
	if (kempty(q->GroupId)) {
		r->ErrorCode = KERR_INVALID_GROUP_ID;
		reply(gc, ctx);
		return;
	}
	if (!g) {
		r->ErrorCode = KERR_GROUP_ID_NOT_FOUND;
		reply(gc, ctx);
		return;
	}
	if (g->members && (!g->ptype || strcmp(g->ptype, "consumer"))) {
		r->ErrorCode = KERR_NON_EMPTY_GROUP;
		reply(gc, ctx);
		return;
	}
	r->Topics.count = nt;
	r->Topics.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_topic, nt);
	for (int32_t i = 0; i < nt; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < nt; i++) {
		const struct kafka_offset_delete_request_offset_delete_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_delete_response_offset_delete_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);
		char *topic = kdup(qt->Name);
		int sub = topic && g->members ? subscribed(g, topic) : 0;

		rt->Name = gstr(call, topic ? topic : "");
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			int32_t p = qt->Partitions.items[j].PartitionIndex;
			struct kafka_offset_delete_response_offset_delete_response_partition *rp = &rt->Partitions.items[j];

			rp->PartitionIndex = p;
			if (!t || p < 0 || p >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			} else if (sub) {
				rp->ErrorCode = KERR_GROUP_SUBSCRIBED_TO_TOPIC;
			} else if (offset_find(g, topic, p)) {
				e[n].topic = sdup(topic);
				e[n].part = p;
				e[n].del = 1;
				e[n].err = &rp->ErrorCode;
				n++;
			}
		}
		free(topic);
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, -1, -1) < 0) {
		if (n == 0)
			free(e);
		reply(gc, ctx);
	}
}

/* ---- dispatch -------------------------------------------------------------- */

static void group_msg(void *self, struct shard_msg *m)
{
	struct group_coord *gc = ctl_groups(self);
	struct kafka_ctx *ctx = m->p[0];

	/* joins, syncs and leaves can bring deadlines nearer: rescan at the
	 * next tick (heartbeats and commits only push them later) */
	gc->dirty |= ctx->req.header.RequestApiKey == 11 || ctx->req.header.RequestApiKey == 13 ||
		     ctx->req.header.RequestApiKey == 14;
	switch (ctx->req.header.RequestApiKey) {
	case 8: handle_commit(gc, ctx); break;
	case 9: handle_fetch(gc, ctx); break;
	case 11: handle_join(gc, ctx); break;
	case 12: handle_heartbeat(gc, ctx); break;
	case 13: handle_leave(gc, ctx); break;
	case 14: handle_sync(gc, ctx); break;
	case 15: handle_describe(gc, ctx); break;
	case 16: handle_list(gc, ctx); break;
	case 42: handle_delete_groups(gc, ctx); break;
	case 47: handle_offset_delete(gc, ctx); break;
	case 28: handle_txn_commit(gc, ctx); break;
	default:
		ctx->resp = NULL;
		reply(gc, ctx);
		break;
	}
}

static void group_cleanup(struct kafka_ctx *ctx)
{
	group_mem_free(ctx->cleanup_arg);
}

static int group_resume(struct kafka_ctx *ctx)
{
	struct group_call *call = ctx->state;

	/* the response memory lives until the request ends: a pipelined
	 * request's response is encoded only when its turn comes */
	ctx->cleanup = group_cleanup;
	ctx->cleanup_arg = call->mem;
	if (!ctx->resp) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int group_submit(struct kafka_ctx *ctx)
{
	struct group_call *call = ALLOC(ctx, struct group_call, 1);
	struct shard_msg m = { .fn = group_msg, .p = { ctx } };

	if (!call) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	memset(call, 0, sizeof(*call));
	call->from = ctx->sh->id;
	if (ctx->req.header.RequestApiKey == 11) {
		/* the member's host, as DescribeGroups shows it (Kafka's
		 * spelling: "/127.0.0.1"); read here, where the socket lives */
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);

		if (getpeername(ctx->c->fd, (struct sockaddr *)&sa, &sl) == 0) {
			call->host[0] = '/';
			if (sa.ss_family == AF_INET)
				inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, call->host + 1,
					  sizeof(call->host) - 1);
			else if (sa.ss_family == AF_INET6)
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, call->host + 1,
					  sizeof(call->host) - 1);
		}
	}
	ctx->state = call;
	ctx->pending = 1;
	ctx->resume = group_resume;
	shard_send(ctx->sh, broker_ctl_index(ctx->sh->b), &m);
	return 0;
}

/* ---- replay ---------------------------------------------------------------- */

static int rd_str(const uint8_t **p, const uint8_t *end, char **out)
{
	int16_t n;

	if (end - *p < 2)
		return -1;
	n = (int16_t)be16_load(*p);
	*p += 2;
	if (n < 0) {
		*out = NULL;
		return 0;
	}
	if (end - *p < n)
		return -1;
	*out = xcalloc(1, (size_t)n + 1);
	memcpy(*out, *p, (size_t)n);
	*p += n;
	return 0;
}

/* One record of __consumer_offsets, in Kafka's formats. */
static void replay_record(struct group_coord *gc, const struct record_view *rv, int64_t txn_pid)
{
	const uint8_t *k = rv->key, *kend = rv->key + (rv->key_len > 0 ? rv->key_len : 0);
	char *group = NULL, *topic = NULL, *meta = NULL;
	int16_t kver;
	int32_t part;
	struct group *g;

	if (!k || kend - k < 2)
		return;
	kver = (int16_t)be16_load(k);
	k += 2;
	if (kver > 1)
		return;   /* group metadata (version 2): membership is not kept across restarts */
	if (rd_str(&k, kend, &group) < 0 || !group || rd_str(&k, kend, &topic) < 0 || !topic || kend - k < 4)
		goto out;
	part = (int32_t)be32_load(k);
	g = group_find(gc, group);
	if (!rv->value || rv->value_len < 0) {
		if (g)
			offset_del(g, topic, part);
		goto out;
	}
	{
		const uint8_t *v = rv->value, *vend = rv->value + rv->value_len;
		int16_t vver;
		int64_t off, ts = 0;
		int32_t epoch = -1;

		if (vend - v < 10)
			goto out;
		vver = (int16_t)be16_load(v);
		v += 2;
		off = (int64_t)be64_load(v);
		v += 8;
		if (vver >= 3) {
			if (vend - v < 4)
				goto out;
			epoch = (int32_t)be32_load(v);
			v += 4;
		}
		if (rd_str(&v, vend, &meta) < 0 || vend - v < 8)
			goto out;
		ts = (int64_t)be64_load(v);
		if (!g)
			g = group_new(gc, group);
		if (txn_pid >= 0) {
			struct gentry e = { .topic = topic, .part = part, .offset = off, .epoch = epoch, .meta = meta,
					    .ts = ts };

			txn_pending_set(g, txn_pid, &e);   /* takes topic and meta */
			topic = meta = NULL;
		} else {
			offset_set(g, topic, part, off, epoch, meta, ts);
		}
		gc->st.replayed_records++;
	}
out:
	free(group);
	free(topic);
	free(meta);
}

/* On the control thread: a chunk of whole batches of offsets partition
 * `part` read back. A transaction's offsets wait for its marker. */
static void replay_chunk(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part)
{
	struct group_coord *gc = ctl_groups(ctl);
	uint32_t at = 0;

	while (at + BATCH_LOG_OVERHEAD <= len) {
		const uint8_t *b = buf + at;
		uint32_t size = batch_size(b);
		uint16_t attrs;
		struct record_iter it;
		struct record_view rv;

		if (size > len - at || size < BATCH_HEADER_SIZE)
			break;
		attrs = batch_attributes(b);
		if (!(attrs & BATCH_ATTR_CODEC_MASK)) {
			record_iter_init(&it, b + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, batch_records_count(b));
			if (attrs & BATCH_ATTR_CONTROL) {
				if (record_iter_next(&it, &rv) == 1 && rv.key && rv.key_len >= 4)
					group_txn_end(gc, part, batch_producer_id(b), be16_load(rv.key + 2) == 1);
			} else {
				int64_t pid = attrs & BATCH_ATTR_TRANSACTIONAL ? batch_producer_id(b) : -1;

				while (record_iter_next(&it, &rv) == 1)
					replay_record(gc, &rv, pid);
			}
		}
		at += size;
	}
}

static void replay_end(struct ctl *ctl)
{
	struct group_coord *gc = ctl_groups(ctl);

	if (gc->replay_done)
		gc->replay_done(ctl);
}

int group_replay(struct group_coord *gc, void (*done)(struct ctl *ctl))
{
	gc->replay_done = done;
	return ctl_read_topic(gc->ctl, gc->otopic, replay_chunk, replay_end);
}

/* ---- lag: high watermark and oldest unconsumed record ------------------------ */

struct lagq {
	struct group_coord *gc;
	char *group, *topic;
	int32_t part;
	int64_t committed;
	int64_t hw, ts;               /* out */
	int to;                       /* the control thread */
	struct shard *sh;
	struct plog_read rd;
	uint8_t *buf;
};

static void lag_result(void *self, struct shard_msg *m);

static void lag_reply(struct lagq *q)
{
	struct shard_msg r = { .fn = lag_result, .p = { q } };

	shard_send(q->sh, q->to, &r);
}

/* The first batch at the committed offset is in: its timestamp is the
 * oldest unconsumed record's (the batch's first record's for CreateTime,
 * the broker's for LogAppendTime). */
static void lag_read_done(struct plog_read *rd)
{
	struct lagq *q = rd->arg;

	if (!rd->err && rd->bytes >= BATCH_HEADER_SIZE)
		q->ts = (batch_attributes(rd->data) & BATCH_ATTR_LOG_APPEND_TIME) ? batch_max_timestamp(rd->data)
										  : batch_base_timestamp(rd->data);
	plog_read_release(rd);
	if (q->buf)
		q->sh->rbufs[q->sh->nrbufs++] = q->buf;
	q->buf = NULL;
	lag_reply(q);
}

/* On the owner shard: the partition's high watermark, and the timestamp of
 * the first record not consumed (a read of one batch, from the tail or
 * asynchronously from disk). */
static void shard_lag_query(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = m->p[0];
	struct lagq *q = m->p[1];
	int64_t from;
	int rc;

	q->sh = sh;
	q->hw = -1;
	q->ts = -1;
	if (!p || p->deleted || !p->pl) {
		lag_reply(q);
		return;
	}
	q->hw = p->pl->high_watermark;
	from = q->committed < p->pl->log_start ? p->pl->log_start : q->committed;
	if (from >= q->hw || !sh->nrbufs) {
		lag_reply(q);   /* caught up (or no read buffer free: no age this time) */
		return;
	}
	memset(&q->rd, 0, sizeof(q->rd));
	q->buf = sh->rbufs[--sh->nrbufs];
	q->rd.offset = from;
	q->rd.max_offset = q->hw;
	q->rd.max_bytes = 1;        /* one batch: the first is always whole */
	q->rd.buf = q->buf;
	q->rd.buf_cap = SHARD_RBUF_SIZE;
	q->rd.done = lag_read_done;
	q->rd.arg = q;
	rc = plog_read(p->pl, &q->rd);
	if (rc == 0)
		return;                 /* from disk: lag_read_done runs later */
	if (rc < 0)
		q->rd.err = rc;
	lag_read_done(&q->rd);
}

static void report_print(struct group_coord *gc)
{
	int64_t now = wall_ms();
	int ng = 0, np = 0;

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		int n = 0, k = 0;
		struct goffset **all;

		if (!g)
			continue;
		ng++;
		fprintf(stderr, "sluiced: group %s: state %s, generation %d, protocol %s/%s, %d member(s)\n", g->id,
			state_names[g->state], g->generation, g->ptype ? g->ptype : "-", g->protocol ? g->protocol : "-",
			g->nmembers);
		for (struct gmember *m = g->members; m; m = m->next)
			fprintf(stderr, "sluiced:   member %s%s%s client %s host %s\n", m->id, m->instance ? " instance " : "",
				m->instance ? m->instance : "", m->client_id, m->host);
		n = (int)g->offsets.n;
		all = xcalloc((size_t)n, sizeof(*all));
		for (uint32_t j = 0; j < g->offsets.cap; j++)
			if (g->offsets.v[j])
				all[k++] = g->offsets.v[j];
		qsort(all, (size_t)n, sizeof(*all), tp_cmp);
		for (int j = 0; j < n; j++) {
			struct goffset *o = all[j];
			struct gmember *own = owner_of(g, o->topic, o->part);
			char lag[32] = "?", age[32] = "?";

			if (o->hw >= 0)
				snprintf(lag, sizeof(lag), "%lld", (long long)(o->hw > o->offset ? o->hw - o->offset : 0));
			if (o->hw >= 0)
				snprintf(age, sizeof(age), "%lld", (long long)(o->oldest_ts < 0 ? 0
						: (now > o->oldest_ts ? now - o->oldest_ts : 0)));
			fprintf(stderr, "sluiced:   %s-%d committed %lld high-watermark %lld lag %s "
				"oldest-unconsumed-age-ms %s owner %s\n", o->topic, o->part, (long long)o->offset,
				(long long)o->hw, lag, age, own ? own->id : "-");
			np++;
		}
		free(all);
	}
	fprintf(stderr, "sluiced: group coordinator: %llu joins, %llu syncs, %llu heartbeats, %llu leaves, "
		"%llu rebalances, %llu members expired; %llu partitions committed, %llu refused (stale generation "
		"%llu, unknown member %llu, rebalance in progress %llu, owned by another member %llu, fenced %llu)\n",
		(unsigned long long)gc->st.joins, (unsigned long long)gc->st.syncs,
		(unsigned long long)gc->st.heartbeats, (unsigned long long)gc->st.leaves,
		(unsigned long long)gc->st.rebalances, (unsigned long long)gc->st.members_expired,
		(unsigned long long)gc->st.commits, (unsigned long long)gc->st.commit_refused,
		(unsigned long long)gc->st.commit_refused_generation, (unsigned long long)gc->st.commit_refused_member,
		(unsigned long long)gc->st.commit_refused_rebalance, (unsigned long long)gc->st.commit_refused_owner,
		(unsigned long long)gc->st.commit_refused_fenced);
	fprintf(stderr, "sluiced: group report: %d group(s), %d committed partition(s)\n", ng, np);
}

static void lag_scan_done(struct group_coord *gc);

/* On the control thread: one partition's answer. */
static void lag_result(void *self, struct shard_msg *m)
{
	struct lagq *q = m->p[0];
	struct group_coord *gc = q->gc;
	struct group *g = group_find(gc, q->group);
	struct goffset *o = g ? offset_find(g, q->topic, q->part) : NULL;

	(void)self;
	if (o && o->offset == q->committed) {
		o->hw = q->hw;
		o->oldest_ts = q->ts;
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
			if (!t || o->part < 0 || o->part >= t->nparts || !t->parts[o->part].part) {
				o->hw = -1;
				o->oldest_ts = -1;
				continue;
			}
			q = xcalloc(1, sizeof(*q));
			q->gc = gc;
			q->group = sdup(g->id);
			q->topic = sdup(o->topic);
			q->part = o->part;
			q->committed = o->offset;
			q->to = broker_ctl_index(gc->b);
			gc->lag_queries++;
			{
				struct shard_msg m = { .fn = shard_lag_query, .p = { t->parts[o->part].part, q } };

				ctl_send_msg(gc->ctl, t->parts[o->part].shard, &m);
			}
		}
	}
	if (--gc->lag_queries == 0)
		lag_scan_done(gc);
}

void group_foreach(const struct group_coord *gc, group_visit_fn *fn, void *arg)
{
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		const struct group *g = gc->groups.v[i];
		struct group_view v;

		if (!g)
			continue;
		v.id = g->id;
		v.state = state_names[g->state];
		v.generation = g->generation;
		v.members = g->nmembers;
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
}

/* ---- timers ------------------------------------------------------------------ */

static void expire_offsets(struct group_coord *gc)
{
	int64_t now = wall_ms();

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		struct gentry *e;
		int n = 0;

		if (!g || g->members || g->state != G_EMPTY || g->writes)
			continue;
		e = xcalloc(g->offsets.n, sizeof(*e));
		for (uint32_t j = 0; j < g->offsets.cap; j++) {
			struct goffset *o = g->offsets.v[j];
			int64_t since;

			if (!o)
				continue;
			/* a group that used membership: from when it became
			 * empty or the commit, whichever is later */
			since = g->ptype && g->empty_since > o->commit_ts ? g->empty_since : o->commit_ts;
			if (now - since < gc->retention_ms)
				continue;
			e[n].topic = sdup(o->topic);
			e[n].part = o->part;
			e[n].del = 1;
			n++;
		}
		if (n)
			offsets_write(gc, g, NULL, e, n, 0, -1, -1);
		else
			free(e);
	}
}

int group_tick(struct group_coord *gc, int max_ms)
{
	int64_t now = mono_ms(), next = now + max_ms;

	/* heartbeats only move deadlines later: without a membership change
	 * the last scan's earliest deadline still holds */
	if (!gc->dirty && now < gc->next_due && now < gc->next_expiry)
		return (int)((gc->next_due < next ? gc->next_due : next) - now);
	gc->dirty = 0;

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (!g)
			continue;
		for (struct gpending **pp = &g->pending; *pp;) {
			struct gpending *p = *pp;

			if (p->deadline <= now) {
				*pp = p->next;
				free(p->id);
				free(p);
				continue;
			}
			next = p->deadline < next ? p->deadline : next;
			pp = &p->next;
		}
again:
		for (struct gmember *m = g->members; m; m = m->next) {
			if (m->join || m->sync)
				continue;   /* waiting on us: alive */
			if (m->deadline <= now) {
				/* a rebalance it starts may remove others too: rescan */
				gc->st.members_expired++;
				member_gone(gc, g, m, 0, GROUP_REBALANCE_EXPIRED);
				goto again;
			}
			next = m->deadline < next ? m->deadline : next;
		}
		if (g->state == G_PREPARING) {
			maybe_complete_join(gc, g);
			if (g->state == G_PREPARING) {
				int64_t d = all_joined(g) && g->delay_deadline > now ? g->delay_deadline
										     : g->rebalance_deadline;

				next = d < next ? d : next;
			}
		}
	}
	if (now >= gc->next_expiry) {
		expire_offsets(gc);
		gc->next_expiry = now + gc->retention_check_ms;
	}
	gc->next_due = next;
	return next > now ? (int)(next - now) : 0;
}

void group_stopping(struct group_coord *gc)
{
	if (gc->stopping)
		return;
	gc->stopping = 1;
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (!g)
			continue;
		for (struct gmember *m = g->members; m; m = m->next) {
			if (m->join)
				join_error(gc, m->join, KERR_NOT_COORDINATOR, m->id);
			if (m->sync)
				sync_answer(gc, m->sync, KERR_NOT_COORDINATOR, NULL, 0);
			m->join = NULL;
			m->sync = NULL;
		}
	}
}

/* ---- life -------------------------------------------------------------------- */

int group_coord_create(struct ctl *ctl, struct broker *b, const struct config *cfg, struct group_coord **out)
{
	struct group_coord *gc = calloc(1, sizeof(*gc));

	if (!gc)
		return -ENOMEM;
	gc->ctl = ctl;
	gc->b = b;
	gc->cfg = cfg;
	gc->min_session = (int32_t)config_int(cfg, "group.min.session.timeout.ms");
	gc->max_session = (int32_t)config_int(cfg, "group.max.session.timeout.ms");
	gc->max_size = (int32_t)config_int(cfg, "group.max.size");
	gc->initial_delay = (int32_t)config_int(cfg, "group.initial.rebalance.delay.ms");
	gc->retention_ms = config_int(cfg, "offsets.retention.ms") >= 0 ? config_int(cfg, "offsets.retention.ms")
									 : config_int(cfg, "offsets.retention.minutes") * 60000;
	gc->retention_check_ms = config_int(cfg, "offsets.retention.check.interval.ms");
	gc->max_meta = (int32_t)config_int(cfg, "offset.metadata.max.bytes");
	gc->next_expiry = mono_ms() + gc->retention_check_ms;
	*out = gc;
	return 0;
}

void group_set_offsets_topic(struct group_coord *gc, const struct md_topic *t)
{
	gc->otopic = t;
}

const struct group_stats *group_coord_stats(const struct group_coord *gc)
{
	return &gc->st;
}

void group_coord_destroy(struct group_coord *gc)
{
	if (!gc)
		return;
	for (uint32_t i = 0; i < gc->groups.cap; i++)
		if (gc->groups.v[i])
			group_free(gc->groups.v[i]);
	hmap_free(&gc->groups);
	free(gc);
}
