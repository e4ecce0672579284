/* dataplane/netstack.c — Ethernet, ARP, ICMP echo, IPv4 and UDP for one
 * DPDK queue (see netstack.h). */
#include <errno.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_icmp.h>

#include "dataplane/netstack.h"

const char *const netstack_drop_name[NETSTACK_DROP_MAX] = {
	[NETSTACK_DROP_SHORT] = "short",
	[NETSTACK_DROP_SEGMENTED] = "segmented",
	[NETSTACK_DROP_ETH_NOT_OURS] = "eth_not_ours",
	[NETSTACK_DROP_ETHERTYPE] = "ethertype",
	[NETSTACK_DROP_ARP_BAD] = "arp_bad",
	[NETSTACK_DROP_ARP_NOT_OURS] = "arp_not_ours",
	[NETSTACK_DROP_IP_VERSION] = "ip_version",
	[NETSTACK_DROP_IP_HDR] = "ip_header",
	[NETSTACK_DROP_IP_CKSUM] = "ip_checksum",
	[NETSTACK_DROP_IP_FRAG] = "ip_fragment",
	[NETSTACK_DROP_IP_NOT_OURS] = "ip_not_ours",
	[NETSTACK_DROP_IP_PROTO] = "ip_protocol",
	[NETSTACK_DROP_ICMP_BAD] = "icmp_bad",
	[NETSTACK_DROP_ICMP_TYPE] = "icmp_type",
	[NETSTACK_DROP_UDP_LEN] = "udp_length",
	[NETSTACK_DROP_UDP_CKSUM] = "udp_checksum",
	[NETSTACK_DROP_UDP_PORT] = "udp_port",
	[NETSTACK_DROP_NO_ARP] = "no_arp",
	[NETSTACK_DROP_ARP_TIMEOUT] = "arp_timeout",
	[NETSTACK_DROP_TX_FULL] = "tx_full",
	[NETSTACK_DROP_NOBUFS] = "nobufs",
	[NETSTACK_DROP_TOO_BIG] = "too_big",
};

#define IP_HDR_MIN 20
#define UDP_HDR 8
#define ARP_FRAME (RTE_ETHER_HDR_LEN + (int)sizeof(struct rte_arp_hdr))
#define ETH_MIN_FRAME 60        /* 64 on the wire with the CRC */
#define DEFAULT_TTL 64

static const struct rte_ether_addr eth_bcast = { .addr_bytes = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } };

/* ol_flags bits that describe the buffer (not the packet) and must
 * survive when a received mbuf is reused for a reply. */
#define MBUF_BUF_FLAGS (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT)

void netstack_config_defaults(struct netstack_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mtu = RTE_ETHER_MTU;
	cfg->arp_ttl_ns = 60ull * 1000000000ull;
	cfg->arp_retry_ns = 1000000000ull;
	cfg->arp_tries = 3;
}

int netstack_init(struct netstack *ns, const struct netstack_config *cfg)
{
	if (!cfg->ip || !cfg->pool || !cfg->tx || cfg->mtu < 68 || !cfg->arp_tries || !cfg->arp_retry_ns ||
	    !rte_is_valid_assigned_ether_addr(&cfg->mac))
		return -EINVAL;
	memset(ns, 0, sizeof(*ns));
	ns->cfg = *cfg;
	return 0;
}

static void drop(struct netstack *ns, struct rte_mbuf *m, enum netstack_drop why)
{
	ns->stats.drop[why]++;
	rte_pktmbuf_free(m);
}

void netstack_fini(struct netstack *ns)
{
	for (uint16_t i = 0; i < ns->nhold; i++)
		rte_pktmbuf_free(ns->hold[i].m);
	for (uint16_t i = 0; i < ns->ntx; i++)
		rte_pktmbuf_free(ns->txq[i]);
	ns->nhold = ns->ntx = 0;
}

/* ---------------------------------------------------------------- checks */

