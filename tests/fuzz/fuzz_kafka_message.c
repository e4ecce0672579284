/* tests/fuzz/fuzz_kafka_message.c — libFuzzer target for every generated
 * decoder, responses and ConsumerProtocol data included: byte 0 picks the
 * message kind from kafka_msg_descs[], byte 1 the version within its range,
 * the rest is the body. Accepted bodies must re-encode to a fixed point;
 * decoding may take at most kafka_arena_bound(size) of arena.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"

#define MAX_LEN (1u << 16)

static uint8_t arena_mem[(16u + 8u) * MAX_LEN + 4096u];
static uint8_t out1[4 * MAX_LEN], out2[4 * MAX_LEN];

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct kafka_msg_desc *d;
	struct kafka_arena a;
	struct kafka_cursor c;
	struct kafka_writer w;
	int16_t v;
	size_t n1;
	void *m;

	if (size < 2 || size > MAX_LEN)
		return -1;
	d = &kafka_msg_descs[data[0] % kafka_msg_desc_count];
	v = (int16_t)(d->min_version + data[1] % (d->max_version - d->min_version + 1));
	data += 2;
	size -= 2;

	kafka_arena_init(&a, arena_mem, kafka_arena_bound(size) + d->size + 8);
	m = kafka_arena_alloc(&a, d->size);
	kafka_cursor_init(&c, data, size);
	if (d->decode(&c, &a, v, m) || kafka_cursor_left(&c))
		return 0;
	check(a.used <= kafka_arena_bound(size) + d->size + 8);

	kafka_writer_init_measure(&w, false);
	d->encode(&w, v, m);
	if (w.err)
		return 0;
	n1 = w.total;
	check(n1 <= sizeof out1);
	kafka_writer_init(&w, out1, n1);
	d->encode(&w, v, m);
	check(!w.err && w.len == n1);

	kafka_arena_reset(&a);
	m = kafka_arena_alloc(&a, d->size);
	kafka_cursor_init(&c, out1, n1);
	check(d->decode(&c, &a, v, m) == 0 && kafka_cursor_left(&c) == 0);
	kafka_writer_init(&w, out2, sizeof out2);
	d->encode(&w, v, m);
	check(!w.err && w.len == n1 && !memcmp(out1, out2, n1));
	return 0;
}
