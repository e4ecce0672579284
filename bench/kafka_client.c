/* bench/kafka_client.c — librdkafka clients of the benchmarks
 * (bench/kafka.h): their configuration (base_conf: bootstrap.servers and an
 * error callback counting into struct client_errs), topic creation and
 * deletion through the admin API, and the check that a client talks to the
 * broker this run started.
 *
 * Thread: create_topics and delete_topic from the benchmark's main thread;
 * conf_set, base_conf and check_cluster from any thread. The error
 * callback counts into the client_errs its client was given. Errors:
 * -errno (conf_set -1, base_conf NULL).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/kafka.h"

/* ---- clients ------------------------------------------------------------ */


static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct client_errs *e = opaque;

	(void)rk;
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__FATAL ||
	    err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__TIMED_OUT) {
		if (!e->count++)
			snprintf(e->first, sizeof(e->first), "%s: %s", rd_kafka_err2name(err), reason);
		if (err == RD_KAFKA_RESP_ERR__FATAL || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
			e->fatal = 1;
	}
	fprintf(stderr, "kafka: client error %s: %s\n", rd_kafka_err2name(err), reason);
}

int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kafka: client config %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

/* client_security's pairs (kafka.h): written by the main thread only
 * while no client is being made, read by base_conf. */
static const char *const *sec_kv;
static int sec_n;
/* client_props's KEY=VALUE strings, the same way */
static const char *const *prop_kv;
static int prop_n;

void client_security(const char *const *kv, int n)
{
	sec_kv = kv;
	sec_n = n;
}

void client_props(const char *const *kv, int n)
{
	prop_kv = kv;
	prop_n = n;
}

rd_kafka_conf_t *base_conf(const char *bootstrap, struct client_errs *errs)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();

	if (conf_set(c, "bootstrap.servers", bootstrap) < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	for (int i = 0; i < sec_n; i++)
		if (conf_set(c, sec_kv[2 * i], sec_kv[2 * i + 1]) < 0) {
			rd_kafka_conf_destroy(c);
			return NULL;
		}
	for (int i = 0; i < prop_n; i++) {
		const char *eq = strchr(prop_kv[i], '=');
		char key[128];

		if (!eq || eq == prop_kv[i] || (size_t)(eq - prop_kv[i]) >= sizeof(key)) {
			fprintf(stderr, "kafka: --client-set %s: expects KEY=VALUE\n", prop_kv[i]);
			rd_kafka_conf_destroy(c);
			return NULL;
		}
		memcpy(key, prop_kv[i], (size_t)(eq - prop_kv[i]));
		key[eq - prop_kv[i]] = '\0';
		if (conf_set(c, key, eq + 1) < 0) {
			rd_kafka_conf_destroy(c);
			return NULL;
		}
	}
	rd_kafka_conf_set_error_cb(c, error_cb);
	rd_kafka_conf_set_opaque(c, errs);
	return c;
}

/* Topic admin: create `n` topics "<prefix>-<i>" (or just prefix if n == 1
 * and single) with p partitions each, in requests of at most 20 topics,
 * and wait until metadata shows every partition with a leader. */
/* A client for admin requests (a producer handle, as librdkafka wants). */
static rd_kafka_t *admin_client(const char *bootstrap, struct client_errs *errs)
{
	rd_kafka_conf_t *c = base_conf(bootstrap, errs);
	rd_kafka_t *rk;
	char err[256];

	if (!c)
		return NULL;
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "kafka: admin client: %s\n", err);
	return rk;
}

int create_topics(const char *bootstrap, const char *prefix, int n, int single, int p)
{
	return create_topics_rf(bootstrap, prefix, n, single, p, 1);
}

