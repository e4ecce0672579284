/* control/sluicectl.c — the operator's CLI: argument parsing, --help and
 * bash completion from one command table. Cluster: sluicectl_cluster.c
 * (its rules: sluicectl_rules.c; the rolling restart: sluicectl_roll.c); topics: sluicectl_topic.c; groups:
 * sluicectl_group.c; records: sluicectl_record.c; what they all use:
 * sluicectl_cmd.c (lookups, options, messages) and sluicectl_fetch.c. See
 * sluicectl.h. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define DEFAULT_BOOTSTRAP "127.0.0.1:9092"
#define DEFAULT_TIMEOUT_MS 10000

static const struct opt_spec global_opts[] = {
	{ "brokers", 'b', "HOST:PORT,...", "bootstrap brokers (default: $SLUICE_BROKERS, then 127.0.0.1:9092)" },
	{ "format", 0, "table|json", "output format (default table)" },
	{ "admin", 0, "HOST:PORT", "the broker's HTTP admin endpoint, for shards, log end and health; "
	  "https://HOST:PORT for HTTPS (default: $SLUICE_ADMIN, then the admin.listen the bootstrap broker "
	  "reports, then its host, port 9644)" },
	{ "admin-token-file", 0, "FILE", "a bearer token for the admin endpoint (the file's first line; one of "
	  "the broker's admin.auth.token.file), sent instead of --command-config's user and password; "
	  "admin.token= in --command-config does the same" },
	{ "timeout", 0, "MS", "per-request timeout in milliseconds (default 10000)" },
	{ "command-config", 0, "FILE", "Kafka client properties for a secured cluster, as Kafka's tools take them: "
	  "security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), sasl.mechanism (PLAIN, SCRAM-SHA-256, "
	  "SCRAM-SHA-512), sasl.jaas.config or sasl.username and sasl.password, ssl.truststore.location (PEM), "
	  "ssl.keystore.location or ssl.certificate.location and ssl.key.location (mutual TLS), "
	  "ssl.endpoint.identification.algorithm; the user and password also go to the admin endpoint as HTTP "
	  "Basic (default: $SLUICE_COMMAND_CONFIG)" },
	{ "help", 'h', NULL, "help for sluicectl, a noun, or a command" },
	{ NULL, 0, NULL, NULL }
};

/* Every command, in help order: each noun's table in turn. */
static const struct {
	const struct cmd *cmds;
	const int *n;
} cmd_tables[] = {
	{ cluster_cmds, &cluster_ncmds }, { roll_cmds, &roll_ncmds }, { topic_cmds, &topic_ncmds }, { group_cmds, &group_ncmds },
	{ record_cmds, &record_ncmds }, { leader_cmds, &leader_ncmds }, { reassign_cmds, &reassign_ncmds },
	{ features_cmds, &features_ncmds },
	{ drill_cmds, &drill_ncmds }, { capacity_cmds, &capacity_ncmds }, { host_cmds, &host_ncmds }, { user_cmds, &user_ncmds }, { acl_cmds, &acl_ncmds },
};
static const struct cmd *all_cmds[128];
static int n_cmds;

static void cmds_init(void)
{
	for (size_t t = 0; t < sizeof(cmd_tables) / sizeof(cmd_tables[0]); t++)
		for (int i = 0; i < *cmd_tables[t].n; i++) {
			if (n_cmds == (int)(sizeof(all_cmds) / sizeof(all_cmds[0]))) {
				fprintf(stderr, "sluicectl: more commands than all_cmds holds: raise its size\n");
				exit(70);
			}
			all_cmds[n_cmds++] = &cmd_tables[t].cmds[i];
		}
}


static const struct opt_spec *find_opt(const struct opt_spec *o, const char *name, char shrt)
{
	for (; o && o->name; o++)
		if ((name && !strcmp(o->name, name)) || (shrt && o->shrt == shrt))
			return o;
	return NULL;
}

/* ---- help and completion -------------------------------------------------- */

