/* control/sluicectl.h — the operator's CLI (build/sluicectl): a small Kafka
 * client over one blocking TCP socket per broker, speaking the repository's
 * own generated codec (dataplane/kafka/), plus table/JSON output and the
 * command table that drives parsing, --help and bash completion.
 *
 * Thread: the program's only thread (@thread main).
 * Owns: struct kclient owns its socket and every frame and arena it has
 * decoded into (freed by kclient_release or kclient_close); decoded
 * responses borrow them, so they live until one of those calls.
 * Errors: functions return 0 / a count or -errno (STYLE 5); Kafka error
 * codes stay int16 and are named only when printed (kerr_name). Commands
 * return the process exit status: 0 success, 1 a Kafka error or a refusal
 * (unreachable broker, a safety check), 2 bad usage.
 */
#ifndef SLUICE_SLUICECTL_H
#define SLUICE_SLUICECTL_H

#include "control/record_walk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka_errors.h"

#define EXIT_KAFKA 1
#define EXIT_USAGE 2

/* ---- security (control/sluicectl_sec.c) ------------------------------- */

enum { SEC_PLAINTEXT, SEC_SSL, SEC_SASL_PLAINTEXT, SEC_SASL_SSL };

/* What --command-config says (Kafka's client properties). The password
 * stays in memory only for the run and is wiped by ctl_sec_fini. */
struct ctl_sec {
	int protocol;               /* SEC_* (security.protocol; default PLAINTEXT) */
	int mech;                   /* SASL_MECH_* (sasl.mechanism) */
	char user[256];             /* sasl.jaas.config's username=, or sasl.username */
	char password[1024];
	bool have_password;
	char token[4100];           /* admin.token or --admin-token-file: a bearer token for the admin endpoint */
	bool verify_host;           /* ssl.endpoint.identification.algorithm=https (the default) */
	void *ssl_ctx;              /* SSL_CTX from the ssl.* keys (SSL, SASL_SSL, an https admin endpoint) */
	const char *file;           /* the file, for messages */
};

/* @thread main. Read a --command-config file: 0, or -errno with err
 * naming the file, the line and the key (an unknown key, a bad value, a
 * certificate that does not load). */
int ctl_sec_load(struct ctl_sec *s, const char *file, char *err, size_t errlen);
void ctl_sec_fini(struct ctl_sec *s);
/* Without --command-config: a TLS context trusting the system's CAs
 * (for an https admin endpoint); nothing when there is one. */
void ctl_sec_default_ctx(struct ctl_sec *s);
const char *ctl_sec_protocol(const struct ctl_sec *s);
/* TLS over the connected socket fd (a blocking handshake of at most
 * timeout_ms): *ssl (an SSL *) or -errno with err saying why (an
 * untrusted certificate, a host name that does not match). */
int ctl_sec_tls_connect(const struct ctl_sec *s, int fd, const char *host, int timeout_ms, void **ssl, char *err,
			size_t errlen);
void ctl_sec_tls_close(void *ssl);
/* After an SSL_read/SSL_write returned rc <= 0: wait for what it wants
 * (0), or -ECONNRESET (closed), -EPROTO (a TLS failure), -ETIMEDOUT. */
int ctl_sec_wait(void *ssl, int fd, int rc, int64_t deadline);
/* base64("user:password") for HTTP Basic into out: 1, 0 when the file
 * gave no credentials, -EINVAL when out is too small. */
/* @thread main. --admin-token-file: the file's first line, trimmed, as
 * the admin endpoint's bearer token: 0, or -errno with err naming the file. */
int ctl_sec_token_file(struct ctl_sec *s, const char *file, char *err, size_t errlen);
int ctl_sec_basic(const struct ctl_sec *s, char *out, size_t cap);

/* ---- client (control/sluicectl_client.c) ------------------------------ */

#define KCLIENT_MAX_KEY 64

struct kclient_mem;

