/* storage/batch.c — RecordBatch v2 validation and building. */
#include <errno.h>

#include "storage/batch.h"
#include "storage/compress.h"
#include "storage/controls.h"

static const char *const batch_err_names[BATCH_ERR__COUNT] = {
	[BATCH_OK] = "ok",
	[BATCH_ERR_TRUNCATED] = "batch truncated (fewer bytes than its length says)",
	[BATCH_ERR_LENGTH] = "batch length below the 61-byte header",
	[BATCH_ERR_TOO_LARGE] = "batch larger than the maximum batch size",
	[BATCH_ERR_MAGIC] = "magic is not 2 (only RecordBatch v2 is accepted)",
	[BATCH_ERR_CRC] = "CRC-32C mismatch",
	[BATCH_ERR_COUNT] = "RecordsCount inconsistent with LastOffsetDelta",
	[BATCH_ERR_RECORD] = "record framing broken",
	[BATCH_ERR_CODEC] = "unknown compression codec",
	[BATCH_ERR_ATTRIBUTES] = "reserved attribute bits set",
	[BATCH_ERR_OFFSET] = "unexpected base offset",
	[BATCH_ERR_INNER] = "records disagree with the header (count or offset delta)",
	[BATCH_ERR_DECOMPRESS] = "compressed records do not decompress",
	[BATCH_ERR_INFLATE] = "compressed records inflate beyond the decompression bound",
};

const char *batch_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err >= BATCH_ERR__COUNT)
		return "unknown batch error";
	return batch_err_names[err];
}

int record_iter_next(struct record_iter *it, struct record_view *rv)
{
	int64_t len, v;
	const uint8_t *p = it->p, *end;
	size_t n;

	if (it->left <= 0)
		return it->p == it->end ? 0 : -BATCH_ERR_RECORD;
	n = varint_decode(p, it->end, &len);
	if (!n || len < 6 || (size_t)len > (size_t)(it->end - p - n))
		return -BATCH_ERR_RECORD;
	rv->raw = p;
	p += n;
	end = p + len;
	rv->raw_len = (size_t)(end - rv->raw);
	p++; /* record attributes, unused */
	if (!(n = varint_decode(p, end, &rv->timestamp_delta)))
		return -BATCH_ERR_RECORD;
	p += n;
	if (!(n = varint_decode(p, end, &v)) || v < 0 || v > INT32_MAX)
		return -BATCH_ERR_RECORD;
	rv->offset_delta = (int32_t)v;
	p += n;
	if (!(n = varint_decode(p, end, &v)) || v < -1 || v > end - p - (int64_t)n)
		return -BATCH_ERR_RECORD;
	p += n;
	rv->key_len = (int32_t)v;
	rv->key = v >= 0 ? p : NULL;
	p += v > 0 ? v : 0;
	if (!(n = varint_decode(p, end, &v)) || v < -1 || v > end - p - (int64_t)n)
		return -BATCH_ERR_RECORD;
	p += n;
	rv->value_len = (int32_t)v;
	rv->value = v >= 0 ? p : NULL;
	p += v > 0 ? v : 0;
	if (!(n = varint_decode(p, end, &v)) || v < 0 || v > end - p)
		return -BATCH_ERR_RECORD;
	p += n;
	rv->headers_count = (int32_t)v;
	rv->headers = p;
	for (int64_t h = 0; h < rv->headers_count; h++) {
		int64_t kl, vl;

		if (!(n = varint_decode(p, end, &kl)) || kl < 0 || kl > end - p - (int64_t)n)
			return -BATCH_ERR_RECORD;
		p += n + kl;
		if (!(n = varint_decode(p, end, &vl)) || vl < -1 || vl > end - p - (int64_t)n)
			return -BATCH_ERR_RECORD;
		p += n + (vl > 0 ? vl : 0);
	}
	if (p != end)
		return -BATCH_ERR_RECORD;
	rv->headers_len = (size_t)(p - rv->headers);
	it->p = end;
	it->left--;
	return 1;
}

