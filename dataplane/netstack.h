/* dataplane/netstack.h — the little L2/L3 stack a shard runs on its DPDK
 * queue: Ethernet, ARP (replies, requests, a small cache), ICMP echo, IPv4
 * and UDP with checksums. Received UDP datagrams for our address and port
 * go to one callback (where the native protocol plugs in); netstack_udp_send
 * builds the headers for the other direction.
 *
 * Thread: the shard that polls the queue (@thread shard). One struct
 * netstack per queue; several may share a thread, none is shared between
 * threads. No locks, no allocation (mbufs come from the queue's pool).
 * Owns: the mbufs it holds (waiting for ARP, waiting for the TX burst), its
 * ARP cache and its counters. Every mbuf passed to netstack_rx or to a send
 * function becomes the stack's, whatever the outcome.
 * Errors: 0/count or -errno. On the data path nothing is printed: every
 * dropped frame increments one counter of enum netstack_drop.
 * Time: functions that need it take now (ns, any monotonic clock); the
 * stack never reads a clock (STYLE 16).
 *
 * Byte order: IPv4 addresses are in network order (as struct in_addr and
 * the wire hold them), ports in host order.
 *
 * ARP and queues: a port's shards share one address. RSS sends non-IP
 * frames (ARP) to one queue, so a reply to shard 3's request may arrive on
 * shard 0. Each stack reports what it learns through on_arp; the owner
 * passes it to the other shards' stacks (netstack_arp_learn, through the
 * shard ring). A stack that hears nothing resends its request, then drops
 * what it held (NETSTACK_DROP_ARP_TIMEOUT).
 */
#ifndef SLUICE_NETSTACK_H
#define SLUICE_NETSTACK_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

/* Ethernet + IPv4 (no options) + UDP: the headroom a datagram to send
 * needs in front of its payload. */
#define NETSTACK_HDR_LEN (RTE_ETHER_HDR_LEN + 20 + 8)

#define NETSTACK_ARP_WAYS 4           /* entries per bucket */
#define NETSTACK_ARP_BUCKETS 64       /* power of 2 */
#define NETSTACK_ARP_SIZE (NETSTACK_ARP_WAYS * NETSTACK_ARP_BUCKETS)
#define NETSTACK_HOLD_MAX 64          /* frames waiting for ARP, all next hops */
#define NETSTACK_TXQ_MAX 256          /* frames built, not yet handed to the port */

/* Why a frame was dropped (or, for the _NOT_OURS kinds, ignored): one
 * counter each. netstack_drop_name gives the metric label. */
enum netstack_drop {
	NETSTACK_DROP_SHORT = 0,      /* shorter than its own headers say */
	NETSTACK_DROP_SEGMENTED,      /* chained mbuf (the stack wants one segment) */
	NETSTACK_DROP_ETH_NOT_OURS,   /* destination MAC neither ours nor broadcast */
	NETSTACK_DROP_ETHERTYPE,      /* neither IPv4 nor ARP (IPv6, VLAN, ...) */
	NETSTACK_DROP_ARP_BAD,        /* not Ethernet/IPv4 ARP, or an unknown op */
	NETSTACK_DROP_ARP_NOT_OURS,   /* a request for another address */
	NETSTACK_DROP_IP_VERSION,     /* version != 4 */
	NETSTACK_DROP_IP_HDR,         /* IHL < 5, total length < IHL or > frame */
	NETSTACK_DROP_IP_CKSUM,       /* header checksum wrong */
	NETSTACK_DROP_IP_FRAG,        /* a fragment: the stack never reassembles */
	NETSTACK_DROP_IP_NOT_OURS,    /* destination not our address */
	NETSTACK_DROP_IP_PROTO,       /* neither UDP nor ICMP */
	NETSTACK_DROP_ICMP_BAD,       /* short or checksum wrong */
	NETSTACK_DROP_ICMP_TYPE,      /* not an echo request */
	NETSTACK_DROP_UDP_LEN,        /* UDP length < 8 or > the IP payload */
	NETSTACK_DROP_UDP_CKSUM,      /* UDP checksum wrong */
	NETSTACK_DROP_UDP_PORT,       /* no listener on the destination port */
	NETSTACK_DROP_NO_ARP,         /* next hop unresolved and the hold is full */
	NETSTACK_DROP_ARP_TIMEOUT,    /* held for a next hop that never answered */
	NETSTACK_DROP_TX_FULL,        /* the port's TX ring and our TX queue full */
	NETSTACK_DROP_NOBUFS,         /* the mbuf pool was empty */
	NETSTACK_DROP_TOO_BIG,        /* a send longer than the MTU allows */
	NETSTACK_DROP_MAX
};

extern const char *const netstack_drop_name[NETSTACK_DROP_MAX];

