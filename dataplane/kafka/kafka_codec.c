/* dataplane/kafka/kafka_codec.c — request/response frames over the
 * generated codecs; see kafka_codec.h. */
#include <errno.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"

static bool api_is_flexible(const struct kafka_api *api, int16_t version)
{
	return api->first_flexible >= 0 && version >= api->first_flexible;
}

int16_t kafka_request_header_version(const struct kafka_api *api, int16_t version)
{
	return api && api_is_flexible(api, version) ? 2 : 1;
}

int16_t kafka_response_header_version(const struct kafka_api *api, int16_t version)
{
	if (api->api_key == KAFKA_API_VERSIONS_KEY)   /* its response header is always v0 */
		return 0;
	return api_is_flexible(api, version) ? 1 : 0;
}

int kafka_request_decode(const uint8_t *msg, size_t len, struct kafka_arena *a,
			 struct kafka_request *req)
{
	struct kafka_cursor c;
	int16_t key, version;
	int rc;

	memset(req, 0, sizeof *req);
	kafka_cursor_init(&c, msg, len);
	key = kafka_cursor_int16(&c);
	version = kafka_cursor_int16(&c);
	if (c.err)
		return c.err;
	req->api = kafka_api_find(key);
	kafka_cursor_init(&c, msg, len);
	if (!req->api || version < req->api->min_version || version > req->api->max_version) {
		/* Read what every header version shares, for the error answer. */
		req->header_version = 1;
		rc = kafka_request_header_decode(&c, a, 1, &req->header);
		return rc ? rc : -ENOTSUP;
	}
	req->header_version = kafka_request_header_version(req->api, version);
	rc = kafka_request_header_decode(&c, a, req->header_version, &req->header);
	if (rc)
		return rc;
	req->body = kafka_arena_alloc(a, req->api->request->size);
	if (!req->body)
		return -ENOBUFS;
	rc = req->api->request->decode(&c, a, version, req->body);
	if (rc)
		return rc;
	return kafka_cursor_left(&c) ? -EBADMSG : 0;
}

/* Size prefix now, patched in when the frame is complete (STYLE 21). */
static size_t frame_begin(struct kafka_writer *w)
{
	size_t at = w->len;

	kafka_writer_int32(w, 0);
	return at;
}

static int frame_end(struct kafka_writer *w, size_t at, size_t total_at)
{
	size_t n = w->total - total_at - 4;

	if (w->err)
		return w->err;
	if (n > INT32_MAX)
		return kafka_writer_fail(w, -EINVAL);
	if (w->buf)
		kafka_store_be(w->buf + at, n, 4);
	return 0;
}

int kafka_request_encode(struct kafka_writer *w, const struct kafka_request *req)
{
	size_t total_at = w->total;
	size_t at;

	if (!req->api || !req->body)
		return kafka_writer_fail(w, -EINVAL);
	at = frame_begin(w);
	kafka_request_header_encode(w, req->header_version, &req->header);
	req->api->request->encode(w, req->header.RequestApiVersion, req->body);
	return frame_end(w, at, total_at);
}

int kafka_response_decode(const uint8_t *msg, size_t len, int16_t api_key, int16_t version,
			  struct kafka_arena *a, struct kafka_response *resp)
{
	struct kafka_cursor c;
	int rc;

	memset(resp, 0, sizeof *resp);
	resp->api = kafka_api_find(api_key);
	if (!resp->api || version < resp->api->min_version || version > resp->api->max_version)
		return -ENOTSUP;
	kafka_cursor_init(&c, msg, len);
	resp->header_version = kafka_response_header_version(resp->api, version);
	rc = kafka_response_header_decode(&c, a, resp->header_version, &resp->header);
	if (rc)
		return rc;
	resp->body = kafka_arena_alloc(a, resp->api->response->size);
	if (!resp->body)
		return -ENOBUFS;
	rc = resp->api->response->decode(&c, a, version, resp->body);
	if (rc)
		return rc;
	return kafka_cursor_left(&c) ? -EBADMSG : 0;
}

int kafka_response_encode(struct kafka_writer *w, int16_t api_key, int16_t version,
			  int32_t correlation_id, const void *body)
{
	const struct kafka_api *api = kafka_api_find(api_key);
	struct kafka_response_header h;
	size_t total_at = w->total;
	size_t at;

	if (!api || version < api->min_version || version > api->max_version)
		return kafka_writer_fail(w, -ENOTSUP);
	kafka_response_header_init(&h);
	h.CorrelationId = correlation_id;
	at = frame_begin(w);
	kafka_response_header_encode(w, kafka_response_header_version(api, version), &h);
	api->response->encode(w, version, body);
	return frame_end(w, at, total_at);
}

const struct kafka_error_layout *kafka_error_layout_find(int16_t api_key)
{
	for (size_t i = 0; i < kafka_error_layout_count; i++)
		if (kafka_error_layouts[i].api_key == api_key)
			return &kafka_error_layouts[i];
	return NULL;
}

int kafka_error_response_encode(struct kafka_writer *w, int16_t api_key, int16_t version,
				int32_t correlation_id, int16_t error)
{
	const struct kafka_error_layout *l = kafka_error_layout_find(api_key);
	const char *lay;
	size_t total_at = w->total;
	size_t at;
	bool flex;

	if (!l || version < l->min_version || version > l->max_version)
		return kafka_writer_fail(w, -ENOTSUP);
	lay = l->layouts[version - l->min_version];
	if (!lay || !strchr(lay, 'E'))
		return kafka_writer_fail(w, -ENOTSUP);   /* no top-level error to say it in */
	flex = l->first_flexible >= 0 && version >= l->first_flexible;
	at = frame_begin(w);
	kafka_writer_int32(w, correlation_id);
	if (flex && api_key != KAFKA_API_VERSIONS_KEY)
		kafka_writer_uvarint(w, 0);   /* response header v1: no tags */
	for (; *lay; lay++) {
		switch (*lay) {
		case 'b': kafka_writer_int8(w, 0); break;
		case 'h': kafka_writer_int16(w, 0); break;
		case 'E': kafka_writer_int16(w, error); break;
		case 'i': kafka_writer_int32(w, 0); break;
		case 'q': kafka_writer_int64(w, 0); break;
		case 'u': kafka_writer_uuid(w, (struct kafka_uuid){ { 0 } }); break;
		case 's': flex ? kafka_writer_uvarint(w, 1) : kafka_writer_int16(w, 0); break;
		case 'S': flex ? kafka_writer_uvarint(w, 0) : kafka_writer_int16(w, -1); break;
		case 'y': case 'a': flex ? kafka_writer_uvarint(w, 1) : kafka_writer_int32(w, 0); break;
		case 'Y': case 'A': flex ? kafka_writer_uvarint(w, 0) : kafka_writer_int32(w, -1); break;
		case 't': kafka_writer_uvarint(w, 0); break;
		default: return kafka_writer_fail(w, -EINVAL);
		}
	}
	return frame_end(w, at, total_at);
}

int kafka_api_versions_fill(struct kafka_api_versions_response *r,
			    struct kafka_api_versions_response_api_version *keys, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < KAFKA_API_COUNT; i++) {
		const struct kafka_api *api = &kafka_apis[i];

		if (!api->advertised || !api->handler)
			continue;   /* only what the broker implements is advertised */
		if (n == cap)
			return -ENOBUFS;
		keys[n].ApiKey = api->api_key;
		keys[n].MinVersion = api->adv_min;
		keys[n].MaxVersion = api->adv_max;
		n++;
	}
	r->ApiKeys.items = keys;
	r->ApiKeys.count = (int32_t)n;
	return (int)n;
}
