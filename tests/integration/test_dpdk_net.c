/* tests/integration/test_dpdk_net.c — dataplane/dpdk_port and
 * dataplane/netstack on a real EAL (no hugepages, no NIC):
 *
 *  tap:   net_tap gives the kernel an interface facing our port. The kernel
 *         pings our address (its ARP request, our reply, ICMP echo through
 *         our stack); a kernel UDP socket sends datagrams to our address and
 *         port and our callback must get every one intact; our UDP sends
 *         (software checksums, then offloaded ones) must reach a kernel
 *         socket (the kernel drops bad checksums, and InCsumErrors must not
 *         move); our ARP request for the kernel's address is answered;
 *         frames injected on the interface (bad checksums, a fragment, the
 *         wrong MAC or port) land in their drop counters.
 *  memif: two processes, each its own EAL, one port each (server, client)
 *         joined by net_memif: ARP between the two stacks, then thousands
 *         of UDP datagrams echoed back, every one checked.
 *  ring:  (in the tap process) net_ring's 16 queues: too few for 17 shards,
 *         enough for 9 without replication pairs; a port without a MAC;
 *         jumbo frames (mtu 9000) looped back through the port.
 *  eal:   a bad --vdev and an unknown option, each named in the error.
 *
 * The EAL starts once per process, so each scenario runs in a child of
 * its own (fork before any DPDK call). Not Criterion: one EAL, one program.
 * Output: "ok - ..." / "FAIL - ..." lines, the ports' reports ("port: ..."),
 * and "dpdk_net: N passed, N failed". Where the EAL cannot start (not
 * root, no /dev/net/tun, EAL refuses) it prints "SKIPPED: <why>" and exits
 * 0: reported, never silently passed.
 *
 * Thread (tap): a polling thread owns the queues and stacks (the shard);
 * the main thread plays the kernel's side and talks to it only through a
 * one-slot command mailbox. Cleans up the tap interface and the EAL's
 * runtime directory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip_icmp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_random.h>

#include "tests/integration/plain_check.h"
#include "dataplane/dpdk_port.h"
#include "dataplane/netstack.h"

#define SKIP_EXIT 77
#define OUR_PORT 9093


static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			printf("note: writing %s: %s\n", path, strerror(errno));
		close(fd);
	}
}

/* /proc/net/snmp: the value of column col of the "Udp:" rows. */
static long long udp_snmp(const char *col)
{
	FILE *f = fopen("/proc/net/snmp", "r");
	char hdr[1024], val[1024];
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(hdr, sizeof(hdr), f)) {
		if (strncmp(hdr, "Udp: ", 5) || !fgets(val, sizeof(val), f))
			continue;
		char *hs, *vs, *h = strtok_r(hdr, " \n", &hs), *x = strtok_r(val, " \n", &vs);

		while (h && x) {
			if (!strcmp(h, col))
				v = atoll(x);
			h = strtok_r(NULL, " \n", &hs);
			x = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return v;
}

/* The payload of datagram seq: its length and bytes follow from seq, so
 * the receiver checks every byte without keeping a copy. */
static uint32_t pat_len(uint32_t seq)
{
	return 16 + (seq * 37) % 1457;   /* 16..1472 */
}

static void pat_fill(uint8_t *p, uint32_t seq)
{
	uint32_t n = pat_len(seq);

	memcpy(p, &seq, 4);
	for (uint32_t i = 4; i < n; i++)
		p[i] = (uint8_t)(seq * 7 + i);
}

/* -1 if the payload is not pattern seq for some seq, else seq */
static int pat_check(const uint8_t *p, uint32_t len)
{
	uint32_t seq;

	if (len < 4)
		return -1;
	memcpy(&seq, p, 4);
	if (pat_len(seq) != len)
		return -1;
	for (uint32_t i = 4; i < len; i++)
		if (p[i] != (uint8_t)(seq * 7 + i))
			return -1;
	return (int)seq;
}

static void print_port(const char *who, const struct dpdk_port *p)
{
	char d[2048];

	dpdk_port_describe(p, d, sizeof(d));
	printf("port: %s: %s\n", who, d);
}

static void stats_sum(struct netstack_stats *sum, const struct netstack *ns, int n)
{
	memset(sum, 0, sizeof(*sum));
	for (int i = 0; i < n; i++) {
		const struct netstack_stats *s = &ns[i].stats;
		const uint64_t *a = (const uint64_t *)s;
		uint64_t *b = (uint64_t *)sum;

		for (size_t k = 0; k < sizeof(*s) / sizeof(uint64_t); k++)
			b[k] += a[k];
	}
}

static void print_drops(const char *who, const struct netstack_stats *s)
{
	printf("%s: rx %llu tx %llu udp_rx %llu udp_tx %llu icmp_echo %llu arp rx req/rep %llu/%llu tx req/rep "
	       "%llu/%llu learned %llu held %llu released %llu; drops:", who, (unsigned long long)s->rx_frames,
	       (unsigned long long)s->tx_frames, (unsigned long long)s->udp_rx, (unsigned long long)s->udp_tx,
	       (unsigned long long)s->icmp_echo, (unsigned long long)s->arp_rx_requests,
	       (unsigned long long)s->arp_rx_replies, (unsigned long long)s->arp_tx_requests,
	       (unsigned long long)s->arp_tx_replies, (unsigned long long)s->arp_learned,
	       (unsigned long long)s->held, (unsigned long long)s->hold_released);
	for (int i = 0; i < NETSTACK_DROP_MAX; i++)
		if (s->drop[i])
			printf(" %s=%llu", netstack_drop_name[i], (unsigned long long)s->drop[i]);
	printf("\n");
}

/* ================================================================ tap */

#define TAPQ_MAX 8
#define K2U_N 1000      /* kernel -> us datagrams */
#define U2K_N 200       /* us -> kernel datagrams */

enum { CMD_NONE, CMD_SEND, CMD_ARP_FLUSH, CMD_SNAPSHOT };

struct tap_ctx {
	struct dpdk_port port;
	struct dpdk_queue q[TAPQ_MAX];
	struct netstack ns[TAPQ_MAX];
	int nq;
	uint64_t now;
	int stop;
	pthread_t thr;

	/* mailbox: the main thread writes the arguments, then cmd (release);
	 * the polling thread runs it and clears cmd (release) */
	int cmd;
	uint32_t send_first, send_n;
	int send_offload;
	uint32_t dst_ip;
	uint16_t dst_port;
	int send_errors;
	struct netstack_stats snap[TAPQ_MAX];

	/* what our callback saw (polling thread writes, main reads) */
	uint8_t seen[K2U_N];
	int rx_ok, rx_bad, rx_dup;
	uint32_t rx_src_ip;
	uint16_t rx_src_port;
};

struct tap_cb {
	struct tap_ctx *c;
	int i;
};
static struct tap_cb cbs[TAPQ_MAX];

static int tap_on_udp(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		      struct rte_mbuf *m)
{
	struct tap_ctx *c = ((struct tap_cb *)arg)->c;
	int seq = pat_check(payload, len);

	(void)m;
	if (seq < 0 || seq >= K2U_N) {
		__atomic_add_fetch(&c->rx_bad, 1, __ATOMIC_RELEASE);
		return 0;
	}
	c->rx_src_ip = src_ip;
	c->rx_src_port = src_port;
	if (c->seen[seq]++)
		__atomic_add_fetch(&c->rx_dup, 1, __ATOMIC_RELEASE);
	else
		__atomic_add_fetch(&c->rx_ok, 1, __ATOMIC_RELEASE);
	return 0;
}

/* what one queue's stack learns, the others learn too (the shard ring's
 * job in the broker) */
static void tap_on_arp(void *arg, uint32_t ip, const struct rte_ether_addr *mac)
{
	struct tap_cb *cb = arg;

	for (int j = 0; j < cb->c->nq; j++)
		if (j != cb->i)
			netstack_arp_learn(&cb->c->ns[j], ip, mac, cb->c->now);
}

static void tap_run_cmd(struct tap_ctx *c, int cmd)
{
	if (cmd == CMD_SEND) {
		struct netstack *ns = &c->ns[0];
		uint8_t p[1500];

		ns->cfg.tx_offloads = c->send_offload ? c->q[0].tx_offloads : 0;
		for (uint32_t s = c->send_first; s < c->send_first + c->send_n; s++) {
			pat_fill(p, s);
			if (netstack_udp_send(ns, c->dst_ip, c->dst_port, OUR_PORT, p, pat_len(s), c->now) < 0)
				c->send_errors++;
		}
	} else if (cmd == CMD_ARP_FLUSH) {
		for (int i = 0; i < c->nq; i++)
			netstack_arp_flush(&c->ns[i]);
	} else if (cmd == CMD_SNAPSHOT) {
		for (int i = 0; i < c->nq; i++)
			c->snap[i] = c->ns[i].stats;
	}
}

static void *tap_poll(void *arg)
{
	struct tap_ctx *c = arg;
	struct rte_mbuf *pkts[32];
	int r = dpdk_eal_thread_register();

	if (r < 0)
		printf("note: dpdk_eal_thread_register: %s (pool caches unused)\n", strerror(-r));
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		int cmd = __atomic_load_n(&c->cmd, __ATOMIC_ACQUIRE);

		c->now = now_ns();
		for (int i = 0; i < c->nq; i++) {
			uint16_t n = dpdk_queue_rx(&c->q[i], pkts, 32);

			netstack_rx(&c->ns[i], pkts, n, c->now);
		}
		if (cmd != CMD_NONE) {
			tap_run_cmd(c, cmd);
			__atomic_store_n(&c->cmd, CMD_NONE, __ATOMIC_RELEASE);
		}
		for (int i = 0; i < c->nq; i++)
			netstack_poll(&c->ns[i], c->now);
	}
	return NULL;
}

