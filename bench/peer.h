/* bench/peer.h — the peers the suite measures Sluice against, on the same
 * machine in the same run: Redis Streams (bench/peer_redis.c) and NATS
 * JetStream (bench/peer_nats.c). Each run starts its own server on a free
 * loopback port in a fresh directory under params->dir, measures, stops the
 * server and removes the directory.
 *
 * Three measurements, each the counterpart of a Sluice scenario:
 *   produce  params->records records of params->size bytes, as fast as the
 *            client's pipelining/async-ack window allows; counted when the
 *            server acknowledged them (Redis: the XADD reply; JetStream: the
 *            publish ack). Time from the first send to the last ack.
 *   consume  read those records back from the start; every record checked
 *            (length, record index in bytes 0..7 in order); time from the
 *            first read to the last record.
 *   e2e      params->rate records/s for params->e2e_seconds (+1 s warm-up not
 *            counted) while a reader follows the stream; latency = receive
 *            time - the time the record was due, on CLOCK_MONOTONIC (bytes
 *            8..15 carry it), as sluice-bench e2e does.
 * Payload: bytes 0..7 the record index (little endian), 8..15 the due time
 * (e2e), the rest a pattern.
 *
 * Thread: the caller's; progress once a second on stderr.
 * Errors: -errno with result->error saying what failed and what to do
 * (-ENOENT: the server binary is absent — scripts/setup installs it).
 */
#ifndef SLUICE_BENCH_PEER_H
#define SLUICE_BENCH_PEER_H

#include <stdint.h>

#include "bench/hist.h"

struct peer_params {
	uint64_t records;        /* produce, then consume back */
	int size;                /* bytes per record, >= 16 */
	uint64_t rate;           /* e2e: records/s */
	double e2e_seconds;      /* e2e: timed seconds (0: skip e2e) */
	const char *dir;         /* parent of the server's data directory */
};

struct peer_result {
	char name[32];           /* "redis-streams", "nats-jetstream" */
	char version[64];        /* the server's version, as it reports it */
	char durability[160];    /* e.g. "appendonly yes, appendfsync everysec" */
	uint64_t produce_records;
	double produce_seconds;
	struct hist produce_lat; /* ns, send to ack, per record */
	uint64_t consume_records;
	double consume_seconds;
	uint64_t e2e_records;    /* counted after warm-up */
	struct hist e2e;         /* ns */
	uint64_t server_rss_kb;  /* peak seen during the run */
	char error[256];
};

int peer_redis_run(const struct peer_params *p, struct peer_result *r);
int peer_nats_run(const struct peer_params *p, struct peer_result *r);

#endif
