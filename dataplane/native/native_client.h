/* dataplane/native/native_client.h — the inside of libsluice_native (the
 * public API is sluice_native.h): the transport a client sends its
 * datagrams through, its backends, the record codec and test hooks.
 *
 * A transport moves whole datagrams and knows nothing of the protocol.
 * Its shape is DPDK's so that a DPDK backend fits without changing the
 * client: the client asks for a transmit buffer (an mbuf there), writes a
 * datagram into it and queues it; a flush pushes the queue out
 * (sendmmsg / rte_eth_tx_burst); a receive burst lends datagrams
 * (recvmmsg into a ring / rte_eth_rx_burst) until rx_done.
 *
 * Backends: udp (native_client_udp.c, the kernel's UDP socket), fault
 * (native_client_fault.c: loss, duplication, reordering, truncation and
 * bit flips around another transport, seeded), and dpdk
 * (native_client_dpdk.c: a DPDK port with dataplane/netstack.c on it).
 *
 * Thread: the client's (one at a time). Owns: each transport its buffers
 * and descriptors. Errors: 0/count or -errno.
 */
#ifndef SLUICE_NATIVE_CLIENT_H
#define SLUICE_NATIVE_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dataplane/native/native_format.h"
#include "dataplane/native/sluice_native.h"

/* A datagram buffer lent by a transport. */
struct native_dgram {
	uint8_t *data;
	uint32_t len;                 /* bytes of datagram */
	uint32_t cap;                 /* bytes the buffer holds (>= NATIVE_MAX_DATAGRAM for tx) */
	void *priv;                   /* the backend's (an mbuf) */
};

struct native_transport;

struct native_transport_ops {
	const char *name;
	/* One transmit buffer (borrowed until tx_put): 0 or -ENOBUFS (the
	 * queue is full and could not be flushed). At most one buffer is
	 * out at a time. */
	int (*tx_get)(struct native_transport *t, struct native_dgram *d);
	/* Queue d (d->len bytes) for sending; the buffer goes back to the
	 * transport. A full queue is flushed first. */
	void (*tx_put)(struct native_transport *t, struct native_dgram *d);
	/* Send what is queued: the datagrams sent (the rest is dropped and
	 * counted: the protocol resends), or -errno for a broken transport. */
	int (*tx_flush)(struct native_transport *t);
	/* Up to n received datagrams, lent until rx_done: the count, 0 when
	 * none is waiting, or -errno. */
	int (*rx_burst)(struct native_transport *t, struct native_dgram *d, unsigned n);
	void (*rx_done)(struct native_transport *t, struct native_dgram *d, unsigned n);
	/* Wait up to timeout_ms for something to receive (or for the
	 * transport's own timers): 1, 0 on timeout, -errno. */
	int (*wait)(struct native_transport *t, int timeout_ms);
	/* The largest datagram the path carries without IP fragmentation, 0
	 * when unknown. */
	int (*path_mtu)(struct native_transport *t);
	/* A descriptor to poll, or -1. */
	int (*fd)(struct native_transport *t);
	/* Add the backend's counters (tx_dropped, fault_*) to st. */
	void (*stats)(struct native_transport *t, struct sluice_stats *st);
	void (*destroy)(struct native_transport *t);
};

struct native_transport {
	const struct native_transport_ops *ops;
};

/* Backends. Each returns 0 and *out, or -errno with err filled. */
int native_udp_create(const char *host_port, uint32_t socket_buffer, struct native_transport **out, char *err,
		      size_t errlen);
/* The DPDK backend: cfg's dpdk_* fields (sluice_native.h), host_port a
 * numeric "a.b.c.d:port". Checks the configuration before any DPDK call
 * (so a bad one fails without an EAL), then starts the EAL if asked, opens
 * the port and its stack. */
int native_dpdk_create(const char *host_port, const struct sluice_config *cfg, struct native_transport **out,
		       char *err, size_t errlen);

/* The pieces of the DPDK backend's configuration that need no EAL (the
 * unit tests call them). Addresses in network order; err names key.
 * "a.b.c.d/prefix" (prefix 0-32, required; not the subnet's network or
 * broadcast address below /31): 0, or -EINVAL. */
int native_dpdk_parse_cidr(const char *key, const char *s, uint32_t *ip, uint32_t *netmask, char *err,
			   size_t errlen);
