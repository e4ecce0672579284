/* control/quorum_tls.h — TLS on the controller port (an SSL controller
 * listener: controller.listener.names naming an SSL listener in
 * listener.security.protocol.map). libraft reads and writes the streams
 * the transport (control/quorum_transport.c) gives it with libuv itself,
 * so TLS cannot sit inside those streams: each TCP connection gets a
 * tunnel, a socketpair whose inner end is the plaintext stream handed on
 * (to libraft, or to the controller channel), while the tunnel pumps the
 * outer end through a tls_conn (dataplane/tls.h, OpenSSL on memory BIOs)
 * to and from the TCP socket. Accepted connections are the server side
 * with ssl.client.auth=required (mutual TLS, as Kafka's controller
 * listener); connects are the client side, the other controller's
 * certificate checked against the truststore and the address it was
 * reached at (as the inter-broker client does).
 *
 * Nothing blocks: the handshake goes on as bytes come (libuv reads),
 * one write in flight per direction, and a direction's reading stops
 * while its write is in flight (that is the flow control).
 *
 * Thread: struct qtls_sec is made by main at start; its two pointers
 * fixed after, the contexts behind them swapped in place by
 * tls_server_reload / tls_client_reload (listeners_tls_reload: SIGHUP on
 * main, POST /v1/tls/reload on ctl), which tunnels started after take and
 * open ones do not notice (each tls_conn holds its own); its counters are written and read by the control
 * thread only (the quorum's libuv loop and the /metrics scrape both run
 * there). A struct qtls belongs to the control thread's quorum loop,
 * all of it (@thread ctl).
 * Owns: a tunnel its TCP handle (from qtls_start on), the outer end, its
 * tls_conn; not the inner end, which is its caller's.
 * Errors: -errno.
 */
#ifndef SLUICE_QUORUM_TLS_H
#define SLUICE_QUORUM_TLS_H

#include <stdint.h>

#include <uv.h>

struct tls_server;
struct tls_client;
struct tls_conn;
struct qtls;

/* The controller listener's TLS, made by main (sluiced.c) when it is SSL. */
struct qtls_sec {
	struct tls_server *server;      /* accepts: ssl.client.auth=required */
	struct tls_client *client;      /* connects: truststore and keystore */
	/* @thread ctl: handshakes over; connections that failed or ended
	 * before theirs was (a certificate refused, plaintext, a close) */
	uint64_t handshakes, failures;
	uint64_t logged_ms[2];          /* uv_now of the last failure logged:
					 * [0] accepted, [1] made */
	uint64_t unlogged[2];           /* failures not logged since, the same */
};

/* ready(arg, 0): the handshake is over (for a connect: the caller may
 * now write to the inner end); ready(arg, -EPROTO): it failed (logged,
 * counted) and the tunnel closes. Runs at most once. */
typedef void (*qtls_ready_fn)(void *arg, int status);
/* The tunnel closed and is freed after this returns. */
typedef void (*qtls_closed_fn)(void *arg, struct qtls *tun);

#define QTLS_PLAIN 16384

struct qtls {
	struct qtls *prev, *next;       /* the transport's list of tunnels */
	struct qtls_sec *sec;           /* borrowed: main's, outlives the loop */
	uv_tcp_t *tcp;                  /* raft_malloc'ed, the tunnel's */
	uv_pipe_t outer;
	struct tls_conn *tls;
	char peer[96];                  /* "accepted from host:port" / "to host:port" */
	int client;                     /* a connection this node made */
	int up;                         /* the handshake is over */
	int closing, closes;            /* uv_close callbacks to come */
	int tcp_eof;                    /* the peer is done: close once drained */
	int tcp_writing, outer_writing; /* one write in flight each */
	int tcp_reading, outer_reading;
	uint32_t tcp_wlen;              /* ciphertext in flight (tls_conn_tx's) */
	uv_write_t tcp_wr, outer_wr;
	qtls_ready_fn ready;
	void *ready_arg;
	qtls_closed_fn closed;
	void *closed_arg;
	uint8_t plain[QTLS_PLAIN];      /* decrypted, being written to outer */
	uint8_t in[QTLS_PLAIN];         /* plaintext read from outer */
};

/* @thread ctl. Start a tunnel on tcp (connected, or accepted; raft_malloc'ed,
 * the tunnel's on success: it closes it and raft_frees it): host NULL
 * for the server side, else the client side checking the certificate
 * names host. peer names the other end in logs. *inner: the plaintext
 * stream (a raft_malloc'ed uv_pipe_t, initialised on loop), the caller's
 * (uv_close, then raft_free). ready may be NULL. 0 and *out, or -errno
 * (tcp stays the caller's). Nothing runs until qtls_go. */
int qtls_start(struct qtls_sec *sec, uv_loop_t *loop, uv_tcp_t *tcp, const char *host, const char *peer,
	       qtls_ready_fn ready, void *ready_arg, qtls_closed_fn closed, void *closed_arg, uv_stream_t **inner,
	       struct qtls **out);
/* @thread ctl. Start the handshake (ready may run inside). */
void qtls_go(struct qtls *tun);
/* @thread ctl. ready will not run (its arg is going away). */
void qtls_detach(struct qtls *tun);
/* @thread ctl. Close the tunnel (ready, if still to run, is told
 * -ECANCELED); closed runs once its handles are closed. */
void qtls_abort(struct qtls *tun);

#endif