struct kclient {
	int fd;                     /* -1 when closed */
	const struct ctl_sec *sec;  /* borrowed (the ctl's); NULL: plaintext */
	void *ssl;                  /* the SSL over fd (SSL, SASL_SSL), else NULL */
	char host[256];
	int port;
	int timeout_ms;             /* per request (send and receive) */
	int32_t corr;
	int16_t vmin[KCLIENT_MAX_KEY];  /* the broker's ApiVersions; -1: not served */
	int16_t vmax[KCLIENT_MAX_KEY];
	struct kclient_mem *mem;    /* frames and arenas of decoded responses */
	char err[512];              /* what went wrong, for the operator */
	const char *waiting;        /* set around a long request: its wait shows on a terminal */
};

/* @thread main. Connect to host:port (TLS and SASL as sec says; NULL:
 * plaintext) and ask ApiVersions. 0 or -errno (k->err says what
 * happened; -EACCES: the broker refused the credentials). */
int kclient_open(struct kclient *k, const char *host, int port, int timeout_ms, const struct ctl_sec *sec);

/* @thread main. The highest version of api_key that both the codec and
 * the broker serve, capped at want_max; -ENOTSUP if none. */
int kclient_version(const struct kclient *k, int16_t api_key, int16_t want_max);

/* @thread main. Send body as api_key/version and decode the answer into
 * *resp (borrowing k's memory until kclient_release). With no_response
 * (Produce acks=0) nothing is read and *resp is NULL. 0 or -errno. */
int kclient_call(struct kclient *k, int16_t api_key, int16_t version, const void *body,
		 bool no_response, void **resp);

/* @thread main. Free every decoded response (they must not be used after). */
void kclient_release(struct kclient *k);
/* Free only what was decoded after mark (mark = k->mem before the calls). */
void kclient_release_to(struct kclient *k, struct kclient_mem *mark);
void kclient_close(struct kclient *k);

/* ---- output (control/sluicectl_out.c) --------------------------------- */

/* A table of strings, printed aligned to fit in 80 columns (the widest
 * column is cut with '~' when it must be). Cells are copied. */
struct table {
	int ncols;
	const char **heads;
	bool *right;                /* right-align (numbers) */
	char **cells;               /* rows * ncols */
	int rows, cap;
};

void table_init(struct table *t, int ncols, const char **heads);
void table_right(struct table *t, int col);
void table_add(struct table *t, ...);   /* ncols const char * */
/* Order rows by the first column, then the second as a number. */
void table_sort(struct table *t);
void table_print(struct table *t);
void table_fini(struct table *t);

/* A streaming JSON writer to stdout: commas and nesting are tracked. */
void json_obj_begin(const char *key);   /* key NULL inside arrays / at top */
void json_obj_end(void);
void json_arr_begin(const char *key);
void json_arr_end(void);
void json_str(const char *key, const char *v);   /* v NULL: null */
void json_strn(const char *key, const char *v, int32_t len);   /* len -1: null */
void json_int(const char *key, int64_t v);
void json_null(const char *key);
/* v, or null when v < 0 (not known) */
void json_int_or_null(const char *key, int64_t v);
void json_num(const char *key, double v);      /* NaN, inf: null */
void json_bool(const char *key, bool v);
void json_end(void);                    /* final newline */

/* snprintf into a rotating static buffer (for table cells). */
const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* NUL-terminated copy of a wire string into a rotating buffer. */
const char *kstr(struct kafka_str s);
/* Write text to f from column col, wrapped at 80 columns, later lines
 * indented to column indent; ends the line. */
void wrap(FILE *f, int col, int indent, const char *text);
/* Progress on stderr (only when it is a terminal): "label done/total". */
void progress(const char *label, int64_t done, int64_t total);

/* ---- admin endpoint (control/sluicectl_admin.c) ------------------------ */

struct ctl;

/* An HTTP answer: status and body (NUL-terminated, malloc'd; free with
 * http_reply_fini); err says what went wrong when http_get fails. */
struct http_reply {
	int status;
	char *body;
	size_t len;
	char err[256];
};

/* @thread main. GET path from host:port over one socket (HTTP/1.1,
 * Connection: close; auth: an Authorization header's value ("Basic
 * base64(user:password)", "Bearer TOKEN"), or NULL; tls: HTTPS with its context, or NULL), all of it
 * within timeout_ms. 0 (any status; r filled)
 * or -errno (r->err says why). */
int http_get(const char *host, int port, const char *path, const char *auth, const struct ctl_sec *tls,
	     int timeout_ms, struct http_reply *r);
