/* tests/unit/broker_fixture.h — a one-shard broker's settings for the unit
 * tests that poll a shard (and the control thread) in the test's own thread
 * with an injected clock: test_shard.c, test_part_proxy.c, test_ctl.c.
 * Thread: the test's. */
#ifndef SLUICE_TEST_BROKER_FIXTURE_H
#define SLUICE_TEST_BROKER_FIXTURE_H

#include <stdint.h>
#include <stdio.h>

#include "dataplane/broker.h"

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

#endif
