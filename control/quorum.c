/* control/quorum.c — the Raft quorum that keeps the metadata log: libraft
 * 0.15 (raft_uv on disk; between the voters the controller port's
 * transport, control/quorum_transport.c, which also carries the controller
 * channel) on a libuv loop of its own, driven by the control thread. See
 * quorum.h.
 *
 * Driving libuv from someone else's loop — what to respect (each point was
 * seen with the installed libraft 0.15.0 and libuv 1.44.2):
 *  - The clock. libraft reads the loop's cached time (uv_now), which only
 *    uv_run and uv_update_time move. raft_init probes the directory and
 *    raft_bootstrap and the log load fsync: seconds can pass on a slow disk
 *    before raft_start, so uv_update_time comes right before it, or raft
 *    starts with a stale clock and its first timers fire at once. Every
 *    quorum_poll updates the time before its uv_run(UV_RUN_NOWAIT).
 *  - Sleeping. uv_backend_fd is an epoll fd, level-triggered: poll() on it
 *    beside our own fds loses nothing. uv_backend_timeout is 0 while libuv
 *    has pending or closing work, else its next timer (raft's tick every
 *    heartbeat_timeout ms, so ~10 wake-ups a second when idle), -1 with no
 *    timer at all; sleeping longer than it says starves raft's timers.
 *  - Blocking. uv_run(NOWAIT) never waits for an event, but raft work in it
 *    does block the control thread: the term/vote metadata fsyncs at every
 *    election, the io_destroy of a full segment's kernel AIO context
 *    (25-40 ms), a snapshot (this FSM's is synchronous), and the log load
 *    inside quorum_open. The control thread's timers wait meanwhile.
 *  - Threads and signals. libuv's threadpool (4 threads,
 *    UV_THREADPOOL_SIZE) is process-wide and starts at the first
 *    uv_queue_work (raft_uv's first segment preparation), from this thread:
 *    its threads inherit this thread's signal mask, so they must be blocked
 *    here already (sluiced's main blocks TERM/INT/PIPE/USR1 before it
 *    starts any thread, and the control thread inherits that). libuv writes
 *    to TCP with plain write() (no MSG_NOSIGNAL): SIGPIPE must stay blocked
 *    or ignored in the process.
 *  - Randomness. raft_uv_init calls srand() and libraft uses the
 *    process-wide rand(): nothing else in the broker may rely on rand().
 *  - Closing. raft_close is asynchronous (pending disk writes finish); once
 *    its callback ran and uv_run says nothing is left, the raft_uv and TCP
 *    objects are freed, and the loop is closed once it is empty again
 *    (quorum_poll keeps turning).
 *
 * libraft 0.15 faults this module works around:
 *  - A restarted follower that is taking its own snapshot answers the
 *    leader's InstallSnapshot with RAFT_BUSY; the leader drops that answer
 *    and retries only after install_snapshot_timeout (30 s by default):
 *    catch-up stalled 30 s in 3 of ~90 restarts. The default here is 5 s.
 *  - No entry is appended on election: the layer above runs
 *    quorum_barrier when it becomes leader (see quorum_ops.leader_changed).
 *  - No lock on the directory: flock on it here, for as long as it is open.
 *  - raft_close while a log append is still being written faults (SIGSEGV
 *    in the log's reference table, from the append's callback run inside
 *    the close): quorum_close waits until raft's last_stored reaches its
 *    last index (5 s at most) before raft_close.
 *  - No state-change callback: quorum_poll compares the leader after each
 *    turn and tells leader_changed.
 *  - A log that cannot be written is not reported: a follower's failed
 *    append is traced and dropped (it stays a follower, the leader sends
 *    the same entries again, and this node's metadata goes stale; seen
 *    with EROFS). raft_uv's append, term, vote and truncate are wrapped
 *    to see their status: quorum_disk_error.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "control/quorum.h"
#include "control/quorum_fsm.h"
#include "control/quorum_transport.h"

/* The file this module keeps beside raft_uv's: who the directory belongs
 * to (raft_uv lists only its own names and leaves other files alone). */
#define QUORUM_ID_FILE "sluice-quorum"
#define QUORUM_ID_VERSION "sluice-quorum 1"
#define QUORUM_RECORD_MAX (1 << 20)
#define QUORUM_HOST_MAX 16              /* "255.255.255.255" */
#define QUORUM_CLUSTER_ID_MAX 255

enum quorum_state {
	QUORUM_OPEN,
	QUORUM_CLOSE_ASKED,     /* quorum_close ran; raft_close once no write is in flight */
	QUORUM_CLOSING,         /* raft_close runs (disk writes finishing) */
	QUORUM_DRAINING,        /* raft closed; the loop drains, the backends are freed, their handles close */
};

struct quorum {
	/* libraft and libuv hold pointers into these: q never moves */
	uv_loop_t loop;
	struct raft_uv_transport transport;
	struct raft_io io;
	struct raft raft;
	struct quorum_fsm fsm;
	struct raft_transfer transfer;  /* one at a time; its send may outlive
					 * the transfer, so it lives in q */
	void (*transfer_done)(void *cookie, int32_t leader);  /* NULL: none running */
	void *transfer_cookie;

	const struct quorum_ops *ops;   /* borrowed, as is arg */
	void *arg;
	int32_t node_id;
	int lock_fd;                    /* the directory, flocked */
	enum quorum_state state;
	void (*close_done)(void *arg);
	void *close_arg;
	uint64_t close_by;              /* uv_now: raft_close then, writes in flight or not */
	int backends_freed;             /* raft_uv and the transport, once drained */
	void (*uv_io_close)(struct raft_io *io, raft_io_close_cb cb);   /* raft_uv's own */
	struct raft_io uv_io;           /* raft_uv's own writes, wrapped (quorum_io_watch) */
	raft_io_close_cb raft_io_closed;        /* raft's, run once */
	int io_closed;
	int32_t told_leader;            /* as last given to leader_changed */
	int told_am_leader;
	uint64_t ran;                   /* done and transfer callbacks run */
	int local;                      /* a quorum of one on port 0: no sockets */
	struct qt_ops channel;          /* the controller channel's accepts */
	/* an observer (quorum_config.observer): no raft; what a voter said */
	int observer;
	int32_t obs_leader;             /* -1: none known */
	uint64_t obs_term, obs_applied, obs_hw;
	int obs_nvoters;
	int32_t obs_voters[QUORUM_MAX_VOTERS];
	int disk_err;                   /* quorum_disk_error: 0, -EIO, -ENOSPC */
	char disk_msg[256];
};