static uint16_t fold(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* The one's complement sum of the UDP pseudo-header and datagram, folded. */
static uint16_t udp_sum(const struct rte_ipv4_hdr *ip, const uint8_t *udp, uint16_t udp_len)
{
	struct {
		uint32_t src, dst;
		uint8_t zero, proto;
		uint16_t len;
	} __attribute__((packed)) ph = {
		.src = ip->src_addr, .dst = ip->dst_addr, .proto = IPPROTO_UDP, .len = rte_cpu_to_be_16(udp_len),
	};

	return fold((uint32_t)rte_raw_cksum(&ph, sizeof(ph)) + rte_raw_cksum(udp, udp_len));
}

uint16_t netstack_udp_cksum(const uint8_t *ip, const uint8_t *udp, uint16_t udp_len)
{
	struct rte_udp_hdr *u = (struct rte_udp_hdr *)(uintptr_t)udp;
	uint16_t saved = u->dgram_cksum, c;

	/* the sum is taken with the checksum field zero */
	u->dgram_cksum = 0;
	c = (uint16_t)~udp_sum((const struct rte_ipv4_hdr *)ip, udp, udp_len);
	u->dgram_cksum = saved;
	return c == 0 ? 0xffff : c;
}

static int flags_good(uint64_t ol, uint64_t mask, uint64_t good, uint64_t none)
{
	return (ol & mask) == good || (ol & mask) == none;
}

int netstack_ipv4_check(const uint8_t *p, uint32_t len, uint64_t ol_flags, int rx_verified)
{
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)p;
	uint32_t ihl, tot;

	if (len < IP_HDR_MIN)
		return -(NETSTACK_DROP_SHORT + 1);
	if ((ip->version_ihl >> 4) != 4)
		return -(NETSTACK_DROP_IP_VERSION + 1);
	ihl = (uint32_t)(ip->version_ihl & 0x0f) * 4;
	if (ihl < IP_HDR_MIN)
		return -(NETSTACK_DROP_IP_HDR + 1);
	if (ihl > len)
		return -(NETSTACK_DROP_SHORT + 1);
	tot = rte_be_to_cpu_16(ip->total_length);
	if (tot < ihl)
		return -(NETSTACK_DROP_IP_HDR + 1);
	if (tot > len)
		return -(NETSTACK_DROP_SHORT + 1);
	if (rx_verified && flags_good(ol_flags, RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD,
				      RTE_MBUF_F_RX_IP_CKSUM_NONE)) {
		/* the port checked it */
	} else if (rx_verified && (ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
		return -(NETSTACK_DROP_IP_CKSUM + 1);
	} else if (rte_raw_cksum(ip, ihl) != 0xffff) {
		return -(NETSTACK_DROP_IP_CKSUM + 1);
	}
	/* MF set or a non-zero offset: a fragment (DF alone is fine) */
	if (rte_be_to_cpu_16(ip->fragment_offset) & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return -(NETSTACK_DROP_IP_FRAG + 1);
	return (int)ihl;
}

int netstack_udp_check(const uint8_t *p, int ihl, uint64_t ol_flags, int rx_verified)
{
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)p;
	const uint8_t *l4 = p + ihl;
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)l4;
	uint32_t avail = rte_be_to_cpu_16(ip->total_length) - (uint32_t)ihl;
	uint32_t ulen;

	if (avail < UDP_HDR)
		return -(NETSTACK_DROP_UDP_LEN + 1);
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	if (ulen < UDP_HDR || ulen > avail)
		return -(NETSTACK_DROP_UDP_LEN + 1);
	if (udp->dgram_cksum == 0)
		return (int)ulen;                 /* no checksum: IPv4 allows it */
	if (rx_verified && flags_good(ol_flags, RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD,
				      RTE_MBUF_F_RX_L4_CKSUM_NONE))
		return (int)ulen;
	if (rx_verified && (ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return -(NETSTACK_DROP_UDP_CKSUM + 1);
	if (udp_sum(ip, l4, (uint16_t)ulen) != 0xffff)
		return -(NETSTACK_DROP_UDP_CKSUM + 1);
	return (int)ulen;
}

void netstack_udp_build(uint8_t *frame, const struct rte_ether_addr *src_mac,
			const struct rte_ether_addr *dst_mac, uint32_t src_ip, uint32_t dst_ip,
			uint16_t src_port, uint16_t dst_port, uint16_t ip_id, uint32_t len,
			int ip_offload, int udp_offload)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + RTE_ETHER_HDR_LEN);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(frame + RTE_ETHER_HDR_LEN + IP_HDR_MIN);

	eth->dst_addr = *dst_mac;
	eth->src_addr = *src_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);

	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = 0;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(IP_HDR_MIN + UDP_HDR + len));
	ip->packet_id = rte_cpu_to_be_16(ip_id);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);   /* we never fragment */
	ip->time_to_live = DEFAULT_TTL;
	ip->next_proto_id = IPPROTO_UDP;
	ip->hdr_checksum = 0;
	ip->src_addr = src_ip;
	ip->dst_addr = dst_ip;
	if (!ip_offload)
		ip->hdr_checksum = rte_ipv4_cksum(ip);

	udp->src_port = rte_cpu_to_be_16(src_port);
	udp->dst_port = rte_cpu_to_be_16(dst_port);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(UDP_HDR + len));
	udp->dgram_cksum = 0;
	/* the port adds the datagram to the pseudo-header sum left here */
	if (udp_offload == NETSTACK_UDP_CKSUM_NONE)
		return;   /* zero: no checksum, as IPv4 allows */
	if (udp_offload)
		udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, 0);
	else
		udp->dgram_cksum = netstack_udp_cksum((const uint8_t *)ip, (const uint8_t *)udp,
						      (uint16_t)(UDP_HDR + len));
}

