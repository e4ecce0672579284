/* control/metalog_codec.h — how a metadata record's fields are written
 * and read (control/metalog.h has the format): a bounded writer and a
 * bounds-checked reader that keep their first error, shared by the image's
 * files (metalog.c, meta_brokers.c) and nothing else.
 * @thread any (pure functions on the caller's buffers). */
#ifndef SLUICE_METALOG_CODEC_H
#define SLUICE_METALOG_CODEC_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/metalog.h"

/* ---- encoding ---------------------------------------------------------- */

struct enc {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static inline void enc_bytes(struct enc *e, const void *b, size_t n)
{
	if (e->err || e->len + n > e->cap) {
		e->err = -EMSGSIZE;
		return;
	}
	memcpy(e->p + e->len, b, n);
	e->len += n;
}

static inline void enc_u8(struct enc *e, uint8_t v) { enc_bytes(e, &v, 1); }

static inline void enc_i16(struct enc *e, int16_t v)
{
	uint8_t b[2] = { (uint8_t)((uint16_t)v >> 8), (uint8_t)v };

	enc_bytes(e, b, 2);
}

static inline void enc_i32(struct enc *e, int32_t v)
{
	uint8_t b[4];

	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)((uint32_t)v >> (24 - 8 * i));
	enc_bytes(e, b, 4);
}

static inline void enc_i64(struct enc *e, int64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
	enc_bytes(e, b, 8);
}

static inline void enc_str(struct enc *e, const char *s)
{
	size_t n;

	if (!s) {
		enc_i16(e, -1);
		return;
	}
	n = strlen(s);
	if (n > INT16_MAX) {
		e->err = -EMSGSIZE;
		return;
	}
	enc_i16(e, (int16_t)n);
	enc_bytes(e, s, n);
}

/* Bounds-checked reader that keeps the first error (STYLE 8). */
struct dec {
	const uint8_t *p, *end;
	int err;
};

static inline int dec_need(struct dec *d, size_t n)
{
	if (d->err || (size_t)(d->end - d->p) < n) {
		d->err = -EPROTO;
		return 0;
	}
	return 1;
}

static inline uint8_t dec_u8(struct dec *d)
{
	return dec_need(d, 1) ? *d->p++ : 0;
}

static inline int64_t dec_be(struct dec *d, int n)
{
	uint64_t v = 0;

	if (!dec_need(d, (size_t)n))
		return 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | *d->p++;
	if (n < 8 && (v & (1ull << (8 * n - 1))))
		v |= ~0ull << (8 * n);   /* sign-extend */
	return (int64_t)v;
}

static inline void dec_id(struct dec *d, uint8_t id[16])
{
	if (dec_need(d, 16)) {
		memcpy(id, d->p, 16);
		d->p += 16;
	} else {
		memset(id, 0, 16);
	}
}

/* malloc'd string; *isnull set for a null one (returns NULL). */
static inline char *dec_str(struct dec *d, int *isnull)
{
	int64_t n = dec_be(d, 2);
	char *s;

	*isnull = 0;
	if (d->err)
		return NULL;
	if (n < 0) {
		if (n != -1)
			d->err = -EPROTO;
		*isnull = n == -1;
		return NULL;
	}
	if (!dec_need(d, (size_t)n))
		return NULL;
	if (memchr(d->p, 0, (size_t)n)) {
		d->err = -EPROTO;
		return NULL;
	}
	if (!(s = strndup((const char *)d->p, (size_t)n))) {
		d->err = -ENOMEM;
		return NULL;
	}
	d->p += n;
	return s;
}

static inline int rec_finish(const struct enc *e, struct metalog_rec *out)
{
	out->buf = NULL;
	out->len = 0;
	if (e->err)
		return e->err;
	if (!(out->buf = malloc(e->len)))
		return -ENOMEM;
	memcpy(out->buf, e->p, e->len);
	out->len = e->len;
	return 0;
}

/* Each builder validates against the image, then encodes its record: the
 * type, the version byte, the fields. */
static inline void enc_type(struct enc *e, int16_t type)
{
	enc_i16(e, type);
	enc_u8(e, META_FORMAT_VERSION);
}

#endif