struct quorum_prop {
	struct raft_apply req;
	quorum_done_fn done;
	void *cookie;
	struct quorum *q;
};

struct quorum_bar {
	struct raft_barrier req;
	quorum_done_fn done;
	void *cookie;
	struct quorum *q;
};

static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* libraft's codes at this edge (the list is in quorum.h). */
static int quorum_errno(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case RAFT_NOTLEADER:
		return -QUORUM_ENOTLEADER;
	case RAFT_LEADERSHIPLOST:
		return -QUORUM_ELOST;
	case RAFT_SHUTDOWN:
		return -ESHUTDOWN;
	case RAFT_NOMEM:
		return -ENOMEM;
	case RAFT_TOOBIG:
		return -EMSGSIZE;
	case RAFT_NOSPACE:
		return -ENOSPC;
	case RAFT_BUSY:
		return -EBUSY;
	case RAFT_NOTFOUND:
		return -ENOENT;
	case RAFT_BADID:
	case RAFT_INVALID:
		return -EINVAL;
	case RAFT_MALFORMED:
		return -EPROTO;
	default:
		return -EIO;
	}
}

/* ------------------------------------------------ the configuration */

static const struct quorum_voter *voter_of(const struct quorum_config *cfg, int32_t node_id)
{
	for (int i = 0; i < cfg->nvoters; i++)
		if (cfg->voters[i].node_id == node_id)
			return &cfg->voters[i];
	return NULL;
}

/* "0@127.0.0.1:9093,1@..." in node id order: the voter set as the
 * identity file keeps it and as messages name it. */
static void voters_text(const struct quorum_config *cfg, char *buf, size_t cap)
{
	size_t off = 0;
	int32_t last = -1;

	buf[0] = 0;
	for (int k = 0; k < cfg->nvoters; k++) {
		const struct quorum_voter *next = NULL;

		for (int i = 0; i < cfg->nvoters; i++)
			if (cfg->voters[i].node_id > last &&
			    (!next || cfg->voters[i].node_id < next->node_id))
				next = &cfg->voters[i];
		if (!next || off >= cap)
			break;
		off += (size_t)snprintf(buf + off, cap - off, "%s%d@%s:%u", k ? "," : "",
					next->node_id, next->host, next->port);
		last = next->node_id;
	}
}

static unsigned election_ms(const struct quorum_config *cfg)
{
	return cfg->election_timeout_ms ? cfg->election_timeout_ms : 1000;
}

static unsigned heartbeat_ms(const struct quorum_config *cfg)
{
	return cfg->heartbeat_timeout_ms ? cfg->heartbeat_timeout_ms : 100;
}

static int config_check(const struct quorum_config *cfg, char *err, size_t errlen)
{
	if (!cfg->observer && (!cfg->dir || !cfg->dir[0]))
		return errf(err, errlen, -EINVAL, "no directory for the quorum's log");
	if (cfg->node_id < 0)
		return errf(err, errlen, -EINVAL, "node id %d is negative", cfg->node_id);
	if (!cfg->cluster_id || !cfg->cluster_id[0] || strlen(cfg->cluster_id) > QUORUM_CLUSTER_ID_MAX)
		return errf(err, errlen, -EINVAL, "the cluster id must be 1 to %d characters",
			    QUORUM_CLUSTER_ID_MAX);
	for (const char *c = cfg->cluster_id; *c; c++)
		if (*c <= ' ' || *c > '~')
			return errf(err, errlen, -EINVAL, "the cluster id '%s' has a space or a control character",
				    cfg->cluster_id);
	if (cfg->nvoters < 1 || !cfg->voters)
		return errf(err, errlen, -EINVAL, "no voters");
	for (int i = 0; i < cfg->nvoters; i++) {
		const struct quorum_voter *v = &cfg->voters[i];
		struct in_addr a;

		if (v->node_id < 0)
			return errf(err, errlen, -EINVAL, "voter %d: the node id is negative", v->node_id);
		if (!v->host || strlen(v->host) >= QUORUM_HOST_MAX || inet_pton(AF_INET, v->host, &a) != 1)
			return errf(err, errlen, -EINVAL,
				    "voter %d: host '%s' is not a dotted-quad IPv4 address (libraft 0.15 takes "
				    "no host names and no IPv6: give the address)",
				    v->node_id, v->host ? v->host : "");
		if (v->port == 0 && cfg->nvoters > 1)
			return errf(err, errlen, -EINVAL, "voter %d: port 0 (only a quorum of one, which "
				    "opens no socket, has no port)", v->node_id);
		for (int j = 0; j < i; j++) {
			if (cfg->voters[j].node_id == v->node_id)
				return errf(err, errlen, -EINVAL, "voter %d is named twice", v->node_id);
			if (cfg->voters[j].port == v->port && !strcmp(cfg->voters[j].host, v->host))
				return errf(err, errlen, -EINVAL, "voters %d and %d have the same address %s:%u",
					    cfg->voters[j].node_id, v->node_id, v->host, v->port);
		}
	}
	if (cfg->observer && voter_of(cfg, cfg->node_id))
		return errf(err, errlen, -EINVAL, "node id %d is a voter, so it cannot be an observer", cfg->node_id);
	if (cfg->observer && cfg->nvoters > QUORUM_MAX_VOTERS)
		return errf(err, errlen, -EINVAL, "more than %d voters", QUORUM_MAX_VOTERS);
	if (!cfg->observer && !voter_of(cfg, cfg->node_id)) {
		char vs[512];

		voters_text(cfg, vs, sizeof(vs));
		return errf(err, errlen, -EINVAL, "node id %d is not one of the voters (%s)", cfg->node_id, vs);
	}
	/* raft_start asserts it (an assert Debian's build compiles out) */
	if (heartbeat_ms(cfg) >= election_ms(cfg))
		return errf(err, errlen, -EINVAL, "the heartbeat timeout (%u ms) must be below the election timeout (%u ms)",
			    heartbeat_ms(cfg), election_ms(cfg));
	return 0;
}