void http_reply_fini(struct http_reply *r);
/* Flat lookups of "key": value in the JSON text [s, end) (the endpoint's
 * answers are flat objects); false when absent or not of that type. */
bool json_get_i64(const char *s, const char *end, const char *key, int64_t *out);
bool json_get_str(const char *s, const char *end, const char *key, char *out, size_t cap);

/* @thread main. GET path from the admin endpoint: the HTTP status (200,
 * 404, 503) or -errno when it cannot be reached or is not the endpoint.
 * The first failure prints one note on stderr (naming the address, what
 * stays `unknown`, and --admin / SLUICE_ADMIN) and no more requests are
 * tried. Never exits (but resolving the default address asks the bootstrap
 * broker, which exits 1 when none answers). r must be http_reply_fini'd. */
int ctl_admin_get(struct ctl *c, const char *path, const char *unknown, struct http_reply *r);
/* The node id the endpoint speaks for (its node.id from /v1/config), -1
 * when unknown or unreachable. */
int32_t ctl_admin_node(struct ctl *c, const char *unknown);
/* @thread main. GET path from broker node's admin endpoint: with the
 * default address (no --admin nor $SLUICE_ADMIN) every broker's, at the
 * admin.listen it reports of itself (DescribeConfigs of its BROKER
 * resource, asked of it); with an address given, only that endpoint's
 * node (-ENOENT for the others). The bootstrap broker's endpoint as
 * ctl_admin_get; another broker's that cannot be reached is -errno (one
 * note on stderr for all of them) and not asked again. */
int ctl_admin_get_node(struct ctl *c, int32_t node, const char *path, const char *unknown, struct http_reply *r);
/* @thread main. Where broker node's admin endpoint is, once a
 * ctl_admin_get_node (or ctl_admin_get, for the bootstrap broker's) found
 * it answering: 0 with host, port and tls (HTTPS) filled, -ENOENT when it
 * is not known or did not answer. For asking it again with http_get while
 * it restarts (the rolling restart), which ctl_admin_get_node would give
 * up on after the first failure. ctl_admin_auth: the Authorization
 * header's value for it (NULL: none; borrowed until the next call). */
int ctl_admin_addr(struct ctl *c, int32_t node, char *host, size_t cap, int *port, bool *tls);
const char *ctl_admin_auth(struct ctl *c);

/* ---- Kafka errors (control/sluicectl_errors.c) ------------------------ */

const char *kerr_name(int16_t code);
const char *kerr_advice(int16_t code);

/* ---- commands (control/sluicectl.c and friends) ----------------------- */

struct opt_spec {
	const char *name;           /* long name, without "--" */
	char shrt;                  /* one-letter form, or 0 */
	const char *arg;            /* argument name; NULL for a flag */
	const char *help;
};

struct args {
	int npos;
	char **pos;
	int nopt;
	const struct opt_spec **spec;   /* per given option, its spec */
	char **val;                     /* its value ("" for flags) */
};

/* The last value given for --name, or NULL. */
const char *opt_get(const struct args *a, const char *name);
bool opt_has(const struct args *a, const char *name);
/* Every value given for a repeatable option; returns the count. */
int opt_all(const struct args *a, const char *name, const char **out, int cap);

struct ctl {
	const char *bootstrap;      /* HOST:PORT,... */
	bool bootstrap_given;       /* from -b or $SLUICE_BROKERS, not the default */
	bool json;
	int timeout_ms;
	const char *cmd;            /* "topic describe", for messages */
	struct kclient boot;        /* fd -1 until first use */
	struct kclient nodes[8];    /* other brokers (leaders, coordinators) */
	int32_t node_ids[8];
	int nnodes;
	char node_err[512];         /* why the last ctl_node_try failed */
	/* The broker's HTTP admin endpoint (sluicectl_admin.c): --admin, else
	 * $SLUICE_ADMIN, else the bootstrap broker's host, port 9644. */
	const char *admin;          /* HOST:PORT as given, or NULL */
	const char *admin_src;      /* "--admin" or "SLUICE_ADMIN" */
	bool admin_tls;             /* https:// given, or the broker's admin.ssl.enabled */
	char admin_host[256];
	int admin_port;             /* 0 until resolved */
	bool admin_down;            /* a request failed: no more are tried */
	bool admin_noted;           /* the note on stderr was printed */
	bool admin_node_known;
	int32_t admin_node;         /* its node.id (/v1/config); -1 unknown */
	char admin_err[600];
	bool admin_default;         /* the address was the bootstrap broker's admin.listen */
	struct {                    /* other brokers' endpoints (default address only) */
		int32_t id;
		char host[256];
		int port;           /* 0: it reports none */
		bool down;
		bool tls;           /* its admin.ssl.enabled */
	} admin_others[8];
	int nadmin_others;
	bool admin_others_noted;
	bool admin_auth_refused;    /* the endpoint answered 401 or 403 */
	struct ctl_sec sec;         /* --command-config (zero: plaintext, no credentials) */
};