/* The fields of a record, in wire order. */
enum {
	RC_LEN, RC_ATTR, RC_TSD, RC_OD, RC_KLEN, RC_KEY, RC_VLEN, RC_VAL, RC_HCOUNT,
	RC_HKLEN, RC_HKEY, RC_HVLEN, RC_HVAL
};

void record_check_init(struct record_check *rc, int32_t count, int32_t last_offset_delta, unsigned flags)
{
	memset(rc, 0, sizeof(*rc));
	rc->field = RC_LEN;
	rc->count = count;
	rc->last_offset_delta = last_offset_delta;
	rc->flags = flags;
}

static int record_check_fail(struct record_check *rc, int err)
{
	rc->err = err;
	return err;
}

/* A record's fields are all read: it must end here. */
static int record_done(struct record_check *rc)
{
	if (rc->rec_left)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	rc->index++;
	rc->field = RC_LEN;
	return 0;
}

static int record_bulk_done(struct record_check *rc);

/* A bulk field (key, value, header key or value) of v bytes (-1: null). */
static int record_bulk(struct record_check *rc, int64_t v, int64_t min, int next)
{
	if (v < min || v > rc->rec_left)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	rc->skip = v > 0 ? v : 0;
	rc->field = next;
	return rc->skip ? 0 : record_bulk_done(rc);
}

/* The varint of the current field is complete with value v. */
static int record_field(struct record_check *rc, int64_t v)
{
	switch (rc->field) {
	case RC_LEN:
		if (v < 6 || v > INT32_MAX)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		rc->rec_left = v;
		rc->field = RC_ATTR;
		return 0;
	case RC_TSD:
		rc->field = RC_OD;
		return 0;
	case RC_OD:
		if (v < 0 || v > INT32_MAX)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		if ((rc->flags & BATCH_V_PRODUCE) ? v != rc->index : v > rc->last_offset_delta)
			return record_check_fail(rc, (rc->flags & BATCH_V_PRODUCE) ? -BATCH_ERR_INNER
									   : -BATCH_ERR_RECORD);
		rc->field = RC_KLEN;
		return 0;
	case RC_KLEN:
		return record_bulk(rc, v, -1, RC_KEY);
	case RC_VLEN:
		return record_bulk(rc, v, -1, RC_VAL);
	case RC_HCOUNT:
		if (v < 0 || v > rc->rec_left)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		rc->headers_left = v;
		if (!v)
			return record_done(rc);
		rc->field = RC_HKLEN;
		return 0;
	case RC_HKLEN:
		return record_bulk(rc, v, 0, RC_HKEY);
	default: /* RC_HVLEN */
		return record_bulk(rc, v, -1, RC_HVAL);
	}
}

/* A bulk field is complete. */
static int record_bulk_done(struct record_check *rc)
{
	switch (rc->field) {
	case RC_KEY:
		rc->field = RC_VLEN;
		return 0;
	case RC_VAL:
		rc->field = RC_HCOUNT;
		return 0;
	case RC_HKEY:
		rc->field = RC_HVLEN;
		return 0;
	default: /* RC_HVAL */
		if (--rc->headers_left)
			rc->field = RC_HKLEN;
		else
			return record_done(rc);
		return 0;
	}
}

/* varint_decode with the one-byte case (most fields) first. */
static inline size_t varint_quick(const uint8_t *p, const uint8_t *end, int64_t *out)
{
	if (p < end && !(*p & 0x80)) {
		*out = (int64_t)(*p >> 1) ^ -(int64_t)(*p & 1);
		return 1;
	}
	return varint_decode(p, end, out);
}

/* The fast path: a whole record in [p, end), checked with pointers as the
 * byte machine would. Returns the bytes it took (> 0), 0 when the record
 * does not lie whole in the piece (the byte machine takes it), or the
 * error. */
