/* dataplane/native/native_repl.c — REPLICA_FETCH served by the leader,
 * REPLICA_DATA handed to the follower's fetcher (see native_repl.h).
 * @thread shard */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/broker.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_repl.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/repl_quota.h"
#include "dataplane/shard_core.h"

#define RSLOTS 64                     /* replica fetches in flight per owner shard */

/* A REPLICA_FETCH on the partition's owner, from its arrival to the
 * answer's last datagram. */
struct rfetch {
	int used, parked;
	int throttled;                /* parked over the leader's throttle (repl_quota.h) */
	struct native_repl *r;        /* the owner's */
	struct part *part;
	struct native_repl_peer peer;
	int home;                     /* the shard whose queue it came by: the answer leaves there */
	uint32_t request;
	uint16_t max_dg;
	int32_t replica, current_epoch, last_epoch;
	int64_t offset;
	uint32_t max_bytes;
	uint64_t deadline_ns;
	struct part_read_req rq;
	/* the answer, fixed by the owner before any shard sends it */
	int16_t err;
	int32_t div_epoch;
	int64_t div_end, hw, ls;
};

struct native_repl {
	struct shard *sh;
	int (*send)(struct shard *sh, const struct native_repl_peer *to, const uint8_t *dg, int len);
	uint16_t max_dg;
	int nparked;
	struct rfetch slot[RSLOTS];
	void (*receiver)(void *arg, const struct native_msg *m);
	void *receiver_arg;
	struct native_repl_stats st;
	uint8_t tx[NATIVE_MAX_DATAGRAM];
};

static struct native_repl *repl_of(const struct shard *sh)
{
	return sh->native_repl;
}

struct native_repl *native_repl_new(struct shard *sh,
				    int (*send)(struct shard *sh, const struct native_repl_peer *to, const uint8_t *dg,
						int len),
				    uint16_t max_datagram)
{
	struct native_repl *r = calloc(1, sizeof(*r)); /* style: allow shard setup */

	if (!r)
		return NULL;
	r->sh = sh;
	r->send = send;
	r->max_dg = max_datagram < NATIVE_MAX_DATAGRAM ? max_datagram : NATIVE_MAX_DATAGRAM;
	return r;
}

void native_repl_free(struct native_repl *r)
{
	if (!r)
		return;
	for (int i = 0; i < RSLOTS; i++)
		if (r->slot[i].used && !r->slot[i].parked && r->slot[i].rq.p)
			part_read_release(&r->slot[i].rq);
	free(r);
}

/* ---- the leader ------------------------------------------------------------------ */

/* The REPLICA_DATA train of f from shard r's queue (the home shard's).
 * Reads f, changes nothing in it. */
static void rfetch_emit(struct native_repl *r, const struct rfetch *f)
{
	const struct part *p = f->part;
	size_t tl = strlen(p->topic);
	uint16_t max_dg = f->max_dg < r->max_dg ? f->max_dg : r->max_dg;
	uint32_t room = native_replica_data_room(max_dg, tl);
	uint32_t total = f->err || f->div_epoch >= 0 ? 0 : f->rq.rd.bytes;
	uint16_t count = (uint16_t)(total ? (total + room - 1) / room : 1);
	struct native_replica_data d = { .error = f->err, .partition = p->index, .leader_epoch = f->current_epoch,
					 .div_epoch = f->div_epoch, .div_end = f->div_end, .high_watermark = f->hw,
					 .log_start = f->ls, .offset = f->offset, .total_len = total,
					 .frag_count = count };

	if (total > (uint32_t)room * NATIVE_MAX_FRAGMENTS)
		total = 0;   /* beyond what one answer carries: cannot happen below 16 MiB */
	for (uint16_t i = 0; i < count; i++) {
		uint32_t off = (uint32_t)i * room, n = total - off < room ? total - off : room;

		if (!total)
			n = 0;
		d.frag_offset = off;
		d.frag_index = i;
		r->send(r->sh, &f->peer, r->tx,
			native_write_replica_data(r->tx, sizeof(r->tx), f->request, p->topic, tl, &d,
						  n ? f->rq.rd.data + off : NULL, n));
		r->st.data_out++;
	}
	r->st.bytes_out += total;
	if (total)
		shard_stat_add(&r->sh->stats.repl_native_bytes_out, total);
}

