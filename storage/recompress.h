/* storage/recompress.h — compression.type with Kafka's meaning: a produced
 * batch whose codec differs from the topic's is rewritten in the topic's
 * codec (uncompressed included) before it is appended. Only the records
 * section changes: the header (producer id, epoch, base sequence,
 * timestamps, LogAppendTime, transactional bit, record count) is kept, the
 * codec bits, BatchLength and CRC are set anew. Control batches are never
 * rewritten.
 *
 * Thread: one struct recompress per shard, used only by that shard's
 * thread (@thread shard) on the partition owner's produce path.
 * Owns: its own codec contexts (storage/compress.h) and two scratch
 * buffers of RECOMPRESS_CAP bytes (the decompressed records, the rewritten
 * batch), allocated once by recompress_create when the shard starts. A
 * batch costs no allocation, except libsnappy's own working memory when the
 * topic's codec is snappy (see compress_encode). The scratch is virtual
 * memory touched only as far as the largest batch rewritten.
 * Errors: -errno:
 *   -EMSGSIZE the records decompress beyond RECOMPRESS_CAP, or the
 *             rewritten batch is larger than the topic's max batch (Kafka
 *             refuses a batch that grows past max.message.bytes this way
 *             too: RecordTooLargeException, MESSAGE_TOO_LARGE)
 *   -EBADMSG  the records do not decompress
 *   -ENOMEM   recompress_create only
 */
#ifndef SLUICE_RECOMPRESS_H
#define SLUICE_RECOMPRESS_H

#include <stdint.h>

/* Largest decompressed records section and largest rewritten batch. */
#define RECOMPRESS_CAP (64u << 20)

struct recompress;

/* @thread setup */
int recompress_create(struct recompress **out);
void recompress_destroy(struct recompress *rz);

/* Batch b (size bytes, already validated) for a topic whose batches are
 * stored in `codec` (0..4, enum compress_codec; < 0: as the producer sent
 * them). Returns 0 with *out = b, *out_size = size when nothing changes
 * (codec < 0, the same codec, a control batch), 1 with *out in rz's
 * scratch (valid until the next call: plog_append copies it) and
 * *out_size its size, or -errno. max_size bounds the rewritten batch.
 * @thread shard */
int recompress_batch(struct recompress *rz, int codec, uint32_t max_size, const uint8_t *b, uint32_t size,
		     const uint8_t **out, uint32_t *out_size);

#endif