int create_topics_rf(const char *bootstrap, const char *prefix, int n, int single, int p, int rf)
{
	struct client_errs errs = { 0 };
	rd_kafka_t *rk = admin_client(bootstrap, &errs);
	char err[256];
	rd_kafka_queue_t *q;
	int rc = 0;

	if (!rk)
		return -EINVAL;
	q = rd_kafka_queue_new(rk);
	for (int at = 0; at < n && !rc; at += 20) {
		int k = n - at < 20 ? n - at : 20;
		rd_kafka_NewTopic_t *nt[20];
		rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
		rd_kafka_event_t *ev;

		rd_kafka_AdminOptions_set_operation_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
		rd_kafka_AdminOptions_set_request_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
		for (int i = 0; i < k; i++) {
			char name[200];

			if (single)
				snprintf(name, sizeof(name), "%s", prefix);
			else
				snprintf(name, sizeof(name), "%s-%d", prefix, at + i);
			nt[i] = rd_kafka_NewTopic_new(name, p, rf, err, sizeof(err));
		}
		rd_kafka_CreateTopics(rk, nt, (size_t)k, ao, q);
		ev = rd_kafka_queue_poll(q, (READY_TIMEOUT + 5) * 1000);
		if (!ev) {
			fprintf(stderr, "kafka: CreateTopics: no result in %d s\n", READY_TIMEOUT + 5);
			rc = -ETIMEDOUT;
		} else if (rd_kafka_event_error(ev)) {
			fprintf(stderr, "kafka: CreateTopics: %s\n", rd_kafka_event_error_string(ev));
			rc = -EIO;
		} else {
			const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
			size_t cnt;
			const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &cnt);

			for (size_t i = 0; i < cnt; i++)
				if (rd_kafka_topic_result_error(tr[i])) {
					fprintf(stderr, "kafka: CreateTopics %s: %s: %s\n",
						rd_kafka_topic_result_name(tr[i]),
						rd_kafka_err2name(rd_kafka_topic_result_error(tr[i])),
						rd_kafka_topic_result_error_string(tr[i]) ?
						rd_kafka_topic_result_error_string(tr[i]) : "");
					rc = -EIO;
				}
			if (cnt != (size_t)k) {
				fprintf(stderr, "kafka: CreateTopics: %zu results for %d topics\n", cnt, k);
				rc = -EIO;
			}
		}
		if (ev)
			rd_kafka_event_destroy(ev);
		rd_kafka_NewTopic_destroy_array(nt, (size_t)k);
		rd_kafka_AdminOptions_destroy(ao);
	}
	/* every partition of every topic has a leader and rf in-sync replicas
	 * in metadata */
	for (uint64_t deadline = bench_now_ns() + READY_TIMEOUT * 1000000000ull; !rc;) {
		const struct rd_kafka_metadata *md;
		int ok = 0;

		if (rd_kafka_metadata(rk, 1, NULL, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
			for (int i = 0; i < md->topic_cnt; i++) {
				const char *t = md->topics[i].topic;
				size_t pl = strlen(prefix);
				int good = md->topics[i].err == 0 && md->topics[i].partition_cnt == p;

				for (int j = 0; good && j < md->topics[i].partition_cnt; j++)
					good = md->topics[i].partitions[j].leader >= 0 &&
					       md->topics[i].partitions[j].isr_cnt >= rf;
				if (good && !strncmp(t, prefix, pl) &&
				    (single ? t[pl] == 0 : t[pl] == '-'))
					ok++;
			}
			rd_kafka_metadata_destroy(md);
		}
		if (ok == n)
			break;
		if (bench_now_ns() > deadline) {
			fprintf(stderr, "kafka: %d of %d topics ready after %d s\n", ok, n, READY_TIMEOUT);
			rc = -ETIMEDOUT;
			break;
		}
		usleep(100000);
	}
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return rc;
}

/* The cluster id the client sees must be the one our broker printed. */
int delete_topic(const char *bootstrap, const char *name)
{
	struct client_errs errs = { 0 };
	rd_kafka_t *rk = admin_client(bootstrap, &errs);
	rd_kafka_DeleteTopic_t *dt;
	rd_kafka_AdminOptions_t *ao;
	rd_kafka_queue_t *q;
	rd_kafka_event_t *ev;
	char err[256];
	int rc = 0;

	if (!rk)
		return -EINVAL;
	q = rd_kafka_queue_new(rk);
	ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
	rd_kafka_AdminOptions_set_request_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
	dt = rd_kafka_DeleteTopic_new(name);
	rd_kafka_DeleteTopics(rk, &dt, 1, ao, q);
	ev = rd_kafka_queue_poll(q, (READY_TIMEOUT + 5) * 1000);
	if (!ev) {
		fprintf(stderr, "kafka: DeleteTopics %s: no result in %d s\n", name, READY_TIMEOUT + 5);
		rc = -ETIMEDOUT;
	} else if (rd_kafka_event_error(ev)) {
		fprintf(stderr, "kafka: DeleteTopics %s: %s\n", name, rd_kafka_event_error_string(ev));
		rc = -EIO;
	} else {
		size_t cnt;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &cnt);

		if (cnt != 1 || rd_kafka_topic_result_error(tr[0])) {
			fprintf(stderr, "kafka: DeleteTopics %s: %s\n", name,
				cnt == 1 ? rd_kafka_err2name(rd_kafka_topic_result_error(tr[0])) : "no result");
			rc = -EIO;
		}
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_DeleteTopic_destroy(dt);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return rc;
}

int check_cluster(rd_kafka_t *rk, const struct broker *br)
{
	char *id;
	int rc = 0;

	if (!br->cluster_id[0])
		return 0;
	id = rd_kafka_clusterid(rk, 10000);
	if (!id || strcmp(id, br->cluster_id)) {
		fprintf(stderr, "kafka: the broker at %s has cluster id %s, ours printed %s: another "
			"process shares the port\n", br->bootstrap, id ? id : "(none)", br->cluster_id);
		rc = -EADDRINUSE;
	}
	if (id)
		rd_kafka_mem_free(rk, id);
	return rc;
}