struct cmd {
	const char *noun, *verb, *synopsis, *summary;
	const struct opt_spec *opts;    /* terminated by {NULL} */
	const char *examples;
	int (*run)(struct ctl *c, const struct args *a);
};

/* @thread main. The bootstrap connection (connects on first use; exits 1
 * with the reason and what to do when no broker answers). */
struct kclient *ctl_client(struct ctl *c);
/* The connection to broker node_id at host:port (the bootstrap one when
 * the address is the same). Exits 1 when it cannot connect. */
struct kclient *ctl_node(struct ctl *c, int32_t node_id, struct kafka_str host, int32_t port);
/* The same, NULL instead of exiting when it cannot connect (the reason
 * is in the returned slot's err: see ctl_node_err). */
struct kclient *ctl_node_try(struct ctl *c, int32_t node_id, struct kafka_str host, int32_t port);
/* Why the last ctl_node_try failed. */
const char *ctl_node_err(struct ctl *c);
/* Version or exit 1 naming the API the broker does not serve. */
int16_t ctl_version(struct ctl *c, struct kclient *k, int16_t api_key, int16_t want_max);
/* Call or exit 1 with the transport error. */
void *ctl_call(struct ctl *c, struct kclient *k, int16_t api_key, int16_t version, const void *body);
/* A call on k that failed in transport (rc, k->err): say why and exit 1. */
void ctl_call_failed(struct ctl *c, struct kclient *k, int rc) __attribute__((noreturn));
/* DescribeQuorum of __cluster_metadata on k (sluicectl cluster quorum, the
 * roll's checks). 0: *err is the answer's Kafka error code and, when it is
 * 0, *out the one partition's data (borrowed from k until its next call);
 * 1: the broker serves no DescribeQuorum version (*out NULL, *err 0);
 * -errno: the call failed (the reason in k->err). */
int ctl_describe_quorum(struct kclient *k, const struct kafka_describe_quorum_response_partition_data **out,
			int16_t *err);

/* Print "sluicectl: CMD: what: NAME (code): message" and what to do; returns 1. */
int ctl_kafka_error(struct ctl *c, int16_t code, struct kafka_str msg, const char *what, ...)
	__attribute__((format(printf, 4, 5)));
