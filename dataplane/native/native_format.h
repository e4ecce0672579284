/* dataplane/native/native_format.h — Sluice's native datagram protocol: the
 * one place that says what every message looks like on the wire, shared
 * by the broker (its DPDK queues) and the client library (kernel UDP or
 * DPDK).
 *
 * The protocol carries Kafka RecordBatches (v2, exactly as Kafka frames
 * them) over UDP/IPv4 and adds no transport of its own: reliability is the
 * log's numbering. A producer is an idempotent producer (producer id,
 * epoch, base sequence, from InitProducerId over TCP or the native HELLO);
 * it resends what is not acknowledged, and the partition's producer state
 * acknowledges a resend with the original offset and appends it once.
 * Readers ask by offset and ask again when an answer is lost. Credits (in
 * bytes) bound what a client may have unacknowledged at the broker.
 *
 * Every integer is big-endian (network order, as in Kafka). Every datagram
 * starts with the 20-byte header:
 *
 *    offset size field
 *     0     2    magic      0x534C ("SL")
 *     2     1    version    1
 *     3     1    type       enum native_type
 *     4     2    length     bytes of the whole datagram, header included
 *     6     2    flags      0 (reserved; a receiver ignores unknown bits)
 *     8     4    crc        CRC-32C (Castagnoli, as RecordBatch's) of bytes
 *                           [0, 8) then [12, length): the whole datagram
 *                           but this field
 *    12     4    session    0 in HELLO; then what HELLO_ACK assigned
 *    16     4    request    the sender's number; an answer echoes it
 *
 * and its body follows at offset 20, laid out per type below (offsets are
 * from the start of the datagram). Variable parts (a topic name, a
 * fragment) come after the fixed part, in the order listed. A datagram is
 * at most NATIVE_MAX_DATAGRAM bytes (what one jumbo Ethernet frame carries
 * in UDP/IPv4); the two sides agree on a smaller maximum in HELLO.
 *
 * Thread: any (pure layout and bounds checks). Errors: native_parse
 * returns -NATIVE_E_* (negative), never reads outside the datagram.
 */
#ifndef SLUICE_NATIVE_FORMAT_H
#define SLUICE_NATIVE_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define NATIVE_MAGIC 0x534C
#define NATIVE_VERSION 1
#define NATIVE_HEADER 20
/* 9000-byte jumbo frame - 20 (IPv4) - 8 (UDP) */
#define NATIVE_MAX_DATAGRAM 8972
/* 1500-byte frame - 20 - 8: what every Ethernet carries */
#define NATIVE_MIN_DATAGRAM 1472
#define NATIVE_MAX_TOPIC 249          /* Kafka's longest topic name */
#define NATIVE_MAX_BATCH (16u << 20)  /* largest RecordBatch reassembled from fragments */
#define NATIVE_MAX_FRAGMENTS 4096

enum native_type {
	NATIVE_HELLO = 1,
	NATIVE_HELLO_ACK = 2,
	NATIVE_PRODUCE = 3,
	NATIVE_PRODUCE_ACK = 4,
	NATIVE_FETCH = 5,
	NATIVE_FETCH_DATA = 6,
	NATIVE_ERROR = 7,
	NATIVE_REPLICA_FETCH = 8,     /* broker -> broker: a follower's fetch (replication) */
	NATIVE_REPLICA_DATA = 9,      /* broker -> broker: the leader's answer */
};

/* The replication messages' own version (their first body byte): a
 * receiver refuses another (NATIVE_E_VERSION) without touching the rest. */
#define NATIVE_REPLICA_VERSION 1

/* ---- header --------------------------------------------------------------- */
#define NH_MAGIC 0
#define NH_VERSION 2
#define NH_TYPE 3
#define NH_LENGTH 4
#define NH_FLAGS 6
#define NH_CRC 8
#define NH_SESSION 12
#define NH_REQUEST 16
#define NH_CRC_FROM 12                /* the CRC covers [0, NH_CRC) and [NH_CRC_FROM, length) */

/* ---- HELLO (client -> broker): open a session --------------------------------
 *    20  4  credits      bytes the client would like to have in flight
 *    24  2  max_datagram the largest datagram the client sends and takes
 *    26  1  name_len     client id length (0-255)
 *    27  -  name         the client id (for the broker's logs and counters)
 */
#define NHELLO_CREDITS 20
#define NHELLO_MAX_DATAGRAM 24
#define NHELLO_NAME_LEN 26
#define NHELLO_FIXED 27

