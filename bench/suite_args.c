/* bench/suite_args.c — `sluice-bench suite`'s command line: its usage, its
 * options into struct suite, which scenarios were named; and the results
 * directory made. See suite.h.
 *
 * Thread: the suite's main thread, before any scenario runs.
 * Errors: a bad option is said on stderr (bad_option) and parse
 * returns 2; a profile that cannot be read likewise.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/suite.h"

static void usage(FILE *f, const struct scenario *sc, int nsc)
{
	fprintf(f,
		"usage: sluice-bench suite [--profile FILE] [--quick] [--out DIR] [--emulate PROFILE]\n"
		"                          [--records N] [--peer-records N] [--seconds S]\n"
		"                          [--stored BYTES] [--rate R]\n"
		"                          [--backlog S] [--shards N] [SCENARIO...]\n"
		"\n"
		"Runs the named scenarios (all by default) against brokers it starts itself and\n"
		"writes DIR/report.md, DIR/results.json and PNG plots (default DIR: bench-results/\n"
		"<UTC date and time>). Every figure is given absolute and as a fraction of the\n"
		"profile's physical limit (the disk or the NIC, whichever binds).\n"
		"\n"
		"  --profile FILE   the hardware profile (default hw-profiles/local.conf, which\n"
		"                   `make hwprobe` writes by measuring this machine)\n"
		"  --emulate FILE   run the brokers behind a veth shaped to FILE's NIC rate and a\n"
		"                   cgroup v2 io.max cap at its disk rates; FILE is the profile\n"
		"  --quick          shorter runs: 3M records, 3 s points, 2 GB stored, 5 s backlog\n"
		"  --records N      records of each Kafka 2014 row (default 20M)\n"
		"  --peer-records N records the peers scenario produces and consumes, Sluice and\n"
		"                   each peer (default a quarter of --records)\n"
		"  --seconds S      each timed point and latency run (default 10)\n"
		"  --stored BYTES   stored-data: how much to write (default: the machine's memory)\n"
		"  --rate R         k14-latency and peers: end-to-end records/s (default 20000)\n"
		"  --backlog S      backlog-drain: seconds of production before the consumer\n"
		"                   starts (default 20)\n"
		"  --shards N       broker shards (default 0: one per core)\n"
		"\n"
		"scenarios:\n");
	for (int i = 0; i < nsc; i++)
		fprintf(f, "  %-16s %s\n", sc[i].name, sc[i].title);
}

int suite_mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int suite_parse_args(struct suite *s, int argc, char **argv, int *want, const struct scenario *sc, int nsc)
{
	const char *profile = NULL, *emulate = NULL, *out = NULL;
	uint64_t v;
	int named = 0, records_set = 0, seconds_set = 0, stored_set = 0, backlog_set = 0, peer_set = 0;
	char root[900], err[1200];

	s->records = 20000000;
	s->seconds = 10;
	s->e2e_rate = 20000;
	s->backlog_seconds = 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout, sc, nsc);
			return 0;
		}
		if (!strcmp(a, "--quick")) {
			s->quick = 1;
			continue;
		}
		if (a[0] != '-') {
			int k;

			for (k = 0; k < nsc && strcmp(sc[k].name, a); k++)
				;
			if (k == nsc)
				return bad_option("suite", a, "is not a scenario (sluice-bench suite --help lists them)");
			want[k] = 1;
			named = 1;
			continue;
		}
		if (!val)
			return bad_option("suite", a, "needs a value (or is unknown)");
		i++;
		if (!strcmp(a, "--profile")) {
			profile = val;
		} else if (!strcmp(a, "--emulate")) {
			emulate = val;
		} else if (!strcmp(a, "--out")) {
			out = val;
		} else if (!strcmp(a, "--records")) {
			if (parse_count(val, &s->records) < 0 || s->records < 6 || s->records > 1000000000)
				return bad_option("suite", a, "expects a count in [6, 1G]");
			records_set = 1;
		} else if (!strcmp(a, "--peer-records")) {
			if (parse_count(val, &s->peer_records) < 0 || s->peer_records < 6 ||
			    s->peer_records > 1000000000)
				return bad_option("suite", a, "expects a count in [6, 1G]");
			peer_set = 1;
		} else if (!strcmp(a, "--seconds")) {
			s->seconds = strtod(val, &end);
			if (end == val || *end || !(s->seconds >= 0.2) || s->seconds > 3600)
				return bad_option("suite", a, "expects seconds in [0.2, 3600]");
			seconds_set = 1;
		} else if (!strcmp(a, "--stored")) {
			if (parse_count(val, &s->stored) < 0 || s->stored < 1000000)
				return bad_option("suite", a, "expects bytes (K/M/G suffixes), at least 1M");
			stored_set = 1;
		} else if (!strcmp(a, "--rate")) {
			if (parse_count(val, &s->e2e_rate) < 0 || s->e2e_rate < 10 || s->e2e_rate > 10000000)
				return bad_option("suite", a, "expects records/s in [10, 10M]");
		} else if (!strcmp(a, "--backlog")) {
			s->backlog_seconds = strtod(val, &end);
			if (end == val || *end || !(s->backlog_seconds >= 0.2) || s->backlog_seconds > 3600)
				return bad_option("suite", a, "expects seconds in [0.2, 3600]");
			backlog_set = 1;
		} else if (!strcmp(a, "--shards")) {
			if (parse_count(val, &v) < 0 || v > 64)
				return bad_option("suite", a, "expects 0..64");
			s->shards = (int)v;
		} else {
			return bad_option("suite", a, "unknown option");
		}
	}
	if (!named)
		for (int k = 0; k < nsc; k++)
			want[k] = 1;
	if (s->quick) {
		if (!records_set)
			s->records = 3000000;
		if (!seconds_set)
			s->seconds = 3;
		if (!stored_set)
			s->stored = 2000000000ull;
		if (!backlog_set)
			s->backlog_seconds = 5;
	}
	if (!peer_set)
		s->peer_records = s->records / 4 > 6 ? s->records / 4 : 6;
	if (profile && emulate && strcmp(profile, emulate))
		return bad_option("suite", "--emulate", "is the profile: not with another --profile");
	bench_repo_root(root, sizeof(root));
	if (emulate)
		profile = emulate;
	if (profile)
		snprintf(s->prof_path, sizeof(s->prof_path), "%s", profile);
	else
		snprintf(s->prof_path, sizeof(s->prof_path), "%s/hw-profiles/local.conf", root);
	if (hw_profile_load(s->prof_path, &s->prof, err, sizeof(err)) < 0) {
		fprintf(stderr, "sluice-bench suite: %s%s\n", err, profile ? "" :
			" (run `make hwprobe` to measure this machine into it, or give --profile FILE)");
		return 2;
	}
	s->emulating = emulate != NULL;
	if (!stored_set && !s->quick)
		s->stored = 0;   /* the caller's: the machine's memory */
	if (out) {
		snprintf(s->out, sizeof(s->out), "%s", out);
	} else {
		time_t t = time(NULL);
		struct tm tm;

		gmtime_r(&t, &tm);
		snprintf(s->out, sizeof(s->out), "bench-results/%04d%02d%02d-%02d%02d%02d", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	}
	return -1;
}
