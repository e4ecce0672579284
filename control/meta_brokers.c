/* control/meta_brokers.c — the brokers in the metadata image: their
 * registration, fencing and removal records applied in log order. See
 * meta_brokers.h. @thread ctl */
#include "control/meta_brokers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/metalog_codec.h"

static int find_at(const struct meta_brokers *mb, int32_t id)
{
	for (int i = 0; i < mb->n; i++)
		if (mb->b[i].id == id)
			return i;
	return -1;
}

const struct meta_broker *meta_brokers_find(const struct meta_brokers *mb, int32_t id)
{
	int i = find_at(mb, id);

	return i < 0 ? NULL : &mb->b[i];
}

void meta_brokers_reset(struct meta_brokers *mb)
{
	free(mb->b);
	mb->b = NULL;
	mb->n = mb->cap = 0;
}

/* A slot for id, kept in id order: the existing one, or a new one. */
static struct meta_broker *slot(struct meta_brokers *mb, int32_t id)
{
	int i = find_at(mb, id), at = 0;

	if (i >= 0)
		return &mb->b[i];
	if (mb->n == mb->cap) {
		int cap = mb->cap ? mb->cap * 2 : 8;
		struct meta_broker *b = realloc(mb->b, (size_t)cap * sizeof(*b));

		if (!b)
			return NULL;
		mb->b = b;
		mb->cap = cap;
	}
	while (at < mb->n && mb->b[at].id < id)
		at++;
	memmove(&mb->b[at + 1], &mb->b[at], (size_t)(mb->n - at) * sizeof(*mb->b));
	mb->n++;
	memset(&mb->b[at], 0, sizeof(*mb->b));
	mb->b[at].id = id;
	return &mb->b[at];
}

static int apply_register(struct meta_brokers *mb, struct dec *d, int64_t index, int dry)
{
	int32_t id = (int32_t)dec_be(d, 4);
	uint8_t inc[16];
	int64_t epoch;
	char *host, *rack;
	int32_t port, repl_port = 0;
	uint32_t repl_ip = 0;
	int isnull, rc = 0;
	const struct meta_broker *old;
	struct meta_broker *b;

	dec_id(d, inc);
	epoch = dec_be(d, 8);
	host = dec_str(d, &isnull);
	port = (int32_t)dec_be(d, 4);
	rack = dec_str(d, &isnull);
	if (!d->err && d->p != d->end) {
		/* the native replication address (optional, last) */
		repl_ip = (uint32_t)dec_be(d, 4);
		repl_port = (int32_t)dec_be(d, 4);
	}
	if (d->err || d->p != d->end || !host || id < 0 || port < 0 || port > 65535 || repl_port < 0 ||
	    repl_port > 65535 ||
	    strlen(host) >= sizeof(b->host) || (rack && strlen(rack) >= sizeof(b->rack)))
		rc = d->err ? d->err : -EPROTO;
	if (!rc && epoch < 0)
		epoch = index;           /* proposed: its own log index */
	if (!rc && epoch <= 0)
		rc = -EINVAL;            /* applied without an index */
	old = rc ? NULL : meta_brokers_find(mb, id);
	if (!rc && old && (!memcmp(old->incarnation, inc, 16) || old->epoch >= epoch))
		rc = -EEXIST;            /* the same start registered twice, or a stale one */
	if (!rc && !dry) {
		if (!(b = slot(mb, id))) {
			rc = -ENOMEM;
		} else {
			memcpy(b->incarnation, inc, 16);
			b->epoch = epoch;
			strcpy(b->host, host);
			b->port = port;
			strcpy(b->rack, rack ? rack : "");
			b->repl_ip = repl_ip;
			b->repl_port = repl_port;
			b->fenced = 1;
		}
	}
	free(host);
	free(rack);
	return rc;
}

int meta_brokers_apply(struct meta_brokers *mb, int16_t type, struct dec *d, int64_t index, int dry)
{
	int32_t id;
	int64_t epoch;
	int fenced, i;

	if (type == META_REC_REGISTER_BROKER)
		return apply_register(mb, d, index, dry);
	id = (int32_t)dec_be(d, 4);
	epoch = dec_be(d, 8);
	fenced = type == META_REC_BROKER_FENCE ? dec_u8(d) : 0;
	if (d->err || d->p != d->end || (type == META_REC_BROKER_FENCE && fenced > 1))
		return d->err ? d->err : -EPROTO;
	i = find_at(mb, id);
	if (i < 0 || mb->b[i].epoch != epoch)
		return -ENOENT;          /* stale: the broker registered again since */
	if (dry)
		return 0;
	if (type == META_REC_BROKER_FENCE) {
		mb->b[i].fenced = fenced;
		return 0;
	}
	memmove(&mb->b[i], &mb->b[i + 1], (size_t)(mb->n - i - 1) * sizeof(*mb->b));
	mb->n--;
	return 0;
}

int meta_brokers_snapshot(const struct meta_brokers *mb, struct enc *e, int (*put)(void *arg, struct enc *e),
			  void *arg)
{
	int rc = 0;

	for (int i = 0; !rc && i < mb->n; i++) {
		const struct meta_broker *b = &mb->b[i];

		e->len = 0;
		e->err = 0;
		enc_type(e, META_REC_REGISTER_BROKER);
		enc_i32(e, b->id);
		enc_bytes(e, b->incarnation, 16);
		enc_i64(e, b->epoch);
		enc_str(e, b->host);
		enc_i32(e, b->port);
		enc_str(e, b->rack[0] ? b->rack : NULL);
		if (b->repl_port > 0) {
			enc_i32(e, (int32_t)b->repl_ip);
			enc_i32(e, b->repl_port);
		}
		rc = put(arg, e);
		if (rc || b->fenced)
			continue;
		e->len = 0;
		e->err = 0;
		enc_type(e, META_REC_BROKER_FENCE);
		enc_i32(e, b->id);
		enc_i64(e, b->epoch);
		enc_u8(e, 0);
		rc = put(arg, e);
	}
	return rc;
}
