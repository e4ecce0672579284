/* tests/unit/test_capacity.c — bench/capacity, the capacity planner's model
 * (sluicectl capacity plan): its calibration from a suite run's
 * results.json (synthetic ones here, whose costs are known exactly), the
 * plan's server count, binding resource and limits, the suite's checks,
 * and bad input named. The model lives in bench/, outside the core
 * library, so the suite compiles it in. */
#include <errno.h>
#include <math.h>

#include "bench/capacity.c"
#include "tests/unit/helpers.h"

static struct cap_calib cal;
static char err[1024];
static char json[16384];

#define REC_NS 200.0      /* the synthetic broker: 200 ns a record + 0.5 ns a byte */
#define BYTE_NS 0.5

static double cost_ns(double s)
{
	return REC_NS + BYTE_NS * s;
}

/* A results.json: profile (2 cores at 2.5 GHz, 1.25 GB/s disk, 10 Gb/s NIC,
 * 16 GiB, 100 GiB of disk), k14 rows, a size sweep whose broker CPU is
 * exactly cost_ns(size), a partition sweep whose cost doubles from 6 to
 * 1000 partitions; cpu 0: the rows without broker_cpu_ns_per_record (an
 * older suite). */
static void make_results(int cpu, int quick, int with_sweep)
{
	static const double sizes[] = { 10, 100, 1000, 10000, 100000 };
	char *o = json, *end = json + sizeof(json);

#define OUT(...) (o += snprintf(o, (size_t)(end - o), __VA_ARGS__))
#define CPU(v) (cpu ? (v) : NAN)
	OUT("{\"format\": \"sluice-bench suite results 1\", \"quick\": %s, \"profile\": {\"path\": \"x.conf\", "
	    "\"description\": \"test box\", \"cores\": 2, \"clock_ghz\": 2.5, \"memory_gib\": 16, \"nic_gbps\": 10, "
	    "\"disk_write_mbps\": 1250, \"disk_gib\": 100, \"sync_write_us\": 100, \"memif_gbps\": null}, "
	    "\"scenarios\": [", quick ? "true" : "false");
	/* one producer: 1e6 records/s and 250 ns of broker CPU a record; one
	 * consumer 2e6/s and 100 ns; both at once 600,000/s and 330 ns */
	OUT("{\"name\": \"k14-producer\", \"status\": \"ok\", \"rows\": [{\"label\": \"1 producer\", "
	    "\"records_per_s\": 1000000, \"broker_cpu_ns_per_record\": %s}]},", cpu ? "250" : "null");
	OUT("{\"name\": \"k14-consumer\", \"status\": \"ok\", \"rows\": [{\"label\": \"1 consumer\", "
	    "\"records_per_s\": 2000000, \"broker_cpu_ns_per_record\": %s}]},", cpu ? "100" : "null");
	OUT("{\"name\": \"k14-prodcons\", \"status\": \"ok\", \"rows\": [{\"label\": \"producer and consumer: "
	    "produce\", \"records_per_s\": 600000, \"broker_cpu_ns_per_record\": %s}, {\"label\": \"producer "
	    "and consumer: consume\", \"records_per_s\": 600000, \"broker_cpu_ns_per_record\": null}]},",
	    cpu ? "330" : "null");
	/* three nodes: 1/250000 = 1/1e6 + 2 copies of 1.5 x 1/1e6 */
	OUT("{\"name\": \"k14-replicated\", \"status\": \"ok\", \"rows\": [{\"label\": \"1 producer, 3x async "
	    "replication (acks=1)\", \"records_per_s\": 250000}, {\"label\": \"(acks=all)\", "
	    "\"records_per_s\": 100000}]},");
	OUT("{\"name\": \"k14-latency\", \"status\": \"ok\", \"rows\": [{\"label\": \"end-to-end latency at "
	    "20000 records/s\", \"records_per_s\": null, \"p50_ms\": 1.5, \"p99_ms\": 3}]},");
	OUT("{\"name\": \"partition-sweep\", \"status\": \"ok\", \"rows\": [");
	{
		static const double n[] = { 1, 6, 1000, 10000 }, f[] = { 1, 1, 2, 8 };

		for (int i = 0; i < 4; i++)
			OUT("%s{\"label\": \"%g partitions\", \"records_per_s\": %g, \"broker_cpu_ns_per_record\": %s}",
			    i ? ", " : "", n[i], 1e9 / (300 * f[i]), cpu ? (i == 3 ? "2400" : i == 2 ? "600" : "300")
									  : "null");
	}
	OUT("]}");
	if (with_sweep) {
		OUT(", {\"name\": \"size-sweep\", \"status\": \"ok\", \"rows\": [");
		for (int i = 0; i < 5; i++) {
			char c[32] = "null";

			if (cpu)
				snprintf(c, sizeof(c), "%.9g", cost_ns(sizes[i]));
			/* records/s: the machine (2 cores) at 4x the broker's cost */
			OUT("%s{\"label\": \"%g B\", \"records_per_s\": %.9g, \"fraction_of_limit\": 0.1, "
			    "\"broker_cpu_ns_per_record\": %s}", i ? ", " : "", sizes[i], 1e9 / (4 * cost_ns(sizes[i])), c);
		}
		OUT("]}");
	}
	OUT(", {\"name\": \"acks\", \"status\": \"failed\", \"rows\": []}]}");
#undef CPU
#undef OUT
}

