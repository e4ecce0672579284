/* control/ctl_quorum.c — the metadata log on the Raft quorum
 * (control/quorum.h): the image (control/metalog.h, without a file of its
 * own) is what the quorum's committed records build, applied in log order
 * (metalog_apply) on every node; a proposer's continuation (ctl_meta.c)
 * runs once its record was applied here, with what applying it did.
 *
 * The quorum's log lives in <log.dirs>/__cluster_metadata-raft. A broker
 * started without controller.quorum.voters is a quorum of one: voter
 * <node.id>@127.0.0.1:0, a transport without sockets (it has nobody to talk
 * to), elected at once; the same code path as a cluster's quorum.
 *
 * A broker-only node (process.roles=broker) is no voter: its quorum is an
 * observer (quorum_config.observer: no raft, no directory), fed by the
 * controller channel's fetches from a voter; the records and snapshots it
 * fetches go through the same apply and restore below. It keeps its image
 * in <log.dirs>/sluice-metadata.image (control/meta_image.h: every 1,024
 * records, after a snapshot, at close), read back at start as a snapshot
 * at its index, so a restart fetches only the records after it. A controller-only
 * node is a voter with the channel even as a quorum of one (its brokers
 * reach it there).
 *
 * Start-up, in turns of the loop: open (the log replayed into the image),
 * the election (leader_changed), a barrier (every record of earlier terms
 * applied here), the one-time import of an older broker's metadata log,
 * the NODE record on a new directory; then ctl.c's start-up goes on
 * (ctl_quorum_open's `ready`).
 *
 * Import: a data directory written before the quorum (the local file
 * __cluster_metadata-0, control/metalog.c) is read once, its image
 * proposed as records (the same ones a snapshot rebuilds it from: NODE,
 * TOPIC, BROKER_CONFIG, PRODUCER_IDS), and the old directory renamed to
 * __cluster_metadata-0.imported once every record is committed. A crash
 * before the rename leaves both: the next start removes the quorum's
 * half-made directory and imports again.
 *
 * Lost records: libraft reads a damaged entry in its open segment as a
 * write torn by a crash, and drops it and everything after it. On a
 * cluster the leader sends them again; a quorum of one would start without
 * records it had applied (and acknowledged). So this node notes the last
 * index it applied in sluice-applied beside raft's files (a plain write,
 * no fsync: it only ever lags the log, whose entries are durable before
 * they are applied), and a quorum of one whose log ends before that index
 * refuses to start, naming the directory.
 *
 * @thread ctl: everything here, the quorum's callbacks included.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/ctl_quorum.h"
#include "control/cutil.h"
#include "control/meta_diff.h"
#include "control/meta_image.h"
#include "control/meta_scram.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "control/node_role.h"
#include "control/quorum.h"
#include "dataplane/kafka_ctx.h"
#include "storage/lathist.h"
#include "storage/slog.h"

#define CQ_DIR "__cluster_metadata-raft"
#define CQ_OLD_DIR "__cluster_metadata-0"
#define CQ_OLD_DONE "__cluster_metadata-0.imported"
#define CQ_APPLIED "sluice-applied"
#define CQ_IMAGE_EVERY 1024             /* a broker-only node writes its image every this many records */

/* A proposal in flight: its proposer's continuation. */
struct cq_wait {
	struct ctl_quorum *cq;
	uint64_t hash;                  /* of the record (cq->own) */
	uint64_t t0_ns;
	ctl_quorum_done_fn done;
	void *cookie;
};

/* FNV-1a of a record: which applied records are this node's own. */
static uint64_t rec_hash(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ^ len;
}

static void own_add(struct ctl_quorum *cq, uint64_t h)
{
	if (cq->nown == cq->cap_own) {
		int cap = cq->cap_own ? cq->cap_own * 2 : 16;
		uint64_t *n = realloc(cq->own, (size_t)cap * sizeof(*n));

		if (!n)
			abort();   /* the control thread's own bookkeeping */
		cq->own = n;
		cq->cap_own = cap;
	}
	cq->own[cq->nown++] = h;
}

static int own_find(const struct ctl_quorum *cq, uint64_t h)
{
	for (int i = 0; i < cq->nown; i++)
		if (cq->own[i] == h)
			return i;
	return -1;
}

static void own_drop(struct ctl_quorum *cq, uint64_t h)
{
	int i = own_find(cq, h);

	if (i >= 0)
		cq->own[i] = cq->own[--cq->nown];
}

/* Another node's TOPIC, REMOVE_TOPIC, PARTITIONS or CONFIG record was
 * applied here: ctl_follow.c serves the topic, retires it or rebuilds it
 * (once for any number of changes not followed yet). */