/* ---------------------------------------------------------------- TX queue */

uint32_t netstack_flush(struct netstack *ns)
{
	uint64_t bytes = 0;
	uint16_t sent, n = ns->ntx;

	if (!n)
		return 0;
	for (uint16_t i = 0; i < n; i++)
		bytes += ns->txq[i]->pkt_len;
	sent = ns->cfg.tx(ns->cfg.tx_arg, ns->txq, n);
	/* what the port did not take stays ours, in order */
	for (uint16_t i = sent; i < n; i++) {
		bytes -= ns->txq[i]->pkt_len;
		ns->txq[i - sent] = ns->txq[i];
	}
	ns->ntx = (uint16_t)(n - sent);
	ns->stats.tx_frames += sent;
	ns->stats.tx_bytes += bytes;
	return sent;
}

static int txq_add(struct netstack *ns, struct rte_mbuf *m)
{
	if (ns->ntx == NETSTACK_TXQ_MAX) {
		netstack_flush(ns);
		if (ns->ntx == NETSTACK_TXQ_MAX) {
			drop(ns, m, NETSTACK_DROP_TX_FULL);
			return -ENOSPC;
		}
	}
	ns->txq[ns->ntx++] = m;
	return 0;
}

/* ---------------------------------------------------------------- ARP */

/* Addresses differ in their last bytes, which network order puts in the
 * high bits: mix every bit into the low ones (murmur3's finalizer). */
static uint32_t arp_bucket(uint32_t ip)
{
	uint32_t h = ip;

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h & (NETSTACK_ARP_BUCKETS - 1);
}

static struct netstack_arp *arp_find(const struct netstack *ns, uint32_t ip)
{
	const struct netstack_arp *b = &ns->arp[arp_bucket(ip) * NETSTACK_ARP_WAYS];

	for (int w = 0; w < NETSTACK_ARP_WAYS; w++)
		if (b[w].state != NETSTACK_ARP_FREE && b[w].ip == ip)
			return (struct netstack_arp *)(uintptr_t)&b[w];
	return NULL;
}

static uint64_t arp_grace(const struct netstack *ns)
{
	return ns->cfg.arp_retry_ns * ns->cfg.arp_tries;
}

static int arp_usable(const struct netstack *ns, const struct netstack_arp *e, uint64_t now)
{
	return e->state == NETSTACK_ARP_REACHABLE && now < e->expires + arp_grace(ns);
}

/* Frames held for ip leave: to the TX queue with dst as their destination
 * MAC, or (dst NULL) dropped as why. Order is kept. */
static void hold_release(struct netstack *ns, uint32_t ip, const struct rte_ether_addr *dst,
			 enum netstack_drop why)
{
	uint16_t keep = 0;

	for (uint16_t i = 0; i < ns->nhold; i++) {
		struct netstack_hold h = ns->hold[i];

		if (h.nexthop != ip) {
			ns->hold[keep++] = h;
			continue;
		}
		if (dst) {
			rte_pktmbuf_mtod(h.m, struct rte_ether_hdr *)->dst_addr = *dst;
			ns->stats.hold_released++;
			txq_add(ns, h.m);
		} else {
			drop(ns, h.m, why);
		}
	}
	ns->nhold = keep;
}

