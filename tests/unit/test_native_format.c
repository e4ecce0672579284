/* tests/unit/test_native_format.c — the native protocol's datagrams: every
 * type written and read back field by field, every rejection reason
 * produced by a datagram built to trigger it, and a mutation run in which
 * no corrupted datagram is read outside its bytes or accepted with a bad
 * CRC. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/native/native_format.h"
#include "storage/batch_format.h"

static uint8_t buf[NATIVE_MAX_DATAGRAM];

Test(native_format, hello_round_trip)
{
	struct native_msg m;
	int n = native_write_hello(buf, sizeof(buf), 7, 1 << 20, 8972, "client-1");

	cr_assert_eq(n, NHELLO_FIXED + 8);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert_eq(m.type, NATIVE_HELLO);
	cr_assert_eq(m.request, 7);
	cr_assert_eq(m.session, 0);
	cr_assert_eq(m.credits, 1u << 20);
	cr_assert_eq(m.max_datagram, 8972);
	cr_assert(m.data_len == 8 && !memcmp(m.data, "client-1", 8));
	/* a maximum below one Ethernet frame's is refused */
	n = native_write_hello(buf, sizeof(buf), 7, 1, 512, "x");
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD);
}

Test(native_format, hello_ack_round_trip)
{
	struct native_msg m;
	int n = native_write_hello_ack(buf, sizeof(buf), 7, 0x01000002, 4 << 20, 1472, 2, 1234567);

	cr_assert_eq(n, NHACK_FIXED);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert_eq(m.type, NATIVE_HELLO_ACK);
	cr_assert_eq(m.session, 0x01000002);
	cr_assert_eq(m.credits, 4u << 20);
	cr_assert_eq(m.max_datagram, 1472);
	cr_assert_eq(m.shards, 2);
	cr_assert_eq(m.producer_id, 1234567);
}

Test(native_format, produce_round_trip_and_fragments)
{
	uint8_t frag[1000];
	struct native_msg m;
	int n;

	for (size_t i = 0; i < sizeof(frag); i++)
		frag[i] = (uint8_t)i;
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, -1, 42, 1, 100, 3000, 1000, 1, 3, frag,
				 sizeof(frag));
	cr_assert_eq(n, NPROD_FIXED + 6 + 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert_eq(m.type, NATIVE_PRODUCE);
	cr_assert(m.topic_len == 6 && !memcmp(m.topic, "orders", 6));
	cr_assert_eq(m.partition, 3);
	cr_assert_eq(m.acks, -1);
	cr_assert_eq(m.producer_id, 42);
	cr_assert_eq(m.producer_epoch, 1);
	cr_assert_eq(m.base_sequence, 100);
	cr_assert_eq(m.total_len, 3000);
	cr_assert_eq(m.frag_offset, 1000);
	cr_assert_eq(m.frag_index, 1);
	cr_assert_eq(m.frag_count, 3);
	cr_assert(m.data_len == 1000 && !memcmp(m.data, frag, 1000));
	/* fragment fields that do not add up */
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, 1, 42, 1, 100, 1500, 1000, 1, 3, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT, "past the batch's end");
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, 1, 42, 1, 100, 3000, 0, 3, 3, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT, "index past the count");
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, 1, 42, 1, 100, 3000, 0, 0, 1, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT, "one fragment must be the batch");
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, 1, 42, 1, 100, NATIVE_MAX_BATCH + 1, 0, 0, 2,
				 frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT, "a batch beyond the maximum");
	/* fields out of range */
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 3, 2, 42, 1, 100, 1000, 0, 0, 1, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD, "acks 2");
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", -1, 1, 42, 1, 100, 1000, 0, 0, 1, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD, "negative partition");
	n = native_write_produce(buf, sizeof(buf), 9, 11, "orders", 0, 1, -1, 1, 100, 1000, 0, 0, 1, frag, 1000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD, "no producer id");
	/* topic names */
	cr_assert_eq(native_write_produce(buf, sizeof(buf), 9, 11, "", 0, 1, 42, 1, 0, 1000, 0, 0, 1, frag, 1000),
		     -EINVAL);
	cr_assert_eq(native_write_produce(buf, 100, 9, 11, "t", 0, 1, 42, 1, 0, 1000, 0, 0, 1, frag, 1000), -ENOSPC);
}

