/* control/console_api.h — the web console's JSON, served by the admin
 * endpoint under /v1/ (control/admin_http.c routes to it) and usable by
 * scripts too (docs/console.md lists every field):
 *
 *   GET /v1/cluster          this node, the brokers, the shards with their
 *                            busy share, partition health, log directories,
 *                            and the limits of the hardware profile loaded
 *   GET /v1/topics           every topic: partitions, size, counters,
 *                            retention and cleanup policy
 *   GET /v1/topics/<name>    one topic, each partition: leader, replicas,
 *                            ISR, log start, high watermark, size, shard
 *   GET /v1/groups           every consumer group: state, members, lag
 *   GET /v1/groups/<id>      one group: members and their assignments, and
 *                            per partition the committed offset, the lag
 *                            and the age of the oldest unconsumed record
 *   GET /v1/transactions     the transactional ids coordinated here, their
 *                            state, age and partitions; the partitions held
 *                            here whose last stable offset is below the
 *                            high watermark (what read_committed waits for)
 *
 * Counters are cumulative (records, bytes since the partition opened
 * here); the console turns two readings into a rate. Everything is read
 * from what the control thread owns (the metadata snapshot, the groups)
 * and what the shards publish with relaxed atomic stores (part_pub,
 * shard_stats): no request reaches a shard, except that a groups read
 * starts a lag scan (group_lag_scan_every), at most one each 500 ms.
 *
 * Thread: ctl (@thread ctl) for everything. Owns: nothing past a call.
 * Errors: 0, or -ENOENT (no such topic or group); JSON appended to t.
 */
#ifndef SLUICE_CONSOLE_API_H
#define SLUICE_CONSOLE_API_H

struct broker;
struct ctl;
struct rate_hist;
struct textbuf;

struct hw_profile;
/* prof: hardware.profile as loaded (NULL: none), path its file. */
void console_cluster_json(struct ctl *ctl, struct broker *b, const struct rate_hist *h, const struct hw_profile *prof,
			  const char *path, struct textbuf *t);
void console_topics_json(struct ctl *ctl, struct broker *b, struct textbuf *t);
int console_topic_json(struct ctl *ctl, struct broker *b, const char *name, struct textbuf *t);
void console_groups_json(struct ctl *ctl, struct broker *b, struct textbuf *t);
int console_group_json(struct ctl *ctl, struct broker *b, const char *id, struct textbuf *t);
void console_transactions_json(struct ctl *ctl, struct broker *b, struct textbuf *t);

#endif
