/* control/ctl.c — the control thread. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control/config.h"
#include "control/ctl.h"
#include "control/admin_http.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/txn.h"
#include "control/metalog.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"
#include "dataplane/topic_name.h"
#include "storage/batch_format.h"

/* An operation in progress: waiting for shards to open or close
 * partitions. */
struct ctl_op {
	struct ctl_req *req;         /* NULL at start-up */
	int pending;
	int failed;
	char fail_msg[200];
	struct md_topic **created;
	struct ctl_topic **created_for;  /* the request's entry of each */
	uint8_t *drop;               /* of each: drop it although it opened */
	int ncreated;
	struct md_topic **deleted;
	int ndeleted;
	struct md_topic **replaced;  /* superseded by a new struct; logs stay */
	int nreplaced;
	int64_t fd_free;             /* descriptors this request may still claim; INT64_MIN: not counted yet */
	int64_t fd_limit;            /* RLIMIT_NOFILE when counted */
	/* directories this request's opens made (they did not exist before),
	 * each with the topic it is for: removed if that topic is dropped */
	char **made;
	struct md_topic **made_for;
	uint8_t *made_rm;
	int nmade, made_cap;
	int dropping;                /* failed: the opened partitions are closing */
	/* start-up: what recovery read of the partitions opened (their open
	 * reports, summed as they answer) */
	struct ctl_recovery_sum {
		int segments, segments_trusted, damaged;
		uint64_t bytes_scanned, bytes_trusted;
	} rec;
	int rec_parts;
	struct ctl_op *next;
};

/* One partition open in flight: the cookie of part_proxy_open, freed when
 * it answers. */
struct ctl_open {
	struct ctl_op *op;
	char *dir;                   /* malloc'd; kept in op->made if the open made it */
	struct md_topic *t;
	struct md_partition *mp;
	struct part_open_report rep; /* filled on the owner */
};

struct retired {
	uint64_t version;            /* free once every shard has seen it */
	struct md_snapshot *snap;    /* the old snapshot (its topics array) */
	struct md_topic *topic;      /* a deleted topic */
	struct config *cfg;          /* a broker config replaced at run time */
	struct retired *next;
};

/* Messages the control thread could not put on a full ring, oldest
 * first (a FIFO per destination, so a shard sees the control thread's
 * messages in the order they were sent). The loop retries them before
 * anything else each turn; nothing is ever dropped. Control thread only. */
struct ctl_park {
	struct shard_msg *q;         /* cap slots, a power of two; NULL when cap is 0 */
	uint32_t head, len, cap;
};

struct ctl {
	struct broker *b;
	struct ctl_park park[BROKER_MAX_SHARDS];
	uint64_t parked;             /* messages parked so far (a full ring) */
	int64_t fd_opening;          /* partition opens sent, not answered yet */
	struct config *cfg;          /* static: the file and --set */
	struct config *eff;          /* in effect: cfg, then the run-time changes (metalog) */
	struct metalog *ml;
	pthread_t thread;
	int wake_fd;
	int sleeping;
	int stop;
	uint64_t version;
	struct retired *retired;
	struct group_coord *gc;
	struct txn_coord *tc;
	int64_t pid_next, pid_end;   /* producer ids reserved in the metadata log, not handed out */
	/* start-up handshake */
	pthread_mutex_t lock;        /* start-up only, never on the data path */
	pthread_cond_t cond;
	int ready;
	int init_err;
	char init_msg[8192];
	/* the admin endpoint (control/admin_http.c), NULL when off */
	struct admin_http *admin;
	int admin_port;              /* its port (0: off), set before ready */
	struct pub_block *pubs;      /* every partition's published block, freed at exit */
	int64_t started_ms;          /* wall clock at start (uptime) */
	/* the loop: the turn's clock (ctl_poll's), what the idle policy needs */
	int64_t now_ms;              /* monotonic ms of this turn */
	int64_t wall;                /* wall-clock ms of this turn */
	int timeout;                 /* ms to the next timer, after the turn */
	uint32_t parked_left;        /* messages still parked after the turn */
};

/* Published blocks of partitions (struct part_pub): allocated here when a
 * partition is opened, never freed before the shards have stopped (a
 * shard may still write one until it closes the log). */
struct pub_block {
	struct pub_block *next;
	struct part_pub pub;
};

static struct ctl *the_ctl;      /* for ctl_submit from shards (read-only pointer) */

/* ---- snapshots -------------------------------------------------------- */

static int topic_cmp(const void *a, const void *b)
{
	const struct md_topic *x = *(const struct md_topic *const *)a, *y = *(const struct md_topic *const *)b;
	int32_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, (size_t)n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
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
	for (int i = 0; i < nadd; i++)
		md->topics[n++] = add[i];
	md->ntopics = n;
	qsort(md->topics, (size_t)n, sizeof(*md->topics), topic_cmp);
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

static void topic_free(struct md_topic *t)
{
	for (int i = 0; i < t->nconfigs; i++) {
		free(t->config_keys[i]);
		free(t->config_values[i]);
	}
	free(t->config_keys);
	free(t->config_values);
	free(t->parts);
	free(t->name);
	free(t);
}

/* Free what no shard can still be looking at. Parked requests keep
 * partition pointers, never snapshot pointers, across loop turns. */
static void ctl_reclaim(struct ctl *ctl)
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
			if (r->snap) {
				free(r->snap->topics);
				free(r->snap);
			}
			if (r->topic)
				topic_free(r->topic);
			config_destroy(r->cfg);
			free(r);
		} else {
			pp = &r->next;
		}
	}
}

/* ---- messages --------------------------------------------------------- */

/* Send to a shard; a full ring (or earlier messages still parked for that
 * shard) parks the message, and the loop sends it later (ctl_flush_parked).
 * Never waits: the shard's answers come back over the other ring, which
 * only this thread drains. */
static void ctl_send(struct ctl *ctl, int to, const struct shard_msg *m)
{
	struct ctl_park *pk = &ctl->park[to];

	if (pk->len == 0 && broker_send(ctl->b, broker_ctl_index(ctl->b), to, m) == 0)
		return;
	if (pk->len == pk->cap) {
		uint32_t ncap = pk->cap ? pk->cap * 2 : 256;
		struct shard_msg *nq = xcalloc(ncap, sizeof(*nq));

		for (uint32_t i = 0; i < pk->len; i++)
			nq[i] = pk->q[(pk->head + i) & (pk->cap - 1)];
		free(pk->q);
		pk->q = nq;
		pk->head = 0;
		pk->cap = ncap;
	}
	pk->q[(pk->head + pk->len) & (pk->cap - 1)] = *m;
	pk->len++;
	ctl->parked++;
}

/* Retry parked messages, oldest first, until a ring is full again.
 * Returns how many went out; *left is how many still wait. */
