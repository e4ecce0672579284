/* bench/capacity.c — the capacity planner's model: see capacity.h and
 * docs/capacity.md. */
#include "bench/capacity.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cap_res_name[CAP_NRES] = {
	[CAP_CPU] = "cpu",
	[CAP_DISK_WRITE] = "disk write",
	[CAP_DISK_SPACE] = "disk space",
	[CAP_NIC_IN] = "nic in",
	[CAP_NIC_OUT] = "nic out",
	[CAP_MEMORY] = "memory",
	[CAP_PARTITIONS] = "partitions",
};

const char *const cap_res_unit[CAP_NRES] = {
	[CAP_CPU] = "cores",
	[CAP_DISK_WRITE] = "MB/s",
	[CAP_DISK_SPACE] = "GiB",
	[CAP_NIC_IN] = "MB/s",
	[CAP_NIC_OUT] = "MB/s",
	[CAP_MEMORY] = "GiB",
	[CAP_PARTITIONS] = "replicas",
};

/* A record's bytes beyond its key, value and headers in a v2 batch (its
 * length, attributes, deltas and counts as varints), and a batch's header. */
#define RECORD_OVERHEAD 10.0
#define BATCH_HEADER 61.0
/* What a broker keeps in memory whatever the load (the process, its rings
 * and pools, the page cache its metadata and indexes use), and per
 * partition replica (its smallest tail chunk, storage.md). */
#define MEMORY_BASE_GIB 1.0
#define PART_TAIL_BYTES (16.0 * 1024)
/* Disk per partition replica beyond its records: the first extent of its
 * segment, preallocated (storage.md), and the indexes (about 1 %). */
#define PART_PREALLOC_BYTES (64.0 * 1024)
#define INDEX_OVERHEAD 0.01

static void note(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));

static void note(char *buf, size_t cap, const char *f, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= cap)
		return;
	va_start(ap, f);
	vsnprintf(buf + used, cap - used, f, ap);
	va_end(ap);
	used = strlen(buf);
	if (used + 1 < cap) {
		buf[used] = '\n';
		buf[used + 1] = '\0';
	}
}

void cap_workload_defaults(struct cap_workload *w)
{
	memset(w, 0, sizeof(*w));
	w->record_bytes = 1000;
	w->partitions = 60;
	w->retention_s = 7 * 86400.0;
	w->replication = 3;
	w->fanout = 1;
	w->acks = CAP_ACKS_ALL;
	w->batch_records = 100;
	w->concurrency = 1;
	w->headroom = 0.3;
	w->tail_s = 60;
}

/* ---- results.json --------------------------------------------------------- */

static double num(const json_t *o, const char *key)
{
	const json_t *v = o ? json_object_get(o, key) : NULL;

	return json_is_number(v) ? json_number_value(v) : NAN;
}

static const json_t *scenario(const json_t *root, const char *name)
{
	const json_t *sc = json_object_get(root, "scenarios");
	size_t i;
	const json_t *s;

	json_array_foreach(sc, i, s) {
		const json_t *n = json_object_get(s, "name"), *st = json_object_get(s, "status");

		if (json_is_string(n) && !strcmp(json_string_value(n), name))
			return json_is_string(st) && !strcmp(json_string_value(st), "ok") ? s : NULL;
	}
	return NULL;
}

/* The scenario's row whose label contains part (NULL: the first). */
static const json_t *row(const json_t *sc, const char *part)
{
	const json_t *rows = sc ? json_object_get(sc, "rows") : NULL;
	size_t i;
	const json_t *r;

	json_array_foreach(rows, i, r) {
		const json_t *l = json_object_get(r, "label");

		if (!part || (json_is_string(l) && strstr(json_string_value(l), part)))
			return r;
	}
	return NULL;
}

/* Weighted least squares of t = a + b x with weights 1 / t^2 (relative
 * error); a and b kept non-negative (a noisy sweep can tilt the line). */
static void fit(const double *x, const double *t, int n, double *a, double *b)
{
	double s0 = 0, s1 = 0, s2 = 0, t0 = 0, t1 = 0, det;

	for (int i = 0; i < n; i++) {
		double w = 1.0 / (t[i] * t[i]);

		s0 += w;
		s1 += w * x[i];
		s2 += w * x[i] * x[i];
		t0 += w * t[i];
		t1 += w * x[i] * t[i];
	}
	det = s0 * s2 - s1 * s1;
	*a = det != 0 ? (t0 * s2 - s1 * t1) / det : t0 / s0;
	*b = det != 0 ? (s0 * t1 - s1 * t0) / det : 0;
	if (*b < 0) {
		*b = 0;
		*a = t0 / s0;
	} else if (*a < 0) {
		*a = 0;
		*b = t1 / s2;
	}
}

