/* bench/bench_rebalance.c — `sluice-bench rebalance` (options in
 * bench_groups.c, bench/groups.h): a consumer group driven through
 * librdkafka's high-level consumer (rd_kafka_subscribe) while members
 * leave and join.
 *
 * Thread: the main thread starts the broker, samples the group's state
 * every 5 ms and prints progress; one thread per consumer (each its own
 * rd_kafka_t, serving its rebalance callbacks in rd_kafka_consumer_poll) and
 * one producer thread. The group's shared state (struct grp) is under one
 * mutex. librdkafka adds its own threads.
 *
 * rebalance  --members (6) consumers subscribe to a --partitions (48)
 *     topic while a producer sends --rate (20000) records/s round-robin;
 *     each record carries the time it was handed to rd_kafka_produce
 *     (monotonic ns; how far the producer fell behind its schedule is
 *     reported separately). Once the group
 *     is stable and caught up, one member leaves (rd_kafka_consumer_close:
 *     revoke callback, sync commit, LeaveGroup), and once the rest is stable
 *     again a new member subscribes in its place. Each strategy of
 *     --strategies (range,cooperative-sticky) runs this with its own group,
 *     one after the other, against the same broker, topic and producer.
 *     Before its members subscribe, each group gets every partition's log
 *     end committed (commit_log_end), so a partition lost before its owner
 *     committed it resumes there, never past records nobody got.
 *     Consumers commit the positions of what they revoke synchronously in
 *     the revoke callback, so a new owner resumes where the old one
 *     stopped, and every second asynchronously (rd_kafka_commit_queue; a
 *     synchronous commit there would wait behind a JoinGroup the
 *     coordinator holds on the same connection and stop the poll loop).
 *     Each event starts at a random point of the heartbeat interval
 *     (--no-jitter: right after the settle window, which the members'
 *     heartbeats, in step since the last rebalance, tend to just precede).
 *     Per event (leave, join), measured from t0 = the leaving member's call
 *     to rd_kafka_consumer_close, or the joining member's rd_kafka_subscribe:
 *       gap        per partition, the longest time between two deliveries
 *                  of new offsets (in any member), for intervals ending
 *                  after t0; "moved" partitions are those whose owner after
 *                  the event differs from the owner before it, the others
 *                  "unmoved" (under eager assignment they are revoked and
 *                  given back in between).
 *       resumed    for moved partitions: first record delivered by the new
 *                  owner after its assignment, minus t0.
 *       recovered  the first 5 ms sample, at or after the last rebalance
 *                  callback of the event, where every partition is owned by
 *                  a live member, has delivered new records since that
 *                  callback (or t0), and has no acknowledged record that
 *                  has waited more than --caught-up-ms to be delivered (or
 *                  the steady window's longest wait, if higher), minus t0.
 *                  An event ends when this holds and no callback came for
 *                  --settle-s.
 *     Waiting is counted from the producer's delivery report (the broker
 *     acknowledged the record), not from rd_kafka_produce: on a loaded
 *     machine the producer client and the broker's appends fall seconds
 *     behind a fixed rate (every record then ages before any consumer can
 *     have it), which is not the group's doing; a partition nobody fetches,
 *     or a member that stops polling, still waits without bound and fails
 *     the event, which names the partitions and their owners. The age of
 *     the newest delivered record since rd_kafka_produce and the records
 *     not yet acknowledged are printed beside it.
 *     Checked: no partition assigned to a member while another still owns
 *     it; no offset skipped (a new owner starting past the committed
 *     offset); duplicates are counted (redelivery of uncommitted records).
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/groups.h"
#include "bench/hist.h"
#include "bench/kafka.h"

#define SAMPLE_NS      5000000ull     /* group state sampled every 5 ms */
#define CLOSE_TIMEOUT  30             /* s for a consumer to close */

/* ---- the producer thread ------------------------------------------------- */

/* When a partition's records were acknowledged: entries (hi, t), oldest
 * first, "offsets up to hi were acknowledged by t", one per ACK_STEP_NS at
 * most (later acknowledgements in the step extend the newest entry, so an
 * age is overstated by at most a step); when the ring is full the oldest
 * entry goes (an age is then understated, but is ACK_RING steps at least). */
#define ACK_RING       1024
#define ACK_STEP_NS    5000000ull

struct acks {
	int64_t acked;              /* highest acknowledged offset, -1 none */
	unsigned head, n;           /* next entry written; entries held */
	struct { int64_t hi; uint64_t t; } e[ACK_RING];
};

struct producer {
	struct client_errs errs;    /* first: the error callback's opaque */
	const struct gopts *o;
	const char *bootstrap, *topic;
	int partitions;
	uint64_t rate;
	rd_kafka_t *rk;
	pthread_t th;
	volatile int stop;
	volatile uint64_t sent, acked, failed, behind_max_ns;
	volatile uint64_t last_ack_ns;  /* the latest delivery report of success */
	rd_kafka_resp_err_t first_err;
	int rc;
	/* written by the delivery callback (the producer thread), read by the
	 * main thread's samples */
	pthread_mutex_t amu;
	struct acks *ack;           /* per partition */
};

static void gdr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct producer *p = opaque;

	(void)rk;
	if (m->err) {
		if (!p->failed++)
			p->first_err = m->err;
		return;
	}
	p->acked++;
	p->last_ack_ns = bench_now_ns();
	if (m->partition >= 0 && m->partition < p->partitions && m->offset >= 0) {
		struct acks *a = &p->ack[m->partition];
		uint64_t now = bench_now_ns();

		pthread_mutex_lock(&p->amu);
		if (m->offset > a->acked) {
			unsigned last = (a->head + ACK_RING - 1) % ACK_RING;

			a->acked = m->offset;
			if (a->n && now - a->e[last].t < ACK_STEP_NS) {
				a->e[last].hi = m->offset;
			} else {
				a->e[a->head].hi = m->offset;
				a->e[a->head].t = now;
				a->head = (a->head + 1) % ACK_RING;
				if (a->n < ACK_RING)
					a->n++;
			}
		}
		pthread_mutex_unlock(&p->amu);
	}
}

/* How long the oldest acknowledged record of partition part past
 * delivered has waited (0: none waits); under p->amu. */
static uint64_t ack_wait(const struct producer *p, int part, int64_t delivered, uint64_t now)
{
	const struct acks *a = &p->ack[part];
	unsigned lo = 0, hi = a->n, first = (a->head + ACK_RING - a->n) % ACK_RING;

	if (a->acked <= delivered || !a->n)
		return 0;
	while (lo < hi) {           /* the oldest entry with hi > delivered */
		unsigned mid = (lo + hi) / 2;

		if (a->e[(first + mid) % ACK_RING].hi > delivered)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo >= a->n)
		return 0;
	return now > a->e[(first + lo) % ACK_RING].t ? now - a->e[(first + lo) % ACK_RING].t : 0;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, p->topic, NULL);
	uint8_t *buf = calloc(1, (size_t)p->o->size);
	uint64_t t0 = bench_now_ns(), sent = 0;

	for (int i = 16; buf && i < p->o->size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	while (!p->stop && !bench_interrupted && buf) {
		uint64_t now = bench_now_ns();
		uint64_t due = (uint64_t)((double)(now - t0) * (double)p->rate / 1e9);

		/* how far behind its schedule the producer is */
		if (due > sent) {
			uint64_t late = now - (t0 + (uint64_t)((double)sent * 1e9 / (double)p->rate));

			if (late > p->behind_max_ns)
				p->behind_max_ns = late;
		}
		while (sent < due) {
			/* the time it is handed to the client: the newest age leaves
			 * out a producer behind its schedule (not the client's queue
			 * or the broker's appends: the delivery reports time those) */
			uint64_t ts = bench_now_ns();

			memcpy(buf, &sent, 8);
			memcpy(buf + 8, &ts, 8);
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)p->partitions), RD_KAFKA_MSG_F_COPY,
					     buf, (size_t)p->o->size, NULL, 0, NULL) == -1) {
				if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					fprintf(stderr, "producer: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
					p->rc = -EIO;
					p->stop = 1;
					break;
				}
				rd_kafka_poll(p->rk, 1);
				continue;
			}
			sent++;
			p->sent = sent;
		}
		rd_kafka_poll(p->rk, 0);
		sleep_ns(200000);
	}
	rd_kafka_flush(p->rk, 10000);
	rd_kafka_topic_destroy(rkt);
	free(buf);
	return NULL;
}