static int ctl_flush_parked(struct ctl *ctl, uint32_t *left)
{
	struct broker *b = ctl->b;
	int n = 0;

	*left = 0;
	for (int to = 0; to < b->set.nshards; to++) {
		struct ctl_park *pk = &ctl->park[to];

		while (pk->len && broker_send(b, broker_ctl_index(b), to, &pk->q[pk->head]) == 0) {
			pk->head = (pk->head + 1) & (pk->cap - 1);
			pk->len--;
			n++;
		}
		*left += pk->len;
	}
	return n;
}

void ctl_send_msg(struct ctl *ctl, int to, const struct shard_msg *m)
{
	ctl_send(ctl, to, m);
}

static void ctl_proxy_send(void *ctx, int to, const struct shard_msg *m)
{
	ctl_send(ctx, to, m);
}

struct part_proxy *ctl_part_proxy(struct ctl *ctl, struct part_proxy *px)
{
	px->from = broker_ctl_index(ctl->b);
	px->send = ctl_proxy_send;
	px->ctx = ctl;
	return px;
}

struct txn_coord *ctl_txns(struct ctl *ctl)
{
	return ctl->tc;
}

struct group_coord *ctl_groups(struct ctl *ctl)
{
	return ctl->gc;
}

static void ctl_op_step(struct ctl *ctl, struct ctl_op *op);

/* A close or a config change answered (they do not fail). */
static void ctl_part_done(void *self, void *cookie, int err)
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
static void ctl_part_opened(void *self, void *cookie, struct part *p, int err, const struct part_open_report *rep)
{
	struct ctl *ctl = self;
	struct ctl_open *o = cookie;
	struct ctl_op *op = o->op;
	char *dir = o->dir;

	if (err == 0)
		o->mp->part = p;     /* the snapshot entry is the control thread's own */
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
			fprintf(stderr, "sluiced: recovered %s-%d: %s\n", o->t->name, o->mp->index, rep->line);
	}
	free(dir);
	free(o);
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
}

static void shard_ctl_reply(void *self, struct shard_msg *m)
{
	(void)self;
	kafka_ctx_sub_done(m->p[0]);
}

void ctl_reply(struct ctl *ctl, struct kafka_ctx *ctx, int from)
{
	struct shard_msg m = { .fn = shard_ctl_reply, .p = { ctx } };

	ctl_send(ctl, from, &m);
}

static int32_t place(const struct md_topic *t, int32_t idx, int nshards)
{
	uint32_t h = 2166136261u;

	for (int32_t i = 0; i < t->name_len; i++)
		h = (h ^ (uint8_t)t->name[i]) * 16777619u;
	return (int32_t)((h + (uint32_t)idx) % (uint32_t)nshards);
}

/* Build the snapshot entry of a topic from the metadata log. */
static struct md_topic *topic_build(struct ctl *ctl, const struct meta_topic *mt)
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
		const char *mmb = NULL, *tst = NULL;

		for (int i = 0; i < t->nconfigs; i++) {
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
	}
	t->internal = topic_name_internal(t->name, t->name_len);
	for (int32_t i = 0; i < t->nparts; i++) {
		t->parts[i].index = i;
		t->parts[i].shard = place(t, i, ctl->b->set.nshards);
		t->parts[i].leader_epoch = mt->leader_epoch;
	}
	return t;
}

/* Ask the owner shards to open partitions [from, t->nparts). */
static void topic_open_parts(struct ctl *ctl, struct ctl_op *op, struct md_topic *t, int32_t from)
{
	for (int32_t i = from; i < t->nparts; i++) {
		struct ctl_open *o = xcalloc(1, sizeof(*o));
		struct part_proxy px;

		if (asprintf(&o->dir, "%s/%s-%d", ctl->b->set.data_dir, t->name, i) < 0)
			abort();
		o->op = op;
		o->t = t;
		o->mp = &t->parts[i];
		if (!t->parts[i].pub) {
			struct pub_block *pb = aligned_alloc(64, sizeof(*pb));

			if (!pb)
				abort();
			memset(pb, 0, sizeof(*pb));
			pb->next = ctl->pubs;
			ctl->pubs = pb;
			t->parts[i].pub = &pb->pub;
		}
		op->pending++;
		ctl->fd_opening++;
		part_proxy_open(ctl_part_proxy(ctl, &px), t->parts[i].shard, o->dir, t, o->mp, &o->rep,
				ctl_part_opened, o);
	}
}

int ctl_fd_usage(int64_t *in_use, int64_t *limit)
{
	struct rlimit rl;
	DIR *d = opendir("/proc/self/fd");
	int64_t n = 0;

	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	*in_use = n - 1;   /* the directory's own */
	*limit = rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
	return 0;
}

/* Claim descriptors for `need` new partitions (one each: the active
 * segment's file; more come with more segments, out of the reserve), or
 * refuse the topic before anything is written or opened. Counted once per
 * request; opens still in flight from earlier requests count as used. */
static int ctl_fd_claim(struct ctl *ctl, struct ctl_op *op, struct ctl_topic *ct, int64_t need)
{
	int64_t in_use, limit = 0;

	if (op->fd_free == INT64_MIN) {
		if (ctl_fd_usage(&in_use, &limit) < 0) {
			op->fd_free = INT64_MAX;   /* cannot tell: the opens will */
			return 0;
		}
		op->fd_limit = limit;
		op->fd_free = limit == INT64_MAX ? INT64_MAX
			      : limit - in_use - ctl->fd_opening - ctl_fd_reserve(limit);
	}
	limit = op->fd_limit;
	if (need <= op->fd_free) {
		op->fd_free -= op->fd_free == INT64_MAX ? 0 : need;
		return 0;
	}
	ct->error = KERR_INVALID_PARTITIONS;
	snprintf(ct->message, sizeof(ct->message),
		 "%d partitions need %d file descriptors; %d are free of the limit of %d (RLIMIT_NOFILE) "
		 "beyond %d kept in reserve: raise ulimit -n or LimitNOFILE=",
		 (int)need, (int)need, (int)(op->fd_free > 0 ? op->fd_free : 0), (int)limit, (int)ctl_fd_reserve(limit));
	return -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void ctl_close_dropped(struct ctl *ctl, struct ctl_op *op, struct md_partition *mp)
{
	struct part_proxy px;

	if (!mp->part)
		return;
	op->pending++;
	part_proxy_close(ctl_part_proxy(ctl, &px), mp->shard, mp->part, ctl_part_done, op);
}

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
			bad |= !t->parts[j].part;
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
					ctl_close_dropped(ctl, op, &t->parts[k]);
				for (int32_t k = 0; k < old->nparts; k++)
					t->parts[k].part = NULL;   /* still owned by the old struct */
				op->replaced[j] = op->replaced[--op->nreplaced];
				goto dropped;
			}
		}
		if (op->req && op->req->kind != CTL_CREATE_PARTITIONS)
			metalog_delete_topic(ctl->ml, t->name);
		for (int32_t k = 0; k < t->nparts; k++)
			ctl_close_dropped(ctl, op, &t->parts[k]);