static void load_profile(const json_t *root, struct hw_profile *p)
{
	const json_t *o = json_object_get(root, "profile"), *d = json_object_get(o, "description");

	memset(p, 0, sizeof(*p));
	snprintf(p->description, sizeof(p->description), "%s", json_is_string(d) ? json_string_value(d) : "?");
	for (int k = 0; k < HW_NKEYS; k++) {
		double v = num(o, hw_key_name[k]);

		if (!isnan(v) && v > 0) {
			p->v[k] = v;
			p->has[k] = 1;
		}
	}
}

int cap_calib_parse(const char *text, size_t len, const char *name, struct cap_calib *c, char *err,
		    size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	const json_t *fmt, *sc, *r;

	memset(c, 0, sizeof(*c));
	snprintf(c->source, sizeof(c->source), "%s", name);
	if (!root) {
		snprintf(err, errlen, "%s:%d: not JSON: %s", name, je.line, je.text);
		return -EINVAL;
	}
	fmt = json_object_get(root, "format");
	if (!json_is_string(fmt) || strncmp(json_string_value(fmt), "sluice-bench suite results", 26)) {
		snprintf(err, errlen, "%s: not the results.json of a sluice-bench suite run (no \"format\": "
			 "\"sluice-bench suite results N\")", name);
		json_decref(root);
		return -EINVAL;
	}
	if (json_is_true(json_object_get(root, "quick")))
		note(c->notes, sizeof(c->notes), "the run was --quick (short runs, small sizes): a smoke "
		     "test's figures, not a calibration to buy servers by");
	load_profile(root, &c->prof);

	c->producer_rps = num(row(scenario(root, "k14-producer"), NULL), "records_per_s");
	c->consumer_rps = num(row(scenario(root, "k14-consumer"), NULL), "records_per_s");
	c->prodcons_rps = num(row(scenario(root, "k14-prodcons"), "produce"), "records_per_s");
	c->producer_cpu_ns = num(row(scenario(root, "k14-producer"), NULL), "broker_cpu_ns_per_record");
	c->consumer_cpu_ns = num(row(scenario(root, "k14-consumer"), NULL), "broker_cpu_ns_per_record");
	c->prodcons_cpu_ns = num(row(scenario(root, "k14-prodcons"), "produce"), "broker_cpu_ns_per_record");
	/* the broker's own CPU where every row that sets a cost has it */
	c->cpu_measured = 1;
	if ((sc = scenario(root, "size-sweep"))) {
		const json_t *w;
		size_t i;

		json_array_foreach(json_object_get(sc, "rows"), i, w)
			if (num(w, "records_per_s") > 0 && !(num(w, "broker_cpu_ns_per_record") > 0))
				c->cpu_measured = 0;
	} else if (!(c->producer_cpu_ns > 0)) {
		c->cpu_measured = 0;
	}
	if (!c->cpu_measured)
		note(c->notes, sizeof(c->notes), "the rows have no broker CPU (a results.json of an older suite): "
		     "costs are the run's machine-seconds, the clients' CPU included");

	/* produce: the size sweep's points that the CPU bound (a point at
	 * 80 % or more of the disk's or the NIC's limit tells the device's
	 * cost, which the plan counts on its own) */
	if ((sc = scenario(root, "size-sweep"))) {
		const json_t *rows = json_object_get(sc, "rows"), *w;
		double t[16];
		size_t i;

		json_array_foreach(rows, i, w) {
			const json_t *l = json_object_get(w, "label");
			double size = json_is_string(l) ? strtod(json_string_value(l), NULL) : NAN;
			double rps = num(w, "records_per_s"), frac = num(w, "fraction_of_limit");

			if (c->nsweep == 16 || !(size > 0) || !(rps > 0))
				continue;
			if (frac >= 0.8) {
				note(c->notes, sizeof(c->notes), "size-sweep %.0f B left out of the fit: at %.0f %% "
				     "of %s, the device's cost, not the broker's", size, frac * 100,
				     json_string_value(json_object_get(w, "binds")) ?: "its limit");
				continue;
			}
			c->sweep_size[c->nsweep] = size;
			c->sweep_rps[c->nsweep] = rps;
			c->sweep_t[c->nsweep] = c->cpu_measured ? num(w, "broker_cpu_ns_per_record") / 1e9 : 1.0 / rps;
			t[c->nsweep] = c->sweep_t[c->nsweep];
			c->nsweep++;
		}
		if (c->nsweep >= 2) {
			fit(c->sweep_size, t, c->nsweep, &c->rec_s, &c->byte_s);
			c->sweep_points = c->nsweep;
		}
	}
	if (!c->sweep_points) {
		if (!(c->producer_rps > 0)) {
			snprintf(err, errlen, "%s: neither a size-sweep (two points or more) nor a k14-producer row "
				 "that ran: nothing to calibrate the produce cost by (run `sluice-bench suite "
				 "size-sweep k14-producer ...`)", name);
			json_decref(root);
			return -EINVAL;
		}
		c->rec_s = c->cpu_measured ? c->producer_cpu_ns / 1e9 : 1.0 / c->producer_rps;
		note(c->notes, sizeof(c->notes), "no size-sweep: the produce cost is k14-producer's (100-byte "
		     "records) for every size, its per-byte part unknown");
	}
	if (c->cpu_measured && c->consumer_cpu_ns > 0 && c->producer_cpu_ns > 0)
		c->consume_ratio = c->consumer_cpu_ns / c->producer_cpu_ns;
	else if (c->consumer_rps > 0 && c->producer_rps > 0)
		c->consume_ratio = c->producer_rps / c->consumer_rps;
	else {
		c->consume_ratio = NAN;
		note(c->notes, sizeof(c->notes), "no k14-producer and k14-consumer rows: a consumer's read "
		     "counted as costly as a produce");
	}
	r = row(scenario(root, "k14-replicated"), "acks=1");
	if (num(r, "records_per_s") > 0 && c->producer_rps > 0) {
		/* three nodes on one machine: an append and two copies a record */
		c->replica_ratio = (1.0 / num(r, "records_per_s") - 1.0 / c->producer_rps) /
				   (2.0 / c->producer_rps);
		if (c->replica_ratio < 0)
			c->replica_ratio = 0;
	} else {
		c->replica_ratio = NAN;
		note(c->notes, sizeof(c->notes), "no k14-replicated row: a follower's copy counted as costly "
		     "as the leader's append");
	}
	r = row(scenario(root, "k14-latency"), NULL);
	c->e2e_p50_ms = num(r, "p50_ms");
	c->e2e_p99_ms = num(r, "p99_ms");
	c->e2e_rate = NAN;
	if (r && json_is_string(json_object_get(r, "label"))) {
		const char *at = strstr(json_string_value(json_object_get(r, "label")), " at ");

		if (at)
			c->e2e_rate = strtod(at + 4, NULL);
	}
	if (isnan(c->e2e_p99_ms))
		note(c->notes, sizeof(c->notes), "no k14-latency row: no latency estimate");
	c->max_partitions = NAN;
	if ((sc = scenario(root, "partition-sweep"))) {
		const json_t *w;
		size_t i;

		json_array_foreach(json_object_get(sc, "rows"), i, w) {
			const json_t *l = json_object_get(w, "label");
			double n = json_is_string(l) ? strtod(json_string_value(l), NULL) : NAN;
			double t = c->cpu_measured ? num(w, "broker_cpu_ns_per_record") / 1e9 : 1.0 / num(w, "records_per_s");

			if (c->npsweep == 8 || !(n > 0) || !(t > 0) || isinf(t))
				continue;
			c->psweep_n[c->npsweep] = n;
			c->psweep_t[c->npsweep++] = t;
			if (!(n <= c->max_partitions))
				c->max_partitions = n;
		}
	}
	if (isnan(c->max_partitions))
		note(c->notes, sizeof(c->notes), "no partition-sweep: partitions per server neither costed nor "
		     "checked");
	json_decref(root);
	return 0;
}

