/* dataplane/native/native_format.c — reading and writing the native
 * protocol's datagrams (layouts in native_format.h). No allocation, no
 * state: every read is bounds-checked against the datagram. */
#include <errno.h>
#include <string.h>

#include "dataplane/native/native_format.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

static const char *const type_names[] = { "?", "HELLO", "HELLO_ACK", "PRODUCE", "PRODUCE_ACK",
					  "FETCH", "FETCH_DATA", "ERROR", "REPLICA_FETCH", "REPLICA_DATA" };
static const char *const reject_names[] = { "ok", "short datagram", "bad magic", "unknown version",
					    "length field disagrees with the datagram", "bad CRC",
					    "unknown type", "bad topic name", "fragment fields do not add up",
					    "field out of range" };

static_assert(sizeof(reject_names) / sizeof(reject_names[0]) == NATIVE_E_COUNT, "a name per reason");

const char *native_type_name(uint8_t type)
{
	return type < sizeof(type_names) / sizeof(type_names[0]) ? type_names[type] : "?";
}

const char *native_reject_name(int reason)
{
	if (reason < 0)
		reason = -reason;
	return reason < NATIVE_E_COUNT ? reject_names[reason] : "?";
}

uint32_t native_crc(const uint8_t *dg, size_t len)
{
	uint32_t c = crc32_iscsi((unsigned char *)dg, NH_CRC, 0xffffffffu);

	return crc32_iscsi((unsigned char *)dg + NH_CRC_FROM, (int)(len - NH_CRC_FROM), c) ^ 0xffffffffu;
}

/* The topic at `at` (length from `len_at`); -NATIVE_E_TOPIC when empty,
 * too long or past the end. */
static int topic_at(const uint8_t *dg, size_t len, size_t len_at, size_t at, struct native_msg *m)
{
	m->topic_len = dg[len_at];
	if (m->topic_len == 0 || m->topic_len > NATIVE_MAX_TOPIC || at + m->topic_len > len)
		return -NATIVE_E_TOPIC;
	m->topic = (const char *)dg + at;
	return 0;
}

static int fixed(size_t len, size_t need)
{
	return len < need ? -NATIVE_E_SHORT : 0;
}