/* Print a usage error and the hint to --help; returns 2. */
int ctl_usage(struct ctl *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
/* Print a refusal or failure (not a Kafka error code); returns 1. */
int ctl_fail(struct ctl *c, const char *f, ...) __attribute__((format(printf, 2, 3)));

/* Parse a decimal integer; false if it is not one or out of [lo, hi]. */
bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* "2026-11-29T16:00:00Z", "2026-11-29 16:00:00" (UTC) or ms since the epoch. */
bool parse_time_ms(const char *s, int64_t *out);
int64_t now_ms(void);
/* control/sluicectl_wait.c: CLOCK_MONOTONIC in ms, what deadlines of
 * waits are measured in. */
int64_t mono_ms(void);
/* Wait until fd is ready for events (poll's) or deadline (mono_ms)
 * passes: 0, -ETIMEDOUT or -errno; EINTR retried. */
int ctl_wait_fd(int fd, short events, int64_t deadline);

/* Shared lookups (control/sluicectl.c). */
struct kafka_metadata_response *ctl_metadata(struct ctl *c, const char *const *topics, int n);
/* Offsets by timestamp (-1 latest, -2 earliest) for every partition of
 * topic: out[p] = offset, or -1 on error (*err gets the first code). */
int ctl_list_offsets(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
		     int64_t timestamp, int64_t *out, int16_t *err);

/* The replication settings of a topic as DescribeConfigs gives them:
 * min.insync.replicas and unclean.leader.election.enable, each -1 when
 * not read, and whether it is set on the topic (else a broker default).
 * A broker that leaves unclean.leader.election.enable out of a topic's
 * answer has it unset: 0, not on the topic. */
struct topic_repl {
	int32_t min_isr;
	bool min_isr_on_topic;
	int unclean;
	bool unclean_on_topic;
};
/* @thread main. One DescribeConfigs on the bootstrap broker for the n
 * topics named: out[i] for names[i]. Never exits: a broker that does not
 * serve DescribeConfigs or fails leaves the values -1 (returns -ENOTSUP
 * or -EIO; else 0). */
int ctl_topic_repl(struct ctl *c, const struct kafka_str *names, int n, struct topic_repl *out);
/* The same asked of the broker behind k (the rolling restart asks a
 * broker that is up). */
int ctl_topic_repl_on(struct kclient *k, const struct kafka_str *names, int n, struct topic_repl *out);

/* The Java partitioner's hash (murmur2, seed 0x9747b28c). */
uint32_t murmur2(const void *key, size_t len);
static inline int32_t murmur2_partition(const void *key, size_t len, int32_t n)
{
	return (int32_t)((murmur2(key, len) & 0x7fffffff) % (uint32_t)n);
}

/* The command tables of sluicectl_cluster.c, sluicectl_topic.c, sluicectl_leader.c,
 * sluicectl_group.c and sluicectl_record.c; sluicectl.c lists them. */
extern const struct cmd cluster_cmds[];
extern const int cluster_ncmds;
extern const struct cmd topic_cmds[];
extern const int topic_ncmds;
extern const struct cmd group_cmds[];
extern const int group_ncmds;
extern const struct cmd record_cmds[];
extern const int record_ncmds;
extern const struct cmd leader_cmds[];
extern const struct cmd user_cmds[];
extern const int user_ncmds;
extern const struct cmd acl_cmds[];
extern const int acl_ncmds;
extern const int leader_ncmds;
extern const struct cmd reassign_cmds[];
extern const int reassign_ncmds;
extern const struct cmd features_cmds[];
extern const int features_ncmds;
extern const struct cmd drill_cmds[];
extern const int capacity_ncmds;
extern const struct cmd capacity_cmds[];
extern const struct cmd host_cmds[];   /* sluicectl_host.c */
extern const int host_ncmds;
extern const int drill_ncmds;
extern const struct cmd roll_cmds[];
extern const int roll_ncmds;

/* Fetch helper shared by consume and add-partitions' key sampling: struct
 * fetched and fetch_cb are control/record_walk.h's. */
/* Read partition p of topic t from *offset up to (not including) end, or
 * with end < 0 until stopped, calling cb for each record (*offset follows:
 * the next offset to read). Returns 0 at end, 1 when cb stopped, -errno on
 * a transport or decode failure; a Kafka error code goes to *kerr (and
 * returns -EIO). */
int ctl_fetch_range(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
		    int32_t p, int64_t *offset, int64_t end, fetch_cb cb, void *arg, int16_t *kerr);

/* The connection to broker `leader` as the last Metadata answer names it. */
struct kclient *ctl_leader(struct ctl *c, int32_t leader);
/* The connection to broker id as the last Metadata answer names it; NULL
 * when it names none or it cannot be reached (never exits). */
struct kclient *ctl_node_of(struct ctl *c, int32_t id);

/* Group helpers (sluicectl_group.c): `__names group` for completion; the
 * committed offset of every partition of topic (out[i] for the i-th
 * partition of t, -1 when none); a commit as a group without members. */
int group_names(struct ctl *c);
int group_committed(struct ctl *c, const char *group,
		    const struct kafka_metadata_response_metadata_response_topic *t, int64_t *out);
int group_commit(struct ctl *c, const char *group, const char *topic, const int32_t *parts,
		 const int64_t *offsets, int n);

#endif
