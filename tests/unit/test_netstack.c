/* tests/unit/test_netstack.c — the shard's L2/L3 stack on hand-built
 * frames: IPv4/UDP checks and checksums against independent sums, ARP
 * (replies, requests, cache, hold, expiry, eviction), ICMP echo, UDP
 * delivery and sending, and a counter for every drop.
 *
 * No EAL (Criterion forks per test; STYLE 24): mbufs live in plain memory
 * and come from a mempool built by hand on mempool ops registered here, so
 * rte_pktmbuf_alloc/free work unchanged. Every test ends by checking that
 * all mbufs went back to the pool: the stack leaks none. TX goes to a
 * capture instead of a port. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_ethdev.h>
#include <rte_icmp.h>
#include <rte_mempool.h>

#include "dataplane/netstack.h"

/* ---------------------------------------------------------------- a pool without EAL */

#define POOL_N 512
#define ROOM (RTE_PKTMBUF_HEADROOM + 2048)

struct fake_pool {
	struct rte_mempool mp;               /* cache_size 0: no per-lcore caches */
	struct rte_pktmbuf_pool_private priv; /* where rte_mempool_get_priv looks */
	void *free[POOL_N];
	unsigned nfree;
	uint8_t *mem;
};

static int fp_alloc(struct rte_mempool *mp) { (void)mp; return 0; }
static void fp_free(struct rte_mempool *mp) { (void)mp; }

static int fp_enqueue(struct rte_mempool *mp, void *const *objs, unsigned n)
{
	struct fake_pool *fp = mp->pool_data;

	cr_assert_leq(fp->nfree + n, POOL_N, "more mbufs returned than the pool has: a double free");
	for (unsigned i = 0; i < n; i++)
		fp->free[fp->nfree++] = objs[i];
	return 0;
}

static int fp_dequeue(struct rte_mempool *mp, void **objs, unsigned n)
{
	struct fake_pool *fp = mp->pool_data;

	if (fp->nfree < n)
		return -ENOBUFS;
	for (unsigned i = 0; i < n; i++)
		objs[i] = fp->free[--fp->nfree];
	return 0;
}

static unsigned fp_count(const struct rte_mempool *mp)
{
	return ((struct fake_pool *)mp->pool_data)->nfree;
}

static const struct rte_mempool_ops fake_ops = {
	.name = "sluice_test",
	.alloc = fp_alloc,
	.free = fp_free,
	.enqueue = fp_enqueue,
	.dequeue = fp_dequeue,
	.get_count = fp_count,
};
static int fake_ops_index = -1;

/* once, in the parent: every forked test inherits the table entry */
__attribute__((constructor)) static void register_fake_ops(void)
{
	fake_ops_index = rte_mempool_register_ops(&fake_ops);
}

static struct fake_pool *pool;

static void pool_make(void)
{
	size_t elt = sizeof(struct rte_mbuf) + ROOM;

	cr_assert_geq(fake_ops_index, 0, "registering the test mempool ops");
	cr_assert_eq(posix_memalign((void **)&pool, RTE_CACHE_LINE_SIZE, sizeof(*pool)), 0);
	memset(pool, 0, sizeof(*pool));
	cr_assert_eq(posix_memalign((void **)&pool->mem, RTE_CACHE_LINE_SIZE, elt * POOL_N), 0);
	snprintf(pool->mp.name, sizeof(pool->mp.name), "test");
	pool->mp.pool_data = pool;
	pool->mp.ops_index = fake_ops_index;
	pool->mp.size = POOL_N;
	pool->mp.elt_size = (uint32_t)elt;
	pool->mp.private_data_size = sizeof(pool->priv);
	pool->priv.mbuf_data_room_size = ROOM;
	cr_assert_eq(rte_mempool_get_priv(&pool->mp), (void *)&pool->priv);
	for (int i = 0; i < POOL_N; i++) {
		struct rte_mbuf *m = (struct rte_mbuf *)(pool->mem + elt * (size_t)i);

		memset(m, 0, sizeof(*m));
		m->buf_addr = (char *)m + sizeof(*m);
		m->buf_len = ROOM;
		m->pool = &pool->mp;
		m->nb_segs = 1;
		m->port = RTE_MBUF_PORT_INVALID;
		rte_mbuf_refcnt_set(m, 1);
		rte_pktmbuf_reset_headroom(m);
		pool->free[pool->nfree++] = m;
	}
}

/* ---------------------------------------------------------------- the stack under test */

#define CAP_MAX 1024

struct capture {
	struct rte_mbuf *m[CAP_MAX];
	int n;
	int take;          /* frames the "port" accepts per call; -1: all */
};

static struct capture cap;
static struct netstack ns;

static uint16_t cap_tx(void *arg, struct rte_mbuf **pkts, uint16_t n)
{
	struct capture *c = arg;
	uint16_t k = n;

	if (c->take >= 0 && k > c->take)
		k = (uint16_t)c->take;
	for (uint16_t i = 0; i < k; i++) {
		cr_assert_lt(c->n, CAP_MAX);
		c->m[c->n++] = pkts[i];
	}
	return k;
}

static void cap_clear(void)
{
	for (int i = 0; i < cap.n; i++)
		rte_pktmbuf_free(cap.m[i]);
	cap.n = 0;
}

/* what on_udp saw */
static struct {
	int calls, keep;
	uint8_t data[4096];
	uint32_t len, src_ip;
	uint16_t src_port;
	struct rte_mbuf *kept[64];
	int nkept;
} got;

static int on_udp(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip, uint16_t src_port,
		  struct rte_mbuf *m)
{
	(void)arg;
	got.calls++;
	cr_assert_leq(len, sizeof(got.data));
	memcpy(got.data, payload, len);
	got.len = len;
	got.src_ip = src_ip;
	got.src_port = src_port;
	if (got.keep) {
		got.kept[got.nkept++] = m;
		return 1;
	}
	return 0;
}

static struct {
	int calls;
	uint32_t ip;
	struct rte_ether_addr mac;
} arps;