static int producer_start(struct producer *p, const struct gopts *o, const struct broker *br, const char *topic)
{
	rd_kafka_conf_t *c = base_conf(br->bootstrap, &p->errs);
	char err[256];

	p->o = o;
	p->topic = topic;
	p->partitions = o->partitions;
	p->rate = o->rate;
	if (!c)
		return -EINVAL;
	pthread_mutex_init(&p->amu, NULL);
	p->ack = calloc((size_t)o->partitions, sizeof(*p->ack));
	if (!p->ack) {
		rd_kafka_conf_destroy(c);
		return -ENOMEM;
	}
	for (int i = 0; i < o->partitions; i++)
		p->ack[i].acked = -1;
	if (conf_set(c, "acks", "1") < 0 || conf_set(c, "linger.ms", "5") < 0 ||
	    conf_set(c, "enable.idempotence", "false") < 0 ||
	    conf_set(c, "queue.buffering.max.messages", "2000000") < 0 ||
	    conf_set(c, "message.timeout.ms", "60000") < 0) {
		rd_kafka_conf_destroy(c);
		return -EINVAL;
	}
	rd_kafka_conf_set_dr_msg_cb(c, gdr_cb);
	rd_kafka_conf_set_opaque(c, p);
	p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!p->rk) {
		fprintf(stderr, "producer: %s\n", err);
		return -EINVAL;
	}
	if (check_cluster(p->rk, br) < 0) {
		rd_kafka_destroy(p->rk);
		p->rk = NULL;
		return -EADDRINUSE;
	}
	if (pthread_create(&p->th, NULL, producer_main, p)) {
		rd_kafka_destroy(p->rk);
		p->rk = NULL;
		return -EAGAIN;
	}
	return 0;
}

static int producer_stop(struct producer *p)
{
	if (!p->rk)
		return 0;
	p->stop = 1;
	pthread_join(p->th, NULL);
	rd_kafka_destroy(p->rk);
	p->rk = NULL;
	if (p->failed) {
		fprintf(stderr, "producer: %" PRIu64 " deliveries failed, first: %s\n", (uint64_t)p->failed,
			rd_kafka_err2str(p->first_err));
		return -EIO;
	}
	return p->rc;
}

/* ---- the group ----------------------------------------------------------- */

enum ev_kind { EV_NONE, EV_LEAVE, EV_JOIN };

struct part {
	int owner;                  /* member slot, -1 none */
	int64_t max_off;            /* highest offset delivered in this group */
	uint64_t last_prog;         /* when it was delivered */
	uint64_t last_ts;           /* when it was handed to the producer client */
	/* the event being measured */
	int owner_before;
	uint64_t gap_max;           /* longest interval between new offsets ending after t0 */
	uint64_t gap_end;           /* when it ended */
	uint64_t assigned;          /* last assignment during the event */
	uint64_t resumed;           /* first delivery by that owner after it */
	int assigns;                /* assignments during the event */
};

struct grp;

struct member {
	struct client_errs errs;    /* first: the error callback's opaque */
	struct grp *g;
	int slot;
	pthread_t th;
	volatile int stop;
	int started, live, done;
	int nassigned;              /* partitions it owns now */
	uint64_t assign_cbs;
	uint64_t commit_sent;       /* an asynchronous commit waits for its result */
	char id[128];
};

struct kerr {                   /* a count of errors and the first one's text */
	uint64_t n;
	char first[200];
};

struct sample {
	uint64_t t;
	int all_owned;
	uint64_t wait;              /* struct gstate's */
	uint64_t min_prog;
};

struct ev_result {
	int done;
	double t_first_cb, t_last_cb, recovered;
	int moved, unmoved;
	double unmoved_gap, moved_gap, moved_resumed, reassigned_resumed;
	uint64_t assign_cbs, revoke_cbs;
	uint64_t dups, skipped;
};

struct strat_result {
	const char *strategy;
	const char *protocol;
	double startup_s;
	double producer_behind;     /* the producer's largest lag behind its schedule, ms */
	uint64_t producer_unacked;  /* the most records handed to it and not acknowledged */
	double steady_gap, steady_stale;
	double caught_up;           /* the threshold used, ms */
	struct ev_result ev[2];     /* leave, join */
	uint64_t overlaps, lost, foreign, dups, skipped;
	uint64_t commits_ok, revoke_commits_ok;
	uint64_t commit_max, revoke_commit_max;
	struct kerr commit_err, revoke_commit_err;
	int ok;
};

struct grp {
	pthread_mutex_t mu;
	const struct gopts *o;
	const struct broker *br;
	struct producer *pr;
	const char *topic;
	char group[128];
	const char *strategy;
	const char *protocol;       /* as librdkafka reports it */
	int nparts;
	uint64_t cu;                /* caught up: newest delivered record at most this old */
	struct part *p;
	struct member m[MAX_MEMBERS];
	uint64_t consumed;
	uint64_t unacked_max;       /* the most records the producer had not had acknowledged */
	uint64_t last_cb;           /* any rebalance callback */
	/* steady window */
	int steady;
	uint64_t steady_gap;
	/* the event */
	enum ev_kind ev;
	int ev_slot;
	uint64_t ev_t0, ev_first_cb, ev_last_cb, ev_assign_cbs, ev_revoke_cbs;
	uint64_t ev_dups, ev_skipped;
	int counting;               /* dups/skips count once the group was stable */
	/* errors */
	uint64_t overlaps, lost, foreign, dups, skipped;
	char first_overlap[256], first_skip[256];
	uint64_t commits_ok, revoke_commits_ok;
	uint64_t commit_max, revoke_commit_max;     /* longest rd_kafka_commit call */
	struct kerr commit_err, revoke_commit_err, client_err;
};

