/* dataplane/repl_quota.h — the leader's replication throttle (Kafka's
 * leader.replication.throttled.rate with the topics'
 * leader.replication.throttled.replicas; Kafka's ReplicationQuotaManager
 * on the leader): what a leader sends the followers of a throttled
 * partition that are outside the ISR, in its answers to their replica
 * fetches (Fetch, or the native REPLICA_FETCH), comes out of a byte
 * budget of the owner shard (a token bucket, struct repl_throttle: the
 * node's rate divided among its shards, at most a second of it saved).
 * Over the budget the partition gets no records in that answer (as
 * Kafka's leader leaves a throttled partition's records out), and its
 * fetch is not woken by new records: it waits its max_wait_ms (Kafka's
 * DelayedFetch counts no throttled bytes). The ISR is never throttled,
 * so acks=all is not slowed. A partition is throttled on its leader when
 * the control thread's role says so (part_role.leader_throttled: a
 * reassignment adds replicas, or the topic's list names partition:this
 * broker, or '*').
 *
 * Thread: the owner shard of the partition (@thread owner); nothing
 * allocated, locked or read but the shard's own bucket and the rate the
 * control thread stores (relaxed). */
#ifndef SLUICE_REPL_QUOTA_H
#define SLUICE_REPL_QUOTA_H

#include <stdint.h>

struct part;

/* Before reading for follower `replica`'s fetch of p: 1 when it is over
 * the leader's budget (read nothing); 0 to read, *max_bytes lowered to
 * what the budget has left when p is throttled for it (at least one
 * batch is read all the same: the budget may go below zero). */
int repl_quota_take(struct part *p, int32_t replica, uint32_t *max_bytes);
/* The read for it carried `bytes`: spent when p is throttled for it. */
void repl_quota_spend(struct part *p, int32_t replica, int64_t bytes);
/* 1 when the owner's budget has bytes now (a held fetch may try again). */
int repl_quota_open(struct part *p);

#endif
