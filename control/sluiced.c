/* control/sluiced.c — the broker process: configuration, shards, the
 * control thread, signals.
 *
 *   sluiced [--config FILE] [--set KEY=VALUE]... [--data-dir DIR]
 *           [--listen HOST:PORT] [--shards N] [--node-id N]
 *
 * Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 2 for bad usage,
 * a bad configuration or a listener that cannot be opened, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/config.h"
#include "control/listeners.h"
#include "control/node_role.h"
#include "control/quorum_tls.h"
#include "control/quorum_transport.h"
#include "control/sd_notify.h"
#include "control/ctl.h"
#include "dataplane/native/native_broker.h"
#include "dataplane/peer_session.h"
#include "dataplane/shard.h"
#include "dataplane/sasl.h"
#include "dataplane/tls.h"
#include "storage/slog.h"
#include "version.h"   /* build/gen: SLUICE_VERSION, SLUICE_GIT_COMMIT */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluiced [--config FILE] [--set KEY=VALUE]... [--data-dir DIR]\n"
		"               [--listen HOST:PORT] [--shards N] [--node-id N]\n"
		"\n"
		"With no arguments: one node, data in ./data, Kafka listener on 127.0.0.1:9092.\n"
		"The config file uses Kafka's key=value properties format and property names\n"
		"(listeners, advertised.listeners, log.dirs, num.partitions, ...); flags override it.\n"
		"\n"
		"  --config FILE        read FILE (key=value, # comments)\n"
		"  --set KEY=VALUE      set one key (repeatable), e.g. --set log.durability=sync\n"
		"  --data-dir DIR       same as --set log.dirs=DIR\n"
		"  --listen HOST:PORT   same as --set listeners=PLAINTEXT://HOST:PORT\n"
		"  --shards N           same as --set shards=N (0: one per core)\n"
		"  --node-id N          same as --set node.id=N\n"
		"  --version            print the version and the commit it was built from\n"
		"  --add-scram 'SCRAM-SHA-512=[name=NAME,password=PASSWORD]'\n"
		"                       a SCRAM user the metadata log gets when it has none yet, as\n"
		"                       kafka-storage format --add-scram (repeatable; exit 2 when it\n"
		"                       already has users: docs/security.md)\n");
}

static int set_or_die(struct config *cfg, const char *key, const char *value, const char *src)
{
	char err[512];

	if (config_set(cfg, key, value, src, err, sizeof(err)) < 0) {
		slog(SLOG_ERR, "%s", err);
		return -1;
	}
	return 0;
}