dropped:
		for (int k = 0; k < op->nmade; k++)
			op->made_rm[k] |= op->made_for[k] == t;
		fprintf(stderr, "sluiced: topic %s not created: %s\n", t->name, op->fail_msg);
		topic_free(t);
		op->created[i] = op->created[op->ncreated - 1];
		op->created_for[i] = op->created_for[op->ncreated - 1];
		op->drop[i] = op->drop[op->ncreated - 1];
		op->ncreated--;
		i--;
	}
}

/* CreatePartitions: every new partition of a topic opened; now the
 * metadata log says so. A topic whose record cannot be written is dropped
 * like one whose partitions did not open. */
static void ctl_commit_partitions(struct ctl *ctl, struct ctl_op *op)
{
	for (int i = 0; i < op->ncreated; i++) {
		struct md_topic *t = op->created[i];
		int opened = 1, rc;

		for (int32_t j = 0; j < t->nparts; j++)
			opened &= t->parts[j].part != NULL;
		if (!opened)
			continue;
		rc = metalog_add_partitions(ctl->ml, t->name, t->nparts);
		if (rc == 0)
			continue;
		op->drop[i] = 1;
		if (!op->failed) {
			op->failed = 1;
			snprintf(op->fail_msg, sizeof(op->fail_msg), "metadata log: %s", strerror(-rc));
		}
	}
}

static void ctl_set_ready(struct ctl *ctl, int err, const char *msg)
{
	pthread_mutex_lock(&ctl->lock);
	ctl->ready = 1;
	if (err) {
		ctl->init_err = err;
		snprintf(ctl->init_msg, sizeof(ctl->init_msg), "%s", msg);
	}
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
}

/* Transactions are back: serve. */
static void ctl_txns_replayed(struct ctl *ctl)
{
	ctl_set_ready(ctl, 0, NULL);
}

/* Committed offsets are back in the group coordinator; transactions next
 * (completing one may commit offsets). */
static void ctl_replayed(struct ctl *ctl)
{
	txn_replay(ctl->tc, ctl_txns_replayed);
}

static void ctl_op_step(struct ctl *ctl, struct ctl_op *op)
{
	struct ctl_req *req = op->req;

	if (req && req->kind == CTL_CREATE_PARTITIONS && !op->dropping)
		ctl_commit_partitions(ctl, op);
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
	/* deleted topics: their logs are closed, remove the files */
	for (int i = 0; i < op->ndeleted; i++)
		for (int32_t j = 0; j < op->deleted[i]->nparts; j++) {
			char dir[4400];

			snprintf(dir, sizeof(dir), "%s/%s-%d", ctl->b->set.data_dir, op->deleted[i]->name, j);
			nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		}
	if (req) {
		struct shard_msg m = { .fn = shard_ctl_reply, .p = { req->ctx } };

		ctl_send(ctl, req->from, &m);
	} else {
		/* start-up: say what recovery cut or found damaged, partition
		 * by partition, and what it read (the shards handed the logs
		 * over through the ring: safe to read) */
		/* start-up: the per-partition lines went out as the opens
		 * answered (ctl_part_opened); now the sum */
		const struct ctl_recovery_sum sum = op->rec;
		int nparts = op->rec_parts;

		fprintf(stderr, "sluiced: recovery: %d partitions, %d segments, %d taken from checkpoints "
			"unread (%llu bytes), %llu bytes scanned, %d damaged ranges moved aside\n",
			nparts, sum.segments, sum.segments_trusted, (unsigned long long)sum.bytes_trusted,
			(unsigned long long)sum.bytes_scanned, sum.damaged);
		for (int i = 0; i < op->ncreated; i++)
			if (!strcmp(op->created[i]->name, GROUP_OFFSETS_TOPIC))
				group_set_offsets_topic(ctl->gc, op->created[i]);
			else if (!strcmp(op->created[i]->name, TXN_STATE_TOPIC))
				txn_set_state_topic(ctl->tc, op->created[i]);
		if (op->failed) {
			ctl_set_ready(ctl, -EIO, op->fail_msg);
		} else if (group_replay(ctl->gc, ctl_replayed) == 0) {
			ctl_replayed(ctl);
		}
	}
	free(op->created);
	free(op->created_for);
	free(op->drop);
	free(op->deleted);
	free(op->replaced);
	free(op);
}

/* An internal topic is the broker's own log: no client request may create,
 * delete, grow or reconfigure one (Kafka's INVALID_REQUEST, "Creation of
 * internal topic ... is prohibited"). */
static void refuse_internal(int kind, const char *name, struct ctl_topic *ct)
{
	ct->error = KERR_INVALID_REQUEST;
	if (kind == CTL_CREATE || kind == CTL_AUTO_CREATE)
		snprintf(ct->message, sizeof(ct->message), "Creation of internal topic %.40s is prohibited", name);
	else if (kind == CTL_DELETE)
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic (%s); it cannot be deleted", name,
			 !strcmp(name, GROUP_OFFSETS_TOPIC) ? "the committed offsets of every group"
			 : !strcmp(name, TXN_STATE_TOPIC)   ? "the state of every transaction"
							    : "the metadata log");
	else if (kind == CTL_CREATE_PARTITIONS)
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic; its partition count is fixed (%s)", name,
			 !strcmp(name, GROUP_OFFSETS_TOPIC) ? "offsets.topic.num.partitions"
			 : !strcmp(name, TXN_STATE_TOPIC)   ? "transaction.state.log.num.partitions"
							    : "one partition");
	else
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic; its configuration is the broker's (docs/configuration.md)",
			 name);
}

/* A wire string (borrowed, not NUL-terminated, -1 = null) as a C string. */
static void kstr_copy(char *dst, size_t n, struct kafka_str s)
{
	snprintf(dst, n, "%.*s", s.len > 0 ? s.len : 0, s.ptr ? s.ptr : "");
}

/* A key Kafka users set that Sluice accepts and ignores: say so in the
 * log, as Kafka 3.x does for message.format.version. */
static void warn_ignored(const char *topic, const char *key, const char *value)
{
	const char *why = topic_config_ignored(key);

	if (why && value)
		fprintf(stderr, "sluiced: warning: topic %s: %s=%s is accepted and ignored: %s\n", topic, key, value,
			why);
}

/* CreatePartitions and AlterConfigs: a new snapshot entry for the topic
 * (the old one is retired, its logs stay open). */
