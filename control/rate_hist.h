/* control/rate_hist.h — the broker's recent rates for the web console:
 * one sample a second for the last five minutes of records and bytes
 * produced, bytes fetched and each shard's busy share, so that a chart
 * opened now shows the minutes before it (GET /v1/history) and goes on
 * live (GET /v1/stream, Server-Sent Events; control/admin_http.c).
 *
 * A sample reads only what the shards publish with relaxed atomic stores
 * (struct shard_stats, struct part_pub): a few loads per shard and per
 * partition held here, once a second, on the control thread, whether or
 * not anyone watches; nothing on the data path changes.
 *
 * Thread: ctl (@thread ctl) for everything. Owns: its ring (fixed size,
 * inside the struct). Errors: none.
 */
#ifndef SLUICE_RATE_HIST_H
#define SLUICE_RATE_HIST_H

#include <stdint.h>

#include "dataplane/broker.h"

#define RATE_HIST_LEN 300            /* samples kept: five minutes */
#define RATE_HIST_INTERVAL_MS 1000

struct broker;
struct ctl;
struct textbuf;

struct rate_sample {
	uint64_t seq;                /* 1, 2, ...: the stream's event id */
	int64_t wall_ms;             /* when it was taken (CLOCK_REALTIME) */
	double produce_records;      /* per second over the interval before it */
	double produce_bytes;
	double fetch_bytes;
	uint64_t records_total;      /* records produced to partitions held here, since they opened */
	int nshards;
	float busy[BROKER_MAX_SHARDS];   /* each shard's busy share, 0..1 */
};

struct rate_hist {
	struct rate_sample s[RATE_HIST_LEN];
	uint64_t seq;                /* samples taken; the newest is seq */
	int64_t next_ms;             /* CLOCK_MONOTONIC ms the next one is due */
	/* the previous readings, for the rates */
	int primed;
	int64_t prev_ms;
	uint64_t prev_records, prev_pbytes, prev_fbytes, prev_cycles;
	uint64_t prev_busy[BROKER_MAX_SHARDS];
};

void rate_hist_init(struct rate_hist *h);
/* Take a sample if one is due at mono_ms; 1 when one was taken. */
int rate_hist_tick(struct rate_hist *h, struct ctl *ctl, struct broker *b, int64_t mono_ms);
/* Milliseconds until the next sample is due (0: now). */
int rate_hist_due_in(const struct rate_hist *h, int64_t mono_ms);
/* The oldest sample still kept (0: none yet). */
uint64_t rate_hist_oldest(const struct rate_hist *h);
/* Sample seq (oldest..seq) as one JSON object, no newline. */
void rate_hist_sample_json(const struct rate_hist *h, uint64_t seq, struct textbuf *t);
/* {"interval_ms": ..., "samples": [...]}: every sample kept, oldest first. */
void rate_hist_json(const struct rate_hist *h, struct textbuf *t);

#endif
