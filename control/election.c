/* control/election.c — who leads a partition (see election.h).
 * @thread any */
#include "control/election.h"

#include <string.h>

int election_has(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

static int live(const struct election_in *in, int32_t id)
{
	return id >= 0 && election_has(in->live, in->nlive, id);
}

static void out_start(const struct election_in *in, struct election_out *out)
{
	memset(out, 0, sizeof(*out));
	out->leader = in->leader;
	out->nisr = in->nisr > ELECTION_MAX_REPLICAS ? ELECTION_MAX_REPLICAS : in->nisr;
	memcpy(out->isr, in->isr, (size_t)out->nisr * sizeof(*out->isr));
}

static void out_finish(const struct election_in *in, struct election_out *out)
{
	out->leader_changed = out->leader != in->leader;
	out->isr_changed = out->nisr != in->nisr ||
			   memcmp(out->isr, in->isr, (size_t)out->nisr * sizeof(*out->isr)) != 0;
}

/* The first replica (replicas order) that is live and in out's ISR, or -1. */
static int32_t first_live_in_isr(const struct election_in *in, const struct election_out *out)
{
	for (int i = 0; i < in->nreplicas; i++)
		if (live(in, in->replicas[i]) && election_has(out->isr, out->nisr, in->replicas[i]))
			return in->replicas[i];
	return -1;
}

/* The first live replica, or -1. */
static int32_t first_live(const struct election_in *in)
{
	for (int i = 0; i < in->nreplicas; i++)
		if (live(in, in->replicas[i]))
			return in->replicas[i];
	return -1;
}

int election_on_brokers(const struct election_in *in, struct election_out *out)
{
	int n = 0;

	out_start(in, out);
	/* the ISR without brokers that are not live */
	for (int i = 0; i < in->nisr && i < ELECTION_MAX_REPLICAS; i++)
		if (live(in, in->isr[i]))
			out->isr[n++] = in->isr[i];
	if (n > 0) {
		out->nisr = n;
	} else if (in->leader >= 0 && election_has(in->isr, in->nisr, in->leader)) {
		/* no live member: the last one stays, the leader if it was in it */
		out->isr[0] = in->leader;
		out->nisr = 1;
	}
	/* else: the ISR stays as it is (it has no live member to elect) */
	if (!(live(in, out->leader) && election_has(out->isr, out->nisr, out->leader))) {
		out->leader = first_live_in_isr(in, out);
		if (out->leader < 0 && in->unclean && (out->leader = first_live(in)) >= 0) {
			out->isr[0] = out->leader;
			out->nisr = 1;
			out->unclean = 1;
		}
	}
	out_finish(in, out);
	return out->leader_changed || out->isr_changed;
}

enum election_result election_preferred(const struct election_in *in, struct election_out *out)
{
	int32_t pref = in->nreplicas > 0 ? in->replicas[0] : -1;

	out_start(in, out);
	if (pref < 0)
		return ELECTION_PREFERRED_NOT_AVAILABLE;
	if (in->leader == pref)
		return ELECTION_NOT_NEEDED;
	if (!live(in, pref) || !election_has(in->isr, in->nisr, pref))
		return ELECTION_PREFERRED_NOT_AVAILABLE;
	out->leader = pref;
	out_finish(in, out);
	return ELECTION_DONE;
}

enum election_result election_unclean(const struct election_in *in, struct election_out *out)
{
	struct election_in u = *in;

	out_start(in, out);
	if (live(in, in->leader) && election_has(in->isr, in->nisr, in->leader))
		return ELECTION_NOT_NEEDED;
	u.unclean = 1;
	election_on_brokers(&u, out);
	return out->leader >= 0 ? ELECTION_DONE : ELECTION_ELIGIBLE_NOT_AVAILABLE;
}