static int tap_cmd(struct tap_ctx *c, int cmd)
{
	uint64_t end = now_ns() + 5000000000ull;

	__atomic_store_n(&c->cmd, cmd, __ATOMIC_RELEASE);
	while (__atomic_load_n(&c->cmd, __ATOMIC_ACQUIRE) != CMD_NONE)
		if (now_ns() > end)
			return -ETIMEDOUT;
	return 0;
}

static void tap_sum(struct tap_ctx *c, struct netstack_stats *s)
{
	if (tap_cmd(c, CMD_SNAPSHOT) == 0) {
		struct netstack tmp[TAPQ_MAX];

		for (int i = 0; i < c->nq; i++)
			tmp[i].stats = c->snap[i];
		stats_sum(s, tmp, c->nq);
	} else {
		memset(s, 0, sizeof(*s));
	}
}

static int wait_int(int *p, int want, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < want && now_ns() < end)
		usleep(1000);
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static uint16_t icmp_sum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

/* The kernel pings ours: count the echo replies. */
static int kernel_ping(uint32_t dst, int count)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), got = 0;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = dst };
	struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
	uint16_t id = (uint16_t)getpid();

	if (fd < 0) {
		printf("note: raw ICMP socket: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (int seq = 1; seq <= count; seq++) {
		uint8_t pkt[64], in[256];
		struct icmphdr *ic = (struct icmphdr *)pkt;
		uint64_t end = now_ns() + 2000000000ull;

		memset(pkt, 0, sizeof(pkt));
		ic->type = ICMP_ECHO;
		ic->un.echo.id = htons(id);
		ic->un.echo.sequence = htons((uint16_t)seq);
		for (size_t i = sizeof(*ic); i < sizeof(pkt); i++)
			pkt[i] = (uint8_t)(i + seq);
		ic->checksum = icmp_sum(pkt, sizeof(pkt));
		if (sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			printf("note: ping sendto: %s\n", strerror(errno));
			continue;
		}
		while (now_ns() < end) {
			ssize_t n = recv(fd, in, sizeof(in), 0);

			if (n < 0)
				continue;
			int ihl = (in[0] & 0xf) * 4;
			const struct icmphdr *r = (const struct icmphdr *)(in + ihl);

			if (n >= ihl + (ssize_t)sizeof(pkt) && r->type == ICMP_ECHOREPLY && ntohs(r->un.echo.id) == id &&
			    ntohs(r->un.echo.sequence) == seq &&
			    !memcmp(in + ihl + sizeof(*ic), pkt + sizeof(*ic), sizeof(pkt) - sizeof(*ic)) &&
			    !memcmp(in + 12, &dst, 4)) {
				got++;
				break;
			}
		}
	}
	close(fd);
	return got;
}