Test(native_format, produce_ack_fetch_fetch_data_error_round_trip)
{
	struct native_msg m;
	uint8_t data[300];
	int n;

	memset(data, 0xab, sizeof(data));
	n = native_write_produce_ack(buf, sizeof(buf), 9, 11, "orders", 6, 3, 45, 42, 100, -1, 17, 3000);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_PRODUCE_ACK && m.error == 45 && m.partition == 3 && m.producer_id == 42 &&
		  m.base_sequence == 100 && m.offset == -1 && m.log_start == 17 && m.credits == 3000);
	cr_assert(m.topic_len == 6 && !memcmp(m.topic, "orders", 6));

	n = native_write_fetch(buf, sizeof(buf), 9, 12, "orders", 5, 123456789012345LL, 1 << 20, 1);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_FETCH && m.partition == 5 && m.offset == 123456789012345LL &&
		  m.max_bytes == 1u << 20 && m.isolation == 1 && m.request == 12);
	n = native_write_fetch(buf, sizeof(buf), 9, 12, "orders", 5, 0, 1, 2);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD, "isolation 2");

	n = native_write_fetch_data(buf, sizeof(buf), 9, 12, "orders", 6, 5, 0, 1000, 10, 990, 900, 600, 2, 3, data,
				    sizeof(data));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_FETCH_DATA && m.high_watermark == 1000 && m.log_start == 10 &&
		  m.last_stable == 990 && m.total_len == 900 && m.frag_offset == 600 && m.frag_index == 2 &&
		  m.frag_count == 3 && m.data_len == 300 && m.data[299] == 0xab);
	n = native_write_fetch_data(buf, sizeof(buf), 9, 12, "orders", 6, 5, 0, 1000, 10, 990, 800, 600, 2, 3, data,
				    sizeof(data));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT);
	/* an empty answer (nothing new): no fragments, no data */
	n = native_write_fetch_data(buf, sizeof(buf), 9, 12, "orders", 6, 5, 0, 1000, 10, 990, 0, 0, 0, 0, NULL, 0);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.data_len == 0 && m.total_len == 0);

	n = native_write_error(buf, sizeof(buf), 9, 13, -NATIVE_E_CRC, NATIVE_PRODUCE, "bad CRC: resend");
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_ERROR && m.error == -NATIVE_E_CRC && m.about == NATIVE_PRODUCE &&
		  m.data_len == 15 && !memcmp(m.data, "bad CRC: resend", 15));
}

Test(native_format, header_rejections)
{
	struct native_msg m;
	int n = native_write_fetch(buf, sizeof(buf), 9, 12, "orders", 5, 0, 100, 0);
	uint8_t save;

	cr_assert_eq(native_parse(buf, 10, 1, &m), -NATIVE_E_SHORT);
	cr_assert_eq(native_parse(buf, (size_t)n - 1, 1, &m), -NATIVE_E_LENGTH, "truncated");
	save = buf[0];
	buf[0] ^= 0xff;
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_MAGIC);
	buf[0] = save;
	buf[NH_VERSION] = 2;
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_VERSION);
	buf[NH_VERSION] = NATIVE_VERSION;
	buf[n - 1] ^= 1;
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_CRC);
	cr_assert_eq(native_parse(buf, (size_t)n, 0, &m), 0, "CRC not checked when told");
	buf[n - 1] ^= 1;
	buf[NH_TYPE] = 99;
	be32_store(buf + NH_CRC, native_crc(buf, (size_t)n));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_TYPE);
	/* a topic length that runs past the datagram */
	n = native_write_fetch(buf, sizeof(buf), 9, 12, "orders", 5, 0, 100, 0);
	buf[NFETCH_TOPIC_LEN] = 200;
	be32_store(buf + NH_CRC, native_crc(buf, (size_t)n));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_TOPIC);
	cr_assert_str_eq(native_reject_name(-NATIVE_E_TOPIC), "bad topic name");
	cr_assert_str_eq(native_type_name(NATIVE_FETCH_DATA), "FETCH_DATA");
}

