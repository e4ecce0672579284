/* control/sluicectl_capacity.c — `sluicectl capacity plan`: how many
 * servers a workload needs, which resource binds and with what headroom,
 * and the latency class to expect, from the model of bench/capacity.h
 * calibrated by a `sluice-bench suite` run's results.json
 * (docs/capacity.md). Talks to no broker.
 * Exit 0 planned, 1 the workload fits on no count of servers, 2 bad input
 * (a flag, the profile or the results file: named).
 * @thread main */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/capacity.h"
#include "control/sluicectl.h"

/* A number, then at most one of the suffix letters in units (each with
 * its multiplier), nothing after it. */
struct unit {
	char c;
	double mul;
};

static bool parse_with(const char *s, const struct unit *units, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || isnan(v) || isinf(v))
		return false;
	for (const struct unit *u = units; *end && u->c; u++)
		if (*end == u->c) {
			v *= u->mul;
			end++;
			break;
		}
	if (*end || isinf(v))
		return false;
	*out = v;
	return true;
}

/* A number with an optional SI suffix (k, M, G: 10^3, 10^6, 10^9). */
static bool parse_num(const char *s, double *out)
{
	static const struct unit si[] = { { 'k', 1e3 }, { 'K', 1e3 }, { 'M', 1e6 }, { 'G', 1e9 }, { 0, 0 } };

	return parse_with(s, si, out);
}

/* A time: a number of seconds, or with s, m, h, d or w. */
static bool parse_secs(const char *s, double *out)
{
	static const struct unit t[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 7 * 86400.0 },
					 { 0, 0 } };

	return parse_with(s, t, out);
}

static const char *human(double v, char *buf, size_t cap)
{
	if (isnan(v))
		snprintf(buf, cap, "-");
	else if (v >= 1e4)
		snprintf(buf, cap, "%.0f", v);
	else if (v >= 100)
		snprintf(buf, cap, "%.0f", v);
	else if (v >= 10)
		snprintf(buf, cap, "%.1f", v);
	else
		snprintf(buf, cap, "%.2f", v);
	return buf;
}

static void print_lines(const char *head, const char *text)
{
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);
		char line[1200];

		snprintf(line, sizeof(line), "- %.*s", len, p);
		if (head) {
			printf("%s\n", head);
			head = NULL;
		}
		wrap(stdout, 0, 2, line);
		p += len + (nl ? 1 : 0);
	}
}

static void json_lines(const char *key, const char *text)
{
	const char *p = text;

	json_arr_begin(key);
	while (*p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		json_strn(NULL, p, len);
		p += len + (nl ? 1 : 0);
	}
	json_arr_end();
}

static void report_json(const struct cap_calib *cal, const struct hw_profile *target, const struct cap_workload *w,
			const struct cap_plan *p)
{
	json_obj_begin(NULL);
	json_int("servers", p->servers);
	json_str("binding", cap_res_name[p->binding]);
	json_arr_begin("resources");
	for (int r = 0; r < CAP_NRES; r++) {
		json_obj_begin(NULL);
		json_str("resource", cap_res_name[r]);
		json_str("unit", cap_res_unit[r]);
		json_num("need_per_server", p->use[r].need);
		json_num("have_per_server", p->use[r].have > 0 ? p->use[r].have : NAN);
		json_num("utilisation", p->use[r].util);
		json_num("headroom", isnan(p->use[r].util) ? NAN : 1 - p->use[r].util);
		if (p->servers_for[r])
			json_int("servers_alone", p->servers_for[r]);
		else
			json_null("servers_alone");
		json_obj_end();
	}
	json_arr_end();
	json_obj_begin("latency");
	json_str("class", p->latency_class);
	json_num("p50_ms", p->p50_ms);
	json_num("p99_ms", p->p99_ms);
	json_obj_end();
	json_int("consumers_per_group", p->consumers);
	json_int("min_partitions", p->min_partitions);
	json_num("bytes_per_record", p->stored_bytes);
	json_num("cpu_scale", p->cpu_scale);
	json_obj_begin("workload");
	json_num("rate", w->rate);
	json_num("peak_rate", w->peak_rate > 0 ? w->peak_rate : w->rate);
	json_num("record_bytes", w->record_bytes);
	json_num("partitions", w->partitions);
	json_num("retention_s", w->retention_s);
	json_int("replication_factor", w->replication);
	json_int("fanout", w->fanout);
	json_str("acks", w->acks == CAP_ACKS_ALL ? "all" : w->acks ? "1" : "0");
	json_num("headroom", w->headroom);
	json_obj_end();
	json_obj_begin("calibration");
	json_str("results", cal->source);
	json_str("measured_on", cal->prof.description);
	json_num("produce_ns_per_record", cal->rec_s * 1e9);
	json_num("produce_ns_per_byte", cal->byte_s * 1e9);
	json_int("size_sweep_points", cal->sweep_points);
	json_num("consume_over_produce", cal->consume_ratio);
	json_num("copy_over_produce", cal->replica_ratio);
	json_num("e2e_p50_ms", cal->e2e_p50_ms);
	json_num("e2e_p99_ms", cal->e2e_p99_ms);
	json_num("partitions_per_server", cal->max_partitions);
	json_lines("notes", cal->notes);
	json_obj_end();
	json_str("profile", target->description);
	json_lines("warnings", p->warnings);
	json_obj_end();
	json_end();
}

