/* control/sluicectl_drill.c — `sluicectl drill list|run|check-file`: the
 * operators' fault drills (docs/drills.md). The drills themselves are the
 * Python runner tools/sluicefault/drill.py (real Kafka clients through
 * confluent-kafka, the fault commands of a drill file); this file finds it
 * and execs /usr/bin/python3 -m sluicefault.drill with the options given.
 *
 * Where the runner is looked for, first found wins: $SLUICE_TOOLS (a
 * directory holding sluicefault/); beside the binary in a build tree
 * (build/sluicectl -> ../tools, build/san/sluicectl -> ../../tools); the
 * install prefix (PREFIX/bin/sluicectl -> PREFIX/share/sluice/tools, put
 * there by `make install`). When none holds it, the error names every
 * place tried and exits 2.
 * Exit status is the runner's: 0 every promise held, 1 one was broken,
 * 2 bad input (or the runner cannot be started).
 * @thread main */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define DRILL_PYTHON "/usr/bin/python3"
#define DRILL_MODULE "sluicefault/drill.py"

static bool has_runner(const char *dir)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof p, "%s/%s", dir, DRILL_MODULE) >= (int)sizeof p)
		return false;
	return access(p, R_OK) == 0;
}

/* The directory holding sluicefault/ into out; 0, or 2 after saying what
 * is missing. */
static int find_tools(struct ctl *c, char *out, size_t cap)
{
	const char *env = getenv("SLUICE_TOOLS");
	static const char *const rel[] = { "../tools", "../../tools", "../share/sluice/tools" };
	char exe[PATH_MAX], tried[3 * (PATH_MAX + 32) + 64] = "";
	ssize_t n;

	if (env && *env) {
		if (has_runner(env)) {
			snprintf(out, cap, "%s", env);
			return 0;
		}
		return ctl_usage(c, "SLUICE_TOOLS=%s holds no %s (it names the directory that holds sluicefault/)",
				 env, DRILL_MODULE);
	}
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return ctl_usage(c, "cannot find where sluicectl is (/proc/self/exe: %s); set SLUICE_TOOLS to the "
				 "directory that holds %s", strerror(errno), DRILL_MODULE);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		char d[PATH_MAX + 32], real[PATH_MAX];

		snprintf(d, sizeof d, "%s/%s", exe, rel[i]);
		if (has_runner(d) && realpath(d, real)) {
			snprintf(out, cap, "%s", real);
			return 0;
		}
		snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", i ? ", " : "", d);
	}
	fprintf(stderr, "sluicectl: %s: the drill runner %s is not installed: looked in %s\n"
		"  what to do: run sluicectl from its build tree, `make install` (it puts the runner in "
		"PREFIX/share/sluice/tools), or set SLUICE_TOOLS to the directory that holds sluicefault/\n",
		c->cmd, DRILL_MODULE, tried);
	return EXIT_USAGE;
}

/* Exec the runner with verb, the positional arguments and the options as
 * given (--bootstrap from -b/$SLUICE_BROKERS when not given, --json from
 * --format json). Returns only on failure. */
static int drill_exec(struct ctl *c, const struct args *a, const char *verb)
{
	char tools[PATH_MAX], pypath[2 * PATH_MAX];
	const char *old = getenv("PYTHONPATH");
	char *argv[8 + 2 * a->nopt + a->npos + 4];
	char opt[a->nopt + 1][64];
	int n = 0, rc;

	rc = find_tools(c, tools, sizeof tools);
	if (rc)
		return rc;
	if (access(DRILL_PYTHON, X_OK))
		return ctl_fail(c, "the drill runner needs %s (with confluent-kafka): %s", DRILL_PYTHON,
				strerror(errno));
	snprintf(pypath, sizeof pypath, "%s%s%s", tools, old && *old ? ":" : "", old && *old ? old : "");
	setenv("PYTHONPATH", pypath, 1);
	argv[n++] = (char *)DRILL_PYTHON;
	argv[n++] = (char *)"-m";
	argv[n++] = (char *)"sluicefault.drill";
	argv[n++] = (char *)verb;
	for (int i = 0; i < a->npos; i++)
		argv[n++] = a->pos[i];
	for (int i = 0; i < a->nopt; i++) {
		snprintf(opt[i], sizeof opt[i], "--%s", a->spec[i]->name);
		argv[n++] = opt[i];
		if (a->spec[i]->arg)
			argv[n++] = a->val[i];
	}
	if (!strcmp(verb, "run") && !opt_has(a, "bootstrap") && c->bootstrap_given) {
		argv[n++] = (char *)"--bootstrap";
		argv[n++] = (char *)c->bootstrap;
	}
	if (c->json && !opt_has(a, "json"))
		argv[n++] = (char *)"--json";
	argv[n] = NULL;
	fflush(stdout);
	execv(DRILL_PYTHON, argv);
	return ctl_fail(c, "cannot run %s: %s", DRILL_PYTHON, strerror(errno));
}