/* Every single-byte corruption of every type is either refused or (the
 * CRC not checked) read within bounds; with the CRC checked nothing
 * corrupted is accepted. Run under the sanitizers by make test's asan
 * build like the other unit tests. */
Test(native_format, mutations_never_accepted_with_crc)
{
	uint8_t good[NATIVE_MAX_DATAGRAM], frag[700];
	int lens[9], k = 0;
	uint8_t *dgs[9];
	struct native_msg m;
	struct native_replica_fetch rf = { 2, 0, 5, 4, 100, 0, 1 << 20, 500, 1472 };
	struct native_replica_data rd = { 0, 0, 5, -1, -1, 90, 0, 100, 700, 0, 0, 1 };

	memset(frag, 0x5a, sizeof(frag));
	for (int i = 0; i < 9; i++)
		dgs[i] = malloc(NATIVE_MAX_DATAGRAM);
	lens[k] = native_write_hello(dgs[k], NATIVE_MAX_DATAGRAM, 1, 1000, 1472, "c");
	k++;
	lens[k] = native_write_hello_ack(dgs[k], NATIVE_MAX_DATAGRAM, 1, 2, 3, 1472, 2, 9);
	k++;
	lens[k] = native_write_produce(dgs[k], NATIVE_MAX_DATAGRAM, 2, 3, "t", 0, 1, 9, 0, 0, 700, 0, 0, 1, frag, 700);
	k++;
	lens[k] = native_write_produce_ack(dgs[k], NATIVE_MAX_DATAGRAM, 2, 3, "t", 1, 0, 0, 9, 0, 5, 0, 700);
	k++;
	lens[k] = native_write_fetch(dgs[k], NATIVE_MAX_DATAGRAM, 2, 4, "t", 0, 5, 1000, 0);
	k++;
	lens[k] = native_write_fetch_data(dgs[k], NATIVE_MAX_DATAGRAM, 2, 4, "t", 1, 0, 0, 6, 0, 6, 700, 0, 0, 1,
					  frag, 700);
	k++;
	lens[k] = native_write_error(dgs[k], NATIVE_MAX_DATAGRAM, 2, 4, 3, NATIVE_FETCH, "unknown topic");
	k++;
	lens[k] = native_write_replica_fetch(dgs[k], NATIVE_MAX_DATAGRAM, 7, "t", 1, &rf);
	k++;
	lens[k] = native_write_replica_data(dgs[k], NATIVE_MAX_DATAGRAM, 7, "t", 1, &rd, frag, 700);
	k++;
	srand(1);
	for (int t = 0; t < k; t++) {
		cr_assert_gt(lens[t], 0);
		cr_assert_eq(native_parse(dgs[t], (size_t)lens[t], 1, &m), 0, "type %d", t);
		for (int i = 0; i < 3000; i++) {
			int at = rand() % lens[t];
			size_t len = (size_t)lens[t];
			uint8_t *copy;

			memcpy(good, dgs[t], len);
			good[at] ^= (uint8_t)(1 + rand() % 255);
			if (rand() % 4 == 0)
				len = (size_t)(rand() % lens[t]);   /* truncated too */
			/* an exact-size heap copy: the sanitizers catch any read past it */
			copy = malloc(len ? len : 1);
			memcpy(copy, good, len);
			cr_assert_neq(native_parse(copy, len, 1, &m), 0, "type %d byte %d: corrupted datagram accepted",
				      t, at);
			(void)native_parse(copy, len, 0, &m);
			free(copy);
		}
	}
	for (int i = 0; i < 9; i++)
		free(dgs[i]);
}

/* The replication messages: every field there and back, their own
 * version, and what a follower or a leader must never send. */
