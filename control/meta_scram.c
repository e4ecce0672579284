/* control/meta_scram.c — the SCRAM users of the image. See
 * control/meta_scram.h. @thread ctl */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_scram.h"
#include "control/metalog_codec.h"

/* The index of (name, type), or -(insertion point) - 1. */
static int find(const struct meta_scram *ms, const char *name, int type)
{
	int lo = 0, hi = ms->n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(ms->c[mid].name, name);

		if (!c)
			c = ms->c[mid].type - type;
		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -lo - 1;
}

const struct sasl_scram_cred *meta_scram_find(const struct meta_scram *ms, const char *name, int type)
{
	int i = find(ms, name, type);

	return i >= 0 ? &ms->c[i] : NULL;
}

static int name_ok(const char *name)
{
	return name && *name && strlen(name) < SASL_USER_MAX;
}

/* Kafka's checks of a credential (AlterUserScramCredentials refuses what
 * fails them; a record that fails them is not applied). */
static int cred_ok(const struct sasl_scram_cred *c)
{
	return name_ok(c->name) && sasl_scram_key_len(c->type) && c->iterations >= SASL_MIN_ITERATIONS &&
	       c->iterations <= SASL_MAX_ITERATIONS && c->salt_len >= 1 && c->salt_len <= SASL_SALT_MAX;
}

static void dec_blob(struct dec *d, uint8_t *out, size_t cap, size_t *len)
{
	int64_t n = dec_be(d, 2);

	*len = 0;
	if (d->err)
		return;
	if (n < 0 || (size_t)n > cap) {
		d->err = -EPROTO;
		return;
	}
	if (!dec_need(d, (size_t)n))
		return;
	memcpy(out, d->p, (size_t)n);
	d->p += n;
	*len = (size_t)n;
}

static void enc_blob(struct enc *e, const uint8_t *b, size_t n)
{
	enc_i16(e, (int16_t)n);
	enc_bytes(e, b, n);
}

int meta_scram_apply(struct meta_scram *ms, int16_t type, struct dec *d, int dry)
{
	int isnull, i, rc = 0;
	char *name = dec_str(d, &isnull);
	int mech = (int8_t)dec_u8(d);

	if (type == META_REC_REMOVE_SCRAM) {
		if (d->err || d->p != d->end || !name) {
			free(name);
			return d->err ? d->err : -EPROTO;
		}
		i = find(ms, name, mech);
		free(name);
		if (i < 0)
			return -ENOENT;
		if (dry)
			return 0;
		free((char *)ms->c[i].name);
		memmove(&ms->c[i], &ms->c[i + 1], sizeof(ms->c[0]) * (size_t)(ms->n - i - 1));
		ms->n--;
		return 0;
	}
	{
		struct sasl_scram_cred c = { .name = name, .type = (int8_t)mech };
		size_t salt_len, sk, svk;
		int kl = sasl_scram_key_len(mech);

		dec_blob(d, c.salt, sizeof(c.salt), &salt_len);
		c.salt_len = (uint8_t)salt_len;
		c.iterations = (int32_t)dec_be(d, 4);
		dec_blob(d, c.stored_key, sizeof(c.stored_key), &sk);
		dec_blob(d, c.server_key, sizeof(c.server_key), &svk);
		if (d->err || d->p != d->end)
			rc = d->err ? d->err : -EPROTO;
		else if (!cred_ok(&c) || (int)sk != kl || (int)svk != kl)
			rc = -EINVAL;
		if (rc || dry) {
			free(name);
			return rc;
		}
		i = find(ms, name, mech);
		if (i >= 0) {
			free((char *)ms->c[i].name);
			ms->c[i] = c;
			return 0;
		}
		i = -i - 1;
		if (ms->n == ms->cap) {
			int ncap = ms->cap ? ms->cap * 2 : 8;
			struct sasl_scram_cred *n = realloc(ms->c, sizeof(*n) * (size_t)ncap);

			if (!n) {
				free(name);
				return -ENOMEM;
			}
			ms->c = n;
			ms->cap = ncap;
		}
		memmove(&ms->c[i + 1], &ms->c[i], sizeof(ms->c[0]) * (size_t)(ms->n - i));
		ms->c[i] = c;
		ms->n++;
		return 0;
	}
}

static void enc_cred(struct enc *e, const struct sasl_scram_cred *c)
{
	int kl = sasl_scram_key_len(c->type);

	enc_type(e, META_REC_SCRAM);
	enc_str(e, c->name);
	enc_u8(e, (uint8_t)c->type);
	enc_blob(e, c->salt, c->salt_len);
	enc_i32(e, c->iterations);
	enc_blob(e, c->stored_key, (size_t)kl);
	enc_blob(e, c->server_key, (size_t)kl);
}

int meta_scram_snapshot(const struct meta_scram *ms, struct enc *e, int (*put)(void *arg, struct enc *e), void *arg)
{
	int rc = 0;

	for (int i = 0; !rc && i < ms->n; i++) {
		e->len = 0;
		e->err = 0;
		enc_cred(e, &ms->c[i]);
		rc = put(arg, e);
	}
	return rc;
}

void meta_scram_reset(struct meta_scram *ms)
{
	for (int i = 0; i < ms->n; i++)
		free((char *)ms->c[i].name);
	free(ms->c);
	memset(ms, 0, sizeof(*ms));
}

int meta_scram_build(const struct meta_scram *ms, const struct sasl_scram_cred *c, struct metalog_rec *out)
{
	uint8_t buf[SASL_USER_MAX + 3 * SASL_KEY_MAX + 64];
	struct enc e = { buf, 0, sizeof(buf), 0 };

	(void)ms;
	if (!cred_ok(c))
		return -EINVAL;
	enc_cred(&e, c);
	return rec_finish(&e, out);
}

int meta_scram_build_remove(const struct meta_scram *ms, const char *name, int type, struct metalog_rec *out)
{
	uint8_t buf[SASL_USER_MAX + 16];
	struct enc e = { buf, 0, sizeof(buf), 0 };

	if (!name_ok(name))
		return -EINVAL;
	if (find(ms, name, type) < 0)
		return -ENOENT;
	enc_type(&e, META_REC_REMOVE_SCRAM);
	enc_str(&e, name);
	enc_u8(&e, (uint8_t)type);
	return rec_finish(&e, out);
}