/* ---- HELLO_ACK (broker -> client) ----------------------------------------------
 *    20  4  session      the session id to put in every later datagram
 *    24  4  credits      bytes the client may have unacknowledged
 *    28  2  max_datagram the smaller of both sides' maxima
 *    30  2  shards       the broker's shards (informational)
 *    32  8  producer_id  a producer id for this session (epoch 0), unique
 *                        across restarts as InitProducerId's
 */
#define NHACK_SESSION 20
#define NHACK_CREDITS 24
#define NHACK_MAX_DATAGRAM 28
#define NHACK_SHARDS 30
#define NHACK_PRODUCER_ID 32
#define NHACK_FIXED 40

/* ---- PRODUCE (client -> broker): one RecordBatch, or one fragment of it ---------
 *    20  1  topic_len
 *    21  1  acks         1 or -1 (as Kafka's; the ack comes once durable per
 *                        log.durability); 0: no PRODUCE_ACK
 *    22  4  partition
 *    26  8  producer_id  \
 *    34  2  producer_epoch > the batch's own, repeated so that fragments can be
 *    36  4  base_sequence /  told apart before the batch is whole
 *    40  4  batch_len    bytes of the whole RecordBatch
 *    44  4  frag_offset  where this fragment's bytes go in the batch
 *    48  2  frag_index   0-based
 *    50  2  frag_count   1 for an unfragmented batch
 *    52  -  topic        topic_len bytes
 *     .  -  fragment     the rest of the datagram
 * Fragments of one batch share (session, topic, partition, producer id,
 * epoch, base sequence); they cover [0, batch_len) without gaps or
 * overlaps; the broker validates the whole batch (CRC included) once it is
 * complete and drops an incomplete one after a timeout (the producer
 * resends).
 */
#define NPROD_TOPIC_LEN 20
#define NPROD_ACKS 21
#define NPROD_PARTITION 22
#define NPROD_PRODUCER_ID 26
#define NPROD_PRODUCER_EPOCH 34
#define NPROD_BASE_SEQUENCE 36
#define NPROD_BATCH_LEN 40
#define NPROD_FRAG_OFFSET 44
#define NPROD_FRAG_INDEX 48
#define NPROD_FRAG_COUNT 50
#define NPROD_FIXED 52

/* ---- PRODUCE_ACK (broker -> client) ------------------------------------------------
 *    20  2  error        a Kafka error code (0: appended, or a duplicate
 *                        acknowledged with its original offset)
 *    22  4  partition
 *    26  8  producer_id
 *    34  4  base_sequence
 *    38  8  base_offset  -1 on error
 *    46  8  log_start
 *    54  4  credits      bytes given back (the acknowledged batch's length)
 *    58  1  topic_len
 *    59  -  topic
 */
#define NPACK_ERROR 20
#define NPACK_PARTITION 22
#define NPACK_PRODUCER_ID 26
#define NPACK_BASE_SEQUENCE 34
#define NPACK_BASE_OFFSET 38
#define NPACK_LOG_START 46
#define NPACK_CREDITS 54
#define NPACK_TOPIC_LEN 58
#define NPACK_FIXED 59

/* ---- FETCH (client -> broker) ---------------------------------------------------------
 *    20  1  topic_len
 *    21  1  isolation    0 read_uncommitted, 1 read_committed (up to the LSO)
 *    22  4  partition
 *    26  8  offset       the next record to read
 *    34  4  max_bytes    at most this much data in the answer (at least
 *                        one whole batch is always answered)
 *    38  -  topic
 */
#define NFETCH_TOPIC_LEN 20
#define NFETCH_ISOLATION 21
#define NFETCH_PARTITION 22
#define NFETCH_OFFSET 26
#define NFETCH_MAX_BYTES 34
#define NFETCH_FIXED 38

/* ---- FETCH_DATA (broker -> client): whole batches, split over datagrams -----------------
 *    20  2  error
 *    22  4  partition
 *    26  8  high_watermark
 *    34  8  log_start
 *    42  8  last_stable  the LSO (read_committed reads stop there)
 *    50  4  total_len    bytes of batches in the whole answer
 *    54  4  frag_offset  where this datagram's bytes go in the answer
 *    58  2  frag_index
 *    60  2  frag_count
 *    62  1  topic_len
 *    63  -  topic
 *     .  -  data         the rest of the datagram
 * The answer's bytes are whole RecordBatches as stored (a client reads
 * them as a Kafka Fetch's records). An answer that lost a fragment is
 * asked for again by offset.
 */