static void kerr_add(struct kerr *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kerr_add(struct kerr *k, const char *fmt, ...)
{
	va_list ap;

	if (!k->n++) {
		va_start(ap, fmt);
		vsnprintf(k->first, sizeof(k->first), fmt, ap);
		va_end(ap);
	}
}

/* The result of one commit: the longest call per kind, ok and refused. */
static void commit_result(struct member *m, int revoke, int n, rd_kafka_resp_err_t e,
			  const rd_kafka_topic_partition_list_t *l, uint64_t t)
{
	struct grp *g = m->g;
	char where[64] = "";

	for (int i = 0; !e && l && i < l->cnt; i++)
		if (l->elems[i].err) {
			e = l->elems[i].err;
			snprintf(where, sizeof(where), " (partition %d)", l->elems[i].partition);
		}
	if (t > 100000000ull)
		fprintf(stderr, "%s[%s]: member %d: a %s commit of %d partition(s) took %.0f ms (%s)%s\n", g->o->cmd,
			g->strategy, m->slot, revoke ? "revoke" : "periodic", n, gms(t), rd_kafka_err2name(e),
			g->ev_t0 ? "" : ", outside an event");
	pthread_mutex_lock(&g->mu);
	if (revoke && t > g->revoke_commit_max)
		g->revoke_commit_max = t;
	else if (!revoke && t > g->commit_max)
		g->commit_max = t;
	if (!e) {
		if (revoke)
			g->revoke_commits_ok++;
		else
			g->commits_ok++;
	} else {
		kerr_add(revoke ? &g->revoke_commit_err : &g->commit_err, "member %d: %s%s", m->slot,
			 rd_kafka_err2name(e), where);
	}
	pthread_mutex_unlock(&g->mu);
}

/* The positions of parts (NULL: the assignment) that have one. */
static rd_kafka_topic_partition_list_t *positions(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *parts)
{
	rd_kafka_topic_partition_list_t *pos, *valid;

	if (parts)
		pos = rd_kafka_topic_partition_list_copy(parts);
	else if (rd_kafka_assignment(rk, &pos) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return NULL;
	rd_kafka_position(rk, pos);
	valid = rd_kafka_topic_partition_list_new(pos->cnt ? pos->cnt : 1);
	for (int i = 0; i < pos->cnt; i++)
		if (pos->elems[i].offset >= 0)
			rd_kafka_topic_partition_list_add(valid, pos->elems[i].topic,
							  pos->elems[i].partition)->offset = pos->elems[i].offset;
	rd_kafka_topic_partition_list_destroy(pos);
	if (!valid->cnt) {
		rd_kafka_topic_partition_list_destroy(valid);
		return NULL;
	}
	return valid;
}

/* In the revoke callback: a synchronous commit of what is given up, so
 * the next owner starts where this one stopped. */
static void commit_revoked(struct member *m, rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *parts)
{
	rd_kafka_topic_partition_list_t *l = positions(rk, parts);
	rd_kafka_resp_err_t e;
	uint64_t t;

	if (!l)
		return;             /* nothing consumed */
	t = bench_now_ns();
	e = rd_kafka_commit(rk, l, 0);
	commit_result(m, 1, l->cnt, e, l, bench_now_ns() - t);
	rd_kafka_topic_partition_list_destroy(l);
}

static void periodic_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
			       void *opaque)
{
	struct member *m = opaque;

	(void)rk;
	if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		err = RD_KAFKA_RESP_ERR_NO_ERROR;
	commit_result(m, 0, offsets ? offsets->cnt : 0, err, offsets, bench_now_ns() - m->commit_sent);
	m->commit_sent = 0;
}

/* Every second, asynchronously (the poll loop never waits for it): the
 * positions of the assignment. The result arrives on the member's own
 * queue, served in its poll loop. */
static void commit_periodic(struct member *m, rd_kafka_t *rk, rd_kafka_queue_t *q)
{
	rd_kafka_topic_partition_list_t *l;

	if (m->commit_sent)
		return;             /* the last one has not been answered */
	if (!(l = positions(rk, NULL)))
		return;
	m->commit_sent = bench_now_ns();
	if (rd_kafka_commit_queue(rk, l, q, periodic_commit_cb, m)) {
		commit_result(m, 0, l->cnt, RD_KAFKA_RESP_ERR__STATE, NULL, 0);
		m->commit_sent = 0;
	}
	rd_kafka_topic_partition_list_destroy(l);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
			 void *opaque)
{
	struct member *m = opaque;
	struct grp *g = m->g;
	const char *proto = rd_kafka_rebalance_protocol(rk);
	int coop = proto && !strcmp(proto, "COOPERATIVE");
	uint64_t now = bench_now_ns();
	rd_kafka_error_t *ke = NULL;
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;

	if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
		int lost = rd_kafka_assignment_lost(rk);

		if (!lost && parts->cnt)
			commit_revoked(m, rk, parts);
		now = bench_now_ns();
	}
	pthread_mutex_lock(&g->mu);
	if (proto && !g->protocol)
		g->protocol = coop ? "COOPERATIVE" : "EAGER";
	g->last_cb = now;
	if (g->ev_t0) {
		if (m->slot != g->ev_slot && !g->ev_first_cb)
			g->ev_first_cb = now;
		g->ev_last_cb = now;
		if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
			g->ev_assign_cbs++;
		else
			g->ev_revoke_cbs++;
	}
	for (int i = 0; i < parts->cnt; i++) {
		int32_t pi = parts->elems[i].partition;
		struct part *ps;

		if (strcmp(parts->elems[i].topic, g->topic) || pi < 0 || pi >= g->nparts)
			continue;
		ps = &g->p[pi];
		if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
			if (ps->owner >= 0 && ps->owner != m->slot) {
				if (!g->overlaps++)
					snprintf(g->first_overlap, sizeof(g->first_overlap),
						 "partition %d assigned to member %d (%s) while member %d (%s) "
						 "still owns it", pi, m->slot, m->id, ps->owner, g->m[ps->owner].id);
			}
			ps->owner = m->slot;
			m->nassigned++;
			if (g->ev_t0) {
				ps->assigned = now;
				ps->resumed = 0;
				ps->assigns++;
			}
		} else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
			if (ps->owner == m->slot)
				ps->owner = -1;
			m->nassigned--;
		}
	}
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
		m->assign_cbs++;
	else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && rd_kafka_assignment_lost(rk))
		g->lost++;
	pthread_mutex_unlock(&g->mu);

	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		if (coop)
			ke = rd_kafka_incremental_assign(rk, parts);
		else
			e = rd_kafka_assign(rk, parts);
	} else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
		if (coop)
			ke = rd_kafka_incremental_unassign(rk, parts);
		else
			e = rd_kafka_assign(rk, NULL);
	} else {
		fprintf(stderr, "%s: member %d: rebalance error %s\n", g->o->cmd, m->slot, rd_kafka_err2name(err));
		pthread_mutex_lock(&g->mu);
		kerr_add(&g->client_err, "member %d: rebalance callback error %s", m->slot, rd_kafka_err2name(err));
		pthread_mutex_unlock(&g->mu);
		e = rd_kafka_assign(rk, NULL);
	}
	if (ke || e) {
		pthread_mutex_lock(&g->mu);
		kerr_add(&g->client_err, "member %d: (incremental_)assign: %s", m->slot,
			 ke ? rd_kafka_error_string(ke) : rd_kafka_err2str(e));
		pthread_mutex_unlock(&g->mu);
		if (ke)
			rd_kafka_error_destroy(ke);
	}
}

/* One delivered record; under the lock. */
static void on_record(struct grp *g, struct member *m, const rd_kafka_message_t *msg, uint64_t now)
{
	struct part *ps;
	uint64_t ts = 0;

	if (msg->partition < 0 || msg->partition >= g->nparts)
		return;
	ps = &g->p[msg->partition];
	if (msg->len >= 16)
		memcpy(&ts, (const uint8_t *)msg->payload + 8, 8);
	g->consumed++;
	if (ps->owner != m->slot)
		g->foreign++;
	if (msg->offset > ps->max_off) {
		if (ps->max_off >= 0 && msg->offset > ps->max_off + 1 && g->counting) {
			if (!g->skipped)
				snprintf(g->first_skip, sizeof(g->first_skip), "partition %d: member %d got "
					 "offset %" PRId64 " after %" PRId64 " was the highest delivered",
					 msg->partition, m->slot, msg->offset, ps->max_off);
			g->skipped += (uint64_t)(msg->offset - ps->max_off - 1);
			if (g->ev_t0)
				g->ev_skipped += (uint64_t)(msg->offset - ps->max_off - 1);
		}
		if (ps->last_prog) {
			uint64_t gap = now - ps->last_prog;

			if (g->ev_t0 && now >= g->ev_t0) {
				if (gap > ps->gap_max) {
					ps->gap_max = gap;
					ps->gap_end = now;
				}
			} else if (g->steady && gap > g->steady_gap) {
				g->steady_gap = gap;
			}
		}
		ps->max_off = msg->offset;
		ps->last_prog = now;
		ps->last_ts = ts;
	} else if (g->counting) {
		g->dups++;
		if (g->ev_t0)
			g->ev_dups++;
	}
	if (g->ev_t0 && ps->assigned && !ps->resumed && ps->owner == m->slot)
		ps->resumed = now;
}

