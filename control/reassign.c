/* control/reassign.c — the steps of a partition reassignment (see
 * reassign.h). @thread any */
#include "control/reassign.h"

#include <stdlib.h>
#include <string.h>

static int has(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

enum reassign_check reassign_check_target(const int32_t *target, int n, const int32_t *known, int nknown,
					  int32_t *bad)
{
	if (n < 1)
		return REASSIGN_EMPTY;
	if (n > REASSIGN_MAX)
		return REASSIGN_TOO_MANY;
	for (int i = 0; i < n; i++) {
		*bad = target[i];
		if (has(target, i, target[i]))
			return REASSIGN_DUPLICATE;
		if (target[i] < 0 || !has(known, nknown, target[i]))
			return REASSIGN_UNKNOWN_BROKER;
	}
	return REASSIGN_OK;
}

/* The replicas before the reassignment in progress: replicas - adding. */
static int original(const struct reassign_state *s, int32_t *out)
{
	int n = 0;

	for (int i = 0; i < s->nreplicas; i++)
		if (!has(s->adding, s->nadding, s->replicas[i]))
			out[n++] = s->replicas[i];
	return n;
}

/* The ISR's members in set, in the ISR's order. */
static int isr_within(const struct reassign_state *s, const int32_t *set, int n, int32_t *out)
{
	int k = 0;

	for (int i = 0; i < s->nisr; i++)
		if (has(set, n, s->isr[i]))
			out[k++] = s->isr[i];
	return k;
}

/* The leader once the replicas are set (n of them) and the ISR isr:
 * unchanged (-2) when it is among them, else the first of set in the ISR,
 * else -1. */
static int32_t leader_within(const struct reassign_state *s, const int32_t *set, int n, const int32_t *isr,
			     int nisr)
{
	if (s->leader >= 0 && has(set, n, s->leader) && has(isr, nisr, s->leader))
		return -2;
	for (int i = 0; i < n; i++)
		if (has(isr, nisr, set[i]))
			return set[i] == s->leader ? -2 : set[i];
	return s->leader == -1 ? -2 : -1;
}

int reassign_start(const struct reassign_state *s, const int32_t *target, int ntarget, struct reassign_plan *out)
{
	int32_t orig[REASSIGN_MAX];
	int norig = original(s, orig);

	memset(out, 0, sizeof(*out));
	if (ntarget < 1 || ntarget > REASSIGN_MAX)
		return 0;
	if (!s->nadding && !s->nremoving && ntarget == s->nreplicas &&
	    !memcmp(target, s->replicas, (size_t)ntarget * sizeof(*target)))
		return 0;
	memcpy(out->replicas, target, (size_t)ntarget * sizeof(*target));
	out->nreplicas = ntarget;
	for (int i = 0; i < norig && out->nreplicas < REASSIGN_MAX; i++)
		if (!has(target, ntarget, orig[i]))
			out->removing[out->nremoving++] = out->replicas[out->nreplicas++] = orig[i];
	for (int i = 0; i < ntarget; i++)
		if (!has(orig, norig, target[i]))
			out->adding[out->nadding++] = target[i];
	out->nisr = isr_within(s, out->replicas, out->nreplicas, out->isr);
	out->leader = leader_within(s, out->replicas, out->nreplicas, out->isr, out->nisr);
	if (out->nisr == s->nisr && out->leader == -2)
		out->nisr = -1;   /* the ISR stays */
	return 1;
}

int reassign_complete(const struct reassign_state *s, struct reassign_plan *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->nadding && !s->nremoving)
		return 0;
	for (int i = 0; i < s->nadding; i++)
		if (!has(s->isr, s->nisr, s->adding[i]))
			return 0;
	for (int i = 0; i < s->nreplicas; i++)
		if (!has(s->removing, s->nremoving, s->replicas[i]))
			out->replicas[out->nreplicas++] = s->replicas[i];
	out->nisr = isr_within(s, out->replicas, out->nreplicas, out->isr);
	if (out->nreplicas < 1 || out->nisr < 1)
		return 0;                /* no member of the target in sync yet */
	out->leader = leader_within(s, out->replicas, out->nreplicas, out->isr, out->nisr);
	return 1;
}

int reassign_cancel(const struct reassign_state *s, struct reassign_plan *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->nadding && !s->nremoving)
		return 0;
	out->nreplicas = original(s, out->replicas);
	out->nisr = isr_within(s, out->replicas, out->nreplicas, out->isr);
	out->leader = leader_within(s, out->replicas, out->nreplicas, out->isr, out->nisr);
	return 1;
}

int reassign_throttle_names(const char *v, int32_t idx, int32_t id)
{
	while (*v) {
		char *end;
		long part, broker;

		while (*v == ' ' || *v == ',')
			v++;
		if (*v == '*')
			return 1;
		if (!*v)
			return 0;
		part = strtol(v, &end, 10);
		if (end == v)
			return 0;            /* validated when set: not reached */
		for (v = end; *v == ' '; v++)
			;
		if (*v++ != ':')
			return 0;
		broker = strtol(v, &end, 10);
		if (end == v)
			return 0;
		v = end;
		if (part == idx && broker == id)
			return 1;
	}
	return 0;
}