static int calibrate(void)
{
	err[0] = 0;
	return cap_calib_parse(json, strlen(json), "r.json", &cal, err, sizeof(err));
}

static void workload(struct cap_workload *w, double rate, double bytes)
{
	cap_workload_defaults(w);
	w->rate = rate;
	w->record_bytes = bytes;
}

Test(capacity, calibration_fits_the_broker_cpu_of_the_size_sweep)
{
	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	cr_assert(cal.cpu_measured);
	cr_assert_eq(cal.sweep_points, 5);
	cr_assert_float_eq(cal.rec_s * 1e9, REC_NS, 1e-6, "%g ns a record", cal.rec_s * 1e9);
	cr_assert_float_eq(cal.byte_s * 1e9, BYTE_NS, 1e-9, "%g ns a byte", cal.byte_s * 1e9);
	cr_assert_float_eq(cal.consume_ratio, 100.0 / 250, 1e-9);
	cr_assert_float_eq(cal.replica_ratio, 1.5, 1e-9, "%g", cal.replica_ratio);
	cr_assert_float_eq(cal.e2e_p99_ms, 3, 1e-9);
	cr_assert_float_eq(cal.e2e_rate, 20000, 1e-9);
	cr_assert_eq(cal.max_partitions, 10000);
	cr_assert_str_eq(cal.prof.description, "test box");
	cr_assert_eq(hw_get(&cal.prof, HW_DISK_GIB), 100);
	cr_assert(!strstr(cal.notes, "quick"), "%s", cal.notes);
}

Test(capacity, an_older_results_file_gives_machine_seconds_and_says_so)
{
	make_results(0, 1, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	cr_assert(!cal.cpu_measured);
	/* the machine's seconds: 4x the broker's cost */
	cr_assert_float_eq(cal.rec_s * 1e9, 4 * REC_NS, 1e-3, "%.9g", cal.rec_s * 1e9);
	cr_assert_float_eq(cal.byte_s * 1e9, 4 * BYTE_NS, 1e-6, "%.9g", cal.byte_s * 1e9);
	cr_assert_float_eq(cal.consume_ratio, 0.5, 1e-9, "the rates' ratio");
	cr_assert(strstr(cal.notes, "no broker CPU") && strstr(cal.notes, "--quick"), "%s", cal.notes);
}

Test(capacity, without_a_size_sweep_the_producer_row_alone)
{
	make_results(1, 0, 0);
	cr_assert_eq(calibrate(), 0, "%s", err);
	cr_assert_eq(cal.sweep_points, 0);
	cr_assert_float_eq(cal.rec_s * 1e9, 250, 1e-9);
	cr_assert_eq(cal.byte_s, 0);
	cr_assert(strstr(cal.notes, "no size-sweep"), "%s", cal.notes);
}

Test(capacity, bad_results_files_are_named)
{
	const char *t = "{\"format\": \"sluice-bench suite results 1\",\n \"scenarios\": [}";

	cr_assert_eq(cap_calib_parse(t, strlen(t), "r.json", &cal, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "r.json:2:") && strstr(err, "not JSON"), "%s", err);
	t = "{\"format\": \"something else\"}";
	cr_assert_eq(cap_calib_parse(t, strlen(t), "r.json", &cal, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "r.json: not the results.json of a sluice-bench suite run"), "%s", err);
	t = "{\"format\": \"sluice-bench suite results 1\", \"scenarios\": [{\"name\": \"k14-producer\", "
	    "\"status\": \"failed\", \"rows\": []}]}";
	cr_assert_eq(cap_calib_parse(t, strlen(t), "r.json", &cal, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "size-sweep") && strstr(err, "k14-producer") && strstr(err, "sluice-bench suite"),
		  "%s", err);
	cr_assert_eq(cap_calib_load("/nonexistent/r.json", &cal, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "/nonexistent/r.json"), "%s", err);
}

Test(capacity, bad_workloads_name_the_key)
{
	struct cap_workload w;
	struct cap_plan p;
	static const struct {
		size_t off;
		double v;
		const char *key;
	} bad[] = {
		{ offsetof(struct cap_workload, rate), 0, "rate" },
		{ offsetof(struct cap_workload, peak_rate), 10, "peak-rate" },   /* below the average */
		{ offsetof(struct cap_workload, record_bytes), 0.5, "record-bytes" },
		{ offsetof(struct cap_workload, partitions), 0, "partitions" },
		{ offsetof(struct cap_workload, retention_s), -1, "retention" },
		{ offsetof(struct cap_workload, headroom), 1, "headroom" },
		{ offsetof(struct cap_workload, batch_records), 0, "batch-records" },
	};

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		workload(&w, 1000, 100);
		*(double *)((char *)&w + bad[i].off) = bad[i].v;
		cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), -EINVAL, "%s", bad[i].key);
		cr_assert(!strncmp(err, bad[i].key, strlen(bad[i].key)) && err[strlen(bad[i].key)] == ':', "%s: %s",
			  bad[i].key, err);
	}
	workload(&w, 1000, 100);
	w.replication = 0;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "replication-factor:"), "%s", err);
}