static int cmd_drill_list(struct ctl *c, const struct args *a)
{
	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	return drill_exec(c, a, "list");
}

static int cmd_drill_run(struct ctl *c, const struct args *a)
{
	if (a->npos != 1)
		return ctl_usage(c, a->npos ? "one scenario at a time, not '%s'" : "which scenario? (%s)",
				 a->npos ? a->pos[1] : "sluicectl drill list");
	if (!opt_get(a, "drill-file"))
		return ctl_usage(c, "--drill-file FILE is needed: the commands that cause each fault "
				 "(docs/drills.md#the-drill-file)");
	return drill_exec(c, a, "run");
}

static int cmd_drill_check_file(struct ctl *c, const struct args *a)
{
	if (a->npos != 1)
		return ctl_usage(c, "check-file takes one FILE");
	return drill_exec(c, a, "check-file");
}

static const struct opt_spec list_opts[] = {
	{ "json", 0, NULL, "the list as JSON" },
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec run_opts[] = {
	{ "drill-file", 'f', "FILE", "the cluster's nodes and the commands that cause and heal each fault "
	  "(docs/drills.md#the-drill-file)" },
	{ "bootstrap", 0, "HOST:PORT,...", "the brokers (default: -b, $SLUICE_BROKERS, then the drill file's "
	  "nodes)" },
	{ "seconds", 's', "S", "how long the clients run around the fault (default 30)" },
	{ "budget", 0, "S", "the capacity budget: seconds after the heal within which the clients must be "
	  "served and the lag back to normal (default 60)" },
	{ "topic-prefix", 0, "P", "the name of the drill's topics (default sluice-drill-<random>; the dead "
	  "letter topic is P-dlq)" },
	{ "allow-existing-topics", 0, NULL, "run even though the cluster has topics the drill did not create "
	  "(it never writes to them, but its faults hit their partitions too)" },
	{ "topic-config", 'c', "KEY=VALUE", "a config of the drill's topics (repeatable; default "
	  "min.insync.replicas=2 at 3 replicas): rehearse with your production settings" },
	{ "replication-factor", 'r', "N", "the drill topics' replicas (default min(3, brokers))" },
	{ "partitions", 'p', "N", "the drill topic's partitions (default 3)" },
	{ "rate", 0, "N", "records a second the producer sends (default 100)" },
	{ "out", 'o', "DIR", "keep the clients' histories (JSONL, the evidence) in DIR (default "
	  "./sluice-drill-<id>)" },
	{ "seed", 0, "N", "the random seed (printed; the same seed picks the same victims and keys)" },
	{ "json", 0, NULL, "the report as JSON" },
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec check_opts[] = {
	{ "json", 0, NULL, "what was read as JSON" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd drill_cmds[] = {
	{ "drill", "list", "", "the fault drills, one line each", list_opts, "sluicectl drill list",
	  cmd_drill_list },
	{ "drill", "run", "SCENARIO", "run one fault drill against a running cluster and report what the "
	  "clients saw against the promise (exit 0 held, 1 broken, 2 bad input)",
	  run_opts,
	  "sluicectl drill run leader-loss --drill-file /etc/sluice/drill.ini\n"
	  "sluicectl -b n1:9092 drill run poison-pill -f drill.ini --seconds 60 --json",
	  cmd_drill_run },
	{ "drill", "check-file", "FILE", "check a drill file: every node, address and command (exit 2 naming "
	  "the line and key of the first error)",
	  check_opts, "sluicectl drill check-file /etc/sluice/drill.ini", cmd_drill_check_file },
};

const int drill_ncmds = sizeof drill_cmds / sizeof drill_cmds[0];