static void *member_main(void *arg)
{
	struct member *m = arg;
	struct grp *g = m->g;
	const struct gopts *o = g->o;
	rd_kafka_conf_t *c = base_conf(g->br->bootstrap, &m->errs);
	rd_kafka_topic_partition_list_t *topics;
	rd_kafka_queue_t *cq;
	rd_kafka_t *rk;
	char err[256], buf[32], cid[64];
	uint64_t next_commit;
	rd_kafka_resp_err_t e;

	snprintf(cid, sizeof(cid), "bench-member-%d", m->slot);
	if (!c)
		goto fail;
	snprintf(buf, sizeof(buf), "%d", o->heartbeat_ms);
	if (conf_set(c, "heartbeat.interval.ms", buf) < 0)
		goto fail_conf;
	snprintf(buf, sizeof(buf), "%d", o->session_ms);
	if (conf_set(c, "session.timeout.ms", buf) < 0 || conf_set(c, "group.id", g->group) < 0 ||
	    conf_set(c, "client.id", cid) < 0 ||
	    conf_set(c, "partition.assignment.strategy", g->strategy) < 0 ||
	    conf_set(c, "enable.auto.commit", "false") < 0 ||
	    conf_set(c, "auto.offset.reset", "latest") < 0 ||
	    conf_set(c, "fetch.wait.max.ms", "100") < 0 ||
	    conf_set(c, "fetch.error.backoff.ms", "10") < 0)
		goto fail_conf;
	if (getenv("SLUICE_BENCH_RDKAFKA_DEBUG") &&
	    conf_set(c, "debug", getenv("SLUICE_BENCH_RDKAFKA_DEBUG")) < 0)
		goto fail_conf;
	rd_kafka_conf_set_rebalance_cb(c, rebalance_cb);
	rd_kafka_conf_set_opaque(c, m);
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "%s: member %d: %s\n", o->cmd, m->slot, err);
		goto fail;
	}
	rd_kafka_poll_set_consumer(rk);
	cq = rd_kafka_queue_new(rk);
	topics = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(topics, g->topic, RD_KAFKA_PARTITION_UA);
	pthread_mutex_lock(&g->mu);
	if (g->ev == EV_JOIN && g->ev_slot == m->slot && !g->ev_t0)
		g->ev_t0 = bench_now_ns();
	pthread_mutex_unlock(&g->mu);
	e = rd_kafka_subscribe(rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (e) {
		fprintf(stderr, "%s: member %d: subscribe: %s\n", o->cmd, m->slot, rd_kafka_err2str(e));
		pthread_mutex_lock(&g->mu);
		kerr_add(&g->client_err, "member %d: subscribe: %s", m->slot, rd_kafka_err2name(e));
		pthread_mutex_unlock(&g->mu);
	}
	next_commit = o->periodic_commit_ms ? bench_now_ns() + (uint64_t)o->periodic_commit_ms * 1000000ull
					    : UINT64_MAX;
	while (!m->stop && !bench_interrupted) {
		rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 20);
		uint64_t now = bench_now_ns();

		if (msg) {
			if (msg->err) {
				if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
					fprintf(stderr, "%s: member %d: %s\n", o->cmd, m->slot,
						rd_kafka_message_errstr(msg));
					pthread_mutex_lock(&g->mu);
					kerr_add(&g->client_err, "member %d: %s: %s", m->slot,
						 rd_kafka_err2name(msg->err), rd_kafka_message_errstr(msg));
					pthread_mutex_unlock(&g->mu);
				}
			} else {
				pthread_mutex_lock(&g->mu);
				on_record(g, m, msg, now);
				pthread_mutex_unlock(&g->mu);
			}
			rd_kafka_message_destroy(msg);
		}
		if (!m->id[0]) {
			char *id = rd_kafka_memberid(rk);

			if (id && *id) {
				pthread_mutex_lock(&g->mu);
				snprintf(m->id, sizeof(m->id), "%s", id);
				pthread_mutex_unlock(&g->mu);
			}
			if (id)
				rd_kafka_mem_free(rk, id);
		}
		rd_kafka_queue_poll_callback(cq, 0);
		if (now >= next_commit) {
			commit_periodic(m, rk, cq);
			next_commit = bench_now_ns() + (uint64_t)o->periodic_commit_ms * 1000000ull;
		}
	}
	pthread_mutex_lock(&g->mu);
	if (g->ev == EV_LEAVE && g->ev_slot == m->slot && !g->ev_t0)
		g->ev_t0 = bench_now_ns();
	pthread_mutex_unlock(&g->mu);
	if ((e = rd_kafka_consumer_close(rk))) {
		fprintf(stderr, "%s: member %d: close: %s\n", o->cmd, m->slot, rd_kafka_err2str(e));
		pthread_mutex_lock(&g->mu);
		kerr_add(&g->client_err, "member %d: consumer_close: %s", m->slot, rd_kafka_err2name(e));
		pthread_mutex_unlock(&g->mu);
	}
	rd_kafka_queue_poll_callback(cq, 0);
	rd_kafka_queue_destroy(cq);
	rd_kafka_destroy(rk);
	pthread_mutex_lock(&g->mu);
	/* partitions a close left owned (no revoke callback) */
	for (int p = 0; p < g->nparts; p++)
		if (g->p[p].owner == m->slot)
			g->p[p].owner = -1;
	m->live = 0;
	m->done = 1;
	pthread_mutex_unlock(&g->mu);
	return NULL;
fail_conf:
	rd_kafka_conf_destroy(c);
fail:
	pthread_mutex_lock(&g->mu);
	kerr_add(&g->client_err, "member %d: could not create its consumer", m->slot);
	m->live = 0;
	m->done = 1;
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static int member_start(struct grp *g, int slot)
{
	struct member *m = &g->m[slot];

	pthread_mutex_lock(&g->mu);
	memset(m, 0, sizeof(*m));
	m->g = g;
	m->slot = slot;
	m->live = 1;
	pthread_mutex_unlock(&g->mu);
	if (pthread_create(&m->th, NULL, member_main, m)) {
		m->live = 0;
		return -EAGAIN;
	}
	m->started = 1;
	return 0;
}

/* Ask a member to close and wait for it; -ETIMEDOUT if close hangs. */
static int member_stop(struct grp *g, int slot)
{
	struct member *m = &g->m[slot];
	struct timespec ts;

	if (!m->started)
		return 0;
	m->stop = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += CLOSE_TIMEOUT;
	if (pthread_timedjoin_np(m->th, NULL, &ts)) {
		fprintf(stderr, "%s: member %d did not close within %d s (rd_kafka_consumer_close hangs)\n",
			g->o->cmd, slot, CLOSE_TIMEOUT);
		return -ETIMEDOUT;
	}
	m->started = 0;
	return 0;
}

/* What a sample sees of the group. */
struct gstate {
	int all_owned;              /* every partition owned by a live member */
	int all_members;            /* every live member owns some */
	uint64_t wait;              /* the longest an acknowledged record has waited to
				     * be delivered (UINT64_MAX: a partition never consumed) */
	int worst;                  /* its partition, -1 none */
	uint64_t min_prog;          /* the earliest of the partitions' latest deliveries of
				     * new offsets (0: one never delivered) */
	uint64_t age;               /* the oldest of the partitions' newest delivered
				     * records, from rd_kafka_produce (0: none delivered) */
	uint64_t unacked;           /* records handed to the producer client, not yet
				     * acknowledged */
	char line[256];             /* partitions per member, owned */
};

