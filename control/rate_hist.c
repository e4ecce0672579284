/* control/rate_hist.c — the broker's recent rates, a sample a second (see
 * rate_hist.h). @thread ctl */
#include "control/rate_hist.h"

#include <string.h>
#include <time.h>

#include "control/ctl.h"
#include "control/ctl_homes.h"
#include "control/cutil.h"
#include "control/textbuf.h"
#include "dataplane/shard.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void rate_hist_init(struct rate_hist *h)
{
	memset(h, 0, sizeof(*h));
}

static int64_t wall_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rate_hist_tick(struct rate_hist *h, struct ctl *ctl, struct broker *b, int64_t mono_ms)
{
	const struct md_snapshot *md = b->md;
	uint64_t records = 0, pbytes = 0, fbytes = 0, cycles = cycles_now();
	int n = b->set.nshards < BROKER_MAX_SHARDS ? b->set.nshards : BROKER_MAX_SHARDS;
	struct rate_sample *s;
	double secs;
	int took = 0;

	if (mono_ms < h->next_ms)
		return 0;
	h->next_ms = mono_ms + RATE_HIST_INTERVAL_MS;
	/* records are counted per partition (the shards count batches) */
	for (int k = 0; md && k < md->ntopics; k++)
		for (int32_t i = 0; i < md->topics[k]->nparts; i++) {
			const struct ctl_home *hm = ctl_part_home(ctl, md->topics[k]->id, i);

			if (hm && hm->part_pub)
				records += LD(hm->part_pub->produce_records);
		}
	for (int i = 0; i < n; i++) {
		pbytes += LD(broker_shard_published(b, i).stats->produce_bytes);
		fbytes += LD(broker_shard_published(b, i).stats->fetch_bytes);
	}
	if (!h->primed) {
		/* the first reading only sets the base */
		h->primed = 1;
	} else {
		secs = (double)(mono_ms - h->prev_ms) / 1000.0;
		if (secs <= 0)
			secs = 1e-3;
		h->seq++;
		took = 1;
		s = &h->s[(h->seq - 1) % RATE_HIST_LEN];
		memset(s, 0, sizeof(*s));
		s->seq = h->seq;
		s->wall_ms = wall_now_ms();
		/* a counter that went back (a partition closed here) counts 0 */
		s->produce_records = records >= h->prev_records ? (double)(records - h->prev_records) / secs : 0;
		s->produce_bytes = pbytes >= h->prev_pbytes ? (double)(pbytes - h->prev_pbytes) / secs : 0;
		s->fetch_bytes = fbytes >= h->prev_fbytes ? (double)(fbytes - h->prev_fbytes) / secs : 0;
		s->records_total = records;
		s->nshards = n;
		for (int i = 0; i < n; i++) {
			uint64_t c = LD(broker_shard_published(b, i).stats->busy_cycles);
			double r = cycles > h->prev_cycles ? (double)(c - h->prev_busy[i]) / (double)(cycles - h->prev_cycles)
							   : 0;

			s->busy[i] = (float)(r > 1 ? 1 : r < 0 ? 0 : r);
		}
	}
	for (int i = 0; i < n; i++)
		h->prev_busy[i] = LD(broker_shard_published(b, i).stats->busy_cycles);
	h->prev_cycles = cycles;
	h->prev_ms = mono_ms;
	h->prev_records = records;
	h->prev_pbytes = pbytes;
	h->prev_fbytes = fbytes;
	return took;
}

int rate_hist_due_in(const struct rate_hist *h, int64_t mono_ms)
{
	return h->next_ms > mono_ms ? (int)(h->next_ms - mono_ms) : 0;
}

uint64_t rate_hist_oldest(const struct rate_hist *h)
{
	if (!h->seq)
		return 0;
	return h->seq > RATE_HIST_LEN ? h->seq - RATE_HIST_LEN + 1 : 1;
}

void rate_hist_sample_json(const struct rate_hist *h, uint64_t seq, struct textbuf *t)
{
	const struct rate_sample *s = &h->s[(seq - 1) % RATE_HIST_LEN];

	textbuf_printf(t, "{\"seq\": %llu, \"time_ms\": %lld, \"produce_records_per_sec\": %.1f, "
		       "\"produce_bytes_per_sec\": %.1f, \"fetch_bytes_per_sec\": %.1f, \"produce_records_total\": %llu, "
		       "\"shard_busy\": [",
		       (unsigned long long)s->seq, (long long)s->wall_ms, s->produce_records, s->produce_bytes,
		       s->fetch_bytes, (unsigned long long)s->records_total);
	for (int i = 0; i < s->nshards; i++)
		textbuf_printf(t, "%s%.4f", i ? ", " : "", (double)s->busy[i]);
	textbuf_printf(t, "]}");
}

void rate_hist_json(const struct rate_hist *h, struct textbuf *t)
{
	textbuf_printf(t, "{\"interval_ms\": %d, \"samples\": [", RATE_HIST_INTERVAL_MS);
	for (uint64_t q = rate_hist_oldest(h); q && q <= h->seq; q++) {
		textbuf_printf(t, "%s\n  ", q == rate_hist_oldest(h) ? "" : ",");
		rate_hist_sample_json(h, q, t);
	}
	textbuf_printf(t, "\n]}\n");
}
