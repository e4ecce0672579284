/* storage/recompress.c — a batch rewritten in the topic's codec. See
 * recompress.h. @thread shard */
#include "storage/recompress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

struct recompress {
	struct compress_ctx *cc;
	uint8_t *raw;    /* the decompressed records, RECOMPRESS_CAP bytes */
	uint8_t *out;    /* the rewritten batch, RECOMPRESS_CAP bytes */
};

int recompress_create(struct recompress **out)
{
	struct recompress *rz = calloc(1, sizeof(*rz)); /* style: allow shard setup */

	if (!rz)
		return -ENOMEM;
	rz->raw = malloc(RECOMPRESS_CAP); /* style: allow shard setup */
	rz->out = malloc(RECOMPRESS_CAP); /* style: allow shard setup */
	if (!rz->raw || !rz->out || compress_ctx_create(&rz->cc) < 0) {
		recompress_destroy(rz);
		return -ENOMEM;
	}
	*out = rz;
	return 0;
}

void recompress_destroy(struct recompress *rz)
{
	if (!rz)
		return;
	compress_ctx_destroy(rz->cc);
	free(rz->raw);
	free(rz->out);
	free(rz);
}

int recompress_batch(struct recompress *rz, int codec, uint32_t max_size, const uint8_t *b, uint32_t size,
		     const uint8_t **out, uint32_t *out_size)
{
	uint16_t attrs = batch_attributes(b);
	int from = attrs & BATCH_ATTR_CODEC_MASK;
	const uint8_t *raw = b + OF_Records;
	size_t raw_len = size - OF_Records, cap = RECOMPRESS_CAP;
	ssize_t n;

	*out = b;
	*out_size = size;
	if (codec < 0 || codec == from || (attrs & BATCH_ATTR_CONTROL))
		return 0;
	if (!rz)
		return -ENOMEM;   /* a shard made without its scratch */
	if (max_size && max_size < cap)
		cap = max_size;
	if (from != COMPRESS_NONE) {
		n = compress_decode(rz->cc, from, b + OF_Records, size - OF_Records, rz->raw, RECOMPRESS_CAP);
		if (n < 0)
			return n == -ENOBUFS ? -EMSGSIZE : -EBADMSG;
		raw = rz->raw;
		raw_len = (size_t)n;
	}
	if (codec == COMPRESS_NONE) {
		if (raw_len > cap - OF_Records)
			return -EMSGSIZE;
		memcpy(rz->out + OF_Records, raw, raw_len);
		n = (ssize_t)raw_len;
	} else {
		n = compress_encode(rz->cc, codec, raw, raw_len, rz->out + OF_Records, cap - OF_Records);
		if (n < 0)
			return n == -ENOBUFS || n == -EMSGSIZE ? -EMSGSIZE : (int)n;
	}
	memcpy(rz->out, b, OF_Records);
	n += OF_Records;
	be32_store(rz->out + OF_BatchLength, (uint32_t)(n - BATCH_LOG_OVERHEAD));
	be16_store(rz->out + OF_Attributes, (uint16_t)((attrs & ~BATCH_ATTR_CODEC_MASK) | (unsigned)codec));
	be32_store(rz->out + OF_Crc, batch_compute_crc(rz->out, (uint32_t)n));
	*out = rz->out;
	*out_size = (uint32_t)n;
	return 1;
}