void ctl_follow_note(struct ctl *ctl, const uint8_t id[16], int kind)
{
	for (int i = 0; kind == CTL_FOLLOW_CHANGED && i < ctl->nfollow; i++)
		if (ctl->follow_kind[i] == CTL_FOLLOW_CHANGED && !memcmp(ctl->follow[i], id, 16))
			return;
	if (ctl->nfollow == ctl->cap_follow) {
		int cap = ctl->cap_follow ? ctl->cap_follow * 2 : 16;
		uint8_t(*n)[16] = realloc(ctl->follow, (size_t)cap * sizeof(*n));

		if (!n)
			abort();   /* the control thread's own bookkeeping */
		ctl->follow = n;
		ctl->cap_follow = cap;
	}
	ctl->follow_kind = realloc(ctl->follow_kind, (size_t)ctl->cap_follow);
	if (!ctl->follow_kind)
		abort();
	ctl->follow_kind[ctl->nfollow] = (uint8_t)kind;
	memcpy(ctl->follow[ctl->nfollow++], id, 16);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cq_start_failed(struct ctl_quorum *cq, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void cq_start_failed(struct ctl_quorum *cq, int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cq->started)
		return;
	cq->started = 1;
	cq->ready(cq->ctl, err, msg);
}

/* ---- the quorum's callbacks: the image follows the log ------------------ */

/* A record this node cannot apply: the nodes would diverge. Stop (the
 * broker exits 1 through its signal path) rather than serve a state the
 * others do not have. */
static void cq_fail(struct ctl_quorum *cq, uint64_t index, int rc)
{
	if (cq->failed)
		return;
	cq->failed = rc;
	slog(SLOG_CRIT, "the metadata record at index %llu of %s cannot be applied by this "
		"version (%s): stopping rather than diverge from the quorum; upgrade this node or restore "
		"its metadata directory from another voter",
		(unsigned long long)index, cq->dir, strerror(-rc));
	if (!cq->started) {
		cq_start_failed(cq, -EPROTO, "the metadata log in %s holds a record this version cannot apply "
				"(index %llu)", cq->dir, (unsigned long long)index);
		return;
	}
	__atomic_store_n(&cq->ctl->b->fatal, 1, __ATOMIC_RELEASE);
	kill(getpid(), SIGTERM);
}

/* This node's copy of the metadata log cannot be written (a failed,
 * read-only or full disk): it can no longer take the records that move
 * its leaderships, and would go on serving stale metadata. Halt (exit 1
 * through the signal path, as cq_fail), as Kafka's broker does when its
 * metadata log directory fails: the other nodes see its session end and
 * move its leaderships to in-sync followers. A full disk too: the log
 * cannot wait for space while the cluster's metadata moves on. The errno
 * named is the probe's (libraft's code when the probe succeeds). */
static void cq_disk_failed(struct ctl_quorum *cq, int rc, const char *msg)
{
	int now = dir_write_probe(cq->dir);

	if (cq->failed)
		return;
	cq->failed = rc;
	slog(SLOG_CRIT, "the metadata quorum's log in %s cannot be written (%s; libraft: %s): "
		"halting, so that the other nodes take over this node's leaderships; repair or replace the disk, "
		"then restart the node", cq->dir, strerror(-(now ? now : rc)), msg);
	if (!cq->started) {
		cq_start_failed(cq, rc, "the metadata quorum's log in %s cannot be written: %s", cq->dir, msg);
		return;
	}
	__atomic_store_n(&cq->ctl->b->fatal, 1, __ATOMIC_RELEASE);
	kill(getpid(), SIGTERM);
}

static void cq_apply(void *arg, uint64_t index, const void *buf, size_t len)
{
	struct ctl_quorum *cq = arg;
	struct metalog_applied a = { 0 };
	int rc;

	if (cq->failed)
		return;
	rc = metalog_apply_at(cq->ctl->ml, (int64_t)index, buf, len, &a);
	if (rc == -EPROTO || rc == -ENOMEM) {
		cq_fail(cq, index, rc);
		return;
	}
	/* any other error: the record no longer applies (a race between two
	 * proposals); a no-op on every node, its proposer is told why */
	if (rc == 0 && (a.broker >= 0 || a.type == META_REC_SCRAM || a.type == META_REC_REMOVE_SCRAM ||
			a.type == META_REC_ACL || a.type == META_REC_REMOVE_ACL || a.type == META_REC_FEATURE_LEVEL))
		cq->ctl->brokers_changed = 1;   /* the snapshot's brokers, SCRAM users, ACLs, level (ctl_poll) */
	/* ctl_elect.c: the snapshot follows partition records; the active
	 * controller looks again at every partition when a broker's fencing
	 * changed */
	if (rc == 0 && (a.type == META_REC_PARTITION_CHANGE || a.type == META_REC_LEADER_RESTARTED ||
			a.type == META_REC_BROKER_RESTARTED || a.type == META_REC_PARTITION_REASSIGN))
		cq->ctl->elect_due |= CTL_ELECT_PUBLISH;
	/* ctl_reassign.c: reassignments to step on, replicas to open or remove
	 * here, the replication throttle */
	if (rc == 0 && (a.type == META_REC_PARTITION_CHANGE || a.type == META_REC_PARTITION_REASSIGN ||
			a.type == META_REC_BROKER_FENCE || a.type == META_REC_BROKER_CONFIG ||
			a.type == META_REC_BROKER_RESTARTED))
		cq->ctl->reassign_due = 1;
	/* (BROKER_RESTARTED: a leadership it moved to a broker shutting down
	 * moves on) */
	if (rc == 0 && (a.type == META_REC_BROKER_FENCE || a.type == META_REC_UNREGISTER_BROKER ||
			a.type == META_REC_CONFIG || a.type == META_REC_BROKER_CONFIG ||
			a.type == META_REC_BROKER_RESTARTED))
		cq->ctl->elect_due |= CTL_ELECT_SCAN;   /* unclean.leader.election.enable may be on now */
	if (rc == 0 && (a.type == META_REC_PARTITION || a.type == META_REC_PARTITION_CHANGE ||
			a.type == META_REC_LEADER_RESTARTED || a.type == META_REC_BROKER_RESTARTED ||
			a.type == META_REC_PARTITION_REASSIGN || a.type == META_REC_CONFIG))
		cq->ctl->roles_changed = 1;     /* the partitions' roles, their throttle (ctl_poll) */
	cq->last_index = index;
	cq->last_rc = rc;
	cq->last = a;
	if (cq->ch) {
		/* before ctl_channel_applied, whose continuations drop theirs */
		int noted = rc == 0 && (a.type == META_REC_TOPIC || a.type == META_REC_REMOVE_TOPIC ||
					a.type == META_REC_PARTITIONS || a.type == META_REC_CONFIG ||
					a.type == META_REC_BROKER_CONFIG);
		int own = noted && own_find(cq, rec_hash(buf, len)) >= 0;

		if (rc == 0 && a.type == META_REC_TOPIC && a.topic && !own)
			ctl_follow_note(cq->ctl, a.topic->id, CTL_FOLLOW_CREATED);
		/* REMOVE_TOPIC: its type (int16) and format version (u8), then
		 * the topic's id (metalog_codec.h enc_type) */
		if (rc == 0 && a.type == META_REC_REMOVE_TOPIC && len >= 19 && !own)
			ctl_follow_note(cq->ctl, (const uint8_t *)buf + 3, CTL_FOLLOW_DELETED);
		/* the PARTITION records placing the new partitions come next:
		 * ctl_follow.c waits for them */
		if (rc == 0 && (a.type == META_REC_PARTITIONS || a.type == META_REC_CONFIG) && a.topic && !own)
			ctl_follow_note(cq->ctl, a.topic->id, CTL_FOLLOW_CHANGED);
		/* BROKER_CONFIG: its type and format version, then its scope
		 * (int32): the cluster's defaults or this node's own */
		if (rc == 0 && a.type == META_REC_BROKER_CONFIG && len >= 7 && !own) {
			const uint8_t *sc = (const uint8_t *)buf + 3;
			int32_t scope = (int32_t)be32_load(sc);

			if (scope == META_SCOPE_CLUSTER || scope == cq->ctl->b->set.node_id)
				cq->ctl->follow_broker = 1;
		}
		ctl_channel_keep(cq->ch, index, buf, len);
		ctl_channel_applied(cq->ch, index, rc, rc == 0 ? &a : NULL);
	}
	if (index > cq->applied_max)
		cq->applied_max = index;
}

static int cq_snapshot(void *arg, void **buf, size_t *len)
{
	struct ctl_quorum *cq = arg;

	return metalog_snapshot(cq->ctl->ml, buf, len);
}

/* A topic the installed snapshot created, deleted or changed (records
 * this node skipped): followed as each of those records would have been. */
static void cq_restored_topic(void *arg, const uint8_t id[16], enum meta_diff_kind kind)
{
	struct ctl *ctl = arg;

	ctl_follow_note(ctl, id, kind == META_DIFF_CREATED ? CTL_FOLLOW_CREATED :
			kind == META_DIFF_DELETED ? CTL_FOLLOW_DELETED : CTL_FOLLOW_CHANGED);
}

/* A snapshot installed: at open (the log's), or on a running node that
 * fell behind what the others keep (libraft's InstallSnapshot on a voter,
 * a fetched snapshot on an observer). A running node serves what the
 * records it skipped did: the image before and after are compared and
 * each topic created, deleted, grown or reconfigured is followed as its
 * record would have been (ctl_follow.c); leaders, ISR and replicas follow
 * the image as after any partition record (the flags below). Before
 * start-up is done nothing is noted: start-up serves the image it finds. */
static int cq_restore(void *arg, const void *buf, size_t len)
{
	struct ctl_quorum *cq = arg;
	struct meta_diff *d = NULL;
	int rc;

	cq->ctl->brokers_changed = 1;   /* the snapshot's brokers (ctl_poll) */
	cq->ctl->elect_due |= CTL_ELECT_PUBLISH | CTL_ELECT_SCAN;
	cq->ctl->roles_changed = 1;     /* the partitions' roles (ctl_poll) */
	cq->ctl->reassign_due = 1;
	if (cq->ch)
		ctl_channel_restored(cq->ch);
	if (cq->started && meta_diff_take(cq->ctl->ml, &d) < 0)
		abort();   /* the control thread's own bookkeeping */
	rc = metalog_restore(cq->ctl->ml, buf, len);
	cq->image_due = rc == 0;   /* a broker-only node writes its image (once started) */
	if (rc == 0 && d) {
		cq->snapshots_installed++;
		if (meta_diff_each(d, cq->ctl->ml, cq_restored_topic, cq->ctl))
			cq->ctl->follow_broker = 1;
		slog(SLOG_NOTICE, "installed a metadata snapshot (this node was behind what the voters "
			"keep): serving the topics it changed");
	}
	meta_diff_free(d);
	return rc;
}

static void cq_started(struct ctl_quorum *cq);

static void cq_barrier_done(void *cookie, uint64_t index, int err)
{
	struct ctl_quorum *cq = cookie;

	(void)index;
	cq->barrier_sent = 0;
	if (err < 0) {
		/* leadership lost meanwhile: the next leader_changed tries again */
		if (err != -QUORUM_ELOST && err != -ESHUTDOWN)
			cq_start_failed(cq, err, "the metadata quorum in %s failed its first barrier: %s", cq->dir,
					strerror(-err));
		return;
	}
	if (!cq->started)
		cq_started(cq);
}

static void cq_leader_changed(void *arg, int32_t leader, int am_leader)
{
	struct ctl_quorum *cq = arg;
	int rc;

	/* Metadata's and DescribeCluster's ControllerId (the shards read it) */
	__atomic_store_n(&cq->ctl->b->controller_id, leader, __ATOMIC_RELAXED);
	if (am_leader && !cq->leading)   /* elected: whom it replaced (not itself) */
		cq->took_over = cq->last_leader != leader ? cq->last_leader : -1;
	cq->leading = am_leader;
	if (leader >= 0)
		cq->last_leader = leader;
	if (am_leader) {
		cq->ctl->elect_due |= CTL_ELECT_SCAN;   /* a new active controller looks again */
		cq->ctl->reassign_due = 1;
	}
	if (!am_leader || cq->barrier_sent || cq->started)
		return;
	/* libraft appends nothing on election: until a barrier of this term
	 * is applied, records of earlier terms may be committed unseen */
	rc = quorum_barrier(cq->q, cq_barrier_done, cq);
	if (rc == 0)
		cq->barrier_sent = 1;
	else if (rc != -QUORUM_ENOTLEADER)
		cq_start_failed(cq, rc, "the metadata quorum in %s cannot start: %s", cq->dir, strerror(-rc));
}

static const struct quorum_ops cq_ops = {
	.apply = cq_apply,
	.snapshot = cq_snapshot,
	.restore = cq_restore,
	.leader_changed = cq_leader_changed,
};

/* ---- proposals ----------------------------------------------------------- */

static void cq_done(void *cookie, uint64_t index, int err)
{
	struct cq_wait *w = cookie;
	struct ctl_quorum *cq = w->cq;
	const struct metalog_applied *a = NULL;

	if (err == 0) {
		/* libraft runs a proposal's done right after its apply */
		if (cq->last_index == index) {
			err = cq->last_rc;
			a = err == 0 ? &cq->last : NULL;
		} else {
			err = cq->failed ? cq->failed : -EIO;
		}
	}
	lathist_add(&cq->commit_lat, mono_ns() - w->t0_ns);
	own_drop(cq, w->hash);
	w->done(w->cookie, err, a);
	free(w);
}

/* A record forwarded to the leader: applied here (or failed). */
static void cq_forwarded(void *cookie, int err, const struct metalog_applied *a)
{
	struct cq_wait *w = cookie;

	lathist_add(&w->cq->commit_lat, mono_ns() - w->t0_ns);
	own_drop(w->cq, w->hash);
	w->done(w->cookie, err, a);
	free(w);
}

int ctl_quorum_propose(struct ctl *ctl, const void *rec, size_t len, ctl_quorum_done_fn done, void *cookie)
{
	struct ctl_quorum *cq = ctl->cq;
	struct cq_wait *w;
	int rc;

	if (!cq || !cq->q)
		return -ESHUTDOWN;
	if (cq->failed)
		return cq->failed;
	if (!(w = malloc(sizeof(*w))))
		return -ENOMEM;
	w->cq = cq;
	w->t0_ns = mono_ns();
	w->done = done;
	w->cookie = cookie;
	w->hash = cq->ch ? rec_hash(rec, len) : 0;
	if (cq->ch && !quorum_is_leader(cq->q))
		rc = ctl_channel_propose(cq->ch, rec, len, cq_forwarded, w);
	else
		rc = quorum_propose(cq->q, rec, len, cq_done, w);
	if (rc < 0)
		free(w);
	else if (cq->ch)
		own_add(cq, w->hash);
	return rc;
}

/* ---- a broker-only node's image on disk ---------------------------------- */

/* The test knob SLUICE_TEST_METADATA_KEEP (docs/cluster.md), 0 unset. */
static unsigned test_keep(void)
{
	const char *keep = getenv("SLUICE_TEST_METADATA_KEEP");

	return keep ? (unsigned)strtoul(keep, NULL, 10) : 0;
}

/* Write the image at the index applied now (each image_every records, after
 * a snapshot installed, and at close). */
static void cq_image_save(struct ctl_quorum *cq)
{
	uint64_t at = quorum_last_index(cq->q);
	void *buf = NULL;
	size_t len = 0;
	int rc;

	cq->image_due = 0;
	if (at <= cq->image_saved)
		return;
	rc = metalog_snapshot(cq->ctl->ml, &buf, &len);
	if (rc == 0)
		rc = meta_image_save(cq->image_path, at, buf, len);
	free(buf);
	if (rc < 0) {
		if (!cq->image_failed)
			slog(SLOG_WARN, "cannot write the metadata image %s: %s (a restart fetches the whole "
				"metadata from the voters instead)", cq->image_path, strerror(-rc));
		cq->image_failed = 1;
		cq->image_saved = at;   /* not again before image_every more records */
		return;
	}
	cq->image_failed = 0;
	cq->image_saved = at;
}

/* At start: the image a previous start wrote, applied as a snapshot at its
 * index, so the first fetch asks for the records after it. A file that
 * does not read (damaged, another version, another cluster) is discarded,
 * and the whole metadata fetched. */
static void cq_image_load(struct ctl_quorum *cq)
{
	struct ctl *ctl = cq->ctl;
	struct metalog *tmp = NULL;
	char why[300] = "";
	uint64_t index = 0;
	void *snap = NULL;
	size_t len = 0;
	int rc = meta_image_load(cq->image_path, &index, &snap, &len, why, sizeof(why));

	if (rc == -ENOENT)
		return;
	if (rc == 0 && (metalog_image_new(ctl->b->set.node_id, &tmp) < 0 || metalog_restore(tmp, snap, len) < 0)) {
		rc = -EPROTO;
		snprintf(why, sizeof(why), "its snapshot does not read");
	} else if (rc == 0 && strcmp(metalog_cluster_id(tmp), cq->cluster_id)) {
		rc = -EINVAL;
		snprintf(why, sizeof(why), "it is of cluster '%s', not %s", metalog_cluster_id(tmp), cq->cluster_id);
	}
	if (tmp)
		metalog_close(tmp);
	if (rc == 0 && (rc = quorum_observe_restore(cq->q, index, snap, len)) < 0) {
		snprintf(why, sizeof(why), "it does not restore: %s", strerror(-rc));
		metalog_close(ctl->ml);   /* half restored: start empty */
		if (metalog_image_new(ctl->b->set.node_id, &ctl->ml) < 0)
			abort();   /* the control thread's own bookkeeping */
	}
	free(snap);
	if (rc < 0) {
		slog(SLOG_WARN, "the metadata image %s: %s: discarded; fetching the whole metadata from the "
			"voters", cq->image_path, why[0] ? why : strerror(-rc));
		unlink(cq->image_path);
		return;
	}
	cq->image_saved = index;
	slog(SLOG_INFO, "the metadata image %s is at index %llu: fetching the records after it",
		cq->image_path, (unsigned long long)index);
}

/* ---- the one-time import of an older broker's metadata log --------------- */

static void cq_import_finish(struct ctl_quorum *cq)
{
	struct broker *b = cq->ctl->b;
	char from[4200], to[4200];
	int dfd;

	free(cq->import_buf);
	cq->import_buf = NULL;
	if (cq->import_err < 0) {
		cq_start_failed(cq, cq->import_err, "cannot import the metadata log of %s/%s into %s: %s",
				b->set.data_dir, CQ_OLD_DIR, cq->dir, strerror(-cq->import_err));
		return;
	}
	snprintf(from, sizeof(from), "%s/%s", b->set.data_dir, CQ_OLD_DIR);
	snprintf(to, sizeof(to), "%s/%s", b->set.data_dir, CQ_OLD_DONE);
	if (rename(from, to) < 0) {
		cq_start_failed(cq, -errno, "imported %s but cannot rename it to %s: %s", from, to, strerror(errno));
		return;
	}
	dfd = open(b->set.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0) {
			/* the rename is redone by a later start if it was lost */
		}
		close(dfd);
	}
	slog(SLOG_NOTICE, "upgraded the data directory: imported the metadata log of %s (%lld records "
		"rebuilding its image) into the metadata quorum's log %s; the old log is kept as %s and is no "
		"longer read",
		from, (long long)cq->import_records, cq->dir, to);
	cq_started(cq);
}