/* Under the lock: the group's state at now. Waiting is judged from the
 * producer's acknowledgements, not from rd_kafka_produce: a producer whose
 * client or broker falls behind (a loaded machine) ages every record before
 * any consumer can have it, and that is not the group's doing. */
static void group_state(struct grp *g, uint64_t now, struct gstate *st)
{
	struct producer *pr = g->pr;
	int owned = 0, live = 0, with = 0;
	size_t at = 0;

	memset(st, 0, sizeof(*st));
	st->worst = -1;
	st->min_prog = UINT64_MAX;
	pthread_mutex_lock(&pr->amu);
	for (int p = 0; p < g->nparts; p++) {
		struct part *ps = &g->p[p];
		uint64_t w = ps->max_off < 0 ? UINT64_MAX : ack_wait(pr, p, ps->max_off, now);

		if (ps->owner >= 0 && g->m[ps->owner].live)
			owned++;
		if (w > st->wait || st->worst < 0) {
			st->wait = w;
			st->worst = p;
		}
		if (ps->last_prog < st->min_prog)
			st->min_prog = ps->last_prog;
		if (ps->last_ts && now > ps->last_ts && now - ps->last_ts > st->age)
			st->age = now - ps->last_ts;
	}
	pthread_mutex_unlock(&pr->amu);
	if (!st->wait)
		st->worst = -1;
	st->unacked = pr->sent > pr->acked + pr->failed ? pr->sent - pr->acked - pr->failed : 0;
	if (st->unacked > g->unacked_max)
		g->unacked_max = st->unacked;
	for (int i = 0; i < g->o->members; i++) {
		if (!g->m[i].live)
			continue;
		live++;
		if (g->m[i].nassigned > 0)
			with++;
		if (at < sizeof(st->line))
			at += (size_t)snprintf(st->line + at, sizeof(st->line) - at, "%s%d", live > 1 ? "," : "",
					       g->m[i].nassigned);
	}
	st->all_owned = owned == g->nparts;
	st->all_members = with == live && live > 0;
	if (at < sizeof(st->line))
		snprintf(st->line + at, sizeof(st->line) - at, "  (owned %d/%d by %d members)", owned, g->nparts,
			 live);
}

static void stale_str(uint64_t stale, char *buf, size_t n)
{
	if (stale == UINT64_MAX)
		snprintf(buf, n, "never consumed");
	else
		snprintf(buf, n, "%.0f ms", gms(stale));
}

/* The once-a-second progress line. */
static void progress_line(struct grp *g, const char *what, double secs, const struct gstate *st)
{
	char wb[32];
	int w = st->worst;

	stale_str(st->wait, wb, sizeof(wb));
	if (w >= 0)
		snprintf(wb + strlen(wb), sizeof(wb) - strlen(wb), " (p%d m%d)", w, g->p[w].owner);
	fprintf(stderr, "%s[%s] %s: %.0f s  partitions per member %s  waiting %s  newest age %.0f ms  "
		"produced %" PRIu64 " (unacked %" PRIu64 ")  consumed %" PRIu64 "\n", g->o->cmd, g->strategy, what,
		secs, st->line, wb, gms(st->age), (uint64_t)g->pr->acked, st->unacked, g->consumed);
}

/* Under the lock: the partitions whose acknowledged records have waited
 * more than cu, with their owners (what a failure has to name). */
static void stale_parts(struct grp *g, uint64_t now, uint64_t cu, char *buf, size_t n)
{
	size_t at = 0;
	int k = 0;

	buf[0] = 0;
	pthread_mutex_lock(&g->pr->amu);
	for (int p = 0; p < g->nparts && at < n; p++) {
		struct part *ps = &g->p[p];
		uint64_t w = ps->max_off < 0 ? UINT64_MAX : ack_wait(g->pr, p, ps->max_off, now);
		char sb[32];

		if (w <= cu)
			continue;
		if (k++ < 8) {
			stale_str(w, sb, sizeof(sb));
			at += (size_t)snprintf(buf + at, n - at, "%spartition %d (member %d, delivered up to %"
					       PRId64 " of %" PRId64 " acknowledged) %s", k > 1 ? ", " : "", p,
					       ps->owner, ps->max_off, g->pr->ack[p].acked, sb);
		}
	}
	pthread_mutex_unlock(&g->pr->amu);
	if (k > 8 && at < n)
		snprintf(buf + at, n - at, " and %d more", k - 8);
	else if (!k)
		snprintf(buf, n, "none");
}

/* Wait until the group is stable: every partition owned by a live member,
 * every member owning some, no callback for settle_s, caught up. */
static int wait_stable(struct grp *g, const struct producer *pr, struct broker *br, const char *what,
		       double *took)
{
	const struct gopts *o = g->o;
	uint64_t t0 = bench_now_ns(), next_tick = t0 + 1000000000ull;
	uint64_t settle = (uint64_t)(o->settle_s * 1e9), cu = g->cu;

	for (;;) {
		uint64_t now = bench_now_ns();
		struct gstate st;
		int ok;
		char sb[32], parts[512];

		pthread_mutex_lock(&g->mu);
		group_state(g, now, &st);
		ok = st.all_owned && st.all_members && now - g->last_cb >= settle && st.wait <= cu;
		if (now >= next_tick)
			progress_line(g, what, (double)(now - t0) / 1e9, &st);
		pthread_mutex_unlock(&g->mu);
		if (ok) {
			*took = (double)(now - t0) / 1e9;
			return 0;
		}
		if (now >= next_tick) {
			next_tick += 1000000000ull;
			if (!broker_alive(br))
				return -ECHILD;
		}
		if (now - t0 > (uint64_t)(o->timeout_s * 1e9)) {
			stale_str(st.wait, sb, sizeof(sb));
			pthread_mutex_lock(&g->mu);
			stale_parts(g, now, cu, parts, sizeof(parts));
			pthread_mutex_unlock(&g->mu);
			fprintf(stderr, "%s[%s] %s: NOT STABLE after %.0f s: partitions per member %s, "
				"waiting %s, last rebalance callback %.1f s ago; partitions waiting over %.0f ms: %s\n",
				o->cmd, g->strategy, what, o->timeout_s, st.line, sb,
				g->last_cb ? (double)(now - g->last_cb) / 1e9 : -1.0, gms(cu), parts);
			return -ETIMEDOUT;
		}
		if (bench_interrupted)
			return -EINTR;
		if (pr->rc || pr->failed)
			return -EIO;
		sleep_ns(SAMPLE_NS);
	}
}

/* One event (a member leaves, or joins in slot), measured to the end. */
static int run_event(struct grp *g, struct producer *pr, struct broker *br, enum ev_kind kind, int slot,
		     struct ev_result *r)
{
	const struct gopts *o = g->o;
	const char *what = kind == EV_LEAVE ? "leave" : "join";
	size_t cap = (size_t)(o->timeout_s * 1e9 / SAMPLE_NS) + 16, ns = 0;
	struct sample *s = calloc(cap, sizeof(*s));
	uint64_t settle = (uint64_t)(o->settle_s * 1e9), cu = g->cu;
	uint64_t next_tick, t_start = bench_now_ns(), t0, t_end, last_cb, rec_cb = 0, rec_t = 0;
	int rc = 0, worst = -1;

