/* control/record_walk.h — the records of Kafka record batches (v2) as a
 * Fetch or a log read returns them: compressed batches inflated,
 * transaction markers skipped, each record handed to a callback with its
 * offset and timestamp. sluicectl's consume and the web console's record
 * browser (control/console_records.c) read with it.
 *
 * Thread: one at a time (one inflate buffer, 64 MiB at most, allocated
 * at the first compressed batch and kept): sluicectl's main thread, the
 * broker's control thread. Errors: -EBADMSG, -ENOMEM, or a codec's.
 */
#ifndef SLUICE_RECORD_WALK_H
#define SLUICE_RECORD_WALK_H

#include <stddef.h>
#include <stdint.h>

/* One record handed to the callback (pointers borrowed for the call);
 * the callback returns non-zero to stop. */
struct fetched {
	const char *topic;
	int32_t partition;
	int64_t offset;
	int64_t timestamp;
	const uint8_t *key, *value;     /* NULL: null */
	int32_t key_len, value_len;
	const uint8_t *headers;
	size_t headers_len;
	int32_t headers_count;
};
typedef int (*fetch_cb)(void *arg, const struct fetched *r);

/* Hand every record of the batches in recs[0..len) at or after *offset,
 * and before end (end < 0: no end), to cb; *offset follows (the next
 * offset to read). A partial batch at the end is left. Returns 1 when cb
 * stopped or end was reached, 0 otherwise, -EBADMSG on a broken batch. */
int record_walk(const char *topic, int32_t p, const uint8_t *recs, size_t len, int64_t *offset, int64_t end,
		fetch_cb cb, void *arg);

#endif