int cap_calib_load(const char *path, struct cap_calib *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int rc;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	do {
		if (len + 65536 > cap) {
			char *t = realloc(text, cap = cap ? cap * 2 : 1 << 20);

			if (!t) {
				free(text);
				fclose(f);
				snprintf(err, errlen, "%s: out of memory", path);
				return -ENOMEM;
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	rc = ferror(f) ? -EIO : 0;
	fclose(f);
	if (rc < 0)
		snprintf(err, errlen, "%s: read error", path);
	else
		rc = cap_calib_parse(text, len, path, c, err, errlen);
	free(text);
	return rc;
}

double cap_produce_cost(const struct cap_calib *c, double s)
{
	return c->rec_s + c->byte_s * s;
}

/* ---- the plan ---------------------------------------------------------------- */

int cap_workload_check(const struct cap_workload *w, char *err, size_t errlen)
{
#define BAD(key, cond, what)                                                   \
	do {                                                                   \
		if (cond) {                                                    \
			snprintf(err, errlen, "%s: %s", key, what);            \
			return -EINVAL;                                        \
		}                                                              \
	} while (0)
	BAD("rate", !(w->rate > 0) || isinf(w->rate), "records a second, a number above 0");
	BAD("peak-rate", w->peak_rate != 0 && (!(w->peak_rate >= w->rate) || isinf(w->peak_rate)),
	    "at least the average rate");
	BAD("record-bytes", !(w->record_bytes >= 1 && w->record_bytes <= 1e9), "bytes, from 1 to 10^9");
	BAD("record-bytes-p99", w->record_bytes_p99 != 0 && !(w->record_bytes_p99 >= w->record_bytes &&
							       w->record_bytes_p99 <= 1e9),
	    "at least the average size, at most 10^9");
	BAD("partitions", !(w->partitions >= 1 && w->partitions <= 1e7), "from 1 to 10^7");
	BAD("retention", !(w->retention_s > 0 && w->retention_s <= 100 * 365 * 86400.0),
	    "a time above 0 (s, m, h, d), at most 100 years");
	BAD("replication-factor", w->replication < 1 || w->replication > 16, "from 1 to 16");
	BAD("fanout", w->fanout < 0 || w->fanout > 1000, "consumer groups, from 0 to 1000");
	BAD("acks", w->acks != 0 && w->acks != 1 && w->acks != CAP_ACKS_ALL, "0, 1 or all");
	BAD("retries", !(w->retry >= 0 && w->retry <= 10), "a fraction of the traffic, from 0 to 10");
	BAD("batch-records", !(w->batch_records >= 1 && w->batch_records <= 1e6), "from 1 to 10^6");
	BAD("processing-ms", !(w->processing_ms >= 0 && w->processing_ms <= 3.6e6), "from 0 to an hour");
	BAD("concurrency", w->concurrency < 1 || w->concurrency > 1000000, "from 1 to 10^6");
	BAD("headroom", !(w->headroom >= 0 && w->headroom < 1), "a fraction from 0 to below 1");
	BAD("disk-gib", !(w->disk_gib >= 0) || isinf(w->disk_gib), "GiB, 0 or more");
	BAD("tail-seconds", !(w->tail_s >= 0 && w->tail_s <= 86400), "from 0 to a day");
#undef BAD
	return 0;
}

/* The partition-sweep's cost at n partitions of one server, interpolated
 * in log-log between its points (clamped at its ends). */
static double sweep_cost(const struct cap_calib *c, double n)
{
	int i;

	if (n <= c->psweep_n[0])
		return c->psweep_t[0];
	for (i = 1; i < c->npsweep && c->psweep_n[i] < n; i++)
		;
	if (i == c->npsweep)
		return c->psweep_t[c->npsweep - 1];
	{
		double f = log(n / c->psweep_n[i - 1]) / log(c->psweep_n[i] / c->psweep_n[i - 1]);

		return exp(log(c->psweep_t[i - 1]) + f * log(c->psweep_t[i] / c->psweep_t[i - 1]));
	}
}

/* A record's cost at n partition replicas a server over its cost at the
 * K14 rows' 6 (never below 1: fewer partitions are not credited). */
static double part_factor(const struct cap_calib *c, double n)
{
	double f;

	if (c->npsweep < 2)
		return 1;
	f = sweep_cost(c, n) / sweep_cost(c, 6);
	return f > 1 ? f : 1;
}

struct model {
	const struct cap_calib *c;
	const struct cap_workload *w;
	double peak, sent, bytes, cost, disk_gib, nic_mbps, max_parts;
	double have[CAP_NRES];
	double cpu_scale, cores, clock_ratio;
};

/* Resource use of one server out of n at the peak (disk space: at the
 * average rate over the retention). */
static void use_at(const struct model *m, int n, struct cap_use *u)
{
	const struct cap_workload *w = m->w;
	double rf = w->replication, share = 1.0 / n;
	double copy = isnan(m->c->replica_ratio) ? 1.0 : m->c->replica_ratio;
	double read = isnan(m->c->consume_ratio) ? 1.0 : m->c->consume_ratio;
	double busy = share * m->cost * part_factor(m->c, share * w->partitions * rf) *
		      (m->sent + m->peak * (rf - 1) * copy + m->peak * w->fanout * read);
	double mb = m->bytes / 1e6;

	/* the broker's core-seconds at the calibration's clock, or the
	 * calibration machine's seconds (all its cores) */
	u[CAP_CPU].need = m->c->cpu_measured ? busy * m->clock_ratio : busy / m->cpu_scale * m->cores;
	u[CAP_DISK_WRITE].need = share * m->peak * mb * rf;
	u[CAP_DISK_SPACE].need = share * (w->rate * m->bytes * w->retention_s * rf * (1 + INDEX_OVERHEAD) +
					  w->partitions * rf * PART_PREALLOC_BYTES) / (1 << 30);
	u[CAP_NIC_IN].need = share * (m->sent + m->peak * (rf - 1)) * mb;
	u[CAP_NIC_OUT].need = share * m->peak * (rf - 1 + w->fanout) * mb;
	u[CAP_MEMORY].need = MEMORY_BASE_GIB + share * (m->peak * m->bytes * rf * w->tail_s +
							w->partitions * rf * PART_TAIL_BYTES) / (1 << 30);
	u[CAP_PARTITIONS].need = share * w->partitions * rf;
	for (int r = 0; r < CAP_NRES; r++) {
		u[r].have = m->have[r];
		u[r].util = u[r].have > 0 ? u[r].need / u[r].have : NAN;
	}
}

/* The utilisation a resource may reach at the peak: all but the headroom;
 * partitions up to the most the sweep measured (a count, not a load). */
static double limit_of(int r, double headroom)
{
	return r == CAP_PARTITIONS ? 1.0 : 1.0 - headroom;
}

static int fits(const struct cap_use *u, int r, double headroom)
{
	return isnan(u[r].util) || u[r].util <= limit_of(r, headroom);
}

static const char *latency_class(double p99)
{
	if (isnan(p99))
		return "not estimated (no k14-latency row)";
	if (p99 < 1)
		return "sub-millisecond";
	if (p99 < 10)
		return "milliseconds";
	if (p99 < 100)
		return "tens of milliseconds";
	return "hundreds of milliseconds or more";
}

int cap_plan(const struct cap_calib *c, const struct hw_profile *target, const struct cap_workload *w,
	     struct cap_plan *p, char *err, size_t errlen)
{
	const struct hw_profile *cal = &c->prof;
	struct model m = { .c = c, .w = w };
	double rho = 0;
	int rc, from;

	memset(p, 0, sizeof(*p));
	if ((rc = cap_workload_check(w, err, errlen)) < 0)
		return rc;
	if (!target)
		target = cal;
	m.peak = w->peak_rate > 0 ? w->peak_rate : w->rate;
	m.sent = m.peak * (1 + w->retry);
	m.bytes = p->stored_bytes = w->record_bytes + RECORD_OVERHEAD + BATCH_HEADER / w->batch_records;
	m.cost = cap_produce_cost(c, w->record_bytes);
	if (!(m.cost > 0)) {
		snprintf(err, errlen, "%s: the calibration gives no produce cost", c->source);
		return -EINVAL;
	}
	/* the target against the calibration machine: cores x clock */
	m.cores = hw_get(target, HW_CORES);
	if (target->has[HW_CORES] && target->has[HW_CLOCK_GHZ] && cal->has[HW_CORES] && cal->has[HW_CLOCK_GHZ]) {
		m.cpu_scale = target->v[HW_CORES] * target->v[HW_CLOCK_GHZ] / (cal->v[HW_CORES] * cal->v[HW_CLOCK_GHZ]);
	} else {
		m.cpu_scale = 1;
		note(p->warnings, sizeof(p->warnings), "cores or clock_ghz unknown in a profile: the servers "
		     "counted as fast as the calibration machine");
		if (!m.cores)
			m.cores = cal->has[HW_CORES] ? cal->v[HW_CORES] : 1;
	}
	p->cpu_scale = m.cpu_scale;
	m.clock_ratio = target->has[HW_CLOCK_GHZ] && cal->has[HW_CLOCK_GHZ] ? cal->v[HW_CLOCK_GHZ] /
			target->v[HW_CLOCK_GHZ] : 1;
	if (m.cpu_scale > 4)
		note(p->warnings, sizeof(p->warnings), "the servers have %.0fx the calibration machine's cores x "
		     "clock: its costs are scaled linearly (one shard a core), an extrapolation a suite run on "
		     "the servers themselves replaces", m.cpu_scale);
	m.have[CAP_CPU] = m.cores;
	m.have[CAP_DISK_WRITE] = hw_get(target, HW_DISK_WRITE_MBPS);
	m.have[CAP_DISK_SPACE] = w->disk_gib > 0 ? w->disk_gib : hw_get(target, HW_DISK_GIB);
	m.have[CAP_NIC_IN] = m.have[CAP_NIC_OUT] = hw_get(target, HW_NIC_GBPS) * 125.0;
	m.have[CAP_MEMORY] = hw_get(target, HW_MEMORY_GIB);
	m.have[CAP_PARTITIONS] = isnan(c->max_partitions) ? 0 : c->max_partitions;
	for (int r = 0; r < CAP_NRES; r++)
		if (!(m.have[r] > 0))
			note(p->warnings, sizeof(p->warnings), "%s not checked: %s", cap_res_name[r],
			     r == CAP_DISK_SPACE ? "the profile has no disk_gib (give --disk-gib)" :
			     r == CAP_PARTITIONS ? "the calibration has no partition-sweep" :
			     r == CAP_NIC_IN || r == CAP_NIC_OUT ? "the profile has no nic_gbps" :
			     "the profile does not give it");

	/* the fewest servers for each resource alone, then for all at once
	 * (at least one a replica: a partition's replicas are on different
	 * servers) */
	from = w->replication;
	for (int n = 1; n <= CAP_MAX_SERVERS; n++) {
		struct cap_use u[CAP_NRES];
		int all = 1;

		use_at(&m, n, u);
		for (int r = 0; r < CAP_NRES; r++) {
			int ok = fits(u, r, w->headroom);

			if (ok && !p->servers_for[r] && !isnan(u[r].util))
				p->servers_for[r] = n;
			all &= ok;
		}
		if (all && n >= from && !p->servers) {
			p->servers = n;
			memcpy(p->use, u, sizeof(u));
		}
		if (p->servers) {
			int done = 1;

			for (int r = 0; r < CAP_NRES; r++)
				done &= p->servers_for[r] || isnan(u[r].util);
			if (done)
				break;
		}
	}
	if (!p->servers) {
		/* what does not fit even at the largest count: the per-server part
		 * that does not shrink (memory's base) or a need past every bound */
		use_at(&m, CAP_MAX_SERVERS, p->use);
		for (int r = 0; r < CAP_NRES; r++)
			if (!fits(p->use, r, w->headroom)) {
				snprintf(err, errlen, "%s does not fit on %d servers (%.3g of %.3g %s each with %.0f %% "
					 "headroom)", cap_res_name[r], CAP_MAX_SERVERS, p->use[r].need, p->use[r].have,
					 cap_res_unit[r], w->headroom * 100);
				return -ERANGE;
			}
		snprintf(err, errlen, "no server count up to %d fits", CAP_MAX_SERVERS);
		return -ERANGE;
	}
	p->part_factor = part_factor(c, p->use[CAP_PARTITIONS].need);
	p->binding = CAP_CPU;
	for (int r = 0; r < CAP_NRES; r++) {
		double ur = p->use[r].util, ub = p->use[p->binding].util;

		/* the nearest to its limit */
		if (!isnan(ur) && (isnan(ub) || ur / limit_of(r, w->headroom) > ub / limit_of(p->binding, w->headroom)))
			p->binding = r;
		if (!isnan(ur) && r != CAP_DISK_SPACE && r != CAP_PARTITIONS && r != CAP_MEMORY && ur > rho)
			rho = ur;
	}
	/* latency: the run's end to end (acks=1, far below saturation), each
	 * wait stretched by the busiest queue's 1 / (1 - utilisation); acks=all
	 * on more than one replica waits for a follower's fetch too (the same
	 * path a consumer's takes: one more p50), a synced log for its flush */
	p->p50_ms = c->e2e_p50_ms;
	p->p99_ms = c->e2e_p99_ms / (1 - (rho < 0.95 ? rho : 0.95));
	if (w->acks == CAP_ACKS_ALL && w->replication > 1) {
		p->p50_ms += c->e2e_p50_ms;
		p->p99_ms += c->e2e_p99_ms;
	}
	if (w->sync) {
		if (target->has[HW_SYNC_WRITE_US])
			p->p50_ms += target->v[HW_SYNC_WRITE_US] / 1000;
		p->p99_ms += hw_get(target, target->has[HW_SYNC_WRITE_P99_US] ? HW_SYNC_WRITE_P99_US : HW_SYNC_WRITE_US) /
			     1000;
	}
	p->latency_class = latency_class(p->p99_ms);
	p->consumers = (int)ceil(m.peak * w->processing_ms / 1000.0 / w->concurrency);
	if (p->consumers < 1)
		p->consumers = 1;
	if (w->fanout > 0 && p->consumers > w->partitions)
		note(p->warnings, sizeof(p->warnings), "each consumer group needs %d instances at %.3g ms a record "
		     "and %d at once, but a group reads a partition with one member at a time: at least %d "
		     "partitions, or more concurrency in each instance", p->consumers, w->processing_ms,
		     w->concurrency, p->consumers);
	/* a partition's replica lives whole on one server: spread evenly only
	 * with a replica or more for every server */
	p->min_partitions = (int)ceil((double)p->servers / w->replication);
	if (w->partitions < p->min_partitions)
		note(p->warnings, sizeof(p->warnings), "%d servers but %.0f partitions of %d replicas: a replica "
		     "lives whole on one server, so some would stay empty while the others overflow; give the "
		     "topics at least %d partitions", p->servers, w->partitions, w->replication, p->min_partitions);
	if ((w->record_bytes_p99 > 0 ? w->record_bytes_p99 : w->record_bytes) > 1048576)
		note(p->warnings, sizeof(p->warnings), "records at the p99 are above 1 MiB: raise "
		     "max.message.bytes on the topics and the clients' max.request.size / message.max.bytes");
	if (w->batch_records < 10)
		note(p->warnings, sizeof(p->warnings), "%.3g records a batch: the suite's rows produce batches of "
		     "hundreds or more (linger.ms=5); each request's fixed cost, which no suite row isolates, "
		     "adds CPU this plan does not count (measure: sluice-bench produce --linger-ms 0)",
		     w->batch_records);
	if (w->acks == 0)
		note(p->warnings, sizeof(p->warnings), "acks=0: a record the server never received is lost "
		     "without an error; the plan sizes the servers, not that loss");
	return 0;
}

/* ---- the suite's checks -------------------------------------------------------- */

double cap_check_prodcons(const struct cap_calib *c)
{
	double predicted;

	if (c->cpu_measured && c->producer_cpu_ns > 0 && c->consumer_cpu_ns > 0 && c->prodcons_cpu_ns > 0)
		return c->prodcons_cpu_ns / (c->producer_cpu_ns + c->consumer_cpu_ns);

	if (!(c->producer_rps > 0 && c->consumer_rps > 0 && c->prodcons_rps > 0))
		return NAN;
	predicted = 1.0 / c->producer_rps + 1.0 / c->consumer_rps;
	return 1.0 / c->prodcons_rps / predicted;
}

int cap_check_sweep(const struct cap_calib *c, double *size, double *ratio, int n)
{
	int got = 0;

	if (c->nsweep < 3)
		return 0;
	for (int i = 0; i < c->nsweep && got < n; i++) {
		double x[16], t[16], a, b;
		int k = 0;

		for (int j = 0; j < c->nsweep; j++)
			if (j != i) {
				x[k] = c->sweep_size[j];
				t[k++] = c->sweep_t[j];
			}
		fit(x, t, k, &a, &b);
		size[got] = c->sweep_size[i];
		ratio[got++] = c->sweep_t[i] / (a + b * c->sweep_size[i]);
	}
	return got;
}
