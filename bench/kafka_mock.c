/* bench/kafka_mock.c — librdkafka's own in-process mock cluster
 * (rdkafka_mock.h) as a target of the librdkafka loads: `sluice-bench
 * produce --compare-mock` runs the same producer against it and against
 * Sluice, alternating. The mock keeps every record in memory and runs in
 * threads of this process: what a broker costs a producer when it does
 * nothing but answer, the bar issue 22's first row sets.
 *
 * Thread: mock_open/mock_close from the benchmark's main thread; the
 * mock's brokers are librdkafka's own threads.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/kafka.h"               /* rdkafka.h, which rdkafka_mock.h needs first */

#include <librdkafka/rdkafka_mock.h>

int mock_open(struct mock *m, const char *topic, int partitions)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	char err[256];
	const char *boot;

	memset(m, 0, sizeof(*m));
	/* a handle for the mock's logs and its threads; it sends nothing */
	m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!m->rk) {
		fprintf(stderr, "kafka: mock cluster: its handle: %s\n", err);
		rd_kafka_conf_destroy(c);
		return -EINVAL;
	}
	m->mc = rd_kafka_mock_cluster_new(m->rk, 1);
	if (!m->mc) {
		fprintf(stderr, "kafka: mock cluster: rd_kafka_mock_cluster_new failed\n");
		mock_close(m);
		return -ENOMEM;
	}
	if (rd_kafka_mock_topic_create(m->mc, topic, partitions, 1)) {
		fprintf(stderr, "kafka: mock cluster: topic %s of %d partitions not created\n", topic, partitions);
		mock_close(m);
		return -EINVAL;
	}
	boot = rd_kafka_mock_cluster_bootstraps(m->mc);
	memset(&m->br, 0, sizeof(m->br));
	m->br.out_fd = -1;
	m->br.shards = -1;
	snprintf(m->br.bootstrap, sizeof(m->br.bootstrap), "%s", boot);
	return 0;
}

void mock_close(struct mock *m)
{
	if (m->mc)
		rd_kafka_mock_cluster_destroy(m->mc);
	if (m->rk)
		rd_kafka_destroy(m->rk);
	m->mc = NULL;
	m->rk = NULL;
}