static void on_arp(void *arg, uint32_t ip, const struct rte_ether_addr *mac)
{
	(void)arg;
	arps.calls++;
	arps.ip = ip;
	arps.mac = *mac;
}

#define SEC 1000000000ull
static const struct rte_ether_addr our_mac = { { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 } };
static const struct rte_ether_addr peer_mac = { { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 } };
static const struct rte_ether_addr gw_mac = { { 0x02, 0x00, 0x00, 0x00, 0x00, 0xfe } };
static uint32_t our_ip, peer_ip, gw_ip, far_ip;
#define OUR_PORT 9093
#define PEER_PORT 40000

static void cfg_base(struct netstack_config *c)
{
	netstack_config_defaults(c);
	c->ip = our_ip;
	c->netmask = inet_addr("255.255.255.0");
	c->gateway = gw_ip;
	c->mac = our_mac;
	c->udp_port = OUR_PORT;
	c->pool = &pool->mp;
	c->tx = cap_tx;
	c->tx_arg = &cap;
	c->on_udp = on_udp;
	c->on_arp = on_arp;
}

static void setup(void)
{
	struct netstack_config c;

	our_ip = inet_addr("10.9.0.1");
	peer_ip = inet_addr("10.9.0.2");
	gw_ip = inet_addr("10.9.0.254");
	far_ip = inet_addr("192.0.2.7");
	pool_make();
	memset(&cap, 0, sizeof(cap));
	cap.take = -1;
	memset(&got, 0, sizeof(got));
	memset(&arps, 0, sizeof(arps));
	cfg_base(&c);
	cr_assert_eq(netstack_init(&ns, &c), 0);
}

/* Every mbuf back in the pool once the stack and the capture let go. */
static void teardown(void)
{
	netstack_fini(&ns);
	cap_clear();
	for (int i = 0; i < got.nkept; i++)
		rte_pktmbuf_free(got.kept[i]);
	cr_expect_eq(pool->nfree, POOL_N, "mbufs leaked: %u of %d back in the pool", pool->nfree, POOL_N);
	free(pool->mem);
	free(pool);
}

TestSuite(netstack, .init = setup, .fini = teardown);

/* ---------------------------------------------------------------- frame building */

/* An independent Internet checksum (RFC 1071), byte by byte. */
static uint16_t ref_sum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* The UDP checksum as RFC 768 defines it, in host order. */
static uint16_t ref_udp_cksum(const uint8_t *ip, const uint8_t *udp, size_t ulen)
{
	uint8_t ph[12];
	uint16_t c;

	memcpy(ph, ip + 12, 8);
	ph[8] = 0;
	ph[9] = 17;
	ph[10] = (uint8_t)(ulen >> 8);
	ph[11] = (uint8_t)ulen;
	uint8_t tmp[2048];
	memcpy(tmp, udp, ulen);
	tmp[6] = tmp[7] = 0;
	c = (uint16_t)~ref_sum(tmp, ulen, ref_sum(ph, 12, 0));
	return c ? c : 0xffff;
}

static struct rte_mbuf *frame_mbuf(const void *bytes, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(&pool->mp);

	cr_assert_not_null(m);
	memcpy(rte_pktmbuf_append(m, len), bytes, len);
	return m;
}

/* A UDP frame from peer to us (checksums right) of plen payload bytes. */
static uint16_t udp_frame(uint8_t *f, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport,
			  const void *payload, uint16_t plen)
{
	memcpy(f + NETSTACK_HDR_LEN, payload, plen);
	netstack_udp_build(f, &peer_mac, &our_mac, src, dst, sport, dport, 7, plen, 0, 0);
	return (uint16_t)(NETSTACK_HDR_LEN + plen);
}

static void ip_recsum(uint8_t *f)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
}

static void rx1(const uint8_t *f, uint16_t len, uint64_t now)
{
	struct rte_mbuf *m = frame_mbuf(f, len);

	cr_assert_eq(netstack_rx(&ns, &m, 1, now), 1);
}

static uint64_t total_drops(void)
{
	uint64_t s = 0;

	for (int i = 0; i < NETSTACK_DROP_MAX; i++)
		s += ns.stats.drop[i];
	return s;
}

Test(netstack, udp_build_matches_independent_checksums)
{
	uint8_t f[2048];

	for (uint16_t plen = 0; plen < 40; plen++) {
		uint8_t pay[64];

		for (int i = 0; i < plen; i++)
			pay[i] = (uint8_t)(i * 37 + plen);
		uint16_t len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, pay, plen);
		const uint8_t *ip = f + 14, *udp = f + 34;

		cr_assert_eq(len, 42 + plen);
		cr_assert_eq(ref_sum(ip, 20, 0), 0xffff, "IPv4 header checksum");
		cr_assert_eq(ntohs(((const struct rte_udp_hdr *)udp)->dgram_cksum),
			     ref_udp_cksum(ip, udp, 8u + plen), "UDP checksum, payload %u", plen);
		/* DPDK's own implementation agrees */
		uint8_t g[2048];
		memcpy(g, f, len);
		((struct rte_udp_hdr *)(g + 34))->dgram_cksum = 0;
		cr_assert_eq(rte_ipv4_udptcp_cksum((const struct rte_ipv4_hdr *)(g + 14), g + 34),
			     ((const struct rte_udp_hdr *)udp)->dgram_cksum);
		cr_assert_eq(netstack_ipv4_check(ip, len - 14u, 0, 0), 20);
		cr_assert_eq(netstack_udp_check(ip, 20, 0, 0), 8 + plen);
		cr_assert_eq(ip[8], 64, "ttl");
		cr_assert_eq(ip[6] & 0x40, 0x40, "DF: the stack never fragments");
	}
}