int native_parse(const uint8_t *dg, size_t len, int check_crc, struct native_msg *m)
{
	int rc;
	size_t at;

	memset(m, 0, sizeof(*m));
	if (len < NATIVE_HEADER)
		return -NATIVE_E_SHORT;
	if (be16_load(dg + NH_MAGIC) != NATIVE_MAGIC)
		return -NATIVE_E_MAGIC;
	if (dg[NH_VERSION] != NATIVE_VERSION)
		return -NATIVE_E_VERSION;
	m->type = dg[NH_TYPE];
	m->length = be16_load(dg + NH_LENGTH);
	if (m->length != len || len > NATIVE_MAX_DATAGRAM)
		return -NATIVE_E_LENGTH;
	if (check_crc && be32_load(dg + NH_CRC) != native_crc(dg, len))
		return -NATIVE_E_CRC;
	m->flags = be16_load(dg + NH_FLAGS);
	m->session = be32_load(dg + NH_SESSION);
	m->request = be32_load(dg + NH_REQUEST);
	switch (m->type) {
	case NATIVE_HELLO:
		if ((rc = fixed(len, NHELLO_FIXED)) < 0)
			return rc;
		m->credits = be32_load(dg + NHELLO_CREDITS);
		m->max_datagram = be16_load(dg + NHELLO_MAX_DATAGRAM);
		m->data_len = dg[NHELLO_NAME_LEN];
		if (NHELLO_FIXED + m->data_len != len)
			return NHELLO_FIXED + m->data_len > len ? -NATIVE_E_SHORT : -NATIVE_E_LENGTH;
		m->data = dg + NHELLO_FIXED;
		if (m->max_datagram < NATIVE_MIN_DATAGRAM || m->max_datagram > NATIVE_MAX_DATAGRAM || m->session)
			return -NATIVE_E_FIELD;   /* a session begins with HELLO: it has none yet */
		return 0;
	case NATIVE_HELLO_ACK:
		if ((rc = fixed(len, NHACK_FIXED)) < 0)
			return rc;
		if (len != NHACK_FIXED)
			return -NATIVE_E_LENGTH;
		m->session = be32_load(dg + NHACK_SESSION);
		m->credits = be32_load(dg + NHACK_CREDITS);
		m->max_datagram = be16_load(dg + NHACK_MAX_DATAGRAM);
		m->shards = be16_load(dg + NHACK_SHARDS);
		m->producer_id = (int64_t)be64_load(dg + NHACK_PRODUCER_ID);
		return 0;
	case NATIVE_PRODUCE:
		if ((rc = fixed(len, NPROD_FIXED)) < 0 ||
		    (rc = topic_at(dg, len, NPROD_TOPIC_LEN, NPROD_FIXED, m)) < 0)
			return rc;
		m->acks = (int8_t)dg[NPROD_ACKS];
		m->partition = (int32_t)be32_load(dg + NPROD_PARTITION);
		m->producer_id = (int64_t)be64_load(dg + NPROD_PRODUCER_ID);
		m->producer_epoch = (int16_t)be16_load(dg + NPROD_PRODUCER_EPOCH);
		m->base_sequence = (int32_t)be32_load(dg + NPROD_BASE_SEQUENCE);
		m->total_len = be32_load(dg + NPROD_BATCH_LEN);
		m->frag_offset = be32_load(dg + NPROD_FRAG_OFFSET);
		m->frag_index = be16_load(dg + NPROD_FRAG_INDEX);
		m->frag_count = be16_load(dg + NPROD_FRAG_COUNT);
		at = NPROD_FIXED + m->topic_len;
		m->data = dg + at;
		m->data_len = (uint32_t)(len - at);
		if (m->acks != 0 && m->acks != 1 && m->acks != -1)
			return -NATIVE_E_FIELD;
		if (m->partition < 0 || m->producer_id < 0 || m->producer_epoch < 0 || m->base_sequence < 0)
			return -NATIVE_E_FIELD;
		if (m->total_len == 0 || m->total_len > NATIVE_MAX_BATCH || m->frag_count == 0 ||
		    m->frag_count > NATIVE_MAX_FRAGMENTS || m->frag_index >= m->frag_count || m->data_len == 0 ||
		    (uint64_t)m->frag_offset + m->data_len > m->total_len ||
		    (m->frag_count == 1 && (m->frag_offset != 0 || m->data_len != m->total_len)))
			return -NATIVE_E_FRAGMENT;
		return 0;
	case NATIVE_PRODUCE_ACK:
		if ((rc = fixed(len, NPACK_FIXED)) < 0 ||
		    (rc = topic_at(dg, len, NPACK_TOPIC_LEN, NPACK_FIXED, m)) < 0)
			return rc;
		m->error = (int16_t)be16_load(dg + NPACK_ERROR);
		m->partition = (int32_t)be32_load(dg + NPACK_PARTITION);
		m->producer_id = (int64_t)be64_load(dg + NPACK_PRODUCER_ID);
		m->base_sequence = (int32_t)be32_load(dg + NPACK_BASE_SEQUENCE);
		m->offset = (int64_t)be64_load(dg + NPACK_BASE_OFFSET);
		m->log_start = (int64_t)be64_load(dg + NPACK_LOG_START);
		m->credits = be32_load(dg + NPACK_CREDITS);
		return len == NPACK_FIXED + (size_t)m->topic_len ? 0 : -NATIVE_E_LENGTH;
	case NATIVE_FETCH:
		if ((rc = fixed(len, NFETCH_FIXED)) < 0 ||
		    (rc = topic_at(dg, len, NFETCH_TOPIC_LEN, NFETCH_FIXED, m)) < 0)
			return rc;
		m->isolation = dg[NFETCH_ISOLATION];
		m->partition = (int32_t)be32_load(dg + NFETCH_PARTITION);
		m->offset = (int64_t)be64_load(dg + NFETCH_OFFSET);
		m->max_bytes = be32_load(dg + NFETCH_MAX_BYTES);
		if (len != NFETCH_FIXED + (size_t)m->topic_len)
			return -NATIVE_E_LENGTH;
		if (m->isolation > 1 || m->partition < 0 || m->offset < 0)
			return -NATIVE_E_FIELD;
		return 0;
	case NATIVE_FETCH_DATA:
		if ((rc = fixed(len, NDATA_FIXED)) < 0 ||
		    (rc = topic_at(dg, len, NDATA_TOPIC_LEN, NDATA_FIXED, m)) < 0)
			return rc;
		m->error = (int16_t)be16_load(dg + NDATA_ERROR);
		m->partition = (int32_t)be32_load(dg + NDATA_PARTITION);
		m->high_watermark = (int64_t)be64_load(dg + NDATA_HIGH_WATERMARK);
		m->log_start = (int64_t)be64_load(dg + NDATA_LOG_START);
		m->last_stable = (int64_t)be64_load(dg + NDATA_LAST_STABLE);
		m->total_len = be32_load(dg + NDATA_TOTAL_LEN);
		m->frag_offset = be32_load(dg + NDATA_FRAG_OFFSET);
		m->frag_index = be16_load(dg + NDATA_FRAG_INDEX);
		m->frag_count = be16_load(dg + NDATA_FRAG_COUNT);
		at = NDATA_FIXED + m->topic_len;
		m->data = dg + at;
		m->data_len = (uint32_t)(len - at);
		if (m->frag_count > NATIVE_MAX_FRAGMENTS || (m->frag_count && m->frag_index >= m->frag_count) ||
		    (uint64_t)m->frag_offset + m->data_len > m->total_len)
			return -NATIVE_E_FRAGMENT;
		return 0;
	case NATIVE_ERROR:
		if ((rc = fixed(len, NERR_FIXED)) < 0)
			return rc;
		m->error = (int16_t)be16_load(dg + NERR_ERROR);
		m->about = dg[NERR_ABOUT];
		m->data_len = be16_load(dg + NERR_MSG_LEN);
		if (NERR_FIXED + m->data_len != len)
			return NERR_FIXED + m->data_len > len ? -NATIVE_E_SHORT : -NATIVE_E_LENGTH;
		m->data = dg + NERR_FIXED;
		return 0;
	case NATIVE_REPLICA_FETCH:
		if ((rc = fixed(len, NRFETCH_FIXED)) < 0)
			return rc;
		if (dg[NRFETCH_RVERSION] != NATIVE_REPLICA_VERSION)
			return -NATIVE_E_VERSION;
		if ((rc = topic_at(dg, len, NRFETCH_TOPIC_LEN, NRFETCH_FIXED, m)) < 0)
			return rc;
		m->max_datagram = be16_load(dg + NRFETCH_MAX_DATAGRAM);
		m->replica_id = (int32_t)be32_load(dg + NRFETCH_REPLICA);
		m->partition = (int32_t)be32_load(dg + NRFETCH_PARTITION);
		m->leader_epoch = (int32_t)be32_load(dg + NRFETCH_LEADER_EPOCH);
		m->last_epoch = (int32_t)be32_load(dg + NRFETCH_LAST_EPOCH);
		m->offset = (int64_t)be64_load(dg + NRFETCH_OFFSET);
		m->log_start = (int64_t)be64_load(dg + NRFETCH_LOG_START);
		m->max_bytes = be32_load(dg + NRFETCH_MAX_BYTES);
		m->max_wait_ms = be32_load(dg + NRFETCH_MAX_WAIT);
		if (len != NRFETCH_FIXED + (size_t)m->topic_len)
			return -NATIVE_E_LENGTH;
		if (m->session || m->replica_id < 0 || m->partition < 0 || m->offset < 0 || m->leader_epoch < -1 ||
		    m->last_epoch < -1 || m->max_datagram < NATIVE_MIN_DATAGRAM ||
		    m->max_datagram > NATIVE_MAX_DATAGRAM || m->max_wait_ms > 60000)
			return -NATIVE_E_FIELD;
		return 0;
	case NATIVE_REPLICA_DATA:
		if ((rc = fixed(len, NRDATA_FIXED)) < 0)
			return rc;
		if (dg[NRDATA_RVERSION] != NATIVE_REPLICA_VERSION)
			return -NATIVE_E_VERSION;
		if ((rc = topic_at(dg, len, NRDATA_TOPIC_LEN, NRDATA_FIXED, m)) < 0)
			return rc;
		m->error = (int16_t)be16_load(dg + NRDATA_ERROR);
		m->partition = (int32_t)be32_load(dg + NRDATA_PARTITION);
		m->leader_epoch = (int32_t)be32_load(dg + NRDATA_LEADER_EPOCH);
		m->last_epoch = (int32_t)be32_load(dg + NRDATA_DIV_EPOCH);
		m->div_end = (int64_t)be64_load(dg + NRDATA_DIV_END);
		m->high_watermark = (int64_t)be64_load(dg + NRDATA_HIGH_WATERMARK);
		m->log_start = (int64_t)be64_load(dg + NRDATA_LOG_START);
		m->offset = (int64_t)be64_load(dg + NRDATA_OFFSET);
		m->total_len = be32_load(dg + NRDATA_TOTAL_LEN);
		m->frag_offset = be32_load(dg + NRDATA_FRAG_OFFSET);
		m->frag_index = be16_load(dg + NRDATA_FRAG_INDEX);
		m->frag_count = be16_load(dg + NRDATA_FRAG_COUNT);
		at = NRDATA_FIXED + m->topic_len;
		m->data = dg + at;
		m->data_len = (uint32_t)(len - at);
		if (m->session || m->partition < 0 || m->offset < 0 || m->last_epoch < -1)
			return -NATIVE_E_FIELD;
		if (m->frag_count > NATIVE_MAX_FRAGMENTS || (m->frag_count && m->frag_index >= m->frag_count) ||
		    (uint64_t)m->frag_offset + m->data_len > m->total_len || (m->total_len && !m->frag_count))
			return -NATIVE_E_FRAGMENT;
		return 0;
	default:
		return -NATIVE_E_TYPE;
	}
}

