/* dataplane/dpdk_port.c — EAL start and one port opened for the shards
 * (see dpdk_port.h). Setup code only: nothing here runs per packet. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "dataplane/dpdk_port.h"

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- EAL */

/* DPDK 22.11's EAL options (lib/eal/common/eal_common_options.c):
 * 0 no value, 1 a value (next argument or =value), 2 optional (=value). */
static const struct eal_opt {
	const char *name;
	int arg;
} eal_long_opts[] = {
	{ "base-virtaddr", 1 }, { "create-uio-dev", 0 }, { "file-prefix", 1 }, { "help", 0 },
	{ "huge-dir", 1 }, { "huge-unlink", 2 }, { "iova-mode", 1 }, { "lcores", 1 },
	{ "log-level", 1 }, { "trace", 1 }, { "trace-dir", 1 }, { "trace-bufsz", 1 },
	{ "trace-mode", 1 }, { "main-lcore", 1 }, { "mbuf-pool-ops-name", 1 }, { "no-hpet", 0 },
	{ "no-huge", 0 }, { "no-pci", 0 }, { "no-shconf", 0 }, { "in-memory", 0 },
	{ "block", 1 }, { "allow", 1 }, { "proc-type", 1 }, { "socket-mem", 1 },
	{ "socket-limit", 1 }, { "syslog", 1 }, { "vdev", 1 }, { "vfio-intr", 1 },
	{ "vfio-vf-token", 1 }, { "vmware-tsc-map", 0 }, { "legacy-mem", 0 },
	{ "single-file-segments", 0 }, { "match-allocations", 0 }, { "telemetry", 0 },
	{ "no-telemetry", 0 }, { "force-max-simd-bitwidth", 1 }, { "huge-worker-stack", 2 },
};

/* short options; ':' after one that takes a value */
static const char eal_short_opts[] = "a:b:c:s:d:hl:S:m:n:r:v";