/* The kernel's neighbour entry for ip: its MAC if complete, else "". */
static void kernel_neigh(uint32_t ip, char *mac, size_t len)
{
	FILE *f = fopen("/proc/net/arp", "r");
	char line[256], addr[64], hw[64], ips[32];
	unsigned flags;

	mac[0] = 0;
	inet_ntop(AF_INET, &ip, ips, sizeof(ips));
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %*s %x %63s", addr, &flags, hw) == 3 && !strcmp(addr, ips) && (flags & 2))
			snprintf(mac, len, "%s", hw);
	fclose(f);
}

static void mac_str(const struct rte_ether_addr *m, char *s, size_t n)
{
	snprintf(s, n, "%02x:%02x:%02x:%02x:%02x:%02x", m->addr_bytes[0], m->addr_bytes[1], m->addr_bytes[2],
		 m->addr_bytes[3], m->addr_bytes[4], m->addr_bytes[5]);
}

static int read_mac(const char *iface, struct rte_ether_addr *m)
{
	char path[128], s[64];
	FILE *f;
	unsigned b[6];

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", iface);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(s, sizeof(s), f) || sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) {
		fclose(f);
		return -1;
	}
	fclose(f);
	for (int i = 0; i < 6; i++)
		m->addr_bytes[i] = (uint8_t)b[i];
	return 0;
}

/* net_ring's jumbo datagram: 8972 bytes of 0x5c */
static int ring_got = -1;

static int ring_on_udp(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		       struct rte_mbuf *m)
{
	int ok = len == 8972 && m->nb_segs == 1;

	(void)arg;
	(void)src_ip;
	(void)src_port;
	for (uint32_t i = 0; ok && i < len; i++)
		ok = payload[i] == 0x5c;
	ring_got = ok ? (int)len : 0;
	return 0;
}