Test(netstack, udp_build_offloaded_leaves_what_the_port_completes)
{
	uint8_t f[256];
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);

	memset(f + 42, 0xab, 100);
	netstack_udp_build(f, &our_mac, &peer_mac, our_ip, peer_ip, 1, 2, 9, 100, 1, 1);
	cr_assert_eq(ip->hdr_checksum, 0, "the port writes the IPv4 checksum");
	cr_assert_eq(udp->dgram_cksum, rte_ipv4_phdr_cksum(ip, 0), "the pseudo-header sum for the port");
	/* what the port does: sum the datagram over the pseudo-header sum */
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	uint16_t c = (uint16_t)~ref_sum(f + 34, 108, 0);
	udp->dgram_cksum = htons(c ? c : 0xffff);
	cr_assert_eq(netstack_udp_check(f + 14, 20, 0, 0), 108);
}

Test(netstack, ipv4_check_refuses_each_bad_header)
{
	uint8_t f[256], g[256];
	uint16_t len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "abcd", 4);
	uint32_t l3 = len - 14u;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(g + 14);

#define CHECK(expect, ...) do { \
	memcpy(g, f, len); __VA_ARGS__; \
	cr_assert_eq(netstack_ipv4_check(g + 14, l3, 0, 0), -(expect + 1), #__VA_ARGS__); \
} while (0)
	CHECK(NETSTACK_DROP_IP_VERSION, ip->version_ihl = 0x65; ip_recsum(g));
	CHECK(NETSTACK_DROP_IP_HDR, ip->version_ihl = 0x44; ip_recsum(g));
	CHECK(NETSTACK_DROP_IP_HDR, ip->total_length = htons(19); ip_recsum(g));
	CHECK(NETSTACK_DROP_SHORT, ip->total_length = htons((uint16_t)(l3 + 1)); ip_recsum(g));
	CHECK(NETSTACK_DROP_SHORT, ip->version_ihl = 0x4f; ip_recsum(g));   /* 60-byte header, 32 there */
	CHECK(NETSTACK_DROP_IP_CKSUM, ip->hdr_checksum ^= htons(1));
	CHECK(NETSTACK_DROP_IP_CKSUM, ip->time_to_live--);
	CHECK(NETSTACK_DROP_IP_FRAG, ip->fragment_offset = htons(RTE_IPV4_HDR_MF_FLAG); ip_recsum(g));
	CHECK(NETSTACK_DROP_IP_FRAG, ip->fragment_offset = htons(185); ip_recsum(g));
#undef CHECK
	cr_assert_eq(netstack_ipv4_check(f + 14, 19, 0, 0), -(NETSTACK_DROP_SHORT + 1));
	/* a frame longer than the packet (Ethernet padding) is fine */
	cr_assert_eq(netstack_ipv4_check(f + 14, l3 + 18, 0, 0), 20);

	/* RX offload flags: trusted only when the port verifies */
	memcpy(g, f, len);
	ip->hdr_checksum ^= htons(1);
	cr_assert_eq(netstack_ipv4_check(g + 14, l3, RTE_MBUF_F_RX_IP_CKSUM_GOOD, 1), 20, "GOOD: not re-verified");
	cr_assert_eq(netstack_ipv4_check(g + 14, l3, RTE_MBUF_F_RX_IP_CKSUM_GOOD, 0), -(NETSTACK_DROP_IP_CKSUM + 1),
		     "flags ignored when the port does not verify");
	cr_assert_eq(netstack_ipv4_check(f + 14, l3, RTE_MBUF_F_RX_IP_CKSUM_BAD, 1), -(NETSTACK_DROP_IP_CKSUM + 1),
		     "BAD: dropped");
	cr_assert_eq(netstack_ipv4_check(f + 14, l3, RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, 1), 20);
	cr_assert_eq(netstack_ipv4_check(g + 14, l3, RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, 1),
		     -(NETSTACK_DROP_IP_CKSUM + 1), "UNKNOWN: verified in software");
}

Test(netstack, ipv4_options_are_skipped)
{
	uint8_t f[256];
	uint16_t len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "hello", 5);
	uint8_t g[256];

	/* insert 4 bytes of options (NOP NOP NOP EOL) after the 20-byte header */
	memcpy(g, f, 34);
	g[34] = 1; g[35] = 1; g[36] = 1; g[37] = 0;
	memcpy(g + 38, f + 34, len - 34u);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(g + 14);
	ip->version_ihl = 0x46;
	ip->total_length = htons((uint16_t)(ntohs(ip->total_length) + 4));
	ip_recsum(g);
	cr_assert_eq(netstack_ipv4_check(g + 14, len + 4u - 14u, 0, 0), 24);
	cr_assert_eq(netstack_udp_check(g + 14, 24, 0, 0), 13);
	rx1(g, (uint16_t)(len + 4), 0);
	cr_assert_eq(got.calls, 1);
	cr_assert_eq(got.len, 5);
	cr_assert_eq(memcmp(got.data, "hello", 5), 0);
}

Test(netstack, udp_check_refuses_bad_lengths_and_checksums)
{
	uint8_t f[256], g[256];
	uint16_t len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "abcdefgh", 8);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(g + 34);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(g + 14);

	memcpy(g, f, len);
	udp->dgram_len = htons(7);
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), -(NETSTACK_DROP_UDP_LEN + 1));
	udp->dgram_len = htons(17);
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), -(NETSTACK_DROP_UDP_LEN + 1));
	memcpy(g, f, len);
	ip->total_length = htons(20 + 7);
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), -(NETSTACK_DROP_UDP_LEN + 1));
	memcpy(g, f, len);
	g[42] ^= 1;
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), -(NETSTACK_DROP_UDP_CKSUM + 1));
	cr_assert_eq(netstack_udp_check(g + 14, 20, RTE_MBUF_F_RX_L4_CKSUM_GOOD, 1), 16, "GOOD: trusted");
	cr_assert_eq(netstack_udp_check(g + 14, 20, RTE_MBUF_F_RX_L4_CKSUM_GOOD, 0),
		     -(NETSTACK_DROP_UDP_CKSUM + 1));
	cr_assert_eq(netstack_udp_check(f + 14, 20, RTE_MBUF_F_RX_L4_CKSUM_BAD, 1),
		     -(NETSTACK_DROP_UDP_CKSUM + 1), "BAD: dropped");
	udp->dgram_cksum = 0;
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), 16, "zero: no checksum, as IPv4 allows");
	/* a shorter UDP length than the IP payload: the checksum covers the UDP length */
	memcpy(g, f, len);
	udp->dgram_len = htons(12);
	udp->dgram_cksum = 0;
	udp->dgram_cksum = htons(ref_udp_cksum(g + 14, g + 34, 12));
	cr_assert_eq(netstack_udp_check(g + 14, 20, 0, 0), 12);
}

