/* dataplane/dpdk_port.h — DPDK for the shards: the EAL started from one
 * configuration string, and one port opened with a queue pair per shard,
 * one more pair per shard reserved for replication, an mbuf pool per
 * shard, RSS, checksum offloads and MTU as far as the port allows.
 *
 * Thread: dpdk_eal_* and dpdk_port_init/fini/describe run on the control
 * thread (@thread control), before any shard polls and after all stopped.
 * The dpdk_queue_* functions run on the one shard that owns the queue
 * (@thread shard): a queue is polled by exactly one thread, which is what
 * lets DPDK's queues run without locks.
 * Owns: struct dpdk_port owns the started port and the pools until
 * dpdk_port_fini. A struct dpdk_queue borrows both (valid until fini).
 * Errors: 0 or -errno; on failure err (when non-NULL) says what failed and
 * names the argument, option or limit responsible. What the port cannot do
 * and was asked for (replication queues, RSS, offloads, jumbo frames) is
 * not an error: the port falls back, and says why in notes.
 *
 * The EAL is process-wide and starts once per process (DPDK's rule); two
 * DPDK processes on one machine need different --file-prefix values.
 *
 * Queue layout: shard s polls queue s (client traffic); its replication
 * pair is queue shards + s. Both of a shard's queues use the shard's pool.
 * RSS, when on, spreads client flows over queues 0..shards-1 only (its
 * redirection table is written so when the port allows it).
 */
#ifndef SLUICE_DPDK_PORT_H
#define SLUICE_DPDK_PORT_H

#include <stddef.h>
#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define DPDK_PORT_MAX_SHARDS 64       /* = BROKER_MAX_SHARDS */
#define DPDK_EAL_MAX_ARGS 64
#define DPDK_EAL_MAX_LEN 4096         /* bytes of the argument string */

/* Splits args like a shell (blanks separate; '...' literal; "..." with
 * \" \\ \$ \` escapes; \x outside quotes is x) into argv[1..] (argv[0] is
 * "sluiced"), using buf for the strings, and checks every argument is an
 * EAL option (DPDK 22.11's list) with its value where it needs one.
 * Returns argc, or -EINVAL (unterminated quote, unknown option, option
 * missing its value, --help which would exit the process, a non-option
 * argument), -E2BIG (too long, too many), with err naming the argument.
 * No EAL needed: the unit tests call it. */
int dpdk_eal_split(const char *args, char *buf, size_t buflen, char **argv, int max_args, char *err,
		   size_t errlen);

/* Starts the EAL with args (split as above). EAL's own messages are
 * passed on to stderr; on failure the last one is also in err.
 * -EALREADY if the EAL already runs in this process. */
int dpdk_eal_start(const char *args, char *err, size_t errlen);

/* Releases the EAL's resources (rte_eal_cleanup). Ports first. */
void dpdk_eal_stop(void);

/* @thread shard, once when the thread starts: gives a thread the EAL did
 * not create an lcore id, so the pools' per-lcore caches serve it (without
 * one every mbuf alloc/free goes to the pool's ring). -errno if none is
 * left (RTE_MAX_LCORE). */
int dpdk_eal_thread_register(void);

struct dpdk_port_config {
	const char *device;       /* EAL device name ("net_tap0", "0000:03:00.0"); NULL: the first port */
	uint16_t shards;          /* queue pairs for client traffic, one per shard */
	uint8_t replication;      /* 1 (default): one more pair per shard when the port has the queues */
	uint8_t rss;              /* 1 (default): RSS over the client queues when the port can */
	uint8_t csum_offload;     /* 1 (default): use the port's IPv4/UDP checksum offloads */
	uint16_t mtu;             /* 0: the port's default; above 1500 asks for jumbo frames */
	uint16_t rx_desc;         /* per queue (1024), moved into the port's limits */
	uint16_t tx_desc;         /* per queue (1024), likewise */
	uint32_t pool_mbufs;      /* per shard; 0: both rings of both pairs + 1024 */
	uint16_t pool_cache;      /* per-lcore cache (256); used by EAL threads only */
};