/* ------------------------------------------------ the directory */

/* The identity file's whole text for cfg. */
static void id_text(const struct quorum_config *cfg, char *buf, size_t cap)
{
	char vs[2048];

	voters_text(cfg, vs, sizeof(vs));
	snprintf(buf, cap, "%s\ncluster.id %s\nvoters %s\n", QUORUM_ID_VERSION, cfg->cluster_id, vs);
}

/* The value of the line "<key> <value>" in text, or "" (copied). */
static void id_field(const char *text, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	const char *p = text;

	out[0] = 0;
	while (p && *p) {
		if (!strncmp(p, key, kl) && p[kl] == ' ') {
			const char *v = p + kl + 1, *e = strchr(v, '\n');
			size_t l = e ? (size_t)(e - v) : strlen(v);

			snprintf(out, cap, "%.*s", (int)(l < cap ? l : cap - 1), v);
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
}

static int file_exists(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, 0) == 0;
}

/* Write the identity file: a new name, fsync, rename, fsync the directory. */
static int id_write(int dirfd, const char *dir, const char *text, char *err, size_t errlen)
{
	size_t len = strlen(text);
	int fd, rc = 0;

	fd = openat(dirfd, QUORUM_ID_FILE ".new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, -errno, "%s/%s.new: %s", dir, QUORUM_ID_FILE, strerror(errno));
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0)
		rc = -(errno ? errno : EIO);
	close(fd);
	if (!rc && renameat(dirfd, QUORUM_ID_FILE ".new", dirfd, QUORUM_ID_FILE) < 0)
		rc = -errno;
	if (!rc && fsync(dirfd) < 0)
		rc = -errno;
	if (rc)
		return errf(err, errlen, rc, "%s/%s: %s", dir, QUORUM_ID_FILE, strerror(-rc));
	return 0;
}

/* The directory belongs to this cluster and voter set: check the identity
 * file, or write it when the directory holds no raft state yet. */
static int id_check(int dirfd, const struct quorum_config *cfg, char *err, size_t errlen)
{
	char want[4096], have[4096], a[2048], b[2048];
	ssize_t n;
	int fd;

	id_text(cfg, want, sizeof(want));
	fd = openat(dirfd, QUORUM_ID_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return errf(err, errlen, -errno, "%s/%s: %s", cfg->dir, QUORUM_ID_FILE, strerror(errno));
	if (fd < 0) {
		if (file_exists(dirfd, "metadata1") || file_exists(dirfd, "metadata2"))
			return errf(err, errlen, -EINVAL,
				    "%s holds a raft log but no %s file naming its cluster and voters: it was "
				    "not made by this quorum; move it away to start afresh",
				    cfg->dir, QUORUM_ID_FILE);
		return id_write(dirfd, cfg->dir, want, err, errlen);
	}
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n < 0)
		return errf(err, errlen, -EIO, "%s/%s: %s", cfg->dir, QUORUM_ID_FILE, strerror(errno));
	have[n] = 0;
	if (!strcmp(have, want))
		return 0;
	id_field(have, "cluster.id", a, sizeof(a));
	if (strcmp(a, cfg->cluster_id))
		return errf(err, errlen, -EINVAL,
			    "%s belongs to cluster id '%s', not '%s': this node's directory is of another cluster",
			    cfg->dir, a, cfg->cluster_id);
	id_field(have, "voters", a, sizeof(a));
	voters_text(cfg, b, sizeof(b));
	if (strcmp(a, b) && quorum_same_lone_voter(a, b)) {
		/* a quorum of one that opens its port now, or no longer: its
		 * address is nobody else's business */
		id_text(cfg, want, sizeof(want));
		return id_write(dirfd, cfg->dir, want, err, errlen);
	}
	if (strcmp(a, b))
		return errf(err, errlen, -EINVAL,
			    "%s was made for the voters %s, not %s (the voter set of an existing quorum "
			    "cannot be changed by configuration)",
			    cfg->dir, a, b);
	return errf(err, errlen, -EINVAL, "%s/%s is not a file this version understands (first line: %.40s)",
		    cfg->dir, QUORUM_ID_FILE, have);
}

int quorum_identity_read(const char *dir, char *cluster_id, size_t cidcap, char *voters, size_t vcap)
{
	char path[4096], have[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, QUORUM_ID_FILE);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	have[n] = 0;
	if (strncmp(have, QUORUM_ID_VERSION "\n", strlen(QUORUM_ID_VERSION) + 1))
		return -EPROTO;
	id_field(have, "cluster.id", cluster_id, cidcap);
	id_field(have, "voters", voters, vcap);
	return 0;
}

int quorum_same_lone_voter(const char *a, const char *b)
{
	const char *at = strchr(a, '@'), *bt = strchr(b, '@');

	return at && bt && !strchr(a, ',') && !strchr(b, ',') && at - a == bt - b && !strncmp(a, b, (size_t)(at - a));
}

void quorum_voters_text(const struct quorum_config *cfg, char *buf, size_t cap)
{
	voters_text(cfg, buf, cap);
}

/* Create (if needed), lock and check the directory: the locked fd, or -errno. */
static int dir_claim(const struct quorum_config *cfg, char *err, size_t errlen)
{
	int fd, rc;

	if (mkdir(cfg->dir, 0755) < 0 && errno != EEXIST)
		return errf(err, errlen, -errno, "cannot create %s: %s", cfg->dir, strerror(errno));
	fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errf(err, errlen, -errno, "cannot open %s: %s", cfg->dir, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return errf(err, errlen, rc, "%s is in use (locked by another open quorum: another process or "
			    "node on the same directory?)", cfg->dir);
	}
	rc = id_check(fd, cfg, err, errlen);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* ------------------------------------------------ a quorum of one's transport */

/* A quorum of one (its only voter on port 0) talks to nobody: raft_uv
 * still wants a transport, and this one opens no socket, so a one-node
 * broker listens on no port of its own for the quorum. raft never
 * connects (there is no other voter) and nobody can connect to it. */
static int local_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
	(void)t;
	(void)id;
	(void)address;
	return 0;
}

static int local_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
	(void)t;
	(void)cb;
	return 0;
}

