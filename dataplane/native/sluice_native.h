/* sluice_native.h — the client library of Sluice's native datagram protocol
 * (libsluice_native.a / libsluice_native.so). Produce to and fetch from a
 * Sluice broker over UDP, carrying Kafka RecordBatches v2 unchanged; the
 * wire format is dataplane/native/native_format.h in Sluice's sources.
 *
 * Reliability is the log's own numbering, not a transport: the client is
 * an idempotent producer (the producer id the broker gives in HELLO, a
 * sequence per partition). A batch that is not acknowledged in time is
 * sent again with the same producer id, epoch and sequence, never
 * renumbered, and the broker acknowledges a resend with the offset of the
 * first append: every record is appended once, in order per partition. A
 * fetch whose answer lost a datagram is asked again by offset. Credits
 * (bytes granted by the broker) bound what the client has unacknowledged.
 *
 * Thread: a client is used by one thread at a time (the caller's); no
 * function blocks longer than the timeout it is given, and no callback
 * runs except inside sluice_poll, sluice_flush and sluice_close.
 * Memory: allocated at connect and per batch buffer (pooled, reused), per
 * partition on first use and when a fetch answer is larger than any
 * before; never per record.
 * Errors: functions return 0 or a count on success and a negative errno
 * on failure. A delivery or fetch result carries 0, a Kafka error code
 * from the broker (positive, e.g. 3 UNKNOWN_TOPIC_OR_PARTITION), or a
 * negative errno from the client (-ETIMEDOUT, -ECONNRESET, -ECANCELED:
 * see sluice_err_name).
 */
#ifndef SLUICE_NATIVE_PUBLIC_H
#define SLUICE_NATIVE_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_NATIVE_API_VERSION 1

struct sluice_client;

/* Where datagrams go. UDP: a non-blocking kernel socket with
 * sendmmsg/recvmmsg. DPDK: kernel bypass, the client's own DPDK port (one
 * queue pair) with its own ARP, IPv4 and UDP; configured by the dpdk_*
 * fields of struct sluice_config. Its waits busy-poll the port (a core
 * spins while the client waits) and sluice_fd gives -1. The EAL is the
 * process's: connect and close DPDK clients from one thread at a time. */
enum sluice_transport {
	SLUICE_TRANSPORT_UDP = 0,
	SLUICE_TRANSPORT_DPDK = 1,
};

/* Fault injection between the client and its transport, for tests of the
 * client and of the broker (a seeded, repeatable decision per datagram).
 * All zero: off. Percentages apply to each datagram in each direction
 * selected (both when directions is 0). */
#define SLUICE_FAULT_TX 1u           /* client -> broker */
#define SLUICE_FAULT_RX 2u           /* broker -> client */
struct sluice_fault {
	double loss_pct;             /* dropped */
	double dup_pct;              /* delivered twice */
	double truncate_pct;         /* cut to a random shorter length */
	double corrupt_pct;          /* one random bit flipped */
	double reorder_pct;          /* held back behind later datagrams ... */
	unsigned reorder_window;     /* ... at most this many (default 8 when reorder_pct > 0) */
	unsigned directions;         /* SLUICE_FAULT_TX | SLUICE_FAULT_RX; 0: both */
	uint64_t seed;               /* 0: 1 */
};

/* Delivery report of one record: err as in the header comment; offset is
 * the record's offset in its partition, -1 on error. ctx is
 * sluice_config.delivery_ctx, opaque sluice_produce's. */
typedef void (*sluice_delivery_fn)(void *ctx, void *opaque, int err, int64_t offset);

