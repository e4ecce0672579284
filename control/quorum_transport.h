/* control/quorum_transport.h — the controller port: one TCP listener per
 * voter that carries both libraft's connections and the controller
 * channel's (control/ctl_channel.c), told apart by the first u64 a
 * connecting side writes:
 *
 *   raft:    u64 1 (raft_uv_tcp's protocol), u64 raft id, u64 address
 *            length (padded to 8), the address (NUL-ended, padded): the
 *            handshake raft_uv_tcp writes, so libraft's own peers and ours
 *            speak the same bytes;
 *   channel: u64 QT_CHANNEL_MAGIC, u64 the connecting node's node.id.
 *
 * All u64 little-endian (libraft's byteFlip64). The accepting side reads
 * exactly the handshake's bytes (nothing past them, which belong to the
 * stream's new owner), then hands a raft connection to libraft's accept
 * callback (libraft owns the stream from then on and frees it with
 * raft_free: streams are raft_malloc'ed here) and a channel connection
 * to qt_ops.channel_accept. Connecting resolves host names (uv_getaddrinfo
 * on the loop's threadpool), which raft_uv_tcp 0.15 does not.
 *
 * With qt_ops.sec (an SSL controller listener) every connection, both
 * ways, is a TLS tunnel first (control/quorum_tls.h): the handshake above
 * and everything after it travel inside, and the stream handed over is
 * the tunnel's plaintext end. A connect is done once its TLS handshake is.
 *
 * Thread: the control thread (@thread ctl), on the quorum's libuv loop:
 * every function and callback. Owns: its listener, the connections still in
 * their handshake, the connects in flight, the TLS tunnels (until they
 * close; aborted when the transport closes); not the streams it handed over.
 * Errors: libraft's codes (RAFT_NOMEM, RAFT_IOERR, RAFT_NOCONNECTION,
 * RAFT_CANCELED) from the raft_uv_transport methods; -errno from qt_*.
 */
#ifndef SLUICE_QUORUM_TRANSPORT_H
#define SLUICE_QUORUM_TRANSPORT_H

#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "dataplane/peer_session.h"
#include "dataplane/sasl.h"

struct qtls_sec;

#define QT_RAFT_PROTOCOL 1ull
/* A connection, accepted or made, whose set-up (TLS handshake, then the
 * handshake above) is not over this long after the TCP accept (or the
 * start of the connect) is closed and counted: a peer that connects and
 * sends nothing, or stalls mid-handshake, holds no socket for longer.
 * Kafka's clients bound the same with socket.connection.setup.timeout.ms
 * (10 s); its controller listener has no server-side equivalent. Checked
 * by a sweep once a second (so closed between 10 and 11 s). */
#define QT_SETUP_DEADLINE_MS 10000u
#define QT_SWEEP_MS 1000u
#define QT_CHANNEL_MAGIC 0x314e4843434c53ull   /* "SLCCHN1" little-endian */

/* The controller port's counters, for the metrics (control/metrics.c).
 * Main's (it outlives every quorum), written and read by the control
 * thread only (the quorum's loop and the /metrics scrape both run there). */
struct qt_counters {
	uint64_t timeouts[2];           /* closed at QT_SETUP_DEADLINE_MS: [0] accepted, [1] made */
	uint64_t logged_ms;             /* uv_now of the last timeout logged (one per 5 s) */
	uint64_t unlogged;              /* timeouts not logged since */
	/* a SASL controller listener: authentications [0] accepted, [1]
	 * made; [.][0] ok, [.][1] failed */
	uint64_t sasl[2][2];
	uint64_t sasl_logged_ms, sasl_unlogged;   /* as logged_ms, unlogged: failures */
	/* reloads of its JAAS config (listeners_controller_sasl_reload):
	 * [0] taken, [1] refused (the previous login and users stay) */
	uint64_t sasl_reloads[2];
	/* connections accepted closed because their session's lifetime
	 * (qt_sasl.lifetime_ms) was over; logged as the timeouts */
	uint64_t sessions_ended;
	uint64_t ended_logged_ms, ended_unlogged;
};