static int local_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
			 const char *address, raft_uv_connect_cb cb)
{
	(void)req;
	(void)id;
	(void)cb;
	snprintf(t->errmsg, sizeof(t->errmsg), "a quorum of one connects to nobody (asked for %s)", address);
	return RAFT_NOCONNECTION;
}

static void local_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
	if (cb)
		cb(t);
}

static void transport_init_local(struct raft_uv_transport *t)
{
	memset(t, 0, sizeof(*t));
	t->init = local_init;
	t->listen = local_listen;
	t->connect = local_connect;
	t->close = local_close;
}

static void transport_close(struct quorum *q)
{
	if (!q->local)
		qt_fini(&q->transport);
}

/* ------------------------------------------------ open */

static void quorum_raft_closed(struct raft *r);

/* raft_uv's close callback, to raft at most once: raft_uv 0.15 may call
 * it again from a later completion (it never clears it), and raft's
 * callback closes the log and frees its configuration each time (a
 * double free, or a read through freed memory). */
static void quorum_io_closed(struct raft_io *io)
{
	struct quorum *q = (struct quorum *)((char *)io - offsetof(struct quorum, io));

	if (q->io_closed)
		return;
	q->io_closed = 1;
	q->raft_io_closed(io);
}

static void quorum_io_close(struct raft_io *io, raft_io_close_cb cb)
{
	struct quorum *q = (struct quorum *)((char *)io - offsetof(struct quorum, io));

	q->raft_io_closed = cb;
	q->uv_io_close(io, quorum_io_closed);
}

/* raft's log could not be written (quorum_disk_error): said once, the
 * first cause kept. libraft's own message (raft_errmsg) names what failed
 * when it has one. */
static void quorum_disk_failed(struct quorum *q, int status, const char *m)
{
	if (q->disk_err)
		return;
	q->disk_err = status == RAFT_NOSPACE ? -ENOSPC : -EIO;
	snprintf(q->disk_msg, sizeof(q->disk_msg), "%s%s%.200s", raft_strerror(status), m[0] ? ": " : "", m);
}

static int quorum_disk_status(int status)
{
	return status == RAFT_IOERR || status == RAFT_NOSPACE || status == RAFT_CORRUPT;
}

/* libraft 0.15 does not say when its log cannot be written: a follower's
 * failed append is traced and dropped (raft stays a follower, its log's
 * end stays where it was on disk, the leader sends the same entries
 * again, and this node's metadata goes stale), a failed term or vote
 * write fails the election. raft_uv's writes are wrapped here to see
 * their status (quorum_disk_error). */
struct quorum_append {
	struct raft_io_append req;      /* given to raft_uv */
	struct raft_io_append *orig;    /* raft's */
	struct quorum *q;
};

static struct quorum *quorum_of_io(struct raft_io *io)
{
	return (struct quorum *)((char *)io - offsetof(struct quorum, io));
}

static void quorum_io_status(struct quorum *q, int rv)
{
	if (quorum_disk_status(rv) && q->state == QUORUM_OPEN)
		quorum_disk_failed(q, rv, q->io.errmsg);
}

/* A write that failed on the disk is not handed to raft: the node halts
 * (ctl_quorum_poll, cq_disk_failed) once this turn of the loop returns.
 * libraft 0.15's leader callback does not survive every failed append:
 * when raft_uv cannot create its next open segment (ENOSPC: the disk of
 * the active controller filled), it fails every append waiting for that
 * segment, and the leader's callback, releasing their entries, reads
 * NULL in the log's reference table (SIGSEGV instead of the halt's
 * message; tests/fault/test_disk_failures.py
 * a_full_metadata_disk_on_the_active_controller_moves_the_controller). A
 * follower's is traced and dropped by raft anyway. Other statuses (a
 * close's RAFT_CANCELED) go to raft as they are. */
static void quorum_io_appended(struct raft_io_append *req, int status)
{
	struct quorum_append *a = req->data;
	struct raft_io_append *orig = a->orig;
	struct quorum *q = a->q;

	quorum_io_status(q, status);
	free(a);
	if (quorum_disk_status(status) && q->state == QUORUM_OPEN)
		return;
	orig->cb(orig, status);
}

static int quorum_io_append(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[],
			    unsigned n, raft_io_append_cb cb)
{
	struct quorum *q = quorum_of_io(io);
	struct quorum_append *a = malloc(sizeof(*a));
	int rv;

	if (!a)
		return RAFT_NOMEM;
	a->req.data = a;
	a->orig = req;
	a->q = q;
	req->cb = cb;
	rv = q->uv_io.append(io, &a->req, entries, n, quorum_io_appended);
	if (rv != 0) {
		free(a);
		quorum_io_status(q, rv);
	}
	return rv;
}

static int quorum_io_set_term(struct raft_io *io, raft_term term)
{
	int rv = quorum_of_io(io)->uv_io.set_term(io, term);

	quorum_io_status(quorum_of_io(io), rv);
	return rv;
}

static int quorum_io_set_vote(struct raft_io *io, raft_id id)
{
	int rv = quorum_of_io(io)->uv_io.set_vote(io, id);

	quorum_io_status(quorum_of_io(io), rv);
	return rv;
}