/* ---- writers ----------------------------------------------------------------- */

/* The header of a datagram of len bytes whose body is in place; the CRC
 * last. */
static int seal(uint8_t *buf, size_t len, uint8_t type, uint32_t session, uint32_t request)
{
	if (len > NATIVE_MAX_DATAGRAM)
		return -EMSGSIZE;
	be16_store(buf + NH_MAGIC, NATIVE_MAGIC);
	buf[NH_VERSION] = NATIVE_VERSION;
	buf[NH_TYPE] = type;
	be16_store(buf + NH_LENGTH, (uint16_t)len);
	be16_store(buf + NH_FLAGS, 0);
	be32_store(buf + NH_SESSION, session);
	be32_store(buf + NH_REQUEST, request);
	be32_store(buf + NH_CRC, native_crc(buf, len));
	return (int)len;
}

static int put_topic(uint8_t *buf, size_t len_at, size_t at, const char *topic, size_t n)
{
	if (n == 0 || n > NATIVE_MAX_TOPIC)
		return -EINVAL;
	buf[len_at] = (uint8_t)n;
	memmove(buf + at, topic, n);
	return 0;
}

int native_write_hello(uint8_t *buf, size_t cap, uint32_t request, uint32_t credits, uint16_t max_datagram,
		       const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n > 255)
		n = 255;
	if (cap < NHELLO_FIXED + n)
		return -ENOSPC;
	be32_store(buf + NHELLO_CREDITS, credits);
	be16_store(buf + NHELLO_MAX_DATAGRAM, max_datagram);
	buf[NHELLO_NAME_LEN] = (uint8_t)n;
	if (n)
		memmove(buf + NHELLO_FIXED, name, n);
	return seal(buf, NHELLO_FIXED + n, NATIVE_HELLO, 0, request);
}