static void ctl_change_topic(struct ctl *ctl, struct ctl_op *op, struct ctl_req *req, struct ctl_topic *ct,
			     const char *name)
{
	const struct md_topic *t = md_find(ctl->b->md, ct->name.ptr, ct->name.len);
	const struct meta_topic *mt;
	struct md_topic *nt;
	int rc = 0;

	if (!t) {
		ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		snprintf(ct->message, sizeof(ct->message), "unknown topic");
		return;
	}
	for (int i = 0; i < op->nreplaced; i++)
		if (op->replaced[i] == t) {
			ct->error = KERR_INVALID_REQUEST;
			snprintf(ct->message, sizeof(ct->message), "topic named twice in one request");
			return;
		}
	if (req->kind == CTL_CREATE_PARTITIONS) {
		if (ct->partitions <= t->nparts || ct->partitions > 100000) {
			ct->error = KERR_INVALID_PARTITIONS;
			snprintf(ct->message, sizeof(ct->message),
				 "topic has %d partitions: the new count must be larger (and at most 100000), got %d",
				 t->nparts, ct->partitions);
			return;
		}
		if (ctl_fd_claim(ctl, op, ct, ct->partitions - t->nparts) < 0)
			return;
		if (req->validate_only)
			return;
		/* the metadata log gets the new count once every new partition
		 * has opened (ctl_commit_partitions): a failure leaves no trace */
	} else {
		char k[256], v[4096];

		/* validate everything before changing anything */
		for (int j = 0; j < ct->nconfigs; j++) {
			kstr_copy(k, sizeof(k), ct->keys[j]);
			kstr_copy(v, sizeof(v), ct->values[j]);
			if ((!ct->ops || ct->ops[j] == CTL_CFG_SET) &&
			    topic_config_validate(k, v, ct->message, sizeof(ct->message)) < 0) {
				ct->error = KERR_INVALID_CONFIG;
				return;
			}
			if (ct->ops && ct->ops[j] != CTL_CFG_SET && ct->ops[j] != CTL_CFG_DELETE) {
				ct->error = KERR_INVALID_CONFIG;
				snprintf(ct->message, sizeof(ct->message), "APPEND and SUBTRACT apply to list configs only");
				return;
			}
		}
		if (req->validate_only)
			return;
		if (ct->replace) {
			/* AlterConfigs: what is not named goes back to its default */
			for (int i = 0; i < t->nconfigs && rc >= 0; i++) {
				int named = 0;

				for (int j = 0; j < ct->nconfigs; j++)
					named |= kafka_str_eq(ct->keys[j], t->config_keys[i]);
				if (!named)
					rc = metalog_set_config(ctl->ml, name, t->config_keys[i], NULL);
			}
		}
		for (int j = 0; j < ct->nconfigs && rc >= 0; j++) {
			kstr_copy(k, sizeof(k), ct->keys[j]);
			kstr_copy(v, sizeof(v), ct->values[j]);
			rc = metalog_set_config(ctl->ml, name, k,
						(ct->ops && ct->ops[j] == CTL_CFG_DELETE) ? NULL : v);
			if (rc >= 0 && (!ct->ops || ct->ops[j] == CTL_CFG_SET))
				warn_ignored(name, k, v);
		}
	}
	if (rc < 0) {
		ct->error = rc == -EINVAL || rc == -ENOENT ? KERR_INVALID_CONFIG : KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
		return;
	}
	mt = metalog_topic(ctl->ml, name);
	if (req->kind == CTL_CREATE_PARTITIONS) {
		/* what the metadata log will hold (PARTITIONS bumps the epoch) */
		struct meta_topic grown = *mt;

		grown.partitions = ct->partitions;
		grown.leader_epoch++;
		nt = topic_build(ctl, &grown);
	} else {
		nt = topic_build(ctl, mt);
	}
	/* existing partitions keep their owner and log */
	for (int32_t i = 0; i < t->nparts && i < nt->nparts; i++)
		nt->parts[i] = t->parts[i];
	op->replaced[op->nreplaced++] = (struct md_topic *)t;
	op->created_for[op->ncreated] = ct;
	op->created[op->ncreated++] = nt;
	if (req->kind == CTL_CREATE_PARTITIONS) {
		topic_open_parts(ctl, op, nt, t->nparts);
	} else {
		for (int32_t i = 0; i < nt->nparts; i++) {
			struct part_proxy px;

			op->pending++;
			part_proxy_set_config(ctl_part_proxy(ctl, &px), nt->parts[i].shard, nt->parts[i].part,
					      &nt->cfg, ctl_part_done, op);
		}
	}
}

/* The broker config in effect: the static one (file, --set), then the
 * cluster-wide defaults changed at run time, then this node's own. A
 * record the static config now refuses (a key made static, a value out of
 * a new range) is skipped with a warning. */
static int ctl_build_cfg(struct ctl *ctl, struct config **out)
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

			if (pass == 0 ? scope != META_SCOPE_CLUSTER : scope != ctl->b->set.node_id)
				continue;
			if (!config_dynamic(k) ||
			    config_set(c, k, v, pass ? "dynamic-broker" : "dynamic-default", err, sizeof(err)) < 0)
				fprintf(stderr, "sluiced: warning: broker config %s=%s of the metadata log not applied\n",
					k, v);
		}
	}
	*out = c;
	return 0;
}

/* AlterConfigs / IncrementalAlterConfigs on the broker resource: the
 * cluster-wide topic defaults, written to the metadata log, then every
 * topic rebuilt (a new snapshot entry; its partitions get the new storage
 * settings through part_proxy_set_config) so the topics without an override
 * follow. Keys that cannot change at run time are refused as Kafka refuses
 * them (INVALID_REQUEST, "Cannot update these configs dynamically"). */