#define NDATA_ERROR 20
#define NDATA_PARTITION 22
#define NDATA_HIGH_WATERMARK 26
#define NDATA_LOG_START 34
#define NDATA_LAST_STABLE 42
#define NDATA_TOTAL_LEN 50
#define NDATA_FRAG_OFFSET 54
#define NDATA_FRAG_INDEX 58
#define NDATA_FRAG_COUNT 60
#define NDATA_TOPIC_LEN 62
#define NDATA_FIXED 63

/* ---- ERROR (broker -> client): a datagram that could not be served ----------------------
 *    20  2  error        a Kafka error code, or a NATIVE_E_* reason
 *                        (negative) for a datagram the broker could not
 *                        read
 *    22  1  about        the type of the datagram it answers
 *    23  2  msg_len
 *    25  -  message      what failed and what to do, for a human
 */
#define NERR_ERROR 20
#define NERR_ABOUT 22
#define NERR_MSG_LEN 23
#define NERR_FIXED 25

/* ---- REPLICA_FETCH (follower broker -> leader broker) ----------------------------------
 * Kafka's replica Fetch for one partition, on the shards' replication queue
 * pairs (dpdk.enable). No session (the header's is 0): the leader checks
 * the replica id against the partition's replicas as the Fetch handler
 * does, and answers to the datagram's source address by the queue it came
 * on. The request number's top byte is the follower's shard (its answer is
 * handed to that shard wherever it lands).
 *    20  1  rversion     NATIVE_REPLICA_VERSION
 *    21  1  topic_len
 *    22  2  max_datagram the largest REPLICA_DATA datagram the follower takes
 *    24  4  replica_id   the follower's broker id (>= 0)
 *    28  4  partition
 *    32  4  leader_epoch the follower's current leader epoch (KIP-320)
 *    36  4  last_epoch   the epoch of its last batch, -1: none (KIP-279, Fetch v12's
 *                        LastFetchedEpoch)
 *    40  8  offset       the fetch offset: the follower's durable log end (it asks
 *                        only once everything below is durable on it)
 *    48  8  log_start    the follower's log start
 *    56  4  max_bytes    data per answer (a first batch above it is sent whole)
 *    60  4  max_wait_ms  the leader may hold the fetch this long when it has nothing new
 *    64  -  topic
 */
#define NRFETCH_RVERSION 20
#define NRFETCH_TOPIC_LEN 21
#define NRFETCH_MAX_DATAGRAM 22
#define NRFETCH_REPLICA 24
#define NRFETCH_PARTITION 28
#define NRFETCH_LEADER_EPOCH 32
#define NRFETCH_LAST_EPOCH 36
#define NRFETCH_OFFSET 40
#define NRFETCH_LOG_START 48
#define NRFETCH_MAX_BYTES 56
#define NRFETCH_MAX_WAIT 60
#define NRFETCH_FIXED 64

/* ---- REPLICA_DATA (leader broker -> follower broker): the answer, split over datagrams ---
 * What Kafka's Fetch answers a follower for one partition: an error, or a
 * diverging epoch (and no records), or the records from the fetch offset
 * up to the leader's log end, with the high watermark.
 *    20  1  rversion
 *    21  1  topic_len
 *    22  2  error        a Kafka error code
 *    24  4  partition
 *    28  4  leader_epoch the fetch's, echoed (an answer to an older epoch is dropped)
 *    32  4  div_epoch    DivergingEpoch: -1 none; else the follower cuts its log
 *    36  8  div_end      ...at the least of this and its own end of div_epoch;
 *                        div_epoch -1 and error OFFSET_OUT_OF_RANGE: the leader's
 *                        log end (the follower past it cuts there)
 *    44  8  high_watermark
 *    52  8  log_start
 *    60  8  offset       the fetch offset, echoed
 *    68  4  total_len    bytes of batches in the whole answer
 *    72  4  frag_offset
 *    76  2  frag_index
 *    78  2  frag_count   0 or 1 for an answer without data
 *    80  -  topic
 *     .  -  data
 */