/* "a.b.c.d:port" (port 1-65535): 0, or -EINVAL. */
int native_dpdk_parse_hostport(const char *key, const char *s, uint32_t *ip, uint16_t *port, char *err,
			       size_t errlen);
/* A port of the dynamic range (49152-65535) from pid and seq. */
uint16_t native_dpdk_local_port(uint32_t pid, uint32_t seq);

/* Wrap inner (owned from then on: destroyed with the wrapper). */
int native_fault_create(struct native_transport *inner, const struct sluice_fault *f, struct native_transport **out);

/* Open a client over a transport already made (owned from then on, even
 * on failure): what sluice_connect does after making its transport. The
 * unit tests pass an in-memory broker this way. */
int native_client_open(struct native_transport *t, const struct sluice_config *cfg, struct sluice_client **out,
		       char *err, size_t errlen);

/* Test hook (the control run of the fault tests): defeat the broker's
 * deduplication by giving every resent batch a fresh identity (the next
 * producer epoch, sequence 0) instead of its own, one batch in flight per
 * partition. A lost acknowledgement then appends the batch twice. Never
 * for real use. */
void native_client_defeat_dedup(struct sluice_client *c);

/* ---- the record codec (RecordBatch v2, uncompressed) --------------------------------------- */

/* Zigzag varint of a record field. */
static inline size_t native_varint_size(int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 1;

	while (z >= 0x80) {
		z >>= 7;
		n++;
	}
	return n;
}

static inline size_t native_varint_put(uint8_t *p, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 0;

	while (z >= 0x80) {
		p[n++] = (uint8_t)(z | 0x80);
		z >>= 7;
	}
	p[n++] = (uint8_t)z;
	return n;
}

/* Bytes consumed (> 0), or 0 when truncated or longer than 10 bytes. */
static inline size_t native_varint_get(const uint8_t *p, const uint8_t *end, int64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	const uint8_t *s = p;

	while (p < end && shift < 70) {
		uint8_t c = *p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
			return (size_t)(p - s);
		}
		shift += 7;
	}
	return 0;
}

/* Size of one record (length prefix included) as Kafka frames it: no
 * headers; klen/vlen -1 for null. */
static inline size_t native_record_size(int64_t ts_delta, int32_t offset_delta, int32_t klen, int32_t vlen)
{
	size_t body = 1 + native_varint_size(ts_delta) + native_varint_size(offset_delta) + native_varint_size(klen) +
		      (klen > 0 ? (size_t)klen : 0) + native_varint_size(vlen) + (vlen > 0 ? (size_t)vlen : 0) + 1;

	return native_varint_size((int64_t)body) + body;
}

/* Write the record at p (native_record_size bytes free). Returns its size. */
static inline size_t native_record_put(uint8_t *p, int64_t ts_delta, int32_t offset_delta, const void *key,
				       int32_t klen, const void *value, int32_t vlen)
{
	size_t body = 1 + native_varint_size(ts_delta) + native_varint_size(offset_delta) + native_varint_size(klen) +
		      (klen > 0 ? (size_t)klen : 0) + native_varint_size(vlen) + (vlen > 0 ? (size_t)vlen : 0) + 1;
	size_t n = native_varint_put(p, (int64_t)body);

	p[n++] = 0;   /* attributes */
	n += native_varint_put(p + n, ts_delta);
	n += native_varint_put(p + n, offset_delta);
	n += native_varint_put(p + n, klen);
	if (klen > 0)
		memcpy(p + n, key, (size_t)klen);
	n += klen > 0 ? (size_t)klen : 0;
	n += native_varint_put(p + n, vlen);
	if (vlen > 0)
		memcpy(p + n, value, (size_t)vlen);
	n += vlen > 0 ? (size_t)vlen : 0;
	p[n++] = 0;   /* headers: none */
	return n;
}

/* Parse the uncompressed records of one batch (records section of len
 * bytes holding count records) into out[0..count). base_offset and
 * base_timestamp from the batch header; log_append_time: every record's
 * timestamp is max_timestamp. Returns count, or -EPROTO when a record does
 * not frame. @thread any */
int native_records_parse(const uint8_t *records, size_t len, int32_t count, int64_t base_offset,
			 int64_t base_timestamp, int64_t max_timestamp, int log_append_time, struct sluice_record *out);

#endif
