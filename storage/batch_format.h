/* storage/batch_format.h — Kafka RecordBatch v2 (magic 2), the wire and
 * on-disk format of every batch Sluice stores.
 *
 * Thread: any (pure functions). Owns nothing.
 * The layout is Kafka's; field names keep Kafka's spelling so they grep
 * against the protocol definitions. All integers are big-endian. The
 * CRC-32C covers bytes OF_Attributes .. end; BaseOffset, BatchLength,
 * PartitionLeaderEpoch and Magic lie outside it, so the broker stamps the
 * offset and the leader epoch without recomputing the CRC.
 */
#ifndef SLUICE_BATCH_FORMAT_H
#define SLUICE_BATCH_FORMAT_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#define BATCH_MAGIC_V2 2

enum {
	OF_BaseOffset           = 0,  /* int64, assigned by the broker */
	OF_BatchLength          = 8,  /* int32, bytes after this field */
	OF_PartitionLeaderEpoch = 12, /* int32, assigned by the broker */
	OF_Magic                = 16, /* int8, 2 */
	OF_Crc                  = 17, /* uint32 CRC-32C of [OF_Attributes, end) */
	OF_Attributes           = 21, /* int16 */
	OF_LastOffsetDelta      = 23, /* int32 */
	OF_BaseTimestamp        = 27, /* int64 */
	OF_MaxTimestamp         = 35, /* int64 */
	OF_ProducerId           = 43, /* int64 */
	OF_ProducerEpoch        = 51, /* int16 */
	OF_BaseSequence         = 53, /* int32 */
	OF_RecordsCount         = 57, /* int32, never compressed */
	OF_Records              = 61,
};

#define BATCH_HEADER_SIZE    OF_Records     /* 61 */
#define BATCH_LOG_OVERHEAD   12             /* BaseOffset + BatchLength */

/* Attributes bits. */
#define BATCH_ATTR_CODEC_MASK      0x07
#define BATCH_ATTR_LOG_APPEND_TIME 0x08
#define BATCH_ATTR_TRANSACTIONAL   0x10
#define BATCH_ATTR_CONTROL         0x20
#define BATCH_ATTR_DELETE_HORIZON  0x40

static_assert(OF_Crc + 4 == OF_Attributes, "CRC precedes attributes");
static_assert(OF_RecordsCount + 4 == BATCH_HEADER_SIZE, "header is 61 bytes");

static inline uint16_t be16_load(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t be32_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t be64_load(const uint8_t *p)
{
	return (uint64_t)be32_load(p) << 32 | be32_load(p + 4);
}

static inline void be16_store(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void be32_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void be64_store(uint8_t *p, uint64_t v)
{
	be32_store(p, (uint32_t)(v >> 32));
	be32_store(p + 4, (uint32_t)v);
}

/* Accessors on a batch whose header (61 bytes) is readable. */
static inline int64_t batch_base_offset(const uint8_t *b) { return (int64_t)be64_load(b + OF_BaseOffset); }
static inline int32_t batch_length(const uint8_t *b) { return (int32_t)be32_load(b + OF_BatchLength); }
static inline uint32_t batch_size(const uint8_t *b) { return (uint32_t)batch_length(b) + BATCH_LOG_OVERHEAD; }
static inline int32_t batch_leader_epoch(const uint8_t *b) { return (int32_t)be32_load(b + OF_PartitionLeaderEpoch); }
static inline uint16_t batch_attributes(const uint8_t *b) { return be16_load(b + OF_Attributes); }
static inline int32_t batch_last_offset_delta(const uint8_t *b) { return (int32_t)be32_load(b + OF_LastOffsetDelta); }
static inline int64_t batch_last_offset(const uint8_t *b) { return batch_base_offset(b) + batch_last_offset_delta(b); }
static inline int64_t batch_base_timestamp(const uint8_t *b) { return (int64_t)be64_load(b + OF_BaseTimestamp); }
static inline int64_t batch_max_timestamp(const uint8_t *b) { return (int64_t)be64_load(b + OF_MaxTimestamp); }
static inline int64_t batch_producer_id(const uint8_t *b) { return (int64_t)be64_load(b + OF_ProducerId); }
static inline int16_t batch_producer_epoch(const uint8_t *b) { return (int16_t)be16_load(b + OF_ProducerEpoch); }
static inline int32_t batch_base_sequence(const uint8_t *b) { return (int32_t)be32_load(b + OF_BaseSequence); }
static inline int32_t batch_records_count(const uint8_t *b) { return (int32_t)be32_load(b + OF_RecordsCount); }

static inline void batch_set_base_offset(uint8_t *b, int64_t off) { be64_store(b + OF_BaseOffset, (uint64_t)off); }
static inline void batch_set_leader_epoch(uint8_t *b, int32_t e) { be32_store(b + OF_PartitionLeaderEpoch, (uint32_t)e); }

#endif
