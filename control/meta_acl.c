/* control/meta_acl.c — the ACL bindings of the image. See
 * control/meta_acl.h. @thread ctl */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/meta_acl.h"
#include "control/metalog_codec.h"

struct acl_set meta_acl_set(const struct meta_acl *ma)
{
	struct acl_set s = { ma->b, ma->n, 0, ma->changes + 1, NULL, 0 };

	for (int i = 0; i < ma->n; i++)
		s.hosts += strcmp(ma->b[i].host, ACL_WILDCARD) != 0;
	return s;
}

static int in_w(const struct acl_binding *b)
{
	return b->res == ACL_RES_TOPIC && (b->op == ACL_WRITE || b->op == ACL_ALL);
}

static int w_qsort_cmp(const void *x, const void *y)
{
	return acl_w_cmp(x, y);
}

static char *put_str(char **p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *r = *p;

	memcpy(r, s, n);
	*p += n;
	return r;
}

int meta_acl_copy(const struct meta_acl *ma, struct acl_set *out)
{
	size_t strs = 0;
	struct acl_binding *c, *w;
	size_t nw = 0;
	char *p;

	*out = meta_acl_set(ma);
	out->b = NULL;
	out->n = 0;
	out->hosts = 0;
	if (ma->n <= 0)
		return 0;
	for (int i = 0; i < ma->n; i++) {
		strs += strlen(ma->b[i].name) + strlen(ma->b[i].principal) + strlen(ma->b[i].host) + 3;
		nw += in_w(&ma->b[i]);
	}
	if (!(c = malloc(sizeof(*c) * ((size_t)ma->n + nw) + strs))) {
		out->gen = 0;   /* not the bindings of its generation */
		return -ENOMEM;
	}
	w = c + ma->n;
	p = (char *)(w + nw);
	nw = 0;
	for (int i = 0; i < ma->n; i++) {
		c[i] = ma->b[i];
		c[i].name = put_str(&p, ma->b[i].name);
		c[i].principal = put_str(&p, ma->b[i].principal);
		c[i].host = put_str(&p, ma->b[i].host);
		if (in_w(&c[i]))
			w[nw++] = c[i];
	}
	qsort(w, nw, sizeof(*w), w_qsort_cmp);
	*out = meta_acl_set(ma);
	out->b = c;
	out->w = w;
	out->nw = (int)nw;
	return 0;
}

static void binding_free(struct acl_binding *b)
{
	free((char *)b->name);
	free((char *)b->principal);
	free((char *)b->host);
}

int meta_acl_apply(struct meta_acl *ma, int16_t type, struct dec *d, int dry)
{
	struct acl_binding b = { 0 };
	struct acl_set s = { .b = ma->b, .n = ma->n };   /* for acl_find */
	int isnull, i, rc = 0;

	b.res = (int8_t)dec_u8(d);
	b.name = dec_str(d, &isnull);
	b.pat = (int8_t)dec_u8(d);
	b.principal = dec_str(d, &isnull);
	b.host = dec_str(d, &isnull);
	b.op = (int8_t)dec_u8(d);
	b.perm = (int8_t)dec_u8(d);
	if (d->err || d->p != d->end || !b.name || !b.principal || !b.host)
		rc = d->err ? d->err : -EPROTO;
	else if (acl_binding_valid(&b))
		rc = -EINVAL;
	if (rc || dry) {
		if (!rc && type == META_REC_REMOVE_ACL && acl_find(&s, &b) < 0)
			rc = -ENOENT;
		binding_free(&b);
		return rc;
	}
	i = acl_find(&s, &b);
	if (type == META_REC_REMOVE_ACL) {
		binding_free(&b);
		if (i < 0)
			return -ENOENT;
		binding_free(&ma->b[i]);
		memmove(&ma->b[i], &ma->b[i + 1], sizeof(ma->b[0]) * (size_t)(ma->n - i - 1));
		ma->n--;
		ma->changes++;
		return 0;
	}
	if (i >= 0) {
		binding_free(&b);
		return 0;
	}
	i = -i - 1;
	if (ma->n == ma->cap) {
		int ncap = ma->cap ? ma->cap * 2 : 16;
		struct acl_binding *n = realloc(ma->b, sizeof(*n) * (size_t)ncap);

		if (!n) {
			binding_free(&b);
			return -ENOMEM;
		}
		ma->b = n;
		ma->cap = ncap;
	}
	memmove(&ma->b[i + 1], &ma->b[i], sizeof(ma->b[0]) * (size_t)(ma->n - i));
	ma->b[i] = b;
	ma->n++;
	ma->changes++;
	return 0;
}

static void enc_binding(struct enc *e, int16_t type, const struct acl_binding *b)
{
	enc_type(e, type);
	enc_u8(e, (uint8_t)b->res);
	enc_str(e, b->name);
	enc_u8(e, (uint8_t)b->pat);
	enc_str(e, b->principal);
	enc_str(e, b->host);
	enc_u8(e, (uint8_t)b->op);
	enc_u8(e, (uint8_t)b->perm);
}

int meta_acl_snapshot(const struct meta_acl *ma, struct enc *e, int (*put)(void *arg, struct enc *e), void *arg)
{
	int rc = 0;

	for (int i = 0; !rc && i < ma->n; i++) {
		e->len = 0;
		e->err = 0;
		enc_binding(e, META_REC_ACL, &ma->b[i]);
		rc = put(arg, e);
	}
	return rc;
}

void meta_acl_reset(struct meta_acl *ma)
{
	uint64_t changes = ma->changes + 1;   /* a new image: a new generation */

	for (int i = 0; i < ma->n; i++)
		binding_free(&ma->b[i]);
	free(ma->b);
	memset(ma, 0, sizeof(*ma));
	ma->changes = changes;
}

static int build(const struct meta_acl *ma, int16_t type, const struct acl_binding *b, struct metalog_rec *out)
{
	uint8_t buf[3 * ACL_STR_MAX + 32];
	struct enc e = { buf, 0, sizeof(buf), 0 };
	struct acl_set s = { .b = ma->b, .n = ma->n };   /* for acl_find */
	int found;

	out->buf = NULL;
	out->len = 0;
	if (acl_binding_valid(b))
		return -EINVAL;
	found = acl_find(&s, b) >= 0;
	if (type == META_REC_ACL && found)
		return 0;
	if (type == META_REC_REMOVE_ACL && !found)
		return -ENOENT;
	enc_binding(&e, type, b);
	return rec_finish(&e, out);
}

int meta_acl_build(const struct meta_acl *ma, const struct acl_binding *b, struct metalog_rec *out)
{
	return build(ma, META_REC_ACL, b, out);
}

int meta_acl_build_remove(const struct meta_acl *ma, const struct acl_binding *b, struct metalog_rec *out)
{
	return build(ma, META_REC_REMOVE_ACL, b, out);
}
