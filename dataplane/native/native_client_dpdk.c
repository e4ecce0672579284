/* dataplane/native/native_client_dpdk.c — the DPDK transport of
 * libsluice_native (native_client.h): the client's own DPDK port
 * (dataplane/dpdk_port.c, one queue pair: queue 0) and the little stack on
 * it (dataplane/netstack.c: ARP, ICMP echo, IPv4 and UDP with checksums).
 *
 * Transmit is zero copy: tx_get lends the data area of a fresh mbuf (its
 * headroom, at least NETSTACK_HDR_LEN, left for the headers), tx_put hands
 * the mbuf to the stack (netstack_udp_send_mbuf), tx_flush gives the
 * stack's queue to the port. Receive: rx_burst polls the port and runs the
 * stack, whose UDP callback keeps each datagram from the broker's address
 * and port in its mbuf, in a ring; rx_burst lends the payloads and rx_done
 * frees the mbufs. wait busy-polls the queue and runs the stack's timers
 * (ARP) until a datagram is kept or the time is up: there is no
 * descriptor (fd is -1).
 *
 * The EAL is the process's: started once, never again after
 * rte_eal_cleanup (DPDK's rule). A client uses the one the application
 * started (dpdk_eal_args NULL) or starts it; the clients using an EAL this
 * library started are counted and the last to close stops it. A connect
 * that fails after starting the EAL leaves it running for the next one.
 *
 * Thread: the client's. The process-wide EAL counters below are touched by
 * connect and close only, which sluice_native.h asks to run on one thread
 * at a time; atomics keep them coherent between threads taking turns.
 * Owns: the port (closed at destroy: a net_tap interface goes away), the
 * stack, the transmit mbuf it lends and the received mbufs it keeps.
 * Errors: 0/count or -errno; at create err names the key or the step
 * that failed.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "dataplane/dpdk_port.h"
#include "dataplane/native/native_client.h"
#include "dataplane/netstack.h"

#define DPDK_HELD 512                 /* received datagrams kept until lent (power of 2) */
#define DPDK_RX_BURST 32              /* frames per rte_eth_rx_burst */
#define DPDK_TX_BURST 64              /* datagrams queued in the stack that trigger a flush */
#define IP_UDP_HDR 28                 /* IPv4 (no options) + UDP */

static_assert(RTE_PKTMBUF_HEADROOM >= NETSTACK_HDR_LEN, "a fresh mbuf has room for the headers");
static_assert((DPDK_HELD & (DPDK_HELD - 1)) == 0, "the ring's index is masked");

/* The EAL this library started, process-wide (see the top): eal_ours while
 * it runs, eal_users the clients using it, eal_spent once stopped. */
static int eal_ours;
static unsigned eal_users;
static int eal_spent;
static unsigned local_seq;            /* successive clients' local ports */

/* A datagram from the broker, in its mbuf. */
struct held_dgram {
	struct rte_mbuf *m;
	const uint8_t *p;             /* the payload inside m */
	uint32_t len;
};

struct dpdk_transport {
	struct native_transport t;
	struct dpdk_port port;
	struct dpdk_queue q;          /* queue 0 of port: sent on, received on */
	struct dpdk_queue rq[DPDK_PORT_MAX_SHARDS];   /* every queue received on (rq[0] = q) */
	uint16_t nq;
	struct netstack ns;
	uint32_t broker_ip;           /* network order */
	uint16_t broker_port, local_port;
	uint16_t mtu;                 /* the port's IP MTU */
	uint64_t now;                 /* ns, refreshed by rx_burst, tx_flush and wait */
	struct rte_mbuf *lent;        /* lent by tx_get, not yet put (reused by the next tx_get) */
	/* kept datagrams: ring[(head + i) & (DPDK_HELD - 1)], i < nheld. Only
	 * rx_burst and wait pull from the port, and only while a whole burst
	 * fits, so the callback never finds the ring full. */
	struct held_dgram ring[DPDK_HELD];
	unsigned head, nheld;
	uint8_t port_open, ns_open, eal_user, registered;
	pthread_t reg_thread;         /* the thread given an lcore id (registered) */
	uint64_t tx_nobufs;           /* tx_get found the pool empty */
	uint64_t udp_reported;        /* the stack's udp_tx at the last tx_flush */
	uint64_t rx_foreign;          /* datagrams to our port from elsewhere */
	uint64_t rx_overflow;         /* the ring was full (never, by the rule above) */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct dpdk_transport *dpdk_of(struct native_transport *t)
{
	return (struct dpdk_transport *)t;
}

/* ---- configuration (no EAL) ----------------------------------------------------------------- */

static int parse_ipv4(const char *s, size_t n, uint32_t *ip)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr a;

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*ip = a.s_addr;
	return 0;
}

