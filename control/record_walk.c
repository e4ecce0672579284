/* control/record_walk.c — the records of fetched batches, decoded (see
 * record_walk.h). */
#include "control/record_walk.h"

#include <errno.h>
#include <stdlib.h>

#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

#define INFLATE_MAX (64u << 20)

static struct compress_ctx *cctx;
static uint8_t *inflate_buf;

int record_walk(const char *topic, int32_t p, const uint8_t *recs, size_t len, int64_t *offset,
			int64_t end, fetch_cb cb, void *arg)
{
	size_t pos = 0;

	while (len - pos >= BATCH_HEADER_SIZE) {
		const uint8_t *b = recs + pos;
		int64_t base = (int64_t)be64_load(b + OF_BaseOffset);
		uint32_t size = be32_load(b + OF_BatchLength) + BATCH_LOG_OVERHEAD;
		uint16_t attr = be16_load(b + OF_Attributes);
		int32_t last_delta = (int32_t)be32_load(b + OF_LastOffsetDelta);
		int64_t base_ts = (int64_t)be64_load(b + OF_BaseTimestamp);
		int64_t max_ts = (int64_t)be64_load(b + OF_MaxTimestamp);
		int32_t count = (int32_t)be32_load(b + OF_RecordsCount);
		const uint8_t *body = b + OF_Records;
		size_t body_len;
		struct record_iter it;
		struct record_view rv;
		int codec = attr & BATCH_ATTR_CODEC_MASK, rc;

		if (size > len - pos)
			break;   /* a partial batch at the end of the response */
		if (b[OF_Magic] != BATCH_MAGIC_V2 || size < BATCH_HEADER_SIZE)
			return -EBADMSG;
		pos += size;
		body_len = size - BATCH_HEADER_SIZE;
		if (base + last_delta < *offset)
			continue;
		if (attr & BATCH_ATTR_CONTROL) {   /* transaction markers are not records */
			*offset = base + last_delta + 1;
			continue;
		}
		if (codec) {
			ssize_t n;

			if (!cctx && compress_ctx_create(&cctx))
				return -ENOMEM;
			if (!inflate_buf && !(inflate_buf = malloc(INFLATE_MAX)))
				return -ENOMEM;
			n = compress_decode(cctx, codec, body, body_len, inflate_buf, INFLATE_MAX);
			if (n < 0)
				return (int)n;
			body = inflate_buf;
			body_len = (size_t)n;
		}
		record_iter_init(&it, body, body_len, count);
		while ((rc = record_iter_next(&it, &rv)) == 1) {
			struct fetched f;

			f.offset = base + rv.offset_delta;
			if (f.offset < *offset)
				continue;
			if (end >= 0 && f.offset >= end)
				return 1;
			f.topic = topic;
			f.partition = p;
			f.timestamp = attr & BATCH_ATTR_LOG_APPEND_TIME ? max_ts : base_ts + rv.timestamp_delta;
			f.key = rv.key;
			f.key_len = rv.key_len;
			f.value = rv.value;
			f.value_len = rv.value_len;
			f.headers = rv.headers;
			f.headers_len = rv.headers_len;
			f.headers_count = rv.headers_count;
			*offset = f.offset + 1;
			if (cb(arg, &f))
				return 1;
		}
		if (rc < 0)
			return -EBADMSG;
		if (*offset < base + last_delta + 1)
			*offset = base + last_delta + 1;
	}
	return 0;
}