int dpdk_eal_split(const char *args, char *buf, size_t buflen, char **argv, int max_args, char *err,
		   size_t errlen)
{
	const char *s = args ? args : "";
	size_t o = 0;
	int argc = 0;

	if (max_args < 2 || buflen < sizeof("sluiced")) {
		errf(err, errlen, "EAL arguments: no room");
		return -E2BIG;
	}
	memcpy(buf, "sluiced", sizeof("sluiced"));
	o = sizeof("sluiced");
	argv[argc++] = buf;
	for (;;) {
		const char *start;
		char q = 0;

		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		start = s;
		if (argc == max_args - 1) {
			errf(err, errlen, "EAL arguments: more than %d", max_args - 2);
			return -E2BIG;
		}
		argv[argc] = buf + o;
		while (*s && (q || (*s != ' ' && *s != '\t' && *s != '\n'))) {
			char c = *s++;

			if (q == '\'') {
				if (c == '\'') {
					q = 0;
					continue;
				}
			} else if (q == '"') {
				if (c == '"') {
					q = 0;
					continue;
				}
				if (c == '\\' && *s && strchr("\"\\$`", *s))
					c = *s++;
			} else if (c == '\'' || c == '"') {
				q = c;
				continue;
			} else if (c == '\\') {
				if (!*s) {
					errf(err, errlen, "EAL argument %d ('%s'): ends with a lone backslash", argc,
					     start);
					return -EINVAL;
				}
				c = *s++;
			}
			if (o + 1 >= buflen) {
				errf(err, errlen, "EAL arguments: longer than %zu bytes", buflen);
				return -E2BIG;
			}
			buf[o++] = c;
		}
		if (q) {
			errf(err, errlen, "EAL argument %d (%s): unterminated %c quote", argc, start, q);
			return -EINVAL;
		}
		if (o + 1 > buflen) {
			errf(err, errlen, "EAL arguments: longer than %zu bytes", buflen);
			return -E2BIG;
		}
		buf[o++] = 0;
		argc++;
	}
	argv[argc] = NULL;

	/* Every argument must be an EAL option: the EAL would print its usage
	 * (or, for --help, exit the process) on one it does not know, without
	 * saying which. */
	int no_huge = 0, in_memory = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (a[0] == '-' && a[1] == '-' && a[2]) {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t nl = eq ? (size_t)(eq - name) : strlen(name);
			const struct eal_opt *opt = NULL;

			for (size_t k = 0; k < sizeof(eal_long_opts) / sizeof(eal_long_opts[0]); k++)
				if (strlen(eal_long_opts[k].name) == nl && !strncmp(eal_long_opts[k].name, name, nl))
					opt = &eal_long_opts[k];
			if (!opt) {
				errf(err, errlen, "EAL argument %d ('%s'): not an EAL option", i, a);
				return -EINVAL;
			}
			if (!strcmp(opt->name, "help")) {
				errf(err, errlen, "EAL argument %d ('%s'): would print the usage and exit", i, a);
				return -EINVAL;
			}
			if (opt->arg == 0 && eq) {
				errf(err, errlen, "EAL argument %d ('%s'): --%s takes no value", i, a, opt->name);
				return -EINVAL;
			}
			if (opt->arg == 1 && !eq) {
				if (i + 1 >= argc) {
					errf(err, errlen, "EAL argument %d ('%s'): --%s needs a value", i, a, opt->name);
					return -EINVAL;
				}
				i++;
			}
			no_huge |= !strcmp(opt->name, "no-huge");
			in_memory |= !strcmp(opt->name, "in-memory");
		} else if (a[0] == '-' && a[1] && a[1] != '-') {
			for (const char *c = a + 1; *c; c++) {
				const char *sp = strchr(eal_short_opts, *c);

				if (!sp || *c == ':') {
					errf(err, errlen, "EAL argument %d ('%s'): -%c is not an EAL option", i, a, *c);
					return -EINVAL;
				}
				if (*c == 'h') {
					errf(err, errlen, "EAL argument %d ('%s'): would print the usage and exit", i, a);
					return -EINVAL;
				}
				if (sp[1] == ':') {
					if (!c[1]) {        /* the value is the next argument */
						if (i + 1 >= argc) {
							errf(err, errlen, "EAL argument %d ('%s'): -%c needs a value", i,
							     a, *c);
							return -EINVAL;
						}
						i++;
					}
					break;
				}
			}
		} else {
			errf(err, errlen, "EAL argument %d ('%s'): not an option (only EAL options go here)", i, a);
			return -EINVAL;
		}
	}
	if (no_huge && in_memory) {
		errf(err, errlen, "EAL arguments: --in-memory does not combine with --no-huge (DPDK 22.11); "
		     "give a --file-prefix unique to the process instead");
		return -EINVAL;
	}
	return argc;
}

/* The last non-empty line of the EAL's log, for err. */
static void last_line(const char *log, size_t n, char *out, size_t outlen)
{
	size_t end = n, start;

	while (end && (log[end - 1] == '\n' || log[end - 1] == ' '))
		end--;
	start = end;
	while (start && log[start - 1] != '\n')
		start--;
	snprintf(out, outlen, "%.*s", (int)(end - start), log + start);
}

int dpdk_eal_start(const char *args, char *err, size_t errlen)
{
	char buf[DPDK_EAL_MAX_LEN];
	char *argv[DPDK_EAL_MAX_ARGS];
	char *log = NULL, line[256] = "";
	size_t loglen = 0;
	FILE *f;
	int argc, r, e;

	argc = dpdk_eal_split(args, buf, sizeof(buf), argv, DPDK_EAL_MAX_ARGS, err, errlen);
	if (argc < 0)
		return argc;
	/* The EAL logs why it fails: keep its words for err, then pass them on. */
	f = open_memstream(&log, &loglen);
	if (f)
		rte_openlog_stream(f);
	r = rte_eal_init(argc, argv);
	e = rte_errno;
	if (f) {
		rte_openlog_stream(NULL);
		fclose(f);
		if (log && loglen) {
			fputs(log, stderr);
			last_line(log, loglen, line, sizeof(line));
		}
		free(log);
	}
	if (r >= 0)
		return 0;
	if (e == EALREADY) {
		errf(err, errlen, "EAL already started in this process");
		return -EALREADY;
	}
	errf(err, errlen, "EAL did not start (%s)%s%s; arguments: %s", rte_strerror(e), line[0] ? ": " : "",
	     line, args ? args : "");
	return e > 0 ? -e : -EINVAL;
}

