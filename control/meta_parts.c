/* control/meta_parts.c — the partitions of a topic in the metadata image:
 * their placement and change records applied in log order, and the
 * change records' bodies built. See meta_parts.h. @thread ctl */
#include "control/meta_parts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/metalog.h"
#include "control/metalog_codec.h"

int meta_part_has(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

int meta_part_restarted(struct meta_part *p, int32_t broker, int (*eligible)(const void *arg, int32_t id),
			const void *arg)
{
	int32_t next = -1;
	int n = 0;

	if (p->legacy)
		return p->leader == broker;   /* one replica: it stays */
	if (!meta_part_has(p->isr, p->nisr, broker))
		return 0;
	for (int i = 0; i < p->nreplicas && next < 0; i++)
		if (p->replicas[i] != broker && meta_part_has(p->isr, p->nisr, p->replicas[i]) &&
		    eligible(arg, p->replicas[i]))
			next = p->replicas[i];
	if (next < 0) {
		/* the last member that may lead: it stays, as LEADER_RESTARTED
		 * left it (a new leader epoch where it leads) */
		if (p->leader == broker) {
			p->leader_epoch++;
			p->partition_epoch++;
		}
		return 0;
	}
	for (int i = 0; i < p->nisr; i++)
		if (p->isr[i] != broker)
			p->isr[n++] = p->isr[i];
	p->nisr = (int16_t)n;
	if (p->leader == broker) {
		p->leader = next;
		p->leader_epoch++;
	}
	p->partition_epoch++;
	return 0;
}

/* Set p's ids (copied); -ENOMEM leaves p as it was. */
static int part_set_ids(struct meta_part *p, const int32_t *replicas, int nr, const int32_t *isr, int ni)
{
	int32_t *ids = malloc((size_t)(nr + ni + 1) * sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	memcpy(ids, replicas, (size_t)nr * sizeof(*ids));
	memcpy(ids + nr, isr, (size_t)ni * sizeof(*ids));
	free(p->replicas);
	p->replicas = ids;
	p->isr = ids + nr;
	p->nreplicas = (int16_t)nr;
	p->nisr = (int16_t)ni;
	return 0;
}

int meta_parts_legacy(struct meta_topic *t, int32_t from, int32_t writer)
{
	if (t->partitions > t->parts_cap) {
		struct meta_part *n = realloc(t->parts, (size_t)t->partitions * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + t->parts_cap, 0, (size_t)(t->partitions - t->parts_cap) * sizeof(*n));
		t->parts = n;
		t->parts_cap = t->partitions;
	}
	for (int32_t i = 0; i < from; i++)
		if (t->parts[i].legacy)
			t->parts[i].leader_epoch = t->leader_epoch;
	for (int32_t i = from; i < t->partitions; i++) {
		struct meta_part *p = &t->parts[i];

		if (part_set_ids(p, &writer, 1, &writer, 1) < 0)
			return -ENOMEM;
		p->leader = writer;
		p->leader_epoch = t->leader_epoch;
		p->partition_epoch = 0;
		p->legacy = 1;
	}
	return 0;
}

/* Set p's reassignment (copied; n 0 and 0: none); -ENOMEM leaves p as it was. */
static int part_set_moving(struct meta_part *p, const int32_t *adding, int na, const int32_t *removing, int nr)
{
	int32_t *ids = NULL;

	if (na + nr > 0) {
		if (!(ids = malloc((size_t)(na + nr) * sizeof(*ids))))
			return -ENOMEM;
		memcpy(ids, adding, (size_t)na * sizeof(*ids));
		memcpy(ids + na, removing, (size_t)nr * sizeof(*ids));
	}
	free(p->moving);
	p->moving = ids;
	p->nadding = (int16_t)na;
	p->nremoving = (int16_t)nr;
	return 0;
}

void meta_parts_free(struct meta_topic *t)
{
	for (int32_t i = 0; i < t->parts_cap; i++) {
		free(t->parts[i].replicas);
		free(t->parts[i].moving);
	}
	free(t->parts);
	t->parts = NULL;
	t->parts_cap = 0;
}

/* A list of broker ids: int16 count (-1: none, when allowed), ids. */
static int dec_ids(struct dec *d, int32_t *ids, int allow_null)
{
	int n = (int)dec_be(d, 2);

	if (d->err)
		return -1;
	if (n < 0 && !(allow_null && n == -1)) {
		d->err = -EPROTO;
		return -1;
	}
	if (n > META_MAX_REPLICAS) {
		d->err = -EPROTO;
		return -1;
	}
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)dec_be(d, 4);
	return d->err ? -1 : n;
}

/* A partition's state that can be applied: replicas distinct and not
 * negative, at least one; the ISR a subset of them, distinct; the leader
 * -1 or in the ISR (Kafka elects only from it; an empty ISR leaves none). */
int meta_part_valid(int32_t leader, const int32_t *r, int nr, const int32_t *isr, int ni)
{
	if (nr < 1 || ni < 0)
		return 0;
	for (int i = 0; i < nr; i++)
		if (r[i] < 0 || meta_part_has(r, i, r[i]))
			return 0;
	for (int i = 0; i < ni; i++)
		if (!meta_part_has(r, nr, isr[i]) || meta_part_has(isr, i, isr[i]))
			return 0;
	return leader == -1 || meta_part_has(isr, ni, leader);
}

static int apply_partition(struct meta_topic *t, struct dec *d, int dry)
{
	int32_t first = (int32_t)dec_be(d, 4), count = (int32_t)dec_be(d, 4);
	int32_t r[META_MAX_REPLICAS], isr[META_MAX_REPLICAS];
	struct dec start;

	if (d->err || count < 1 || first < 0)
		return d->err ? d->err : -EPROTO;
	if (first > t->partitions - count)
		return -EINVAL;
	start = *d;
	/* every entry checked before any is applied: all or nothing */
	for (int pass = 0; pass < (dry ? 1 : 2); pass++) {
		*d = start;
		for (int32_t i = 0; i < count; i++) {
			int32_t leader = (int32_t)dec_be(d, 4), le = (int32_t)dec_be(d, 4), pe = (int32_t)dec_be(d, 4);
			int nr = dec_ids(d, r, 0), ni = dec_ids(d, isr, 0);

			if (d->err)
				return d->err;
			if (!meta_part_valid(leader, r, nr, isr, ni) || le < 0 || pe < 0)
				return -EINVAL;
			if (pass == 1) {
				struct meta_part *p = &t->parts[first + i];

				if (part_set_ids(p, r, nr, isr, ni) < 0)
					return -ENOMEM;
				p->leader = leader;
				p->leader_epoch = le;
				p->partition_epoch = pe;
				p->legacy = 0;
				part_set_moving(p, NULL, 0, NULL, 0);   /* a new placement */
			}
		}
		if (d->p != d->end)
			return -EPROTO;
	}
	return 0;
}

/* A change's leader (-2), ISR and replicas (n < 0) left unchanged are
 * the partition's. */
static void change_resolve(const struct meta_part *p, int32_t *leader, int32_t *isr, int *ni, int32_t *r, int *nr)
{
	if (*leader == -2)
		*leader = p->leader;
	if (*ni < 0) {
		*ni = p->nisr;
		memcpy(isr, p->isr, (size_t)*ni * sizeof(*isr));
	}
	if (*nr < 0) {
		*nr = p->nreplicas;
		memcpy(r, p->replicas, (size_t)*nr * sizeof(*r));
	}
}

/* A change applied: the partition epoch moves, the leader epoch with a
 * new leader; the partition is no longer legacy. */
static void change_bump(struct meta_part *p, int32_t leader)
{
	if (leader != p->leader)
		p->leader_epoch++;
	p->leader = leader;
	p->partition_epoch++;
	p->legacy = 0;
}

static int apply_change(struct meta_topic *t, struct dec *d, int dry)
{
	int32_t idx = (int32_t)dec_be(d, 4), leader = (int32_t)dec_be(d, 4);
	int32_t r[META_MAX_REPLICAS], isr[META_MAX_REPLICAS];
	int ni = dec_ids(d, isr, 1), nr = dec_ids(d, r, 1);
	int32_t g_leader = 0, g_le = 0, g_pe = 0;
	int guarded = d->p != d->end;   /* records written before the guard have none */
	struct meta_part *p;

	if (guarded) {
		g_leader = (int32_t)dec_be(d, 4);
		g_le = (int32_t)dec_be(d, 4);
		g_pe = (int32_t)dec_be(d, 4);
	}
	if (d->err || d->p != d->end || leader < -2)
		return d->err ? d->err : -EPROTO;
	if (idx < 0 || idx >= t->partitions)
		return -EINVAL;
	p = &t->parts[idx];
	if (guarded && (p->leader != g_leader || p->leader_epoch != g_le || p->partition_epoch != g_pe))
		return -ESTALE;              /* built against a state since changed: a no-op */
	change_resolve(p, &leader, isr, &ni, r, &nr);
	if (!meta_part_valid(leader, r, nr, isr, ni))
		return -EINVAL;
	if (dry)
		return 0;
	if (part_set_ids(p, r, nr, isr, ni) < 0)
		return -ENOMEM;
	change_bump(p, leader);
	return 0;
}

/* adding and removing: distinct, each a replica, none in both. */
static int moving_valid(const int32_t *r, int nr, const int32_t *a, int na, const int32_t *m, int nm)
{
	for (int i = 0; i < na; i++)
		if (!meta_part_has(r, nr, a[i]) || meta_part_has(a, i, a[i]))
			return 0;
	for (int i = 0; i < nm; i++)
		if (!meta_part_has(r, nr, m[i]) || meta_part_has(m, i, m[i]) || meta_part_has(a, na, m[i]))
			return 0;
	return 1;
}

/* PARTITION_REASSIGN: a PARTITION_CHANGE built at a partition epoch (-1:
 * any), with the reassignment's adding and removing replicas. One that
 * changes neither leader, ISR nor replicas (a snapshot's note) moves no
 * epoch. */
static int apply_reassign(struct meta_topic *t, struct dec *d, int dry)
{
	int32_t idx = (int32_t)dec_be(d, 4), pe = (int32_t)dec_be(d, 4), leader = (int32_t)dec_be(d, 4);
	int32_t r[META_MAX_REPLICAS], isr[META_MAX_REPLICAS], add[META_MAX_REPLICAS], rm[META_MAX_REPLICAS];
	int ni = dec_ids(d, isr, 1), nr = dec_ids(d, r, 1), na = dec_ids(d, add, 0), nm = dec_ids(d, rm, 0);
	int note = leader == -2 && ni < 0 && nr < 0;
	struct meta_part *p;

	if (d->err || d->p != d->end || leader < -2 || pe < -1)
		return d->err ? d->err : -EPROTO;
	if (idx < 0 || idx >= t->partitions)
		return -EINVAL;
	p = &t->parts[idx];
	if (pe >= 0 && pe != p->partition_epoch)
		return -ESTALE;
	change_resolve(p, &leader, isr, &ni, r, &nr);
	if (!meta_part_valid(leader, r, nr, isr, ni) || !moving_valid(r, nr, add, na, rm, nm))
		return -EINVAL;
	if (dry)
		return 0;
	if (part_set_moving(p, add, na, rm, nm) < 0 || part_set_ids(p, r, nr, isr, ni) < 0)
		return -ENOMEM;
	if (note)
		return 0;
	change_bump(p, leader);
	return 0;
}

int meta_parts_apply(struct meta_topic *t, int16_t type, struct dec *d, int dry)
{
	if (type == META_REC_PARTITION)
		return apply_partition(t, d, dry);
	if (type == META_REC_PARTITION_CHANGE)
		return apply_change(t, d, dry);
	if (type == META_REC_PARTITION_REASSIGN)
		return apply_reassign(t, d, dry);
	return -EPROTO;
}

static void enc_ids(struct enc *e, const int32_t *ids, int n)
{
	enc_i16(e, (int16_t)n);
	for (int i = 0; i < n; i++)
		enc_i32(e, ids[i]);
}

int meta_parts_snapshot_reassign(const struct meta_topic *t, struct enc *e,
				 int (*put)(void *arg, struct enc *e), void *arg)
{
	int rc = 0;

	for (int32_t i = 0; !rc && i < t->partitions; i++) {
		const struct meta_part *p = &t->parts[i];

		if (p->legacy || !meta_part_reassigning(p))
			continue;
		e->len = 0;
		e->err = 0;
		enc_type(e, META_REC_PARTITION_REASSIGN);
		enc_bytes(e, t->id, 16);
		enc_i32(e, i);
		enc_i32(e, -1);
		enc_i32(e, -2);
		enc_i16(e, -1);
		enc_i16(e, -1);
		enc_ids(e, p->moving, p->nadding);
		enc_ids(e, p->moving + p->nadding, p->nremoving);
		rc = put(arg, e);
	}
	return rc;
}

void meta_part_encode(struct enc *e, int32_t leader, int32_t leader_epoch, int32_t partition_epoch,
		      const int32_t *replicas, int nreplicas, const int32_t *isr, int nisr)
{
	enc_i32(e, leader);
	enc_i32(e, leader_epoch);
	enc_i32(e, partition_epoch);
	enc_ids(e, replicas, nreplicas);
	enc_ids(e, isr, nisr);
}

void meta_parts_encode(struct enc *e, const struct meta_topic *t, int32_t first, int32_t count)
{
	enc_i32(e, first);
	enc_i32(e, count);
	for (int32_t i = first; i < first + count; i++) {
		const struct meta_part *p = &t->parts[i];

		meta_part_encode(e, p->leader, p->leader_epoch, p->partition_epoch, p->replicas, p->nreplicas,
				 p->isr, p->nisr);
	}
}

int meta_parts_snapshot(const struct meta_topic *t, struct enc *e, size_t cap,
			int (*put)(void *arg, struct enc *e), void *arg)
{
	int rc = 0;

	for (int32_t i = 0; !rc && i < t->partitions;) {
		size_t bytes = 3 + 16 + 8;   /* type, version, id, first, count */
		int32_t n = 0;

		if (t->parts[i].legacy) {
			i++;
			continue;
		}
		while (i + n < t->partitions && !t->parts[i + n].legacy &&
		       bytes + META_PART_BYTES(t->parts[i + n].nreplicas) <= cap) {
			bytes += META_PART_BYTES(t->parts[i + n].nreplicas);
			n++;
		}
		e->len = 0;
		e->err = 0;
		enc_type(e, META_REC_PARTITION);
		enc_bytes(e, t->id, 16);
		meta_parts_encode(e, t, i, n);
		rc = put(arg, e);
		i += n;
	}
	return rc;
}

int meta_parts_build_change(struct enc *e, const struct meta_topic *t, int32_t partition, int32_t leader,
			    const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas)
{
	const struct meta_part *p;
	int same;

	if (partition < 0 || partition >= t->partitions || leader < -2 || nisr > META_MAX_REPLICAS ||
	    nreplicas > META_MAX_REPLICAS || (isr && nisr < 0) || (replicas && nreplicas < 1))
		return -EINVAL;
	p = &t->parts[partition];
	if (!meta_part_valid(leader == -2 ? p->leader : leader, replicas ? replicas : p->replicas,
			     replicas ? nreplicas : p->nreplicas, isr ? isr : p->isr, isr ? nisr : p->nisr))
		return -EINVAL;
	same = (leader == -2 || leader == p->leader) &&
	       (!isr || (nisr == p->nisr && !memcmp(isr, p->isr, (size_t)nisr * sizeof(*isr)))) &&
	       (!replicas || (nreplicas == p->nreplicas &&
			      !memcmp(replicas, p->replicas, (size_t)nreplicas * sizeof(*replicas))));
	if (same)
		return 0;                /* nothing to write */
	enc_type(e, META_REC_PARTITION_CHANGE);
	enc_bytes(e, t->id, 16);
	enc_i32(e, partition);
	enc_i32(e, leader);
	enc_i16(e, isr ? (int16_t)nisr : -1);
	for (int i = 0; isr && i < nisr; i++)
		enc_i32(e, isr[i]);
	enc_i16(e, replicas ? (int16_t)nreplicas : -1);
	for (int i = 0; replicas && i < nreplicas; i++)
		enc_i32(e, replicas[i]);
	/* the guard: the state it was built against (Kafka's AlterPartition
	 * leader and partition epochs); applied to any other, it is refused */
	enc_i32(e, p->leader);
	enc_i32(e, p->leader_epoch);
	enc_i32(e, p->partition_epoch);
	return 1;
}

int meta_parts_build_reassign(struct enc *e, const struct meta_topic *t, int32_t partition, int32_t leader,
			      const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
			      const int32_t *adding, int nadding, const int32_t *removing, int nremoving)
{
	const struct meta_part *p;

	if (partition < 0 || partition >= t->partitions || leader < -2 || !replicas || nreplicas < 1 ||
	    nreplicas > META_MAX_REPLICAS || (isr && (nisr < 0 || nisr > META_MAX_REPLICAS)) || nadding < 0 ||
	    nremoving < 0 || nadding > nreplicas || nremoving > nreplicas)
		return -EINVAL;
	p = &t->parts[partition];
	if (!meta_part_valid(leader == -2 ? p->leader : leader, replicas, nreplicas, isr ? isr : p->isr,
			     isr ? nisr : p->nisr))
		return -EINVAL;
	for (int i = 0; i < nadding + nremoving; i++) {
		int32_t id = i < nadding ? adding[i] : removing[i - nadding];

		if (!meta_part_has(replicas, nreplicas, id))
			return -EINVAL;
	}
	enc_type(e, META_REC_PARTITION_REASSIGN);
	enc_bytes(e, t->id, 16);
	enc_i32(e, partition);
	enc_i32(e, p->partition_epoch);
	enc_i32(e, leader);
	enc_i16(e, isr ? (int16_t)nisr : -1);
	for (int i = 0; isr && i < nisr; i++)
		enc_i32(e, isr[i]);
	enc_ids(e, replicas, nreplicas);
	enc_ids(e, adding, nadding);
	enc_ids(e, removing, nremoving);
	return 1;
}