static void report_table(const struct cap_calib *cal, const struct hw_profile *target,
			 const struct cap_workload *w, const struct cap_plan *p)
{
	static const char *heads[] = { "RESOURCE", "NEED/SERVER", "HAVE", "UNIT", "USED", "ALONE" };
	struct table t;
	char a[32], b[32];

	printf("%d server%s of \"%s\"; %s binds (%.0f %% used, %.0f %% headroom kept)\n", p->servers,
	       p->servers == 1 ? "" : "s", target->description, cap_res_name[p->binding],
	       p->use[p->binding].util * 100, w->headroom * 100);
	table_init(&t, 6, heads);
	for (int c = 1; c < 6; c++)
		if (c != 3)
			table_right(&t, c);
	for (int r = 0; r < CAP_NRES; r++)
		table_add(&t, cap_res_name[r], human(p->use[r].need, a, sizeof(a)),
			  p->use[r].have > 0 ? human(p->use[r].have, b, sizeof(b)) : "-", cap_res_unit[r],
			  isnan(p->use[r].util) ? "not checked" : fmt("%.0f %%", p->use[r].util * 100),
			  p->servers_for[r] ? fmt("%d", p->servers_for[r]) : "-");
	table_print(&t);
	table_fini(&t);
	printf("latency: %s", p->latency_class);
	if (!isnan(p->p99_ms))
		printf(" (end to end p50 %.2f ms, p99 %.2f ms, estimated)", p->p50_ms, p->p99_ms);
	printf("\nconsumers: %d instance%s in each of %d group%s\n", p->consumers, p->consumers == 1 ? "" : "s",
	       w->fanout, w->fanout == 1 ? "" : "s");
	printf("calibration: %s (measured on \"%s\"): produce %.0f ns a record + %.3f ns a byte (%s), consume "
	       "%s of a produce, a follower's copy %s\n", cal->source, cal->prof.description, cal->rec_s * 1e9,
	       cal->byte_s * 1e9, cal->sweep_points ? fmt("%d size-sweep points", cal->sweep_points) : "k14-producer",
	       isnan(cal->consume_ratio) ? "as much as" : fmt("%.2fx", cal->consume_ratio),
	       isnan(cal->replica_ratio) ? "as much as an append" : fmt("%.2fx an append", cal->replica_ratio));
	print_lines("notes:", cal->notes);
	print_lines("warnings:", p->warnings);
}