/* ---------------------------------------------------------------- ARP */

static uint16_t arp_frame(uint8_t *f, uint16_t op, const struct rte_ether_addr *eth_dst,
			  const struct rte_ether_addr *sha, uint32_t sip, const struct rte_ether_addr *tha,
			  uint32_t tip)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(f + 14);

	memset(f, 0, 60);
	eth->dst_addr = *eth_dst;
	eth->src_addr = *sha;
	eth->ether_type = htons(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = htons(1);
	arp->arp_protocol = htons(0x0800);
	arp->arp_hlen = 6;
	arp->arp_plen = 4;
	arp->arp_opcode = htons(op);
	arp->arp_data.arp_sha = *sha;
	arp->arp_data.arp_sip = sip;
	if (tha)
		arp->arp_data.arp_tha = *tha;
	arp->arp_data.arp_tip = tip;
	return 60;
}

static const struct rte_ether_addr bcast = { { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } };

static const struct rte_arp_hdr *cap_arp(int i)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(cap.m[i], const struct rte_ether_hdr *);

	cr_assert_eq(eth->ether_type, htons(RTE_ETHER_TYPE_ARP), "frame %d is ARP", i);
	return (const struct rte_arp_hdr *)(eth + 1);
}

Test(netstack, arp_request_for_us_is_answered_and_learned)
{
	uint8_t f[64];
	struct rte_ether_addr mac;

	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, our_ip), 5 * SEC);
	cr_assert_eq(netstack_flush(&ns), 1);
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(cap.m[0], const struct rte_ether_hdr *);
	const struct rte_arp_hdr *a = cap_arp(0);
	cr_assert(rte_is_same_ether_addr(&eth->dst_addr, &peer_mac));
	cr_assert(rte_is_same_ether_addr(&eth->src_addr, &our_mac));
	cr_assert_eq(ntohs(a->arp_opcode), RTE_ARP_OP_REPLY);
	cr_assert(rte_is_same_ether_addr(&a->arp_data.arp_sha, &our_mac));
	cr_assert_eq(a->arp_data.arp_sip, our_ip);
	cr_assert(rte_is_same_ether_addr(&a->arp_data.arp_tha, &peer_mac));
	cr_assert_eq(a->arp_data.arp_tip, peer_ip);
	cr_assert_eq(cap.m[0]->ol_flags, 0);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, 5 * SEC), 0, "the asker is learned");
	cr_assert(rte_is_same_ether_addr(&mac, &peer_mac));
	cr_assert_eq(arps.calls, 1);
	cr_assert_eq(arps.ip, peer_ip);
	cr_assert_eq(ns.stats.arp_rx_requests, 1);
	cr_assert_eq(ns.stats.arp_tx_replies, 1);
	cr_assert_eq(ns.stats.tx_frames, 1);
	cr_assert_eq(total_drops(), 0);
	/* the same again: no news for on_arp */
	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, our_ip), 6 * SEC);
	cr_assert_eq(arps.calls, 1);
}

Test(netstack, arp_request_for_others_is_ignored_but_refreshes)
{
	uint8_t f[64];
	struct rte_ether_addr mac, other = { { 0x02, 0, 0, 0, 0, 0x33 } };

	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, inet_addr("10.9.0.77")), 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ARP_NOT_OURS], 1);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, 0), -ENOENT, "not learned: it did not ask us");
	cr_assert_eq(netstack_flush(&ns), 0, "nothing answered");
	/* known sender, new MAC (RFC 826 merge): updated even if not asking us */
	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &other, peer_ip, NULL, inet_addr("10.9.0.77")), SEC);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, SEC), 0);
	cr_assert(rte_is_same_ether_addr(&mac, &other));
	cr_assert_eq(arps.calls, 1, "a change is news");
}

Test(netstack, arp_probe_is_answered_not_learned)
{
	uint8_t f[64];
	struct rte_ether_addr mac;

	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, 0, NULL, our_ip), 0);
	cr_assert_eq(netstack_flush(&ns), 1);
	cr_assert_eq(cap_arp(0)->arp_data.arp_tip, 0);
	cr_assert_eq(netstack_arp_lookup(&ns, 0, &mac, 0), -ENOENT);
	cr_assert_eq(ns.stats.arp_learned, 0);
}

Test(netstack, arp_claiming_our_address_is_not_learned)
{
	uint8_t f[64];
	struct rte_ether_addr mac;

	rx1(f, arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, our_ip, NULL, our_ip), 0);
	rx1(f, arp_frame(f, RTE_ARP_OP_REPLY, &our_mac, &peer_mac, our_ip, &our_mac, our_ip), 0);
	cr_assert_eq(netstack_arp_lookup(&ns, our_ip, &mac, 0), -ENOENT);
	cr_assert_eq(ns.stats.arp_learned, 0);
	cr_assert_eq(arps.calls, 0);
}

Test(netstack, arp_bad_frames_are_counted)
{
	uint8_t f[64];
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(f + 14);
	struct rte_ether_addr mcast = { { 0x01, 0, 0x5e, 0, 0, 1 } };

	arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, our_ip);
	a->arp_hlen = 8;
	rx1(f, 60, 0);
	arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, our_ip);
	a->arp_protocol = htons(0x86dd);
	rx1(f, 60, 0);
	arp_frame(f, 9, &bcast, &peer_mac, peer_ip, NULL, our_ip);
	rx1(f, 60, 0);
	arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &mcast, peer_ip, NULL, our_ip);
	rx1(f, 60, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ARP_BAD], 4);
	arp_frame(f, RTE_ARP_OP_REQUEST, &bcast, &peer_mac, peer_ip, NULL, our_ip);
	rx1(f, 14 + 27, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_SHORT], 1);
	cr_assert_eq(netstack_flush(&ns), 0);
	cr_assert_eq(ns.stats.arp_learned, 0);
}

