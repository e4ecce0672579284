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

/* A registration read from either record: checked, then kept (not dry). */
struct reg {
	int32_t id;
	uint8_t inc[16];
	int64_t epoch;
	const char *host;
	int32_t port;
	const char *rack;
	uint32_t repl_ip;
	int32_t repl_port;
	int nep, inter;
	const struct meta_endpoint *eps;
};

static int reg_commit(struct meta_brokers *mb, const struct reg *r, int64_t index, int dry)
{
	int64_t epoch = r->epoch;
	const struct meta_broker *old;
	struct meta_broker *b;

	if (!r->host || r->id < 0 || r->port < 0 || r->port > 65535 || r->repl_port < 0 || r->repl_port > 65535 ||
	    strlen(r->host) >= sizeof(b->host) || (r->rack && strlen(r->rack) >= sizeof(b->rack)))
		return -EPROTO;
	if (epoch < 0)
		epoch = index;           /* proposed: its own log index */
	if (epoch <= 0)
		return -EINVAL;          /* applied without an index */
	old = meta_brokers_find(mb, r->id);
	if (old && (!memcmp(old->incarnation, r->inc, 16) || old->epoch >= epoch))
		return -EEXIST;          /* the same start registered twice, or a stale one */
	if (dry)
		return 0;
	if (!(b = slot(mb, r->id)))
		return -ENOMEM;
	memcpy(b->incarnation, r->inc, 16);
	b->epoch = epoch;
	strcpy(b->host, r->host);
	b->port = r->port;
	strcpy(b->rack, r->rack ? r->rack : "");
	b->repl_ip = r->repl_ip;
	b->repl_port = r->repl_port;
	b->nendpoints = r->nep;
	b->inter = r->inter;
	if (r->nep > 0)          /* (none: an old REGISTER_BROKER record) */
		memcpy(b->endpoints, r->eps, (size_t)r->nep * sizeof(*r->eps));
	b->fenced = 1;
	return 0;
}

static int apply_register(struct meta_brokers *mb, struct dec *d, int64_t index, int dry)
{
	struct reg r = { 0 };
	char *host, *rack;
	int isnull, rc;

	r.id = (int32_t)dec_be(d, 4);
	dec_id(d, r.inc);
	r.epoch = dec_be(d, 8);
	host = dec_str(d, &isnull);
	r.port = (int32_t)dec_be(d, 4);
	rack = dec_str(d, &isnull);
	if (!d->err && d->p != d->end) {
		/* the native replication address (optional, last) */
		r.repl_ip = (uint32_t)dec_be(d, 4);
		r.repl_port = (int32_t)dec_be(d, 4);
	}
	r.host = host;
	r.rack = rack;
	rc = d->err || d->p != d->end ? (d->err ? d->err : -EPROTO) : reg_commit(mb, &r, index, dry);
	free(host);
	free(rack);
	return rc;
}

/* Copy a string read from a record into dst[cap]: -EPROTO when null,
 * empty or too long. */
static int take(char *dst, size_t cap, char *s)
{
	int rc = s && s[0] && strlen(s) < cap ? 0 : -EPROTO;

	if (!rc)
		strcpy(dst, s);
	free(s);
	return rc;
}

static int apply_register_endpoints(struct meta_brokers *mb, struct dec *d, int64_t index, int dry)
{
	struct meta_endpoint eps[META_BROKER_MAX_ENDPOINTS];
	struct reg r = { 0 };
	char inter[64], *rack;
	int isnull, n, rc, at = -1;

	r.id = (int32_t)dec_be(d, 4);
	dec_id(d, r.inc);
	r.epoch = dec_be(d, 8);
	rack = dec_str(d, &isnull);
	r.repl_ip = (uint32_t)dec_be(d, 4);
	r.repl_port = (int32_t)dec_be(d, 4);
	rc = take(inter, sizeof(inter), dec_str(d, &isnull));
	n = (int)(int16_t)dec_be(d, 2);
	if (!rc && (n < 1 || n > META_BROKER_MAX_ENDPOINTS))
		rc = -EPROTO;
	for (int i = 0; !rc && i < n; i++) {
		memset(&eps[i], 0, sizeof(eps[i]));
		rc = take(eps[i].name, sizeof(eps[i].name), dec_str(d, &isnull));
		if (!rc)
			rc = take(eps[i].host, sizeof(eps[i].host), dec_str(d, &isnull));
		eps[i].port = (int32_t)dec_be(d, 4);
		eps[i].protocol = (int16_t)dec_be(d, 2);
		if (!rc && (eps[i].port < 0 || eps[i].port > 65535 || eps[i].protocol < 0 || eps[i].protocol > 3))
			rc = -EPROTO;
		for (int k = 0; !rc && k < i; k++)
			if (!strcmp(eps[k].name, eps[i].name))
				rc = -EPROTO;            /* a name twice */
		if (!rc && !strcmp(eps[i].name, inter))
			at = i;
	}
	if (!rc && (d->err || d->p != d->end || at < 0))
		rc = d->err ? d->err : -EPROTO;  /* trailing bytes, or no inter-broker endpoint */
	if (!rc) {
		r.host = eps[at].host;
		r.port = eps[at].port;
		r.rack = rack;
		r.nep = n;
		r.inter = at;
		r.eps = eps;
		rc = reg_commit(mb, &r, index, dry);
	}
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
	if (type == META_REC_REGISTER_BROKER_ENDPOINTS)
		return apply_register_endpoints(mb, d, index, dry);
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
		if (b->nendpoints > 0)
			meta_brokers_enc_endpoints(e, b->id, b->incarnation, b->epoch, b->rack, b->repl_ip, b->repl_port,
						   b->endpoints[b->inter].name, b->endpoints, b->nendpoints);
		else
			meta_brokers_enc_register(e, b->id, b->incarnation, b->epoch, b->host, b->port, b->rack,
						  b->repl_ip, b->repl_port);
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

void meta_brokers_enc_register(struct enc *e, int32_t id, const uint8_t inc[16], int64_t epoch, const char *host,
			       int32_t port, const char *rack, uint32_t repl_ip, int32_t repl_port)
{
	enc_type(e, META_REC_REGISTER_BROKER);
	enc_i32(e, id);
	enc_bytes(e, inc, 16);
	enc_i64(e, epoch);
	enc_str(e, host);
	enc_i32(e, port);
	enc_str(e, rack && rack[0] ? rack : NULL);
	if (repl_port > 0) {
		enc_i32(e, (int32_t)repl_ip);
		enc_i32(e, repl_port);
	}
}

void meta_brokers_enc_endpoints(struct enc *e, int32_t id, const uint8_t inc[16], int64_t epoch, const char *rack,
				uint32_t repl_ip, int32_t repl_port, const char *inter, const struct meta_endpoint *eps,
				int nep)
{
	enc_type(e, META_REC_REGISTER_BROKER_ENDPOINTS);
	enc_i32(e, id);
	enc_bytes(e, inc, 16);
	enc_i64(e, epoch);
	enc_str(e, rack && rack[0] ? rack : NULL);
	enc_i32(e, (int32_t)repl_ip);
	enc_i32(e, repl_port);
	enc_str(e, inter);
	enc_i16(e, (int16_t)nep);
	for (int i = 0; i < nep; i++) {
		enc_str(e, eps[i].name);
		enc_str(e, eps[i].host);
		enc_i32(e, eps[i].port);
		enc_i16(e, eps[i].protocol);
	}
}
