/* storage/compress.h — Kafka record-batch compression codecs, framed exactly
 * as Kafka puts them on the wire (RecordBatch attributes bits 0-2).
 *
 * Thread: one struct compress_ctx per shard, used only by that shard's
 * thread (@thread shard); contexts are not shared and hold no locks.
 * Owns: the codec state in struct compress_ctx (isa-l deflate/inflate
 * state and level buffer, LZ4F contexts, static zstd workspaces (one
 * streaming decoder among them), a scratch block, the stream window). Every in/out pointer is borrowed for the duration of one call.
 * Allocation: compress_ctx_create allocates and warms every context; after
 * it encode/decode allocate nothing themselves (see the snappy caveat at
 * compress_encode).
 * Errors: return bytes written or -errno:
 *   -EINVAL   unknown codec id
 *   -EBADMSG  corrupt or truncated input (decode)
 *   -ENOBUFS  the result does not fit in out_cap; nothing past out_cap is
 *             ever written, and decoders never size anything from lengths
 *             claimed by the input, so decompression bombs stop at out_cap
 *   -EMSGSIZE in_len above COMPRESS_MAX_LEN (larger than any Kafka batch)
 *   -ENOMEM   compress_ctx_create only
 *   -EIO      encode only: a codec library refused its arguments (a bug,
 *             not expected in operation)
 *
 * Wire framing per codec (what Java and librdkafka write and read):
 *   1 gzip    one RFC 1952 member (isa-l igzip); decode also accepts
 *             several concatenated members.
 *   2 snappy  encode: xerial/snappy-java framing, "\x82SNAPPY\0", int32 BE
 *             version 1, int32 BE compatible 1, then [int32 BE length]
 *             [raw snappy block] per 32 KiB of input (snappy-java's
 *             default block). decode: that framing (also concatenated
 *             xerial streams) or, without the magic, one raw snappy block.
 *   3 lz4     LZ4 frame format (LZ4F). encode: 64 KiB independent blocks,
 *             no checksums or content size, as Kafka's Java
 *             KafkaLZ4BlockOutputStream reads it. decode: any LZ4 frame
 *             (linked blocks, checksums, 4 MiB blocks, concatenated).
 *   4 zstd    zstd frame; decode does not need the frame content size
 *             (frames from ZSTD_compressStream / zstd-jni decode fine).
 */
#ifndef SLUICE_COMPRESS_H
#define SLUICE_COMPRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum compress_codec {
	COMPRESS_NONE = 0,
	COMPRESS_GZIP = 1,
	COMPRESS_SNAPPY = 2,
	COMPRESS_LZ4 = 3,
	COMPRESS_ZSTD = 4,
	COMPRESS__COUNT
};

/* Largest in_len accepted and largest output produced: Kafka frames a batch
 * with an int32 length, and isa-l counts bytes in uint32. */
#define COMPRESS_MAX_LEN ((size_t)INT32_MAX)

/* Per-shard reusable codec state; opaque. */
struct compress_ctx;

/* Allocate and warm every codec context (this is the only allocating call).
 * Returns 0 and sets *out, or -ENOMEM. @thread setup */
int compress_ctx_create(struct compress_ctx **out);

/* Free ctx and everything it owns; NULL is a no-op. @thread setup */
void compress_ctx_destroy(struct compress_ctx *ctx);

/* Worst-case compress_encode output for in_len bytes: an out_cap of this
 * size never gets -ENOBUFS. 0 for an unknown codec or in_len above
 * COMPRESS_MAX_LEN. @thread any */
size_t compress_bound(int codec, size_t in_len);

/* Compress in[0..in_len) into out[0..out_cap) in the codec's Kafka wire
 * framing. Returns bytes written, -EINVAL, -ENOBUFS or -EMSGSIZE.
 * An out_cap below compress_bound works when the result fits, except that
 * libzstd may refuse (-ENOBUFS) a zstd frame that would have fitted
 * exactly: its per-block checks want slack.
 * Levels: gzip isa-l level 1, lz4 LZ4F default (fast), zstd 3.
 * Caveat: libsnappy's snappy_compress allocates its own working memory
 * inside each call (C++ WorkingMemory); the C API offers no way to pass
 * it, so snappy encode is the one path that still allocates per call.
 * @thread shard */
ssize_t compress_encode(struct compress_ctx *ctx, int codec, const void *in,
			size_t in_len, void *out, size_t out_cap);

/* Decompress in[0..in_len) into out[0..out_cap). Returns bytes written,
 * -EINVAL, -EBADMSG (corrupt, truncated, trailing garbage, or empty input
 * for a real codec) or -ENOBUFS (the decoded data would exceed out_cap).
 * @thread shard */
ssize_t compress_decode(struct compress_ctx *ctx, int codec, const void *in,
			size_t in_len, void *out, size_t out_cap);

/* Decompression as a stream, for checking what a producer sends without
 * holding it whole: the output goes through a window of the ctx
 * (COMPRESS_WINDOW bytes, allocated at compress_ctx_create) and is handed
 * to sink piece by piece, in order (gzip, lz4, zstd: pieces of at most
 * 128 KiB; snappy: a block, or a window, at a time); memory stays bounded
 * whatever the compressed size or the ratio.
 *
 * The decompression bound: more than COMPRESS_INFLATE_MAX bytes of output
 * (the most the cleaner decompresses a batch into) is -ENOBUFS.
 * zstd frames are decoded with a window of at most 2^COMPRESS_ZSTD_WLOG
 * bytes (every level up to 19 with an unknown content size, and frames
 * with a content size up to 8 MiB); a frame needing more is -ENOBUFS too.
 * snappy: a raw block whose decoded length fits the window is decoded by
 * libsnappy; a larger one by a streaming decoder that accepts copies from
 * up to 64 KiB back (snappy's compressors never reach further: they work
 * in 64 KiB fragments); a farther copy is -EBADMSG. */
#define COMPRESS_WINDOW (1u << 20)
#define COMPRESS_INFLATE_MAX ((size_t)64 << 20)
#define COMPRESS_ZSTD_WLOG 23

/* Takes each piece of output (p borrowed for the call). Returns 0 to go
 * on, or a negative value that stops the stream and is returned as is. */
typedef int (*compress_sink_fn)(void *arg, const uint8_t *p, size_t n);

/* Decompress in[0..in_len) as a stream into sink. Returns the bytes
 * decoded, -EINVAL (unknown codec or COMPRESS_NONE), -EBADMSG (corrupt,
 * truncated, trailing garbage, empty input), -ENOBUFS (beyond limit, itself
 * capped at COMPRESS_INFLATE_MAX, or a zstd window too large), -EMSGSIZE
 * (in_len above COMPRESS_MAX_LEN) or what sink returned. Allocates nothing.
 * @thread shard */
ssize_t compress_decode_stream(struct compress_ctx *ctx, int codec, const void *in, size_t in_len,
			       size_t limit, compress_sink_fn sink, void *arg);

/* "none", "gzip", "snappy", "lz4", "zstd" (Kafka's compression.type
 * spelling), or "unknown". Static storage. @thread any */
const char *compress_codec_name(int codec);

#endif /* SLUICE_COMPRESS_H */
