/* bench/bench_groups.c — `sluice-bench rebalance|commit`: consumer groups
 * driven through librdkafka's high-level consumer (rd_kafka_subscribe).
 *
 * What the two benchmarks share (bench/groups.h): their options, the
 * broker they run against, the start of a run. The benchmarks are
 * bench_rebalance.c (a member leaves, one joins: gaps, recovery) and
 * bench_commit.c (OffsetCommit: commits/s, latency); each says what it
 * measures and calls bench_groups with its own body.
 *
 * Thread: the benchmark's main thread (options, signal handlers, broker).
 *
 * Results last on stdout: "<bench> <metric> <value per run...>"; figures
 * below target are reported, never failures. Exit 1 on an error (broker
 * died, client error, a group that does not settle, an overlap, a skipped
 * offset, a refused or wrong commit in the commit bench), 2 on bad usage.
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/groups.h"
#include "bench/kafka.h"

int open_gbroker(const struct gopts *o, struct broker *br)
{
	if (o->bootstrap) {
		memset(br, 0, sizeof(*br));
		br->out_fd = -1;
		snprintf(br->bootstrap, sizeof(br->bootstrap), "%s", o->bootstrap);
		br->shards = -1;
		return 0;
	}
	return broker_start(br, o->shards, &o->bo);
}

/* A simple commit (no member, generation -1: the group has none yet) of
 * every partition's log end for group: where the members start, as
 * auto.offset.reset=latest would have them, but committed, so a partition
 * lost before its owner committed it is read again from there (counted as
 * duplicates) instead of from the log end then (records no member ever
 * got, which the benchmark would count as skipped). 0 or -errno. */
int commit_log_end(const char *bootstrap, const char *group, const char *topic, int partitions)
{
	struct client_errs errs = { 0 };
	rd_kafka_conf_t *c = base_conf(bootstrap, &errs);
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_resp_err_t e;
	rd_kafka_t *rk;
	char err[256];

	if (!c)
		return -EINVAL;
	if (conf_set(c, "group.id", group) < 0 || conf_set(c, "enable.auto.commit", "false") < 0) {
		rd_kafka_conf_destroy(c);
		return -EINVAL;
	}
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "commit_log_end: %s\n", err);
		return -EINVAL;
	}
	l = rd_kafka_topic_partition_list_new(partitions);
	for (int p = 0; p < partitions; p++)
		rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_END;
	e = rd_kafka_offsets_for_times(rk, l, 10000);
	for (int i = 0; !e && i < l->cnt; i++)
		e = l->elems[i].err ? l->elems[i].err : l->elems[i].offset < 0 ? RD_KAFKA_RESP_ERR__NO_OFFSET : 0;
	if (!e)
		e = rd_kafka_commit(rk, l, 0);
	for (int i = 0; !e && i < l->cnt; i++)
		e = l->elems[i].err;
	if (e)
		fprintf(stderr, "commit_log_end: group %s: %s\n", group, rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return e ? -EIO : 0;
}

/* ---- options ------------------------------------------------------------- */

static void gusage(FILE *f, const char *cmd)
{
	fprintf(f,
		"usage: sluice-bench %s [options]\n"
		"\n"
		"Consumer groups through librdkafka's high-level consumer. Starts its own\n"
		"broker (sluiced next to sluice-bench, free port, data under /var/tmp,\n"
		"removed at the end) with group.initial.rebalance.delay.ms=0. Progress on\n"
		"stderr, results on stdout.\n"
		"\n"
		"  rebalance  --members consumers on a topic under steady production; one\n"
		"             leaves, then a new one joins; per strategy: consumption gaps of\n"
		"             moved and unmoved partitions, time to recover\n"
		"  commit     synchronous OffsetCommit of explicit offsets from 1 consumer,\n"
		"             then N in parallel (one group): commits/s, latency\n"
		"\n"
		"  --bootstrap HOST:PORT   use this broker instead of starting one\n"
		"  --shards N              broker shards (default 0: one per core)\n"
		"  --set KEY=VALUE         extra broker setting (repeatable)\n"
		"  --partitions P          partitions of the topic (rebalance 48, commit 12)\n"
		"  --heartbeat-ms MS       heartbeat.interval.ms (default 1000)\n"
		"  --periodic-commit-ms MS rebalance: each member also commits its positions\n"
		"                          asynchronously every MS ms (default 1000; 0: only\n"
		"                          in the revoke callback)\n"
		"  --session-ms MS         session.timeout.ms (default 6000; below 6000 the\n"
		"                          broker's group.min.session.timeout.ms is lowered)\n"
		"  --settle-s S            no rebalance callback for S s = stable (default 2)\n"
		"  --timeout-s S           a group not stable after S s is a failure (60)\n"
		"rebalance:\n"
		"  --members N             consumers (default 6)\n"
		"  --rate R                records/s produced (default 20000)\n"
		"  --size BYTES            record size (default 100, at least 16)\n"
		"  --strategies LIST       partition.assignment.strategy per run, comma-\n"
		"                          separated (default range,cooperative-sticky)\n"
		"  --steady-s S            steady window before the leave (default 2)\n"
		"  --caught-up-ms MS       caught up = no record the broker acknowledged\n"
		"                          waits more than MS to be delivered (default 200)\n"
		"  --no-jitter             start each event right away, not at a random\n"
		"                          point of the heartbeat interval\n"
		"commit:\n"
		"  --seconds S             per run (default 5)\n"
		"  --consumers LIST        parallel consumers per run (default 1,4)\n"
		"  --commit-partitions K   partitions per commit (default 1)\n"
		"  --quick                 smoke run: shorter windows, lower rate\n"
		"  --help                  this text\n", cmd);
}