static int tap_scenario(void)
{
	static struct tap_ctx ctx;
	struct tap_ctx *c = &ctx;
	char iface[IFNAMSIZ], prefix[64], args[512], err[512], runtime[128];
	char kip_s[32], oip_s[32];
	struct dpdk_port_config pc;
	struct netstack_stats s0, s1;
	struct rte_ether_addr kmac;
	uint32_t kip, oip;
	int pid = getpid(), r, ksock = -1, psock = -1;

	snprintf(iface, sizeof(iface), "sltap%d", pid % 100000);
	snprintf(prefix, sizeof(prefix), "sluice-itest-tap-%d", pid);
	snprintf(runtime, sizeof(runtime), "/var/run/dpdk/%s", prefix);
	snprintf(kip_s, sizeof(kip_s), "198.18.%d.1", 16 + pid % 200);
	snprintf(oip_s, sizeof(oip_s), "198.18.%d.2", 16 + pid % 200);
	kip = inet_addr(kip_s);
	oip = inet_addr(oip_s);
	snprintf(args, sizeof(args),
		 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l 0 --file-prefix=%s --vdev=net_tap0,iface=%s "
		 "--vdev=net_ring0 --vdev=net_ring1", prefix, iface);
	r = dpdk_eal_start(args, err, sizeof(err));
	if (r < 0) {
		printf("SKIPPED: tap: the EAL could not start: %s\n", err);
		rmdir(runtime);
		return SKIP_EXIT;
	}
	/* queue limits on net_ring (16 pairs): too few for 17 shards (an error
	 * naming the limit); 9 shards get 9 pairs, replication refused with
	 * the reason */
	{
		struct dpdk_port rp;

		dpdk_port_config_defaults(&pc);
		pc.device = "net_ring0";
		pc.shards = 17;
		r = dpdk_port_init(&rp, &pc, err, sizeof(err));
		check(r == -EINVAL && strstr(err, "16 RX / 16 TX queues, fewer than the 17 shards"),
		      "ring: 17 shards on 16 queues refused: %s", err);
		pc.shards = 9;
		pc.rx_desc = pc.tx_desc = 128;
		r = dpdk_port_init(&rp, &pc, err, sizeof(err));
		check(r == 0 && rp.queue_pairs == 9 && !rp.replication && strstr(rp.notes, "no replication pairs"),
		      "ring: 9 shards on 16 queues: %u pairs, no replication pairs, said why", rp.queue_pairs);
		check(r == 0 && rte_is_valid_assigned_ether_addr(&rp.mac), "ring: a port without a MAC gets one");
		if (r == 0) {
			print_port("net_ring", &rp);
			dpdk_port_fini(&rp);
		}
		/* jumbo where the port takes it: net_ring loops each queue's TX
		 * back to its RX, so a stack hears its own 8972-byte datagram */
		pc.device = "net_ring1";
		pc.shards = 1;
		pc.mtu = 9000;
		r = dpdk_port_init(&rp, &pc, err, sizeof(err));
		check(r == 0 && rp.mtu == 9000 && rp.data_room >= RTE_PKTMBUF_HEADROOM + 9018,
		      "ring: jumbo mtu %u, mbufs of %u bytes", rp.mtu, rp.data_room);
		if (r == 0) {
			static struct netstack ns;
			struct netstack_config nc;
			struct dpdk_queue q;
			static uint8_t big[8972];
			struct rte_mbuf *pkts[32];
			uint64_t end = now_ns() + 2000000000ull;

			dpdk_port_queue(&rp, 0, 0, &q);
			netstack_config_defaults(&nc);
			nc.ip = inet_addr("10.66.0.1");
			nc.mac = q.mac;
			nc.udp_port = OUR_PORT;
			nc.mtu = q.mtu;
			nc.pool = q.pool;
			nc.tx = dpdk_queue_tx;
			nc.tx_arg = &q;
			nc.on_udp = ring_on_udp;
			netstack_init(&ns, &nc);
			netstack_arp_learn(&ns, nc.ip, &nc.mac, now_ns());   /* ourselves */
			memset(big, 0x5c, sizeof(big));
			r = netstack_udp_send(&ns, nc.ip, OUR_PORT, OUR_PORT, big, sizeof(big), now_ns());
			netstack_flush(&ns);
			while (ring_got < 0 && now_ns() < end) {
				uint16_t n = dpdk_queue_rx(&q, pkts, 32);

				netstack_rx(&ns, pkts, n, now_ns());
			}
			check(r == 0 && ring_got == 8972,
			      "ring: an 8972-byte datagram sent and received intact in one frame (send %d, got %d)", r,
			      ring_got);
			netstack_fini(&ns);
			dpdk_port_fini(&rp);
		}
		pc.device = "net_nosuch0";
		pc.mtu = 0;
		r = dpdk_port_init(&rp, &pc, err, sizeof(err));
		check(r == -ENODEV && strstr(err, "net_nosuch0") && strstr(err, "net_tap0"),
		      "no such port: %s", err);
	}
	dpdk_port_config_defaults(&pc);
	pc.device = "net_tap0";
	pc.shards = 2;
	pc.mtu = 9000;    /* asks for jumbo: tap takes 1522-byte frames, so this shows the fallback */
	r = dpdk_port_init(&c->port, &pc, err, sizeof(err));
	check(r == 0, "tap: port opened (%s)", r ? err : "2 shards");
	if (r < 0)
		goto out_eal;
	print_port("net_tap", &c->port);
	check(c->port.queue_pairs == 4 && c->port.replication, "tap: 2 client + 2 replication queue pairs (%u)",
	      c->port.queue_pairs);
	check(c->port.mtu == 1500 && strstr(c->port.notes, "mtu 9000 asked, 1500 used"), "tap: jumbo refused by "
	      "the port (max frame %u), mtu %u, the reason noted", c->port.max_rx_pktlen, c->port.mtu);
	check((c->port.tx_offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) && (c->port.rx_offloads & RTE_ETH_RX_OFFLOAD_UDP_CKSUM),
	      "tap: UDP checksum offload enabled both ways (rx %#llx tx %#llx)",
	      (unsigned long long)c->port.rx_offloads, (unsigned long long)c->port.tx_offloads);

	/* one stack per queue: the kernel may pick any of the tap's queues */
	c->nq = c->port.queue_pairs;
	for (int i = 0; i < c->nq; i++) {
		struct netstack_config nc;

		dpdk_port_queue(&c->port, (uint16_t)(i % pc.shards), i >= pc.shards, &c->q[i]);
		netstack_config_defaults(&nc);
		nc.ip = oip;
		nc.netmask = inet_addr("255.255.255.0");
		nc.mac = c->q[i].mac;
		nc.udp_port = OUR_PORT;
		nc.mtu = c->q[i].mtu;
		nc.rx_offloads = c->q[i].rx_offloads;
		nc.tx_offloads = c->q[i].tx_offloads;
		nc.pool = c->q[i].pool;
		nc.tx = dpdk_queue_tx;
		nc.tx_arg = &c->q[i];
		cbs[i] = (struct tap_cb){ c, i };
		nc.on_udp = tap_on_udp;
		nc.udp_arg = &cbs[i];
		nc.on_arp = tap_on_arp;
		nc.arp_arg = &cbs[i];
		r = netstack_init(&c->ns[i], &nc);
		if (r < 0) {
			check(0, "tap: netstack_init queue %d: %s", i, strerror(-r));
			goto out_port;
		}
	}
	/* the kernel's side: an address, no IPv6 chatter, up */
	{
		char p[128];

		snprintf(p, sizeof(p), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", iface);
		write_file(p, "1");
	}
	sh("ip addr add %s/24 dev %s && ip link set %s up", kip_s, iface, iface);
	if (read_mac(iface, &kmac) < 0)
		memset(&kmac, 0, sizeof(kmac));
	pthread_create(&c->thr, NULL, tap_poll, c);

	/* 1. the kernel pings us: its ARP request, our reply, ICMP echo */
	{
		char want[32], have[64];
		int got = kernel_ping(oip, 5);

		check(got == 5, "tap: the kernel pings %s: %d of 5 echo replies", oip_s, got);
		mac_str(&c->port.mac, want, sizeof(want));
		kernel_neigh(oip, have, sizeof(have));
		check(!strcasecmp(want, have), "tap: the kernel resolved our address by ARP: %s (ours %s)",
		      have[0] ? have : "none", want);
		tap_sum(c, &s0);
		check(s0.arp_tx_replies >= 1 && s0.icmp_echo >= 5, "tap: we answered %llu ARP request(s), %llu echo(es)",
		      (unsigned long long)s0.arp_tx_replies, (unsigned long long)s0.icmp_echo);
	}

	/* 2. a kernel UDP socket sends to our address and port */
	ksock = socket(AF_INET, SOCK_DGRAM, 0);
	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = kip };
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(OUR_PORT), .sin_addr.s_addr = oip };
		socklen_t al = sizeof(a);
		int rcvbuf = 4 << 20;
		uint8_t p[1500];

		setsockopt(ksock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		if (bind(ksock, (struct sockaddr *)&a, sizeof(a)) < 0)
			printf("note: bind %s: %s\n", kip_s, strerror(errno));
		getsockname(ksock, (struct sockaddr *)&a, &al);
		for (uint32_t s = 0; s < K2U_N; s++) {
			pat_fill(p, s);
			if (sendto(ksock, p, pat_len(s), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
				printf("note: sendto: %s\n", strerror(errno));
			if (s % 50 == 49)      /* never more than the tap queue holds */
				wait_int(&c->rx_ok, (int)s + 1, 2000);
		}
		int got = wait_int(&c->rx_ok, K2U_N, 5000);

		check(got == K2U_N && !c->rx_bad && !c->rx_dup,
		      "tap: kernel UDP -> our callback: %d of %d datagrams intact (%d corrupt, %d duplicate)", got, K2U_N,
		      c->rx_bad, c->rx_dup);
		check(c->rx_src_ip == kip && c->rx_src_port == ntohs(a.sin_port),
		      "tap: the callback saw the sender's address and port");
		tap_sum(c, &s0);
		printf("tap: datagrams per queue:");
		for (int i = 0; i < c->nq; i++)
			printf(" q%d=%llu", i, (unsigned long long)c->snap[i].udp_rx);
		printf("\n");
	}

	/* 3. we send to the kernel socket after forgetting its MAC: our ARP
	 * request, its reply; then software and offloaded checksums */
	{
		long long csum0 = udp_snmp("InCsumErrors");
		struct timeval tv = { .tv_sec = 2, .tv_usec = 0 };
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		uint8_t buf[2048];
		int got = 0, bad = 0, from_us = 1;

		tap_cmd(c, CMD_ARP_FLUSH);
		tap_sum(c, &s0);
		getsockname(ksock, (struct sockaddr *)&a, &al);
		setsockopt(ksock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		c->dst_ip = kip;
		c->dst_port = ntohs(a.sin_port);
		for (uint32_t first = 0; first < U2K_N; first += 20) {
			c->send_first = first;
			c->send_n = 20;
			c->send_offload = first >= U2K_N / 2;
			tap_cmd(c, CMD_SEND);
			for (int k = 0; k < 20; k++) {
				struct sockaddr_in from;
				socklen_t fl = sizeof(from);
				ssize_t n = recvfrom(ksock, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);

				if (n < 0)
					break;
				if (pat_check(buf, (uint32_t)n) < 0)
					bad++;
				else
					got++;
				from_us &= from.sin_addr.s_addr == oip && ntohs(from.sin_port) == OUR_PORT;
			}
		}
		tap_sum(c, &s1);
		check(got == U2K_N && !bad && from_us && !c->send_errors,
		      "tap: our UDP -> kernel socket: %d of %d (half software, half offloaded checksums; %d corrupt, "
		      "%d send errors)", got, U2K_N, bad, c->send_errors);
		check(udp_snmp("InCsumErrors") == csum0, "tap: the kernel counted no UDP checksum error (%lld -> %lld)",
		      csum0, udp_snmp("InCsumErrors"));
		check(s1.arp_tx_requests > s0.arp_tx_requests && s1.held > s0.held &&
		      s1.hold_released - s0.hold_released == s1.held - s0.held,
		      "tap: we asked ARP for %s (%llu request(s)), held %llu datagram(s), released all",
		      kip_s, (unsigned long long)(s1.arp_tx_requests - s0.arp_tx_requests),
		      (unsigned long long)(s1.held - s0.held));
		struct rte_ether_addr m;
		int have = -1;

		if (tap_cmd(c, CMD_SNAPSHOT) == 0)   /* quiesce: the cache is read below */
			have = netstack_arp_lookup(&c->ns[0], kip, &m, now_ns());
		check(have == 0 && rte_is_same_ether_addr(&m, &kmac), "tap: our cache holds the kernel's MAC");
	}

	/* 4. bad frames injected on the interface: each in its counter */
	psock = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (psock >= 0) {
		struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(iface),
					  .sll_halen = 6 };
		struct rte_ether_addr other = { { 0x02, 0, 0, 0, 0x99, 0x99 } };
		uint8_t f[128];
		int before;

		memcpy(ll.sll_addr, c->port.mac.addr_bytes, 6);
		tap_sum(c, &s0);
		before = __atomic_load_n(&c->rx_ok, __ATOMIC_ACQUIRE) + c->rx_bad;
#define INJECT(...) do { \
	memset(f + 42, 'z', 20); \
	netstack_udp_build(f, &kmac, &c->port.mac, kip, oip, 4444, OUR_PORT, 1, 20, 0, 0); \
	__VA_ARGS__; \
	if (sendto(psock, f, 62, 0, (struct sockaddr *)&ll, sizeof(ll)) < 0) \
		printf("note: AF_PACKET sendto: %s\n", strerror(errno)); \
} while (0)
		INJECT(f[50] ^= 1);                                    /* UDP checksum */
		INJECT(f[14 + 10] ^= 1);                               /* IPv4 checksum */
		INJECT(f[14 + 6] = 0x20;
		       ((struct rte_ipv4_hdr *)(f + 14))->hdr_checksum = 0;
		       ((struct rte_ipv4_hdr *)(f + 14))->hdr_checksum = rte_ipv4_cksum((struct rte_ipv4_hdr *)(f + 14)));
		INJECT(((struct rte_ether_hdr *)f)->dst_addr = other); /* not our MAC */
		INJECT(netstack_udp_build(f, &kmac, &c->port.mac, kip, oip, 4444, OUR_PORT + 1, 1, 20, 0, 0));
#undef INJECT
		uint64_t end = now_ns() + 2000000000ull;

		do {
			usleep(10000);
			tap_sum(c, &s1);
		} while (now_ns() < end &&
			 s1.drop[NETSTACK_DROP_UDP_PORT] == s0.drop[NETSTACK_DROP_UDP_PORT]);
#define D(k) (unsigned long long)(s1.drop[k] - s0.drop[k])
		check(D(NETSTACK_DROP_UDP_CKSUM) == 1 && D(NETSTACK_DROP_IP_CKSUM) == 1 && D(NETSTACK_DROP_IP_FRAG) == 1 &&
		      D(NETSTACK_DROP_ETH_NOT_OURS) >= 1 && D(NETSTACK_DROP_UDP_PORT) == 1 &&
		      __atomic_load_n(&c->rx_ok, __ATOMIC_ACQUIRE) + c->rx_bad == before,
		      "tap: injected frames counted: udp_checksum %llu, ip_checksum %llu, ip_fragment %llu, "
		      "eth_not_ours %llu, udp_port %llu; none delivered", D(NETSTACK_DROP_UDP_CKSUM),
		      D(NETSTACK_DROP_IP_CKSUM), D(NETSTACK_DROP_IP_FRAG), D(NETSTACK_DROP_ETH_NOT_OURS),
		      D(NETSTACK_DROP_UDP_PORT));
#undef D
		close(psock);
	} else {
		check(0, "tap: AF_PACKET socket: %s", strerror(errno));
	}

	tap_sum(c, &s1);
	print_drops("tap: all queues", &s1);
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(c->thr, NULL);
	for (int i = 0; i < c->nq; i++)
		netstack_fini(&c->ns[i]);
	{
		unsigned inuse = 0;

		for (int s = 0; s < pc.shards; s++)
			inuse += rte_mempool_in_use_count(c->port.pools[s]);
		/* the RX rings hold their mbufs; nothing else may */
		check(inuse <= (unsigned)c->nq * c->port.rx_desc,
		      "tap: mbufs in use at the end: %u (the RX rings' %u at most)", inuse,
		      (unsigned)c->nq * c->port.rx_desc);
	}
out_port:
	if (ksock >= 0)
		close(ksock);
	dpdk_port_fini(&c->port);
out_eal:
	dpdk_eal_stop();
	rmdir(runtime);
	{
		int gone = if_nametoindex(iface) == 0;

		if (!gone)
			sh("ip link del %s", iface);
		check(gone, "tap: interface %s removed with the port", iface);
		struct stat st;
		check(stat(runtime, &st) < 0, "tap: EAL runtime directory %s removed", runtime);
	}
	printf("dpdk_net tap: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ================================================================ memif */

#define MEMIF_N 5000
#define MEMIF_WINDOW 64
#define MEMIF_Q 4

struct memif_side {
	struct dpdk_port port;
	struct dpdk_queue q[MEMIF_Q];
	struct netstack ns[MEMIF_Q];
	int nq;
	uint64_t now;
	/* client: echoes seen */
	uint8_t seen[MEMIF_N];
	int ok, bad;
	struct tap_cb cb[MEMIF_Q];
};

static struct memif_side side;
static volatile sig_atomic_t memif_stop;

static void on_term(int sig)
{
	(void)sig;
	memif_stop = 1;
}

/* server: every datagram goes back where it came from */
static int memif_echo(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		      struct rte_mbuf *m)
{
	struct tap_cb *cb = arg;

	(void)m;
	netstack_udp_send(&side.ns[cb->i], src_ip, src_port, OUR_PORT, payload, len, side.now);
	return 0;
}

/* client: check what came back */
static int memif_back(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		      struct rte_mbuf *m)
{
	int seq = pat_check(payload, len);

	(void)arg;
	(void)src_ip;
	(void)m;
	if (seq < 0 || seq >= MEMIF_N || src_port != OUR_PORT || side.seen[seq]++)
		side.bad++;
	else
		side.ok++;
	return 0;
}

static void memif_arp(void *arg, uint32_t ip, const struct rte_ether_addr *mac)
{
	struct tap_cb *cb = arg;

	for (int j = 0; j < side.nq; j++)
		if (j != cb->i)
			netstack_arp_learn(&side.ns[j], ip, mac, side.now);
}

static void memif_poll(void)
{
	struct rte_mbuf *pkts[32];

	side.now = now_ns();
	for (int i = 0; i < side.nq; i++) {
		uint16_t n = dpdk_queue_rx(&side.q[i], pkts, 32);

		netstack_rx(&side.ns[i], pkts, n, side.now);
		netstack_poll(&side.ns[i], side.now);
	}
}

/* Block until the parent writes or closes go_fd: meanwhile nothing polls
 * the port. */
static void memif_wait_go(int go_fd)
{
	char c;

	while (read(go_fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* role: 0 server, 1 client. The server writes its MAC to ready_fd once
 * its port listens (a memif client's start fails without a server); the
 * client gets it as server_mac. Returns the exit code.
 *
 * The end: net_memif tears a connection down on the EAL's interrupt
 * thread when the peer goes (memif_disconnect unmaps the shared regions)
 * while an RX burst on the lcore may be reading a ring in them: a burst
 * that runs then faults (SIGSEGV in eth_memif_rx, seen under load). So
 * nobody polls while the other side leaves: the client says it is done
 * (ready_fd), the parent stops the server (SIGTERM), the server says it
 * stopped polling (ready_fd) and waits; the parent lets the client close
 * its port and exit (go_fd), then the server, which closes its own once
 * its interrupt thread has seen the link go down. */
static int memif_scenario(int role, const char *sock, int tag, int ready_fd, int go_fd,
			  const struct rte_ether_addr *server_mac)
{
	char prefix[64], args[512], err[512], runtime[128], who[32];
	uint32_t sip = inet_addr("10.77.0.1"), cip = inet_addr("10.77.0.2");
	struct dpdk_port_config pc;
	int r, rc = 0;

	snprintf(who, sizeof(who), "memif %s", role ? "client" : "server");
	snprintf(prefix, sizeof(prefix), "sluice-itest-memif%d-%d", role, tag);
	snprintf(runtime, sizeof(runtime), "/var/run/dpdk/%s", prefix);
	/* each on its own core when there are two: the EAL pins its thread */
	snprintf(args, sizeof(args),
		 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l %d --file-prefix=%s "
		 "--vdev=net_memif0,role=%s,socket=%s",
		 role && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, prefix, role ? "client" : "server", sock);
	r = dpdk_eal_start(args, err, sizeof(err));
	if (r < 0) {
		printf("SKIPPED: %s: the EAL could not start: %s\n", who, err);
		rmdir(runtime);
		return SKIP_EXIT;
	}
	dpdk_port_config_defaults(&pc);
	pc.shards = 2;
	r = dpdk_port_init(&side.port, &pc, err, sizeof(err));
	check(r == 0, "%s: port opened (%s)", who, r ? err : "2 shards");
	if (r < 0) {
		rc = 1;
		goto out_eal;
	}
	print_port(who, &side.port);
	side.nq = side.port.queue_pairs;
	for (int i = 0; i < side.nq; i++) {
		struct netstack_config nc;

		dpdk_port_queue(&side.port, (uint16_t)(i % pc.shards), i >= pc.shards, &side.q[i]);
		netstack_config_defaults(&nc);
		nc.ip = role ? cip : sip;
		nc.netmask = inet_addr("255.255.255.0");
		nc.mac = side.q[i].mac;
		nc.udp_port = OUR_PORT;
		nc.mtu = side.q[i].mtu;
		nc.rx_offloads = side.q[i].rx_offloads;
		nc.tx_offloads = side.q[i].tx_offloads;
		nc.pool = side.q[i].pool;
		nc.tx = dpdk_queue_tx;
		nc.tx_arg = &side.q[i];
		side.cb[i] = (struct tap_cb){ NULL, i };
		nc.on_udp = role ? memif_back : memif_echo;
		nc.udp_arg = &side.cb[i];
		nc.on_arp = memif_arp;
		nc.arp_arg = &side.cb[i];
		netstack_init(&side.ns[i], &nc);
	}
	if (role == 0) {
		/* serve until the parent says stop (or 60 s) */
		uint64_t end = now_ns() + 60000000000ull;

		if (write(ready_fd, side.port.mac.addr_bytes, 6) != 6)
			printf("note: ready pipe: %s\n", strerror(errno));

		while (!memif_stop && now_ns() < end)
			memif_poll();
		/* polling stopped: the client may go now */
		if (write(ready_fd, "s", 1) != 1)
			printf("note: ready pipe: %s\n", strerror(errno));
		memif_wait_go(go_fd);
	} else {
		uint64_t end = now_ns() + 20000000000ull, t0;
		struct rte_eth_link link;
		uint32_t next = 0;
		uint8_t p[1500];

		do {
			memif_poll();
			memset(&link, 0, sizeof(link));
			rte_eth_link_get_nowait(side.port.port_id, &link);
		} while (link.link_status != RTE_ETH_LINK_UP && now_ns() < end);
		check(link.link_status == RTE_ETH_LINK_UP, "memif client: link up with the server");
		t0 = now_ns();
		while (side.ok + side.bad < MEMIF_N && now_ns() < end) {
			/* keep a window in flight; resend nothing: memif is lossless
			 * unless a ring overflows, which the window prevents */
			while (next < MEMIF_N && next < (uint32_t)(side.ok + side.bad) + MEMIF_WINDOW) {
				pat_fill(p, next);
				if (netstack_udp_send(&side.ns[0], sip, OUR_PORT, OUR_PORT, p, pat_len(next), side.now) < 0)
					break;
				next++;
			}
			memif_poll();
		}
		double secs = (double)(now_ns() - t0) / 1e9;

		check(side.ok == MEMIF_N && !side.bad, "memif: %d of %d datagrams echoed intact between two processes "
		      "(%d bad; %.0f round trips/s, not a benchmark)", side.ok, MEMIF_N, side.bad, side.ok / secs);
		rc = side.ok == MEMIF_N && !side.bad ? 0 : 1;
		struct rte_ether_addr m;
		char a[32], b[32];

		memset(&m, 0, sizeof(m));
		netstack_arp_lookup(&side.ns[0], sip, &m, side.now);
		mac_str(&m, a, sizeof(a));
		mac_str(server_mac, b, sizeof(b));
		check(rte_is_same_ether_addr(&m, server_mac) && !rte_is_same_ether_addr(&m, &side.port.mac),
		      "memif client: ARP gave the server's MAC %s (server says %s)", a, b);
	}
	{
		struct netstack_stats s;

		stats_sum(&s, side.ns, side.nq);
		print_drops(who, &s);
		if (role == 1)
			check(s.arp_tx_requests >= 1 && s.arp_learned >= 1 && s.held >= 1 && s.hold_released == s.held,
			      "memif client: resolved the server by ARP (%llu request(s))",
			      (unsigned long long)s.arp_tx_requests);
		else
			check(s.arp_tx_replies >= 1, "memif server: answered ARP (%llu)",
			      (unsigned long long)s.arp_tx_replies);
		if (failed)
			rc = 1;
	}
	if (role == 1) {
		/* done polling: the parent stops the server before we leave */
		if (write(ready_fd, "c", 1) != 1)
			printf("note: done pipe: %s\n", strerror(errno));
		memif_wait_go(go_fd);
	} else {
		/* the client has gone: its disconnect runs on our interrupt
		 * thread; let it take the link down before our own close */
		struct rte_eth_link link;
		uint64_t end = now_ns() + 5000000000ull;

		for (;;) {
			memset(&link, 0, sizeof(link));
			rte_eth_link_get_nowait(side.port.port_id, &link);
			if (link.link_status != RTE_ETH_LINK_UP || now_ns() >= end)
				break;
			usleep(1000);
		}
	}
	for (int i = 0; i < side.nq; i++)
		netstack_fini(&side.ns[i]);
	dpdk_port_fini(&side.port);
out_eal:
	dpdk_eal_stop();
	rmdir(runtime);
	return rc;
}

/* ================================================================ main */

static int run_child(int (*fn)(void *), void *arg, pid_t *out)
{
	pid_t p;

	fflush(stdout);
	p = fork();
	if (p == 0) {
		alarm(90);
		/* DPDK seeded its PRNG in a constructor, before main: reseed, or
		 * every child draws the same "random" port MACs */
		rte_srand(now_ns() ^ ((uint64_t)getpid() << 32));
		exit(fn(arg));
	}
	*out = p;
	return p > 0 ? 0 : -errno;
}

static int status_rc(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	printf("FAIL - child killed by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
	return 1;
}

static int tap_child(void *arg)
{
	(void)arg;
	return tap_scenario();
}

/* The EAL refuses a device it cannot parse: the error says which. */
static int eal_child(void *arg)
{
	char err[512], args[256];
	int r;

	(void)arg;
	snprintf(args, sizeof(args), "--no-huge -m 64 --no-pci --no-shconf --no-telemetry -l 0 "
		 "--file-prefix=sluice-itest-eal-%d --vdev=net_bogus0", (int)getpid());
	r = dpdk_eal_start(args, err, sizeof(err));
	check(r < 0 && strstr(err, "net_bogus0"), "eal: a bad --vdev is refused, named: %s", r < 0 ? err : "started");
	r = dpdk_eal_start("--no-huge --frobnicate", err, sizeof(err));
	check(r == -EINVAL && strstr(err, "'--frobnicate'"), "eal: an unknown option is named: %s", err);
	snprintf(args, sizeof(args), "/var/run/dpdk/sluice-itest-eal-%d", (int)getpid());
	rmdir(args);
	return failed ? 1 : 0;
}

struct memif_arg {
	int role;
	char sock[108];
	int tag;
	int ready[2];   /* child to parent: the server's MAC, then "stopped polling"; the client's "done" */
	int go[2];      /* parent to child: go on (written or closed) */
	struct rte_ether_addr server_mac;
};

static struct memif_arg sa, ca;

static int memif_child(void *arg)
{
	struct memif_arg *a = arg, *o = a == &sa ? &ca : &sa;

	signal(SIGTERM, on_term);
	/* only the parent holds the other child's pipes: an end of file
	 * there says that child died */
	for (int i = 0; i < 2; i++) {
		if (o->ready[i] > 2)
			close(o->ready[i]);
		if (o->go[i] > 2)
			close(o->go[i]);
	}
	close(a->ready[0]);
	close(a->go[1]);
	return memif_scenario(a->role, a->sock, a->tag, a->ready[1], a->go[0], &a->server_mac);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : "all";
	int skipped = 0, fails = 0, st;
	pid_t p;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIPPED: dpdk_net: needs root (net_tap creates a kernel interface; the EAL maps memory "
		       "and opens /dev/net/tun)\n");
		return 0;
	}
	if (access("/dev/net/tun", R_OK | W_OK) != 0 && strcmp(only, "memif")) {
		printf("SKIPPED: dpdk_net tap: /dev/net/tun: %s\n", strerror(errno));
		if (!strcmp(only, "tap"))
			return 0;
		only = "memif";
	}
	if (!strcmp(only, "all") || !strcmp(only, "eal")) {
		if (run_child(eal_child, NULL, &p) == 0 && waitpid(p, &st, 0) == p)
			fails += status_rc(st) != 0;
		else
			fails++;
	}
	if (!strcmp(only, "all") || !strcmp(only, "tap")) {
		if (run_child(tap_child, NULL, &p) == 0 && waitpid(p, &st, 0) == p) {
			int rc = status_rc(st);

			skipped += rc == SKIP_EXIT;
			fails += rc != 0 && rc != SKIP_EXIT;
		} else {
			fails++;
		}
	}
	if (!strcmp(only, "all") || !strcmp(only, "memif")) {
		pid_t ps, pcl;

		sa.role = 0;
		ca.role = 1;
		sa.tag = ca.tag = getpid();
		snprintf(sa.sock, sizeof(sa.sock), "/run/sluice-itest-memif-%d.sock", (int)getpid());
		memcpy(ca.sock, sa.sock, sizeof(ca.sock));
		if (pipe(sa.ready) < 0 || pipe(sa.go) < 0 || pipe(ca.ready) < 0 || pipe(ca.go) < 0) {
			fails++;
		} else if (run_child(memif_child, &sa, &ps) < 0) {
			fails++;
		} else {
			int rcs, rcc = 0;
			char c;

			close(sa.ready[1]);
			close(sa.go[0]);
			/* the client once the server listens; nothing if the server gave up */
			if (read(sa.ready[0], ca.server_mac.addr_bytes, 6) == 6) {
				if (run_child(memif_child, &ca, &pcl) < 0) {
					fails++;
				} else {
					close(ca.ready[1]);
					close(ca.go[0]);
					/* the client's traffic is over (or it died): stop
					 * the server polling before the client leaves */
					if (read(ca.ready[0], &c, 1) < 0)
						printf("note: client pipe: %s\n", strerror(errno));
					kill(ps, SIGTERM);
					if (read(sa.ready[0], &c, 1) < 0)
						printf("note: server pipe: %s\n", strerror(errno));
					close(ca.go[1]);
					waitpid(pcl, &st, 0);
					rcc = status_rc(st);
				}
			}
			close(sa.ready[0]);
			kill(ps, SIGTERM);
			close(sa.go[1]);
			waitpid(ps, &st, 0);
			rcs = status_rc(st);
			skipped += rcc == SKIP_EXIT || rcs == SKIP_EXIT;
			fails += (rcc != 0 && rcc != SKIP_EXIT) + (rcs != 0 && rcs != SKIP_EXIT);
			unlink(sa.sock);
		}
	}
	printf("dpdk_net: %s%s\n", fails ? "FAILED" : "passed", skipped ? " (some scenarios SKIPPED, see above)" : "");
	return fails ? 1 : 0;
}
