/* control/quorum.h — the Raft quorum that keeps the metadata log (DESIGN 6):
 * the controller nodes (Kafka's controller.quorum.voters) agree on one
 * sequence of opaque records, and every node applies that sequence, in
 * order, to a state the layer above owns. One node is a quorum of one, on
 * the same code path. The consensus is Debian's libraft 0.15 (raft_uv: its
 * own log files; between the voters the controller port's transport,
 * control/quorum_transport.h, which also carries the controller channel;
 * on a libuv loop of its own);
 * A broker-only node is an observer instead (quorum_config.observer): no
 * raft, only the loop and the transport's connects; the layer above feeds
 * it the committed records it fetched (quorum_observe_*).
 * This module configures it, locks and checks its directory, adapts its
 * state machine to the callbacks below (control/quorum_fsm.c) and lets the
 * control thread drive its loop beside its own (quorum_fd,
 * quorum_timeout_ms, quorum_poll). It knows nothing of what the records
 * say: the layer above (the metadata log) gives it struct quorum_ops.
 *
 * Thread: the control thread (@thread ctl) for every function and every
 * callback; nothing here locks. libuv's threadpool (process-wide, started
 * by the first segment preparation) does some of raft_uv's file work, and
 * its threads inherit the signal mask of the thread that started it (see
 * the note in quorum.c).
 * Owns: its libuv loop (never the default loop), the raft_uv and the
 * controller port's transport, the struct raft, the flock on its directory, and every
 * pending proposal until its done callback ran.
 * Errors: 0 or -errno. libraft's codes are mapped at this edge:
 *   QUORUM_ENOTLEADER (-EREMOTE): this node is not the leader (RAFT_NOTLEADER);
 *     nothing was appended; propose on the leader (quorum_leader).
 *   QUORUM_ELOST (-ECONNABORTED): leadership was lost after the record was
 *     appended (RAFT_LEADERSHIPLOST, also at quorum_close): the outcome is
 *     unknown; the next leader may still commit it, and then every node,
 *     this one included, applies it.
 *   -ESHUTDOWN: the quorum is closing; -EMSGSIZE (RAFT_TOOBIG); -ENOMEM;
 *   -ENOSPC (RAFT_NOSPACE); -EBUSY (RAFT_BUSY, a transfer already running);
 *   -ENOENT (RAFT_NOTFOUND: no other voter); -EINVAL (RAFT_BADID, bad
 *   arguments); -EIO for anything else (RAFT_IOERR, RAFT_CORRUPT, ...).
 * quorum_open's errors: -EINVAL (the configuration, or a directory made for
 * another cluster id or voter set), -EBUSY (the directory is locked by
 * another open), -EIO/-ENOSPC/... from the disk; err names what is wrong.
 */
#ifndef SLUICE_QUORUM_H
#define SLUICE_QUORUM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct uv_stream_s;

#define QUORUM_ENOTLEADER EREMOTE
#define QUORUM_ELOST ECONNABORTED

/* The callbacks of the layer above (its state), all @thread ctl, all with
 * the arg given to quorum_open. They may run inside quorum_open (restore of
 * the last snapshot; a quorum of one applies its whole log at once) and
 * inside quorum_poll. Any of them, and any done callback, may call
 * quorum_close (it takes effect at the next quorum_poll); apply, snapshot
 * and restore must not propose (do it from a done callback or the next
 * turn). */
struct quorum_ops {
	/* Every committed record, in log order, on every node (the leader
	 * included), exactly once per open: after a restart the log is applied
	 * again from the last snapshot the state was restored from. index is
	 * raft's log index (increasing, with gaps where raft keeps entries of
	 * its own). It cannot fail: libraft would retry a failing entry
	 * forever, so a record that cannot be read must stop the node. buf is
	 * borrowed for the call. */
	void (*apply)(void *arg, uint64_t index, const void *buf, size_t len);
	/* The whole state, for raft to keep instead of the log before it:
	 * *buf malloc()ed, handed to the quorum (it frees it). The caller owns
	 * the format. 0, or -errno (raft tries again at the next threshold). */
	int (*snapshot)(void *arg, void **buf, size_t *len);
	/* Replace the state with one snapshot() produced (on this node or the
	 * leader's); buf borrowed for the call. -errno only for bytes it cannot
	 * read (at open: quorum_open fails with -EPROTO). */
	int (*restore)(void *arg, const void *buf, size_t len);
	/* The leader this node knows changed: its node id or -1 (none known),
	 * and whether it is this node. A new leader should quorum_barrier()
	 * before it serves reads of the state: libraft 0.15 appends no entry
	 * of its own on election, so entries of earlier terms are not known
	 * committed until it does. NULL: not told. */
	void (*leader_changed)(void *arg, int32_t leader, int am_leader);
};

