/* storage/batch.h — validation, CRC and record iteration for RecordBatch v2.
 *
 * Thread: any (pure functions on caller memory). Owns nothing; every
 * pointer returned points into the caller's buffer and lives as long as it.
 * Errors: validation returns 0 or -BATCH_ERR_*, one distinct code per
 * failure; the protocol layer maps them to Kafka error codes (the table in
 * batch_err_kafka_hint below documents the intended mapping, STYLE 6).
 * Other functions return 0/count or -errno.
 */
#ifndef SLUICE_BATCH_H
#define SLUICE_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <isa-l/crc.h>

#include "storage/batch_format.h"

enum batch_err {
	BATCH_OK = 0,
	BATCH_ERR_TRUNCATED,   /* fewer bytes than the header or BatchLength needs  -> CORRUPT_MESSAGE (2) */
	BATCH_ERR_LENGTH,      /* BatchLength below the header size                  -> CORRUPT_MESSAGE (2) */
	BATCH_ERR_TOO_LARGE,   /* batch larger than the configured maximum          -> MESSAGE_TOO_LARGE (10) */
	BATCH_ERR_MAGIC,       /* magic is not 2 (legacy MessageSet or garbage)     -> INVALID_RECORD (87) */
	BATCH_ERR_CRC,         /* CRC-32C mismatch                                  -> CORRUPT_MESSAGE (2) */
	BATCH_ERR_COUNT,       /* RecordsCount <= 0 or != LastOffsetDelta + 1       -> INVALID_RECORD (87) */
	BATCH_ERR_RECORD,      /* record framing broken inside an uncompressed batch -> CORRUPT_MESSAGE (2) */
	BATCH_ERR_CODEC,       /* compression codec id > 4                          -> UNSUPPORTED_COMPRESSION_TYPE (76) */
	BATCH_ERR_ATTRIBUTES,  /* reserved attribute bits set                        -> INVALID_RECORD (87) */
	BATCH_ERR_OFFSET,      /* stored batch: BaseOffset not the expected next offset (recovery only) */
	BATCH_ERR_INNER,       /* records disagree with the header: their count, an
				* offsetDelta not its position                      -> INVALID_RECORD (87) */
	BATCH_ERR_DECOMPRESS,  /* compressed payload does not decompress             -> CORRUPT_MESSAGE (2) */
	BATCH_ERR_INFLATE,     /* payload inflates beyond COMPRESS_INFLATE_MAX       -> MESSAGE_TOO_LARGE (10) */
	BATCH_ERR__COUNT
};