struct netstack_stats {
	uint64_t rx_frames, rx_bytes;
	uint64_t tx_frames, tx_bytes;       /* accepted by the port */
	uint64_t udp_rx, udp_tx;            /* datagrams delivered / queued */
	uint64_t icmp_echo;                 /* echo replies sent */
	uint64_t arp_rx_requests, arp_rx_replies;
	uint64_t arp_tx_requests, arp_tx_replies;
	uint64_t arp_learned;               /* entries created or changed */
	uint64_t arp_evicted;               /* live entries pushed out by new ones */
	uint64_t held, hold_released;       /* frames parked for ARP, sent after */
	uint64_t drop[NETSTACK_DROP_MAX];
};

/* A UDP datagram for our address and port. payload/len: the datagram's
 * payload inside m (borrowed: valid until the callback returns, unless it
 * keeps m). Return 0 and the stack frees m; return 1 and m is the
 * callback's (it frees it later with rte_pktmbuf_free, on any thread: the
 * pools are multi-producer). The callback may send on the same stack (an
 * answer): it runs on the shard, between two frames of the burst. */
typedef int netstack_udp_fn(void *arg, const uint8_t *payload, uint32_t len, uint32_t src_ip,
			    uint16_t src_port, struct rte_mbuf *m);

/* An ARP entry created or changed (see ARP and queues above). */
typedef void netstack_arp_fn(void *arg, uint32_t ip, const struct rte_ether_addr *mac);

/* Hands frames to the port (rte_eth_tx_burst on the shard's queue in
 * production, a capture in tests). Returns how many it took; the rest stay
 * the caller's. */
typedef uint16_t netstack_tx_fn(void *arg, struct rte_mbuf **pkts, uint16_t n);

struct netstack_config {
	uint32_t ip;                  /* our address (network order) */
	uint32_t netmask;             /* network order; 0: every address is on-link */
	uint32_t gateway;             /* next hop off the subnet (network order); 0: none */
	struct rte_ether_addr mac;    /* the port's */
	uint16_t udp_port;            /* datagrams to ip:udp_port go to on_udp */
	uint16_t mtu;                 /* IP MTU (1500); sends above it are refused */
	/* Offloads the port has enabled, in DPDK's terms
	 * (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM / _UDP_CKSUM, RTE_ETH_TX_OFFLOAD_...).
	 * RX: a frame the port marks GOOD is not verified again, BAD is
	 * dropped, anything else is verified in software. TX: checksums the
	 * port cannot compute are computed here. */
	uint64_t rx_offloads;
	uint64_t tx_offloads;
	/* 1: where the port cannot offload the UDP checksum, send none (zero,
	 * as IPv4 allows) instead of computing it in software — for payloads
	 * that carry their own check over every byte (the native protocol's
	 * CRC-32C). Received checksums are verified as always (a zero one
	 * means none). */
	uint8_t udp_cksum_none;
	uint64_t arp_ttl_ns;          /* an entry is trusted this long (60 s) */
	uint64_t arp_retry_ns;        /* between requests (1 s) */
	uint32_t arp_tries;           /* requests before giving up (3) */
	struct rte_mempool *pool;     /* borrowed: the queue's pool (ARP requests, sends) */
	netstack_tx_fn *tx;
	void *tx_arg;                 /* borrowed */
	netstack_udp_fn *on_udp;      /* NULL: count as NETSTACK_DROP_UDP_PORT */
	void *udp_arg;                /* borrowed */
	netstack_arp_fn *on_arp;      /* may be NULL */
	void *arp_arg;                /* borrowed */
};

enum netstack_arp_state {
	NETSTACK_ARP_FREE = 0,
	NETSTACK_ARP_INCOMPLETE,      /* requested, no answer yet */
	NETSTACK_ARP_REACHABLE,       /* mac valid until expires (+ one refresh) */
};

/* One cache entry. A REACHABLE entry past `expires` is still used for one
 * more arp_retry_ns * arp_tries while a unicast request refreshes it (a
 * busy flow never stalls on ARP); after that it is a miss. */
struct netstack_arp {
	uint32_t ip;
	uint8_t state;                /* enum netstack_arp_state */
	uint8_t tries;                /* requests sent in this resolution */
	struct rte_ether_addr mac;
	uint64_t expires;             /* REACHABLE: trusted until */
	uint64_t next_req;            /* when the next request may go */
};

/* A frame parked until its next hop resolves, in arrival order. */
struct netstack_hold {
	struct rte_mbuf *m;
	uint32_t nexthop;
};

struct netstack {
	struct netstack_config cfg;
	struct netstack_stats stats;
	uint16_t ip_id;               /* IPv4 identification of our next datagram */
	uint16_t ntx;                 /* frames in txq */
	uint16_t nhold;               /* frames in hold */
	uint64_t next_sweep;          /* when netstack_poll next walks the cache */
	struct rte_mbuf *txq[NETSTACK_TXQ_MAX];
	struct netstack_hold hold[NETSTACK_HOLD_MAX];
	struct netstack_arp arp[NETSTACK_ARP_SIZE];
};

/* Defaults for every field that has one (mtu 1500, ARP timers); the
 * addresses, pool, tx and callbacks are the caller's. */