/* A slot for ip in its bucket: a free one, else the REACHABLE entry that
 * expires first, else (all resolving) the one asked the longest ago, whose
 * held frames are dropped. */
static struct netstack_arp *arp_slot(struct netstack *ns, uint32_t ip)
{
	struct netstack_arp *b = &ns->arp[arp_bucket(ip) * NETSTACK_ARP_WAYS], *victim = NULL;

	for (int w = 0; w < NETSTACK_ARP_WAYS; w++) {
		struct netstack_arp *e = &b[w];

		if (e->state == NETSTACK_ARP_FREE) {
			victim = e;
			break;
		}
		if (!victim || (e->state == NETSTACK_ARP_REACHABLE && victim->state != NETSTACK_ARP_REACHABLE) ||
		    (e->state == victim->state &&
		     (e->state == NETSTACK_ARP_REACHABLE ? e->expires < victim->expires
							 : e->next_req < victim->next_req)))
			victim = e;
	}
	if (victim->state != NETSTACK_ARP_FREE) {
		ns->stats.arp_evicted++;
		if (victim->state == NETSTACK_ARP_INCOMPLETE)
			hold_release(ns, victim->ip, NULL, NETSTACK_DROP_ARP_TIMEOUT);
	}
	memset(victim, 0, sizeof(*victim));
	victim->ip = ip;
	return victim;
}

/* Sends an ARP request for tip: broadcast, or unicast to dst (a refresh). */
static int arp_request(struct netstack *ns, uint32_t tip, const struct rte_ether_addr *dst)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(ns->cfg.pool);
	struct rte_ether_hdr *eth;
	struct rte_arp_hdr *arp;
	uint8_t *p;

	if (!m) {
		ns->stats.drop[NETSTACK_DROP_NOBUFS]++;
		return -ENOBUFS;
	}
	p = (uint8_t *)rte_pktmbuf_append(m, ETH_MIN_FRAME);
	if (!p) {
		drop(ns, m, NETSTACK_DROP_NOBUFS);
		return -ENOBUFS;
	}
	memset(p, 0, ETH_MIN_FRAME);
	eth = (struct rte_ether_hdr *)p;
	eth->dst_addr = dst ? *dst : eth_bcast;
	eth->src_addr = ns->cfg.mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp = (struct rte_arp_hdr *)(p + RTE_ETHER_HDR_LEN);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	arp->arp_data.arp_sha = ns->cfg.mac;
	arp->arp_data.arp_sip = ns->cfg.ip;
	arp->arp_data.arp_tip = tip;
	ns->stats.arp_tx_requests++;
	return txq_add(ns, m);
}

static void arp_update(struct netstack *ns, uint32_t ip, const struct rte_ether_addr *mac, uint64_t now,
		       int create, int notify)
{
	struct netstack_arp *e = arp_find(ns, ip);
	int changed;

	if (!e) {
		if (!create)
			return;
		e = arp_slot(ns, ip);
	}
	changed = e->state != NETSTACK_ARP_REACHABLE || !rte_is_same_ether_addr(&e->mac, mac);
	e->mac = *mac;
	e->state = NETSTACK_ARP_REACHABLE;
	e->expires = now + ns->cfg.arp_ttl_ns;
	e->tries = 0;
	e->next_req = 0;
	if (changed) {
		ns->stats.arp_learned++;
		if (notify && ns->cfg.on_arp)
			ns->cfg.on_arp(ns->cfg.arp_arg, ip, mac);
	}
	if (ns->nhold)
		hold_release(ns, ip, mac, 0);
}

void netstack_arp_learn(struct netstack *ns, uint32_t ip, const struct rte_ether_addr *mac, uint64_t now)
{
	if (ip && rte_is_valid_assigned_ether_addr(mac))
		arp_update(ns, ip, mac, now, 1, 0);
}

int netstack_arp_lookup(const struct netstack *ns, uint32_t ip, struct rte_ether_addr *mac, uint64_t now)
{
	const struct netstack_arp *e = arp_find(ns, ip);

	if (!e || !arp_usable(ns, e, now))
		return -ENOENT;
	*mac = e->mac;
	return 0;
}