	memset(r, 0, sizeof(*r));
	if (!s)
		return -ENOMEM;
	/* the members heartbeat in step (their timers restart together when a
	 * rebalance ends) and the windows before an event are whole seconds:
	 * start at a random point of the heartbeat interval, not always just
	 * after a heartbeat */
	if (!o->no_jitter) {
		uint64_t jitter = (uint64_t)(drand48() * o->heartbeat_ms * 1e6);

		fprintf(stderr, "%s[%s]: %s in %.0f ms (a random phase of the heartbeat interval)\n", o->cmd,
			g->strategy, kind == EV_LEAVE ? "leave" : "join", gms(jitter));
		sleep_ns(jitter);
	}
	pthread_mutex_lock(&g->mu);
	for (int p = 0; p < g->nparts; p++) {
		struct part *ps = &g->p[p];

		ps->owner_before = ps->owner;
		ps->gap_max = ps->gap_end = 0;
		ps->assigned = ps->resumed = 0;
		ps->assigns = 0;
	}
	g->ev = kind;
	g->ev_slot = slot;
	g->ev_t0 = g->ev_first_cb = g->ev_last_cb = 0;
	g->ev_assign_cbs = g->ev_revoke_cbs = g->ev_dups = g->ev_skipped = 0;
	pthread_mutex_unlock(&g->mu);
	fprintf(stderr, "%s[%s]: member %d %s\n", o->cmd, g->strategy, slot,
		kind == EV_LEAVE ? "leaves (rd_kafka_consumer_close)" : "joins (rd_kafka_subscribe, a new member)");
	if (kind == EV_LEAVE) {
		g->m[slot].stop = 1;
	} else if ((rc = member_start(g, slot)) < 0) {
		goto out;
	}
	next_tick = t_start + 1000000000ull;
	for (;;) {
		uint64_t now = bench_now_ns(), since;
		struct gstate st;
		int done, leaver_done;
		char sb[32], parts[512];

		pthread_mutex_lock(&g->mu);
		t0 = g->ev_t0;
		group_state(g, now, &st);
		last_cb = g->ev_last_cb;
		leaver_done = kind != EV_LEAVE || g->m[slot].done;
		if (now >= next_tick)
			progress_line(g, what, (double)(now - t_start) / 1e9, &st);
		pthread_mutex_unlock(&g->mu);
		if (t0 && ns < cap)
			s[ns++] = (struct sample){ now, st.all_owned, st.wait, st.min_prog };
		/* recovered once after the last callback (every partition owned,
		 * none waiting longer than cu, every one delivered new records
		 * since); a later callback starts the search again */
		if (last_cb != rec_cb) {
			rec_cb = last_cb;
			rec_t = 0;
		}
		since = last_cb > t0 ? last_cb : t0;
		if (t0 && !rec_t && st.all_owned && st.wait <= cu && now >= last_cb && st.min_prog >= since)
			rec_t = now;
		done = rec_t && leaver_done && st.all_owned && st.all_members && now - since >= settle &&
		       (kind == EV_LEAVE || g->m[slot].nassigned > 0);
		if (done)
			break;
		if (now >= next_tick) {
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				goto out;
			}
		}
		if (now - t_start > (uint64_t)(o->timeout_s * 1e9)) {
			stale_str(st.wait, sb, sizeof(sb));
			int idle = 0;

			pthread_mutex_lock(&g->mu);
			stale_parts(g, now, cu, parts, sizeof(parts));
			for (int p = 0; p < g->nparts; p++)
				idle += g->p[p].last_prog < since;
			pthread_mutex_unlock(&g->mu);
			fprintf(stderr, "%s[%s] %s: the group did NOT RECOVER within %.0f s: partitions per "
				"member %s, waiting %s, %s; partitions waiting over %.0f ms: %s; %d partition(s) "
				"delivered nothing new since the last callback; the producer's last acknowledgement "
				"%.1f s ago (%" PRIu64 " records unacknowledged)\n", o->cmd,
				g->strategy, what, o->timeout_s, st.line, sb,
				!leaver_done ? "the leaving member has not finished closing" :
				last_cb ? "rebalance callbacks seen" : "no rebalance callback on any member",
				gms(cu), parts, idle,
				pr->last_ack_ns ? (double)(now - pr->last_ack_ns) / 1e9 : -1.0, st.unacked);
			rc = -ETIMEDOUT;
			goto out;
		}
		if (bench_interrupted) {
			rc = -EINTR;
			goto out;
		}
		if (pr->rc || pr->failed) {
			rc = -EIO;
			goto out;
		}
		sleep_ns(SAMPLE_NS);
	}
	if (kind == EV_LEAVE && (rc = member_stop(g, slot)) < 0)
		goto out;
	/* the results */
	pthread_mutex_lock(&g->mu);
	t_end = bench_now_ns();
	r->done = 1;
	r->t_first_cb = g->ev_first_cb ? gms(g->ev_first_cb - t0) : -1;
	r->t_last_cb = last_cb ? gms(last_cb - t0) : -1;
	r->assign_cbs = g->ev_assign_cbs;
	r->revoke_cbs = g->ev_revoke_cbs;
	r->dups = g->ev_dups;
	r->skipped = g->ev_skipped;
	r->recovered = -1;
	for (size_t i = 0; i < ns; i++)
		if (s[i].t >= last_cb && s[i].all_owned && s[i].wait <= cu &&
		    s[i].min_prog >= (last_cb > t0 ? last_cb : t0)) {
			r->recovered = gms(s[i].t - t0);
			break;
		}
	for (int p = 0; p < g->nparts; p++) {
		struct part *ps = &g->p[p];
		uint64_t gap = ps->gap_max, open = t_end - ps->last_prog;
		int moved;

		if (open > gap && ps->last_prog < t0)
			gap = open;
		moved = ps->owner_before != ps->owner;
		if (moved) {
			r->moved++;
			if (gms(gap) > r->moved_gap)
				r->moved_gap = gms(gap);
			if (ps->resumed && gms(ps->resumed - t0) > r->moved_resumed)
				r->moved_resumed = gms(ps->resumed - t0);
		} else {
			r->unmoved++;
			if (gms(gap) > r->unmoved_gap) {
				r->unmoved_gap = gms(gap);
				worst = p;
			}
		}
		if (ps->assigns && ps->resumed && gms(ps->resumed - t0) > r->reassigned_resumed)
			r->reassigned_resumed = gms(ps->resumed - t0);
	}
	if (worst >= 0 && g->p[worst].gap_end)
		fprintf(stderr, "%s[%s] %s: the longest gap of an unmoved partition: partition %d (member %d), "
			"from %+.0f ms to %+.0f ms of t0\n", o->cmd, g->strategy, what, worst, g->p[worst].owner,
			gms(g->p[worst].gap_end - g->p[worst].gap_max) - gms(t0),
			gms(g->p[worst].gap_end) - gms(t0));
	g->ev = EV_NONE;
	g->ev_t0 = 0;
	pthread_mutex_unlock(&g->mu);
	fprintf(stderr, "%s[%s] %s: recovered after %.0f ms; %d partitions moved (longest gap %.0f ms, "
		"resumed by %.0f ms), %d unmoved (longest gap %.0f ms); callbacks: %" PRIu64 " assign, %"
		PRIu64 " revoke\n", o->cmd, g->strategy, what, r->recovered, r->moved, r->moved_gap,
		r->moved_resumed, r->unmoved, r->unmoved_gap, r->assign_cbs, r->revoke_cbs);
out:
	if (rc) {
		pthread_mutex_lock(&g->mu);
		g->ev = EV_NONE;
		g->ev_t0 = 0;
		pthread_mutex_unlock(&g->mu);
	}
	free(s);
	return rc;
}

/* Steady state for steady_s: the largest gap and wait. */
static void run_steady(struct grp *g, double *gap, double *stale_max)
{
	uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)(g->o->steady_s * 1e9), mx = 0;

	pthread_mutex_lock(&g->mu);
	g->steady = 1;
	g->steady_gap = 0;
	pthread_mutex_unlock(&g->mu);
	while (bench_now_ns() < end && !bench_interrupted) {
		uint64_t now = bench_now_ns();
		struct gstate st;

		pthread_mutex_lock(&g->mu);
		group_state(g, now, &st);
		pthread_mutex_unlock(&g->mu);
		if (st.wait > mx)
			mx = st.wait;
		sleep_ns(SAMPLE_NS);
	}
	pthread_mutex_lock(&g->mu);
	g->steady = 0;
	*gap = gms(g->steady_gap);
	pthread_mutex_unlock(&g->mu);
	*stale_max = gms(mx);
}

