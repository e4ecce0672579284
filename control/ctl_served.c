/* control/ctl_served.c — the metadata snapshot the control thread
 * published, as the rest of control/ may see it (control thread only).
 *
 * The shards read the published snapshot (dataplane/broker.h, struct
 * md_snapshot); the control thread builds and publishes it
 * (control/ctl_topic.c). Its other files decide from the metadata image
 * and their own book (control/ctl_homes.h), and reach what was published
 * only through these lookups: a topic's entry as a handle to give back to
 * the builder (replaced or retired whole by an operation), the broker
 * config it carries, a broker it lists. Nothing here writes: a published
 * entry is read-only to everyone (scripts/check-layers, rule 6, lets no
 * other file of control/ but the builder and the listed coordinators'
 * readers name the snapshot). */

#include <stdint.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/metalog.h"
#include "dataplane/broker.h"

struct md_topic *ctl_topic_served(const struct ctl *ctl, const char *name, int32_t len)
{
	/* the snapshot's entries are the builder's allocations: published,
	 * they are read-only to everyone, and an operation hands this one
	 * back to be replaced or retired whole (ctl_publish) */
	return (struct md_topic *)md_find(ctl->b->md, name, len);
}

struct md_topic *ctl_topic_served_id(const struct ctl *ctl, const uint8_t id[16])
{
	return ctl->b->md ? (struct md_topic *)md_find_id(ctl->b->md, id) : NULL;
}

struct md_topic *ctl_topic_served_of(const struct ctl *ctl, const struct meta_topic *mt)
{
	struct md_topic *t = ctl_topic_served_id(ctl, mt->id);

	/* its name now another id's in the image: deleted and made again
	 * (ctl_follow.c retires it and serves the new one) */
	return t && metalog_topic(ctl->ml, t->name) == mt ? t : NULL;
}

const struct config *ctl_cfg_served(const struct ctl *ctl)
{
	return ctl->b->md ? ctl->b->md->cfg : NULL;
}

const struct md_broker *ctl_broker_served(const struct ctl *ctl, int32_t id)
{
	const struct md_snapshot *md = ctl->b->md;

	for (int i = 0; md && i < md->nbrokers; i++)
		if (md->brokers[i].id == id)
			return &md->brokers[i];
	return NULL;
}