static void ctl_change_broker(struct ctl *ctl, struct ctl_op *op, struct ctl_req *req, struct ctl_topic *ct)
{
	const struct md_snapshot *md = ctl->b->md;
	char name[64], k[256], v[4096];
	int32_t scope = META_SCOPE_CLUSTER;
	struct config *eff;
	int rc = 0, n;

	kstr_copy(name, sizeof(name), ct->name);
	if (name[0]) {
		char *end;
		long id = strtol(name, &end, 10);

		if (*end || id != ctl->b->set.node_id) {
			ct->error = KERR_INVALID_REQUEST;
			snprintf(ct->message, sizeof(ct->message),
				 "unknown broker '%.40s': this is node %d (\"\" names the cluster-wide default)", name,
				 ctl->b->set.node_id);
			return;
		}
		scope = ctl->b->set.node_id;
	}
	for (int j = 0; j < ct->nconfigs; j++) {
		int del = (ct->ops && ct->ops[j] == CTL_CFG_DELETE) || ct->values[j].len < 0;

		if (ct->ops && ct->ops[j] != CTL_CFG_SET && ct->ops[j] != CTL_CFG_DELETE) {
			ct->error = KERR_INVALID_CONFIG;
			snprintf(ct->message, sizeof(ct->message), "APPEND and SUBTRACT apply to list configs only");
			return;
		}
		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		rc = config_dynamic_validate(k, del ? NULL : v, ct->message, sizeof(ct->message));
		if (rc < 0) {
			ct->error = rc == -EPERM ? KERR_INVALID_REQUEST : KERR_INVALID_CONFIG;
			return;
		}
	}
	if (req->validate_only)
		return;
	rc = 0;
	if (ct->replace) {
		/* AlterConfigs: what is not named goes back to the static value */
		int32_t sc;
		const char *ek, *ev;

		for (int i = 0; rc >= 0 && metalog_broker_config_at(ctl->ml, i, &sc, &ek, &ev) == 0;) {
			int named = 0;

			for (int j = 0; j < ct->nconfigs; j++)
				named |= kafka_str_eq(ct->keys[j], ek);
			if (sc == scope && !named) {
				snprintf(k, sizeof(k), "%s", ek);
				rc = metalog_set_broker_config(ctl->ml, scope, k, NULL);
			} else {
				i++;
			}
		}
	}
	for (int j = 0; j < ct->nconfigs && rc >= 0; j++) {
		int del = (ct->ops && ct->ops[j] == CTL_CFG_DELETE) || ct->values[j].len < 0;

		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		rc = metalog_set_broker_config(ctl->ml, scope, k, del ? NULL : v);
	}
	if (rc >= 0)
		rc = ctl_build_cfg(ctl, &eff);
	if (rc < 0) {
		ct->error = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
		return;
	}
	/* an effective config no snapshot has carried yet is nobody's */
	if (md && ctl->eff != md->cfg)
		config_destroy(ctl->eff);
	ctl->eff = eff;
	if (!md)
		return;
	n = op->ncreated + md->ntopics + 1;
	op->created = realloc(op->created, (size_t)n * sizeof(*op->created));
	op->created_for = realloc(op->created_for, (size_t)n * sizeof(*op->created_for));
	op->replaced = realloc(op->replaced, (size_t)(op->nreplaced + md->ntopics + 1) * sizeof(*op->replaced));
	if (!op->created || !op->created_for || !op->replaced)
		abort();   /* the control thread's own bookkeeping */
	for (int i = 0; i < md->ntopics; i++) {
		struct md_topic *t = md->topics[i], *nt;
		const struct meta_topic *mt = metalog_topic(ctl->ml, t->name);
		int done = 0;

		for (int j = 0; j < op->nreplaced; j++)
			done |= op->replaced[j] == t;
		if (done || !mt)
			continue;
		nt = topic_build(ctl, mt);
		for (int32_t p = 0; p < t->nparts && p < nt->nparts; p++)
			nt->parts[p] = t->parts[p];
		op->replaced[op->nreplaced++] = t;
		op->created_for[op->ncreated] = NULL;
		op->created[op->ncreated++] = nt;
		for (int32_t p = 0; p < nt->nparts; p++) {
			struct part_proxy px;

			op->pending++;
			part_proxy_set_config(ctl_part_proxy(ctl, &px), nt->parts[p].shard, nt->parts[p].part,
					      &nt->cfg, ctl_part_done, op);
		}
	}
}