struct sluice_config {
	const char *client_id;       /* HELLO's name, for the broker's logs (default "sluice-native") */
	enum sluice_transport transport;
	int acks;                    /* -1 (default) or 1: acknowledged; 0: fire and forget (no
				      * delivery report but "sent", no resend, no credits) */
	uint32_t credits;            /* bytes wanted in flight (default 8 MiB); the broker may grant less */
	uint16_t max_datagram;       /* 0 (default): the path MTU's (IP_MTU), within [1472, 8972] */
	uint32_t batch_bytes;        /* a partition's batch is sent at this size (default 64 KiB) ... */
	uint32_t linger_us;          /* ... or this long after its first record (default 1000) */
	uint64_t queue_bytes;        /* batch memory: beyond it sluice_produce says -ENOBUFS
				      * (default 64 MiB) */
	uint32_t max_in_flight;      /* unacknowledged batches per partition, 1-5 (default 5: the
				      * broker remembers 5 per producer for deduplication) */
	uint32_t retry_min_ms;       /* resend timer: at least (default 10; restarted by each
				      * acknowledgement of the partition) ... */
	uint32_t retry_max_ms;       /* ... at most, after exponential backoff (default 500) */
	uint32_t delivery_timeout_ms; /* a record not acknowledged by then fails with -ETIMEDOUT
				       * (default 60000) */
	uint32_t connect_timeout_ms; /* HELLO (default 5000) */
	uint32_t socket_buffer;      /* SO_SNDBUF/SO_RCVBUF (default 8 MiB) */
	int compression;             /* the batches' codec, as Kafka's attributes: 0 none (default),
				      * 1 gzip, 2 snappy, 3 lz4, 4 zstd (a batch that does not shrink
				      * goes uncompressed) */
	sluice_delivery_fn delivery;
	void *delivery_ctx;
	struct sluice_fault fault;
	/* ---- transport SLUICE_TRANSPORT_DPDK (added in the same API version; ignored otherwise).
	 * host_port of sluice_connect is then a numeric IPv4 "a.b.c.d:port". The strings are
	 * read at connect only. */
	const char *dpdk_eal_args;   /* the EAL's arguments, split like a shell, e.g. "-l 0 --no-huge
				      * -m 128 --no-pci --file-prefix=client1 --vdev=net_tap0,iface=sl0":
				      * the library starts the EAL and stops it when the last client
				      * it started it for closes (DPDK cannot start it twice in a
				      * process: later connects with dpdk_eal_args then fail; a
				      * connect that fails leaves it running for the next). NULL
				      * (default): the application started the EAL (rte_eal_init) and
				      * stops it; the library never does */
	const char *dpdk_device;     /* the port's DPDK name ("net_tap0", "net_memif0", a PCI address
				      * "0000:03:00.0"); NULL (default): the first port. The client
				      * configures and starts it with one queue pair and closes it in
				      * sluice_close (a net_tap interface goes away): one client per port */
	const char *dpdk_address;    /* required: the client's IPv4 address with its prefix,
				      * "10.7.0.2/24" (it answers ARP and ping for it) */
	const char *dpdk_gateway;    /* the next hop to a broker outside that subnet, "10.7.0.1";
				      * NULL (default): none (the broker must be on the subnet) */
	uint16_t dpdk_udp_port;      /* the client's UDP port; 0 (default): one of 49152-65535 from
				      * the process id */
	uint16_t dpdk_mtu;           /* the port's IP MTU; 0 (default): 1500. Above it jumbo frames
				      * where the port has them (datagrams up to 8972 bytes) */
	uint16_t dpdk_queues;        /* queue pairs of the client's port, all received on, sent on
				      * queue 0; 0 (default): 1. With net_memif, which joins pair i
				      * of one end to pair i of the other, give the broker's count
				      * (it prints "N pairs" at start: 2 per shard) so that every
				      * pair it answers on is connected */
};

/* Defaults in every field. @thread any */
void sluice_config_init(struct sluice_config *cfg);

/* Open a session with the broker at "host:port" (its native.listen):
 * HELLO until HELLO_ACK or cfg->connect_timeout_ms. cfg NULL: defaults.
 * 0 and *out, or -errno with err (errlen bytes) saying why. */
int sluice_connect(const char *host_port, const struct sluice_config *cfg, struct sluice_client **out,
		   char *err, size_t errlen);

/* Undelivered records are reported with -ECANCELED (outcome unknown for
 * those already sent), then everything is freed. NULL is a no-op. */
void sluice_close(struct sluice_client *c);

/* ---- producing ---------------------------------------------------------------------- */

/* Append one record to the partition's open batch (a copy: key and value
 * are borrowed for the call only). key NULL: a null key; value NULL: a null
 * value. No network I/O unless a batch fills (it is sent at once).
 * 0; -ENOBUFS when queue_bytes are used up (call sluice_poll, which
 * delivers reports and frees batches); -EMSGSIZE for a record larger than
 * a batch; -EINVAL for a bad topic or partition; -EIO once the client
 * failed (see sluice_last_error). Topics are named, never looked up: a
 * record for a topic or partition the broker does not have is reported
 * with UNKNOWN_TOPIC_OR_PARTITION (3) at once, not retried (create topics
 * first, through Kafka's API). */
int sluice_produce(struct sluice_client *c, const char *topic, int32_t partition, const void *key, size_t klen,
		   const void *value, size_t vlen, void *opaque);

/* Do the client's work (receive acknowledgements, send lingering
 * batches, resend on timers) and call the delivery callback for every
 * record whose fate is known; wait up to timeout_ms for one (0: do not
 * wait). Returns the reports delivered, or -errno. */