/* A decimal number of at most 5 digits, all of s[0..n). */
static long parse_small(const char *s, size_t n)
{
	long v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int unicast(uint32_t ip)
{
	uint32_t h = ntohl(ip);

	return h != 0 && h != 0xffffffffu && (h >> 28) != 0xe;   /* not 0, broadcast, multicast */
}

int native_dpdk_parse_cidr(const char *key, const char *s, uint32_t *ip, uint32_t *netmask, char *err,
			   size_t errlen)
{
	const char *slash = s ? strchr(s, '/') : NULL;
	uint32_t a, m;
	long pfx;

	if (!s || !*s) {
		snprintf(err, errlen, "%s is missing: the client's IPv4 address with its prefix, e.g. 10.7.0.2/24",
			 key);
		return -EINVAL;
	}
	if (!slash) {
		snprintf(err, errlen, "%s '%s' has no prefix: give it as address/prefix, e.g. 10.7.0.2/24", key, s);
		return -EINVAL;
	}
	if (parse_ipv4(s, (size_t)(slash - s), &a) < 0 || !unicast(a)) {
		snprintf(err, errlen, "%s '%s': '%.*s' is not a unicast IPv4 address", key, s, (int)(slash - s), s);
		return -EINVAL;
	}
	pfx = parse_small(slash + 1, strlen(slash + 1));
	if (pfx < 0 || pfx > 32) {
		snprintf(err, errlen, "%s '%s': the prefix '%s' is not 0-32", key, s, slash + 1);
		return -EINVAL;
	}
	m = pfx ? htonl(0xffffffffu << (32 - pfx)) : 0;
	if (pfx <= 30 && ((a & ~m) == 0 || (a | m) == 0xffffffffu)) {
		snprintf(err, errlen, "%s '%s' is the %s address of its subnet", key, s,
			 (a & ~m) == 0 ? "network" : "broadcast");
		return -EINVAL;
	}
	*ip = a;
	*netmask = m;
	return 0;
}

int native_dpdk_parse_hostport(const char *key, const char *s, uint32_t *ip, uint16_t *port, char *err,
			       size_t errlen)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	long p;

	if (!colon || parse_ipv4(s, (size_t)(colon - s), ip) < 0 || !unicast(*ip)) {
		snprintf(err, errlen, "%s '%s' is not a.b.c.d:port (a unicast IPv4 address: the DPDK transport "
			 "resolves no names)", key, s ? s : "(null)");
		return -EINVAL;
	}
	p = parse_small(colon + 1, strlen(colon + 1));
	if (p < 1 || p > 65535) {
		snprintf(err, errlen, "%s '%s': the port '%s' is not 1-65535", key, s, colon + 1);
		return -EINVAL;
	}
	*port = (uint16_t)p;
	return 0;
}

uint16_t native_dpdk_local_port(uint32_t pid, uint32_t seq)
{
	return (uint16_t)(49152u + (pid * 31u + seq * 4099u) % 16384u);
}

/* ---- receive ------------------------------------------------------------------------------ */

/* netstack's on_udp: keep the broker's datagrams (what a connected socket
 * would take), leave the rest to the stack to free. */
