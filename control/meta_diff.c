/* control/meta_diff.c — what a snapshot changed in an image (meta_diff.h).
 * @thread ctl */
#include "control/meta_diff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/metalog.h"

struct bcfg {
	int32_t scope;
	char *key, *value;           /* value NULL: an override deleted */
};

struct meta_diff {
	const struct meta_topic **topics;   /* the old image's live topics (borrowed: metalog.h) */
	int ntopics;
	struct bcfg *bcfg;
	int nbcfg;
};

void meta_diff_free(struct meta_diff *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nbcfg; i++) {
		free(d->bcfg[i].key);
		free(d->bcfg[i].value);
	}
	free(d->bcfg);
	free(d->topics);
	free(d);
}

int meta_diff_take(const struct metalog *ml, struct meta_diff **out)
{
	struct meta_diff *d = calloc(1, sizeof(*d));
	int n = metalog_topic_count(ml), nb = 0;
	int32_t scope;
	const char *k, *v;

	*out = NULL;
	while (metalog_broker_config_at(ml, nb, &scope, &k, &v) == 0)
		nb++;
	if (!d || !(d->topics = calloc((size_t)n + 1, sizeof(*d->topics))) ||
	    !(d->bcfg = calloc((size_t)nb + 1, sizeof(*d->bcfg)))) {
		meta_diff_free(d);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		d->topics[d->ntopics++] = metalog_topic_at(ml, i);
	for (int i = 0; i < nb; i++) {
		struct bcfg *b = &d->bcfg[d->nbcfg++];

		metalog_broker_config_at(ml, i, &scope, &k, &v);
		b->scope = scope;
		if (!(b->key = strdup(k)) || (v && !(b->value = strdup(v)))) {
			meta_diff_free(d);
			return -ENOMEM;
		}
	}
	*out = d;
	return 0;
}

static const struct meta_topic *old_by_id(const struct meta_diff *d, const uint8_t id[16])
{
	for (int i = 0; i < d->ntopics; i++)
		if (!memcmp(d->topics[i]->id, id, 16))
			return d->topics[i];
	return NULL;
}

static const char *override_of(const struct meta_topic *t, const char *key)
{
	for (int i = 0; i < t->nconfigs; i++)
		if (!strcmp(t->config_keys[i], key))
			return t->config_values[i];
	return NULL;
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Whether a topic's config overrides are the same set. */
static int same_configs(const struct meta_topic *a, const struct meta_topic *b)
{
	if (a->nconfigs != b->nconfigs)
		return 0;
	for (int i = 0; i < a->nconfigs; i++) {
		const char *v = override_of(b, a->config_keys[i]);

		if (!v || !same_str(a->config_values[i], v))
			return 0;
	}
	return 1;
}

static int same_broker_configs(const struct meta_diff *d, const struct metalog *ml)
{
	int32_t scope;
	const char *k, *v;
	int n = 0;

	for (; metalog_broker_config_at(ml, n, &scope, &k, &v) == 0; n++) {
		int found = 0;

		for (int i = 0; i < d->nbcfg && !found; i++)
			found = d->bcfg[i].scope == scope && !strcmp(d->bcfg[i].key, k) && same_str(d->bcfg[i].value, v);
		if (!found)
			return 0;
	}
	return n == d->nbcfg;   /* each (scope, key) is set once */
}

int meta_diff_each(const struct meta_diff *d, const struct metalog *ml,
		   void (*fn)(void *arg, const uint8_t id[16], enum meta_diff_kind kind), void *arg)
{
	int n = metalog_topic_count(ml);

	for (int i = 0; i < d->ntopics; i++)
		if (!metalog_topic_by_id(ml, d->topics[i]->id))
			fn(arg, d->topics[i]->id, META_DIFF_DELETED);
	for (int i = 0; i < n; i++) {
		const struct meta_topic *t = metalog_topic_at(ml, i), *o = old_by_id(d, t->id);

		if (!o)
			fn(arg, t->id, META_DIFF_CREATED);
		else if (o->partitions != t->partitions || o->leader_epoch != t->leader_epoch || !same_configs(o, t))
			fn(arg, t->id, META_DIFF_CHANGED);
	}
	return !same_broker_configs(d, ml);
}