struct quorum_voter {
	int32_t node_id;        /* Kafka node.id, >= 0 (raft's id is node_id + 1) */
	const char *host;       /* dotted-quad IPv4: libraft takes no names, no IPv6 */
	uint16_t port;          /* 0 only for a quorum of one: it opens no
				 * socket (nobody to talk to) */
};

/* Borrowed by quorum_open for the call only. Zero timeouts take the
 * defaults in brackets. */
struct qtls_sec;
struct qt_counters;
struct qt_sasl;

struct quorum_config {
	int32_t node_id;                /* this node: one of voters[] */
	const char *dir;                /* raft_uv's own directory (created; its
					 * parent must exist), e.g.
					 * <log.dirs>/__cluster_metadata-raft */
	const struct quorum_voter *voters;
	int nvoters;
	const char *cluster_id;         /* written in dir once, checked at every open */
	unsigned election_timeout_ms;   /* [1000] randomised 1x..2x by raft */
	unsigned heartbeat_timeout_ms;  /* [100] also raft's tick; < election */
	unsigned install_snapshot_timeout_ms; /* [5000] see quorum.c */
	unsigned connect_retry_ms;      /* [250] reconnect to a voter that is down */
	unsigned snapshot_threshold;    /* [1024] entries between snapshots */
	unsigned snapshot_trailing;     /* [2048] entries kept after a snapshot */
	int pre_vote;                   /* 1: a returning node cannot disrupt a leader */
	/* The controller channel's connections accepted on this voter's port
	 * (quorum_transport.h's channel_accept: the stream is the callee's),
	 * with channel_arg; NULL: refused. Not for a quorum of one. */
	void (*channel_accept)(void *arg, struct uv_stream_s *stream, int32_t node);
	void *channel_arg;
	/* 1: this node is an observer (Kafka's process.roles=broker), not a
	 * voter: node_id is none of voters[], there is no raft and no
	 * directory (dir is not read), only the loop and the transport's
	 * outbound connects (quorum_channel_connect). The layer above feeds
	 * the committed records it fetched from a voter (quorum_observe_*),
	 * and ops->apply and ops->restore run for them as on a voter. */
	int observer;
	/* An SSL controller listener's TLS (control/quorum_tls.h): the
	 * controller port's connections, both ways, on TLS. NULL: plaintext.
	 * Borrowed until the quorum is closed. */
	struct qtls_sec *tls;
	/* The controller port's counters (quorum_transport.h); borrowed until
	 * the quorum is closed. NULL: not counted. */
	struct qt_counters *counters;
	/* A SASL controller listener's login and users (quorum_transport.h):
	 * borrowed until the quorum is closed. NULL: none. */
	const struct qt_sasl *sasl;
};

struct quorum;

/* @thread ctl. Lock and check cfg->dir, start raft on a loop of its own:
 * bootstraps the voters' configuration when the directory is new, then
 * loads the log (restore, and for a quorum of one apply, run here). ops
 * and arg are borrowed until the close's done has run. 0 and *out, or
 * -errno with err (if errlen) naming what is wrong: a node id not among
 * the voters, a voter host that is not IPv4, a directory of another cluster
 * id or voter set (all -EINVAL), a directory another open holds (-EBUSY). */
int quorum_open(const struct quorum_config *cfg, const struct quorum_ops *ops, void *arg,
		struct quorum **out, char *err, size_t errlen);

/* @thread ctl. The control loop's part: poll() quorum_fd for POLLIN beside
 * the thread's own fds, for at most quorum_timeout_ms (-1: no deadline of
 * its own; 0: call quorum_poll now), then call quorum_poll, which runs the
 * loop once without blocking (its timers, disk completions and sockets,
 * so the callbacks above and the done callbacks) and tells leader_changed.
 * quorum_poll returns the callbacks it ran (0: the turn found nothing).
 * libraft's clock is libuv's (CLOCK_MONOTONIC, read by quorum_poll), not
 * the clock a test gives ctl_poll. */
