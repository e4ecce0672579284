/* tests/kafka/kafka_sample.h — random Kafka messages for tests (not part of
 * the broker). The generated tests/kafka/kafka_sample.c builds on these
 * primitives; include this header, then that file.
 *
 * Thread: the test's. Samples live in the sample's arena and borrow it.
 * Errors: allocation failure aborts the test (samples are sized by tests).
 */
#ifndef SLUICE_KAFKA_SAMPLE_H
#define SLUICE_KAFKA_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/kafka/kafka_msgs.h"

struct kafka_sample {
	uint64_t rng;               /* xorshift64* state, never 0 */
	struct kafka_arena arena;

};

struct kafka_sample_desc {
	const char *name;
	void *(*sample)(struct kafka_sample *s, int16_t version);
	bool (*equal)(const void *a, const void *b);
};

static const char *kafka_sample_last_difference;

static inline uint64_t kafka_sample_next(struct kafka_sample *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1Dull;
}

static inline void *kafka_sample_alloc(struct kafka_sample *s, size_t n)
{
	void *p = kafka_arena_alloc(&s->arena, n ? n : 1);

	if (!p) {
		fprintf(stderr, "kafka_sample: arena full\n");
		abort();
	}
	return p;
}

static inline bool kafka_sample_coin(struct kafka_sample *s)
{
	return kafka_sample_next(s) & 1;
}

/* Mostly small values, sometimes extremes, so both are covered. */
static inline uint64_t kafka_sample_bits(struct kafka_sample *s)
{
	uint64_t r = kafka_sample_next(s);

	switch (r % 4) {
	case 0: return (r >> 8) % 16;
	case 1: return (uint64_t)-(int64_t)((r >> 8) % 4);
	default: return kafka_sample_next(s);
	}
}

static inline bool kafka_sample_bool(struct kafka_sample *s) { return kafka_sample_coin(s); }
static inline int8_t kafka_sample_int8(struct kafka_sample *s) { return (int8_t)kafka_sample_bits(s); }
static inline int16_t kafka_sample_int16(struct kafka_sample *s) { return (int16_t)kafka_sample_bits(s); }
static inline uint16_t kafka_sample_uint16(struct kafka_sample *s) { return (uint16_t)kafka_sample_bits(s); }
static inline int32_t kafka_sample_int32(struct kafka_sample *s) { return (int32_t)kafka_sample_bits(s); }
static inline uint32_t kafka_sample_uint32(struct kafka_sample *s) { return (uint32_t)kafka_sample_bits(s); }
static inline int64_t kafka_sample_int64(struct kafka_sample *s) { return (int64_t)kafka_sample_bits(s); }

static inline double kafka_sample_float64(struct kafka_sample *s)
{
	return (double)(int32_t)kafka_sample_next(s) / 8.0;
}

static inline struct kafka_uuid kafka_sample_uuid(struct kafka_sample *s)
{
	struct kafka_uuid u;
	uint64_t a = kafka_sample_next(s), b = kafka_sample_next(s);

	if (a % 4 == 0)
		a = b = 0;
	memcpy(u.b, &a, 8);
	memcpy(u.b + 8, &b, 8);
	return u;
}

static inline struct kafka_bytes kafka_sample_bytes(struct kafka_sample *s, bool nullable)
{
	uint64_t r = kafka_sample_next(s);
	struct kafka_bytes b;
	uint8_t *p;

	if (nullable && r % 5 == 0)
		return (struct kafka_bytes){ NULL, -1 };
	b.len = (int32_t)((r >> 8) % 24);
	p = kafka_sample_alloc(s, (size_t)b.len);
	for (int32_t i = 0; i < b.len; i++)
		p[i] = (uint8_t)kafka_sample_next(s);
	b.ptr = p;
	return b;
}

static inline struct kafka_str kafka_sample_string(struct kafka_sample *s, bool nullable)
{
	uint64_t r = kafka_sample_next(s);
	struct kafka_str str;
	char *p;

	if (nullable && r % 5 == 0)
		return (struct kafka_str){ NULL, -1 };
	str.len = (int32_t)((r >> 8) % 12);
	p = kafka_sample_alloc(s, (size_t)str.len);
	for (int32_t i = 0; i < str.len; i++)
		p[i] = (char)('a' + kafka_sample_next(s) % 26);
	str.ptr = p;
	return str;
}

static inline int32_t kafka_sample_count(struct kafka_sample *s, bool nullable)
{
	uint64_t r = kafka_sample_next(s);

	if (nullable && r % 5 == 0)
		return -1;
	return (int32_t)((r >> 8) % 4);
}

static inline bool kafka_sample_differs(const char *field)
{
	kafka_sample_last_difference = field;
	return false;
}

static inline bool kafka_sample_str_equal(struct kafka_str a, struct kafka_str b)
{
	return a.len == b.len && (a.len <= 0 || !memcmp(a.ptr, b.ptr, (size_t)a.len));
}

static inline bool kafka_sample_bytes_equal(struct kafka_bytes a, struct kafka_bytes b)
{
	return a.len == b.len && (a.len <= 0 || !memcmp(a.ptr, b.ptr, (size_t)a.len));
}

#endif