int native_write_hello_ack(uint8_t *buf, size_t cap, uint32_t request, uint32_t session, uint32_t credits,
			   uint16_t max_datagram, uint16_t shards, int64_t producer_id)
{
	if (cap < NHACK_FIXED)
		return -ENOSPC;
	be32_store(buf + NHACK_SESSION, session);
	be32_store(buf + NHACK_CREDITS, credits);
	be16_store(buf + NHACK_MAX_DATAGRAM, max_datagram);
	be16_store(buf + NHACK_SHARDS, shards);
	be64_store(buf + NHACK_PRODUCER_ID, (uint64_t)producer_id);
	return seal(buf, NHACK_FIXED, NATIVE_HELLO_ACK, session, request);
}

int native_write_produce(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			 int32_t partition, int8_t acks, int64_t producer_id, int16_t producer_epoch,
			 int32_t base_sequence, uint32_t batch_len, uint32_t frag_offset, uint16_t frag_index,
			 uint16_t frag_count, const uint8_t *frag, uint32_t n)
{
	size_t tl = strlen(topic), len = NPROD_FIXED + tl + n;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NPROD_TOPIC_LEN, NPROD_FIXED, topic, tl) < 0)
		return -EINVAL;
	buf[NPROD_ACKS] = (uint8_t)acks;
	be32_store(buf + NPROD_PARTITION, (uint32_t)partition);
	be64_store(buf + NPROD_PRODUCER_ID, (uint64_t)producer_id);
	be16_store(buf + NPROD_PRODUCER_EPOCH, (uint16_t)producer_epoch);
	be32_store(buf + NPROD_BASE_SEQUENCE, (uint32_t)base_sequence);
	be32_store(buf + NPROD_BATCH_LEN, batch_len);
	be32_store(buf + NPROD_FRAG_OFFSET, frag_offset);
	be16_store(buf + NPROD_FRAG_INDEX, frag_index);
	be16_store(buf + NPROD_FRAG_COUNT, frag_count);
	memmove(buf + NPROD_FIXED + tl, frag, n);
	return seal(buf, len, NATIVE_PRODUCE, session, request);
}