static int dpdk_on_udp(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		       struct rte_mbuf *m)
{
	struct dpdk_transport *d = arg;

	if (src_ip != d->broker_ip || src_port != d->broker_port) {
		d->rx_foreign++;
		return 0;
	}
	if (d->nheld == DPDK_HELD) {
		d->rx_overflow++;
		return 0;
	}
	d->ring[(d->head + d->nheld++) & (DPDK_HELD - 1)] = (struct held_dgram){ m, payload, len };
	return 1;
}

/* Poll the port while fewer than want datagrams are kept, a whole burst
 * fits in the ring and the port gives full bursts. */
static void dpdk_pull(struct dpdk_transport *d, unsigned want)
{
	struct rte_mbuf *pkts[DPDK_RX_BURST];

	for (uint16_t q = 0; q < d->nq; q++)
		while (d->nheld < want && DPDK_HELD - d->nheld >= DPDK_RX_BURST) {
			uint16_t n = dpdk_queue_rx(&d->rq[q], pkts, DPDK_RX_BURST);

			if (!n)
				break;
			netstack_rx(&d->ns, pkts, n, d->now);
			if (n < DPDK_RX_BURST)
				break;
		}
}

static int dpdk_rx_burst(struct native_transport *t, struct native_dgram *out, unsigned n)
{
	struct dpdk_transport *d = dpdk_of(t);

	d->now = mono_ns();
	dpdk_pull(d, n);
	if (n > d->nheld)
		n = d->nheld;
	for (unsigned i = 0; i < n; i++) {
		const struct held_dgram *h = &d->ring[d->head];

		out[i] = (struct native_dgram){ .data = (uint8_t *)(uintptr_t)h->p, .len = h->len, .cap = h->len,
						.priv = h->m };
		d->head = (d->head + 1) & (DPDK_HELD - 1);
	}
	d->nheld -= n;
	return (int)n;
}

static void dpdk_rx_done(struct native_transport *t, struct native_dgram *dg, unsigned n)
{
	(void)t;
	for (unsigned i = 0; i < n; i++) {
		rte_pktmbuf_free((struct rte_mbuf *)dg[i].priv);
		dg[i].priv = NULL;
	}
}

/* ---- transmit ----------------------------------------------------------------------------- */

static int dpdk_tx_get(struct native_transport *t, struct native_dgram *dg)
{
	struct dpdk_transport *d = dpdk_of(t);
	struct rte_mbuf *m = d->lent;

	if (!m) {
		m = rte_pktmbuf_alloc(d->q.pool);
		if (!m) {
			/* mbufs the port is done with come back as it sends */
			netstack_flush(&d->ns);
			m = rte_pktmbuf_alloc(d->q.pool);
		}
		if (!m) {
			d->tx_nobufs++;
			return -ENOBUFS;
		}
		d->lent = m;
	}
	dg->data = rte_pktmbuf_mtod(m, uint8_t *);
	dg->cap = rte_pktmbuf_tailroom(m);
	dg->len = 0;
	dg->priv = m;
	return 0;
}

static void dpdk_tx_put(struct native_transport *t, struct native_dgram *dg)
{
	struct dpdk_transport *d = dpdk_of(t);
	struct rte_mbuf *m = dg->priv;

	d->lent = NULL;
	dg->priv = NULL;
	if (!m)
		return;
	if (!dg->len || dg->len > UINT16_MAX || !rte_pktmbuf_append(m, (uint16_t)dg->len)) {
		rte_pktmbuf_free(m);
		return;
	}
	/* a full queue: the port's ring drains as the far end polls it;
	 * wait for room (at most 2 ms: a broker busy with a long write)
	 * rather than drop a datagram — a batch missing a fragment is
	 * resent whole, and the batches behind it on its partition are
	 * refused as out of order and resent too */
	for (uint64_t end = 0; d->ns.ntx >= NETSTACK_TXQ_MAX;) {
		uint64_t now;

		netstack_flush(&d->ns);
		if (d->ns.ntx < NETSTACK_TXQ_MAX)
			break;
		now = mono_ns();
		if (!end)
			end = now + 2000000;
		else if (now >= end)
			break;
		rte_pause();
	}
	/* takes m whatever happens; refusals land in the stack's counters */
	netstack_udp_send_mbuf(&d->ns, m, d->broker_ip, d->broker_port, d->local_port, d->now);
	if (d->ns.ntx >= DPDK_TX_BURST)
		netstack_flush(&d->ns);
}

