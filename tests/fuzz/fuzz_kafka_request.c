/* tests/fuzz/fuzz_kafka_request.c — libFuzzer target: any request message
 * (what the size prefix counts) through kafka_request_decode(); whatever it
 * accepts is re-encoded (measured, flat and iovec) and must decode again to
 * the same bytes. Traps if decoding takes more arena than
 * kafka_arena_bound(size). The codec itself never calls malloc.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"

#define MAX_LEN (1u << 16)

static uint8_t arena_mem[(16u + 8u) * MAX_LEN + 4096u];
static uint8_t out1[4 * MAX_LEN], out2[4 * MAX_LEN], gathered[4 * MAX_LEN];

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kafka_request req, again;
	struct kafka_arena a;
	struct kafka_writer w;
	struct iovec iov[256];
	size_t n1, off = 0;
	int rc, cnt;

	if (size > MAX_LEN)
		return -1;
	check(kafka_arena_bound(size) <= sizeof arena_mem);
	kafka_arena_init(&a, arena_mem, kafka_arena_bound(size));
	rc = kafka_request_decode(data, size, &a, &req);
	check(a.used <= kafka_arena_bound(size));
	if (rc)
		return 0;

	/* Size first, then flat: the measure must be exact. */
	kafka_writer_init_measure(&w, false);
	kafka_request_encode(&w, &req);
	if (w.err)
		return 0; /* accepted but not representable (e.g. an over-long string) */
	n1 = w.total;
	check(n1 <= sizeof out1);
	kafka_writer_init(&w, out1, n1);
	check(kafka_request_encode(&w, &req) == 0 && w.len == n1);

	/* iovec mode gathers to the same bytes. */
	kafka_writer_init_iov(&w, out2, sizeof out2, iov, 256);
	check(kafka_request_encode(&w, &req) == 0);
	cnt = kafka_writer_finish(&w);
	check(cnt >= 0 && w.total == n1);
	for (int i = 0; i < cnt; i++) {
		memcpy(gathered + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	check(off == n1 && !memcmp(gathered, out1, n1));

	/* Decoding what we wrote and writing it again is a fixed point. */
	kafka_arena_reset(&a);
	check(kafka_request_decode(out1 + 4, n1 - 4, &a, &again) == 0);
	kafka_writer_init(&w, out2, sizeof out2);
	check(kafka_request_encode(&w, &again) == 0);
	check(w.len == n1 && !memcmp(out1, out2, n1));
	return 0;
}