static void print_opts(const struct opt_spec *o)
{
	for (; o->name; o++) {
		char left[64];

		if (o->shrt)
			snprintf(left, sizeof left, "-%c, --%s%s%s", o->shrt, o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		if (strlen(left) > 26)
			printf("  %s\n%30s", left, "");
		else
			printf("  %-26s  ", left);
		wrap(stdout, 30, 30, o->help);
	}
}

static void help_top(void)
{
	const char *last = "";

	printf("sluicectl — operate a Sluice (or any Kafka) cluster over the Kafka protocol\n\n"
	       "usage: sluicectl [-b HOST:PORT,...] [--admin HOST:PORT] [--format table|json]\n"
	       "                 [--command-config FILE] NOUN VERB [ARGS]\n\n"
	       "commands:\n");
	for (int i = 0; i < n_cmds; i++) {
		const struct cmd *m = all_cmds[i];
		char left[64];

		if (strcmp(m->noun, last))
			last = m->noun;
		snprintf(left, sizeof left, "%s %s", m->noun, m->verb);
		printf("  %-22s ", left);
		wrap(stdout, 25, 25, m->summary);
	}
	printf("  %-22s %s\n", "completion bash", "print the bash completion script");
	printf("\nglobal options (anywhere on the line):\n");
	print_opts(global_opts);
	printf("\nexit status: 0 success; 1 a Kafka error (named, with what to do), an unreachable\n"
	       "broker or a refused operation; 2 bad usage.\n\n"
	       "Shard placement, log end offsets and health come from the broker's HTTP admin\n"
	       "endpoint (admin.listen, see --admin); when it cannot be reached those fields\n"
	       "show as unknown, with one note on stderr, and the command still succeeds.\n\n"
	       "A secured cluster (docs/security.md): --command-config FILE with Kafka's client\n"
	       "properties, e.g.\n"
	       "  security.protocol=SASL_SSL\n"
	       "  sasl.mechanism=SCRAM-SHA-512\n"
	       "  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
	       "      required username=\"admin\" password=\"admin-secret\";\n"
	       "  ssl.truststore.location=/etc/sluice/ca.pem\n\n"
	       "examples:\n  sluicectl cluster info\n  sluicectl topic create orders -p 6\n"
	       "  sluicectl group describe orders-app\n  sluicectl topic --help\n"
	       "  source <(sluicectl completion bash)\n");
}

static void help_noun(const char *noun)
{
	printf("usage: sluicectl %s VERB [ARGS] [OPTIONS]\n\nverbs:\n", noun);
	for (int i = 0; i < n_cmds; i++) {
		const struct cmd *m = all_cmds[i];
		char left[64];

		if (strcmp(m->noun, noun))
			continue;
		snprintf(left, sizeof left, "%s %s", m->verb, m->synopsis);
		printf("  %-22s ", left);
		wrap(stdout, 25, 25, m->summary);
	}
	printf("\nsluicectl %s VERB --help shows a verb's options and examples.\n", noun);
}

static void help_cmd(const struct cmd *m)
{
	const char *e = m->examples;

	printf("usage: sluicectl %s %s%s%s [OPTIONS]\n\n%s\n", m->noun, m->verb, *m->synopsis ? " " : "",
	       m->synopsis, m->summary);
	if (m->opts->name) {
		printf("\noptions:\n");
		print_opts(m->opts);
	}
	printf("\nglobal options:\n");
	print_opts(global_opts);
	printf("\nexamples:\n");
	while (*e) {
		size_t n = strcspn(e, "\n");

		printf("  %.*s\n", (int)n, e);
		e += n + (e[n] == '\n');
	}
}

static void completion_bash(void)
{
	const char *last = "";

	printf("# bash completion for sluicectl: source <(sluicectl completion bash)\n"
	       "_sluicectl() {\n"
	       "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	       "  local noun= verb= i w b=()\n"
	       "  for ((i=1; i<COMP_CWORD; i++)); do\n"
	       "    w=${COMP_WORDS[i]}\n"
	       "    case $w in\n"
	       "      -b|--brokers) b+=(-b \"${COMP_WORDS[i+1]}\"); ((i++));;\n"
	       "      --command-config) b+=(--command-config \"${COMP_WORDS[i+1]}\"); ((i++));;\n"
	       "      --format|--timeout|--admin) ((i++));;\n"
	       "      -*) ;;\n"
	       "      *) if [[ -z $noun ]]; then noun=$w; elif [[ -z $verb ]]; then verb=$w; fi;;\n"
	       "    esac\n"
	       "  done\n"
	       "  case $prev in\n"
	       "    --format) COMPREPLY=($(compgen -W 'table json' -- \"$cur\")); return;;\n"
	       "    --command-config|--admin-token-file) COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n"
	       "    -b|--brokers|--timeout|--admin) return;;\n"
	       "    --group|-g) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names group 2>/dev/null)\" -- \"$cur\")); return;;\n"
	       "    --topic|-t) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names topic 2>/dev/null)\" -- \"$cur\")); return;;\n"
	       "  esac\n"
	       "  local g='--brokers --format --admin --admin-token-file --timeout --command-config --help'\n"
	       "  if [[ -z $noun ]]; then\n"
	       "    COMPREPLY=($(compgen -W \"");
	for (int i = 0; i < n_cmds; i++)
		if (strcmp(all_cmds[i]->noun, last))
			printf("%s ", last = all_cmds[i]->noun);
	printf("completion $g\" -- \"$cur\")); return\n  fi\n"
	       "  if [[ -z $verb ]]; then\n    case $noun in\n");
	last = "";
	for (int i = 0; i < n_cmds; i++) {
		if (!strcmp(all_cmds[i]->noun, last))
			continue;
		last = all_cmds[i]->noun;
		printf("      %s) COMPREPLY=($(compgen -W \"", last);
		for (int j = i; j < n_cmds; j++)
			if (!strcmp(all_cmds[j]->noun, last))
				printf("%s ", all_cmds[j]->verb);
		printf("--help\" -- \"$cur\"));;\n");
	}
	printf("      completion) COMPREPLY=($(compgen -W bash -- \"$cur\"));;\n"
	       "    esac\n    return\n  fi\n"
	       "  local opts\n  case \"$noun $verb\" in\n");
	for (int i = 0; i < n_cmds; i++) {
		const struct opt_spec *o;

		printf("    '%s %s') opts='", all_cmds[i]->noun, all_cmds[i]->verb);
		for (o = all_cmds[i]->opts; o->name; o++)
			printf("--%s ", o->name);
		printf("';;\n");
	}
	printf("  esac\n"
	       "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts $g\" -- \"$cur\")); return; fi\n"
	       "  case $noun in\n"
	       "    topic|record) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names topic 2>/dev/null)\" -- \"$cur\"));;\n"
	       "    group) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names group 2>/dev/null)\" -- \"$cur\"));;\n"
	       "  esac\n"
	       "}\n"
	       "complete -F _sluicectl sluicectl\n");
}



/* `__names topic|group`: names one per line, for completion. */
static int cmd_names(struct ctl *c, const char *what)
{
	if (!strcmp(what, "topic")) {
		struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);

		for (int32_t i = 0; i < md->Topics.count; i++)
			if (!md->Topics.items[i].IsInternal)
				printf("%s\n", kstr(md->Topics.items[i].Name));
		return 0;
	}
	if (!strcmp(what, "group"))
		return group_names(c);
	return EXIT_USAGE;
}