/* ---------------------------------------------------------------- ICMP */

static uint16_t icmp_frame(uint8_t *f, uint8_t type, const void *data, uint16_t dlen)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(f + 34);

	eth->dst_addr = our_mac;
	eth->src_addr = peer_mac;
	eth->ether_type = htons(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, 20);
	ip->version_ihl = 0x45;
	ip->total_length = htons((uint16_t)(20 + 8 + dlen));
	ip->time_to_live = 7;
	ip->next_proto_id = IPPROTO_ICMP;
	ip->src_addr = peer_ip;
	ip->dst_addr = our_ip;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp->icmp_type = type;
	icmp->icmp_code = 0;
	icmp->icmp_ident = htons(0x1234);
	icmp->icmp_seq_nb = htons(42);
	memcpy(icmp + 1, data, dlen);
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = htons((uint16_t)~ref_sum((uint8_t *)icmp, 8u + dlen, 0));
	return (uint16_t)(34 + 8 + dlen);
}

Test(netstack, icmp_echo_is_answered_in_place)
{
	uint8_t f[128];
	uint16_t len = icmp_frame(f, RTE_IP_ICMP_ECHO_REQUEST, "0123456789", 10);

	/* padded like a short Ethernet frame: the reply drops the padding */
	memset(f + len, 0xee, 60 - len > 0 ? 60 - len : 0);
	rx1(f, len < 60 ? 60 : len, 0);
	cr_assert_eq(netstack_flush(&ns), 1);
	struct rte_mbuf *m = cap.m[0];
	const uint8_t *r = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(r + 14);
	const struct rte_icmp_hdr *icmp = (const struct rte_icmp_hdr *)(r + 34);

	cr_assert_eq(rte_pktmbuf_data_len(m), len);
	cr_assert(rte_is_same_ether_addr(&((const struct rte_ether_hdr *)r)->dst_addr, &peer_mac));
	cr_assert(rte_is_same_ether_addr(&((const struct rte_ether_hdr *)r)->src_addr, &our_mac));
	cr_assert_eq(ip->src_addr, our_ip);
	cr_assert_eq(ip->dst_addr, peer_ip);
	cr_assert_eq(ref_sum(r + 14, 20, 0), 0xffff, "IPv4 checksum of the reply");
	cr_assert_eq(icmp->icmp_type, RTE_IP_ICMP_ECHO_REPLY);
	cr_assert_eq(ntohs(icmp->icmp_ident), 0x1234);
	cr_assert_eq(ntohs(icmp->icmp_seq_nb), 42);
	cr_assert_eq(ref_sum(r + 34, 18, 0), 0xffff, "ICMP checksum of the reply");
	cr_assert_eq(memcmp(r + 42, "0123456789", 10), 0);
	cr_assert_eq(ns.stats.icmp_echo, 1);

	icmp_frame(f, RTE_IP_ICMP_ECHO_REQUEST, "0123456789", 10);
	f[45] ^= 0x10;
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ICMP_BAD], 1);
	rx1(f, icmp_frame(f, 13, "x", 1), 0);   /* timestamp request */
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ICMP_TYPE], 1);
	cr_assert_eq(netstack_flush(&ns), 0);
}

/* ---------------------------------------------------------------- UDP in */

Test(netstack, udp_datagram_reaches_the_callback)
{
	uint8_t f[2048], pay[1472];

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i ^ 0x5a);
	rx1(f, udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, pay, sizeof(pay)), 0);
	cr_assert_eq(got.calls, 1);
	cr_assert_eq(got.len, sizeof(pay));
	cr_assert_eq(memcmp(got.data, pay, sizeof(pay)), 0);
	cr_assert_eq(got.src_ip, peer_ip);
	cr_assert_eq(got.src_port, PEER_PORT);
	cr_assert_eq(ns.stats.udp_rx, 1);
	cr_assert_eq(total_drops(), 0);
	cr_assert_eq(pool->nfree, POOL_N, "the stack freed the mbuf after the callback");

	/* a callback that keeps the mbuf owns it */
	got.keep = 1;
	rx1(f, udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "k", 1), 0);
	cr_assert_eq(got.nkept, 1);
	cr_assert_eq(pool->nfree, POOL_N - 1);
	cr_assert_eq(*rte_pktmbuf_mtod_offset(got.kept[0], const char *, 42), 'k');
}

Test(netstack, udp_drops_are_counted_by_reason)
{
	uint8_t f[256];
	uint16_t len;
	struct rte_ether_addr other = { { 0x02, 0, 0, 0, 0, 0x77 } };

	rx1(f, udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT + 1, "x", 1), 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_UDP_PORT], 1);
	rx1(f, udp_frame(f, peer_ip, inet_addr("10.9.0.3"), PEER_PORT, OUR_PORT, "x", 1), 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_IP_NOT_OURS], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "x", 1);
	((struct rte_ether_hdr *)f)->dst_addr = other;
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ETH_NOT_OURS], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "x", 1);
	((struct rte_ether_hdr *)f)->ether_type = htons(RTE_ETHER_TYPE_IPV6);
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ETHERTYPE], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	f[44] ^= 0xff;
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_UDP_CKSUM], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	((struct rte_ipv4_hdr *)(f + 14))->fragment_offset = htons(RTE_IPV4_HDR_MF_FLAG);
	ip_recsum(f);
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_IP_FRAG], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	((struct rte_ipv4_hdr *)(f + 14))->next_proto_id = IPPROTO_TCP;
	ip_recsum(f);
	rx1(f, len, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_IP_PROTO], 1);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	rx1(f, len - 1, 0);   /* truncated: total length says one byte more */
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_SHORT], 1);
	rx1(f, 13, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_SHORT], 2);

	/* a chained mbuf */
	struct rte_mbuf *a = frame_mbuf(f, 30), *b = frame_mbuf(f + 30, (uint16_t)(len - 30));
	a->next = b;
	a->nb_segs = 2;
	a->pkt_len = len;
	netstack_rx(&ns, &a, 1, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_SEGMENTED], 1);

	cr_assert_eq(got.calls, 0);
	cr_assert_eq(ns.stats.rx_frames, 10);
	cr_assert_eq(total_drops(), 10);
}