static int cmd_capacity_plan(struct ctl *c, const struct args *a)
{
	static const struct {
		const char *opt;
		int kind;        /* 0 number, 1 time, 2 int */
		size_t off;
	} nums[] = {
		{ "rate", 0, offsetof(struct cap_workload, rate) },
		{ "peak-rate", 0, offsetof(struct cap_workload, peak_rate) },
		{ "record-bytes", 0, offsetof(struct cap_workload, record_bytes) },
		{ "record-bytes-p99", 0, offsetof(struct cap_workload, record_bytes_p99) },
		{ "partitions", 0, offsetof(struct cap_workload, partitions) },
		{ "retention", 1, offsetof(struct cap_workload, retention_s) },
		{ "replication-factor", 2, offsetof(struct cap_workload, replication) },
		{ "fanout", 2, offsetof(struct cap_workload, fanout) },
		{ "retries", 0, offsetof(struct cap_workload, retry) },
		{ "batch-records", 0, offsetof(struct cap_workload, batch_records) },
		{ "processing-ms", 0, offsetof(struct cap_workload, processing_ms) },
		{ "concurrency", 2, offsetof(struct cap_workload, concurrency) },
		{ "headroom", 0, offsetof(struct cap_workload, headroom) },
		{ "disk-gib", 0, offsetof(struct cap_workload, disk_gib) },
		{ "tail-seconds", 1, offsetof(struct cap_workload, tail_s) },
	};
	struct cap_workload w;
	struct cap_calib *cal;
	struct hw_profile target;
	struct cap_plan plan;
	const char *results = opt_get(a, "results"), *prof = opt_get(a, "profile"), *v;
	char err[1024];
	int rc;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	if (!results)
		return ctl_usage(c, "--results FILE is required: the results.json of a `sluice-bench suite` run on "
				 "the servers' hardware (docs/capacity.md)");
	if (!opt_get(a, "rate"))
		return ctl_usage(c, "--rate N is required: the workload's average records a second");
	cap_workload_defaults(&w);
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		double d;
		int64_t n;

		if (!(v = opt_get(a, nums[i].opt)))
			continue;
		if (nums[i].kind == 2) {
			if (!parse_i64(v, 0, 1000000, &n))
				return ctl_usage(c, "--%s: '%s' is not a whole number", nums[i].opt, v);
			*(int *)((char *)&w + nums[i].off) = (int)n;
		} else if (!(nums[i].kind ? parse_secs(v, &d) : parse_num(v, &d))) {
			return ctl_usage(c, "--%s: '%s' is not a %s", nums[i].opt, v,
					 nums[i].kind ? "time (a number of seconds, or with s, m, h, d or w)"
						      : "number (k, M and G suffixes allowed)");
		} else {
			*(double *)((char *)&w + nums[i].off) = d;
		}
	}
	if ((v = opt_get(a, "acks"))) {
		if (!strcmp(v, "all") || !strcmp(v, "-1"))
			w.acks = CAP_ACKS_ALL;
		else if (!strcmp(v, "0") || !strcmp(v, "1"))
			w.acks = atoi(v);
		else
			return ctl_usage(c, "--acks: '%s' is not 0, 1 or all", v);
	}
	if ((v = opt_get(a, "durability"))) {
		if (strcmp(v, "write") && strcmp(v, "sync") && strcmp(v, "memory"))
			return ctl_usage(c, "--durability: '%s' is not write, sync or memory", v);
		w.sync = !strcmp(v, "sync");
	}
	if (cap_workload_check(&w, err, sizeof(err)) < 0)
		return ctl_usage(c, "--%s", err);
	cal = malloc(sizeof(*cal));
	if (!cal)
		return ctl_fail(c, "out of memory");
	if (cap_calib_load(results, cal, err, sizeof(err)) < 0) {
		free(cal);
		return ctl_usage(c, "--results: %s", err);
	}
	if (prof && hw_profile_load(prof, &target, err, sizeof(err)) < 0) {
		free(cal);
		return ctl_usage(c, "--profile: %s", err);
	}
	if (!prof)
		target = cal->prof;
	rc = cap_plan(cal, &target, &w, &plan, err, sizeof(err));
	if (rc < 0) {
		free(cal);
		if (rc == -EINVAL)
			return ctl_usage(c, "%s", err);
		return ctl_fail(c, "%s: lower the rate or the retention, or take larger servers (--profile)", err);
	}
	if (c->json)
		report_json(cal, &target, &w, &plan);
	else
		report_table(cal, &target, &w, &plan);
	free(cal);
	return 0;
}

static const struct opt_spec plan_opts[] = {
	{ "results", 0, "FILE", "the results.json of a `sluice-bench suite` run on the servers' hardware: the "
	  "costs (required)" },
	{ "profile", 0, "FILE", "the servers' hardware profile (hw-profiles/*.conf; default: the one the suite "
	  "ran against)" },
	{ "rate", 0, "N", "average records a second (required; k, M, G allowed)" },
	{ "peak-rate", 0, "N", "peak records a second, what the servers are sized for (default: the average)" },
	{ "record-bytes", 0, "N", "average bytes of a record's key, value and headers (default 1000)" },
	{ "record-bytes-p99", 0, "N", "the 99th percentile record size (default: the average)" },
	{ "partitions", 0, "N", "partitions of all topics (default 60)" },
	{ "retention", 0, "T", "how long records are kept: seconds, or 12h, 7d, 2w (default 7d)" },
	{ "replication-factor", 0, "N", "replicas of each partition (default 3)" },
	{ "fanout", 0, "N", "consumer groups that each read everything (default 1)" },
	{ "acks", 0, "0|1|all", "the producers' acks (default all)" },
	{ "durability", 0, "write|sync|memory", "the topics' log.durability (default write)" },
	{ "retries", 0, "F", "fraction of produce traffic sent again after timeouts (default 0; 0.05 = 5 %)" },
	{ "batch-records", 0, "N", "records in a produce batch, the clients' batching density (default 100)" },
	{ "processing-ms", 0, "MS", "a consumer's processing time per record (default 0)" },
	{ "concurrency", 0, "N", "records one consumer instance processes at once downstream (default 1)" },
	{ "headroom", 0, "F", "fraction of every resource kept free at the peak (default 0.3)" },
	{ "disk-gib", 0, "N", "data disk capacity of a server, GiB (default: the profile's disk_gib)" },
	{ "tail-seconds", 0, "T", "seconds of writes each server keeps in memory, so that readers that far "
	  "behind read from memory (default 60)" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd capacity_cmds[] = {
	{ "capacity", "plan", "", "the servers a workload needs, the resource that binds, its headroom and the "
	  "latency class, from a benchmark suite run's costs (exit 0 planned, 1 fits no count, 2 bad input)",
	  plan_opts,
	  "sluicectl capacity plan --results bench-results/latest/results.json --rate 200k --record-bytes 1k\n"
	  "sluicectl capacity plan --results r.json --profile hw-profiles/commodity-2026.conf --rate 1M "
	  "--peak-rate 3M --retention 3d --fanout 4 --format json",
	  cmd_capacity_plan },
};

const int capacity_ncmds = sizeof capacity_cmds / sizeof capacity_cmds[0];