static int run_strategy(const struct gopts *o, struct broker *br, struct producer *pr, const char *topic,
			const char *strategy, struct strat_result *res)
{
	struct grp *g = calloc(1, sizeof(*g));
	int rc = 0, rc2, leaver = o->members - 1;

	memset(res, 0, sizeof(*res));
	res->strategy = strategy;
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	g->o = o;
	g->br = br;
	g->pr = pr;
	g->topic = topic;
	g->strategy = strategy;
	g->nparts = o->partitions;
	g->cu = (uint64_t)o->caught_up_ms * 1000000ull;
	snprintf(g->group, sizeof(g->group), "bench-rebalance-%d-%s", (int)getpid(), strategy);
	g->p = calloc((size_t)g->nparts, sizeof(*g->p));
	if (!g->p) {
		free(g);
		return -ENOMEM;
	}
	for (int p = 0; p < g->nparts; p++) {
		g->p[p].owner = -1;
		g->p[p].max_off = -1;
	}
	rc = commit_log_end(br->bootstrap, g->group, topic, g->nparts);
	fprintf(stderr, "%s[%s]: group %s: %d members subscribe\n", o->cmd, strategy, g->group, o->members);
	for (int i = 0; i < o->members && !rc; i++)
		rc = member_start(g, i);
	if (!rc)
		rc = wait_stable(g, pr, br, "startup", &res->startup_s);
	if (!rc) {
		pthread_mutex_lock(&g->mu);
		g->counting = 1;
		pthread_mutex_unlock(&g->mu);
		fprintf(stderr, "%s[%s]: stable after %.1f s; steady for %.1f s\n", o->cmd, strategy,
			res->startup_s, o->steady_s);
		run_steady(g, &res->steady_gap, &res->steady_stale);
		/* a loaded machine may not hold --caught-up-ms even when nothing
		 * happens: caught up is then as fresh as the steady state was */
		if (res->steady_stale * 1e6 > (double)g->cu)
			g->cu = (uint64_t)(res->steady_stale * 1e6);
		res->caught_up = gms(g->cu);
		rc = run_event(g, pr, br, EV_LEAVE, leaver, &res->ev[0]);
	}
	if (!rc)
		rc = run_event(g, pr, br, EV_JOIN, leaver, &res->ev[1]);
	fprintf(stderr, "%s[%s]: closing the members\n", o->cmd, strategy);
	pthread_mutex_lock(&g->mu);
	g->counting = 0;
	pthread_mutex_unlock(&g->mu);
	for (int i = 0; i < o->members; i++)
		g->m[i].stop = 1;
	for (int i = 0; i < o->members; i++)
		if ((rc2 = member_stop(g, i)) < 0 && !rc)
			rc = rc2;
	res->protocol = g->protocol;
	res->producer_behind = gms(pr->behind_max_ns);
	res->producer_unacked = g->unacked_max;
	pr->behind_max_ns = 0;
	res->overlaps = g->overlaps;
	res->lost = g->lost;
	res->foreign = g->foreign;
	res->dups = g->dups;
	res->skipped = g->skipped;
	res->commits_ok = g->commits_ok;
	res->revoke_commits_ok = g->revoke_commits_ok;
	res->commit_max = g->commit_max;
	res->revoke_commit_max = g->revoke_commit_max;
	res->commit_err = g->commit_err;
	res->revoke_commit_err = g->revoke_commit_err;
	if (g->overlaps)
		fprintf(stderr, "%s[%s]: OVERLAPPING ASSIGNMENT (%" PRIu64 "): %s\n", o->cmd, strategy,
			g->overlaps, g->first_overlap);
	if (g->skipped)
		fprintf(stderr, "%s[%s]: SKIPPED OFFSETS (%" PRIu64 " records): %s\n", o->cmd, strategy,
			g->skipped, g->first_skip);
	if (g->client_err.n)
		fprintf(stderr, "%s[%s]: %" PRIu64 " client errors, first: %s\n", o->cmd, strategy,
			g->client_err.n, g->client_err.first);
	if (g->commit_err.n)
		fprintf(stderr, "%s[%s]: %" PRIu64 " periodic commits refused, first: %s\n", o->cmd, strategy,
			g->commit_err.n, g->commit_err.first);
	if (g->revoke_commit_err.n)
		fprintf(stderr, "%s[%s]: %" PRIu64 " commits in the revoke callback refused, first: %s\n", o->cmd,
			strategy, g->revoke_commit_err.n, g->revoke_commit_err.first);
	if (!rc && (g->overlaps || g->skipped || g->client_err.n))
		rc = -EBADMSG;
	res->ok = !rc;
	{
		/* member threads that hung in close still use g: leak it then */
		int hung = 0;

		for (int i = 0; i < o->members; i++)
			hung |= g->m[i].started;
		if (!hung) {
			free(g->p);
			pthread_mutex_destroy(&g->mu);
			free(g);
		}
	}
	return rc;
}

/* ---- rebalance: output ---------------------------------------------------- */

static void row_d(const char *metric, int n, const struct strat_result *r, double (*get)(const struct strat_result *),
		  const char *fmt)
{
	printf("rebalance %-28s", metric);
	for (int i = 0; i < n; i++) {
		double v = get(&r[i]);

		if (v < 0)
			printf(" %20s", "-");
		else
			printf(" %20.*f", fmt[0] == 'i' ? 0 : 1, v);
	}
}

#define GETTER(name, expr) \
	static double name(const struct strat_result *r) { return (expr); }

GETTER(g_startup, r->startup_s)
GETTER(g_behind, r->producer_behind)
GETTER(g_unacked, (double)r->producer_unacked)
GETTER(g_steady_gap, r->steady_gap)
GETTER(g_steady_stale, r->steady_stale)
GETTER(g_caught_up, r->caught_up)
GETTER(g_l_seen, r->ev[0].t_first_cb)
GETTER(g_l_last, r->ev[0].t_last_cb)
GETTER(g_l_moved, r->ev[0].moved)
GETTER(g_l_unmoved_gap, r->ev[0].unmoved_gap)
GETTER(g_l_moved_gap, r->ev[0].moved_gap)
GETTER(g_l_moved_res, r->ev[0].moved_resumed)
GETTER(g_l_rec, r->ev[0].recovered)
GETTER(g_l_cbs, (double)(r->ev[0].assign_cbs + r->ev[0].revoke_cbs))
GETTER(g_j_seen, r->ev[1].t_first_cb)
GETTER(g_j_last, r->ev[1].t_last_cb)
GETTER(g_j_moved, r->ev[1].moved)
GETTER(g_j_unmoved_gap, r->ev[1].unmoved_gap)
GETTER(g_j_moved_gap, r->ev[1].moved_gap)
GETTER(g_j_moved_res, r->ev[1].moved_resumed)
GETTER(g_j_rec, r->ev[1].recovered)
GETTER(g_j_cbs, (double)(r->ev[1].assign_cbs + r->ev[1].revoke_cbs))
GETTER(g_dups, (double)r->dups)
GETTER(g_skipped, (double)r->skipped)
GETTER(g_overlaps, (double)r->overlaps)
GETTER(g_commits, (double)(r->commits_ok + r->revoke_commits_ok))
GETTER(g_commit_err, (double)r->commit_err.n)
GETTER(g_rcommit_err, (double)r->revoke_commit_err.n)
GETTER(g_commit_max, gms(r->commit_max))
GETTER(g_rcommit_max, gms(r->revoke_commit_max))

