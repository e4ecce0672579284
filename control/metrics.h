/* control/metrics.h — what the admin endpoint shows: Prometheus text for
 * /metrics and JSON for /v1/health, /v1/shards, /v1/partitions.
 *
 * Thread: ctl (@thread ctl) for everything: it reads the metadata snapshot
 * and the group coordinator (its own), and the shards' counters and the
 * partitions' published blocks with relaxed atomic loads (struct
 * shard_stats, struct part_pub, struct tail_pool's words): a scrape never
 * stops or slows a shard. Owns nothing but the previous scrape's readings
 * (busy ratio). Errors: the text goes to a textbuf (oom flagged there).
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdint.h>

struct broker;
struct ctl;
struct textbuf;

/* The whole scrape, Prometheus text format 0.0.4. Also starts a lag scan
 * of the groups (at most one per 500 ms, none while the broker stops),
 * whose answers a later scrape shows. */
void metrics_render(struct ctl *ctl, struct broker *b, struct textbuf *t);
/* {"status": "ready"|"recovering"|"stopping"|"degraded", "reasons": [...]}:
 * returns 1 when ready. */
int metrics_health(struct ctl *ctl, struct broker *b, struct textbuf *t);
/* Per shard: partitions owned and load. */
void metrics_shards_json(struct ctl *ctl, struct broker *b, struct textbuf *t);
/* One partition's state; -ENOENT if there is no such partition. */
int metrics_partition_json(struct ctl *ctl, struct broker *b, const char *topic, int32_t n, struct textbuf *t);

#endif
