/* bench/suite_run.c — what the suite's scenarios (bench/bench_suite.c) are
 * built from: their rows (a run's rates, a headline row's runs), the
 * limits a row's rate is a fraction of, the brokers (the shared one and
 * those a scenario starts), topics made and dropped, and clients on
 * threads of their own. See suite.h.
 *
 * Thread: the suite's main thread; a client runs on its own thread, which
 * touches only its struct suite_client until it is joined.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/kafka.h"
#include "bench/suite.h"

/* ---- rows ----------------------------------------------------------------- */

struct row *suite_row_new(struct result *r, const char *fmt, ...)
{
	struct row *w;
	va_list ap;

	if (r->nrows >= SUITE_ROWS)
		r->nrows = SUITE_ROWS - 1;   /* never reached: scenarios make < 20 rows */
	w = &r->rows[r->nrows++];
	memset(w, 0, sizeof(*w));
	va_start(ap, fmt);
	vsnprintf(w->label, sizeof(w->label), fmt, ap);
	va_end(ap);
	w->rps = w->mbps = w->p50 = w->p99 = w->p999 = NAN;
	w->ref_rps = w->ref_p50 = w->ref_p99 = w->ref_p999 = NAN;
	w->cpu_ns = w->client_cpu_ns = NAN;
	for (int k = 0; k < SUITE_RUNS; k++)
		w->run_rps[k] = w->run_p99[k] = NAN;
	return w;
}

void suite_fail(struct result *r, int rc, const char *fmt, ...)
{
	va_list ap;

	if (r->rc)
		return;
	r->rc = rc < 0 ? rc : -EIO;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	fprintf(stderr, "suite: %s: FAILED: %s\n", r->sc->name, r->error);
}

/* Rate figures of a run into w. */
void suite_row_rate(struct row *w, uint64_t records, uint64_t bytes, double seconds)
{
	if (seconds > 0) {
		w->rps = (double)records / seconds;
		w->mbps = (double)bytes / seconds / 1e6;
	}
}

/* A headline row's SUITE_RUNS runs into w: records/s and MB/s their
 * means, each run's records/s kept (the report shows how far apart). */
void suite_row_rate_runs(struct row *w, const uint64_t *records, const uint64_t *bytes, const double *seconds)
{
	double rps = 0, mbps = 0;

	for (int k = 0; k < SUITE_RUNS; k++) {
		w->run_rps[k] = seconds[k] > 0 ? (double)records[k] / seconds[k] : 0;
		rps += w->run_rps[k];
		mbps += seconds[k] > 0 ? (double)bytes[k] / seconds[k] / 1e6 : 0;
	}
	w->rps = rps / SUITE_RUNS;
	w->mbps = mbps / SUITE_RUNS;
}

/* The same for latency: each run's p50, p99, p99.9 (ms), their means in w. */
void suite_row_lat_runs(struct row *w, const double (*lat)[3])
{
	w->p50 = w->p99 = w->p999 = 0;
	for (int k = 0; k < SUITE_RUNS; k++) {
		w->p50 += lat[k][0] / SUITE_RUNS;
		w->p99 += lat[k][1] / SUITE_RUNS;
		w->p999 += lat[k][2] / SUITE_RUNS;
		w->run_p99[k] = lat[k][1];
	}
}

/* ---- limits --------------------------------------------------------------- */

/* Produce binds on the slower of the NIC (records come in) and the disk
 * (they go out); memory durability writes nothing before the ack. */
void suite_produce_limit(const struct suite *s, struct row *w, int memory)
{
	if (memory || !s->disk_w_mbps || (s->nic_mbps && s->nic_mbps < s->disk_w_mbps)) {
		w->binds = s->nic_mbps ? s->nic_what : NULL;
		w->limit_mbps = s->nic_mbps;
	} else {
		w->binds = "disk write";
		w->limit_mbps = s->disk_w_mbps;
	}
}

/* Consumers read what was just written, from the broker's memory and the
 * page cache: the NIC binds. */
void suite_consume_limit(const struct suite *s, struct row *w)
{
	w->binds = s->nic_mbps ? s->nic_what : NULL;
	w->limit_mbps = s->nic_mbps;
}

void suite_set_limits(struct suite *s)
{
	const struct hw_profile *p = &s->prof;

	s->nic_what = "NIC";
	if (s->emulating && s->em.nic_gbps > 0) {
		s->nic_mbps = s->em.nic_gbps * 1e9 / 8 / 1e6;
		s->nic_what = "NIC (shaped)";
	} else if (p->has[HW_NIC_GBPS]) {
		s->nic_mbps = hw_get(p, HW_NIC_GBPS) * 1e9 / 8 / 1e6;
	} else if (p->has[HW_LOOPBACK_TCP_GBPS]) {
		/* a probed machine whose NIC reports no line rate: the clients
		 * reach the broker over loopback, and loopback TCP binds */
		s->nic_mbps = hw_get(p, HW_LOOPBACK_TCP_GBPS) * 1e9 / 8 / 1e6;
		s->nic_what = "loopback TCP";
	}
	s->disk_w_mbps = hw_get(p, HW_DISK_WRITE_MBPS);
}