static void rfetch_release(struct rfetch *f)
{
	if (f->rq.p)
		part_read_release(&f->rq);   /* an answer without a read has nothing to give back */
	f->used = 0;
}

static void rfetch_released(void *self, struct shard_msg *m)
{
	(void)self;
	rfetch_release(m->p[0]);
}

/* On the home shard: send the owner's answer from our queue, then hand
 * the read back. */
static void rfetch_emit_remote(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct rfetch *f = m->p[0];
	struct shard_msg back = { .fn = rfetch_released, .p = { f } };
	struct native_repl *r = repl_of(sh);

	if (r) {
		rfetch_emit(r, f);
		r->st.data_for_others++;
	}
	shard_send(sh, f->r->sh->id, &back);
}

/* On the owner: the answer is fixed; it leaves by the home shard's queue. */
static void rfetch_send(struct native_repl *r, struct rfetch *f)
{
	struct part *p = f->part;

	if (!f->err && f->div_epoch < 0 && p->pl) {
		f->hw = p->pl->high_watermark;
		f->ls = p->pl->log_start;
		if (p->role)
			part_role_note_sent(p, f->replica, f->hw);   /* as the Fetch handler */
	} else if ((f->div_epoch >= 0 || f->err == KERR_OFFSET_OUT_OF_RANGE) && p->pl) {
		/* a diverging epoch; or a follower below the log start or past
		 * the end, which starts its log at the log start or cuts to
		 * the log end (div_end, div_epoch -1) */
		f->hw = p->pl->high_watermark;
		f->ls = p->pl->log_start;
		if (f->div_epoch < 0)
			f->div_end = p->pl->next_offset;   /* out of range: the log end */
	} else {
		f->hw = f->ls = -1;
	}
	if (f->home != r->sh->id) {
		struct shard_msg m = { .fn = rfetch_emit_remote, .p = { f } };

		shard_send(r->sh, f->home, &m);
		return;
	}
	rfetch_emit(r, f);
	rfetch_release(f);
}

static void rfetch_read_done(void *cookie, struct part_read_req *rq, int err)
{
	struct rfetch *f = cookie;

	(void)rq;
	if (err && err != -EAGAIN)
		f->err = err == -ENOENT ? KERR_UNKNOWN_TOPIC_OR_PARTITION
		       : err == -ERANGE ? KERR_OFFSET_OUT_OF_RANGE : KERR_KAFKA_STORAGE_ERROR;
	if (!err)
		repl_quota_spend(f->part, f->replica, f->rq.rd.bytes);
	rfetch_send(f->r, f);
}

/* On the owner: the leader's checks, then hold or read (Kafka's replica
 * Fetch, fetch_on_owner_buf's steps with the same functions). */
static void rfetch_start(struct native_repl *r, struct rfetch *f)
{
	struct part *p = f->part;
	uint64_t now = r->sh->now_ns;

	memset(&f->rq, 0, sizeof(f->rq));
	if (part_fetch_epoch_check(p, f->current_epoch, f->last_epoch, f->offset, &f->err, &f->div_epoch,
				   &f->div_end)) {
		r->st.fetches_refused += f->err != 0;
		rfetch_send(r, f);
		return;
	}
	if (part_role_replica_fetch(p, f->replica, f->offset, now) < 0) {
		/* not a follower of this leader (yet): Kafka's answer */
		f->err = f->current_epoch >= 0 ? KERR_UNKNOWN_LEADER_EPOCH : KERR_NOT_LEADER_OR_FOLLOWER;
		r->st.fetches_refused++;
		rfetch_send(r, f);
		return;
	}
	if (now < f->deadline_ns && !part_role_fetch_ready(p, f->replica, f->offset)) {
		/* nothing new: held until the log end or the high watermark moves */
		if (!f->parked) {
			f->parked = 1;
			r->nparked++;
			r->st.fetches_parked++;
		}
		return;
	}
	f->rq.offset = f->offset;
	f->rq.max_bytes = f->max_bytes;
	f->rq.isolation = 2;          /* a follower's: up to the log end */
	f->throttled = 0;
	if (repl_quota_take(p, f->replica, &f->rq.max_bytes)) {
		/* over the leader's throttle: held until the budget fills,
		 * or answered without records at its deadline */
		if (now < f->deadline_ns) {
			f->throttled = 1;
			f->parked = 1;
			r->nparked++;
			r->st.fetches_parked++;
			return;
		}
		rfetch_send(r, f);
		return;
	}
	part_read(p, &f->rq, rfetch_read_done, f);
}