static ssize_t record_whole(struct record_check *rc, const uint8_t *p, const uint8_t *end)
{
	const uint8_t *q, *rend;
	int64_t len, v, hc;
	size_t n;

	if (!(n = varint_decode(p, end, &len)) || len > end - p - (int64_t)n)
		return 0;
	if (len < 6 || len > INT32_MAX)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	q = p + n + 1;   /* record attributes, unused */
	rend = p + n + len;
	if (!(n = varint_quick(q, rend, &v)))   /* timestampDelta */
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	q += n;
	if (!(n = varint_quick(q, rend, &v)) || v < 0 || v > INT32_MAX)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	if ((rc->flags & BATCH_V_PRODUCE) ? v != rc->index : v > rc->last_offset_delta)
		return record_check_fail(rc, (rc->flags & BATCH_V_PRODUCE) ? -BATCH_ERR_INNER : -BATCH_ERR_RECORD);
	q += n;
	for (int i = 0; i < 2; i++) {   /* key, value */
		if (!(n = varint_quick(q, rend, &v)) || v < -1 || v > rend - q - (int64_t)n)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		q += n + (v > 0 ? v : 0);
	}
	if (!(n = varint_quick(q, rend, &hc)) || hc < 0 || hc > rend - q - (int64_t)n)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	q += n;
	for (int64_t h = 0; h < hc; h++) {
		if (!(n = varint_quick(q, rend, &v)) || v < 0 || v > rend - q - (int64_t)n)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		q += n + v;
		if (!(n = varint_quick(q, rend, &v)) || v < -1 || v > rend - q - (int64_t)n)
			return record_check_fail(rc, -BATCH_ERR_RECORD);
		q += n + (v > 0 ? v : 0);
	}
	if (q != rend)
		return record_check_fail(rc, -BATCH_ERR_RECORD);
	rc->index++;
	return rend - p;
}

int record_check_feed(struct record_check *rc, const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;

	if (rc->err)
		return rc->err;
	while (p < end) {
		int f = rc->field;
		uint8_t c;

		if (f == RC_LEN && !rc->shift) {
			ssize_t r;

			if (rc->index == rc->count)
				return record_check_fail(rc, -BATCH_ERR_INNER);   /* more records than said */
			if ((r = record_whole(rc, p, end)) < 0)
				return rc->err;
			if (r > 0) {
				p += r;
				continue;
			}
		}

		if (f == RC_KEY || f == RC_VAL || f == RC_HKEY || f == RC_HVAL) {
			size_t m = (size_t)(end - p) < (uint64_t)rc->skip ? (size_t)(end - p) : (size_t)rc->skip;

			p += m;
			rc->skip -= (int64_t)m;
			rc->rec_left -= (int64_t)m;   /* skip <= rec_left when set */
			if (!rc->skip && record_bulk_done(rc) < 0)
				return rc->err;
			continue;
		}
		if (f == RC_LEN) {
			if (rc->index == rc->count)
				return record_check_fail(rc, -BATCH_ERR_INNER);   /* more records than said */
		} else if (rc->rec_left-- <= 0) {
			return record_check_fail(rc, -BATCH_ERR_RECORD);   /* a field past its record */
		}
		c = *p++;
		if (f == RC_ATTR) {
			rc->field = RC_TSD;
			continue;
		}
		rc->acc |= (uint64_t)(c & 0x7f) << rc->shift;
		if (c & 0x80) {
			rc->shift += 7;
			if (rc->shift >= 70)
				return record_check_fail(rc, -BATCH_ERR_RECORD);
			continue;
		}
		{
			int64_t v = (int64_t)(rc->acc >> 1) ^ -(int64_t)(rc->acc & 1);

			rc->acc = 0;
			rc->shift = 0;
			if (record_field(rc, v) < 0)
				return rc->err;
		}
	}
	return 0;
}