int sluice_poll(struct sluice_client *c, int timeout_ms);

/* Send every open batch now and poll until all records are reported or
 * timeout_ms passed. 0, or -ETIMEDOUT with records still out. */
int sluice_flush(struct sluice_client *c, int timeout_ms);

/* Records produced and not yet reported. */
size_t sluice_outq_len(const struct sluice_client *c);

/* ---- fetching ------------------------------------------------------------------------- */

struct sluice_record {
	int64_t offset;
	int64_t timestamp;           /* ms since the epoch (CreateTime or LogAppendTime) */
	const void *key;             /* NULL when null */
	const void *value;           /* NULL when null */
	int32_t key_len, value_len;  /* -1 when null */
	const void *headers;         /* the record's headers as Kafka frames them (varints) */
	uint32_t headers_len;
	int32_t header_count;
};

struct sluice_fetch_result {
	int err;                     /* 0, or the broker's Kafka error (1 OFFSET_OUT_OF_RANGE,
				      * 3 UNKNOWN_TOPIC_OR_PARTITION, ...) */
	int64_t high_watermark, log_start, last_stable;
	int64_t next_offset;         /* where to fetch next */
	const struct sluice_record *records;   /* borrowed: valid until the next sluice_fetch or
						* sluice_close on this client */
	size_t count;
	size_t bytes;                /* batch bytes in the answer */
};

#define SLUICE_READ_UNCOMMITTED 0
#define SLUICE_READ_COMMITTED 1      /* up to the last stable offset */

/* Read from offset: at most max_bytes of whole batches (at least one),
 * asking again until the whole answer arrives or timeout_ms passes.
 * Records before offset (in the first batch) and control records are left
 * out; compressed batches (gzip, snappy, lz4, zstd) are decoded. An empty
 * answer (count 0) means the end of the log (offset == high watermark for
 * read_uncommitted). isolation SLUICE_READ_COMMITTED stops at the last
 * stable offset, but FETCH_DATA carries no list of aborted transactions:
 * records of aborted transactions below it are returned. Acknowledgements
 * that arrive meanwhile are kept for sluice_poll. Returns the records
 * (>= 0, res filled), or -ETIMEDOUT, -EPROTO (a batch that does not parse,
 * decompress or whose CRC is wrong; next_offset at that batch when no
 * record came before it), -EINVAL, -EIO. */
int sluice_fetch(struct sluice_client *c, const char *topic, int32_t partition, int64_t offset,
		 uint32_t max_bytes, int isolation, int timeout_ms, struct sluice_fetch_result *res);

/* ---- state ------------------------------------------------------------------------------ */

struct sluice_stats {
	int64_t producer_id;
	uint32_t session;
	uint32_t credits, credits_used;      /* granted; bytes unacknowledged */
	uint16_t max_datagram, shards;
	uint32_t rtt_us, rto_us;             /* smoothed round trip of acknowledgements; resend timer */
	uint64_t datagrams_sent, datagrams_received, bytes_sent, bytes_received;
	uint64_t tx_dropped;                 /* the transport could not take a datagram (resent later) */
	uint64_t batches_sent, batch_resends, batches_acked, batches_failed;
	uint64_t records_acked, records_failed;
	uint64_t acks_duplicate;             /* acknowledgements of batches already acknowledged */
	uint64_t acks_out_of_order;          /* OUT_OF_ORDER_SEQUENCE_NUMBER: a batch ahead of a lost one */
	uint64_t errors_received;            /* ERROR datagrams */
	uint64_t throttled;                  /* ERROR: beyond credits */
	uint64_t rx_unreadable;              /* datagrams refused by native_parse (counted, dropped) */
	uint64_t rx_stale;                   /* answers nothing waits for */
	uint64_t sessions_opened;            /* HELLO_ACKs taken (1 + reconnects) */
	uint64_t fetches, fetch_retries;
	/* fault injection (sluice_config.fault) */
	uint64_t fault_dropped, fault_duplicated, fault_truncated, fault_corrupted, fault_reordered;
};

void sluice_stats(const struct sluice_client *c, struct sluice_stats *out);

/* What went wrong last: the message of the broker's last ERROR datagram,
 * or why the client failed ("" when nothing did). Borrowed until the
 * next call on c. */
const char *sluice_last_error(const struct sluice_client *c);

/* The descriptor to wait on for readability in an event loop (then call
 * sluice_poll(c, 0)), or -1 for a transport without one. */
int sluice_fd(const struct sluice_client *c);

/* A short name for a delivery or fetch error (0, Kafka codes, -errno). */
const char *sluice_err_name(int err);

#ifdef __cplusplus
}
#endif

#endif