static void rfetch_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct native_repl *r = repl_of(sh);
	struct rfetch *f = NULL;

	for (int i = 0; r && i < RSLOTS && !f; i++)
		if (!r->slot[i].used)
			f = &r->slot[i];
	if (!f) {
		if (r)
			r->st.fetches_busy++;   /* dropped: the follower asks again */
		return;
	}
	memset(f, 0, sizeof(*f));
	f->used = 1;
	f->r = r;
	f->part = m->p[0];
	f->offset = m->v[0];
	f->current_epoch = (int32_t)(m->v[1] >> 32);
	f->last_epoch = (int32_t)(uint32_t)m->v[1];
	f->peer.ip = (uint32_t)((uint64_t)m->v[2] >> 24);
	f->peer.port = (uint16_t)((uint64_t)m->v[2] >> 8);
	f->peer.q = (uint8_t)m->v[2];
	f->request = (uint32_t)((uint64_t)m->v[3] >> 32);
	f->replica = (int32_t)(uint32_t)m->v[3];
	f->max_bytes = (uint32_t)(uintptr_t)m->p[1];
	f->deadline_ns = sh->now_ns + (uint64_t)(uint32_t)((uintptr_t)m->p[1] >> 32) * 1000000ull;
	f->max_dg = (uint16_t)(uintptr_t)m->p[2];
	f->home = (int)((uintptr_t)m->p[2] >> 16);
	r->st.fetches_in++;
	rfetch_start(r, f);
}

/* An answer without the owner: an error the metadata gives. */
static void answer_error(struct native_repl *r, const struct native_msg *m, const struct native_repl_peer *to,
			 int16_t err)
{
	struct native_replica_data d = { .error = err, .partition = m->partition, .leader_epoch = m->leader_epoch,
					 .div_epoch = -1, .div_end = -1, .high_watermark = -1, .log_start = -1,
					 .offset = m->offset, .frag_count = 1 };

	r->st.fetches_refused++;
	r->send(r->sh, to, r->tx,
		native_write_replica_data(r->tx, sizeof(r->tx), m->request, m->topic, m->topic_len, &d, NULL, 0));
}

static void on_replica_fetch(struct native_repl *r, const struct native_msg *m, const struct native_repl_peer *from)
{
	struct shard *sh = r->sh;
	struct md_snapshot *md = broker_md(sh->b);
	const struct md_topic *t = md_find(md, m->topic, m->topic_len);
	const struct md_partition *mp;
	int16_t led = md_part_led(t, m->partition, sh->b->set.node_id, &mp);
	struct shard_msg f = { .fn = rfetch_on_owner };

	if (!mp) {
		answer_error(r, m, from, led);
		return;
	}
	if (m->replica_id == sh->b->set.node_id || !md_part_hosted(mp, m->replica_id)) {
		/* Kafka's Partition.followerReplicaOrThrow */
		answer_error(r, m, from, m->leader_epoch >= 0 ? KERR_UNKNOWN_LEADER_EPOCH : KERR_NOT_LEADER_OR_FOLLOWER);
		return;
	}
	f.p[0] = md_part_owner(mp);
	f.p[1] = (void *)(uintptr_t)((uint64_t)m->max_bytes | (uint64_t)m->max_wait_ms << 32);
	f.p[2] = (void *)(uintptr_t)((uint64_t)m->max_datagram | (uint64_t)sh->id << 16);
	f.v[0] = m->offset;
	f.v[1] = (int64_t)((uint64_t)(uint32_t)m->leader_epoch << 32 | (uint32_t)m->last_epoch);
	f.v[2] = (int64_t)((uint64_t)from->ip << 24 | (uint64_t)from->port << 8 | from->q);
	f.v[3] = (int64_t)((uint64_t)m->request << 32 | (uint32_t)m->replica_id);
	if (mp->owner_shard == sh->id) {
		rfetch_on_owner(sh, &f);
	} else {
		r->st.fetches_handed++;
		shard_send(sh, mp->owner_shard, &f);
	}
}