void dpdk_eal_stop(void)
{
	rte_eal_cleanup();
}

int dpdk_eal_thread_register(void)
{
	if (rte_lcore_id() != LCORE_ID_ANY)
		return 0;
	if (rte_thread_register() < 0)
		return rte_errno > 0 ? -rte_errno : -ENOSPC;
	return rte_lcore_id() == LCORE_ID_ANY ? -ENOSPC : 0;
}

/* ---------------------------------------------------------------- port */

void dpdk_port_config_defaults(struct dpdk_port_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->shards = 1;
	cfg->replication = 1;
	cfg->rss = 1;
	cfg->csum_offload = 1;
	cfg->rx_desc = 1024;
	cfg->tx_desc = 1024;
	cfg->pool_cache = 256;
}

static void note(struct dpdk_port *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A fallback and its reason: kept in p->notes and said once on stderr. */
static void note(struct dpdk_port *p, const char *fmt, ...)
{
	size_t n = strlen(p->notes);
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->notes + n, sizeof(p->notes) - n, "%s%s", n ? "; " : "", msg);
	fprintf(stderr, "sluiced: dpdk port %s: %s\n", p->name, msg); /* style: allow start-up, once per fallback */
}

static int find_port(const struct dpdk_port_config *cfg, uint16_t *pid, char *err, size_t errlen)
{
	char names[256] = "";
	size_t n = 0;
	uint16_t id;

	if (cfg->device) {
		if (rte_eth_dev_get_port_by_name(cfg->device, pid) == 0)
			return 0;
	} else {
		RTE_ETH_FOREACH_DEV(id) {
			*pid = id;
			return 0;
		}
	}
	RTE_ETH_FOREACH_DEV(id) {
		char nm[RTE_ETH_NAME_MAX_LEN];

		if (rte_eth_dev_get_name_by_port(id, nm) == 0 && n < sizeof(names))
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "", nm);
	}
	errf(err, errlen, "no DPDK port %s%s%s (ports: %s); give the EAL a --vdev or bind a NIC to vfio-pci",
	     cfg->device ? "named '" : "at all", cfg->device ? cfg->device : "", cfg->device ? "'" : "",
	     n ? names : "none");
	return -ENODEV;
}

static void free_pools(struct dpdk_port *p)
{
	for (int s = 0; s < DPDK_PORT_MAX_SHARDS; s++) {
		rte_mempool_free(p->pools[s]);
		p->pools[s] = NULL;
	}
}

/* Client flows only on the client queues: the redirection table cycles
 * over 0..shards-1, so the replication queues get nothing from RSS. */
static void set_reta(struct dpdk_port *p)
{
	struct rte_eth_rss_reta_entry64 reta[RTE_ETH_RSS_RETA_SIZE_512 / RTE_ETH_RETA_GROUP_SIZE];
	int r;

	if (!p->reta_size || p->reta_size > RTE_ETH_RSS_RETA_SIZE_512) {
		note(p, "RSS redirection table not settable (size %u): RSS may also hash flows to the "
		     "replication queues", p->reta_size);
		return;
	}
	memset(reta, 0, sizeof(reta));
	for (uint16_t i = 0; i < p->reta_size; i++) {
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] = i % p->shards;
	}
	r = rte_eth_dev_rss_reta_update(p->port_id, reta, p->reta_size);
	if (r < 0) {
		note(p, "RSS redirection table update failed (%s): RSS may also hash flows to the "
		     "replication queues", strerror(-r));
		return;
	}
	p->reta_set = 1;
}