Test(native_format, replica_fetch_and_data)
{
	struct native_msg m;
	uint8_t data[300];
	struct native_replica_fetch f = { .replica_id = 3, .partition = 7, .leader_epoch = 12, .last_epoch = 11,
					  .offset = 123456789012LL, .log_start = 40, .max_bytes = 1u << 20,
					  .max_wait_ms = 500, .max_datagram = 8972 };
	struct native_replica_data d = { .error = 0, .partition = 7, .leader_epoch = 12, .div_epoch = 9,
					 .div_end = 5000, .high_watermark = 6000, .log_start = 40,
					 .offset = 123456789012LL, .total_len = 900, .frag_offset = 600,
					 .frag_index = 2, .frag_count = 3 };
	int n;

	memset(data, 0xcd, sizeof(data));
	n = native_write_replica_fetch(buf, sizeof(buf), 0x01000009, "orders", 6, &f);
	cr_assert_eq(n, NRFETCH_FIXED + 6);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_REPLICA_FETCH && m.session == 0 && m.request == 0x01000009 && m.replica_id == 3 &&
		  m.partition == 7 && m.leader_epoch == 12 && m.last_epoch == 11 && m.offset == 123456789012LL &&
		  m.log_start == 40 && m.max_bytes == 1u << 20 && m.max_wait_ms == 500 && m.max_datagram == 8972);
	cr_assert(m.topic_len == 6 && !memcmp(m.topic, "orders", 6));
	cr_assert_str_eq(native_type_name(NATIVE_REPLICA_FETCH), "REPLICA_FETCH");

	/* another replication version: refused before anything else is read */
	buf[NRFETCH_RVERSION] = 2;
	be32_store(buf + NH_CRC, native_crc(buf, (size_t)n));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_VERSION);
	f.replica_id = -1;   /* a consumer's id is no follower's */
	n = native_write_replica_fetch(buf, sizeof(buf), 1, "orders", 6, &f);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD);
	f.replica_id = 3;
	f.max_datagram = 1000;   /* below what every Ethernet carries */
	n = native_write_replica_fetch(buf, sizeof(buf), 1, "orders", 6, &f);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD);
	f.max_datagram = 1472;
	n = native_write_replica_fetch(buf, sizeof(buf), 1, "orders", 6, &f);
	be32_store(buf + NH_SESSION, 5);   /* replication has no session */
	be32_store(buf + NH_CRC, native_crc(buf, (size_t)n));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FIELD);

	n = native_write_replica_data(buf, sizeof(buf), 77, "orders", 6, &d, data, sizeof(data));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.type == NATIVE_REPLICA_DATA && m.request == 77 && m.error == 0 && m.partition == 7 &&
		  m.leader_epoch == 12 && m.last_epoch == 9 && m.div_end == 5000 && m.high_watermark == 6000 &&
		  m.log_start == 40 && m.offset == 123456789012LL && m.total_len == 900 && m.frag_offset == 600 &&
		  m.frag_index == 2 && m.frag_count == 3 && m.data_len == 300 && m.data[299] == 0xcd);
	d.total_len = 800;   /* the fragment runs past the answer */
	n = native_write_replica_data(buf, sizeof(buf), 77, "orders", 6, &d, data, sizeof(data));
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), -NATIVE_E_FRAGMENT);
	/* an answer with nothing new, and one that only says where to cut */
	d = (struct native_replica_data){ .partition = 7, .leader_epoch = 12, .div_epoch = -1, .div_end = -1,
					  .high_watermark = 6000, .offset = 6000 };
	n = native_write_replica_data(buf, sizeof(buf), 78, "orders", 6, &d, NULL, 0);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert(m.data_len == 0 && m.total_len == 0 && m.last_epoch == -1);
	d.error = 74;   /* FENCED_LEADER_EPOCH */
	n = native_write_replica_data(buf, sizeof(buf), 79, "orders", 6, &d, NULL, 0);
	cr_assert_eq(native_parse(buf, (size_t)n, 1, &m), 0);
	cr_assert_eq(m.error, 74);
	cr_assert_eq(native_write_replica_data(buf, 40, 79, "orders", 6, &d, NULL, 0), -ENOSPC);
}