static void cq_import_done(void *cookie, uint64_t index, int err)
{
	struct ctl_quorum *cq = cookie;

	if (err == 0 && cq->last_index == index)
		err = cq->last_rc;
	if (err < 0 && !cq->import_err)
		cq->import_err = err;
	if (--cq->import_left == 0)
		cq_import_finish(cq);
}

static int cq_import_one(void *arg, const void *rec, size_t len)
{
	struct ctl_quorum *cq = arg;
	int rc = quorum_propose(cq->q, rec, len, cq_import_done, cq);

	if (rc == 0) {
		cq->import_left++;
		cq->import_records++;
	}
	return rc;
}

/* ---- start-up ------------------------------------------------------------ */

static void cq_started(struct ctl_quorum *cq);

static void cq_scram_done(void *cookie, uint64_t index, int err)
{
	struct ctl_quorum *cq = cookie;

	if (err == 0 && cq->last_index == index)
		err = cq->last_rc;
	if (err < 0 && err != -QUORUM_ELOST && err != -ESHUTDOWN) {
		cq_start_failed(cq, err, "--add-scram: the metadata log in %s did not take a SCRAM user: %s", cq->dir,
				strerror(-err));
		return;
	}
	if (--cq->scram_left == 0) {
		cq->scram_boot = 2;
		cq_started(cq);
	}
}