int dpdk_port_init(struct dpdk_port *p, const struct dpdk_port_config *cfg, char *err, size_t errlen)
{
	struct rte_eth_dev_info di;
	struct rte_eth_conf conf;
	struct rte_eth_link link;
	uint16_t pid, nq, mtu, nrxd, ntxd;
	uint32_t frame, room;
	int r;

	memset(p, 0, sizeof(*p));
	if (cfg->shards < 1 || cfg->shards > DPDK_PORT_MAX_SHARDS) {
		errf(err, errlen, "dpdk: %u shards: 1 to %d", cfg->shards, DPDK_PORT_MAX_SHARDS);
		return -EINVAL;
	}
	r = find_port(cfg, &pid, err, errlen);
	if (r < 0)
		return r;
	p->port_id = pid;
	rte_eth_dev_get_name_by_port(pid, p->name);
	r = rte_eth_dev_info_get(pid, &di);
	if (r < 0) {
		errf(err, errlen, "dpdk port %s: device info: %s", p->name, strerror(-r));
		return r;
	}
	snprintf(p->driver, sizeof(p->driver), "%s", di.driver_name ? di.driver_name : "?");
	p->socket = rte_eth_dev_socket_id(pid);
	p->shards = cfg->shards;
	p->max_rx_queues = di.max_rx_queues;
	p->max_tx_queues = di.max_tx_queues;
	p->rx_offload_capa = di.rx_offload_capa;
	p->tx_offload_capa = di.tx_offload_capa;
	p->rss_capa = di.flow_type_rss_offloads;
	p->min_mtu = di.min_mtu;
	p->max_mtu = di.max_mtu;
	p->max_rx_pktlen = di.max_rx_pktlen;

	/* Queues: a pair per shard, and a second per shard for replication. */
	nq = cfg->shards;
	if (di.max_rx_queues < nq || di.max_tx_queues < nq) {
		errf(err, errlen, "dpdk port %s (%s): %u RX / %u TX queues, fewer than the %u shards need "
		     "(lower shards= or use a port with more queues)", p->name, p->driver, di.max_rx_queues,
		     di.max_tx_queues, cfg->shards);
		return -EINVAL;
	}
	if (cfg->replication) {
		if (di.max_rx_queues >= 2 * nq && di.max_tx_queues >= 2 * nq) {
			nq = (uint16_t)(2 * nq);
			p->replication = 1;
		} else {
			note(p, "%u queue pairs (one per shard), no replication pairs: the port has %u RX / %u TX "
			     "queues, %u shards with replication need %u", nq, di.max_rx_queues, di.max_tx_queues,
			     cfg->shards, 2 * nq);
		}
	}

	memset(&conf, 0, sizeof(conf));
	/* RSS: client flows spread over the shards by their addresses and ports. */
	if (cfg->rss && cfg->shards > 1) {
		uint64_t hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & di.flow_type_rss_offloads;

		if (hf) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_hf = hf;
			p->rss = 1;
			p->rss_hf = hf;
		} else {
			note(p, "no RSS: the port hashes no IPv4/UDP flow type (capability %#" PRIx64 "); "
			     "flows are spread by flow rules or land on queue 0", di.flow_type_rss_offloads);
		}
	}
	/* Checksums: offloaded where the port can, in software elsewhere. */
	if (cfg->csum_offload) {
		uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;

		conf.rxmode.offloads = rx & di.rx_offload_capa;
		conf.txmode.offloads = tx & di.tx_offload_capa;
		if (conf.rxmode.offloads != rx || conf.txmode.offloads != tx)
			note(p, "checksums in software for%s%s%s%s (the port does not offload them)",
			     (di.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) ? "" : " RX IPv4",
			     (di.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) ? "" : " RX UDP",
			     (di.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) ? "" : " TX IPv4",
			     (di.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) ? "" : " TX UDP");
	}
	p->rx_offloads = conf.rxmode.offloads;
	p->tx_offloads = conf.txmode.offloads;

	/* MTU: jumbo frames when asked for and the port takes them (a frame
	 * in one mbuf: no scattered RX). */
	mtu = cfg->mtu ? cfg->mtu : RTE_ETHER_MTU;
	if (mtu < di.min_mtu || mtu < 68) {
		errf(err, errlen, "dpdk port %s: mtu %u below the port's minimum %u", p->name, mtu, di.min_mtu);
		return -EINVAL;
	}
	{
		uint32_t max = di.max_mtu;
		uint32_t by_len = di.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN
					  ? di.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN : RTE_ETHER_MTU;

		if (by_len < max)
			max = by_len;
		if (max > 9600)
			max = 9600;   /* one mbuf per frame: keep the pools sane */
		if (mtu > max) {
			/* a port whose frames end near 1518 (VLAN slack) has no
			 * jumbo frames: the standard 1500, not its odd maximum */
			uint32_t use = max < 2000 ? RTE_ETHER_MTU : max;

			note(p, "mtu %u asked, %u used: %s (max_mtu %u, max_rx_pktlen %u)", mtu, use,
			     max < 2000 ? "the port takes no jumbo frames" : "the port's largest", di.max_mtu,
			     di.max_rx_pktlen);
			mtu = (uint16_t)use;
		}
	}
	conf.rxmode.mtu = mtu;
	frame = (uint32_t)mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 2 * 4;   /* two VLAN tags */
	room = RTE_PKTMBUF_HEADROOM + (frame < 2048 ? 2048 : RTE_ALIGN_CEIL(frame, 1024));
	p->data_room = (uint16_t)room;

	r = rte_eth_dev_configure(pid, nq, nq, &conf);
	if (r < 0 && p->rss) {
		note(p, "RSS refused at configure (%s): one queue gets every flow", strerror(-r));
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
		conf.rx_adv_conf.rss_conf.rss_hf = 0;
		p->rss = 0;
		p->rss_hf = 0;
		r = rte_eth_dev_configure(pid, nq, nq, &conf);
	}
	if (r < 0) {
		errf(err, errlen, "dpdk port %s (%s): configure %u queue pairs, mtu %u, rx offloads %#" PRIx64
		     ", tx offloads %#" PRIx64 ": %s", p->name, p->driver, nq, mtu, conf.rxmode.offloads,
		     conf.txmode.offloads, strerror(-r));
		return r;
	}
	nrxd = cfg->rx_desc ? cfg->rx_desc : 1024;
	ntxd = cfg->tx_desc ? cfg->tx_desc : 1024;
	r = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrxd, &ntxd);
	if (r < 0) {
		errf(err, errlen, "dpdk port %s: descriptor counts %u/%u: %s", p->name, nrxd, ntxd, strerror(-r));
		goto fail_close;
	}
	p->rx_desc = nrxd;
	p->tx_desc = ntxd;

	/* One pool per shard, on the port's socket, for both its pairs. */
	p->pool_mbufs = cfg->pool_mbufs;
	if (!p->pool_mbufs)
		p->pool_mbufs = (uint32_t)(nq / cfg->shards) * (nrxd + ntxd) + 1024;
	/* DPDK wants a cache no larger than a pool / 1.5 and RTE_MEMPOOL_CACHE_MAX_SIZE */
	unsigned cache = cfg->pool_cache;

	if (cache > p->pool_mbufs * 2 / 3)
		cache = p->pool_mbufs * 2 / 3;
	if (cache > RTE_MEMPOOL_CACHE_MAX_SIZE)
		cache = RTE_MEMPOOL_CACHE_MAX_SIZE;
	for (uint16_t s = 0; s < cfg->shards; s++) {
		char name[RTE_MEMPOOL_NAMESIZE];

		snprintf(name, sizeof(name), "sl_p%u_s%u", pid, s);
		p->pools[s] = rte_pktmbuf_pool_create(name, p->pool_mbufs, cache, 0, (uint16_t)room,
						      p->socket);
		if (!p->pools[s]) {
			r = rte_errno > 0 ? -rte_errno : -ENOMEM;
			errf(err, errlen, "dpdk port %s: mbuf pool %s (%u mbufs of %u bytes, socket %d) for shard %u: "
			     "%s (raise -m / hugepages, or lower shards, rx/tx descriptors or pool size)", p->name,
			     name, p->pool_mbufs, room, p->socket, s, rte_strerror(-r));
			goto fail_pools;
		}
	}

	for (uint16_t q = 0; q < nq; q++) {
		uint16_t s = (uint16_t)(q % cfg->shards);
		struct rte_eth_rxconf rxc = di.default_rxconf;
		struct rte_eth_txconf txc = di.default_txconf;

		rxc.offloads = conf.rxmode.offloads;
		txc.offloads = conf.txmode.offloads;
		r = rte_eth_rx_queue_setup(pid, q, nrxd, p->socket, &rxc, p->pools[s]);
		if (r < 0) {
			errf(err, errlen, "dpdk port %s: RX queue %u (%u descriptors): %s", p->name, q, nrxd,
			     strerror(-r));
			goto fail_pools;
		}
		r = rte_eth_tx_queue_setup(pid, q, ntxd, p->socket, &txc);
		if (r < 0) {
			errf(err, errlen, "dpdk port %s: TX queue %u (%u descriptors): %s", p->name, q, ntxd,
			     strerror(-r));
			goto fail_pools;
		}
	}
	r = rte_eth_dev_start(pid);
	if (r < 0) {
		errf(err, errlen, "dpdk port %s (%s): start: %s", p->name, p->driver, strerror(-r));
		goto fail_pools;
	}
	p->queue_pairs = nq;   /* from here on dpdk_port_fini undoes it all */
	p->any_queue = !strcmp(p->driver, "net_tap");
	if (!strcmp(p->driver, "net_tap") && nq > 1)
		note(p, "net_tap: the kernel picks the RX queue (its own flow hash over all %u queues; RSS and "
		     "its table do not apply), so client flows can arrive on replication queues", nq);
	if (p->rss) {
		struct rte_eth_dev_info di2;

		if (rte_eth_dev_info_get(pid, &di2) == 0)
			p->reta_size = di2.reta_size;
		if (p->replication && strcmp(p->driver, "net_tap"))
			set_reta(p);
	}
	rte_eth_macaddr_get(pid, &p->mac);
	if (!rte_is_valid_assigned_ether_addr(&p->mac)) {
		/* net_ring has none: a random locally administered one */
		struct rte_ether_addr m;

		rte_eth_random_addr(m.addr_bytes);
		r = rte_eth_dev_default_mac_addr_set(pid, &m);
		p->mac = m;
		note(p, "the port had no MAC address: a random one, %s", r == 0 ? "set on the port"
		     : "for our stack only (the port refused to take it)");
	}
	if (rte_eth_dev_get_mtu(pid, &p->mtu) < 0)
		p->mtu = mtu;
	if (p->mtu != mtu)
		note(p, "mtu %u configured, the port reports %u", mtu, p->mtu);
	memset(&link, 0, sizeof(link));
	if (rte_eth_link_get_nowait(pid, &link) == 0) {
		p->link_up = link.link_status == RTE_ETH_LINK_UP;
		p->link_speed = link.link_speed;
	}
	return 0;

