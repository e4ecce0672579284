/* control/admin_http.h — the broker's HTTP admin endpoint (admin.listen):
 * /metrics (Prometheus text, control/metrics.c), /v1/health, /v1/config,
 * /v1/shards, /v1/partitions/<topic>/<n>.
 *
 * Built on libmicrohttpd in its external epoll mode: the control thread
 * polls the daemon's epoll fd next to its eventfd and runs the daemon from
 * its own loop, so every handler runs on the control thread and reads what
 * the control thread owns (metadata snapshot, groups, config) directly.
 * Shard state is read only through the words the shards publish with
 * relaxed atomic stores (struct shard_stats, struct part_pub): a request
 * never stops or slows a shard.
 *
 * Thread: ctl (@thread ctl) for everything. Owns: the daemon and its
 * connections. Errors: 0 or -errno; err filled for the operator.
 */
#ifndef SLUICE_ADMIN_HTTP_H
#define SLUICE_ADMIN_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct admin_http;
struct broker;
struct config;
struct ctl;

/* Start listening on admin.listen (empty: no endpoint, *out = NULL and 0).
 * A default admin.listen whose port is taken only disables the endpoint
 * (with a warning in err and *out = NULL, return 0), so that several
 * brokers can share a host on defaults; an admin.listen set in a file or
 * with --set that cannot be bound is an error (-errno). */
int admin_http_start(struct ctl *ctl, struct broker *b, const struct config *cfg, struct admin_http **out,
		     char *err, size_t errlen);
/* The fd to poll for POLLIN (the daemon's epoll fd). */
int admin_http_fd(const struct admin_http *a);
/* The bound port (admin.listen with port 0 picks one). */
int admin_http_port(const struct admin_http *a);
/* Milliseconds until the daemon needs to run for its timeouts, at most
 * max_ms. */
int admin_http_timeout(struct admin_http *a, int max_ms);
/* Accept, read, answer what is ready; never blocks. */
void admin_http_run(struct admin_http *a);
void admin_http_stop(struct admin_http *a);
/* SIGHUP: admin.auth.token.file read again (a file that does not load
 * leaves the previous tokens, logged). NULL: nothing. */
void admin_http_reload(struct admin_http *a);
/* Requests refused for their credentials (401) since the start. */
uint64_t admin_http_auth_failures(const struct admin_http *a);

#endif