/* sluiced --add-scram, as kafka-storage format --add-scram: the users go
 * into a metadata log that has none; on a directory that existed before
 * this start and has users, the start stops (exit 2). A new directory
 * joining a cluster whose log already has users (another voter's
 * --add-scram) takes them as they are. Returns 1 when records were
 * proposed (cq_started runs again once they are applied). */
static int cq_add_scram(struct ctl_quorum *cq)
{
	struct broker *b = cq->ctl->b;
	int rc = 0;

	if (!b->nboot_scram || cq->scram_boot)
		return 0;
	cq->scram_boot = 2;
	if (metalog_scram(cq->ctl->ml)->n) {
		if (cq->dir_existed)
			cq_start_failed(cq, -EINVAL, "--add-scram: the metadata log in %s already has SCRAM users: "
					"--add-scram applies once, when the data directory is made (as kafka-storage "
					"format); add users with AlterUserScramCredentials (kafka-configs --alter "
					"--entity-type users) and start without --add-scram", cq->dir);
		return cq->dir_existed ? -1 : 0;
	}
	cq->scram_boot = 1;
	cq->scram_left = 1;   /* this function's own, released below */
	for (int i = 0; i < b->nboot_scram && rc == 0; i++) {
		struct metalog_rec r;

		rc = meta_scram_build(metalog_scram(cq->ctl->ml), &b->boot_scram[i], &r);
		if (rc == 0) {
			rc = quorum_propose(cq->q, r.buf, r.len, cq_scram_done, cq);
			metalog_rec_free(&r);
		}
		if (rc == 0)
			cq->scram_left++;
	}
	if (rc < 0) {
		cq_start_failed(cq, rc, "--add-scram: cannot write a SCRAM user into the metadata log %s: %s", cq->dir,
				strerror(-rc));
		return -1;
	}
	cq_scram_done(cq, 0, 0);
	return 1;
}

