/* tests/unit/broker_fixture.h — a one-shard broker's settings for the unit
 * tests that poll a shard (and the control thread) in the test's own thread
 * with an injected clock: test_shard.c, test_part_proxy.c, test_ctl.c;
 * and the shard's start and stop for those that poll one shard
 * (test_part_replica.c, test_part_role.c, test_replica_fetcher.c).
 * Thread: the test's. */
#ifndef SLUICE_TEST_BROKER_FIXTURE_H
#define SLUICE_TEST_BROKER_FIXTURE_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dataplane/broker.h"
#include "dataplane/shard.h"
#include "helpers.h"

/* One shard on 127.0.0.1, data in dir, generous limits; idle_ms is
 * connections.max.idle.ms (-1: never). The rest of *s is left as it is
 * (the caller zeroed it). */
static inline void test_broker_settings(struct broker_settings *s, const char *dir, int64_t idle_ms)
{
	snprintf(s->listen_host, sizeof(s->listen_host), "127.0.0.1");
	snprintf(s->adv_host, sizeof(s->adv_host), "127.0.0.1");
	s->adv_port = 9092;
	s->node_id = 1;
	s->nshards = 1;
	s->num_partitions = 1;
	s->max_request_bytes = 100u << 20;
	s->message_max_bytes = 1u << 20;
	s->queued_max_request_bytes = -1;
	s->max_connections = 1000;
	s->max_connections_per_ip = 1000;
	s->connections_max_idle_ms = idle_ms;
	s->tail_budget = 64u << 20;
	s->retention_check_ms = 300000;
	s->producer_ttl_ms = 86400000;
	s->replica_lag_ms = 30000;
	snprintf(s->data_dir, sizeof(s->data_dir), "%s", dir);
}

/* *b zeroed, then test_broker_settings with its data in a new temporary
 * directory (returned: heap, test_shard_stop removes and frees it) and
 * the control thread's wake fd. The caller adds rings and metadata, then
 * test_shard_start. */
static inline char *test_broker_init(struct broker *b, int64_t idle_ms)
{
	char *dir = test_tmpdir();

	memset(b, 0, sizeof(*b));
	test_broker_settings(&b->set, dir, idle_ms);
	b->wake_fd[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return dir;
}

/* Shard 0 of b created and its thread's state set up (in the test's
 * thread). */
static inline struct shard *test_shard_start(struct broker *b)
{
	struct shard *sh;
	char err[256];

	cr_assert_eq(shard_create(b, 0, &sh, err, sizeof(err)), 0, "shard_create: %s", err);
	b->shards[0] = sh;
	cr_assert_eq(shard_thread_init(sh), 0);
	return sh;
}

/* The shard stopped (with drain: b->stopping set and the shard polled
 * until done, its clock from now on) and destroyed, the wake fd closed
 * and dir removed and freed. */
static inline void test_shard_stop(struct broker *b, struct shard *sh, int drain, uint64_t now, char *dir)
{
	if (sh && drain) {
		__atomic_store_n(&b->stopping, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < 1000 && !shard_done(sh); i++)
			if (shard_poll(sh, now + 60000000000ull + (uint64_t)i, 0) == 0)
				shard_idle(sh);
	}
	if (sh) {
		shard_thread_fini(sh);
		shard_destroy(sh);
	}
	close(b->wake_fd[1]);
	test_rmrf(dir);
	free(dir);
}

#endif