/* The plan is the fewest servers (at least a replica each) on which every
 * resource keeps its headroom: one fewer breaks one. */
static void check_minimal(const struct cap_workload *w, const struct cap_plan *p)
{
	int over = p->servers == w->replication;

	for (int r = 0; r < CAP_NRES; r++) {
		cr_assert(isnan(p->use[r].util) || p->use[r].util <= (r == CAP_PARTITIONS ? 1 : 1 - w->headroom) + 1e-12,
			  "%s at %g", cap_res_name[r], p->use[r].util);
		over |= p->servers_for[r] == p->servers;
	}
	cr_assert(over, "%d servers, but no resource needs that many alone", p->servers);
}

Test(capacity, disk_space_binds_a_long_retention)
{
	struct cap_workload w;
	struct cap_plan p;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 10000, 1000);
	w.retention_s = 30 * 86400.0;   /* 10 MB/s x 30 days x 3 = 72 TiB over 100 GiB disks */
	cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p.binding, CAP_DISK_SPACE, "%s binds", cap_res_name[p.binding]);
	{
		double total = 10000 * p.stored_bytes * w.retention_s * 3 * 1.01 / (1 << 30);
		int expect = (int)ceil(total / (100 * 0.7));

		/* the preallocated extents add a little: one more server at most */
		cr_assert(p.servers >= expect && p.servers <= expect + 1, "%d servers, %d by hand", p.servers, expect);
	}
	/* 60 partitions of 3 replicas do not spread over that many servers */
	cr_assert_eq(p.min_partitions, (p.servers + 2) / 3);
	cr_assert(strstr(p.warnings, "give the topics at least"), "%s", p.warnings);
	check_minimal(&w, &p);
}

Test(capacity, the_nic_binds_a_wide_fanout)
{
	struct cap_workload w;
	struct cap_plan p;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 200000, 10000);    /* 2 GB/s in, 20 consumer groups */
	w.retention_s = 600;
	w.fanout = 20;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p.binding, CAP_NIC_OUT, "%s binds", cap_res_name[p.binding]);
	/* out: (2 copies + 20 groups) x 2.0 GB/s over 1250 MB/s x 0.7 a server */
	cr_assert_eq(p.servers, (int)ceil(22 * 200000 * p.stored_bytes / 1e6 / (1250 * 0.7)), "%d", p.servers);
	check_minimal(&w, &p);
}