int quorum_fd(const struct quorum *q);
/* @thread ctl. The loop itself, for other connections of the control
 * thread that it drives the same way (control/peer_kafka.h); NULL unless
 * open. Whatever is on it must be closed before quorum_close. */
struct uv_loop_s *quorum_loop(struct quorum *q);
int quorum_timeout_ms(const struct quorum *q);
int quorum_poll(struct quorum *q);

/* done(cookie, index, err): index is the record's log index, err 0 once it
 * is committed and applied on this node (apply has run for it), or -errno. */
typedef void (*quorum_done_fn)(void *cookie, uint64_t index, int err);

/* @thread ctl. Propose one record (copied, and framed: raft_uv needs
 * entries in multiples of 8 bytes, see quorum_fsm.h; apply gets the bytes
 * given here): appended on the leader, replicated, and once a majority has
 * it, applied on every node; then done runs here. 0 (done will run
 * exactly once, at the latest during quorum_close), or -errno and done
 * never runs: QUORUM_ENOTLEADER on a follower, -ESHUTDOWN once closing,
 * -EMSGSIZE over 1 MiB, -ENOMEM. */
int quorum_propose(struct quorum *q, const void *buf, size_t len, quorum_done_fn done,
		   void *cookie);
/* @thread ctl. A barrier entry: done (index of the barrier) runs once every
 * entry before it, of any term, is committed and applied here. Same
 * errors as quorum_propose. */
int quorum_barrier(struct quorum *q, quorum_done_fn done, void *cookie);

/* @thread ctl. The leader this node knows (node id), or -1. */
int32_t quorum_leader(const struct quorum *q);
/* What DescribeQuorum and the metrics show. Raft's log indexes start at
 * 1, so an index is also a count of entries: commit_index is Kafka's high
 * watermark, last_index this node's log end offset. */
#define QUORUM_MAX_VOTERS 64
struct quorum_view {
	int32_t leader;                 /* node id, -1: none known */
	int am_leader;
	uint64_t term;                  /* Kafka's leader epoch of the quorum */
	uint64_t commit_index, last_applied, last_index;
	int nvoters;
	struct {
		int32_t node_id;
		int64_t log_end;        /* -1: unknown (libraft 0.15 keeps the
					 * leader's view of followers private) */
	} voters[QUORUM_MAX_VOTERS];
};
/* @thread ctl. */
void quorum_describe(const struct quorum *q, struct quorum_view *st);

/* @thread ctl. The index of the last entry of this node's log (0: empty). */
uint64_t quorum_last_index(const struct quorum *q);
/* @thread ctl. The index of the last entry this node applied (0: none):
 * every record up to it went through ops->apply or a snapshot's
 * ops->restore (a voter's InstallSnapshot, an observer's fetch). */
uint64_t quorum_last_applied(const struct quorum *q);
/* @thread ctl. On the leader: the highest index it believes voter `node`
 * stored (raft's match index). 0, QUORUM_ENOTLEADER, -ENOENT (no such
 * voter). */
int quorum_follower_match(const struct quorum *q, int32_t node, uint64_t *match);
/* @thread ctl. This node's id and whether it is the leader. */
int32_t quorum_node_id(const struct quorum *q);
int quorum_is_leader(const struct quorum *q);

/* @thread ctl. 0, or -EPROTO once a committed record's frame did not parse
 * on this node (written by another version, or damaged past raft's CRC):
 * apply is not called for it nor for anything after it (rather than skip
 * a record the other nodes applied); *index (if not NULL) is its index.
 * The caller stops the node. */
int quorum_error(const struct quorum *q, uint64_t *index);

/* @thread ctl. 0, or -EIO (-ENOSPC for a full disk) once raft could not
 * write this node's log, term or vote: raft_uv's append, set_term,
 * set_vote or truncate (wrapped here) or a proposal or barrier failed
 * with RAFT_IOERR, RAFT_NOSPACE or RAFT_CORRUPT, or raft turned
 * unavailable while open. *msg (if not NULL): libraft's message, what
 * failed. This node can no longer take the quorum's records (its metadata
 * goes stale): the caller stops the node. */