static int quorum_io_truncate(struct raft_io *io, raft_index index)
{
	int rv = quorum_of_io(io)->uv_io.truncate(io, index);

	quorum_io_status(quorum_of_io(io), rv);
	return rv;
}

static void quorum_io_watch(struct quorum *q)
{
	q->uv_io = q->io;
	q->io.append = quorum_io_append;
	q->io.set_term = quorum_io_set_term;
	q->io.set_vote = quorum_io_set_vote;
	q->io.truncate = quorum_io_truncate;
}

/* raft is closed and the loop has nothing left of raft_uv (no handle, no
 * request, no callback to come): free the backends. Never inside
 * raft's close callback: raft_uv may still have callbacks queued on the
 * loop that look at its memory (freed there, a later one read freed
 * memory and called the close callback again: SIGSEGV in libraft's
 * close callback, seen under load). */
static void quorum_free_backends(struct quorum *q)
{
	if (q->backends_freed)
		return;
	q->backends_freed = 1;
	if (!q->observer)
		raft_uv_close(&q->io);
	transport_close(q);
}

/* After a failed raft_init: no handle was started; free and close. */
static void quorum_abandon_io(struct quorum *q)
{
	raft_uv_close(&q->io);
	transport_close(q);
	uv_run(&q->loop, UV_RUN_DEFAULT);
	uv_loop_close(&q->loop);
}

/* After a failed bootstrap or start: close raft and run the loop until
 * nothing is left (blocking: quorum_open has not returned yet). */
static void quorum_abandon_raft(struct quorum *q)
{
	q->state = QUORUM_CLOSING;
	raft_close(&q->raft, quorum_raft_closed);
	while (uv_run(&q->loop, UV_RUN_DEFAULT) != 0)
		;
	quorum_free_backends(q);
	while (uv_run(&q->loop, UV_RUN_DEFAULT) != 0)
		;
	uv_loop_close(&q->loop);
}

static int observer_open(const struct quorum_config *cfg, struct quorum *q, char *err, size_t errlen)
{
	int rv;

	q->observer = 1;
	q->lock_fd = -1;
	q->obs_leader = -1;
	for (int i = 0; i < cfg->nvoters; i++)
		q->obs_voters[q->obs_nvoters++] = cfg->voters[i].node_id;
	rv = uv_loop_init(&q->loop);
	if (rv != 0)
		return errf(err, errlen, -EIO, "uv_loop_init: %s", uv_strerror(rv));
	rv = qt_init(&q->transport, &q->loop, &q->channel);
	if (rv != 0) {
		uv_loop_close(&q->loop);
		return errf(err, errlen, quorum_errno(rv), "the controller channel's transport: %s",
			    raft_strerror(rv));
	}
	return 0;
}

int quorum_open(const struct quorum_config *cfg, const struct quorum_ops *ops, void *arg,
		struct quorum **out, char *err, size_t errlen)
{
	const struct quorum_voter *self;
	struct raft_configuration conf;
	struct quorum *q;
	char addr[64];
	int rc, rv;

	*out = NULL;
	if (err && errlen)
		err[0] = 0;
	if (!ops || !ops->apply || !ops->snapshot || !ops->restore)
		return errf(err, errlen, -EINVAL, "apply, snapshot and restore callbacks are needed");
	rc = config_check(cfg, err, errlen);
	if (rc < 0)
		return rc;
	q = calloc(1, sizeof(*q));
	if (!q)
		return errf(err, errlen, -ENOMEM, "out of memory");
	q->ops = ops;
	q->arg = arg;
	q->node_id = cfg->node_id;
	q->channel.channel_accept = cfg->channel_accept;
	q->channel.arg = cfg->channel_arg;
	q->channel.sec = cfg->tls;
	q->channel.counters = cfg->counters;
	q->channel.sasl = cfg->sasl;
	q->told_leader = -1;
	if (cfg->observer) {
		rc = observer_open(cfg, q, err, errlen);
		if (rc < 0) {
			free(q);
			return rc;
		}
		*out = q;
		return 0;
	}
	q->lock_fd = dir_claim(cfg, err, errlen);
	if (q->lock_fd < 0) {
		rc = q->lock_fd;
		free(q);
		return rc;
	}
	self = voter_of(cfg, cfg->node_id);
	snprintf(addr, sizeof(addr), "%s:%u", self->host, self->port);

	rv = uv_loop_init(&q->loop);
	if (rv != 0) {
		rc = errf(err, errlen, -EIO, "uv_loop_init: %s", uv_strerror(rv));
		goto err_lock;
	}
	q->local = cfg->nvoters == 1 && self->port == 0;
	rv = 0;
	if (q->local)
		transport_init_local(&q->transport);
	else
		rv = qt_init(&q->transport, &q->loop, &q->channel);
	if (rv != 0) {
		rc = errf(err, errlen, quorum_errno(rv), "the controller port's transport: %s", raft_strerror(rv));
		uv_loop_close(&q->loop);
		goto err_lock;
	}
	rv = raft_uv_init(&q->io, &q->loop, cfg->dir, &q->transport);
	if (rv != 0) {
		rc = errf(err, errlen, quorum_errno(rv), "raft_uv_init %s: %s", cfg->dir, q->io.errmsg);
		transport_close(q);
		uv_loop_close(&q->loop);
		goto err_lock;
	}
	raft_uv_set_connect_retry_delay(&q->io, cfg->connect_retry_ms ? cfg->connect_retry_ms : 250);
	{
		/* the test knob SLUICE_TEST_RAFT_SEGMENT_KIB (docs/cluster.md):
		 * raft_uv's segments of that many KiB instead of 8 MiB, so that
		 * a test makes it prepare new ones with a few records */
		const char *kib = getenv("SLUICE_TEST_RAFT_SEGMENT_KIB");

		if (kib && strtoul(kib, NULL, 10) > 0)
			raft_uv_set_segment_size(&q->io, (size_t)strtoul(kib, NULL, 10) << 10);
	}
	q->uv_io_close = q->io.close;
	q->io.close = quorum_io_close;
	quorum_io_watch(q);
	quorum_fsm_init(&q->fsm, ops, arg);
	/* raft ids must be > 0 and Kafka's node.id may be 0 */
	rv = raft_init(&q->raft, &q->io, &q->fsm.fsm, (raft_id)cfg->node_id + 1, addr);
	if (rv != 0) {
		/* raft_init's message is in the raft struct, the io's when the
		 * directory probe failed (e.g. no O_DIRECT) */
		rc = errf(err, errlen, quorum_errno(rv), "cannot use %s: %s", cfg->dir,
			  q->raft.errmsg[0] ? q->raft.errmsg : q->io.errmsg);
		quorum_abandon_io(q);
		goto err_lock;
	}
	quorum_fsm_bind(&q->fsm, &q->raft);
	q->raft.data = q;
	raft_set_election_timeout(&q->raft, election_ms(cfg));
	raft_set_heartbeat_timeout(&q->raft, heartbeat_ms(cfg));
	raft_set_install_snapshot_timeout(&q->raft, cfg->install_snapshot_timeout_ms ?
					  cfg->install_snapshot_timeout_ms : 5000);
	raft_set_snapshot_threshold(&q->raft, cfg->snapshot_threshold ? cfg->snapshot_threshold : 1024);
	/* 0.15's header says 128 and its code sets 2048: say which */
	raft_set_snapshot_trailing(&q->raft, cfg->snapshot_trailing ? cfg->snapshot_trailing : 2048);
	raft_set_pre_vote(&q->raft, cfg->pre_vote != 0);

