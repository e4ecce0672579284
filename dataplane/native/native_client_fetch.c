/* dataplane/native/native_client_fetch.c — libsluice_native's fetch
 * answer (state in native_client_state.h): the FETCH_DATA fragments of the
 * answer to the fetch in progress put together (the newest answer wins),
 * then its records: each RecordBatch v2 checked (CRC-32C), decompressed
 * into the client's arena when compressed, parsed (native_records_parse)
 * into the client's record array. sluice_fetch (native_client.c) asks and
 * waits; the engine's receive hands every FETCH_DATA here.
 *
 * Thread: the client's, one at a time. Errors: -errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "dataplane/native/native_client.h"
#include "dataplane/native/native_client_state.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

void native_client_on_fetch_data(struct sluice_client *c, const struct native_msg *m)
{
	struct nfetch *f = &c->fetch;
	uint32_t room = native_fetch_data_room(c->max_dg, m->topic_len);

	if (!f->active || f->complete || m->partition != f->partition || m->topic_len != f->topic_len ||
	    memcmp(m->topic, f->topic, f->topic_len) || req_before(m->request, f->first_request)) {
		c->st.rx_stale++;
		return;
	}
	if (f->have && (m->total_len != f->total || m->frag_count != f->count)) {
		/* another answer (the log grew, or an error): the newest wins */
		if (req_before(m->request, f->ans_request)) {
			c->st.rx_stale++;
			return;
		}
		f->have = 0;
	}
	if (!f->have) {
		if (m->total_len > f->cap) {
			uint8_t *nb = realloc(f->buf, m->total_len); /* style: allow fetch buffer, grows rarely */

			if (!nb)
				return;
			f->buf = nb;
			f->cap = m->total_len;
		}
		f->have = 1;
		f->total = m->total_len;
		f->count = m->frag_count;
		f->got = 0;
		memset(f->bits, 0, sizeof(f->bits));
		f->ans_request = m->request;
	}
	if (!req_before(m->request, f->ans_request)) {
		f->ans_request = m->request;
		f->err = m->error;
		f->hw = m->high_watermark;
		f->log_start = m->log_start;
		f->lso = m->last_stable;
	}
	if (m->frag_count == 0) {
		/* an empty answer (end of the log) or an error */
		f->complete = 1;
		return;
	}
	if ((uint64_t)m->frag_index * room != m->frag_offset ||
	    (m->frag_index + 1 < m->frag_count ? m->data_len != room
					       : (uint64_t)m->frag_offset + m->data_len != m->total_len)) {
		c->st.rx_unreadable++;
		return;
	}
	if (f->bits[m->frag_index / 64] & (1ull << (m->frag_index % 64)))
		return;
	memcpy(f->buf + m->frag_offset, m->data, m->data_len);
	f->bits[m->frag_index / 64] |= 1ull << (m->frag_index % 64);
	if (++f->got == f->count)
		f->complete = 1;
}

int native_records_parse(const uint8_t *records, size_t len, int32_t count, int64_t base_offset,
			 int64_t base_timestamp, int64_t max_timestamp, int log_append_time, struct sluice_record *out)
{
	const uint8_t *p = records, *end = records + len;

	for (int32_t i = 0; i < count; i++) {
		int64_t rlen, tsd, od, kl, vl, hc, x;
		const uint8_t *rend, *q;
		size_t k;
		struct sluice_record *r = &out[i];

		if (!(k = native_varint_get(p, end, &rlen)) || rlen < 0 || rlen > end - p - (int64_t)k)
			return -EPROTO;
		q = p + k;
		rend = q + rlen;
		if (q >= rend)
			return -EPROTO;
		q++;   /* attributes */
		if (!(k = native_varint_get(q, rend, &tsd)))
			return -EPROTO;
		q += k;
		if (!(k = native_varint_get(q, rend, &od)))
			return -EPROTO;
		q += k;
		if (!(k = native_varint_get(q, rend, &kl)) || kl < -1 || kl > rend - q - (int64_t)k)
			return -EPROTO;
		q += k;
		r->key = kl >= 0 ? q : NULL;
		r->key_len = (int32_t)kl;
		q += kl > 0 ? kl : 0;
		if (!(k = native_varint_get(q, rend, &vl)) || vl < -1 || vl > rend - q - (int64_t)k)
			return -EPROTO;
		q += k;
		r->value = vl >= 0 ? q : NULL;
		r->value_len = (int32_t)vl;
		q += vl > 0 ? vl : 0;
		if (!(k = native_varint_get(q, rend, &hc)) || hc < 0)
			return -EPROTO;
		q += k;
		r->headers = q;
		for (int64_t h = 0; h < hc; h++) {
			for (int part = 0; part < 2; part++) {
				if (!(k = native_varint_get(q, rend, &x)) || x < -1 || x > rend - q - (int64_t)k ||
				    (part == 0 && x < 0))
					return -EPROTO;
				q += k + (x > 0 ? (size_t)x : 0);
			}
		}
		if (q != rend)
			return -EPROTO;
		r->headers_len = (uint32_t)(rend - (const uint8_t *)r->headers);
		r->header_count = (int32_t)hc;
		r->offset = base_offset + od;
		r->timestamp = log_append_time ? max_timestamp : base_timestamp + tsd;
		p = rend;
	}
	return count;
}