Test(netstack, udp_rx_offload_flags_are_honoured)
{
	struct netstack_config c;
	uint8_t f[256];
	uint16_t len;
	struct rte_mbuf *m;

	netstack_fini(&ns);
	cfg_base(&c);
	c.rx_offloads = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	cr_assert_eq(netstack_init(&ns, &c), 0);
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	f[44] ^= 0xff;   /* payload changed after the checksum */
	m = frame_mbuf(f, len);
	m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	netstack_rx(&ns, &m, 1, 0);
	cr_assert_eq(got.calls, 1, "the port said good: not verified again");
	len = udp_frame(f, peer_ip, our_ip, PEER_PORT, OUR_PORT, "xyz", 3);
	m = frame_mbuf(f, len);
	m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_BAD;
	netstack_rx(&ns, &m, 1, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_UDP_CKSUM], 1, "the port said bad");
	m = frame_mbuf(f, len);
	m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_BAD;
	netstack_rx(&ns, &m, 1, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_IP_CKSUM], 1);
	cr_assert_eq(got.calls, 1);
}

/* ---------------------------------------------------------------- sending */

static const struct rte_udp_hdr *cap_udp(int i, const uint8_t **payload)
{
	const uint8_t *r = rte_pktmbuf_mtod(cap.m[i], const uint8_t *);

	cr_assert_eq(((const struct rte_ether_hdr *)r)->ether_type, htons(RTE_ETHER_TYPE_IPV4), "frame %d is IPv4", i);
	if (payload)
		*payload = r + 42;
	return (const struct rte_udp_hdr *)(r + 34);
}

Test(netstack, send_resolves_the_next_hop_and_keeps_order)
{
	char msg[32];

	for (int i = 0; i < 3; i++) {
		snprintf(msg, sizeof(msg), "datagram %d", i);
		cr_assert_eq(netstack_udp_send(&ns, peer_ip, PEER_PORT, OUR_PORT, msg, (uint32_t)strlen(msg), SEC), 0);
	}
	cr_assert_eq(ns.stats.held, 3);
	cr_assert_eq(netstack_flush(&ns), 1, "one ARP request, the datagrams wait");
	const struct rte_arp_hdr *a = cap_arp(0);
	cr_assert_eq(ntohs(a->arp_opcode), RTE_ARP_OP_REQUEST);
	cr_assert_eq(a->arp_data.arp_tip, peer_ip);
	cr_assert_eq(a->arp_data.arp_sip, our_ip);
	cr_assert(rte_is_same_ether_addr(&rte_pktmbuf_mtod(cap.m[0], struct rte_ether_hdr *)->dst_addr, &bcast));
	cr_assert_eq(rte_pktmbuf_data_len(cap.m[0]), 60, "padded to the Ethernet minimum");
	cap_clear();

	uint8_t f[64];
	rx1(f, arp_frame(f, RTE_ARP_OP_REPLY, &our_mac, &peer_mac, peer_ip, &our_mac, our_ip), SEC + 1000);
	cr_assert_eq(netstack_flush(&ns), 3);
	for (int i = 0; i < 3; i++) {
		const uint8_t *p, *r = rte_pktmbuf_mtod(cap.m[i], const uint8_t *);
		const struct rte_udp_hdr *u = cap_udp(i, &p);

		snprintf(msg, sizeof(msg), "datagram %d", i);
		cr_assert(rte_is_same_ether_addr(&((const struct rte_ether_hdr *)r)->dst_addr, &peer_mac));
		cr_assert_eq(memcmp(p, msg, strlen(msg)), 0, "in the order sent");
		cr_assert_eq(ntohs(u->dst_port), PEER_PORT);
		cr_assert_eq(ntohs(u->src_port), OUR_PORT);
		cr_assert_eq(netstack_ipv4_check(r + 14, rte_pktmbuf_data_len(cap.m[i]) - 14u, 0, 0), 20);
		cr_assert_eq(netstack_udp_check(r + 14, 20, 0, 0), 8 + (int)strlen(msg));
		cr_assert_eq(cap.m[i]->ol_flags, 0, "software checksums: no offload flags");
	}
	cr_assert_eq(ns.stats.hold_released, 3);
	cr_assert_eq(ns.stats.udp_tx, 3);
	cr_assert_eq(arps.calls, 1);
	cap_clear();
	/* resolved: the next send goes straight out */
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, PEER_PORT, OUR_PORT, "now", 3, 2 * SEC), 0);
	cr_assert_eq(netstack_flush(&ns), 1);
	cap_udp(0, NULL);
	cr_assert_eq(ns.stats.held, 3);
}

Test(netstack, send_off_subnet_goes_through_the_gateway)
{
	uint8_t f[64];

	cr_assert_eq(netstack_udp_send(&ns, far_ip, 53, OUR_PORT, "q", 1, 0), 0);
	netstack_flush(&ns);
	cr_assert_eq(cap_arp(0)->arp_data.arp_tip, gw_ip, "ARP asks for the gateway");
	cap_clear();
	rx1(f, arp_frame(f, RTE_ARP_OP_REPLY, &our_mac, &gw_mac, gw_ip, &our_mac, our_ip), 10);
	cr_assert_eq(netstack_flush(&ns), 1);
	const uint8_t *r = rte_pktmbuf_mtod(cap.m[0], const uint8_t *);
	cr_assert(rte_is_same_ether_addr(&((const struct rte_ether_hdr *)r)->dst_addr, &gw_mac));
	cr_assert_eq(((const struct rte_ipv4_hdr *)(r + 14))->dst_addr, far_ip);
	cap_clear();
	/* broadcast needs no ARP */
	cr_assert_eq(netstack_udp_send(&ns, inet_addr("10.9.0.255"), 9, OUR_PORT, "b", 1, 0), 0);
	netstack_flush(&ns);
	cr_assert(rte_is_same_ether_addr(&rte_pktmbuf_mtod(cap.m[0], struct rte_ether_hdr *)->dst_addr, &bcast));
}