/* A new cluster's FEATURE_LEVEL: its outcome is the NODE record's after it
 * (proposed in order: a lost one is proposed again at the next start). */
static void cq_level_done(void *cookie, uint64_t index, int err)
{
	(void)cookie;
	(void)index;
	(void)err;
}

/* Elected and caught up: import what an older broker left, write the
 * FEATURE_LEVEL and NODE records on a new directory, then hand over to
 * ctl.c. */
static void cq_started(struct ctl_quorum *cq)
{
	struct ctl *ctl = cq->ctl;
	const char *have;
	int rc;

	if (cq->import_buf) {
		cq->import_left = 1;   /* this function's own, released below */
		rc = metalog_snapshot_each(cq->import_buf, cq->import_len, cq_import_one, cq);
		if (rc < 0 && !cq->import_err)
			cq->import_err = rc;
		if (--cq->import_left == 0)
			cq_import_finish(cq);
		return;
	}
	have = metalog_cluster_id(ctl->ml);
	if (!have[0]) {
		struct metalog_rec r;

		/* a new cluster starts at this node's highest metadata.version
		 * (as kafka-storage format writes the release's): FEATURE_LEVEL
		 * before the NODE record, whose application ends the start-up
		 * (level 1 is the log without one, as older builds wrote it) */
		if (meta_features_local_max() > metalog_metadata_version(ctl->ml)) {
			rc = metalog_build_feature_level(ctl->ml, META_FEATURE_METADATA_VERSION,
							 meta_features_local_max(), &r);
			if (rc == 0 && r.len)
				rc = quorum_propose(cq->q, r.buf, r.len, cq_level_done, cq);
			metalog_rec_free(&r);
			if (rc < 0) {
				cq_start_failed(cq, rc, "cannot write the metadata.version into the metadata log %s: %s",
						cq->dir, strerror(-rc));
				return;
			}
		}
		rc = metalog_build_node_for(ctl->ml, cq->cluster_id, &r);
		if (rc == 0) {
			rc = quorum_propose(cq->q, r.buf, r.len, cq_barrier_done, cq);
			metalog_rec_free(&r);
			if (rc == 0)
				return;   /* back here once applied */
		}
		cq_start_failed(cq, rc, "cannot write the cluster id into the metadata log %s: %s", cq->dir,
				strerror(-rc));
		return;
	}
	if (strcmp(have, cq->cluster_id)) {
		cq_start_failed(cq, -EINVAL, "the metadata log in %s says cluster id %s and its identity file %s: "
				"the directory is damaged or was assembled from two clusters",
				cq->dir, have, cq->cluster_id);
		return;
	}
	if (cq_add_scram(cq) != 0)
		return;   /* back here once applied, or failed */
	cq->started = 1;
	cq->ready(ctl, 0, NULL);
}

/* The last index applied here, as noted in sluice-applied (0: none). */
static uint64_t applied_read(const char *dir)
{
	char path[4300], buf[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, CQ_APPLIED);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strtoull(buf, NULL, 10);
}

/* Note the last index applied (each turn that applied something). */
static void applied_note(struct ctl_quorum *cq)
{
	char buf[32];
	int n;

	if (cq->applied_fd < 0 || cq->applied_max <= cq->applied_written)
		return;
	n = snprintf(buf, sizeof(buf), "%020llu\n", (unsigned long long)cq->applied_max);
	if (pwrite(cq->applied_fd, buf, (size_t)n, 0) == n)
		cq->applied_written = cq->applied_max;
}

/* Remove a directory of plain files (a half-made quorum directory). */
static int rm_flat_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(dirfd(d), e->d_name, 0) < 0)
			rc = -errno;
	closedir(d);
	if (rc == 0 && rmdir(path) < 0)
		rc = -errno;
	return rc;
}

/* 22 characters of base64url: what metalog_new_cluster_id makes and
 * Kafka's cluster ids are. */