#define NRDATA_RVERSION 20
#define NRDATA_TOPIC_LEN 21
#define NRDATA_ERROR 22
#define NRDATA_PARTITION 24
#define NRDATA_LEADER_EPOCH 28
#define NRDATA_DIV_EPOCH 32
#define NRDATA_DIV_END 36
#define NRDATA_HIGH_WATERMARK 44
#define NRDATA_LOG_START 52
#define NRDATA_OFFSET 60
#define NRDATA_TOTAL_LEN 68
#define NRDATA_FRAG_OFFSET 72
#define NRDATA_FRAG_INDEX 76
#define NRDATA_FRAG_COUNT 78
#define NRDATA_FIXED 80

static_assert(NRFETCH_FIXED == NRFETCH_MAX_WAIT + 4, "REPLICA_FETCH layout");
static_assert(NRDATA_FIXED == NRDATA_FRAG_COUNT + 2, "REPLICA_DATA layout");
static_assert(NRDATA_FIXED + NATIVE_MAX_TOPIC + 61 <= NATIVE_MIN_DATAGRAM, "REPLICA_DATA likewise");
static_assert(NHELLO_FIXED == NHELLO_NAME_LEN + 1, "HELLO layout");
static_assert(NHACK_FIXED == NHACK_PRODUCER_ID + 8, "HELLO_ACK layout");
static_assert(NPROD_FIXED == NPROD_FRAG_COUNT + 2, "PRODUCE layout");
static_assert(NPACK_FIXED == NPACK_TOPIC_LEN + 1, "PRODUCE_ACK layout");
static_assert(NFETCH_FIXED == NFETCH_MAX_BYTES + 4, "FETCH layout");
static_assert(NDATA_FIXED == NDATA_TOPIC_LEN + 1, "FETCH_DATA layout");
static_assert(NERR_FIXED == NERR_MSG_LEN + 2, "ERROR layout");
static_assert(NPROD_FIXED + NATIVE_MAX_TOPIC + 61 <= NATIVE_MIN_DATAGRAM,
	      "a PRODUCE with the longest topic still carries a whole batch header in a 1500-byte frame");
static_assert(NDATA_FIXED + NATIVE_MAX_TOPIC + 61 <= NATIVE_MIN_DATAGRAM, "FETCH_DATA likewise");

/* Why a datagram was refused (native_parse; ERROR's reasons). */
enum native_reject {
	NATIVE_E_SHORT = 1,       /* shorter than its header or its type's fixed part */
	NATIVE_E_MAGIC,           /* not ours */
	NATIVE_E_VERSION,         /* a version this side does not speak */
	NATIVE_E_LENGTH,          /* the length field disagrees with the datagram */
	NATIVE_E_CRC,             /* corrupted */
	NATIVE_E_TYPE,            /* unknown type */
	NATIVE_E_TOPIC,           /* a topic name that is empty, too long or past the end */
	NATIVE_E_FRAGMENT,        /* fragment fields that do not add up */
	NATIVE_E_FIELD,           /* another field out of range (acks, isolation, ...) */
	NATIVE_E_COUNT
};

/* A parsed datagram: fields in host order, variable parts as pointers
 * into the datagram (borrowed). */
struct native_msg {
	uint8_t type;
	uint16_t length, flags;
	uint32_t session, request;
	const char *topic;            /* PRODUCE, PRODUCE_ACK, FETCH, FETCH_DATA */
	uint8_t topic_len;
	int16_t error;                /* PRODUCE_ACK, FETCH_DATA, ERROR */
	int32_t partition;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int8_t acks;
	uint8_t isolation;
	uint32_t credits;             /* HELLO, HELLO_ACK, PRODUCE_ACK */
	uint16_t max_datagram;        /* HELLO, HELLO_ACK */
	uint16_t shards;              /* HELLO_ACK */
	uint8_t about;                /* ERROR */
	int64_t offset;               /* FETCH: offset; PRODUCE_ACK: base offset */
	int64_t log_start, high_watermark, last_stable;
	uint32_t max_bytes;           /* FETCH */
	uint32_t total_len;           /* PRODUCE: batch_len; FETCH_DATA: total_len */
	uint32_t frag_offset;
	uint16_t frag_index, frag_count;
	const uint8_t *data;          /* PRODUCE: fragment; FETCH_DATA: data; HELLO: name;
				       * ERROR: message */
	uint32_t data_len;
	/* REPLICA_FETCH, REPLICA_DATA (offset: the fetch offset; max_datagram,
	 * max_bytes, log_start, high_watermark, error, fragments as above) */
	int32_t replica_id;
	int32_t leader_epoch;
	int32_t last_epoch;           /* REPLICA_FETCH: last fetched; REPLICA_DATA: diverging */
	int64_t div_end;
	uint32_t max_wait_ms;
};

