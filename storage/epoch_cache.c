/* storage/epoch_cache.c — the leader-epoch cache and its checkpoint
 * file's text (see epoch_cache.h). Slow path: it changes only when the
 * partition's epoch does. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/epoch_cache.h"

void epoch_cache_init(struct epoch_cache *c)
{
	memset(c, 0, sizeof(*c));
}

void epoch_cache_fini(struct epoch_cache *c)
{
	free(c->e);
	memset(c, 0, sizeof(*c));
}

void epoch_cache_clear(struct epoch_cache *c)
{
	c->n = 0;
}

static int reserve(struct epoch_cache *c, uint32_t n)
{
	struct epoch_entry *e;
	uint32_t cap;

	if (n <= c->cap)
		return 0;
	cap = c->cap ? c->cap * 2 : 8;
	while (cap < n)
		cap *= 2;
	e = realloc(c->e, (size_t)cap * sizeof(*e)); /* style: allow slow path: an epoch change */
	if (!e)
		return -ENOMEM;
	c->e = e;
	c->cap = cap;
	return 0;
}

int epoch_cache_assign(struct epoch_cache *c, int32_t epoch, int64_t start)
{
	const struct epoch_entry *last = c->n ? &c->e[c->n - 1] : NULL;
	uint32_t keep = 0;

	if (epoch < 0 || start < 0)
		return 0;
	if (last && last->epoch == epoch && last->start <= start)
		return 0;
	/* keep the prefix that stays monotonic with the new pair */
	while (keep < c->n && c->e[keep].epoch < epoch && c->e[keep].start < start)
		keep++;
	if (reserve(c, keep + 1) < 0)
		return -ENOMEM;
	c->n = keep;
	c->e[c->n++] = (struct epoch_entry){ epoch, start };
	return 1;
}

void epoch_cache_end_offset(const struct epoch_cache *c, int32_t requested, int64_t log_end, int32_t *epoch,
			    int64_t *end)
{
	uint32_t hi = 0;

	*epoch = EPOCH_UNDEFINED;
	*end = EPOCH_UNDEFINED_OFFSET;
	if (requested == EPOCH_UNDEFINED || !c->n)
		return;
	if (requested == c->e[c->n - 1].epoch) {
		*epoch = requested;
		*end = log_end;
		return;
	}
	while (hi < c->n && c->e[hi].epoch <= requested)   /* the first epoch above it */
		hi++;
	if (hi == c->n)
		return;                /* above every epoch */
	*epoch = hi ? c->e[hi - 1].epoch : requested;
	*end = c->e[hi].start;
}

int32_t epoch_cache_epoch_for(const struct epoch_cache *c, int64_t offset)
{
	int32_t epoch = EPOCH_UNDEFINED;

	for (uint32_t i = 0; i < c->n && c->e[i].start <= offset; i++)
		epoch = c->e[i].epoch;
	return epoch;
}

int epoch_cache_truncate_end(struct epoch_cache *c, int64_t end)
{
	uint32_t n = c->n;

	while (n && c->e[n - 1].start >= end)
		n--;
	if (n == c->n)
		return 0;
	c->n = n;
	return 1;
}

int epoch_cache_truncate_start(struct epoch_cache *c, int64_t start)
{
	uint32_t k = 0;

	while (k < c->n && c->e[k].start <= start)   /* entries at or before the new start */
		k++;
	if (!k || (k == 1 && c->e[0].start == start))
		return 0;
	/* the last of them covers the new start; those before it go */
	c->e[k - 1].start = start;
	memmove(c->e, c->e + k - 1, (size_t)(c->n - (k - 1)) * sizeof(*c->e));
	c->n -= k - 1;
	return 1;
}

size_t epoch_cache_format(const struct epoch_cache *c, char *buf, size_t cap)
{
	size_t at = 0;
	int n = snprintf(buf, cap, "0\n%" PRIu32 "\n", c->n);

	at = n > 0 ? (size_t)n : 0;
	for (uint32_t i = 0; i < c->n; i++) {
		n = snprintf(at < cap ? buf + at : NULL, at < cap ? cap - at : 0, "%" PRId32 " %" PRId64 "\n",
			     c->e[i].epoch, c->e[i].start);
		at += n > 0 ? (size_t)n : 0;
	}
	return at;
}

/* A decimal number of [0, max] ending with `stop` at *p; advances past
 * the stop. -1 when not. */
static int64_t parse_num(const char **p, const char *end, char stop, int64_t max)
{
	const char *s = *p;
	int64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	while (s < end && *s >= '0' && *s <= '9') {
		if (v > (max - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s++ - '0');
	}
	if (s >= end || *s != stop)
		return -1;
	*p = s + 1;
	return v;
}

int epoch_cache_parse(struct epoch_cache *c, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	int64_t count;

	c->n = 0;
	if (parse_num(&p, end, '\n', 0) != 0 || (count = parse_num(&p, end, '\n', INT32_MAX)) < 0)
		return -EINVAL;
	for (int64_t i = 0; i < count; i++) {
		int64_t epoch = parse_num(&p, end, ' ', INT32_MAX);
		int64_t start = epoch < 0 ? -1 : parse_num(&p, end, '\n', INT64_MAX);

		if (start < 0 ||
		    (c->n && (epoch <= c->e[c->n - 1].epoch || start < c->e[c->n - 1].start))) {
			c->n = 0;
			return -EINVAL;
		}
		if (reserve(c, c->n + 1) < 0) {
			c->n = 0;
			return -ENOMEM;
		}
		c->e[c->n++] = (struct epoch_entry){ (int32_t)epoch, start };
	}
	if (p != end) {
		c->n = 0;
		return -EINVAL;
	}
	return 0;
}