static int cluster_id_valid(const char *s)
{
	if (strlen(s) != 22)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return 0;
	return 1;
}

static int dir_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Read an older broker's metadata log into cq->import_buf (a snapshot of
 * its image); its cluster id is the directory's. */
static int cq_read_old(struct ctl_quorum *cq, const char *data_dir, int32_t node_id, char *err, size_t errlen)
{
	struct metalog *old;
	int rc = metalog_open(data_dir, node_id, &old);

	if (rc == -EINVAL) {
		snprintf(err, errlen, "node.id: the metadata log in %s/%s was written by another node than %d: "
			 "start this node with its own node.id, or give it its own log.dirs",
			 data_dir, CQ_OLD_DIR, node_id);
		return rc;
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the metadata log in %s/%s to import it: %s", data_dir, CQ_OLD_DIR,
			 strerror(-rc));
		return rc;
	}
	snprintf(cq->cluster_id, sizeof(cq->cluster_id), "%s", metalog_cluster_id(old));
	rc = metalog_snapshot(old, &cq->import_buf, &cq->import_len);
	metalog_close(old);
	if (rc < 0)
		snprintf(err, errlen, "cannot read the metadata log in %s/%s to import it: %s", data_dir, CQ_OLD_DIR,
			 strerror(-rc));
	return rc;
}

/* A voter's host as raft takes it: dotted-quad IPv4 (names resolved here,
 * once, at start). */
static int cq_resolve(const char *host, char *out, size_t cap)
{
	static const struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &ai);

	if (rc != 0 || !ai)
		return -EHOSTUNREACH;
	inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr, out, (socklen_t)cap);
	freeaddrinfo(ai);
	return 0;
}

/* controller.quorum.voters naming several nodes: the quorum's voters
 * (every node, on its controller port) and the controller channel. A
 * list of one (or none) leaves qc as it is: a quorum of one, no socket. */
static int cq_cluster_voters(struct ctl_quorum *cq, struct quorum_config *qc, char *err, size_t errlen)
{
	static struct node_voter nv[NODE_ROLE_MAX_VOTERS];       /* start-up only */
	static struct quorum_voter qv[NODE_ROLE_MAX_VOTERS];
	static char hosts[NODE_ROLE_MAX_VOTERS][INET_ADDRSTRLEN];
	struct ctl_channel_voter cv[NODE_ROLE_MAX_VOTERS];
	/* A test knob, not a setting (docs/cluster.md): a voter keeps this
	 * many records for observers' fetches, and raft snapshots every this
	 * many entries keeping as many, so a test makes a node fall behind
	 * what the voters keep with a few records instead of thousands. */
	unsigned keep = test_keep();
	int n, rc;

	rc = node_voters_parse(config_str(cq->ctl->cfg, "controller.quorum.voters"), nv, NODE_ROLE_MAX_VOTERS, &n,
			       err, errlen);
	if (rc < 0)
		return rc;
	cq->nvoters = n;
	/* a node of one role is always of a cluster: a controller only has
	 * brokers to serve (a quorum of one among them included), a broker
	 * only the controllers to follow; a combined quorum of one opens its
	 * controller port when it has a controller listener (broker-only
	 * nodes may join it), else no socket */
	if (n <= 1 && !cq->ctl->b->set.controller_only && !cq->ctl->b->set.broker_only) {
		struct node_role *role = calloc(1, sizeof(*role));
		int port;

		if (!role)
			return -ENOMEM;
		port = n == 1 && node_role_check(cq->ctl->cfg, role, err, errlen) == 0 ? role->ctl_port : 0;
		free(role);
		err[0] = 0;
		if (!port)
			return 0;
	}
	for (int i = 0; i < n; i++) {
		if (cq_resolve(nv[i].host, hosts[i], sizeof(hosts[i])) < 0) {
			snprintf(err, errlen, "controller.quorum.voters: the host '%s' of node %d does not resolve to "
				 "an IPv4 address", nv[i].host, nv[i].id);
			return -EINVAL;
		}
		qv[i] = (struct quorum_voter){ .node_id = nv[i].id, .host = hosts[i], .port = (uint16_t)nv[i].port };
		cv[i].id = nv[i].id;
		snprintf(cv[i].address, sizeof(cv[i].address), "%.64s:%d", hosts[i], nv[i].port);
	}
	if ((rc = ctl_channel_create(cq->ctl, qc->node_id, cv, n, &cq->ch)) < 0) {
		snprintf(err, errlen, "out of memory for the controller channel");
		return rc;
	}
	if (keep) {
		ctl_channel_keep_max(cq->ch, keep);
		qc->snapshot_threshold = qc->snapshot_trailing = keep;
	}
	qc->voters = qv;
	qc->nvoters = n;
	qc->channel_accept = ctl_channel_accept;
	qc->channel_arg = cq->ch;
	qc->observer = cq->ctl->b->set.broker_only;
	return 0;
}

/* A broker-only node (an observer: quorum_config.observer): no raft
 * directory; the image starts empty at every start and is rebuilt from
 * what a voter sends (a snapshot, then the records), as a Kafka broker
 * fetches the metadata log. Its cluster id is the configured one. */
static int cq_open_observer(struct ctl *ctl, struct ctl_quorum *cq, struct quorum_config *qc, char *err,
			    size_t errlen)
{
	struct broker *b = ctl->b;
	const char *want_cid = config_str(ctl->cfg, "cluster.id");
	int rc;

	if (dir_exists(cq->dir)) {
		snprintf(err, errlen, "process.roles=broker, but %s holds the metadata quorum's log of a voter: "
			 "this data directory was a controller's; give a broker-only node a data directory of its "
			 "own", cq->dir);
		return -EINVAL;
	}
	if (!cluster_id_valid(want_cid)) {
		snprintf(err, errlen, "cluster.id: '%s' is not a cluster id (22 characters of base64url, as "
			 "sluiced prints at start and Kafka's kafka-storage random-uuid makes)", want_cid);
		return -EINVAL;
	}
	memcpy(cq->cluster_id, want_cid, 23);
	qc->cluster_id = cq->cluster_id;
	if ((rc = metalog_image_new(b->set.node_id, &ctl->ml)) < 0) {
		snprintf(err, errlen, "out of memory for the metadata image");
		return rc;
	}
	rc = quorum_open(qc, &cq_ops, cq, &cq->q, err, errlen);
	if (rc < 0)
		return rc;
	ctl_channel_bind(cq->ch, cq->q);
	ctl_channel_serve_describe(cq->ch, ctl_quorum_describe_serve);
	snprintf(cq->image_path, sizeof(cq->image_path), "%s/%s", b->set.data_dir, META_IMAGE_FILE);
	cq->image_every = test_keep() ? test_keep() : CQ_IMAGE_EVERY;
	cq_image_load(cq);
	return 0;
}