static void ctl_handle(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct ctl_req *req = m->p[0];
	struct ctl_op *op = calloc(1, sizeof(*op));
	struct md_snapshot *md = ctl->b->md;

	op->req = req;
	op->fd_free = INT64_MIN;
	op->created = calloc((size_t)req->n + 1, sizeof(*op->created));
	op->deleted = calloc((size_t)req->n + 1, sizeof(*op->deleted));
	op->replaced = calloc((size_t)req->n + 1, sizeof(*op->replaced));
	op->created_for = calloc((size_t)req->n + 1, sizeof(*op->created_for));
	op->drop = calloc((size_t)req->n + 1, 1);
	for (int i = 0; i < req->n; i++) {
		struct ctl_topic *ct = &req->topics[i];
		char name[256];

		ct->error = 0;
		if (ct->preset) {
			ct->error = ct->preset;
			continue;
		}
		ct->message[0] = 0;
		if (req->kind == CTL_ALTER_CONFIGS && ct->broker) {
			ctl_change_broker(ctl, op, req, ct);
			continue;
		}
		if (!topic_name_valid(ct->name.ptr, ct->name.len)) {
			ct->error = KERR_INVALID_TOPIC_EXCEPTION;
			snprintf(ct->message, sizeof(ct->message),
				 "topic names are 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'");
			continue;
		}
		memcpy(name, ct->name.ptr, (size_t)ct->name.len);
		name[ct->name.len] = 0;
		if (topic_name_internal(ct->name.ptr, ct->name.len)) {
			/* a group's partition is its id's hash modulo the count, a
			 * transaction's likewise; the metadata log is no topic */
			refuse_internal(req->kind, name, ct);
			continue;
		}
		if (req->kind == CTL_CREATE_PARTITIONS || req->kind == CTL_ALTER_CONFIGS) {
			ctl_change_topic(ctl, op, req, ct, name);
			continue;
		}
		if (req->kind == CTL_DELETE) {
			const struct md_topic *t = md_find(md, ct->name.ptr, ct->name.len);

			if (!t || metalog_delete_topic(ctl->ml, name) < 0) {
				ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			op->deleted[op->ndeleted++] = (struct md_topic *)t;
			continue;
		}
		/* create */
		int32_t np = ct->partitions == -1 ? (int32_t)config_int(ctl->cfg, "num.partitions") : ct->partitions;
		const char *keys[64], *vals[64];
		char kbuf[64][256], vbuf[64][256];
		int bad = 0;

		if (md_find(md, ct->name.ptr, ct->name.len)) {
			ct->error = KERR_TOPIC_ALREADY_EXISTS;
			snprintf(ct->message, sizeof(ct->message), "topic already exists: %.150s", name);
			continue;
		}
		if (np <= 0 || np > 100000) {
			/* Kafka: -1 is the default, anything else below 1 is refused */
			ct->error = KERR_INVALID_PARTITIONS;
			snprintf(ct->message, sizeof(ct->message),
				 "number of partitions must be 1..100000 (or -1 for num.partitions), got %d", np);
			continue;
		}
		if (ct->replication != -1 && ct->replication < 1) {
			ct->error = KERR_INVALID_REPLICATION_FACTOR;
			snprintf(ct->message, sizeof(ct->message),
				 "replication factor must be at least 1 (or -1 for default.replication.factor), got %d",
				 ct->replication);
			continue;
		}
		if (ct->replication > 1) {
			ct->error = KERR_INVALID_REPLICATION_FACTOR;
			snprintf(ct->message, sizeof(ct->message),
				 "replication factor %d is larger than the 1 broker of this cluster", ct->replication);
			continue;
		}
		if (ct->nconfigs > 64) {
			ct->error = KERR_INVALID_CONFIG;
			snprintf(ct->message, sizeof(ct->message), "too many configs");
			continue;
		}
		if (ctl_fd_claim(ctl, op, ct, np) < 0)
			continue;
		for (int j = 0; j < ct->nconfigs && !bad; j++) {
			struct kafka_str k = ct->keys[j], v = ct->values[j];

			kstr_copy(kbuf[j], sizeof(kbuf[j]), k);
			kstr_copy(vbuf[j], sizeof(vbuf[j]), v);
			keys[j] = kbuf[j];
			vals[j] = vbuf[j];
			if (topic_config_validate(keys[j], vals[j], ct->message, sizeof(ct->message)) < 0) {
				ct->error = KERR_INVALID_CONFIG;
				bad = 1;
			}
		}
		if (bad || req->validate_only)
			continue;
		const struct meta_topic *mt;
		int rc = metalog_create_topic(ctl->ml, name, np, keys, vals, ct->nconfigs, &mt);

		if (rc < 0) {
			ct->error = rc == -EEXIST ? KERR_TOPIC_ALREADY_EXISTS : KERR_UNKNOWN_SERVER_ERROR;
			snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
			continue;
		}
		struct md_topic *t = topic_build(ctl, mt);

		for (int j = 0; j < ct->nconfigs; j++)
			warn_ignored(name, keys[j], vals[j]);
		op->created_for[op->ncreated] = ct;
		op->created[op->ncreated++] = t;
		topic_open_parts(ctl, op, t, 0);
	}
	for (int i = 0; i < op->ndeleted; i++)
		for (int32_t j = 0; j < op->deleted[i]->nparts; j++) {
			struct md_partition *mp = &op->deleted[i]->parts[j];
			struct part_proxy px;

			if (!mp->part)
				continue;
			op->pending++;
			part_proxy_retire(ctl_part_proxy(ctl, &px), mp->shard, mp->part, ctl_part_done, op);
		}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

#define CTL_PID_BLOCK 1000

int64_t ctl_new_producer_id(struct ctl *ctl)
{
	if (ctl->pid_next == ctl->pid_end) {
		/* reserve the next block first: an id is never handed out twice,
		 * a restart continues after the last reserved block */
		int64_t start = metalog_next_producer_ids(ctl->ml, CTL_PID_BLOCK);

		if (start < 0) {
			fprintf(stderr, "sluiced: cannot reserve producer ids in the metadata log: %s\n",
				strerror((int)-start));
			return start;
		}
		ctl->pid_next = start;
		ctl->pid_end = start + CTL_PID_BLOCK;
	}
	return ctl->pid_next++;
}

static void ctl_producer_id(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	int64_t *out = m->p[1];
	int64_t pid = ctl_new_producer_id(ctl);

	*out = pid < 0 ? -1 : pid;
	ctl_reply(ctl, m->p[0], (int)m->v[0]);
}

void ctl_producer_id_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct shard_msg r = { .fn = (void (*)(void *, struct shard_msg *))m->p[1], .p = { m->p[0] },
			       .v = { ctl_new_producer_id(ctl) } };

	ctl_send_msg(ctl, (int)m->v[0], &r);
}

void ctl_producer_id_submit(struct kafka_ctx *ctx, int64_t *out)
{
	struct shard_msg m = { .fn = ctl_producer_id, .p = { ctx, out }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}

void ctl_submit(struct kafka_ctx *ctx, struct ctl_req *req)
{
	struct shard_msg m = { .fn = ctl_handle, .p = { req } };

	req->ctx = ctx;
	req->from = kafka_ctx_shard_id(ctx);
	kafka_ctx_send_ctl(ctx, &m);
}

/* ---- internal logs: appends and start-up reads ------------------------ */

struct ctl_append {
	struct part_append_req req;  /* the proxy's request: batch, done, cookie */
	void (*done)(struct ctl *ctl, void *cookie, int64_t base, int err);
	void *cookie;
	uint8_t *batch;
};

static void ctl_appended(void *self, void *cookie, int64_t base, int err)
{
	struct ctl_append *ca = cookie;

	ca->done(self, ca->cookie, base, err);
	free(ca->batch);
	free(ca);
}

int ctl_log_append(struct ctl *ctl, const struct md_partition *mp, uint8_t *batch, uint32_t len,
		   void (*done)(struct ctl *ctl, void *cookie, int64_t base, int err), void *cookie)
{
	struct ctl_append *ca = calloc(1, sizeof(*ca));
	struct part_proxy px;

	if (!mp || !mp->part || !ca) {
		free(ca);
		free(batch);
		return mp ? -ENOMEM : -ENOENT;
	}
	ca->done = done;
	ca->cookie = cookie;
	ca->batch = batch;
	ca->req = (struct part_append_req){ .batch = batch, .len = len, .done = ctl_appended, .cookie = ca };
	part_proxy_append(ctl_part_proxy(ctl, &px), mp->shard, mp->part, &ca->req);
	return 0;
}

struct ctl_read {
	void (*chunk)(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part);
	void (*end)(struct ctl *ctl);
	int left;
};

static void ctl_read_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t index)
{
	struct ctl_read *cr = cookie;

	cr->chunk(self, buf, len, index);
}

static void ctl_read_end(void *self, void *cookie)
{
	struct ctl_read *cr = cookie;

	if (--cr->left == 0) {
		cr->end(self);
		free(cr);
	}
}

int ctl_read_topic(struct ctl *ctl, const struct md_topic *t,
		   void (*chunk)(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part),
		   void (*end)(struct ctl *ctl))
{
	struct ctl_read *cr;
	int n = 0;

	for (int32_t i = 0; t && i < t->nparts; i++)
		n += t->parts[i].part != NULL;
	if (!n)
		return 0;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		abort();   /* start-up */
	cr->chunk = chunk;
	cr->end = end;
	cr->left = n;
	for (int32_t i = 0; i < t->nparts; i++) {
		struct part_proxy px;

		if (t->parts[i].part)
			part_proxy_read(ctl_part_proxy(ctl, &px), t->parts[i].shard, t->parts[i].part, 0, INT64_MAX,
					ctl_read_chunk, ctl_read_end, cr);
	}
	return n;
}

/* ---- the thread ------------------------------------------------------- */

/* SIGUSR1: the shards' busy cycles so far, one line on stdout (where a
 * program that started the broker reads its "listening on" line: the
 * benchmarks take a reading before and after a run). A shard's counter
 * is its own; reading it here is a relaxed load of a 64-bit word. */
static void ctl_report_cycles(struct broker *b)
{
	uint64_t total = 0;
	char line[1024];
	size_t at = 0;

	for (int i = 0; i < b->set.nshards; i++) {
		uint64_t c = broker_shard_busy_cycles(b, i);

		total += c;
		if (at < sizeof(line))
			at += (size_t)snprintf(line + at, sizeof(line) - at, "%s shard %d %llu", i ? "," : "", i,
					       (unsigned long long)c);
	}
	printf("sluiced: busy cycles %llu (%s)\n", (unsigned long long)total, line);
	fflush(stdout);
}

/* Start-up: the metadata log, the coordinators, the internal topics in
 * the metadata log, the admin endpoint, and the replay started (every
 * topic's partitions opening on their shards). The replay finishes in
 * later turns; ctl_is_ready says when. 0, or -errno with the start-up
 * error set (ctl_wait_ready reports it). */
int ctl_init(struct ctl *ctl, uint64_t now_ns, int64_t now_ms)
{
	struct broker *b = ctl->b;
	struct ctl_op *op;
	int rc, n;

	ctl->now_ms = (int64_t)(now_ns / 1000000);
	ctl->wall = now_ms;
	ctl->started_ms = wall_ms();   /* uptime: the real clock */
	rc = metalog_open(b->set.data_dir, b->set.node_id, &ctl->ml);
	if (rc < 0) {
		pthread_mutex_lock(&ctl->lock);
		ctl->ready = 1;
		ctl->init_err = rc;
		snprintf(ctl->init_msg, sizeof(ctl->init_msg), "cannot open the metadata log in %s: %s",
			 b->set.data_dir, strerror(-rc));
		pthread_cond_broadcast(&ctl->cond);
		pthread_mutex_unlock(&ctl->lock);
		return rc;
	}
	snprintf(b->set.cluster_id, sizeof(b->set.cluster_id), "%s", metalog_cluster_id(ctl->ml));
	/* the broker configs changed at run time, before any topic is built */
	if ((rc = ctl_build_cfg(ctl, &ctl->eff)) < 0) {
		ctl_set_ready(ctl, rc, "out of memory building the broker config");
		return rc;
	}
	if (group_coord_create(ctl, b, ctl->cfg, &ctl->gc) < 0 ||
	    txn_coord_create(ctl, b, ctl->cfg, ctl->gc, &ctl->tc) < 0)
		abort();
	if (!metalog_topic(ctl->ml, TXN_STATE_TOPIC)) {
		/* the transaction coordinator's log: compacted, Kafka's defaults */
		static const char *const k[] = { "cleanup.policy", "segment.bytes" };
		static const char *const v[] = { "compact", "104857600" };
		int32_t np = (int32_t)config_int(ctl->cfg, "transaction.state.log.num.partitions");

		rc = metalog_create_topic(ctl->ml, TXN_STATE_TOPIC, np, k, v, 2, NULL);
		if (rc < 0) {
			ctl_set_ready(ctl, rc, "cannot create " TXN_STATE_TOPIC " in the metadata log");
			return rc;
		}
	}
	if (!metalog_topic(ctl->ml, GROUP_OFFSETS_TOPIC)) {
		/* the group coordinator's log: compacted, Kafka's defaults */
		static const char *const k[] = { "cleanup.policy", "segment.bytes" };
		static const char *const v[] = { "compact", "104857600" };
		int32_t np = (int32_t)config_int(ctl->cfg, "offsets.topic.num.partitions");

		rc = metalog_create_topic(ctl->ml, GROUP_OFFSETS_TOPIC, np, k, v, 2, NULL);
		if (rc < 0) {
			ctl_set_ready(ctl, rc, "cannot create " GROUP_OFFSETS_TOPIC " in the metadata log");
			return rc;
		}
	}
	/* the admin endpoint, once the metadata log is open: /v1/health says
	 * "recovering" while the partitions open */
	{
		char aerr[512] = "";

		rc = admin_http_start(ctl, b, ctl->cfg, &ctl->admin, aerr, sizeof(aerr));
		if (rc < 0) {
			ctl_set_ready(ctl, rc, aerr);
			return rc;
		}
		if (aerr[0])
			fprintf(stderr, "sluiced: %s\n", aerr);
		ctl->admin_port = ctl->admin ? admin_http_port(ctl->admin) : 0;
	}
	/* replay: every topic's partitions open on their shards */
	op = calloc(1, sizeof(*op));
	n = metalog_topic_count(ctl->ml);
	op->created = calloc((size_t)n + 1, sizeof(*op->created));
	op->created_for = calloc((size_t)n + 1, sizeof(*op->created_for));
	for (int i = 0; i < n; i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);
		struct md_topic *t;

		if (!strcmp(mt->name, TOPIC_CLUSTER_METADATA)) {
			/* recorded by a broker before 2026-12 that let a client
			 * create it: its directory is the metadata log's own, so it
			 * is never opened as a topic */
			fprintf(stderr, "sluiced: ignoring the topic %s recorded in the metadata log by an older "
					"broker: its directory would be the metadata log's own\n",
				mt->name);
			continue;
		}
		t = topic_build(ctl, mt);

		op->created[op->ncreated++] = t;
		topic_open_parts(ctl, op, t, 0);
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
	return 0;
}

/* One turn with the given clock: parked messages first (they are older
 * than anything sent below), the shards' rings, reclamation, the
 * coordinators' timers and the admin endpoint's requests. Returns the
 * work done (messages sent or handled); 0 lets the idle policy sleep
 * until ctl->timeout. */
int ctl_poll(struct ctl *ctl, uint64_t now_ns, int64_t now_ms)
{
	struct broker *b = ctl->b;
	struct shard_msg m;
	int work = 0, timeout;

	ctl->now_ms = (int64_t)(now_ns / 1000000);
	ctl->wall = now_ms;
	work += ctl_flush_parked(ctl, &ctl->parked_left);
	for (int from = 0; from < b->set.nshards; from++)
		while (spsc_pop(b->rings[from][broker_ctl_index(b)], &m)) {
			m.fn(ctl, &m);
			work++;
		}
	ctl_reclaim(ctl);
	if (b->stopping)
		group_stopping(ctl->gc);
	if (__atomic_exchange_n(&b->report_groups, 0, __ATOMIC_ACQ_REL)) {
		txn_report(ctl->tc);
		group_report(ctl->gc);
		ctl_report_cycles(b);
	}
	timeout = group_tick(ctl->gc, ctl->now_ms, 100);
	timeout = txn_tick(ctl->tc, ctl->now_ms, ctl->wall, timeout);
	if (ctl->admin) {
		/* the admin endpoint's requests run here, on this thread */
		admin_http_run(ctl->admin);
		timeout = admin_http_timeout(ctl->admin, timeout);
	}
	ctl->timeout = timeout;
	return work;
}

/* The idle policy, after a turn that did no work: sleep in poll() on the
 * wake eventfd and the admin endpoint's socket until the next timer
 * (ctl->timeout), or 1 ms while messages are parked (a shard frees ring
 * slots without waking us). The sleeping word is set first and the rings
 * looked at again, so a shard that sends after that wakes us. */
void ctl_idle(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	int timeout = ctl->timeout, work = 0;
	struct pollfd pfd[2] = { { .fd = ctl->wake_fd, .events = POLLIN },
				 { .fd = ctl->admin ? admin_http_fd(ctl->admin) : -1, .events = POLLIN } };

	if (ctl->parked_left && timeout > 1)
		timeout = 1;
	__atomic_store_n(&ctl->sleeping, 1, __ATOMIC_SEQ_CST);
	for (int from = 0; from < b->set.nshards; from++)
		if (!spsc_empty(b->rings[from][broker_ctl_index(b)]))
			work = 1;
	if (!work && poll(pfd, 2, timeout) > 0 && (pfd[0].revents & POLLIN)) {
		uint64_t v;

		if (read(ctl->wake_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: raced with another reader; nothing to do */
		}
	}
	__atomic_store_n(&ctl->sleeping, 0, __ATOMIC_SEQ_CST);
}

/* After the last turn, the shards stopped: the admin endpoint, the
 * metadata log and the coordinators closed; the snapshot, its topics and
 * what is retired freed (their partitions were closed by the shards). */
void ctl_fini(struct ctl *ctl)
{
	struct broker *b = ctl->b;

	admin_http_stop(ctl->admin);
	ctl->admin = NULL;
	metalog_close(ctl->ml);
	ctl->ml = NULL;
	txn_coord_destroy(ctl->tc);
	ctl->tc = NULL;
	group_coord_destroy(ctl->gc);
	ctl->gc = NULL;
	{
		struct md_snapshot *md = b->md;
		struct config *mdcfg = md ? (struct config *)md->cfg : NULL;

		for (int i = 0; md && i < md->ntopics; i++)
			topic_free(md->topics[i]);
		if (md) {
			free(md->topics);
			free(md);
		}
		b->md = NULL;
		while (ctl->retired) {
			struct retired *r = ctl->retired;

			ctl->retired = r->next;
			if (r->snap) {
				free(r->snap->topics);
				free(r->snap);
			}
			if (r->topic)
				topic_free(r->topic);
			config_destroy(r->cfg);
			free(r);
		}
		if (mdcfg != ctl->eff)
			config_destroy(mdcfg);
		config_destroy(ctl->eff);
		ctl->eff = NULL;
		while (ctl->pubs) {
			struct pub_block *pb = ctl->pubs;

			ctl->pubs = pb->next;
			free(pb);
		}
		/* the shards have stopped: nobody is left to take these */
		for (int i = 0; i < b->set.nshards; i++) {
			free(ctl->park[i].q);
			ctl->park[i].q = NULL;
			ctl->park[i].len = ctl->park[i].cap = 0;
		}
	}
}

static uint64_t ctl_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The thread: start-up, then one clock per turn, a turn, and the idle
 * policy when the turn found nothing to do; teardown once stopped. */
static void *ctl_main(void *arg)
{
	struct ctl *ctl = arg;

	pthread_setname_np(pthread_self(), "sluice-ctl");
	if (ctl_init(ctl, ctl_mono_ns(), wall_ms()) < 0)
		return NULL;
	while (!ctl->stop)
		if (ctl_poll(ctl, ctl_mono_ns(), wall_ms()) == 0)
			ctl_idle(ctl);
	ctl_fini(ctl);
	return NULL;
}

int ctl_is_ready(const struct ctl *ctl)
{
	return ctl->ready && !ctl->init_err;
}

int ctl_admin_port(const struct ctl *ctl)
{
	return ctl->admin_port;
}

int64_t ctl_started_ms(const struct ctl *ctl)
{
	return ctl->started_ms;
}

int64_t ctl_now_ms(const struct ctl *ctl)
{
	return ctl->now_ms;
}

int64_t ctl_wall_ms(const struct ctl *ctl)
{
	return ctl->wall;
}

int ctl_create(struct broker *b, struct config *cfg, struct ctl **out)
{
	struct ctl *ctl = calloc(1, sizeof(*ctl));
	int idx = broker_ctl_index(b);

	if (!ctl)
		return -ENOMEM;
	ctl->b = b;
	ctl->cfg = cfg;
	ctl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->wake_fd < 0) {
		free(ctl);
		return -errno;
	}
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_cond_init(&ctl->cond, NULL);
	b->wake_fd[idx] = ctl->wake_fd;
	b->sleeping[idx] = &ctl->sleeping;
	b->ctl = ctl;
	b->coord = &ctl_coord_ops;
	the_ctl = ctl;
	*out = ctl;
	return 0;
}

/* What the shards reach of the control plane (dataplane/coord.h). */
const struct coord_ops ctl_coord_ops = {
	.submit_group = group_submit,
	.submit_txn = txn_submit,
	.submit_admin = ctl_submit,
	.submit_producer_id = ctl_producer_id_submit,
	.producer_id_msg = ctl_producer_id_msg,
	.key_dynamic = config_dynamic,
	.topic_key_at = topic_config_key_at,
	.topic_broker_key = topic_config_broker_key,
	.topic_default = topic_config_default,
	.key_source = config_source,
	.foreach_key = config_foreach,
};

void ctl_destroy(struct ctl *ctl)
{
	if (!ctl)
		return;
	if (the_ctl == ctl)
		the_ctl = NULL;
	if (ctl->b->ctl == ctl)
		ctl->b->ctl = NULL;
	close(ctl->wake_fd);
	pthread_mutex_destroy(&ctl->lock);
	pthread_cond_destroy(&ctl->cond);
	free(ctl);
}

int ctl_start(struct broker *b, struct config *cfg, struct ctl **out)
{
	struct ctl *ctl;
	int rc = ctl_create(b, cfg, &ctl);

	if (rc < 0)
		return rc;
	if (pthread_create(&ctl->thread, NULL, ctl_main, ctl)) {
		ctl_destroy(ctl);
		return -EAGAIN;
	}
	*out = ctl;
	return 0;
}

int ctl_wait_ready(struct ctl *ctl, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&ctl->lock);
	while (!ctl->ready)
		pthread_cond_wait(&ctl->cond, &ctl->lock);
	rc = ctl->init_err;
	if (rc)
		snprintf(err, errlen, "%s", ctl->init_msg);
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

void ctl_stop(struct ctl *ctl)
{
	ctl->stop = 1;
	{
		uint64_t one = 1;

		if (write(ctl->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: it wakes anyway */
		}
	}
	pthread_join(ctl->thread, NULL);
	ctl_destroy(ctl);
}