void netstack_arp_flush(struct netstack *ns)
{
	for (uint16_t i = 0; i < NETSTACK_ARP_SIZE; i++)
		memset(&ns->arp[i], 0, sizeof(ns->arp[i]));
	while (ns->nhold)
		hold_release(ns, ns->hold[0].nexthop, NULL, NETSTACK_DROP_ARP_TIMEOUT);
}

static void arp_in(struct netstack *ns, struct rte_mbuf *m, struct rte_ether_hdr *eth, uint64_t now)
{
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	struct rte_arp_ipv4 *a = &arp->arp_data;
	struct rte_ether_addr sha;
	uint32_t sip, tip;

	if (rte_pktmbuf_data_len(m) < ARP_FRAME)
		return drop(ns, m, NETSTACK_DROP_SHORT);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || arp->arp_hlen != RTE_ETHER_ADDR_LEN ||
	    arp->arp_plen != 4 || !rte_is_valid_assigned_ether_addr(&a->arp_sha))
		return drop(ns, m, NETSTACK_DROP_ARP_BAD);
	sha = a->arp_sha;
	sip = a->arp_sip;
	tip = a->arp_tip;
	switch (rte_be_to_cpu_16(arp->arp_opcode)) {
	case RTE_ARP_OP_REQUEST:
		ns->stats.arp_rx_requests++;
		/* RFC 826: a sender we know is refreshed whoever is asked; a
		 * sender asking us is learned (we are about to talk to it).
		 * sip 0 is a probe (RFC 5227): answered, not learned. */
		if (sip && sip != ns->cfg.ip)
			arp_update(ns, sip, &sha, now, tip == ns->cfg.ip, 1);
		if (tip != ns->cfg.ip)
			return drop(ns, m, NETSTACK_DROP_ARP_NOT_OURS);
		/* the reply, in the request's mbuf */
		arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
		a->arp_tha = sha;
		a->arp_tip = sip;
		a->arp_sha = ns->cfg.mac;
		a->arp_sip = ns->cfg.ip;
		eth->dst_addr = eth->src_addr;
		eth->src_addr = ns->cfg.mac;
		m->ol_flags &= MBUF_BUF_FLAGS;
		ns->stats.arp_tx_replies++;
		txq_add(ns, m);
		return;
	case RTE_ARP_OP_REPLY:
		ns->stats.arp_rx_replies++;
		if (sip && sip != ns->cfg.ip)
			arp_update(ns, sip, &sha, now, tip == ns->cfg.ip, 1);
		rte_pktmbuf_free(m);
		return;
	default:
		return drop(ns, m, NETSTACK_DROP_ARP_BAD);
	}
}

/* ---------------------------------------------------------------- IPv4 in */

static void icmp_in(struct netstack *ns, struct rte_mbuf *m, struct rte_ether_hdr *eth,
		    struct rte_ipv4_hdr *ip, int ihl)
{
	uint32_t tot = rte_be_to_cpu_16(ip->total_length), ilen = tot - (uint32_t)ihl;
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)((uint8_t *)ip + ihl);
	uint32_t frame = RTE_ETHER_HDR_LEN + tot;
	uint32_t addr;

	if (ilen < sizeof(*icmp) || rte_raw_cksum(icmp, ilen) != 0xffff)
		return drop(ns, m, NETSTACK_DROP_ICMP_BAD);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0)
		return drop(ns, m, NETSTACK_DROP_ICMP_TYPE);
	/* the reply, in place: same identifier, sequence and data */
	if (rte_pktmbuf_data_len(m) > frame)
		rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_data_len(m) - frame));
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, ilen);
	addr = ip->src_addr;
	ip->src_addr = ns->cfg.ip;
	ip->dst_addr = addr;
	ip->time_to_live = DEFAULT_TTL;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	eth->dst_addr = eth->src_addr;
	eth->src_addr = ns->cfg.mac;
	m->ol_flags &= MBUF_BUF_FLAGS;
	ns->stats.icmp_echo++;
	txq_add(ns, m);
}