fail_pools:
	rte_eth_dev_stop(pid);
fail_close:
	rte_eth_dev_close(pid);
	free_pools(p);
	return r;
}

void dpdk_port_fini(struct dpdk_port *p)
{
	if (!p->queue_pairs)
		return;
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
	free_pools(p);
	p->queue_pairs = 0;
}

/* The offload bits this module cares about, by name. */
static int offload_names(char *buf, size_t len, uint64_t v, int tx)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} rx_names[] = {
		{ RTE_ETH_RX_OFFLOAD_IPV4_CKSUM, "ipv4-cksum" }, { RTE_ETH_RX_OFFLOAD_UDP_CKSUM, "udp-cksum" },
		{ RTE_ETH_RX_OFFLOAD_TCP_CKSUM, "tcp-cksum" },   { RTE_ETH_RX_OFFLOAD_SCATTER, "scatter" },
		{ RTE_ETH_RX_OFFLOAD_RSS_HASH, "rss-hash" },     { RTE_ETH_RX_OFFLOAD_VLAN_STRIP, "vlan-strip" },
	}, tx_names[] = {
		{ RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, "ipv4-cksum" }, { RTE_ETH_TX_OFFLOAD_UDP_CKSUM, "udp-cksum" },
		{ RTE_ETH_TX_OFFLOAD_TCP_CKSUM, "tcp-cksum" },   { RTE_ETH_TX_OFFLOAD_TCP_TSO, "tso" },
		{ RTE_ETH_TX_OFFLOAD_MULTI_SEGS, "multi-segs" }, { RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE, "fast-free" },
	};
	const size_t n = tx ? sizeof(tx_names) / sizeof(tx_names[0]) : sizeof(rx_names) / sizeof(rx_names[0]);
	int o = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t bit = tx ? tx_names[i].bit : rx_names[i].bit;

		if ((v & bit) && (size_t)o < len)
			o += snprintf(buf + o, len - (size_t)o, "%s%s", o ? "," : "",
				      tx ? tx_names[i].name : rx_names[i].name);
	}
	if (!o)
		o = snprintf(buf, len, "none");
	return o;
}