/* ---- brokers -------------------------------------------------------------- */

void suite_base_opts(const struct suite *s, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cmd = "suite";
	o->size = K14_SIZE;
	o->partitions = K14_PARTS;
	o->acks = 1;
	o->compression = "none";
	o->linger_ms = -1;
	o->rate = s->e2e_rate;
	o->shards = s->shards;
	if (s->emulating) {
		o->netns = s->em.netns;
		o->listen_host = s->em.broker_ip;
		o->cgroup = s->em.cgroup[0] ? s->em.cgroup : NULL;
	}
}

int suite_start_broker(struct suite *s, struct broker *br, const char *set)
{
	struct opts o;

	suite_base_opts(s, &o);
	if (set)
		o.sets[o.nsets++] = set;
	return broker_start(br, s->shards, &o);
}

struct broker *suite_shared_broker(struct suite *s, struct result *r)
{
	int rc;

	if (s->shared_up)
		return &s->shared;
	/* a new group's first member waits no rebalance delay (Kafka's 3 s
	 * default): consumer-defaults' rounds join groups, and its rates
	 * start at the first record anyway */
	if ((rc = suite_start_broker(s, &s->shared, "group.initial.rebalance.delay.ms=0")) < 0) {
		suite_fail(r, rc, "starting the broker: %s", strerror(-rc));
		return NULL;
	}
	s->shared_up = 1;
	return &s->shared;
}

int suite_stop_broker(struct broker *br, struct result *r)
{
	if (broker_stop(br) < 0) {
		suite_fail(r, -EIO, "the broker did not stop cleanly (its directory %s is kept)", br->root);
		return -EIO;
	}
	return 0;
}

int suite_new_topic(struct suite *s, struct broker *br, struct result *r, int partitions, char *name, size_t len)
{
	int rc;

	snprintf(name, len, "suite-%s-%d-%d", r->sc->name, (int)getpid(), s->topic_seq++);
	if ((rc = create_topics(br->bootstrap, name, 1, 1, partitions)) < 0)
		suite_fail(r, rc, "creating topic %s (%d partitions): %s", name, partitions, strerror(-rc));
	return rc;
}

/* Drop a measured topic: the shared broker would otherwise keep every
 * scenario's log, and a full run writes more than most disks hold. */
void suite_drop_topic(struct broker *br, const char *topic)
{
	if (delete_topic(br->bootstrap, topic) < 0)
		fprintf(stderr, "suite: could not delete topic %s: its log stays on disk until the broker "
			"stops\n", topic);
}

/* ---- clients on threads --------------------------------------------------- */

static void *client_main(void *arg)
{
	struct suite_client *c = arg;

	if (c->consume)
		c->rc = kafka_consume(&c->o, c->br, c->topic, c->records, &c->run, c->label);
	else
		c->rc = kafka_produce(&c->o, c->br, c->topic, c->records, &c->run, c->label);
	return NULL;
}

int suite_client_start(struct suite_client *c)
{
	int e = pthread_create(&c->th, NULL, client_main, c);

	return e ? -e : 0;
}

/* Records of partitions p % mod == rem when index i went to i % parts. */
uint64_t suite_share_of(uint64_t records, int parts, int mod, int rem)
{
	uint64_t n = 0;

	for (int p = 0; p < parts; p++)
		if (mod <= 1 || p % mod == rem)
			n += records / (uint64_t)parts + ((uint64_t)p < records % (uint64_t)parts);
	return n;
}

/* Run n clients at once; their aggregate rate is the records of all over
 * the longest one's time (they start together). */
int suite_run_clients(struct suite_client *c, int n, struct result *r, uint64_t *records, uint64_t *bytes,
		      double *secs)
{
	int rc = 0;

	*records = *bytes = 0;
	*secs = 0;
	for (int i = 0; i < n; i++)
		if ((c[i].rc = suite_client_start(&c[i])) < 0) {
			suite_fail(r, c[i].rc, "starting a client thread: %s", strerror(-c[i].rc));
			n = i;
			rc = -EAGAIN;
		}
	for (int i = 0; i < n; i++) {
		pthread_join(c[i].th, NULL);
		if (c[i].rc < 0 && !rc) {
			rc = c[i].rc;
			suite_fail(r, rc, "%s: %s", c[i].label, strerror(-rc));
		}
		*records += c[i].run.records;
		*bytes += c[i].run.bytes;
		if (c[i].run.seconds > *secs)
			*secs = c[i].run.seconds;
	}
	return rc;
}

void suite_client_init(struct suite_client *c, const struct suite *s, struct broker *br, const char *topic,
		       uint64_t records, int consume, const char *label)
{
	memset(c, 0, sizeof(*c));
	suite_base_opts(s, &c->o);
	c->br = br;
	snprintf(c->topic, sizeof(c->topic), "%s", topic);
	snprintf(c->label, sizeof(c->label), "%s", label);
	c->records = records;
	c->consume = consume;
}