int ctl_quorum_open(struct ctl *ctl, void (*ready)(struct ctl *ctl, int err, const char *msg), char *err,
		    size_t errlen)
{
	struct broker *b = ctl->b;
	struct ctl_quorum *cq;
	struct quorum_voter self = { .node_id = b->set.node_id, .host = "127.0.0.1", .port = 0 };
	struct quorum_config qc = { 0 };
	char old[4200], vhave[2048], vwant[2048], cid[256];
	const char *want_cid;
	int rc;

	if (!(cq = calloc(1, sizeof(*cq))))
		return -ENOMEM;
	cq->applied_fd = -1;
	cq->last_leader = cq->took_over = -1;
	cq->ctl = ctl;
	cq->ready = ready;
	ctl->cq = cq;
	snprintf(cq->dir, sizeof(cq->dir), "%s/%s", b->set.data_dir, CQ_DIR);
	snprintf(old, sizeof(old), "%s/%s", b->set.data_dir, CQ_OLD_DIR);
	qc.node_id = b->set.node_id;
	qc.dir = cq->dir;
	qc.voters = &self;
	qc.nvoters = 1;
	qc.tls = b->quorum_tls;   /* an SSL controller listener, or NULL */
	qc.counters = b->quorum_port;
	qc.sasl = b->quorum_sasl;   /* a SASL controller listener, or NULL */
	if ((rc = cq_cluster_voters(cq, &qc, err, errlen)) < 0)
		return rc;
	if (qc.observer)
		return cq_open_observer(ctl, cq, &qc, err, errlen);

	rc = quorum_identity_read(cq->dir, cid, sizeof(cid), vhave, sizeof(vhave));
	cq->dir_existed = rc == 0;
	if (rc == 0 && dir_exists(old)) {
		/* an import that did not finish: start it again */
		slog(SLOG_INFO, "%s was being imported into %s when the broker stopped: importing "
			"again", old, cq->dir);
		if ((rc = rm_flat_dir(cq->dir)) < 0) {
			snprintf(err, errlen, "cannot remove the half-made %s: %s", cq->dir, strerror(-rc));
			return rc;
		}
		rc = -ENOENT;
	}
	want_cid = config_str(ctl->cfg, "cluster.id");
	if (want_cid[0] && !cluster_id_valid(want_cid)) {
		snprintf(err, errlen, "cluster.id: '%s' is not a cluster id (22 characters of base64url, as "
			 "sluiced prints at start and Kafka's kafka-storage random-uuid makes)", want_cid);
		return -EINVAL;
	}
	if (rc == 0) {
		quorum_voters_text(&qc, vwant, sizeof(vwant));
		if (strcmp(vhave, vwant) && !quorum_same_lone_voter(vhave, vwant)) {
			snprintf(err, errlen, "node.id: %s belongs to the quorum %s, not to node %d (%s): start this "
				 "node with the node.id it was made with, or give it its own log.dirs",
				 cq->dir, vhave, b->set.node_id, vwant);
			return -EINVAL;
		}
		if (strlen(cid) != 22) {
			snprintf(err, errlen, "%s names cluster id '%s', which no Sluice node makes (22 "
				 "characters): the directory is damaged", cq->dir, cid);
			return -EPROTO;
		}
		memcpy(cq->cluster_id, cid, 23);
	} else if (rc == -ENOENT) {
		if (dir_exists(old) && cq->nvoters > 1) {
			snprintf(err, errlen, "controller.quorum.voters: %s holds the metadata log of a one-node "
				 "broker, which is imported only into a quorum of one: start it once alone (no voters) "
				 "to import it, or give this node an empty log.dirs", old);
			return -EINVAL;
		}
		if (dir_exists(old)) {
			if ((rc = cq_read_old(cq, b->set.data_dir, b->set.node_id, err, errlen)) < 0)
				return rc;
		} else if (want_cid[0]) {
			memcpy(cq->cluster_id, want_cid, 23);
		} else {
			metalog_new_cluster_id(cq->cluster_id);
		}
	} else {
		snprintf(err, errlen, "cannot read the identity of %s: %s", cq->dir, strerror(-rc));
		return rc;
	}
	if (want_cid[0] && strcmp(want_cid, cq->cluster_id)) {
		snprintf(err, errlen, "cluster.id: this node is configured for cluster %s, but its data directory %s "
			 "belongs to cluster %s: give it the data directory of that cluster, or the cluster.id "
			 "its directory has", want_cid, b->set.data_dir, cq->cluster_id);
		return -EINVAL;
	}
	qc.cluster_id = cq->cluster_id;
	if ((rc = metalog_image_new(b->set.node_id, &ctl->ml)) < 0) {
		snprintf(err, errlen, "out of memory for the metadata image");
		return rc;
	}
	rc = quorum_open(&qc, &cq_ops, cq, &cq->q, err, errlen);
	if (rc == 0 && cq->ch) {
		ctl_channel_bind(cq->ch, cq->q);
		ctl_channel_serve_describe(cq->ch, ctl_quorum_describe_serve);
	}
	if (rc == -EIO || rc == -EPROTO) {
		size_t l = strlen(err);

		/* libraft could not read its log: say what to do */
		snprintf(err + l, errlen - l, ". The metadata log is damaged. Restore %s from a backup (or, to "
			 "start this node with no topics, move that directory aside)", cq->dir);
	}
	if (rc < 0)
		return rc;
	if (cq->failed) {
		/* a record of the replayed log cannot be applied here */
		snprintf(err, errlen, "the metadata log in %s holds a record this version cannot apply", cq->dir);
		return cq->failed;
	}
	{
		uint64_t had = applied_read(cq->dir), last = quorum_last_index(cq->q);
		char path[4300];

		if (last < had) {
			snprintf(err, errlen, "the metadata log is damaged: %s ends at index %llu but this node had "
				 "applied records up to index %llu (libraft dropped a damaged entry and what followed "
				 "as a torn write). Restore %s from a backup (or, to start this node with no topics, "
				 "move that directory aside)",
				 cq->dir, (unsigned long long)last, (unsigned long long)had, cq->dir);
			return -EIO;
		}
		snprintf(path, sizeof(path), "%s/%s", cq->dir, CQ_APPLIED);
		cq->applied_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		cq->applied_written = had;
	}
	return 0;
}