	/* Every voter bootstraps the same configuration; on a directory that
	 * has a log already, raft refuses (RAFT_CANTBOOTSTRAP) and the log's
	 * configuration stands (the identity file said it is this one). */
	raft_configuration_init(&conf);
	rv = 0;
	for (int i = 0; i < cfg->nvoters && rv == 0; i++) {
		char a[64];

		snprintf(a, sizeof(a), "%s:%u", cfg->voters[i].host, cfg->voters[i].port);
		rv = raft_configuration_add(&conf, (raft_id)cfg->voters[i].node_id + 1, a, RAFT_VOTER);
	}
	if (rv == 0)
		rv = raft_bootstrap(&q->raft, &conf);
	raft_configuration_close(&conf);
	if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) {
		rc = errf(err, errlen, quorum_errno(rv), "cannot bootstrap the quorum in %s: %s", cfg->dir,
			  raft_errmsg(&q->raft));
		quorum_abandon_raft(q);
		goto err_lock;
	}
	uv_update_time(&q->loop);
	rv = raft_start(&q->raft);
	if (rv != 0) {
		/* A port in use shows as RAFT_IOERR with no message: the
		 * transport kept why. Not a damaged log: name the port, so that
		 * the operator (and scripts/cluster, which then picks new
		 * ports) sees what to do. */
		int lerr = q->local ? 0 : qt_listen_error(&q->transport);

		if (lerr == UV_EADDRINUSE)
			rc = errf(err, errlen, -EADDRINUSE, "the controller port %s (node %d in "
				  "controller.quorum.voters) is held by another process (address already in use): "
				  "stop that process, or give this node another port in controller.quorum.voters and "
				  "listeners", addr, cfg->node_id);
		else if (lerr < 0)
			rc = errf(err, errlen, lerr == UV_EADDRNOTAVAIL || lerr == UV_EACCES ? -EINVAL : lerr,
				  "cannot start the quorum on %s: %s (controller.quorum.voters names %s for node %d)",
				  cfg->dir, q->transport.errmsg, addr, cfg->node_id);
		else
			rc = errf(err, errlen, quorum_errno(rv), "cannot start the quorum on %s (%s%s): %s%s%s",
				  cfg->dir, q->local ? "a quorum of one, no socket" : "listening on ",
				  q->local ? "" : addr, raft_strerror(rv), raft_errmsg(&q->raft)[0] ? ": " : "",
				  raft_errmsg(&q->raft));
		quorum_abandon_raft(q);
		goto err_lock;
	}
	*out = q;
	return 0;

err_lock:
	close(q->lock_fd);
	free(q);
	return rc;
}

/* ------------------------------------------------ the loop */

int quorum_fd(const struct quorum *q)
{
	return uv_backend_fd(&q->loop);
}

/* raft_leader says 0 on a leader while it transfers leadership; this
 * node leads until the transfer ends, and says so. */
static int32_t leader_of(const struct quorum *q)
{
	struct raft *r = (struct raft *)&q->raft;
	raft_id id;
	const char *address;

	if (q->observer)
		return q->obs_leader;
	if (raft_state(r) == RAFT_LEADER)
		return q->node_id;
	raft_leader(r, &id, &address);
	return id ? (int32_t)(id - 1) : -1;
}

int32_t quorum_leader(const struct quorum *q)
{
	return q->state == QUORUM_OPEN ? leader_of(q) : -1;
}

void quorum_describe(const struct quorum *q, struct quorum_view *st)
{
	struct raft *r = (struct raft *)&q->raft;

	memset(st, 0, sizeof(*st));
	st->leader = quorum_leader(q);
	if (q->observer) {
		st->term = q->obs_term;
		st->commit_index = q->obs_hw;
		st->last_applied = q->obs_applied;
		st->last_index = q->obs_applied;
		for (int i = 0; i < q->obs_nvoters; i++) {
			st->voters[i].node_id = q->obs_voters[i];
			st->voters[i].log_end = -1;
		}
		st->nvoters = q->obs_nvoters;
		return;
	}
	st->am_leader = quorum_is_leader(q);
	st->term = r->current_term;
	st->commit_index = r->commit_index;
	st->last_applied = r->last_applied;
	st->last_index = raft_last_index(r);
	for (unsigned i = 0; i < r->configuration.n && st->nvoters < QUORUM_MAX_VOTERS; i++) {
		const struct raft_server *s = &r->configuration.servers[i];

		if (s->role != RAFT_VOTER)
			continue;
		st->voters[st->nvoters].node_id = (int32_t)(s->id - 1);
		st->voters[st->nvoters].log_end = (int32_t)(s->id - 1) == q->node_id ? (int64_t)st->last_index : -1;
		st->nvoters++;
	}
}