Test(netstack, unanswered_arp_retries_then_drops_what_it_held)
{
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "a", 1, 0), 0);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "b", 1, 0), 0);
	netstack_poll(&ns, 0);
	cr_assert_eq(ns.stats.arp_tx_requests, 1);
	netstack_poll(&ns, SEC / 2);
	cr_assert_eq(ns.stats.arp_tx_requests, 1, "not before arp_retry_ns");
	netstack_poll(&ns, SEC + 1);
	cr_assert_eq(ns.stats.arp_tx_requests, 2);
	netstack_poll(&ns, 2 * SEC + 2);
	cr_assert_eq(ns.stats.arp_tx_requests, 3);
	cr_assert_eq(ns.nhold, 2);
	netstack_poll(&ns, 3 * SEC + 3);
	cr_assert_eq(ns.stats.arp_tx_requests, 3, "arp_tries requests, no more");
	cr_assert_eq(ns.nhold, 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_ARP_TIMEOUT], 2);
	cr_assert_eq(cap.n, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ntohs(cap_arp(i)->arp_opcode), RTE_ARP_OP_REQUEST);
	/* a later send starts over */
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "c", 1, 10 * SEC), 0);
	cr_assert_eq(ns.stats.arp_tx_requests, 4);
}

Test(netstack, hold_is_bounded)
{
	int i;

	for (i = 0; i < NETSTACK_HOLD_MAX; i++)
		cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "h", 1, 0), 0);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "h", 1, 0), -EAGAIN);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_NO_ARP], 1);
	cr_assert_eq(ns.stats.held, NETSTACK_HOLD_MAX);
	cr_assert_eq(ns.stats.udp_tx, NETSTACK_HOLD_MAX);
}

Test(netstack, expired_entry_is_refreshed_then_forgotten)
{
	struct rte_ether_addr mac;
	uint64_t ttl = ns.cfg.arp_ttl_ns, grace = ns.cfg.arp_retry_ns * ns.cfg.arp_tries;

	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	cr_assert_eq(arps.calls, 0, "learned from another shard: not echoed");
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "a", 1, ttl - 1), 0);
	cr_assert_eq(ns.stats.arp_tx_requests, 0);
	/* past its lifetime: used, and a unicast request refreshes it */
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "b", 1, ttl + 1), 0);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "c", 1, ttl + 2), 0);
	cr_assert_eq(ns.stats.arp_tx_requests, 1, "one refresh per retry interval");
	cr_assert_eq(ns.stats.held, 0);
	netstack_flush(&ns);
	cr_assert_eq(cap.n, 4);
	cr_assert(rte_is_same_ether_addr(&rte_pktmbuf_mtod(cap.m[1], struct rte_ether_hdr *)->dst_addr, &peer_mac),
		  "the refresh is unicast");
	cr_assert_eq(ntohs(cap_arp(1)->arp_opcode), RTE_ARP_OP_REQUEST);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, ttl + grace - 1), 0);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, ttl + grace), -ENOENT);
	/* unanswered past its grace: a miss, resolved anew */
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "d", 1, ttl + grace), 0);
	cr_assert_eq(ns.stats.held, 1);
	cr_assert_eq(ns.stats.arp_tx_requests, 2);
	/* a reply confirms it again */
	uint8_t f[64];
	rx1(f, arp_frame(f, RTE_ARP_OP_REPLY, &our_mac, &peer_mac, peer_ip, &our_mac, our_ip), ttl + grace + 5);
	cr_assert_eq(ns.stats.hold_released, 1);
	cr_assert_eq(netstack_arp_lookup(&ns, peer_ip, &mac, 2 * ttl), 0);
}

Test(netstack, cache_evicts_when_full_and_counts_it)
{
	struct rte_ether_addr mac = peer_mac, out;
	int found = 0;

	for (uint32_t i = 0; i < 2 * NETSTACK_ARP_SIZE; i++) {
		mac.addr_bytes[4] = (uint8_t)(i >> 8);
		mac.addr_bytes[5] = (uint8_t)i;
		netstack_arp_learn(&ns, htonl(0x0a0a0000u + i + 1), &mac, (uint64_t)i);
	}
	cr_assert_geq(ns.stats.arp_evicted, NETSTACK_ARP_SIZE, "%llu evicted",
		      (unsigned long long)ns.stats.arp_evicted);
	for (uint32_t i = 0; i < 2 * NETSTACK_ARP_SIZE; i++)
		found += netstack_arp_lookup(&ns, htonl(0x0a0a0000u + i + 1), &out, 1000) == 0;
	cr_assert_leq(found, NETSTACK_ARP_SIZE);
	cr_assert_geq(found, NETSTACK_ARP_SIZE / 2, "the cache keeps most of what fits (%d)", found);
	/* the newest entry is always there */
	cr_assert_eq(netstack_arp_lookup(&ns, htonl(0x0a0a0000u + 2 * NETSTACK_ARP_SIZE), &out, 1000), 0);
	cr_assert_eq(out.addr_bytes[5], (uint8_t)(2 * NETSTACK_ARP_SIZE - 1));
	netstack_arp_flush(&ns);
	cr_assert_eq(netstack_arp_lookup(&ns, htonl(0x0a0a0000u + 2 * NETSTACK_ARP_SIZE), &out, 1000), -ENOENT);
}

Test(netstack, learning_from_another_shard_releases_the_hold)
{
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "a", 1, 0), 0);
	netstack_arp_learn(&ns, peer_ip, &peer_mac, 5);
	cr_assert_eq(ns.stats.hold_released, 1);
	cr_assert_eq(netstack_flush(&ns), 2);
	cap_udp(1, NULL);
	cr_assert_eq(arps.calls, 0);
}