const struct lathist *ctl_quorum_commit_latency(const struct ctl *ctl)
{
	return ctl->cq ? &ctl->cq->commit_lat : NULL;
}

/* A quorum of several: a node that does not lead starts once it knows a
 * leader and has applied what that leader said is committed, the cluster
 * id included (the leader writes it on a new cluster). */
static void cq_follower_start(struct ctl_quorum *cq)
{
	struct quorum_view v;
	const char *have;

	if (cq->started || cq->failed || !cq->ch || quorum_is_leader(cq->q) || quorum_leader(cq->q) < 0)
		return;
	quorum_describe(cq->q, &v);
	have = metalog_cluster_id(cq->ctl->ml);
	if (!v.commit_index || v.last_applied < v.commit_index || !have[0])
		return;
	if (strcmp(have, cq->cluster_id)) {
		cq_start_failed(cq, -EINVAL, "cluster.id: the metadata quorum's log says cluster id %s, but this "
				"node's directory %s was made for %s: the voters are of two clusters",
				have, cq->dir, cq->cluster_id);
		return;
	}
	cq->started = 1;
	cq->ready(cq->ctl, 0, NULL);
}

int ctl_quorum_poll(struct ctl *ctl)
{
	struct ctl_quorum *cq = ctl->cq;
	int work;

	if (!cq || !cq->q)
		return 0;
	work = quorum_poll(cq->q);
	if (cq->q && !cq->failed) {
		const char *msg;
		int rc = quorum_disk_error(cq->q, &msg);

		if (rc)
			cq_disk_failed(cq, rc, msg);
	}
	if (cq->q && cq->ch) {
		cq_follower_start(cq);
		work += ctl_channel_tick(cq->ch);
	}
	if (cq->q && cq->image_path[0] && cq->started &&
	    (cq->image_due || quorum_last_index(cq->q) >= cq->image_saved + cq->image_every))
		cq_image_save(cq);
	applied_note(cq);
	return work;
}

int ctl_quorum_leads(const struct ctl *ctl)
{
	const struct ctl_quorum *cq = ctl->cq;

	return cq && cq->q && cq->started && !cq->closed && quorum_is_leader(cq->q);
}

int ctl_quorum_failed(const struct ctl *ctl)
{
	return ctl->cq && ctl->cq->failed;
}

int ctl_quorum_transfer(struct ctl *ctl, void (*done)(void *cookie, int32_t leader), void *cookie)
{
	struct ctl_quorum *cq = ctl->cq;

	if (!cq || !cq->q || cq->closed)
		return -ESHUTDOWN;
	return quorum_transfer(cq->q, -1, done, cookie);
}

int32_t ctl_quorum_leader(const struct ctl *ctl)
{
	return ctl->cq && ctl->cq->q ? quorum_leader(ctl->cq->q) : -1;
}

int32_t ctl_quorum_took_over(const struct ctl *ctl)
{
	return ctl->cq ? ctl->cq->took_over : -1;
}

int ctl_quorum_is_leader(const struct ctl *ctl)
{
	return ctl->cq && ctl->cq->q && quorum_is_leader(ctl->cq->q);
}

void ctl_quorum_channel_stats(const struct ctl *ctl, struct ctl_channel_stats *st)
{
	ctl_channel_stats(ctl->cq ? ctl->cq->ch : NULL, st);
	st->snapshots_installed = ctl->cq ? ctl->cq->snapshots_installed : 0;
}

int ctl_quorum_voters(const struct ctl *ctl)
{
	return ctl->cq ? ctl->cq->nvoters : 0;
}

struct ctl_channel *ctl_quorum_channel(const struct ctl *ctl)
{
	return ctl->cq ? ctl->cq->ch : NULL;
}

struct uv_loop_s *ctl_quorum_loop(struct ctl *ctl)
{
	struct ctl_quorum *cq = ctl->cq;

	return cq && cq->q && !cq->closed ? quorum_loop(cq->q) : NULL;
}

int ctl_quorum_fd(const struct ctl *ctl)
{
	const struct ctl_quorum *cq = ctl->cq;

	return cq && cq->q ? quorum_fd(cq->q) : -1;
}

int ctl_quorum_timeout(const struct ctl *ctl, int timeout)
{
	const struct ctl_quorum *cq = ctl->cq;
	int t;

	if (!cq || !cq->q)
		return timeout;
	t = quorum_timeout_ms(cq->q);
	if (t >= 0 && (timeout < 0 || t < timeout))
		return t;
	return timeout;
}

static void cq_closed(void *arg)
{
	struct ctl_quorum *cq = arg;

	cq->closed = 1;
	cq->q = NULL;
}

void ctl_quorum_close(struct ctl *ctl)
{
	struct ctl_quorum *cq = ctl->cq;
	struct timespec t0, t;

	if (!cq)
		return;
	if (cq->q && cq->image_path[0] && cq->started)
		cq_image_save(cq);   /* a restart fetches only what follows */
	if (cq->ch)
		ctl_channel_close(cq->ch);
	if (cq->q) {
		quorum_close(cq->q, cq_closed, cq);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		/* raft finishes its disk writes and closes its files: seconds at
		 * most, then the process goes on without it (its log is
		 * consistent at every write) */
		while (!cq->closed) {
			struct pollfd p = { .fd = quorum_fd(cq->q), .events = POLLIN };
			int to = quorum_timeout_ms(cq->q);

			poll(&p, 1, to < 0 || to > 100 ? 100 : to);
			quorum_poll(cq->q);
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (!cq->closed && t.tv_sec - t0.tv_sec > 10) {
				slog(SLOG_WARN, "the metadata quorum did not close within 10 s: leaving it");
				break;
			}
		}
	}
	applied_note(cq);
	if (cq->applied_fd >= 0)
		close(cq->applied_fd);
	free(cq->import_buf);
	free(cq->own);
	ctl_channel_free(cq->ch);
	free(cq);
	ctl->cq = NULL;
}