static int is_coop(const struct strat_result *r)
{
	return r->protocol ? !strcmp(r->protocol, "COOPERATIVE") : !!strstr(r->strategy, "cooperative");
}

/* Targets of the issue: with cooperative-sticky, unmoved partitions see
 * at most one heartbeat interval of gap; moved partitions resume within
 * 1 s of the rebalance starting (every strategy). */
static void target_note(int n, const struct strat_result *r, double (*get)(const struct strat_result *),
			double target, int coop_only)
{
	int first = 1;

	printf("  (target <= %.0f ms%s:", target, coop_only ? " with cooperative" : "");
	for (int i = 0; i < n; i++) {
		if (coop_only && !is_coop(&r[i]))
			continue;
		printf("%s %s %s", first ? "" : ",", r[i].strategy,
		       get(&r[i]) >= 0 && get(&r[i]) <= target ? "ok" : "missed");
		first = 0;
	}
	printf(")\n");
}

static void print_rebalance(const struct gopts *o, const struct broker *br, int n, const struct strat_result *r)
{
	printf("# sluice-bench rebalance: %d consumers (librdkafka %s, subscribe) on %d partitions, producer "
	       "%" PRIu64 " records/s x %d bytes (acks=1, linger.ms=5); heartbeat.interval.ms=%d session.timeout.ms=%d "
	       "(max.poll.interval.ms 300000, fetch.wait.max.ms 100, commits: sync in the revoke callback, "
	       "async every %d ms (0: never)); broker %s, group.initial.rebalance.delay.ms=0\n",
	       o->members, rd_kafka_version_str(), o->partitions, o->rate, o->size, o->heartbeat_ms, o->session_ms,
	       o->periodic_commit_ms,
	       br->shards < 0 ? br->bootstrap : (br->shards ? "shards set" : "shards=0 (one per core)"));
	printf("# t0 = the member's rd_kafka_consumer_close (leave) or rd_kafka_subscribe (join)%s; gap = longest "
	       "time between deliveries of new offsets of a partition, ending after t0; moved = owner after "
	       "differs from owner before; wait = how long a record the broker acknowledged waits to be "
	       "delivered; recovered = after the last rebalance callback, every partition owned, delivering, "
	       "and none waiting more than caught_up_threshold_ms (--caught-up-ms %d, or the steady window's "
	       "longest wait if higher); producer_unacked_max = records handed to the producer client and "
	       "not yet acknowledged; times in ms\n",
	       o->no_jitter ? ", right after the settle window" : ", at a random point of the heartbeat interval",
	       o->caught_up_ms);
	printf("rebalance %-28s", "strategy");
	for (int i = 0; i < n; i++)
		printf(" %20s", r[i].strategy);
	printf("\nrebalance %-28s", "protocol");
	for (int i = 0; i < n; i++)
		printf(" %20s", r[i].protocol ? r[i].protocol : "?");
	putchar('\n');
	row_d("startup_stable_s", n, r, g_startup, "f"); putchar('\n');
	row_d("producer_behind_max_ms", n, r, g_behind, "f"); putchar('\n');
	row_d("producer_unacked_max", n, r, g_unacked, "i"); putchar('\n');
	row_d("steady_gap_max_ms", n, r, g_steady_gap, "f"); putchar('\n');
	row_d("steady_wait_max_ms", n, r, g_steady_stale, "f"); putchar('\n');
	row_d("caught_up_threshold_ms", n, r, g_caught_up, "f"); putchar('\n');
	row_d("leave_first_callback_ms", n, r, g_l_seen, "f"); putchar('\n');
	row_d("leave_last_callback_ms", n, r, g_l_last, "f"); putchar('\n');
	row_d("leave_callbacks", n, r, g_l_cbs, "i"); putchar('\n');
	row_d("leave_moved_partitions", n, r, g_l_moved, "i"); putchar('\n');
	row_d("leave_unmoved_gap_max_ms", n, r, g_l_unmoved_gap, "f");
	target_note(n, r, g_l_unmoved_gap, o->heartbeat_ms, 1);
	row_d("leave_moved_gap_max_ms", n, r, g_l_moved_gap, "f"); putchar('\n');
	row_d("leave_moved_resumed_ms", n, r, g_l_moved_res, "f");
	target_note(n, r, g_l_moved_res, 1000, 0);
	row_d("leave_recovered_ms", n, r, g_l_rec, "f"); putchar('\n');
	row_d("join_first_callback_ms", n, r, g_j_seen, "f"); putchar('\n');
	row_d("join_last_callback_ms", n, r, g_j_last, "f"); putchar('\n');
	row_d("join_callbacks", n, r, g_j_cbs, "i"); putchar('\n');
	row_d("join_moved_partitions", n, r, g_j_moved, "i"); putchar('\n');
	row_d("join_unmoved_gap_max_ms", n, r, g_j_unmoved_gap, "f");
	target_note(n, r, g_j_unmoved_gap, o->heartbeat_ms, 1);
	row_d("join_moved_gap_max_ms", n, r, g_j_moved_gap, "f"); putchar('\n');
	row_d("join_moved_resumed_ms", n, r, g_j_moved_res, "f");
	target_note(n, r, g_j_moved_res, 1000, 0);
	row_d("join_recovered_ms", n, r, g_j_rec, "f"); putchar('\n');
	row_d("duplicates", n, r, g_dups, "i"); putchar('\n');
	row_d("skipped", n, r, g_skipped, "i"); putchar('\n');
	row_d("overlapping_assignments", n, r, g_overlaps, "i"); putchar('\n');
	row_d("commits_ok", n, r, g_commits, "i"); putchar('\n');
	row_d("periodic_commits_refused", n, r, g_commit_err, "i"); putchar('\n');
	row_d("revoke_commits_refused", n, r, g_rcommit_err, "i"); putchar('\n');
	row_d("periodic_commit_max_ms", n, r, g_commit_max, "f"); putchar('\n');
	row_d("revoke_commit_max_ms", n, r, g_rcommit_max, "f"); putchar('\n');
	for (int i = 0; i < n; i++) {
		if (r[i].commit_err.n)
			printf("# %s: first periodic commit refused: %s\n", r[i].strategy, r[i].commit_err.first);
		if (r[i].revoke_commit_err.n)
			printf("# %s: first revoke commit refused: %s\n", r[i].strategy,
			       r[i].revoke_commit_err.first);
	}
}

static int cmd_rebalance(const struct gopts *o)
{
	struct broker br;
	struct producer pr;
	struct strat_result res[MAX_STRATS];
	char topic[64];
	int rc, rc2, n = 0;

	memset(&pr, 0, sizeof(pr));
	memset(res, 0, sizeof(res));
	if ((rc = open_gbroker(o, &br)) < 0)
		return 1;
	snprintf(topic, sizeof(topic), "rebalance-%d", (int)getpid());
	rc = create_topics(br.bootstrap, topic, 1, 1, o->partitions);
	if (!rc) {
		fprintf(stderr, "rebalance: producing %" PRIu64 " records/s x %d bytes to %s (%d partitions)\n",
			o->rate, o->size, topic, o->partitions);
		rc = producer_start(&pr, o, &br, topic);
	}
	for (int i = 0; !rc && i < o->nstrats; i++, n++)
		rc = run_strategy(o, &br, &pr, topic, o->strategies[i], &res[i]);
	if (pr.rk && (rc2 = producer_stop(&pr)) && !rc)
		rc = rc2;
	free(pr.ack);
	if (!o->bootstrap && (rc2 = broker_stop(&br)) && !rc)
		rc = rc2;
	if (n && (rc == 0 || rc == -EBADMSG))
		print_rebalance(o, &br, n, res);
	return rc ? 1 : 0;
}

int bench_rebalance(int argc, char **argv)
{
	return bench_groups(G_REBALANCE, "rebalance", argc, argv, cmd_rebalance);
}