static void ipv4_in(struct netstack *ns, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint64_t rxo = ns->cfg.rx_offloads;
	const uint8_t *udp;
	int ihl, ulen;

	ihl = netstack_ipv4_check((const uint8_t *)ip, rte_pktmbuf_data_len(m) - RTE_ETHER_HDR_LEN, m->ol_flags,
				  (rxo & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0);
	if (ihl < 0)
		return drop(ns, m, (enum netstack_drop)(-ihl - 1));
	if (ip->dst_addr != ns->cfg.ip)
		return drop(ns, m, NETSTACK_DROP_IP_NOT_OURS);
	if (ip->next_proto_id == IPPROTO_ICMP)
		return icmp_in(ns, m, eth, ip, ihl);
	if (ip->next_proto_id != IPPROTO_UDP)
		return drop(ns, m, NETSTACK_DROP_IP_PROTO);
	ulen = netstack_udp_check((const uint8_t *)ip, ihl, m->ol_flags,
				  (rxo & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) != 0);
	if (ulen < 0)
		return drop(ns, m, (enum netstack_drop)(-ulen - 1));
	udp = (const uint8_t *)ip + ihl;
	if (!ns->cfg.on_udp ||
	    rte_be_to_cpu_16(((const struct rte_udp_hdr *)udp)->dst_port) != ns->cfg.udp_port)
		return drop(ns, m, NETSTACK_DROP_UDP_PORT);
	ns->stats.udp_rx++;
	if (!ns->cfg.on_udp(ns->cfg.udp_arg, udp + UDP_HDR, (uint32_t)ulen - UDP_HDR, ip->src_addr,
			    rte_be_to_cpu_16(((const struct rte_udp_hdr *)udp)->src_port), m))
		rte_pktmbuf_free(m);
}

uint16_t netstack_rx(struct netstack *ns, struct rte_mbuf **pkts, uint16_t n, uint64_t now)
{
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct rte_ether_hdr *eth;

		ns->stats.rx_frames++;
		ns->stats.rx_bytes += m->pkt_len;
		if (m->nb_segs != 1) {
			drop(ns, m, NETSTACK_DROP_SEGMENTED);
			continue;
		}
		if (rte_pktmbuf_data_len(m) < RTE_ETHER_HDR_LEN) {
			drop(ns, m, NETSTACK_DROP_SHORT);
			continue;
		}
		eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
		if (!rte_is_same_ether_addr(&eth->dst_addr, &ns->cfg.mac) &&
		    !rte_is_broadcast_ether_addr(&eth->dst_addr)) {
			drop(ns, m, NETSTACK_DROP_ETH_NOT_OURS);
			continue;
		}
		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
			ipv4_in(ns, m, eth);
		else if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
			arp_in(ns, m, eth, now);
		else
			drop(ns, m, NETSTACK_DROP_ETHERTYPE);
	}
	return n;
}

/* ---------------------------------------------------------------- output */

static int is_broadcast(const struct netstack *ns, uint32_t ip)
{
	return ip == 0xffffffffu || (ns->cfg.netmask && ip == (ns->cfg.ip | ~ns->cfg.netmask));
}

static uint32_t nexthop(const struct netstack *ns, uint32_t dst)
{
	if (!ns->cfg.netmask || !ns->cfg.gateway || ((dst ^ ns->cfg.ip) & ns->cfg.netmask) == 0)
		return dst;
	return ns->cfg.gateway;
}

/* m is a complete frame but for its destination MAC: find it, or hold m
 * and ask. */
static int output(struct netstack *ns, struct rte_mbuf *m, uint32_t dst, uint64_t now)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct netstack_arp *e;
	uint32_t nh;

	if (is_broadcast(ns, dst)) {
		eth->dst_addr = eth_bcast;
		return txq_add(ns, m);
	}
	nh = nexthop(ns, dst);
	e = arp_find(ns, nh);
	if (e && arp_usable(ns, e, now)) {
		eth->dst_addr = e->mac;
		/* past its lifetime: still used while a unicast request refreshes it */
		if (now >= e->expires && now >= e->next_req) {
			e->next_req = now + ns->cfg.arp_retry_ns;
			arp_request(ns, nh, &e->mac);
		}
		return txq_add(ns, m);
	}
	if (ns->nhold == NETSTACK_HOLD_MAX) {
		drop(ns, m, NETSTACK_DROP_NO_ARP);
		return -EAGAIN;
	}
	if (!e) {
		e = arp_slot(ns, nh);
	} else if (e->state == NETSTACK_ARP_REACHABLE) {
		e->state = NETSTACK_ARP_FREE;   /* stale past its grace: resolve anew */
		e->tries = 0;
	}
	ns->hold[ns->nhold++] = (struct netstack_hold){ .m = m, .nexthop = nh };
	ns->stats.held++;
	if (e->state != NETSTACK_ARP_INCOMPLETE) {
		e->state = NETSTACK_ARP_INCOMPLETE;
		e->tries = 1;
		e->next_req = now + ns->cfg.arp_retry_ns;
		arp_request(ns, nh, NULL);
	}
	return 0;
}