int native_repl_poll(struct shard *sh)
{
	struct native_repl *r = repl_of(sh);
	int work = 0;

	if (!r || !r->nparked)
		return 0;
	for (int i = 0; i < RSLOTS; i++) {
		struct rfetch *f = &r->slot[i];

		if (!f->used || !f->parked)
			continue;
		if (!f->part->deleted && f->part->role && sh->now_ns < f->deadline_ns &&
		    (f->throttled ? !repl_quota_open(f->part) : !part_role_fetch_ready(f->part, f->replica, f->offset)))
			continue;
		f->parked = 0;
		r->nparked--;
		rfetch_start(r, f);   /* the checks again, as a woken Fetch's round */
		work++;
	}
	return work;
}

/* ---- the follower ------------------------------------------------------------------ */

void native_repl_datagram(struct shard *sh, const struct native_msg *m, const struct native_repl_peer *from)
{
	struct native_repl *r = repl_of(sh);

	if (!r)
		return;
	if (m->type == NATIVE_REPLICA_FETCH) {
		on_replica_fetch(r, m, from);
		return;
	}
	if (!r->receiver) {
		r->st.data_stray++;
		return;
	}
	r->st.data_in++;
	r->receiver(r->receiver_arg, m);
}

uint16_t native_repl_max_datagram(const struct shard *sh)
{
	const struct native_repl *r = repl_of(sh);

	return r ? r->max_dg : 0;
}

void native_repl_set_receiver(struct shard *sh, void (*fn)(void *arg, const struct native_msg *m), void *arg)
{
	struct native_repl *r = repl_of(sh);

	if (!r)
		return;
	r->receiver = fn;
	r->receiver_arg = arg;
}

int native_repl_send(struct shard *sh, uint32_t ip, uint16_t port, uint32_t request, const char *topic,
		     size_t topic_len, const struct native_replica_fetch *f)
{
	struct native_repl *r = repl_of(sh);
	struct native_repl_peer to = { .ip = ip, .port = port, .q = 1 };
	int n;

	if (!r)
		return -ENOTSUP;
	n = native_write_replica_fetch(r->tx, sizeof(r->tx), request, topic, topic_len, f);
	if (n < 0)
		return n;
	r->st.fetches_out++;
	return r->send(sh, &to, r->tx, n);
}

const struct native_repl_stats *native_repl_stats(const struct shard *sh)
{
	const struct native_repl *r = repl_of(sh);

	return r ? &r->st : NULL;
}

int native_repl_describe(const struct shard *sh, char *buf, size_t len)
{
	const struct native_repl *r = repl_of(sh);

	if (!r)
		return 0;
	return snprintf(buf, len,
			"; replication: %llu REPLICA_FETCH served (%llu refused, %llu held, %llu without a slot), "
			"%llu handed to another shard, %llu answered for another shard, "
			"%llu REPLICA_DATA out (%llu record bytes), %llu REPLICA_FETCH out, %llu REPLICA_DATA in "
			"(%llu stray)",
			(unsigned long long)r->st.fetches_in, (unsigned long long)r->st.fetches_refused,
			(unsigned long long)r->st.fetches_parked, (unsigned long long)r->st.fetches_busy,
			(unsigned long long)r->st.fetches_handed, (unsigned long long)r->st.data_for_others,
			(unsigned long long)r->st.data_out, (unsigned long long)r->st.bytes_out,
			(unsigned long long)r->st.fetches_out, (unsigned long long)r->st.data_in,
			(unsigned long long)r->st.data_stray);
}