/* The fields of a REPLICA_FETCH and of a REPLICA_DATA datagram, for the
 * writers (native_msg's names). */
struct native_replica_fetch {
	int32_t replica_id, partition, leader_epoch, last_epoch;
	int64_t offset, log_start;
	uint32_t max_bytes, max_wait_ms;
	uint16_t max_datagram;
};

struct native_replica_data {
	int16_t error;
	int32_t partition, leader_epoch, div_epoch;
	int64_t div_end, high_watermark, log_start, offset;
	uint32_t total_len, frag_offset;
	uint16_t frag_index, frag_count;
};

/* Check and read a datagram of len bytes: 0, or -NATIVE_E_*. The CRC is
 * checked unless check_crc is 0 (a port that verified it already has no
 * such thing: UDP's checksum is weaker; keep it on). */
int native_parse(const uint8_t *dg, size_t len, int check_crc, struct native_msg *m);

/* Writers: fill buf (cap bytes) with a whole datagram and return its
 * length; -ENOSPC if it does not fit, -EINVAL for an empty or too long
 * topic, -EMSGSIZE above NATIVE_MAX_DATAGRAM. The header (magic,
 * version, type, length, CRC) is written last. Payloads (name, fragment,
 * data, message) must not overlap buf. */
int native_write_hello(uint8_t *buf, size_t cap, uint32_t request, uint32_t credits, uint16_t max_datagram,
		       const char *name);
int native_write_hello_ack(uint8_t *buf, size_t cap, uint32_t request, uint32_t session, uint32_t credits,
			   uint16_t max_datagram, uint16_t shards, int64_t producer_id);
/* One fragment [frag_offset, frag_offset + n) of a batch of batch_len
 * bytes; pid/epoch/sequence as in the batch. */
int native_write_produce(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			 int32_t partition, int8_t acks, int64_t producer_id, int16_t producer_epoch,
			 int32_t base_sequence, uint32_t batch_len, uint32_t frag_offset, uint16_t frag_index,
			 uint16_t frag_count, const uint8_t *frag, uint32_t n);
int native_write_produce_ack(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			     size_t topic_len, int32_t partition, int16_t error, int64_t producer_id,
			     int32_t base_sequence, int64_t base_offset, int64_t log_start, uint32_t credits);
int native_write_fetch(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
		       int32_t partition, int64_t offset, uint32_t max_bytes, uint8_t isolation);
int native_write_fetch_data(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			    size_t topic_len, int32_t partition, int16_t error, int64_t high_watermark,
			    int64_t log_start, int64_t last_stable, uint32_t total_len, uint32_t frag_offset,
			    uint16_t frag_index, uint16_t frag_count, const uint8_t *data, uint32_t n);
int native_write_error(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, int16_t error,
		       uint8_t about, const char *message);
int native_write_replica_fetch(uint8_t *buf, size_t cap, uint32_t request, const char *topic, size_t topic_len,
			       const struct native_replica_fetch *f);
int native_write_replica_data(uint8_t *buf, size_t cap, uint32_t request, const char *topic, size_t topic_len,
			      const struct native_replica_data *d, const uint8_t *data, uint32_t n);

/* How many bytes of batch data fit in one PRODUCE / FETCH_DATA datagram
 * of max_datagram bytes for a topic of topic_len bytes. */
static inline uint32_t native_produce_room(uint16_t max_datagram, size_t topic_len)
{
	return (uint32_t)(max_datagram - NPROD_FIXED - topic_len);
}

static inline uint32_t native_fetch_data_room(uint16_t max_datagram, size_t topic_len)
{
	return (uint32_t)(max_datagram - NDATA_FIXED - topic_len);
}

static inline uint32_t native_replica_data_room(uint16_t max_datagram, size_t topic_len)
{
	return (uint32_t)(max_datagram - NRDATA_FIXED - topic_len);
}

/* The CRC a datagram of len bytes (>= NATIVE_HEADER) must carry. */
uint32_t native_crc(const uint8_t *dg, size_t len);

/* A name for a type or a reject reason, for logs and errors. */
const char *native_type_name(uint8_t type);
const char *native_reject_name(int reason);

#endif