int netstack_udp_send_mbuf(struct netstack *ns, struct rte_mbuf *m, uint32_t dst_ip, uint16_t dst_port,
			   uint16_t src_port, uint64_t now)
{
	uint64_t txo = ns->cfg.tx_offloads;
	int ipo = (txo & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0, udpo = (txo & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
	uint32_t len = rte_pktmbuf_data_len(m);
	uint8_t *frame;
	int r;

	if (m->nb_segs != 1 || rte_pktmbuf_headroom(m) < NETSTACK_HDR_LEN) {
		rte_pktmbuf_free(m);
		return -EINVAL;
	}
	if (len + IP_HDR_MIN + UDP_HDR > ns->cfg.mtu) {
		drop(ns, m, NETSTACK_DROP_TOO_BIG);
		return -EMSGSIZE;
	}
	frame = (uint8_t *)rte_pktmbuf_prepend(m, NETSTACK_HDR_LEN);
	netstack_udp_build(frame, &ns->cfg.mac, &eth_bcast, ns->cfg.ip, dst_ip, src_port, dst_port,
			   ns->ip_id++, len, ipo,
			   udpo ? 1 : ns->cfg.udp_cksum_none ? NETSTACK_UDP_CKSUM_NONE : 0);
	m->ol_flags &= MBUF_BUF_FLAGS;
	if (ipo || udpo) {
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | (ipo ? RTE_MBUF_F_TX_IP_CKSUM : 0) |
			       (udpo ? RTE_MBUF_F_TX_UDP_CKSUM : 0);
		m->l2_len = RTE_ETHER_HDR_LEN;
		m->l3_len = IP_HDR_MIN;
	}
	r = output(ns, m, dst_ip, now);
	if (r == 0)
		ns->stats.udp_tx++;
	return r;
}

int netstack_udp_send(struct netstack *ns, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		      const void *payload, uint32_t len, uint64_t now)
{
	struct rte_mbuf *m;
	void *p;

	if (len + IP_HDR_MIN + UDP_HDR > ns->cfg.mtu) {
		ns->stats.drop[NETSTACK_DROP_TOO_BIG]++;
		return -EMSGSIZE;
	}
	m = rte_pktmbuf_alloc(ns->cfg.pool);
	if (!m) {
		ns->stats.drop[NETSTACK_DROP_NOBUFS]++;
		return -ENOBUFS;
	}
	p = rte_pktmbuf_append(m, (uint16_t)len);
	if (!p) {   /* the pool's buffers are smaller than the MTU */
		drop(ns, m, NETSTACK_DROP_TOO_BIG);
		return -EMSGSIZE;
	}
	memcpy(p, payload, len);
	return netstack_udp_send_mbuf(ns, m, dst_ip, dst_port, src_port, now);
}

/* ---------------------------------------------------------------- timers */

uint32_t netstack_poll(struct netstack *ns, uint64_t now)
{
	if (now >= ns->next_sweep) {
		for (uint32_t i = 0; i < NETSTACK_ARP_SIZE; i++) {
			struct netstack_arp *e = &ns->arp[i];

			if (e->state == NETSTACK_ARP_INCOMPLETE && now >= e->next_req) {
				if (e->tries >= ns->cfg.arp_tries) {
					uint32_t ip = e->ip;

					memset(e, 0, sizeof(*e));
					hold_release(ns, ip, NULL, NETSTACK_DROP_ARP_TIMEOUT);
				} else {
					e->tries++;
					e->next_req = now + ns->cfg.arp_retry_ns;
					arp_request(ns, e->ip, NULL);
				}
			} else if (e->state == NETSTACK_ARP_REACHABLE && !arp_usable(ns, e, now)) {
				memset(e, 0, sizeof(*e));
			}
		}
		/* retries are due in arp_retry_ns; look 8 times as often */
		ns->next_sweep = now + ns->cfg.arp_retry_ns / 8;
	}
	return netstack_flush(ns);
}