Test(netstack, tx_offload_marks_the_mbuf)
{
	struct netstack_config c;

	netstack_fini(&ns);
	cfg_base(&c);
	c.tx_offloads = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	cr_assert_eq(netstack_init(&ns, &c), 0);
	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "offload", 7, 0), 0);
	netstack_flush(&ns);
	struct rte_mbuf *m = cap.m[0];
	const struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, 14);
	const struct rte_udp_hdr *u = cap_udp(0, NULL);

	cr_assert_eq(m->ol_flags, RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM);
	cr_assert_eq(m->l2_len, 14);
	cr_assert_eq(m->l3_len, 20);
	cr_assert_eq(ip->hdr_checksum, 0);
	cr_assert_eq(u->dgram_cksum, rte_ipv4_phdr_cksum(ip, 0));
}

Test(netstack, send_errors_are_counted)
{
	static uint8_t big[2000];
	struct rte_mbuf *all[POOL_N];
	int n = 0;

	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, big, 1473, 0), -EMSGSIZE);
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, big, 1472, 0), 0);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_TOO_BIG], 1);

	while ((all[n] = rte_pktmbuf_alloc(&pool->mp)))
		n++;
	cr_assert_eq(netstack_udp_send(&ns, peer_ip, 1, 2, "x", 1, 0), -ENOBUFS);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_NOBUFS], 1);
	for (int i = 0; i < n; i++)
		rte_pktmbuf_free(all[i]);

	/* zero-copy send without the headroom for the headers */
	struct rte_mbuf *m = rte_pktmbuf_alloc(&pool->mp);
	m->data_off = 10;
	rte_pktmbuf_append(m, 4);
	cr_assert_eq(netstack_udp_send_mbuf(&ns, m, peer_ip, 1, 2, 0), -EINVAL);

	/* the port takes nothing: our queue fills, then refuses */
	cap.take = 0;
	int sent = 1;   /* the 1472-byte one above */
	while (netstack_udp_send(&ns, peer_ip, 1, 2, "q", 1, 0) == 0)
		sent++;
	cr_assert_eq(sent, NETSTACK_TXQ_MAX);
	cr_assert_eq(ns.stats.drop[NETSTACK_DROP_TX_FULL], 1);
	/* then it takes some: the rest stay queued, in order */
	cap.take = 100;
	cr_assert_eq(netstack_flush(&ns), 100);
	cr_assert_eq(ns.ntx, NETSTACK_TXQ_MAX - 100);
	cap.take = -1;
	cr_assert_eq(netstack_flush(&ns), NETSTACK_TXQ_MAX - 100);
	cr_assert_eq(ns.stats.tx_frames, NETSTACK_TXQ_MAX);
}

Test(netstack, zero_copy_send_prepends_headers)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(&pool->mp);
	const uint8_t *p;

	memcpy(rte_pktmbuf_append(m, 5), "zcopy", 5);
	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	cr_assert_eq(netstack_udp_send_mbuf(&ns, m, peer_ip, 7, 8, 0), 0);
	netstack_flush(&ns);
	cr_assert_eq(cap.m[0], m);
	cr_assert_eq(rte_pktmbuf_data_len(m), 47);
	const struct rte_udp_hdr *u = cap_udp(0, &p);
	cr_assert_eq(ntohs(u->dgram_len), 13);
	cr_assert_eq(memcmp(p, "zcopy", 5), 0);
	cr_assert_eq(netstack_udp_check(rte_pktmbuf_mtod_offset(m, const uint8_t *, 14), 20, 0, 0), 13);
}

/* udp_cksum_none: a port without UDP offload sends checksum 0 (the
 * payload carries its own check), and a stack receiving it accepts it;
 * without the setting the checksum is computed as before. */
Test(netstack, udp_cksum_none_sends_zero_and_is_accepted)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(&pool->mp), *m2 = rte_pktmbuf_alloc(&pool->mp);
	const uint8_t *p;

	memcpy(rte_pktmbuf_append(m, 5), "nosum", 5);
	memcpy(rte_pktmbuf_append(m2, 5), "nosum", 5);
	netstack_arp_learn(&ns, peer_ip, &peer_mac, 0);
	ns.cfg.udp_cksum_none = 1;
	cr_assert_eq(netstack_udp_send_mbuf(&ns, m, peer_ip, 7, 8, 0), 0);
	ns.cfg.udp_cksum_none = 0;
	cr_assert_eq(netstack_udp_send_mbuf(&ns, m2, peer_ip, 7, 8, 0), 0);
	netstack_flush(&ns);
	const struct rte_udp_hdr *u = cap_udp(0, &p);
	cr_assert_eq(u->dgram_cksum, 0, "no UDP checksum with udp_cksum_none");
	cr_assert_eq(netstack_udp_check(rte_pktmbuf_mtod_offset(m, const uint8_t *, 14), 20, 0, 0), 13);
	u = cap_udp(1, &p);
	cr_assert_neq(u->dgram_cksum, 0, "a computed checksum without it");
	cr_assert_eq(netstack_udp_check(rte_pktmbuf_mtod_offset(m2, const uint8_t *, 14), 20, 0, 0), 13);
}

Test(netstack, init_refuses_missing_pieces)
{
	struct netstack_config c;
	struct netstack n2;

	cfg_base(&c);
	c.ip = 0;
	cr_assert_eq(netstack_init(&n2, &c), -EINVAL);
	cfg_base(&c);
	c.tx = NULL;
	cr_assert_eq(netstack_init(&n2, &c), -EINVAL);
	cfg_base(&c);
	c.mac = bcast;
	cr_assert_eq(netstack_init(&n2, &c), -EINVAL);
	cfg_base(&c);
	c.pool = NULL;
	cr_assert_eq(netstack_init(&n2, &c), -EINVAL);
	for (int i = 0; i < NETSTACK_DROP_MAX; i++)
		cr_assert_not_null(netstack_drop_name[i], "drop %d has a metric name", i);
}