int dpdk_port_describe(const struct dpdk_port *p, char *buf, size_t len)
{
	char rxc[128], txc[128], rxe[128], txe[128];
	const uint8_t *m = p->mac.addr_bytes;

	offload_names(rxc, sizeof(rxc), p->rx_offload_capa, 0);
	offload_names(txc, sizeof(txc), p->tx_offload_capa, 1);
	offload_names(rxe, sizeof(rxe), p->rx_offloads, 0);
	offload_names(txe, sizeof(txe), p->tx_offloads, 1);
	return snprintf(buf, len,
			"port %u %s (driver %s, socket %d) mac %02x:%02x:%02x:%02x:%02x:%02x; "
			"queues: %u pairs for %u shards%s (port max %u RX / %u TX), %u/%u descriptors; "
			"RSS %s (hash %#" PRIx64 " of capability %#" PRIx64 ", redirection table %u%s); "
			"RX offloads %s (enabled %s); TX offloads %s (enabled %s); "
			"mtu %u (port %u..%u, max frame %u); pools %u mbufs x %u bytes per shard; "
			"link %s %u Mb/s%s%s",
			p->port_id, p->name, p->driver, p->socket, m[0], m[1], m[2], m[3], m[4], m[5], p->queue_pairs,
			p->shards, p->replication ? " + replication" : "", p->max_rx_queues, p->max_tx_queues,
			p->rx_desc, p->tx_desc, p->rss ? "on" : "off", p->rss_hf, p->rss_capa, p->reta_size,
			p->reta_set ? ", client queues only" : "", rxc, rxe, txc, txe, p->mtu, p->min_mtu, p->max_mtu,
			p->max_rx_pktlen, p->pool_mbufs, p->data_room, p->link_up ? "up" : "down", p->link_speed,
			p->notes[0] ? "; notes: " : "", p->notes);
}

int dpdk_port_queue(const struct dpdk_port *p, uint16_t shard, int replication, struct dpdk_queue *q)
{
	if (shard >= p->shards)
		return -EINVAL;
	if (replication && !p->replication)
		return -ENOENT;
	memset(q, 0, sizeof(*q));
	q->port_id = p->port_id;
	q->queue_id = (uint16_t)(replication ? p->shards + shard : shard);
	q->pool = p->pools[shard];
	q->rx_offloads = p->rx_offloads;
	q->tx_offloads = p->tx_offloads;
	q->mac = p->mac;
	q->mtu = p->mtu;
	return 0;
}