void netstack_config_defaults(struct netstack_config *cfg);

/* Caller memory. -EINVAL if the address, pool or tx is missing. */
int netstack_init(struct netstack *ns, const struct netstack_config *cfg);

/* Frees every mbuf the stack still holds (hold, TX queue). */
void netstack_fini(struct netstack *ns);

/* @thread shard. Takes a received burst: answers ARP and ICMP echo (in the
 * same mbufs, queued for TX), delivers UDP, drops the rest with a counter.
 * Returns n. */
uint16_t netstack_rx(struct netstack *ns, struct rte_mbuf **pkts, uint16_t n, uint64_t now);

/* @thread shard. Timers (ARP retries, expiry, held frames that waited too
 * long), then netstack_flush. Call once per loop turn; cheap when idle.
 * Returns the frames handed to the port. */
uint32_t netstack_poll(struct netstack *ns, uint64_t now);

/* @thread shard. Hands queued frames to the port; what it does not take
 * stays queued for the next call. Returns the frames it took. */
uint32_t netstack_flush(struct netstack *ns);

/* @thread shard. Sends len bytes as one UDP datagram from our address:
 * copied into an mbuf of the pool. 0 when queued (or held for ARP);
 * -EMSGSIZE above the MTU, -ENOBUFS if the pool is empty, -EAGAIN if the
 * next hop is unresolved and the hold is full, -ENOSPC if the TX queue is
 * full (each also counted). Goes out on the next netstack_flush/poll. */
int netstack_udp_send(struct netstack *ns, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		      const void *payload, uint32_t len, uint64_t now);

/* @thread shard. Zero-copy send: m holds the payload (one segment, at
 * least NETSTACK_HDR_LEN of headroom: rte_pktmbuf_alloc gives 128). The
 * stack prepends the headers. Takes m in every case; errors as above
 * (-EINVAL without the headroom or with a chained mbuf). */
int netstack_udp_send_mbuf(struct netstack *ns, struct rte_mbuf *m, uint32_t dst_ip, uint16_t dst_port,
			   uint16_t src_port, uint64_t now);

/* @thread shard. An entry learned elsewhere (another shard's on_arp):
 * created or refreshed, held frames for ip released. on_arp is not
 * called (no echo between shards). */
void netstack_arp_learn(struct netstack *ns, uint32_t ip, const struct rte_ether_addr *mac, uint64_t now);

/* @thread shard. 0 and *mac if ip has a usable entry at now, else
 * -ENOENT. Looks only: sends nothing. */
int netstack_arp_lookup(const struct netstack *ns, uint32_t ip, struct rte_ether_addr *mac, uint64_t now);

/* Forget every entry (held frames are dropped as ARP_TIMEOUT). */
void netstack_arp_flush(struct netstack *ns);

/* --- Parsing and building on plain memory (no mbuf, no port): what
 * netstack_rx and the send path use, exposed for tests and tools. --- */

/* The IPv4 header at p (len bytes from it to the end of the frame),
 * checked: version, IHL, total length within len, no fragment, checksum
 * (skipped if ol_flags carries RTE_MBUF_F_RX_IP_CKSUM_GOOD and rx_verified
 * is set; RTE_MBUF_F_RX_IP_CKSUM_BAD then drops). Returns the header
 * length (20..60) or -(NETSTACK_DROP_x + 1). */
int netstack_ipv4_check(const uint8_t *p, uint32_t len, uint64_t ol_flags, int rx_verified);

/* The UDP datagram of a checked IPv4 packet (ip, header length ihl):
 * length and checksum (same rules for ol_flags/rx_verified with the L4
 * flags; a zero checksum means none, as IPv4 allows). Returns the UDP
 * length (8..) or -(NETSTACK_DROP_x + 1). */
int netstack_udp_check(const uint8_t *ip, int ihl, uint64_t ol_flags, int rx_verified);

/* The UDP checksum of the datagram udp (udp_len bytes) inside IPv4 header
 * ip, computed in software (0 is sent as 0xffff). */
uint16_t netstack_udp_cksum(const uint8_t *ip, const uint8_t *udp, uint16_t udp_len);

/* Writes Ethernet + IPv4 + UDP headers (NETSTACK_HDR_LEN bytes) at frame
 * for a payload of len bytes that follows them. Checksums in software,
 * except: ip_offload leaves the IPv4 one 0 for the port; udp_offload 1
 * leaves the pseudo-header sum the port completes over the datagram,
 * NETSTACK_UDP_CKSUM_NONE leaves it 0 (none). */
#define NETSTACK_UDP_CKSUM_NONE 2
void netstack_udp_build(uint8_t *frame, const struct rte_ether_addr *src_mac,
			const struct rte_ether_addr *dst_mac, uint32_t src_ip, uint32_t dst_ip,
			uint16_t src_port, uint16_t dst_port, uint16_t ip_id, uint32_t len,
			int ip_offload, int udp_offload);

#endif