Test(capacity, the_cpu_binds_small_records_and_scales_with_the_target)
{
	struct cap_workload w;
	struct cap_plan p, big;
	struct hw_profile target;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 20e6, 10);         /* 20 M tiny records a second */
	w.retention_s = 60;
	w.partitions = 6;
	w.replication = 1;
	w.fanout = 0;
	w.acks = 1;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p.binding, CAP_CPU, "%s binds", cap_res_name[p.binding]);
	/* 20e6 x (200 + 0.5 x 10) ns = 4.1 cores over 2 x 0.7 a server */
	cr_assert_eq(p.servers, (int)ceil(20e6 * (REC_NS + BYTE_NS * 10) * 1e-9 / 1.4), "%d", p.servers);
	/* twice the clock: half the cores' time */
	target = cal.prof;
	target.v[HW_CLOCK_GHZ] = 5;
	cr_assert_eq(cap_plan(&cal, &target, &w, &big, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(big.use[CAP_CPU].need * big.servers, p.use[CAP_CPU].need * p.servers / 2, 1e-6);
	check_minimal(&w, &p);
}

Test(capacity, more_partitions_a_server_cost_more_cpu_and_the_sweep_bounds_them)
{
	struct cap_workload w;
	struct cap_plan few, many;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 1e6, 100);
	w.retention_s = 60;
	w.replication = 1;
	w.partitions = 6;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &few, err, sizeof(err)), 0, "%s", err);
	w.partitions = 1000;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &many, err, sizeof(err)), 0, "%s", err);
	cr_assert(many.part_factor > 1.5, "%g", many.part_factor);
	cr_assert(many.use[CAP_CPU].need * many.servers > 1.5 * few.use[CAP_CPU].need * few.servers);
	/* 50,000 partitions: the sweep measured 10,000 a server at most */
	w.partitions = 50000;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &many, err, sizeof(err)), 0, "%s", err);
	cr_assert(many.servers >= 5 && many.use[CAP_PARTITIONS].need <= 10000, "%d servers, %g partitions",
		  many.servers, many.use[CAP_PARTITIONS].need);
}

Test(capacity, servers_never_fewer_than_replicas_nor_for_more_load)
{
	struct cap_workload w;
	struct cap_plan p;
	int last = 0;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	for (double rate = 1000; rate <= 1e7; rate *= 3) {
		workload(&w, rate, 500);
		w.retention_s = 86400;
		cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), 0, "%s", err);
		cr_assert(p.servers >= w.replication && p.servers >= last, "%g/s: %d servers after %d", rate,
			  p.servers, last);
		last = p.servers;
	}
	cr_assert(last > 100, "%d", last);
}

Test(capacity, what_fits_on_no_count_is_an_error_naming_the_resource)
{
	struct cap_workload w;
	struct cap_plan p;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 1000, 100);
	w.tail_s = 0;
	w.headroom = 0.95;              /* 0.8 GiB of 16: the base of 1 GiB alone is over */
	cr_assert_eq(cap_plan(&cal, NULL, &w, &p, err, sizeof(err)), -ERANGE);
	cr_assert(strstr(err, "memory does not fit"), "%s", err);
}

Test(capacity, latency_class_from_the_run_and_the_acks)
{
	struct cap_workload w;
	struct cap_plan one, all;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	workload(&w, 1000, 100);
	w.acks = 1;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &one, err, sizeof(err)), 0, "%s", err);
	w.acks = CAP_ACKS_ALL;
	w.sync = 1;
	cr_assert_eq(cap_plan(&cal, NULL, &w, &all, err, sizeof(err)), 0, "%s", err);
	cr_assert(one.p99_ms >= 3 && one.p99_ms < 3.1, "%g", one.p99_ms);
	cr_assert_str_eq(one.latency_class, "milliseconds");
	/* a follower's fetch (one more p50/p99) and the flush (100 us) */
	cr_assert_float_eq(all.p50_ms, 1.5 + 1.5 + 0.1, 1e-9, "%g", all.p50_ms);
	cr_assert(all.p99_ms > one.p99_ms + 3, "%g", all.p99_ms);
}

Test(capacity, the_suites_checks)
{
	double size[16], ratio[16];
	int n;

	make_results(1, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	/* 330 ns against 250 + 100 */
	cr_assert_float_eq(cap_check_prodcons(&cal), 330.0 / 350, 1e-9);
	n = cap_check_sweep(&cal, size, ratio, 16);
	cr_assert_eq(n, 5);
	for (int i = 0; i < n; i++)
		cr_assert_float_eq(ratio[i], 1.0, 1e-6, "%g B: %g", size[i], ratio[i]);
	/* a point off the line shows */
	cal.sweep_t[2] *= 2;
	n = cap_check_sweep(&cal, size, ratio, 16);
	cr_assert(ratio[2] > 1.5, "%g", ratio[2]);
	/* without CPU figures: the rates (1/600000 against 1/1e6 + 1/2e6) */
	make_results(0, 0, 1);
	cr_assert_eq(calibrate(), 0, "%s", err);
	cr_assert_float_eq(cap_check_prodcons(&cal), (1 / 600000.0) / (1 / 1e6 + 1 / 2e6), 1e-9);
}