int native_write_produce_ack(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			     size_t topic_len, int32_t partition, int16_t error, int64_t producer_id,
			     int32_t base_sequence, int64_t base_offset, int64_t log_start, uint32_t credits)
{
	size_t len = NPACK_FIXED + topic_len;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NPACK_TOPIC_LEN, NPACK_FIXED, topic, topic_len) < 0)
		return -EINVAL;
	be16_store(buf + NPACK_ERROR, (uint16_t)error);
	be32_store(buf + NPACK_PARTITION, (uint32_t)partition);
	be64_store(buf + NPACK_PRODUCER_ID, (uint64_t)producer_id);
	be32_store(buf + NPACK_BASE_SEQUENCE, (uint32_t)base_sequence);
	be64_store(buf + NPACK_BASE_OFFSET, (uint64_t)base_offset);
	be64_store(buf + NPACK_LOG_START, (uint64_t)log_start);
	be32_store(buf + NPACK_CREDITS, credits);
	return seal(buf, len, NATIVE_PRODUCE_ACK, session, request);
}

int native_write_fetch(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
		       int32_t partition, int64_t offset, uint32_t max_bytes, uint8_t isolation)
{
	size_t tl = strlen(topic), len = NFETCH_FIXED + tl;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NFETCH_TOPIC_LEN, NFETCH_FIXED, topic, tl) < 0)
		return -EINVAL;
	buf[NFETCH_ISOLATION] = isolation;
	be32_store(buf + NFETCH_PARTITION, (uint32_t)partition);
	be64_store(buf + NFETCH_OFFSET, (uint64_t)offset);
	be32_store(buf + NFETCH_MAX_BYTES, max_bytes);
	return seal(buf, len, NATIVE_FETCH, session, request);
}

int native_write_fetch_data(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, const char *topic,
			    size_t topic_len, int32_t partition, int16_t error, int64_t high_watermark,
			    int64_t log_start, int64_t last_stable, uint32_t total_len, uint32_t frag_offset,
			    uint16_t frag_index, uint16_t frag_count, const uint8_t *data, uint32_t n)
{
	size_t len = NDATA_FIXED + topic_len + n;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NDATA_TOPIC_LEN, NDATA_FIXED, topic, topic_len) < 0)
		return -EINVAL;
	be16_store(buf + NDATA_ERROR, (uint16_t)error);
	be32_store(buf + NDATA_PARTITION, (uint32_t)partition);
	be64_store(buf + NDATA_HIGH_WATERMARK, (uint64_t)high_watermark);
	be64_store(buf + NDATA_LOG_START, (uint64_t)log_start);
	be64_store(buf + NDATA_LAST_STABLE, (uint64_t)last_stable);
	be32_store(buf + NDATA_TOTAL_LEN, total_len);
	be32_store(buf + NDATA_FRAG_OFFSET, frag_offset);
	be16_store(buf + NDATA_FRAG_INDEX, frag_index);
	be16_store(buf + NDATA_FRAG_COUNT, frag_count);
	if (n)
		memmove(buf + NDATA_FIXED + topic_len, data, n);
	return seal(buf, len, NATIVE_FETCH_DATA, session, request);
}

