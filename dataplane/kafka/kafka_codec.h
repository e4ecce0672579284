/* dataplane/kafka/kafka_codec.h — Kafka frames: request and response
 * headers around the generated message codecs, dispatched by the ApiKey
 * table (kafka_apis[] in kafka_msgs.c), and the ApiVersions response built
 * from that same table.
 *
 * Thread: any shard (@thread shard); pure functions over caller memory.
 * Owns: nothing. A decoded request borrows its frame (strings, bytes and
 * records point into it) and its arena (the body and arrays), so both must
 * live until the response has been sent; then kafka_arena_reset().
 * Errors: 0 or -errno. -EBADMSG malformed or trailing bytes, -ENOBUFS arena
 * full, -ENOTSUP unknown ApiKey or version outside the table (the header is
 * still filled in, so the broker can answer UNSUPPORTED_VERSION with the
 * right correlation id), -ENOSPC/-EINVAL from the writer on encode.
 *
 * A "message" below is what the int32 size prefix counts (header + body);
 * encoders write the prefix too, so their output is a whole frame.
 */
#ifndef SLUICE_KAFKA_CODEC_H
#define SLUICE_KAFKA_CODEC_H

#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/kafka/kafka_wire.h"

struct kafka_request {
	struct kafka_request_header header;
	int16_t header_version;           /* 1, or 2 for flexible versions */
	const struct kafka_api *api;      /* NULL if the ApiKey is unknown */
	void *body;                       /* struct kafka_<api>_request, in the arena */
};

struct kafka_response {
	struct kafka_response_header header;
	int16_t header_version;           /* 0, or 1 for flexible (not ApiVersions) */
	const struct kafka_api *api;
	void *body;                       /* struct kafka_<api>_response, in the arena */
};

/* @thread shard. Request header version for api_key at version. */
int16_t kafka_request_header_version(const struct kafka_api *api, int16_t version);

/* @thread shard. Response header version (ApiVersions is always 0). */
int16_t kafka_response_header_version(const struct kafka_api *api, int16_t version);

/* @thread shard. Decode one request message (len bytes after the size
 * prefix). The body is allocated from a; decoding takes at most
 * kafka_arena_bound(len) bytes of it. */
int kafka_request_decode(const uint8_t *msg, size_t len, struct kafka_arena *a,
			 struct kafka_request *req);

/* @thread shard. Write req as a frame (size prefix, header, body). */
int kafka_request_encode(struct kafka_writer *w, const struct kafka_request *req);

/* @thread shard. Decode a response message to a request of api_key/version
 * (a response does not say what it answers). */
int kafka_response_decode(const uint8_t *msg, size_t len, int16_t api_key, int16_t version,
			  struct kafka_arena *a, struct kafka_response *resp);

/* @thread any. A response frame for api_key at version that carries only
 * `error` in its top-level ErrorCode (every other field zero, empty or
 * null), for any version Kafka defines, implemented here or not: the answer
 * to a request Sluice cannot serve. -ENOTSUP (left in the writer) when
 * Kafka defines no such version or the response has no top-level
 * ErrorCode at it; the caller then closes the connection, as Kafka does. */
int kafka_error_response_encode(struct kafka_writer *w, int16_t api_key, int16_t version,
				int32_t correlation_id, int16_t error);
const struct kafka_error_layout *kafka_error_layout_find(int16_t api_key);

/* @thread shard. Write a response frame for api_key/version. body borrows
 * its records; in iovec mode they are referenced, not copied. */
int kafka_response_encode(struct kafka_writer *w, int16_t api_key, int16_t version,
			  int32_t correlation_id, const void *body);

/* @thread shard. Fill r->ApiKeys from the advertised rows of kafka_apis[],
 * using keys[0..cap) as storage. Returns the number of rows or -ENOBUFS. */
int kafka_api_versions_fill(struct kafka_api_versions_response *r,
			    struct kafka_api_versions_response_api_version *keys, size_t cap);

#endif