/* mkdir -p */
static int mkdir_p(const char *path)
{
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* The service manager's view of the broker (Type=notify units): READY once
 * listening, STOPPING on SIGTERM, RELOADING around a SIGHUP; a failed send
 * is said once (a unit waiting for READY would time out: the line says why). */
static void notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notify(const char *fmt, ...)
{
	static int warned;
	char buf[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rc = sd_notify_send(buf);
	if (rc < 0 && !warned) {
		warned = 1;
		slog(SLOG_WARN, "NOTIFY_SOCKET=%s: cannot notify the service manager: %s",
			getenv("NOTIFY_SOCKET"), strerror(-rc));
	}
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t want = 1 << 20;

		rl.rlim_cur = rl.rlim_max;
		if (rl.rlim_max < want) {
			struct rlimit up = { want, want };

			if (setrlimit(RLIMIT_NOFILE, &up) == 0)   /* root may raise the hard limit */
				return;
		}
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* dpdk.*: the address the shards answer on. The EAL and the port start
 * later (native_dpdk_start), once the settings are all known good. */
static int parse_dpdk(const struct config *cfg, struct broker *b)
{
	char host[64];
	int port, bits = (int)config_int(cfg, "dpdk.prefix.length");
	struct in_addr a;

	if (!*config_str(cfg, "dpdk.listen")) {
		slog(SLOG_ERR, "dpdk.enable=true needs dpdk.listen (IPv4:port the DPDK port answers on)");
		return -1;
	}
	if (!*config_str(cfg, "dpdk.eal.args")) {
		slog(SLOG_ERR, "dpdk.enable=true needs dpdk.eal.args (e.g. \"-a 0000:03:00.0\", or "
				"\"--no-huge -m 512 --no-pci --vdev=net_tap0,iface=sl0\" without a NIC)");
		return -1;
	}
	if (config_hostport(config_str(cfg, "dpdk.listen"), host, sizeof(host), &port) < 0 ||
	    inet_pton(AF_INET, host, &a) != 1 || !port) {
		slog(SLOG_ERR, "dpdk.listen: cannot parse '%s' (expected IPv4:PORT)",
			config_str(cfg, "dpdk.listen"));
		return -1;
	}
	b->set.dpdk_enable = 1;
	b->set.dpdk_ip = a.s_addr;
	b->set.dpdk_udp_port = (uint16_t)port;
	b->set.dpdk_netmask = bits ? htonl(~0u << (32 - bits)) : 0;
	if (*config_str(cfg, "dpdk.gateway")) {
		inet_pton(AF_INET, config_str(cfg, "dpdk.gateway"), &a);   /* checked by the table */
		b->set.dpdk_gateway = a.s_addr;
	}
	b->set.dpdk_poll_sleep_us = (uint32_t)config_int(cfg, "dpdk.poll.sleep.us");
	return 0;
}

/* Tell every shard to stop (they finish in-flight requests, write what is
 * buffered, checkpoint their logs) and wait for them. */
static void stop_shards(struct broker *b, int nstarted)
{
	__atomic_store_n(&b->stopping, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < nstarted; i++)
		broker_wake(b, i);
	for (int i = 0; i < nstarted; i++)
		shard_join(b->shards[i]);
}

/* Everything main made, undone (each part only if it was made): every
 * exit of main comes here, so that a sanitizer build finds nothing left
 * behind, a configuration error included (exit 2, not LeakSanitizer's).
 * scram: the --add-scram credentials not yet handed to b. */
static void release(struct config *cfg, struct broker *b, struct ctl *ctl, int nstarted, struct peer_sec *peer_sec,
		    struct sasl_scram_cred *scram, int nscram)
{
	for (int i = 0; i < nscram; i++)
		free((char *)scram[i].name);
	if (b && nstarted)
		stop_shards(b, nstarted);
	if (ctl)
		ctl_stop(ctl);
	if (b) {
		for (int i = 0; i < BROKER_MAX_SHARDS; i++)
			if (b->shards[i])
				shard_destroy(b->shards[i]);
		native_dpdk_stop(b);
		for (int i = 0; i < BROKER_MAX_LISTENERS; i++)
			tls_server_destroy(b->tls[i]);
		if (b->quorum_sasl) {
			sasl_plain_users_free(&b->quorum_sasl->users);
			memset(b->quorum_sasl->login.password, 0, sizeof(b->quorum_sasl->login.password));
		}
		if (b->quorum_tls) {
			tls_server_destroy(b->quorum_tls->server);
			tls_client_destroy(b->quorum_tls->client);
		}
		for (int i = 0; i < b->set.nlisteners; i++) {
			sasl_plain_users_free(b->set.listeners[i].plain);
			free(b->set.listeners[i].plain);
		}
		for (int i = 0; i < b->nboot_scram; i++)
			free((char *)b->boot_scram[i].name);
		free(b->boot_scram);
		for (int i = 0; i < b->set.nsuper_users; i++)
			free(b->set.super_users[i]);
		free(b->set.super_users);
		free(b->conns.ip_slots);
		for (int i = 0; i <= BROKER_MAX_SHARDS; i++)
			for (int j = 0; j <= BROKER_MAX_SHARDS; j++)
				if (b->rings[i][j]) {
					free(b->rings[i][j]->slots);
					free(b->rings[i][j]);
				}
		free(b);
	}
	tls_client_destroy(peer_sec->tls_client);
	memset(peer_sec->password, 0, sizeof(peer_sec->password));
	config_destroy(cfg);
}

/* super.users: principals separated by semicolons, each trimmed; empty
 * ones skipped. -ENOMEM. */
static int super_users_split(const char *v, struct broker_settings *set)
{
	size_t n = strlen(v);
	char *copy = strdup(v), *save = NULL;

	set->super_users = calloc(n / 2 + 1, sizeof(*set->super_users));
	if (!copy || !set->super_users) {
		free(copy);
		return -ENOMEM;
	}
	for (char *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
		char *e;

		while (*t == ' ' || *t == '\t')
			t++;
		e = t + strlen(t);
		while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = 0;
		if (*t && !(set->super_users[set->nsuper_users++] = strdup(t))) {
			free(copy);
			return -ENOMEM;
		}
	}
	free(copy);
	return 0;
}

int main(int argc, char **argv)
{
	struct config *cfg;
	struct broker *b = NULL;
	struct ctl *ctl = NULL;
	char err[1024];
	struct node_role role;
	int rc, nshards = 0, nstarted = 0, code = 2;   /* code: main's exit status (2 until the checks pass) */
	sigset_t sigs;
	struct sasl_scram_cred scram[16];
	int nscram = 0;
	struct peer_sec peer_sec = { 0 };   /* b->peer_sec: lives as long as main */
	struct qtls_sec quorum_tls = { 0 }; /* b->quorum_tls: the same */
	struct qt_counters quorum_port = { 0 }; /* b->quorum_port: the same */
	struct qt_sasl quorum_sasl = { 0 };     /* b->quorum_sasl: the same */

	slog_init("sluiced");
	if (config_create(&cfg) < 0)
		return 1;
	/* the config file first, then flags in order, whatever their position */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--config")) {
			if (i + 1 >= argc) {
				slog(SLOG_ERR, "--config needs a file");
				goto out;
			}
			if (config_load_file(cfg, argv[i + 1], err, sizeof(err)) < 0) {
				slog(SLOG_ERR, "%s", err);
				goto out;
			}
		}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char buf[600];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			code = 0;
			goto out;
		}
		if (!strcmp(a, "--version")) {
			printf("sluiced %s (commit %s)\n", SLUICE_VERSION, SLUICE_GIT_COMMIT);
			code = 0;
			goto out;
		}
		if (!strcmp(a, "--config")) {
			i++;
			continue;
		}
		if (!v) {
			slog(SLOG_ERR, "%s needs a value", a);
			usage(stderr);
			goto out;
		}
		i++;
		if (!strcmp(a, "--set")) {
			char *eq = strchr(v, '=');

			if (!eq) {
				slog(SLOG_ERR, "--set %s: expected KEY=VALUE", v);
				goto out;
			}
			snprintf(buf, sizeof(buf), "%.*s", (int)(eq - v), v);
			if (set_or_die(cfg, buf, eq + 1, "--set") < 0)
				goto out;
		} else if (!strcmp(a, "--data-dir")) {
			if (set_or_die(cfg, "log.dirs", v, "--data-dir") < 0)
				goto out;
		} else if (!strcmp(a, "--listen")) {
			snprintf(buf, sizeof(buf), "PLAINTEXT://%s", v);
			if (set_or_die(cfg, "listeners", buf, "--listen") < 0)
				goto out;
		} else if (!strcmp(a, "--shards")) {
			if (set_or_die(cfg, "shards", v, "--shards") < 0)
				goto out;
		} else if (!strcmp(a, "--add-scram")) {
			char *name;

			if (nscram == (int)(sizeof(scram) / sizeof(scram[0]))) {
				slog(SLOG_ERR, "--add-scram: at most %d", nscram);
				goto out;
			}
			if (sasl_add_scram_parse(v, &scram[nscram], &name, err, sizeof(err)) < 0) {
				slog(SLOG_ERR, "--add-scram: %s", err);
				goto out;
			}
			nscram++;
		} else if (!strcmp(a, "--node-id")) {
			if (set_or_die(cfg, "node.id", v, "--node-id") < 0)
				goto out;
		} else {
			slog(SLOG_ERR, "unknown option '%s'", a);
			usage(stderr);
			goto out;
		}
	}

	/* an admin.listen set explicitly must be free too (exit 2, as for the
	 * Kafka listener); the default one only turns the endpoint off */
	{
		const char *al = config_str(cfg, "admin.listen"), *src = config_source(cfg, "admin.listen");
		char ahost[256];
		int aport;

		if (*al && src && strcmp(src, "default") && config_hostport(al, ahost, sizeof(ahost), &aport) == 0 &&
		    aport && shard_probe_port(ahost, aport, err, sizeof(err)) == -EADDRINUSE) {
			slog(SLOG_ERR, "admin.listen: %s is held by another process: choose another with "
				"--set admin.listen=HOST:PORT", al);
			goto out;
		}
	}
	/* this node's place in the cluster: roles, voters, which listener
	 * is the clients' (exit 2 naming the key on a contradiction) */
	if (node_role_check(cfg, &role, err, sizeof(err)) < 0) {
		slog(SLOG_ERR, "%s", err);
		goto out;
	}
	if (!(b = calloc(1, sizeof(*b))) ||
	    (nscram && !(b->boot_scram = calloc((size_t)nscram, sizeof(*b->boot_scram))))) {
		slog(SLOG_ERR, "out of memory");
		code = 1;
		goto out;
	}
	b->cfg = cfg;
	b->argc = argc;
	b->argv = argv;
	b->quorum_port = &quorum_port;
	if (nscram) {
		memcpy(b->boot_scram, scram, sizeof(scram[0]) * (size_t)nscram);
		b->nboot_scram = nscram;
		nscram = 0;   /* b owns them */
	}
	b->controller_id = -1;     /* until the quorum names its leader */
	snprintf(b->set.listen_host, sizeof(b->set.listen_host), "%s", role.listen_host);
	b->set.listen_port = role.listen_port;
	b->set.controller_only = !role.broker;
	b->set.broker_only = !role.controller;
	snprintf(b->set.adv_host, sizeof(b->set.adv_host), "%s", role.adv_host);
	b->set.adv_port = role.adv_port;
	snprintf(b->set.rack, sizeof(b->set.rack), "%s", role.rack);
	if (!strcmp(b->set.adv_host, "0.0.0.0") || !b->set.adv_host[0])
		gethostname(b->set.adv_host, sizeof(b->set.adv_host));
	/* every client listener, its security protocol and what its clients
	 * are told (exit 2 naming the key: a SASL mechanism not implemented, a name without a protocol) */
	if (listeners_resolve(cfg, role.broker, &b->set, err, sizeof(err)) < 0) {
		slog(SLOG_ERR, "%s", err);
		goto out;
	}
	{
		struct tls_conf tc, ib;
		int any_tls = 0;

		/* every listener.name.<l>.* key names a listener; each SSL
		 * listener its own context (its listener.name.<l>.ssl.* over
		 * the ssl.* keys) */
		rc = listeners_check_keys(cfg, err, sizeof(err));
		memset(&ib, 0, sizeof(ib));
		for (int i = 0; rc >= 0 && i < b->set.nlisteners; i++) {
			if ((rc = listeners_tls_conf(cfg, &b->set, i, &tc, err, sizeof(err))) <= 0)
				continue;
			if (i == 0)
				ib = tc;   /* the inter-broker listener's, for the client side */
			any_tls = 1;
			rc = tls_server_create(&tc, &b->tls[i], err, sizeof(err));
			if (rc < 0) {
				char why[sizeof(err)];

				snprintf(why, sizeof(why), "%s", err);
				snprintf(err, sizeof(err), "listener %.64s: %.900s", b->set.listeners[i].name, why);
			}
		}
		/* the inter-broker listener's protocol: this node's client side */
		if (rc >= 0 && (rc = listeners_peer_sec(cfg, &b->set, &ib, &peer_sec, err, sizeof(err))) > 0)
			b->peer_sec = &peer_sec;
		if (rc < 0) {
			slog(SLOG_ERR, "%s", err);
			goto out;
		}
		/* an SSL controller listener: the controller port's TLS, both
		 * sides (mutual) */
		rc = listeners_controller_tls(cfg, &tc, err, sizeof(err));
		if (rc > 0 && (rc = tls_server_create(&tc, &quorum_tls.server, err, sizeof(err))) >= 0 &&
		    (rc = tls_client_create(&tc, &quorum_tls.client, err, sizeof(err))) >= 0)
			b->quorum_tls = &quorum_tls;
		if (rc < 0) {
			slog(SLOG_ERR, "%s", err);
			tls_server_destroy(quorum_tls.server);
			quorum_tls.server = NULL;
			goto out;
		}
		/* a SASL controller listener: PLAIN, its login and users */
		if ((rc = listeners_controller_sasl(cfg, &quorum_sasl, err, sizeof(err))) < 0) {
			slog(SLOG_ERR, "%s", err);
			goto out;
		}
		if (rc > 0)
			b->quorum_sasl = &quorum_sasl;
		if ((any_tls || b->quorum_tls) && (rc = tls_ktls_probe()) < 0)
			slog(SLOG_INFO, "TLS: the record layer stays OpenSSL's: this kernel has no kTLS (%s%s)",
				strerror(-rc), rc == -ENOENT ? ": built without CONFIG_TLS" : "");
	}
	b->set.node_id = (int32_t)config_int(cfg, "node.id");
	snprintf(b->set.data_dir, sizeof(b->set.data_dir), "%s", config_str(cfg, "log.dirs"));
	nshards = (int)config_int(cfg, "shards");
	if (nshards <= 0)
		nshards = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nshards > BROKER_MAX_SHARDS)
		nshards = BROKER_MAX_SHARDS;
	b->set.nshards = nshards;
	b->set.num_partitions = (int32_t)config_int(cfg, "num.partitions");
	b->set.auto_create = (int)config_int(cfg, "auto.create.topics.enable");
	b->set.fetch_session_slots = (int32_t)config_int(cfg, "max.incremental.fetch.session.cache.slots");
	b->set.max_request_bytes = (uint32_t)config_int(cfg, "socket.request.max.bytes");
	b->set.message_max_bytes = (uint32_t)config_int(cfg, "message.max.bytes");
	b->set.tail_budget = (size_t)config_int(cfg, "shard.tail.memory.bytes");
	b->set.queued_max_request_bytes = config_int(cfg, "queued.max.request.bytes");
	b->set.max_connections = (int32_t)config_int(cfg, "max.connections");
	b->set.max_connections_per_ip = (int32_t)config_int(cfg, "max.connections.per.ip");
	b->set.connections_max_idle_ms = config_int(cfg, "connections.max.idle.ms");
	b->set.sasl_fail_delay_ms = (int32_t)config_int(cfg, "connection.failed.authentication.delay.ms");
	b->set.authz = *config_str(cfg, "authorizer.class.name") != 0;
	b->set.authz_allow_if_none = (int)config_int(cfg, "allow.everyone.if.no.acl.found");
	if (super_users_split(config_str(cfg, "super.users"), &b->set) < 0) {
		slog(SLOG_ERR, "out of memory");
		code = 1;
		goto out;
	}
	if (b->set.max_connections_per_ip < INT32_MAX) {
		/* the per-address counts every shard shares (struct broker_conns) */
		b->conns.ip_slots = calloc(BROKER_IP_SLOTS, sizeof(uint64_t));
		if (!b->conns.ip_slots) {
			slog(SLOG_ERR, "out of memory");
			code = 1;
			goto out;
		}
	}
	if (b->set.queued_max_request_bytes >= 0 &&
	    b->set.queued_max_request_bytes < (int64_t)b->set.max_request_bytes)
		slog(SLOG_WARN, "queued.max.request.bytes (%lld) is below socket.request.max.bytes "
			"(%u): a connection sending a larger frame is closed",
			(long long)b->set.queued_max_request_bytes, b->set.max_request_bytes);
	b->set.retention_check_ms = config_int(cfg, "log.retention.check.interval.ms");
	b->set.producer_ttl_ms = config_int(cfg, "producer.id.expiration.ms");
	b->set.replica_lag_ms = config_int(cfg, "replica.lag.time.max.ms");
	if (*config_str(cfg, "native.listen") &&
	    config_hostport(config_str(cfg, "native.listen"), b->set.native_host, sizeof(b->set.native_host),
			    &b->set.native_port) < 0) {
		slog(SLOG_ERR, "native.listen: cannot parse '%s' (expected HOST:PORT)",
			config_str(cfg, "native.listen"));
		goto out;
	}
	b->set.native_credits = (uint32_t)config_int(cfg, "native.session.credits.bytes");
	b->set.native_session_timeout_ms = config_int(cfg, "native.session.timeout.ms");
	b->set.native_reassembly_timeout_ms = config_int(cfg, "native.reassembly.timeout.ms");
	b->set.native_reassembly_bytes = (uint64_t)config_int(cfg, "native.reassembly.memory.bytes");
	if (config_int(cfg, "dpdk.enable") && parse_dpdk(cfg, b) < 0)
		goto out;

	if (mkdir_p(b->set.data_dir) < 0) {
		slog(SLOG_ERR, "cannot create data directory %s: %s", b->set.data_dir, strerror(errno));
		goto out;
	}
	raise_nofile();
	/* signals go to this thread only (sigwait below) */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGPIPE);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	for (int i = 0; i <= nshards; i++)
		for (int j = 0; j <= nshards; j++) {
			struct spsc *r;
			struct shard_msg *slots;

			if (i == j)
				continue;
			r = aligned_alloc(64, sizeof(*r));
			slots = calloc(RING_SLOTS, sizeof(*slots));
			if (!r || !slots) {
				free(r);
				free(slots);
				slog(SLOG_ERR, "out of memory");
				code = 1;
				goto out;
			}
			spsc_init(r, slots, RING_SLOTS);
			b->rings[i][j] = r;
		}
	/* SO_REUSEPORT would let us share the port with another broker:
	 * first make sure nobody holds it */
	{
		int probe = 0;

		/* a broker that just died (SIGKILL) frees its port when the
		 * kernel tears its rings down: give that a second */
		for (int i = 0; role.broker && i < (b->set.nlisteners ? b->set.nlisteners : 1) && probe >= 0; i++) {
			const char *h = b->set.nlisteners ? b->set.listeners[i].host : role.listen_host;
			int port = b->set.nlisteners ? b->set.listeners[i].port : role.listen_port;

			for (int tries = 0; (probe = shard_probe_port(h, port, err, sizeof(err))) == -EADDRINUSE &&
					    tries < 50; tries++)
				usleep(20000);
		}
		if (probe < 0) {
			slog(SLOG_ERR, "%s", err);
			goto out;
		}
	}
	if (b->set.dpdk_enable) {
		/* the EAL and the port before the shards: each takes its queues */
		rc = native_dpdk_start(b, config_str(cfg, "dpdk.eal.args"), config_str(cfg, "dpdk.port"),
				       (int)config_int(cfg, "dpdk.mtu"), err, sizeof(err));
		if (rc < 0) {
			slog(SLOG_ERR, "dpdk: %s", err);
			goto out;
		}
	}
	for (int i = 0; i < nshards; i++) {
		rc = shard_create(b, i, &b->shards[i], err, sizeof(err));
		if (rc < 0) {
			slog(SLOG_ERR, "%s", err);
			code = rc == -EADDRINUSE || rc == -EACCES || rc == -EADDRNOTAVAIL || rc == -EINVAL ? 2 : 1;
			goto out;
		}
	}
	for (int i = 0; i < nshards; i++, nstarted++)
		if ((rc = shard_start(b->shards[i])) < 0) {
			slog(SLOG_ERR, "cannot start shard %d: %s", i, strerror(-rc));
			code = 1;
			goto out;
		}
	if ((rc = ctl_start(b, cfg, &ctl)) == 0) {
		/* SIGTERM or SIGINT while the node is not ready yet (a broker
		 * whose voters it cannot reach, a long replay) stops it: it
		 * serves nothing yet, so nothing moves first */
		sigset_t term;
		struct timespec zero = { 0, 0 };

		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		sigaddset(&term, SIGINT);
		notify("STATUS=starting: reading the metadata log, opening partitions, reaching the quorum");
		while ((rc = ctl_wait_ready_ms(ctl, 100, err, sizeof(err))) == -ETIMEDOUT) {
			int sig = sigtimedwait(&term, NULL, &zero);

			if (sig == SIGTERM || sig == SIGINT) {
				slog(SLOG_INFO, "%s before the node was ready: stopping", strsignal(sig));
				code = 0;
				goto out;
			}
		}
	}
	if (rc < 0) {
		slog(SLOG_ERR, "%s", err);
		/* -EINVAL: the configuration contradicts the data directory
		 * (another node id, cluster or voter set): the message names
		 * the key; -EADDRINUSE: another process holds the controller
		 * port (exit 2, as for a Kafka listener's port) */
		code = rc == -EINVAL || rc == -EADDRINUSE ? 2 : 1;
		goto out;
	}
	/* the metadata is in place: the shards start accepting */
	__atomic_store_n(&b->serving, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < nshards; i++)
		broker_wake(b, i);
	if (!role.broker)
		/* no Kafka listener: the line scripts wait for names the
		 * controller listener */
		printf("sluiced: listening on %s:%d (node %d, controller only: no Kafka clients, data in %s, "
		       "cluster %s)\n", role.ctl_host, role.ctl_port, b->set.node_id, b->set.data_dir,
		       b->set.cluster_id);
	else
		printf("sluiced: listening on %s:%d (node %d, %d shard%s, data in %s, cluster %s)\n",
		       b->set.listen_host, b->set.listen_port, b->set.node_id, nshards, nshards == 1 ? "" : "s",
		       b->set.data_dir, b->set.cluster_id);
	for (int i = 1; role.broker && i < b->set.nlisteners; i++)
		printf("sluiced: listener %s on %s:%d (%s)\n", b->set.listeners[i].name, b->set.listeners[i].host,
		       b->set.listeners[i].port, b->set.listeners[i].sasl ? (b->set.listeners[i].tls ? "SASL_SSL" :
			       "SASL_PLAINTEXT") : b->set.listeners[i].tls ? "SSL" : "PLAINTEXT");
	if (ctl_admin_port(ctl))
		printf("sluiced: admin http on %s, port %d (/metrics, /v1/health)\n", config_str(cfg, "admin.listen"),
		       ctl_admin_port(ctl));
	fflush(stdout);
	if (!role.broker)
		notify("READY=1\nSTATUS=serving the metadata quorum on %s:%d (node %d, controller only)",
		       role.ctl_host, role.ctl_port, b->set.node_id);
	else
		notify("READY=1\nSTATUS=serving Kafka clients on %s:%d (node %d, %d shard%s)", b->set.listen_host,
		       b->set.listen_port, b->set.node_id, nshards, nshards == 1 ? "" : "s");

	for (;;) {
		int sig;

		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGTERM || sig == SIGINT) {
			notify("STOPPING=1\nSTATUS=controlled shutdown: moving leadership away, then writing "
			       "buffered data");
			break;
		}
		if (sig == SIGHUP) {
			notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading certificates, tokens and logins",
			       sd_notify_monotonic_usec());
			/* the SSL listeners' certificates, keys and trusted CAs,
			 * the inter-broker client's and the controller
			 * listener's, read again: new connections get them */
			rc = listeners_tls_reload(b, err, sizeof(err));
			if (rc == -ENOENT)
				slog(SLOG_NOTICE, "SIGHUP: no SSL listener, no certificates to reload");
			else if (rc < 0)
				slog(SLOG_WARN, "SIGHUP: TLS reload failed, the previous certificates stay: %s",
					err);
			else
				slog(SLOG_NOTICE, "SIGHUP: TLS certificates reloaded");
			{
				/* and the admin endpoint's tokens and a SASL
				 * controller listener's logins, on the control
				 * thread (theirs) */
				uint64_t one = 1;

				__atomic_store_n(&b->reload_admin, 1, __ATOMIC_RELEASE);
				if (write(b->wake_fd[broker_ctl_index(b)], &one, sizeof(one)) < 0) {
					/* the counter is full: a wake-up is pending anyway */
				}
			}
			notify("READY=1\nSTATUS=serving (reloaded on SIGHUP)");
			continue;
		}
		if (sig == SIGUSR1) {
			/* the group report (lag, oldest unconsumed age) on stderr */
			uint64_t one = 1;

			__atomic_store_n(&b->report_groups, 1, __ATOMIC_RELEASE);
			if (write(b->wake_fd[broker_ctl_index(b)], &one, sizeof(one)) < 0) {
				/* the counter is full: a wake-up is pending anyway */
			}
		}
	}
	/* leadership of this broker's partitions moves to other brokers first */
	ctl_shutdown_controlled(ctl, 5000);
	slog(SLOG_INFO, "shutting down: finishing in-flight requests, writing buffered data");
	stop_shards(b, nstarted);
	nstarted = 0;
	ctl_stop(ctl);
	ctl = NULL;
	code = __atomic_load_n(&b->fatal, __ATOMIC_ACQUIRE) ? 1 : 0;
	release(cfg, b, ctl, nstarted, &peer_sec, scram, nscram);
	if (code)
		slog(SLOG_ERR, "stopped after a fatal error (above)");
	else
		slog(SLOG_INFO, "stopped cleanly");
	return code;
out:
	release(cfg, b, ctl, nstarted, &peer_sec, scram, nscram);
	return code;
}