/* A SASL controller listener (SASL_PLAINTEXT, SASL_SSL): PLAIN, Kafka's
 * framing (SaslHandshake v1, SaslAuthenticate v2, the generated codec),
 * after the TLS handshake (SASL_SSL) or the TCP connect, before the
 * handshake above: a connection made sends this node's login and waits
 * for the answer before anything else; an accepted one is read for
 * nothing but those two requests until they authenticated a user of
 * `users`. A failed one is answered SASL_AUTHENTICATION_FAILED, counted,
 * logged with the peer's address (never the password) and closed
 * fail_delay_ms later.
 *
 * With lifetime_ms (connections.max.reauth.ms), an accepted connection's
 * session ends that long after its authentication: libraft (or the
 * channel) owns the stream by then, so there is no re-authentication
 * inside it; the sweep shuts the socket down (both ways) once the session
 * is over, the owner sees the end of its stream and closes it, and the
 * other side connects again, authenticating with its login of the time.
 * The transport keeps the socket's descriptor and inode, never a pointer
 * into the stream it handed over: a descriptor that no longer names that
 * socket was closed by its owner, and is forgotten.
 *
 * Made by main (control/listeners.c); once the threads run, the control
 * thread's: login and users are replaced on a reload
 * (listeners_controller_sasl_reload), between two turns of the quorum's
 * loop, so the next exchange, either way, uses the new ones. */
struct qt_sasl {
	struct peer_sec login;          /* this node's: sasl 1, tls 0 (the tunnel's), PLAIN */
	struct sasl_plain_users users;  /* accepted: user_<name>="<password>" */
	unsigned fail_delay_ms;         /* connection.failed.authentication.delay.ms */
	int64_t lifetime_ms;            /* sessions accepted: 0 never end */
};

struct qt_ops {
	/* A channel connection whose handshake was read: stream is
	 * raft_malloc'ed, reading stopped; the callee owns it (uv_close it,
	 * then raft_free it in the close callback). node: the peer's node.id.
	 * NULL: channel connections are refused (closed). */
	void (*channel_accept)(void *arg, uv_stream_t *stream, int32_t node);
	void *arg;
	/* An SSL controller listener (control/quorum_tls.h): every connection,
	 * accepted or made, runs TLS under the handshake above, and what is
	 * handed over is the tunnel's plaintext end (a uv_pipe_t). NULL:
	 * plaintext. Borrowed: main's, outlives the transport. */
	struct qtls_sec *sec;
	/* Borrowed: main's, outlives the transport. NULL: not counted. */
	struct qt_counters *counters;
	/* A SASL controller listener, borrowed as sec. NULL: none. */
	const struct qt_sasl *sasl;
};

/* @thread ctl. Fill t (raft_uv_init's transport) for loop; ops borrowed
 * until qt_fini. 0 or RAFT_NOMEM. */
int qt_init(struct raft_uv_transport *t, uv_loop_t *loop, const struct qt_ops *ops);
/* @thread ctl. Free what qt_init made, once the transport's close callback
 * ran (raft_uv_close) or it was never started. */
void qt_fini(struct raft_uv_transport *t);

/* @thread ctl. Why the listen raft_start asked for failed: a negative
 * errno (-EADDRINUSE: another process holds the port), or 0. raft_start
 * says only RAFT_IOERR and keeps the transport's message to itself. */
int qt_listen_error(const struct raft_uv_transport *t);

/* done(arg, stream, status): status 0 and a connected stream
 * (raft_malloc'ed, the caller's: uv_close, then raft_free) whose
 * handshake was written; or a negative libuv code and NULL (-ECANCELED
 * when the transport closed meanwhile). */
typedef void (*qt_connect_fn)(void *arg, uv_stream_t *stream, int status);
/* @thread ctl. Connect to "host:port" for the controller channel, as node
 * `from`. 0 (done runs exactly once, at the latest when the transport
 * closes) or -errno (-ESHUTDOWN once closing; done never runs). */
int qt_channel_connect(struct raft_uv_transport *t, const char *address, int32_t from, qt_connect_fn done,
		       void *arg);

/* "host:port" (the last ':' splits; [v6]:port is not taken) into host and
 * port text. 0 or -EINVAL. */
int qt_split(const char *address, char *host, size_t hostcap, char *port, size_t portcap);

#endif
