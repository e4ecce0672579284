/* tests/fuzz/fuzz_native_datagram.c — libFuzzer target: any datagram
 * through native_parse() (CRC checked and not); whatever it accepts is
 * written again with the native_write_* function of its type, which must
 * give a datagram of the same length that parses (CRC checked) to the same
 * fields. native_parse never reads outside the datagram (the sanitizers). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/native/native_format.h"

static uint8_t out[NATIVE_MAX_DATAGRAM + 64];

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

static int rewrite(const struct native_msg *m)
{
	char topic[NATIVE_MAX_TOPIC + 1] = "";
	char text[NATIVE_MAX_DATAGRAM + 1];

	if (m->topic_len)
		memcpy(topic, m->topic, m->topic_len);
	topic[m->topic_len] = 0;
	switch (m->type) {
	case NATIVE_HELLO:
		if (memchr(m->data, 0, m->data_len))
			return -1;   /* a name with a NUL cannot be written from a C string */
		memcpy(text, m->data, m->data_len);
		text[m->data_len] = 0;
		return native_write_hello(out, sizeof(out), m->request, m->credits, m->max_datagram, text);
	case NATIVE_HELLO_ACK:
		return native_write_hello_ack(out, sizeof(out), m->request, m->session, m->credits, m->max_datagram,
					      m->shards, m->producer_id);
	case NATIVE_PRODUCE:
		if (memchr(m->topic, 0, m->topic_len))
			return -1;
		return native_write_produce(out, sizeof(out), m->session, m->request, topic, m->partition, m->acks,
					    m->producer_id, m->producer_epoch, m->base_sequence, m->total_len,
					    m->frag_offset, m->frag_index, m->frag_count, m->data, m->data_len);
	case NATIVE_PRODUCE_ACK:
		return native_write_produce_ack(out, sizeof(out), m->session, m->request, m->topic, m->topic_len,
						m->partition, m->error, m->producer_id, m->base_sequence, m->offset,
						m->log_start, m->credits);
	case NATIVE_FETCH:
		if (memchr(m->topic, 0, m->topic_len))
			return -1;
		return native_write_fetch(out, sizeof(out), m->session, m->request, topic, m->partition, m->offset,
					  m->max_bytes, m->isolation);
	case NATIVE_FETCH_DATA:
		return native_write_fetch_data(out, sizeof(out), m->session, m->request, m->topic, m->topic_len,
					       m->partition, m->error, m->high_watermark, m->log_start, m->last_stable,
					       m->total_len, m->frag_offset, m->frag_index, m->frag_count, m->data,
					       m->data_len);
	case NATIVE_ERROR:
		if (memchr(m->data, 0, m->data_len) || m->data_len > NATIVE_MIN_DATAGRAM - NERR_FIXED)
			return -1;
		memcpy(text, m->data, m->data_len);
		text[m->data_len] = 0;
		return native_write_error(out, sizeof(out), m->session, m->request, m->error, m->about, text);
	case NATIVE_REPLICA_FETCH: {
		struct native_replica_fetch f = { m->replica_id, m->partition, m->leader_epoch, m->last_epoch,
						  m->offset, m->log_start, m->max_bytes, m->max_wait_ms,
						  m->max_datagram };

		return native_write_replica_fetch(out, sizeof(out), m->request, m->topic, m->topic_len, &f);
	}
	case NATIVE_REPLICA_DATA: {
		struct native_replica_data d = { m->error, m->partition, m->leader_epoch, m->last_epoch,
						 m->div_end, m->high_watermark, m->log_start, m->offset,
						 m->total_len, m->frag_offset, m->frag_index, m->frag_count };

		return native_write_replica_data(out, sizeof(out), m->request, m->topic, m->topic_len, &d, m->data,
						 m->data_len);
	}
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct native_msg m, again;
	uint8_t *copy = malloc(size ? size : 1);   /* exact size: reads past it are caught */
	int n;

	memcpy(copy, data, size);
	(void)native_parse(copy, size, 1, &m);
	if (native_parse(copy, size, 0, &m) == 0) {
		n = rewrite(&m);
		if (n >= 0) {
			check((size_t)n == size);
			check(native_parse(out, (size_t)n, 1, &again) == 0);
			m.flags = again.flags = 0;
			m.topic = again.topic = NULL;
			m.data = again.data = NULL;
			check(!memcmp(&m, &again, sizeof(m)));
		}
	}
	free(copy);
	return 0;
}