static int dpdk_tx_flush(struct native_transport *t)
{
	struct dpdk_transport *d = dpdk_of(t);
	uint32_t sent;

	d->now = mono_ns();
	netstack_poll(&d->ns, d->now);
	/* a full TX ring empties as the port sends; what it still refuses
	 * stays queued for the next flush */
	for (int i = 0; i < 4 && d->ns.ntx; i++)
		netstack_flush(&d->ns);
	/* the datagrams sent since the last flush, those tx_put already
	 * handed to the port included (not ARP) */
	sent = (uint32_t)(d->ns.stats.udp_tx - d->udp_reported);
	d->udp_reported = d->ns.stats.udp_tx;
	return (int)sent;
}

static int dpdk_wait(struct native_transport *t, int timeout_ms)
{
	struct dpdk_transport *d = dpdk_of(t);
	uint64_t end = timeout_ms < 0 ? UINT64_MAX : mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		d->now = mono_ns();
		dpdk_pull(d, 1);
		netstack_poll(&d->ns, d->now);
		if (d->nheld)
			return 1;
		if (d->now >= end)
			return 0;
		rte_pause();
	}
}

static int dpdk_path_mtu(struct native_transport *t)
{
	struct dpdk_transport *d = dpdk_of(t);

	return d->mtu > IP_UDP_HDR ? d->mtu - IP_UDP_HDR : 0;
}

static int dpdk_fd(struct native_transport *t)
{
	(void)t;
	return -1;
}

static void dpdk_stats(struct native_transport *t, struct sluice_stats *st)
{
	struct dpdk_transport *d = dpdk_of(t);
	const uint64_t *drop = d->ns.stats.drop;

	st->tx_dropped += d->tx_nobufs + drop[NETSTACK_DROP_NO_ARP] + drop[NETSTACK_DROP_ARP_TIMEOUT] +
			  drop[NETSTACK_DROP_TX_FULL] + drop[NETSTACK_DROP_NOBUFS] + drop[NETSTACK_DROP_TOO_BIG];
}

/* ---- life --------------------------------------------------------------------------------- */

static void dpdk_destroy(struct native_transport *t)
{
	struct dpdk_transport *d = dpdk_of(t);

	if (!d)
		return;
	if (d->ns_open)
		for (int i = 0; i < 8 && d->ns.ntx; i++)
			netstack_flush(&d->ns);
	if (d->lent)
		rte_pktmbuf_free(d->lent);
	for (; d->nheld; d->nheld--) {
		rte_pktmbuf_free(d->ring[d->head].m);
		d->head = (d->head + 1) & (DPDK_HELD - 1);
	}
	if (d->ns_open)
		netstack_fini(&d->ns);
	if (d->port_open)
		dpdk_port_fini(&d->port);
	if (d->registered && pthread_equal(d->reg_thread, pthread_self()))
		rte_thread_unregister();
	if (d->eal_user && __atomic_sub_fetch(&eal_users, 1, __ATOMIC_ACQ_REL) == 0 &&
	    __atomic_load_n(&eal_ours, __ATOMIC_ACQUIRE)) {
		char runtime[512];

		/* the EAL leaves its (empty, with --no-shconf) runtime directory */
		snprintf(runtime, sizeof(runtime), "%s", rte_eal_get_runtime_dir());
		dpdk_eal_stop();
		__atomic_store_n(&eal_ours, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&eal_spent, 1, __ATOMIC_RELEASE);
		if (runtime[0])
			rmdir(runtime);
	}
	free(d);
}