static int parse_list_int(const char *s, int *out, int max, int *n)
{
	char tmp[128], *save = NULL, *tok;

	snprintf(tmp, sizeof(tmp), "%s", s);
	*n = 0;
	for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (*n >= max || parse_count(tok, &v) < 0 || v < 1 || v > MAX_MEMBERS)
			return -1;
		out[(*n)++] = (int)v;
	}
	return *n ? 0 : -1;
}

static double parse_secs(const char *val)
{
	char *end;
	double v = strtod(val, &end);

	return end == val || *end || !(v >= 0) || v > 3600 ? -1 : v;
}

static char strat_buf[256];
static char set_buf[2][64];

static int parse_gopts(int argc, char **argv, struct gopts *o)
{
	uint64_t v;
	char *save = NULL, *tok;

	o->partitions = o->mode == G_REBALANCE ? 48 : 12;
	o->members = 6;
	o->rate = 20000;
	o->size = 100;
	o->heartbeat_ms = 1000;
	o->periodic_commit_ms = 1000;
	o->session_ms = 6000;
	o->steady_s = 2;
	o->settle_s = 2;
	o->timeout_s = 60;
	o->caught_up_ms = 200;
	o->seconds = 5;
	o->consumers[0] = 1;
	o->consumers[1] = 4;
	o->nruns = 2;
	o->commit_parts = 1;
	snprintf(strat_buf, sizeof(strat_buf), "range,cooperative-sticky");
	o->bo.cmd = o->cmd;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--quick")) {
			/* a smoke run: the same events, shorter windows; options win */
			o->rate = 5000;
			o->steady_s = 0.5;
			o->settle_s = 1;
			o->seconds = 1;
			o->timeout_s = 30;
		}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
		char name[32];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		double d;

		if (nl >= sizeof(name))
			return bad_option(o->cmd, a, "unknown option");
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			gusage(stdout, o->cmd);
			return 0;
		}
		if (!strcmp(name, "--quick"))
			continue;
		if (!strcmp(name, "--no-jitter")) {
			o->no_jitter = 1;
			continue;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return bad_option(o->cmd, name, "needs a value");
		if (!strcmp(name, "--bootstrap")) {
			o->bootstrap = val;
		} else if (!strcmp(name, "--set")) {
			if (!strchr(val, '=') || o->bo.nsets >= 14)
				return bad_option(o->cmd, name, "expects KEY=VALUE (at most 14)");
			o->bo.sets[o->bo.nsets++] = val;
		} else if (!strcmp(name, "--shards")) {
			if (parse_count(val, &v) < 0 || v > 64)
				return bad_option(o->cmd, name, "expects 0..64");
			o->shards = (int)v;
		} else if (!strcmp(name, "--partitions")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > GP_MAX_PARTS)
				return bad_option(o->cmd, name, "expects a count in [1, 4096]");
			o->partitions = (int)v;
		} else if (!strcmp(name, "--members")) {
			if (parse_count(val, &v) < 0 || v < 2 || v > MAX_MEMBERS)
				return bad_option(o->cmd, name, "expects a count in [2, 32]");
			o->members = (int)v;
		} else if (!strcmp(name, "--rate")) {
			if (parse_count(val, &o->rate) < 0 || !o->rate || o->rate > 10000000)
				return bad_option(o->cmd, name, "expects records/s in [1, 10M]");
		} else if (!strcmp(name, "--size")) {
			if (parse_count(val, &v) < 0 || v < 16 || v > 900000)
				return bad_option(o->cmd, name, "expects bytes in [16, 900000]");
			o->size = (int)v;
		} else if (!strcmp(name, "--heartbeat-ms")) {
			if (parse_count(val, &v) < 0 || v < 10 || v > 600000)
				return bad_option(o->cmd, name, "expects ms in [10, 600000]");
			o->heartbeat_ms = (int)v;
		} else if (!strcmp(name, "--session-ms")) {
			if (parse_count(val, &v) < 0 || v < 100 || v > 3600000)
				return bad_option(o->cmd, name, "expects ms in [100, 3600000]");
			o->session_ms = (int)v;
		} else if (!strcmp(name, "--caught-up-ms")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 60000)
				return bad_option(o->cmd, name, "expects ms in [1, 60000]");
			o->caught_up_ms = (int)v;
		} else if (!strcmp(name, "--periodic-commit-ms")) {
			if (parse_count(val, &v) < 0 || v > 600000)
				return bad_option(o->cmd, name, "expects ms in [0, 600000]");
			o->periodic_commit_ms = (int)v;
		} else if (!strcmp(name, "--commit-partitions")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > GP_MAX_PARTS)
				return bad_option(o->cmd, name, "expects a count in [1, 4096]");
			o->commit_parts = (int)v;
		} else if (!strcmp(name, "--consumers")) {
			if (parse_list_int(val, o->consumers, MAX_RUNS, &o->nruns) < 0)
				return bad_option(o->cmd, name, "expects counts in [1, 32], comma-separated (at most 8)");
		} else if (!strcmp(name, "--strategies")) {
			snprintf(strat_buf, sizeof(strat_buf), "%s", val);
		} else if (!strcmp(name, "--seconds") || !strcmp(name, "--steady-s") ||
			   !strcmp(name, "--settle-s") || !strcmp(name, "--timeout-s")) {
			if ((d = parse_secs(val)) <= 0)
				return bad_option(o->cmd, name, "expects seconds in (0, 3600]");
			if (!strcmp(name, "--seconds"))
				o->seconds = d;
			else if (!strcmp(name, "--steady-s"))
				o->steady_s = d;
			else if (!strcmp(name, "--settle-s"))
				o->settle_s = d;
			else
				o->timeout_s = d;
		} else {
			return bad_option(o->cmd, a, "unknown option");
		}
	}
	for (tok = strtok_r(strat_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nstrats >= MAX_STRATS)
			return bad_option(o->cmd, "--strategies", "at most 4");
		if (strcmp(tok, "range") && strcmp(tok, "roundrobin") && strcmp(tok, "cooperative-sticky"))
			return bad_option(o->cmd, "--strategies", "expects range, roundrobin or cooperative-sticky");
		o->strategies[o->nstrats++] = tok;
	}
	if (!o->nstrats)
		return bad_option(o->cmd, "--strategies", "needs at least one");
	if (o->heartbeat_ms >= o->session_ms)
		return bad_option(o->cmd, "--heartbeat-ms", "must be below --session-ms");
	/* the broker settings the run needs; --set given later wins */
	snprintf(set_buf[0], sizeof(set_buf[0]), "group.initial.rebalance.delay.ms=0");
	memmove(o->bo.sets + 1, o->bo.sets, (size_t)o->bo.nsets * sizeof(o->bo.sets[0]));
	o->bo.sets[0] = set_buf[0];
	o->bo.nsets++;
	if (o->session_ms < 6000) {
		snprintf(set_buf[1], sizeof(set_buf[1]), "group.min.session.timeout.ms=%d", o->session_ms);
		memmove(o->bo.sets + 1, o->bo.sets, (size_t)o->bo.nsets * sizeof(o->bo.sets[0]));
		o->bo.sets[0] = set_buf[1];
		o->bo.nsets++;
	}
	return -1;
}

int bench_groups(enum gmode mode, const char *cmd, int argc, char **argv, int (*run)(const struct gopts *o))
{
	struct gopts o;
	struct sigaction sa = { .sa_handler = on_signal };
	int rc;

	memset(&o, 0, sizeof(o));
	o.mode = mode;
	o.cmd = cmd;
	if ((rc = parse_gopts(argc, argv, &o)) >= 0)
		return rc;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand48((long)bench_now_ns() ^ (long)getpid());
	return run(&o);
}