static void rebase(const void **ptr, const uint8_t *old, size_t len, uint8_t *now)
{
	if (*ptr && (const uint8_t *)*ptr >= old && (const uint8_t *)*ptr <= old + len)
		*ptr = now + ((const uint8_t *)*ptr - old);
}

/* Decompress a batch's records at the end of the arena (grown as needed;
 * records 0..n already parsed into it follow it). Returns the bytes, or
 * -EPROTO for data the codec refuses, -EPROTONOSUPPORT for an unknown
 * codec, -ENOMEM. */
static ssize_t fetch_decompress(struct sluice_client *c, int codec, const uint8_t *in, size_t len, size_t n)
{
	ssize_t z;

	if (codec >= COMPRESS__COUNT)
		return -EPROTONOSUPPORT;
	if (!c->zctx && compress_ctx_create(&c->zctx) < 0)
		return -ENOMEM;
	for (;;) {
		size_t cap;
		uint8_t *old = c->arena, *nw;

		z = c->arena ? compress_decode(c->zctx, codec, in, len, c->arena + c->arena_len, c->arena_cap - c->arena_len)
			     : -ENOBUFS;
		if (z != -ENOBUFS)
			return z < 0 ? -EPROTO : z;
		cap = c->arena_cap ? c->arena_cap * 2 : 1 << 20;
		while (cap < c->arena_len + 4 * len)
			cap *= 2;
		if (cap > (size_t)1 << 31)
			return -EPROTO;   /* a decompression bomb */
		nw = realloc(c->arena, cap); /* style: allow grows rarely, not per record */
		if (!nw)
			return -ENOMEM;
		c->arena = nw;
		c->arena_cap = cap;
		for (size_t i = 0; old && old != nw && i < n; i++) {
			rebase(&c->recs[i].key, old, c->arena_len, nw);
			rebase(&c->recs[i].value, old, c->arena_len, nw);
			rebase(&c->recs[i].headers, old, c->arena_len, nw);
		}
	}
}

/* The records of the whole answer in f->buf, from f->offset on. */
int native_client_fetch_records(struct sluice_client *c, struct sluice_fetch_result *res)
{
	struct nfetch *f = &c->fetch;
	const uint8_t *p = f->buf, *end = f->buf + f->total;
	size_t n = 0;

	res->next_offset = f->offset;
	c->arena_len = 0;
	while (end - p >= BATCH_HEADER_SIZE) {
		uint32_t size = batch_size(p);
		int32_t count = batch_records_count(p);
		uint16_t attr = batch_attributes(p);
		int64_t base = batch_base_offset(p);
		const uint8_t *records;
		size_t rlen;
		int rc;

		if (batch_length(p) < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD || size > (size_t)(end - p) ||
		    p[OF_Magic] != BATCH_MAGIC_V2 || count < 0)
			return -EPROTO;
		if (be32_load(p + OF_Crc) != crc32c(p + OF_Attributes, size - OF_Attributes))
			return -EPROTO;
		if (attr & BATCH_ATTR_CONTROL) {
			res->next_offset = batch_last_offset(p) + 1;
			p += size;
			continue;
		}
		records = p + BATCH_HEADER_SIZE;
		rlen = size - BATCH_HEADER_SIZE;
		if (attr & BATCH_ATTR_CODEC_MASK) {
			ssize_t z = fetch_decompress(c, attr & BATCH_ATTR_CODEC_MASK, records, rlen, n);

			if (z < 0) {
				if (n)
					break;   /* the records so far; this batch next time */
				res->next_offset = base;
				return (int)z;
			}
			records = c->arena + c->arena_len;
			rlen = (size_t)z;
			c->arena_len += rlen;
		}
		if (n + (size_t)count > c->recs_cap) {
			size_t cap = c->recs_cap ? c->recs_cap : 1024;
			struct sluice_record *nr;

			while (cap < n + (size_t)count)
				cap *= 2;
			nr = realloc(c->recs, cap * sizeof(*nr)); /* style: allow grows rarely, not per record */
			if (!nr)
				return -ENOMEM;
			c->recs = nr;
			c->recs_cap = cap;
		}
		rc = native_records_parse(records, rlen, count, base,
					  batch_base_timestamp(p), batch_max_timestamp(p),
					  !!(attr & BATCH_ATTR_LOG_APPEND_TIME), c->recs + n);
		if (rc < 0)
			return rc;
		/* records before the offset asked for (the batch starts earlier) */
		{
			size_t keep = n;

			for (size_t i = n; i < n + (size_t)count; i++)
				if (c->recs[i].offset >= f->offset)
					c->recs[keep++] = c->recs[i];
			n = keep;
		}
		res->next_offset = batch_last_offset(p) + 1;
		p += size;
	}
	res->records = c->recs;
	res->count = n;
	return (int)n;
}