uint64_t quorum_last_index(const struct quorum *q)
{
	if (q->observer)
		return q->obs_applied;
	return raft_last_index((struct raft *)&q->raft);
}

uint64_t quorum_last_applied(const struct quorum *q)
{
	if (q->observer)
		return q->obs_applied;
	return raft_last_applied((struct raft *)&q->raft);
}

int quorum_follower_match(const struct quorum *q, int32_t node, uint64_t *match)
{
	const struct raft *r = &q->raft;

	if (!quorum_is_leader(q))
		return -QUORUM_ENOTLEADER;
	for (unsigned i = 0; i < r->configuration.n; i++)
		if (r->configuration.servers[i].id == (raft_id)node + 1) {
			*match = r->leader_state.progress[i].match_index;
			return 0;
		}
	return -ENOENT;
}

int32_t quorum_node_id(const struct quorum *q)
{
	return q->node_id;
}

int quorum_is_leader(const struct quorum *q)
{
	return q->state == QUORUM_OPEN && !q->observer && raft_state((struct raft *)&q->raft) == RAFT_LEADER;
}

int quorum_error(const struct quorum *q, uint64_t *index)
{
	if (index)
		*index = q->fsm.failed ? q->fsm.failed_index : 0;
	return q->fsm.failed;
}

int quorum_disk_error(const struct quorum *q, const char **msg)
{
	if (msg)
		*msg = q->disk_err ? q->disk_msg : NULL;
	return q->disk_err;
}

static int leader_moved(const struct quorum *q)
{
	return leader_of(q) != q->told_leader || quorum_is_leader(q) != q->told_am_leader;
}

/* An entry appended to raft's log and not yet on disk: its write is in
 * flight (raft_uv, on libuv's threadpool). */
static int quorum_writing(struct quorum *q)
{
	if (q->observer)
		return 0;
	return q->raft.last_stored < raft_last_index(&q->raft);
}

int quorum_timeout_ms(const struct quorum *q)
{
	if (q->state == QUORUM_OPEN && leader_moved(q))
		return 0;
	if (q->state == QUORUM_CLOSE_ASKED) {
		/* waiting for a write: its completion wakes the loop's fd */
		int t = uv_backend_timeout(&q->loop);

		return quorum_writing((struct quorum *)q) ? (t < 0 || t > 10 ? 10 : t) : 0;
	}
	return uv_backend_timeout(&q->loop);
}

/* The loop is closed: unlock, tell, free. */
static void quorum_finish(struct quorum *q)
{
	void (*done)(void *) = q->close_done;
	void *arg = q->close_arg;

	if (q->lock_fd >= 0)
		close(q->lock_fd);
	free(q);
	if (done)
		done(arg);
}