void dpdk_port_config_defaults(struct dpdk_port_config *cfg);

/* An opened port: what it reported, what was configured, and the pools.
 * Read-only once init returned. */
struct dpdk_port {
	uint16_t port_id;
	int socket;                   /* NUMA socket of the port (SOCKET_ID_ANY: unknown) */
	char name[RTE_ETH_NAME_MAX_LEN];
	char driver[32];
	struct rte_ether_addr mac;
	uint16_t shards;
	uint16_t queue_pairs;         /* configured: shards, or 2 x shards with replication */
	uint8_t replication;          /* 1: queue pair shards + s is shard s's replication pair */
	uint8_t rss;                  /* 1: RSS configured */
	uint8_t reta_set;             /* 1: its table covers the client queues only */
	uint8_t link_up;
	uint8_t any_queue;            /* 1: client flows may land on any queue, replication pairs
				       * included (net_tap: the kernel picks); 0: only where RSS or
				       * the peer's queue (net_memif: pair i to pair i) puts them */
	uint16_t max_rx_queues, max_tx_queues;
	uint16_t reta_size;
	uint64_t rss_capa;            /* flow types the port can hash */
	uint64_t rss_hf;              /* flow types hashed */
	uint64_t rx_offload_capa, tx_offload_capa;   /* RTE_ETH_{RX,TX}_OFFLOAD_* the port has */
	uint64_t rx_offloads, tx_offloads;           /* those enabled */
	uint16_t mtu, min_mtu, max_mtu;
	uint32_t max_rx_pktlen;
	uint16_t rx_desc, tx_desc;
	uint32_t pool_mbufs;          /* per shard */
	uint16_t data_room;           /* bytes per mbuf, headroom included */
	uint32_t link_speed;          /* Mb/s, as reported */
	char notes[768];              /* each fallback and why, "; "-separated */
	struct rte_mempool *pools[DPDK_PORT_MAX_SHARDS];
};

/* Opens, configures and starts the port (EAL running). -ENODEV: no such
 * port (err lists the ports there are); -EINVAL: fewer queues than shards,
 * a bad config; -ENOMEM: a pool could not be made (err says how big);
 * other -errno from DPDK. On failure nothing stays allocated. */
int dpdk_port_init(struct dpdk_port *p, const struct dpdk_port_config *cfg, char *err, size_t errlen);

/* Stops and closes the port (a tap interface goes away), frees the pools. */
void dpdk_port_fini(struct dpdk_port *p);

/* One paragraph: driver, MAC, socket, queues, RSS, offloads, MTU, link,
 * notes. Returns its length (snprintf rules). */
int dpdk_port_describe(const struct dpdk_port *p, char *buf, size_t len);

/* One queue pair, as the shard that polls it sees it. */
struct dpdk_queue {
	uint16_t port_id;
	uint16_t queue_id;
	struct rte_mempool *pool;     /* borrowed from the port */
	uint64_t rx_offloads, tx_offloads;   /* the port's, for netstack_config */
	struct rte_ether_addr mac;
	uint16_t mtu;
};

/* The client pair (replication 0) or the replication pair (1) of shard.
 * -EINVAL: no such shard; -ENOENT: the port has no replication pairs. */
int dpdk_port_queue(const struct dpdk_port *p, uint16_t shard, int replication, struct dpdk_queue *q);

/* @thread shard */
static inline uint16_t dpdk_queue_rx(const struct dpdk_queue *q, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(q->port_id, q->queue_id, pkts, n);
}

/* @thread shard. The mbufs it takes are the port's; the rest stay the
 * caller's. The signature of netstack_tx_fn (arg: the struct dpdk_queue). */
static inline uint16_t dpdk_queue_tx(void *q, struct rte_mbuf **pkts, uint16_t n)
{
	const struct dpdk_queue *dq = (const struct dpdk_queue *)q;

	return rte_eth_tx_burst(dq->port_id, dq->queue_id, pkts, n);
}

#endif