int record_check_end(struct record_check *rc)
{
	if (rc->err)
		return rc->err;
	if (rc->field != RC_LEN || rc->shift)
		return record_check_fail(rc, -BATCH_ERR_RECORD);   /* the last record is cut short */
	if (rc->index != rc->count)
		return record_check_fail(rc, -BATCH_ERR_INNER);
	return 0;
}

static int record_check_sink(void *arg, const uint8_t *p, size_t n)
{
	return record_check_feed(arg, p, n) < 0 ? -ECANCELED : 0;
}

int batch_check_records(struct compress_ctx *cc, const uint8_t *b, const struct batch_info *bi,
			unsigned flags)
{
	int codec = bi->attributes & BATCH_ATTR_CODEC_MASK;
	struct record_check rc;
	ssize_t n;

	if (!codec)
		return 0;
	record_check_init(&rc, bi->records, bi->last_offset_delta, flags);
	n = compress_decode_stream(cc, codec, b + OF_Records, bi->size - OF_Records, COMPRESS_INFLATE_MAX,
				   record_check_sink, &rc);
	if (rc.err)
		return rc.err;
	if (n == -ENOBUFS)
		return -BATCH_ERR_INFLATE;
	if (n < 0)
		return -BATCH_ERR_DECOMPRESS;
	return record_check_end(&rc);
}

int batch_validate(const uint8_t *buf, size_t len, uint32_t max_size, unsigned flags,
		   struct batch_info *info)
{
	int32_t blen, count, lod;
	uint32_t size;
	uint16_t attrs;

	if (len < BATCH_LOG_OVERHEAD + 5)
		return -BATCH_ERR_TRUNCATED;
	blen = batch_length(buf);
	if (len >= OF_Magic + 1 && buf[OF_Magic] != BATCH_MAGIC_V2)
		return -BATCH_ERR_MAGIC;
	if (blen < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD)
		return -BATCH_ERR_LENGTH;
	size = (uint32_t)blen + BATCH_LOG_OVERHEAD;
	if (max_size && size > max_size)
		return -BATCH_ERR_TOO_LARGE;
	if (size > len)
		return -BATCH_ERR_TRUNCATED;
	if (batch_compute_crc(buf, size) != be32_load(buf + OF_Crc) &&
	    !((flags & BATCH_V_PRODUCE) && SLUICE_CONTROL_OFF(no_crc_check)))
		return -BATCH_ERR_CRC;
	attrs = batch_attributes(buf);
	if ((attrs & BATCH_ATTR_CODEC_MASK) > 4)
		return -BATCH_ERR_CODEC;
	if (attrs & 0xff80)
		return -BATCH_ERR_ATTRIBUTES;
	count = batch_records_count(buf);
	lod = batch_last_offset_delta(buf);
	if (count < 0 || lod < 0 || (count == 0 && (flags & BATCH_V_PRODUCE)) ||
	    ((flags & BATCH_V_PRODUCE) && count != lod + 1) || count > lod + 1)
		return -BATCH_ERR_COUNT;
	if ((attrs & BATCH_ATTR_CODEC_MASK) == 0 && !(flags & BATCH_V_NO_RECORDS)) {
		struct record_check rc;
		int r;

		record_check_init(&rc, count, lod, flags);
		record_check_feed(&rc, buf + OF_Records, size - OF_Records);
		if ((r = record_check_end(&rc)) < 0)
			return r;
	}
	if (info) {
		info->size = size;
		info->records = count;
		info->last_offset_delta = lod;
		info->max_timestamp = batch_max_timestamp(buf);
		info->attributes = attrs;
	}
	return 0;
}

void batch_builder_init(struct batch_builder *bb, uint8_t *buf, size_t cap, int64_t base_timestamp)
{
	bb->buf = buf;
	bb->cap = cap;
	bb->len = BATCH_HEADER_SIZE;
	bb->count = 0;
	bb->last_offset_delta = -1;
	bb->base_timestamp = base_timestamp;
	bb->max_timestamp = base_timestamp;
	bb->overflow = cap < BATCH_HEADER_SIZE;
}