static void quorum_close_handle(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

int quorum_poll(struct quorum *q)
{
	uint64_t before = q->fsm.applied + q->fsm.restored + q->ran;
	int alive, work = 0;

	uv_update_time(&q->loop);
	if (q->state == QUORUM_CLOSE_ASKED && (!quorum_writing(q) || uv_now(&q->loop) >= q->close_by)) {
		/* here, outside raft's own callbacks, and with no log write in
		 * flight: libraft 0.15's raft_close with an append still being
		 * written ends that append from inside the close, and its
		 * callback's release of the entries reads NULL in the log's
		 * reference table (SIGSEGV, seen under load). Pending proposals
		 * fail (QUORUM_ELOST), then quorum_raft_closed. */
		q->state = QUORUM_CLOSING;
		raft_close(&q->raft, quorum_raft_closed);
		work++;
	}
	alive = uv_run(&q->loop, UV_RUN_NOWAIT);
	if (q->state == QUORUM_DRAINING && !alive) {
		if (!q->backends_freed) {
			/* the transport's handles close in the next turns */
			quorum_free_backends(q);
			return work + 1;
		}
		if (uv_loop_close(&q->loop) == 0) {
			quorum_finish(q);
			return work + 1;
		}
		/* a handle left open (none is expected): close it, try again */
		uv_walk(&q->loop, quorum_close_handle, NULL);
		return work + 1;
	}
	/* raft unavailable while open: libraft's state after a fatal error
	 * (not seen with 0.15 on a failed disk; the wrapped writes are) */
	if (q->state == QUORUM_OPEN && !q->observer && raft_state(&q->raft) == RAFT_UNAVAILABLE && !q->disk_err) {
		quorum_disk_failed(q, RAFT_IOERR, raft_errmsg(&q->raft));
		work++;
	}
	if (q->state == QUORUM_OPEN && leader_moved(q)) {
		q->told_leader = leader_of(q);
		q->told_am_leader = quorum_is_leader(q);
		if (q->ops->leader_changed)
			q->ops->leader_changed(q->arg, q->told_leader, q->told_am_leader);
		work++;
	}
	return work + (int)(q->fsm.applied + q->fsm.restored + q->ran - before);
}

/* ------------------------------------------------ proposals */

static void quorum_applied(struct raft_apply *req, int status, void *result)
{
	struct quorum_prop *p = req->data;

	(void)result;
	p->q->ran++;
	if (quorum_disk_status(status))
		quorum_disk_failed(p->q, status, raft_errmsg(&p->q->raft));
	p->done(p->cookie, req->index, quorum_errno(status));
	free(p);
}

int quorum_propose(struct quorum *q, const void *buf, size_t len, quorum_done_fn done, void *cookie)
{
	struct raft_buffer b;
	struct quorum_prop *p;
	int rv;

	if (q->state != QUORUM_OPEN)
		return -ESHUTDOWN;
	if (len > QUORUM_RECORD_MAX)
		return -EMSGSIZE;
	if (q->observer || raft_state(&q->raft) != RAFT_LEADER)
		return -QUORUM_ENOTLEADER;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	/* framed: raft_uv needs lengths in multiples of 8 (quorum_fsm.h) */
	if (quorum_fsm_frame(buf, len, &b) < 0) {
		free(p);
		return -ENOMEM;
	}
	p->req.data = p;
	p->done = done;
	p->cookie = cookie;
	p->q = q;
	/* on 0 raft owns b.base (raft_malloc'd); else it is still ours */
	rv = raft_apply(&q->raft, &p->req, &b, 1, quorum_applied);
	if (rv != 0) {
		raft_free(b.base);
		free(p);
		return quorum_errno(rv);
	}
	return 0;
}

static void quorum_barrier_done(struct raft_barrier *req, int status)
{
	struct quorum_bar *p = req->data;

	p->q->ran++;
	if (quorum_disk_status(status))
		quorum_disk_failed(p->q, status, raft_errmsg(&p->q->raft));
	p->done(p->cookie, req->index, quorum_errno(status));
	free(p);
}

int quorum_barrier(struct quorum *q, quorum_done_fn done, void *cookie)
{
	struct quorum_bar *p;
	int rv;

	if (q->state != QUORUM_OPEN)
		return -ESHUTDOWN;
	if (q->observer || raft_state(&q->raft) != RAFT_LEADER)
		return -QUORUM_ENOTLEADER;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->req.data = p;
	p->done = done;
	p->cookie = cookie;
	p->q = q;
	rv = raft_barrier(&q->raft, &p->req, quorum_barrier_done);
	if (rv != 0) {
		free(p);
		return quorum_errno(rv);
	}
	return 0;
}

/* ------------------------------------------------ the controller channel */

struct uv_loop_s *quorum_loop(struct quorum *q)
{
	return q->state == QUORUM_OPEN ? &q->loop : NULL;
}

int quorum_channel_connect(struct quorum *q, const char *address,
			   void (*done)(void *arg, struct uv_stream_s *stream, int status), void *arg)
{
	if (q->state != QUORUM_OPEN)
		return -ESHUTDOWN;
	if (q->local)
		return -ENOTCONN;
	return qt_channel_connect(&q->transport, address, q->node_id, done, arg);
}

/* ------------------------------------------------ transfer, close */

static void quorum_transferred(struct raft_transfer *req)
{
	struct quorum *q = req->data;
	void (*done)(void *, int32_t) = q->transfer_done;

	q->transfer_done = NULL;
	q->ran++;
	if (done)
		done(q->transfer_cookie, leader_of(q));
}

int quorum_transfer(struct quorum *q, int32_t to, void (*done)(void *cookie, int32_t leader), void *cookie)
{
	int rv;

	if (q->state != QUORUM_OPEN)
		return -ESHUTDOWN;
	if (q->observer || raft_state(&q->raft) != RAFT_LEADER)
		return -QUORUM_ENOTLEADER;
	if (q->transfer_done)
		return -EBUSY;
	if (to >= 0 && to == q->node_id)
		return -EINVAL;
	memset(&q->transfer, 0, sizeof(q->transfer));
	q->transfer.data = q;
	q->transfer_done = done;
	q->transfer_cookie = cookie;
	rv = raft_transfer(&q->raft, &q->transfer, to < 0 ? 0 : (raft_id)to + 1, quorum_transferred);
	if (rv != 0) {
		q->transfer_done = NULL;
		return quorum_errno(rv);
	}
	return 0;
}

/* raft is closed (its files too): the loop drains in the next quorum_poll
 * turns, then the backends are freed (quorum_free_backends). */
static void quorum_raft_closed(struct raft *r)
{
	struct quorum *q = r->data;

	q->state = QUORUM_DRAINING;
}

/* An observer's transport closed: the loop drains (quorum_poll). */
static void observer_transport_closed(struct raft_uv_transport *t)
{
	struct quorum *q = (struct quorum *)((char *)t - offsetof(struct quorum, transport));

	q->state = QUORUM_DRAINING;
}

void quorum_close(struct quorum *q, void (*done)(void *arg), void *arg)
{
	if (q->state != QUORUM_OPEN)
		return;
	q->close_done = done;
	q->close_arg = arg;
	if (q->observer) {
		q->state = QUORUM_CLOSING;
		q->transport.close(&q->transport, observer_transport_closed);
		return;
	}
	/* no proposal is taken any more: what is being written finishes (a
	 * disk that never answers: close anyway after 5 s) */
	uv_update_time(&q->loop);
	q->close_by = uv_now(&q->loop) + 5000;
	q->state = QUORUM_CLOSE_ASKED;
}

/* ------------------------------------------------ an observer */

int quorum_is_observer(const struct quorum *q)
{
	return q->observer;
}

int quorum_state_snapshot(struct quorum *q, void **buf, size_t *len)
{
	return q->ops->snapshot(q->arg, buf, len);
}

void quorum_observe_leader(struct quorum *q, int32_t leader, uint64_t term)
{
	if (!q->observer)
		return;
	q->obs_leader = leader;
	if (term > q->obs_term)
		q->obs_term = term;
}

int quorum_observe_apply(struct quorum *q, uint64_t index, const void *buf, size_t len)
{
	if (!q->observer)
		return -EINVAL;
	if (index <= q->obs_applied)
		return 0;
	q->ops->apply(q->arg, index, buf, len);
	q->obs_applied = index;
	q->ran++;
	return 0;
}

int quorum_observe_restore(struct quorum *q, uint64_t index, const void *buf, size_t len)
{
	int rc;

	if (!q->observer)
		return -EINVAL;
	rc = q->ops->restore(q->arg, buf, len);
	if (rc < 0)
		return rc;
	q->obs_applied = index;
	if (index > q->obs_hw)
		q->obs_hw = index;
	q->ran++;
	return 0;
}

void quorum_observe_advance(struct quorum *q, uint64_t applied, uint64_t hw)
{
	if (!q->observer)
		return;
	if (applied > q->obs_applied)
		q->obs_applied = applied;
	if (hw > q->obs_hw)
		q->obs_hw = hw;
}