/* ---- main ------------------------------------------------------------------ */

/* --command-config into c->sec, then --admin-token-file: 0, or
 * EXIT_USAGE with the error printed. */
static int load_sec(struct ctl *c, const char *file, const char *token_file)
{
	char err[1024];

	if (file && *file && ctl_sec_load(&c->sec, file, err, sizeof err) < 0) {
		fprintf(stderr, "sluicectl: %s: --command-config: %s\n", c->cmd, err);
		ctl_sec_fini(&c->sec);
		return EXIT_USAGE;
	}
	if (token_file && *token_file && ctl_sec_token_file(&c->sec, token_file, err, sizeof err) < 0) {
		fprintf(stderr, "sluicectl: %s: %s\n", c->cmd, err);
		ctl_sec_fini(&c->sec);
		return EXIT_USAGE;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ctl c;
	struct args a;
	const struct cmd *m = NULL;
	const char *noun = NULL, *verb = NULL, *format = "table", *command_config = getenv("SLUICE_COMMAND_CONFIG");
	const char *token_file = NULL;
	bool help = false, opts_done = false;
	char cmdname[64];
	int64_t timeout = DEFAULT_TIMEOUT_MS;
	char *pos_store[argc], *val_store[argc];
	const struct opt_spec *spec_store[argc];
	int rc;

	/* a peer that closes a TLS connection (an admin endpoint refusing the
	 * handshake) makes SSL_write's write() raise SIGPIPE: an error instead */
	signal(SIGPIPE, SIG_IGN);
	cmds_init();
	memset(&c, 0, sizeof c);
	memset(&a, 0, sizeof a);
	c.boot.fd = -1;
	c.cmd = "usage";
	c.bootstrap = getenv("SLUICE_BROKERS");
	c.bootstrap_given = c.bootstrap && *c.bootstrap;
	if (!c.bootstrap_given)
		c.bootstrap = DEFAULT_BOOTSTRAP;
	c.admin = getenv("SLUICE_ADMIN");
	c.admin_src = "SLUICE_ADMIN";
	if (c.admin && !*c.admin)
		c.admin = NULL;
	a.pos = pos_store;
	a.spec = spec_store;
	a.val = val_store;

	for (int i = 1; i < argc; i++) {
		char *arg = argv[i], *eq = NULL;
		const struct opt_spec *o;
		bool global;

		if (opts_done || arg[0] != '-' || !arg[1]) {
			if (!noun) {
				noun = arg;
			} else if (!verb && (m == NULL)) {
				verb = arg;
				for (int j = 0; j < n_cmds; j++)
					if (!strcmp(all_cmds[j]->noun, noun) && !strcmp(all_cmds[j]->verb, verb))
						m = all_cmds[j];
				if (!m && strcmp(noun, "completion") && strcmp(noun, "__names")) {
					snprintf(cmdname, sizeof cmdname, "%s", noun);
					c.cmd = cmdname;
					for (int j = 0; j < n_cmds; j++)
						if (!strcmp(all_cmds[j]->noun, noun))
							return ctl_usage(&c, "unknown verb '%s'", verb);
					c.cmd = NULL;
					return ctl_usage(&c, "unknown noun '%s'", noun);
				}
			} else {
				a.pos[a.npos++] = arg;
			}
			continue;
		}
		if (!strcmp(arg, "--")) {
			opts_done = true;
			continue;
		}
		if (arg[1] == '-') {
			eq = strchr(arg, '=');
			if (eq)
				*eq = 0;
			o = find_opt(global_opts, arg + 2, 0);
			global = o != NULL;
			if (!o && m)
				o = find_opt(m->opts, arg + 2, 0);
		} else {
			o = find_opt(global_opts, NULL, arg[1]);
			global = o != NULL;
			if (!o && m)
				o = find_opt(m->opts, NULL, arg[1]);
			if (o && arg[2])
				eq = arg + 1;   /* -n10 */
		}
		if (!o) {
			if (m) {
				snprintf(cmdname, sizeof cmdname, "%s %s", m->noun, m->verb);
				c.cmd = cmdname;
			}
			return ctl_usage(&c, "unknown option '%s'", arg);
		}
		const char *val = "";

		if (o->arg) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return ctl_usage(&c, "option --%s needs %s", o->name, o->arg);
		} else if (eq && arg[1] == '-') {
			return ctl_usage(&c, "option --%s takes no value", o->name);
		}
		if (global) {
			if (!strcmp(o->name, "brokers")) {
				c.bootstrap = val;
				c.bootstrap_given = true;
			} else if (!strcmp(o->name, "admin")) {
				c.admin = val;
				c.admin_src = "--admin";
			} else if (!strcmp(o->name, "format")) {
				format = val;
			} else if (!strcmp(o->name, "command-config")) {
				command_config = val;
			} else if (!strcmp(o->name, "admin-token-file")) {
				token_file = val;
			} else if (!strcmp(o->name, "help")) {
				help = true;
			} else if (!strcmp(o->name, "timeout") && !parse_i64(val, 1, 3600000, &timeout)) {
				return ctl_usage(&c, "--timeout wants milliseconds, not '%s'", val);
			}
			continue;
		}
		a.spec[a.nopt] = o;
		a.val[a.nopt++] = (char *)val;
	}
	if (strcmp(format, "table") && strcmp(format, "json"))
		return ctl_usage(&c, "--format is table or json, not '%s'", format);
	c.json = !strcmp(format, "json");
	c.timeout_ms = (int)timeout;

	if (!noun) {
		help_top();
		return help ? 0 : EXIT_USAGE;
	}
	if (!strcmp(noun, "completion")) {
		if (help || !verb || strcmp(verb, "bash")) {
			printf("usage: sluicectl completion bash\n\nprints the bash completion script:\n"
			       "  source <(sluicectl completion bash)\n"
			       "  sluicectl completion bash > /etc/bash_completion.d/sluicectl\n");
			return help ? 0 : EXIT_USAGE;
		}
		completion_bash();
		return 0;
	}
	if (!strcmp(noun, "__names")) {
		c.cmd = "__names";
		if ((rc = load_sec(&c, command_config, token_file)))
			return rc;
		rc = verb ? cmd_names(&c, verb) : EXIT_USAGE;
		kclient_close(&c.boot);
		ctl_sec_fini(&c.sec);
		return rc;
	}
	if (!m) {
		bool known = false;

		for (int j = 0; j < n_cmds; j++)
			known |= !strcmp(all_cmds[j]->noun, noun);
		if (!known) {
			c.cmd = NULL;
			return ctl_usage(&c, "unknown noun '%s'", noun);
		}
		help_noun(noun);
		return help ? 0 : EXIT_USAGE;
	}
	if (help) {
		help_cmd(m);
		return 0;
	}
	snprintf(cmdname, sizeof cmdname, "%s %s", m->noun, m->verb);
	c.cmd = cmdname;
	if ((rc = load_sec(&c, command_config, token_file)))
		return rc;
	rc = m->run(&c, &a);
	fflush(stdout);
	kclient_close(&c.boot);
	for (int i = 0; i < c.nnodes; i++)
		kclient_close(&c.nodes[i]);
	ctl_sec_fini(&c.sec);
	return rc;
}