int batch_builder_add(struct batch_builder *bb, int32_t offset_delta, int64_t timestamp,
		      const void *key, int32_t key_len, const void *value, int32_t value_len,
		      const void *headers, size_t headers_len, int32_t hcount)
{
	int64_t tsd = timestamp - bb->base_timestamp;
	int32_t kl = key ? key_len : -1, vl = value ? value_len : -1;
	size_t body = 1 + varint_size(tsd) + varint_size(offset_delta) + varint_size(kl) +
		      (kl > 0 ? (size_t)kl : 0) + varint_size(vl) + (vl > 0 ? (size_t)vl : 0) +
		      varint_size(hcount) + headers_len;
	size_t need = varint_size((int64_t)body) + body;
	uint8_t *p;

	if (bb->overflow || bb->len + need > bb->cap) {
		bb->overflow = 1;
		return -ENOBUFS;
	}
	p = bb->buf + bb->len;
	p += varint_encode(p, (int64_t)body);
	*p++ = 0;
	p += varint_encode(p, tsd);
	p += varint_encode(p, offset_delta);
	p += varint_encode(p, kl);
	if (kl > 0) {
		memcpy(p, key, (size_t)kl);
		p += kl;
	}
	p += varint_encode(p, vl);
	if (vl > 0) {
		memcpy(p, value, (size_t)vl);
		p += vl;
	}
	p += varint_encode(p, hcount);
	if (headers_len) {
		memcpy(p, headers, headers_len);
		p += headers_len;
	}
	bb->len = (size_t)(p - bb->buf);
	bb->count++;
	bb->last_offset_delta = offset_delta;
	if (timestamp > bb->max_timestamp)
		bb->max_timestamp = timestamp;
	return 0;
}

int batch_builder_add_raw(struct batch_builder *bb, const struct record_view *rv)
{
	if (bb->overflow || bb->len + rv->raw_len > bb->cap) {
		bb->overflow = 1;
		return -ENOBUFS;
	}
	memcpy(bb->buf + bb->len, rv->raw, rv->raw_len);
	bb->len += rv->raw_len;
	bb->count++;
	bb->last_offset_delta = rv->offset_delta;
	if (bb->base_timestamp + rv->timestamp_delta > bb->max_timestamp)
		bb->max_timestamp = bb->base_timestamp + rv->timestamp_delta;
	return 0;
}

ssize_t batch_builder_finish(struct batch_builder *bb, uint16_t attributes, int32_t last_offset_delta,
			     int64_t producer_id, int16_t producer_epoch, int32_t base_sequence)
{
	uint8_t *b = bb->buf;

	if (bb->overflow)
		return -ENOBUFS;
	batch_set_base_offset(b, 0);
	be32_store(b + OF_BatchLength, (uint32_t)(bb->len - BATCH_LOG_OVERHEAD));
	batch_set_leader_epoch(b, -1);
	b[OF_Magic] = BATCH_MAGIC_V2;
	be16_store(b + OF_Attributes, attributes);
	be32_store(b + OF_LastOffsetDelta,
		   (uint32_t)(last_offset_delta >= 0 ? last_offset_delta
			      : (bb->last_offset_delta < 0 ? 0 : bb->last_offset_delta)));
	be64_store(b + OF_BaseTimestamp, (uint64_t)bb->base_timestamp);
	be64_store(b + OF_MaxTimestamp, (uint64_t)bb->max_timestamp);
	be64_store(b + OF_ProducerId, (uint64_t)producer_id);
	be16_store(b + OF_ProducerEpoch, (uint16_t)producer_epoch);
	be32_store(b + OF_BaseSequence, (uint32_t)base_sequence);
	be32_store(b + OF_RecordsCount, (uint32_t)bb->count);
	be32_store(b + OF_Crc, batch_compute_crc(b, (uint32_t)bb->len));
	return (ssize_t)bb->len;
}