static const struct native_transport_ops dpdk_ops = {
	.name = "dpdk",
	.tx_get = dpdk_tx_get,
	.tx_put = dpdk_tx_put,
	.tx_flush = dpdk_tx_flush,
	.rx_burst = dpdk_rx_burst,
	.rx_done = dpdk_rx_done,
	.wait = dpdk_wait,
	.path_mtu = dpdk_path_mtu,
	.fd = dpdk_fd,
	.stats = dpdk_stats,
	.destroy = dpdk_destroy,
};

/* The addresses of cfg and host_port, checked against each other. */
static int dpdk_addresses(const char *host_port, const struct sluice_config *cfg, struct netstack_config *nc,
			  uint32_t *bip, uint16_t *bport, char *err, size_t errlen)
{
	char net[INET_ADDRSTRLEN];
	int rc;

	rc = native_dpdk_parse_hostport("the broker address", host_port, bip, bport, err, errlen);
	if (rc < 0)
		return rc;
	rc = native_dpdk_parse_cidr("dpdk_address", cfg->dpdk_address, &nc->ip, &nc->netmask, err, errlen);
	if (rc < 0)
		return rc;
	{
		struct in_addr a = { .s_addr = nc->ip & nc->netmask };

		inet_ntop(AF_INET, &a, net, sizeof(net));
	}
	nc->gateway = 0;
	if (cfg->dpdk_gateway) {
		if (parse_ipv4(cfg->dpdk_gateway, strlen(cfg->dpdk_gateway), &nc->gateway) < 0 ||
		    !unicast(nc->gateway)) {
			snprintf(err, errlen, "dpdk_gateway '%s' is not a unicast IPv4 address", cfg->dpdk_gateway);
			return -EINVAL;
		}
		if (((nc->gateway ^ nc->ip) & nc->netmask) != 0 || nc->gateway == nc->ip) {
			snprintf(err, errlen, "dpdk_gateway %s is not another address of dpdk_address %s's subnet %s",
				 cfg->dpdk_gateway, cfg->dpdk_address, net);
			return -EINVAL;
		}
	}
	if (*bip == nc->ip) {
		snprintf(err, errlen, "the broker address %s is dpdk_address %s itself", host_port, cfg->dpdk_address);
		return -EINVAL;
	}
	if (((*bip ^ nc->ip) & nc->netmask) != 0 && !nc->gateway) {
		snprintf(err, errlen, "the broker %s is outside dpdk_address %s's subnet %s and dpdk_gateway is not "
			 "set", host_port, cfg->dpdk_address, net);
		return -EINVAL;
	}
	return 0;
}

/* Start the EAL or find the application's. */
static int dpdk_eal(struct dpdk_transport *d, const struct sluice_config *cfg, char *err, size_t errlen)
{
	char e[512];
	int rc;

	if (__atomic_load_n(&eal_spent, __ATOMIC_ACQUIRE)) {
		snprintf(err, errlen, "the EAL this library started stopped when its last client closed, and DPDK "
			 "cannot start it twice in one process: start the EAL in the application (rte_eal_init) "
			 "and leave dpdk_eal_args NULL");
		return -EALREADY;
	}
	if (!cfg->dpdk_eal_args) {
		if (rte_lcore_count() == 0) {
			snprintf(err, errlen, "dpdk_eal_args is NULL but no EAL runs in this process: give the EAL's "
				 "arguments or call rte_eal_init before sluice_connect");
			return -ENODEV;
		}
		return 0;
	}
	rc = dpdk_eal_start(cfg->dpdk_eal_args, e, sizeof(e));
	if (rc < 0 && rc != -EALREADY) {
		snprintf(err, errlen, "dpdk_eal_args: %s", e);
		return rc;
	}
	/* -EALREADY: running already, ours (shared) or the application's */
	if (rc == 0)
		__atomic_store_n(&eal_ours, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&eal_ours, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&eal_users, 1, __ATOMIC_ACQ_REL);
		d->eal_user = 1;
	}
	return 0;
}