int native_write_error(uint8_t *buf, size_t cap, uint32_t session, uint32_t request, int16_t error,
		       uint8_t about, const char *message)
{
	size_t n = message ? strlen(message) : 0;

	if (n > NATIVE_MIN_DATAGRAM - NERR_FIXED)
		n = NATIVE_MIN_DATAGRAM - NERR_FIXED;
	if (cap < NERR_FIXED + n)
		return -ENOSPC;
	be16_store(buf + NERR_ERROR, (uint16_t)error);
	buf[NERR_ABOUT] = about;
	be16_store(buf + NERR_MSG_LEN, (uint16_t)n);
	if (n)
		memmove(buf + NERR_FIXED, message, n);
	return seal(buf, NERR_FIXED + n, NATIVE_ERROR, session, request);
}

int native_write_replica_fetch(uint8_t *buf, size_t cap, uint32_t request, const char *topic, size_t topic_len,
			       const struct native_replica_fetch *f)
{
	size_t len = NRFETCH_FIXED + topic_len;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NRFETCH_TOPIC_LEN, NRFETCH_FIXED, topic, topic_len) < 0)
		return -EINVAL;
	buf[NRFETCH_RVERSION] = NATIVE_REPLICA_VERSION;
	be16_store(buf + NRFETCH_MAX_DATAGRAM, f->max_datagram);
	be32_store(buf + NRFETCH_REPLICA, (uint32_t)f->replica_id);
	be32_store(buf + NRFETCH_PARTITION, (uint32_t)f->partition);
	be32_store(buf + NRFETCH_LEADER_EPOCH, (uint32_t)f->leader_epoch);
	be32_store(buf + NRFETCH_LAST_EPOCH, (uint32_t)f->last_epoch);
	be64_store(buf + NRFETCH_OFFSET, (uint64_t)f->offset);
	be64_store(buf + NRFETCH_LOG_START, (uint64_t)f->log_start);
	be32_store(buf + NRFETCH_MAX_BYTES, f->max_bytes);
	be32_store(buf + NRFETCH_MAX_WAIT, f->max_wait_ms);
	return seal(buf, len, NATIVE_REPLICA_FETCH, 0, request);
}

int native_write_replica_data(uint8_t *buf, size_t cap, uint32_t request, const char *topic, size_t topic_len,
			      const struct native_replica_data *d, const uint8_t *data, uint32_t n)
{
	size_t len = NRDATA_FIXED + topic_len + n;

	if (cap < len)
		return -ENOSPC;
	if (put_topic(buf, NRDATA_TOPIC_LEN, NRDATA_FIXED, topic, topic_len) < 0)
		return -EINVAL;
	buf[NRDATA_RVERSION] = NATIVE_REPLICA_VERSION;
	be16_store(buf + NRDATA_ERROR, (uint16_t)d->error);
	be32_store(buf + NRDATA_PARTITION, (uint32_t)d->partition);
	be32_store(buf + NRDATA_LEADER_EPOCH, (uint32_t)d->leader_epoch);
	be32_store(buf + NRDATA_DIV_EPOCH, (uint32_t)d->div_epoch);
	be64_store(buf + NRDATA_DIV_END, (uint64_t)d->div_end);
	be64_store(buf + NRDATA_HIGH_WATERMARK, (uint64_t)d->high_watermark);
	be64_store(buf + NRDATA_LOG_START, (uint64_t)d->log_start);
	be64_store(buf + NRDATA_OFFSET, (uint64_t)d->offset);
	be32_store(buf + NRDATA_TOTAL_LEN, d->total_len);
	be32_store(buf + NRDATA_FRAG_OFFSET, d->frag_offset);
	be16_store(buf + NRDATA_FRAG_INDEX, d->frag_index);
	be16_store(buf + NRDATA_FRAG_COUNT, d->frag_count);
	if (n)
		memmove(buf + NRDATA_FIXED + topic_len, data, n);
	return seal(buf, len, NATIVE_REPLICA_DATA, 0, request);
}