int quorum_disk_error(const struct quorum *q, const char **msg);

/* @thread any. What a directory says it belongs to (the identity file
 * quorum_open writes into it): 0 with its cluster id and voter set (as
 * quorum_voters_text writes it), -ENOENT for a directory without one
 * (new), -EPROTO for a file this version cannot read, -errno. */
int quorum_identity_read(const char *dir, char *cluster_id, size_t cidcap, char *voters, size_t vcap);
/* @thread any. cfg's voter set as the identity file keeps it:
 * "0@127.0.0.1:9093,1@..." in node id order. */
void quorum_voters_text(const struct quorum_config *cfg, char *buf, size_t cap);
/* @thread any. Whether two voter sets so written are both one voter, the
 * same node id (its address may differ: a quorum of one that opens its
 * controller port now, or no longer, on the same directory, whose
 * identity file is then rewritten). */
int quorum_same_lone_voter(const char *a, const char *b);

/* @thread ctl. Connect to another voter's controller port ("host:port")
 * for the controller channel: done(arg, stream, 0) with the connected
 * stream (raft_malloc'ed, the caller's: uv_close it, raft_free it in the
 * close callback), or done(arg, NULL, -errno); it runs exactly once, at the
 * latest while the quorum closes (-ECANCELED). 0, or -errno and done never
 * runs: -ESHUTDOWN once closing, -ENOTCONN for a quorum of one. */
int quorum_channel_connect(struct quorum *q, const char *address,
			   void (*done)(void *arg, struct uv_stream_s *stream, int status), void *arg);

/* @thread ctl. An observer's (quorum_config.observer) view of the quorum,
 * from what a voter answered: the leader it names (-1: none known) and its
 * term; quorum_poll tells leader_changed when it moved. */
void quorum_observe_leader(struct quorum *q, int32_t leader, uint64_t term);
/* @thread ctl. An observer applies a committed record fetched from a
 * voter: ops->apply(index, buf, len) if index is past what it applied
 * (else nothing). -EINVAL on a voter. */
int quorum_observe_apply(struct quorum *q, uint64_t index, const void *buf, size_t len);
/* @thread ctl. An observer replaces its state with a voter's snapshot
 * taken at index (ops->restore): 0, or restore's -errno. */
int quorum_observe_restore(struct quorum *q, uint64_t index, const void *buf, size_t len);
/* @thread ctl. An observer has every record up to `applied` (the voter
 * said nothing else is in between), and the voter had applied up to `hw`
 * (quorum_describe's commit_index). Neither moves back. */
void quorum_observe_advance(struct quorum *q, uint64_t applied, uint64_t hw);
/* @thread ctl. Whether q is an observer. */
int quorum_is_observer(const struct quorum *q);
/* @thread ctl. The state as it is now (ops->snapshot: *buf malloc()ed,
 * the caller's), at quorum_describe's last_applied: what a voter sends an
 * observer that asks for records it no longer keeps. 0 or -errno. */
int quorum_state_snapshot(struct quorum *q, void **buf, size_t *len);

/* @thread ctl. Controlled shutdown of a leader: hand leadership to voter
 * `to` (node id), or to the most up-to-date other voter with to = -1, before
 * closing. done(cookie, leader) runs once the target leads or an election
 * timeout has passed, with the leader this node then knows (-1: none yet).
 * 0, QUORUM_ENOTLEADER, -EBUSY (a transfer is running), -ENOENT (no
 * other voter), -EINVAL (to is not another voter), -ESHUTDOWN. */
int quorum_transfer(struct quorum *q, int32_t to, void (*done)(void *cookie, int32_t leader),
		    void *cookie);

/* @thread ctl. Close: raft stops (pending proposals' done run with
 * QUORUM_ELOST, a transfer's done runs), its files are closed, then its
 * loop; then done(arg) runs, from quorum_poll, and q is freed right after
 * it returns: the caller keeps calling quorum_poll until done ran and
 * never touches q after. The directory is unlocked before done. */
void quorum_close(struct quorum *q, void (*done)(void *arg), void *arg);

#endif