int native_dpdk_create(const char *host_port, const struct sluice_config *cfg, struct native_transport **out,
		       char *err, size_t errlen)
{
	struct dpdk_port_config pc;
	struct netstack_config nc;
	struct dpdk_transport *d;
	uint32_t bip;
	uint16_t bport;
	char e[768];
	int rc;

	netstack_config_defaults(&nc);
	rc = dpdk_addresses(host_port, cfg, &nc, &bip, &bport, err, errlen);
	if (rc < 0)
		return rc;
	d = calloc(1, sizeof(*d)); /* style: allow setup */
	if (!d) {
		snprintf(err, errlen, "no memory for the DPDK transport");
		return -ENOMEM;
	}
	d->t.ops = &dpdk_ops;
	d->broker_ip = bip;
	d->broker_port = bport;
	d->local_port = cfg->dpdk_udp_port ? cfg->dpdk_udp_port
			: native_dpdk_local_port((uint32_t)getpid(), __atomic_fetch_add(&local_seq, 1, __ATOMIC_RELAXED));
	rc = dpdk_eal(d, cfg, err, errlen);
	if (rc < 0)
		goto fail;
	/* the pools' per-lcore caches serve threads with an lcore id only;
	 * without one (none left) everything still works, uncached */
	if (rte_lcore_id() == LCORE_ID_ANY && dpdk_eal_thread_register() == 0) {
		d->registered = 1;
		d->reg_thread = pthread_self();
	}
	dpdk_port_config_defaults(&pc);
	pc.device = cfg->dpdk_device;
	d->nq = cfg->dpdk_queues ? cfg->dpdk_queues : 1;
	if (d->nq > DPDK_PORT_MAX_SHARDS) {
		snprintf(err, errlen, "dpdk_queues %u: at most %d", d->nq, DPDK_PORT_MAX_SHARDS);
		rc = -EINVAL;
		goto fail;
	}
	pc.shards = d->nq;
	pc.replication = 0;
	pc.rss = 0;
	pc.mtu = cfg->dpdk_mtu;
	rc = dpdk_port_init(&d->port, &pc, e, sizeof(e));
	if (rc < 0) {
		snprintf(err, errlen, "dpdk_device %s: %s", cfg->dpdk_device ? cfg->dpdk_device : "(first port)", e);
		goto fail;
	}
	d->port_open = 1;
	rc = dpdk_port_queue(&d->port, 0, 0, &d->q);
	if (rc < 0) {
		snprintf(err, errlen, "dpdk port %s: queue 0: %s", d->port.name, strerror(-rc));
		goto fail;
	}
	for (uint16_t q = 0; q < d->nq; q++)
		if ((rc = dpdk_port_queue(&d->port, q, 0, &d->rq[q])) < 0) {
			snprintf(err, errlen, "dpdk port %s: queue %u: %s", d->port.name, q, strerror(-rc));
			goto fail;
		}
	d->mtu = d->q.mtu;
	nc.mac = d->q.mac;
	nc.udp_port = d->local_port;
	nc.mtu = d->q.mtu;
	nc.rx_offloads = d->q.rx_offloads;
	nc.tx_offloads = d->q.tx_offloads;
	nc.udp_cksum_none = 1;   /* every native datagram carries its CRC-32C */
	nc.pool = d->q.pool;
	nc.tx = dpdk_queue_tx;
	nc.tx_arg = &d->q;
	nc.on_udp = dpdk_on_udp;
	nc.udp_arg = d;
	rc = netstack_init(&d->ns, &nc);
	if (rc < 0) {
		snprintf(err, errlen, "dpdk port %s: network stack: %s", d->port.name, strerror(-rc));
		goto fail;
	}
	d->ns_open = 1;
	d->now = mono_ns();
	*out = &d->t;
	return 0;
fail:
	/* an EAL started here stays up for the next connect (DPDK cannot start
	 * it again): this client just stops counting */
	if (d->eal_user) {
		__atomic_sub_fetch(&eal_users, 1, __ATOMIC_ACQ_REL);
		d->eal_user = 0;
	}
	dpdk_destroy(&d->t);
	return rc;
}