/* Validation flags. */
#define BATCH_V_PRODUCE   0x1  /* an incoming batch: RecordsCount == LastOffsetDelta+1 and offsetDelta == i */
#define BATCH_V_NO_RECORDS 0x2 /* the header and the CRC only, the records not walked: a follower's
				* copy of batches its leader checked (Kafka's appendAsFollower) */

struct batch_info {
	uint32_t size;          /* bytes of this batch (BatchLength + 12) */
	int32_t records;        /* RecordsCount */
	int32_t last_offset_delta;
	int64_t max_timestamp;
	uint16_t attributes;
};

/* CRC-32C (Castagnoli) with isa-l, Kafka's convention (init and final ~0). */
static inline uint32_t batch_crc32c(const uint8_t *p, size_t n)
{
	return crc32_iscsi((unsigned char *)p, (int)n, 0xffffffffu) ^ 0xffffffffu;
}

/* CRC of a whole batch of `size` bytes as stored in its Crc field. */
static inline uint32_t batch_compute_crc(const uint8_t *b, uint32_t size)
{
	return batch_crc32c(b + OF_Attributes, size - OF_Attributes);
}

/* Validate the batch at buf (len bytes available, possibly more batches
 * after it). max_size bounds the batch (0 = no bound). The records of an
 * uncompressed batch are checked as record_check does, unless
 * BATCH_V_NO_RECORDS; those of a compressed one are not (see
 * batch_check_records). On success fills
 * *info and returns 0; else returns -BATCH_ERR_*. @thread any */
int batch_validate(const uint8_t *buf, size_t len, uint32_t max_size, unsigned flags,
		   struct batch_info *info);

/* Records checked as a byte stream, in pieces of any size (a compressed
 * batch's records as they come out of the decoder), with O(1) state:
 * lengths of the record, key, value, header count and headers consistent
 * and inside the record (else BATCH_ERR_RECORD), each offsetDelta equal to
 * its position with BATCH_V_PRODUCE (else at most LastOffsetDelta), and
 * exactly RecordsCount records (else BATCH_ERR_INNER). Timestamps are not
 * refused (as Kafka with its default message.timestamp.*). Caller memory;
 * the first error sticks. @thread any */
struct record_check {
	int field;             /* the field the next byte belongs to */
	unsigned shift;        /* varint: bits gathered so far */
	uint64_t acc;          /* varint: value gathered so far */
	int64_t rec_left;      /* bytes of the current record still to come */
	int64_t skip;          /* bytes of a key, value or header still to come */
	int64_t headers_left;
	int32_t index;         /* records completed */
	int32_t count;         /* RecordsCount */
	int32_t last_offset_delta;
	unsigned flags;
	int err;               /* 0 or the first -BATCH_ERR_* */
};

void record_check_init(struct record_check *rc, int32_t count, int32_t last_offset_delta, unsigned flags);
/* 0 to go on, or the first -BATCH_ERR_*. */
int record_check_feed(struct record_check *rc, const uint8_t *p, size_t n);
/* After the last piece: 0 or -BATCH_ERR_*. */
int record_check_end(struct record_check *rc);

struct compress_ctx;
/* The records of a compressed batch that batch_validate accepted (bi from
 * it), decompressed as a stream through cc's window and checked as
 * record_check does. 0, -BATCH_ERR_DECOMPRESS, -BATCH_ERR_INFLATE (more
 * than COMPRESS_INFLATE_MAX bytes), or a record_check error; 0 for an
 * uncompressed batch (batch_validate checked it). Allocates nothing.
 * @thread shard (cc is the shard's) */
int batch_check_records(struct compress_ctx *cc, const uint8_t *b, const struct batch_info *bi,
			unsigned flags);

const char *batch_strerror(int err);

/* Zigzag varints as Kafka's records use them. Return bytes consumed (>0),
 * or 0 if the input is truncated or too long. */
static inline size_t varint_decode(const uint8_t *p, const uint8_t *end, int64_t *out)
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

static inline size_t varint_encode(uint8_t *p, int64_t v)
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

static inline size_t varint_size(int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 1;

	while (z >= 0x80) {
		z >>= 7;
		n++;
	}
	return n;
}

/* One record inside an uncompressed records section. Pointers borrow the
 * caller's buffer. key/value are NULL when their length is -1. */
struct record_view {
	int64_t timestamp_delta;
	int32_t offset_delta;
	int32_t key_len;
	int32_t value_len;
	int32_t headers_count;
	const uint8_t *key;
	const uint8_t *value;
	const uint8_t *headers;    /* raw header bytes */
	size_t headers_len;
	const uint8_t *raw;        /* the whole record, length varint included */
	size_t raw_len;
};

struct record_iter {
	const uint8_t *p;
	const uint8_t *end;
	int32_t left;
};

static inline void record_iter_init(struct record_iter *it, const uint8_t *records,
				    size_t len, int32_t count)
{
	it->p = records;
	it->end = records + len;
	it->left = count;
}

/* 1: *rv filled; 0: no more records; -BATCH_ERR_RECORD: bad framing. */
int record_iter_next(struct record_iter *it, struct record_view *rv);

/* Build an uncompressed batch into caller memory (tests, benchmarks,
 * the cleaner). */
struct batch_builder {
	uint8_t *buf;
	size_t cap;
	size_t len;
	int32_t count;
	int32_t last_offset_delta;
	int64_t base_timestamp;
	int64_t max_timestamp;
	int overflow;
};

void batch_builder_init(struct batch_builder *bb, uint8_t *buf, size_t cap, int64_t base_timestamp);
/* headers: raw header bytes for hcount headers (NULL/0 for none).
 * key/value NULL means null (-1). Returns 0 or -ENOBUFS. */
int batch_builder_add(struct batch_builder *bb, int32_t offset_delta, int64_t timestamp,
		      const void *key, int32_t key_len, const void *value, int32_t value_len,
		      const void *headers, size_t headers_len, int32_t hcount);
/* Append a record already framed (record_view.raw) with a new offset delta
 * kept as is. Returns 0 or -ENOBUFS. */
int batch_builder_add_raw(struct batch_builder *bb, const struct record_view *rv);
/* Write the header (BaseOffset 0, leader epoch -1 unless set later) and the
 * CRC. last_offset_delta < 0 keeps the builder's own. Returns the batch size
 * or -ENOBUFS. */
ssize_t batch_builder_finish(struct batch_builder *bb, uint16_t attributes, int32_t last_offset_delta,
			     int64_t producer_id, int16_t producer_epoch, int32_t base_sequence);

#endif
