/* bench/suite_report.c — what `sluice-bench suite` writes: DIR/report.md
 * (headline table, one section per scenario, plots), DIR/results.json (every
 * figure, machine-readable) and DIR/<scenario>.png drawn by gnuplot from
 * DIR/<scenario>.dat and .gp, kept beside them so a plot can be redrawn.
 *
 * Figures NAN (not measured) are blank cells in the report and null in the
 * JSON. A fraction of the limit is MB/s over the limit that binds the row
 * (bench/suite.h struct row), shown only when the profile gives it.
 *
 * Thread: the suite's main thread, after every scenario ran.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/capacity.h"
#include "bench/suite.h"

/* ---- formatting ----------------------------------------------------------- */

/* n with thousands separators ("2,024,032"); "" for NAN. */
static const char *grouped(double v, char *buf, size_t len)
{
	char tmp[32];
	size_t n, o = 0;

	if (isnan(v)) {
		buf[0] = 0;
		return buf;
	}
	snprintf(tmp, sizeof(tmp), "%.0f", v);
	n = strlen(tmp);
	for (size_t i = 0; i < n && o + 2 < len; i++) {
		if (i && tmp[i - 1] != '-' && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

static const char *fixed(double v, int prec, char *buf, size_t len)
{
	if (isnan(v))
		buf[0] = 0;
	else
		snprintf(buf, len, "%.*f", prec, v);
	return buf;
}

static double fraction(const struct row *w)
{
	return w->limit_mbps > 0 && !isnan(w->mbps) ? w->mbps / w->limit_mbps : NAN;
}

static const char *pct(double f, char *buf, size_t len)
{
	if (isnan(f))
		buf[0] = 0;
	else if (f < 0.001)
		snprintf(buf, len, "%.3f%%", f * 100);
	else
		snprintf(buf, len, "%.1f%%", f * 100);
	return buf;
}

static const char *ratio(double a, double b, char *buf, size_t len)
{
	if (isnan(a) || isnan(b) || b <= 0)
		buf[0] = 0;
	else
		snprintf(buf, len, "%.2fx", a / b);
	return buf;
}

/* A headline figure's runs, "a / b" (grouped, or prec decimals when
 * prec >= 0), and how far apart they are, "6.1%" of their mean; both ""
 * for a row of one run. */
static void runs_text(const double *v, int prec, char *buf, size_t len, char *apart, size_t alen)
{
	double lo = v[0], hi = v[0], sum = 0;
	size_t o = 0;

	buf[0] = apart[0] = 0;
	for (int k = 0; k < SUITE_RUNS; k++) {
		char one[32];

		if (isnan(v[k]))
			return;
		lo = v[k] < lo ? v[k] : lo;
		hi = v[k] > hi ? v[k] : hi;
		sum += v[k];
		if (prec < 0)
			grouped(v[k], one, sizeof(one));
		else
			fixed(v[k], prec, one, sizeof(one));
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", k ? " / " : "", one);
	}
	if (sum > 0)
		snprintf(apart, alen, "%.1f%%", (hi - lo) / (sum / SUITE_RUNS) * 100);
}

static const struct result *find(const struct suite *s, const char *name)
{
	for (int i = 0; i < s->nres; i++)
		if (!strcmp(s->res[i].sc->name, name))
			return &s->res[i];
	return NULL;
}

/* ---- plots --------------------------------------------------------------------- */

/* Run gnuplot on DIR/name.gp in DIR; 0 when DIR/name.png was drawn. */
static int gnuplot(const char *dir, const char *gp, const char *png, char *why, size_t len)
{
	char path[1200], errpath[1200];
	struct stat st;
	pid_t pid;
	int status = 0;

	snprintf(errpath, sizeof(errpath), "%s/gnuplot.err", dir);
	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0)
			dup2(fd, 2);
		if (chdir(dir) < 0)
			_exit(126);
		execlp("gnuplot", "gnuplot", gp, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	snprintf(path, sizeof(path), "%s/%s", dir, png);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		snprintf(why, len, "gnuplot is not installed (scripts/setup installs gnuplot-nox)");
		return -ENOENT;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) || stat(path, &st) < 0 || !st.st_size) {
		snprintf(why, len, "gnuplot %s failed (status 0x%x): see %s", gp, status, errpath);
		return -EIO;
	}
	unlink(errpath);
	return 0;
}

static void plot_one(const struct suite *s, struct result *r, char *why, size_t len)
{
	const struct series *p = r->plot;
	char path[1200], gp[48], png[48], dat[48];
	FILE *f;

	snprintf(dat, sizeof(dat), "%s.dat", r->sc->name);
	snprintf(gp, sizeof(gp), "%s.gp", r->sc->name);
	snprintf(png, sizeof(png), "%s.png", r->sc->name);
	snprintf(path, sizeof(path), "%s/%s", s->out, dat);
	if (!(f = fopen(path, "w"))) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "# %s: %s | %s%s%s\n", r->sc->name, p->xlabel, p->y1label, p->y2label ? " | " : "",
		p->y2label ? p->y2label : "");
	for (int i = 0; i < p->n; i++)
		fprintf(f, "%.6g %.6g %.6g\n", p->x[i], p->y1[i], p->y2[i]);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%s", s->out, gp);
	if (!(f = fopen(path, "w"))) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "# drawn by sluice-bench suite; redraw with: gnuplot %s\n", gp);
	fprintf(f, "set terminal pngcairo size 900,480 noenhanced font 'sans,10'\n");
	fprintf(f, "set output '%s'\n", png);
	fprintf(f, "set title '%s (%s)'\n", r->sc->title, s->prof.description);
	fprintf(f, "set xlabel '%s'\nset ylabel '%s'\nset grid\nset key top left\n", p->xlabel, p->y1label);
	fprintf(f, "set yrange [0:*]\n");
	if (p->logx)
		fprintf(f, "set logscale x\n");
	if (p->y2label) {
		fprintf(f, "set y2label '%s'\nset ytics nomirror\nset y2tics\nset y2range [0:*]\n", p->y2label);
		fprintf(f, "plot '%s' using 1:2 with linespoints lw 2 title '%s' axes x1y1, "
			"'' using 1:3 with linespoints lw 2 title '%s' axes x1y2", dat, p->y1label, p->y2label);
		if (p->y2limit > 0)
			fprintf(f, ", %.6g axes x1y2 with lines dt 2 lw 2 lc rgb 'gray40' title 'limit: %s %.0f MB/s'",
				p->y2limit, p->y2limit_what ? p->y2limit_what : "", p->y2limit);
		fputc('\n', f);
	} else {
		fprintf(f, "plot '%s' using 1:2 with linespoints lw 2 title '%s'\n", dat, p->y1label);
	}
	fclose(f);
	if (gnuplot(s->out, gp, png, why, len) == 0)
		snprintf(r->plot_file, sizeof(r->plot_file), "%s", png);
}

/* ---- report.md ------------------------------------------------------------------ */

/* The Kafka 2014 rows and the peers' ratios: the report's top and stdout. */
static void headline(const struct suite *s, FILE *f)
{
	static const char *const k14[] = { "k14-producer", "k14-producers3", "k14-consumer", "k14-consumers3",
					   "k14-prodcons", "k14-replicated" };
	const struct result *lat = find(s, "k14-latency"), *peers = find(s, "peers");
	char a[32], b[32], c[32], d[32], e[32];
	int any = 0;

	for (int i = 0; i < 6; i++) {
		const struct result *r = find(s, k14[i]);

		if (!r || r->rc || !r->nrows)
			continue;
		if (!any++)
			fprintf(f, "| Kafka 2014 row (100-byte records) | Sluice records/s (mean) | runs | apart | MB/s "
				"| of the limit | Kafka 2014 records/s | Sluice / Kafka 2014 |\n"
				"|---|---:|---:|---:|---:|---:|---:|---:|\n");
		for (int j = 0; j < r->nrows; j++) {
			const struct row *w = &r->rows[j];
			char runs[96], apart[16];

			if (isnan(w->ref_rps))
				continue;
			runs_text(w->run_rps, -1, runs, sizeof(runs), apart, sizeof(apart));
			fprintf(f, "| %s | %s | %s | %s | %s | %s%s%s | %s | %s |\n", w->label,
				grouped(w->rps, a, sizeof(a)), runs, apart, fixed(w->mbps, 1, b, sizeof(b)),
				pct(fraction(w), c, sizeof(c)), w->binds && !isnan(fraction(w)) ? " of " : "",
				w->binds && !isnan(fraction(w)) ? w->binds : "", grouped(w->ref_rps, d, sizeof(d)),
				ratio(w->rps, w->ref_rps, e, sizeof(e)));
		}
	}
	if (lat && !lat->rc && lat->nrows) {
		const struct row *w = &lat->rows[0];
		char runs[96], apart[16];

		if (!any++)
			fprintf(f, "| Kafka 2014 row | Sluice (mean) | runs | apart | | | Kafka 2014 | Sluice / Kafka 2014 |\n"
				"|---|---:|---:|---:|---:|---:|---:|---:|\n");
		runs_text(w->run_p99, 2, runs, sizeof(runs), apart, sizeof(apart));
		fprintf(f, "| %s, p50 / p99 / p99.9 ms | %.2f / %.2f / %.2f | p99 %s | %s | | | %.0f / %.0f / %.0f | "
			"%.2fx / %.2fx / %.2fx |\n", w->label, w->p50, w->p99, w->p999, runs, apart, w->ref_p50,
			w->ref_p99, w->ref_p999, w->p50 / w->ref_p50, w->p99 / w->ref_p99, w->p999 / w->ref_p999);
	}
	if (any)
		fprintf(f, "\nKafka 2014: J. Kreps, \"Benchmarking Apache Kafka: 2 Million Writes Per Second "
			"(On Three Cheap Machines)\", LinkedIn, 2014 (hw-profiles/kafka-2014.conf); its "
			"three-producer and consumer rows ran on three brokers with replication, Sluice's on one "
			"node; its replication rows on three brokers, Sluice's on three nodes of this machine "
			"(k14-replicated). Latency ratios: lower is better. Each Sluice figure is the mean of "
			"%d runs of the row, one after the other; \"runs\" gives each, \"apart\" how far apart "
			"they are as a share of their mean: the run's noise on this machine.\n\n", SUITE_RUNS);
	if (peers && peers->peers[0].ran) {
		const struct peer_fig *p = peers->peers;

		fprintf(f, "| same machine, same run, 100-byte records | Sluice | Redis Streams | NATS JetStream | "
			"Sluice / Redis | Sluice / NATS |\n|---|---:|---:|---:|---:|---:|\n");
		fprintf(f, "| produce records/s | %s | %s | %s | %s | %s |\n",
			grouped(p[0].prod_rps, a, sizeof(a)), p[1].ran ? grouped(p[1].prod_rps, b, sizeof(b)) : "failed",
			p[2].ran ? grouped(p[2].prod_rps, c, sizeof(c)) : "failed",
			p[1].ran ? ratio(p[0].prod_rps, p[1].prod_rps, d, sizeof(d)) : "",
			p[2].ran ? ratio(p[0].prod_rps, p[2].prod_rps, e, sizeof(e)) : "");
		fprintf(f, "| consume records/s | %s | %s | %s | %s | %s |\n",
			grouped(p[0].cons_rps, a, sizeof(a)), p[1].ran ? grouped(p[1].cons_rps, b, sizeof(b)) : "failed",
			p[2].ran ? grouped(p[2].cons_rps, c, sizeof(c)) : "failed",
			p[1].ran ? ratio(p[0].cons_rps, p[1].cons_rps, d, sizeof(d)) : "",
			p[2].ran ? ratio(p[0].cons_rps, p[2].cons_rps, e, sizeof(e)) : "");
		fprintf(f, "| end-to-end p99 ms at %" PRIu64 " records/s (lower is better) | %s | %s | %s | %s | "
			"%s |\n", s->e2e_rate, fixed(p[0].p99, 2, a, sizeof(a)),
			p[1].ran ? fixed(p[1].p99, 2, b, sizeof(b)) : "failed",
			p[2].ran ? fixed(p[2].p99, 2, c, sizeof(c)) : "failed",
			p[1].ran ? ratio(p[0].p99, p[1].p99, d, sizeof(d)) : "",
			p[2].ran ? ratio(p[0].p99, p[2].p99, e, sizeof(e)) : "");
		fprintf(f, "\nEach figure is the mean of %d rounds (Sluice, Redis, NATS in turn each round); the rounds:",
			SUITE_RUNS);
		for (int i = 0; i < 3; i++) {
			char pr[96], cr[96], lr[96], pa[16], ca[16], la[16];

			if (!p[i].ran)
				continue;
			runs_text(p[i].run_prod, -1, pr, sizeof(pr), pa, sizeof(pa));
			runs_text(p[i].run_cons, -1, cr, sizeof(cr), ca, sizeof(ca));
			runs_text(p[i].run_p99, 2, lr, sizeof(lr), la, sizeof(la));
			fprintf(f, "%s %s produce %s (%s apart), consume %s (%s apart), p99 %s ms (%s apart)",
				i ? ";" : "", p[i].name, pr, pa, cr, ca, lr, la);
		}
		fprintf(f, ".\n");
		fprintf(f, "\nDurability: Sluice %s; Redis %s; NATS %s.\n\n", p[0].durability,
			p[1].durability[0] ? p[1].durability : "(did not run)",
			p[2].durability[0] ? p[2].durability : "(did not run)");
	}
	if (!any && !(peers && peers->peers[0].ran))
		fprintf(f, "No headline rows: they come from the k14-* and peers scenarios, which this run did "
			"not include or which failed.\n\n");
}

/* Which optional columns any row of r fills. */
struct cols {
	int rate, cpu, lat50, lat99, lat999, ref, note;
};

static struct cols columns(const struct result *r)
{
	struct cols c = { 0 };

	for (int i = 0; i < r->nrows; i++) {
		const struct row *w = &r->rows[i];

		c.rate |= !isnan(w->rps);
		c.cpu |= !isnan(w->cpu_ns) || !isnan(w->client_cpu_ns);
		c.lat50 |= !isnan(w->p50);
		c.lat99 |= !isnan(w->p99);
		c.lat999 |= !isnan(w->p999);
		c.ref |= !isnan(w->ref_rps) || !isnan(w->ref_p99);
		c.note |= w->note[0] != 0;
	}
	return c;
}

static void section(const struct suite *s, const struct result *r, FILE *f)
{
	struct cols c = columns(r);
	char a[32], b[32], d[32];

	(void)s;
	fprintf(f, "## %s — %s\n\n", r->sc->name, r->sc->title);
	if (r->rc)
		fprintf(f, "**FAILED** after %.1f s: %s\n\n", r->seconds, r->error);
	else
		fprintf(f, "Ran in %.1f s.\n\n", r->seconds);
	if (r->nrows) {
		fprintf(f, "| row |%s%s%s%s%s%s%s\n|---|%s%s%s%s%s%s%s\n",
			c.rate ? " records/s | MB/s | of the limit |" : "",
			c.cpu ? " CPU ns a record: broker / clients (clients' share) |" : "", c.lat50 ? " p50 ms |" : "",
			c.lat99 ? " p99 ms |" : "", c.lat999 ? " p99.9 ms |" : "", c.ref ? " Kafka 2014 |" : "",
			c.note ? " note |" : "", c.rate ? "---:|---:|---:|" : "", c.cpu ? "---:|" : "",
			c.lat50 ? "---:|" : "", c.lat99 ? "---:|" : "", c.lat999 ? "---:|" : "", c.ref ? "---:|" : "",
			c.note ? "---|" : "");
		for (int i = 0; i < r->nrows; i++) {
			const struct row *w = &r->rows[i];

			fprintf(f, "| %s |", w->label);
			if (c.rate) {
				fprintf(f, " %s | %s | %s", grouped(w->rps, a, sizeof(a)), fixed(w->mbps, 1, b, sizeof(b)),
					pct(fraction(w), d, sizeof(d)));
				if (!isnan(fraction(w)) && w->binds)
					fprintf(f, " of %s (%.0f MB/s)", w->binds, w->limit_mbps);
				fprintf(f, " |");
			}
			if (c.cpu) {
				double sum = w->cpu_ns + w->client_cpu_ns;

				fprintf(f, " %s / %s", fixed(w->cpu_ns, 0, a, sizeof(a)), fixed(w->client_cpu_ns, 0, b, sizeof(b)));
				if (sum > 0)
					fprintf(f, " (%s)", pct(w->client_cpu_ns / sum, d, sizeof(d)));
				fprintf(f, " |");
			}
			if (c.lat50)
				fprintf(f, " %s |", fixed(w->p50, 2, a, sizeof(a)));
			if (c.lat99)
				fprintf(f, " %s |", fixed(w->p99, 2, a, sizeof(a)));
			if (c.lat999)
				fprintf(f, " %s |", fixed(w->p999, 2, a, sizeof(a)));
			if (c.ref) {
				if (!isnan(w->ref_rps))
					fprintf(f, " %s records/s |", grouped(w->ref_rps, a, sizeof(a)));
				else if (!isnan(w->ref_p99))
					fprintf(f, " %.0f / %.0f / %.0f ms |", w->ref_p50, w->ref_p99, w->ref_p999);
				else
					fprintf(f, " |");
			}
			if (c.note)
				fprintf(f, " %s |", w->note);
			fputc('\n', f);
		}
		fputc('\n', f);
	}
	if (r->summary[0])
		fprintf(f, "%s\n\n", r->summary);
	if (r->plot_file[0])
		fprintf(f, "![%s](%s)\n\n", r->sc->title, r->plot_file);
}

static void machine_line(FILE *f)
{
	struct utsname u;
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	if (uname(&u) == 0)
		fprintf(f, "- Machine: %s, %s %s %s, %ld CPUs online, %.1f GiB memory\n", u.nodename, u.sysname,
			u.release, u.machine, sysconf(_SC_NPROCESSORS_ONLN),
			(double)pages * (double)psz / (1024.0 * 1024 * 1024));
}

static void limits_line(const struct suite *s, FILE *f)
{
	fprintf(f, "- Limits from the profile: ");
	if (s->nic_mbps)
		fprintf(f, "%s %.0f MB/s", s->nic_what, s->nic_mbps);
	else
		fprintf(f, "NIC not known");
	if (s->disk_w_mbps)
		fprintf(f, ", disk write %.0f MB/s", s->disk_w_mbps);
	else
		fprintf(f, ", disk write not known");
	fprintf(f, ". Produce binds on the slower of the two (records come in over the NIC and go out "
		"to the disk; under log.durability=memory the NIC alone), consume on the NIC.%s\n",
		s->emulating ? "" : " A fraction above 100% means this machine outruns the profile: run "
		"with --emulate.");
}

static int write_report(struct suite *s, double seconds, const char *when)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/report.md", s->out);
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "suite: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fprintf(f, "# Sluice benchmark report\n\n");
	fprintf(f, "- Run: `%s`, %s, %.0f s\n", s->cmdline, when, seconds);
	machine_line(f);
	fprintf(f, "- Profile: `%s` — %s\n", s->prof_path, s->prof.description);
	limits_line(s, f);
	if (s->emulating)
		fprintf(f, "- Emulated: broker in network namespace %s at %s, veth shaped to %.3g Gb/s%s; disk "
			"%s at %.0f MB/s write, %.0f MB/s read%s\n", s->em.netns, s->em.broker_ip, s->em.nic_gbps,
			s->em.nic_gbps ? "" : " (not shaped)", s->em.cgroup[0] ? "capped" : "not capped",
			s->em.disk_write_mbps, s->em.disk_read_mbps, s->em.notes[0] ? "" : ".");
	if (s->emulating && s->em.notes[0])
		fprintf(f, "  (%s)\n", s->em.notes);
	fprintf(f, "- Units: records/s; MB = 10^6 bytes of record values (keys, headers and framing not "
		"counted); latency in ms; \"of the limit\" = MB/s over the limit that binds the row.\n\n");
	fprintf(f, "## Headline\n\n");
	headline(s, f);
	for (int i = 0; i < s->nres; i++)
		section(s, &s->res[i], f);
	if (fclose(f)) {
		fprintf(stderr, "suite: %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* ---- results.json ----------------------------------------------------------------- */

static void jstr(FILE *f, const char *v)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void jnum(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.10g", v);
}

static void jkey(FILE *f, const char *k, int *first)
{
	fprintf(f, "%s", *first ? "" : ", ");
	*first = 0;
	jstr(f, k);
	fputs(": ", f);
}

static void jnum_kv(FILE *f, const char *k, double v, int *first)
{
	jkey(f, k, first);
	jnum(f, v);
}

static void jstr_kv(FILE *f, const char *k, const char *v, int *first)
{
	jkey(f, k, first);
	jstr(f, v);
}

static void json_row(FILE *f, const struct row *w)
{
	int first = 1;

	fputc('{', f);
	jstr_kv(f, "label", w->label, &first);
	jnum_kv(f, "records_per_s", w->rps, &first);
	jnum_kv(f, "MB_per_s", w->mbps, &first);
	jnum_kv(f, "limit_MB_per_s", w->limit_mbps > 0 ? w->limit_mbps : NAN, &first);
	jkey(f, "binds", &first);
	if (w->binds && w->limit_mbps > 0)
		jstr(f, w->binds);
	else
		fputs("null", f);
	jnum_kv(f, "fraction_of_limit", fraction(w), &first);
	jnum_kv(f, "p50_ms", w->p50, &first);
	jnum_kv(f, "p99_ms", w->p99, &first);
	jnum_kv(f, "p99_9_ms", w->p999, &first);
	jnum_kv(f, "broker_cpu_ns_per_record", w->cpu_ns, &first);
	jnum_kv(f, "client_cpu_ns_per_record", w->client_cpu_ns, &first);
	if (!isnan(w->run_rps[0]) || !isnan(w->run_p99[0])) {
		/* a headline row: each of its runs (the figures above: their means) */
		jkey(f, "runs", &first);
		fputc('[', f);
		for (int k = 0; k < SUITE_RUNS; k++) {
			int f2 = 1;

			fprintf(f, "%s{", k ? ", " : "");
			jnum_kv(f, "records_per_s", w->run_rps[k], &f2);
			jnum_kv(f, "p99_ms", w->run_p99[k], &f2);
			fputc('}', f);
		}
		fputc(']', f);
	}
	jkey(f, "kafka_2014", &first);
	if (!isnan(w->ref_rps) || !isnan(w->ref_p99)) {
		int f2 = 1;

		fputc('{', f);
		jnum_kv(f, "records_per_s", w->ref_rps, &f2);
		jnum_kv(f, "p50_ms", w->ref_p50, &f2);
		jnum_kv(f, "p99_ms", w->ref_p99, &f2);
		jnum_kv(f, "p99_9_ms", w->ref_p999, &f2);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	jstr_kv(f, "note", w->note, &first);
	fputc('}', f);
}

static void json_peers(FILE *f, const struct result *r)
{
	fputs(", \"peers\": [", f);
	for (int i = 0; i < 3; i++) {
		const struct peer_fig *p = &r->peers[i];
		int first = 1;

		fprintf(f, "%s{", i ? ", " : "");
		jstr_kv(f, "name", p->name, &first);
		jstr_kv(f, "version", p->version, &first);
		jstr_kv(f, "durability", p->durability, &first);
		jkey(f, "ran", &first);
		fputs(p->ran ? "true" : "false", f);
		jstr_kv(f, "error", p->error, &first);
		jnum_kv(f, "produce_records_per_s", p->ran ? p->prod_rps : NAN, &first);
		jnum_kv(f, "consume_records_per_s", p->ran ? p->cons_rps : NAN, &first);
		jnum_kv(f, "e2e_p50_ms", p->ran ? p->p50 : NAN, &first);
		jnum_kv(f, "e2e_p99_ms", p->ran ? p->p99 : NAN, &first);
		jnum_kv(f, "e2e_p99_9_ms", p->ran ? p->p999 : NAN, &first);
		jkey(f, "runs", &first);
		fputc('[', f);
		for (int k = 0; p->ran && k < SUITE_RUNS; k++) {
			int f2 = 1;

			fprintf(f, "%s{", k ? ", " : "");
			jnum_kv(f, "produce_records_per_s", p->run_prod[k], &f2);
			jnum_kv(f, "consume_records_per_s", p->run_cons[k], &f2);
			jnum_kv(f, "e2e_p99_ms", p->run_p99[k], &f2);
			fputc('}', f);
		}
		fputc(']', f);
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_result(FILE *f, const struct result *r)
{
	int first = 1;

	fputc('{', f);
	jstr_kv(f, "name", r->sc->name, &first);
	jstr_kv(f, "title", r->sc->title, &first);
	jstr_kv(f, "status", r->rc ? "failed" : "ok", &first);
	jkey(f, "error", &first);
	if (r->rc)
		jstr(f, r->error);
	else
		fputs("null", f);
	jnum_kv(f, "seconds", r->seconds, &first);
	jstr_kv(f, "summary", r->summary, &first);
	jkey(f, "plot", &first);
	if (r->plot_file[0])
		jstr(f, r->plot_file);
	else
		fputs("null", f);
	jkey(f, "rows", &first);
	fputc('[', f);
	for (int i = 0; i < r->nrows; i++) {
		fputs(i ? ", " : "", f);
		json_row(f, &r->rows[i]);
	}
	fputc(']', f);
	if (!strcmp(r->sc->name, "peers"))
		json_peers(f, r);
	if (r->plot && r->plot->n) {
		fputs(", \"series\": {\"x\": ", f);
		jstr(f, r->plot->xlabel);
		fputs(", \"y1\": ", f);
		jstr(f, r->plot->y1label);
		fputs(", \"points\": [", f);
		for (int i = 0; i < r->plot->n; i++) {
			fprintf(f, "%s[", i ? ", " : "");
			jnum(f, r->plot->x[i]);
			fputs(", ", f);
			jnum(f, r->plot->y1[i]);
			if (r->plot->y2label) {
				fputs(", ", f);
				jnum(f, r->plot->y2[i]);
			}
			fputc(']', f);
		}
		fputs("]}", f);
	}
	fputc('}', f);
}

static int write_json(struct suite *s, double seconds, const char *when)
{
	char path[1200];
	FILE *f;
	int first = 1, f2 = 1;

	snprintf(path, sizeof(path), "%s/results.json", s->out);
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "suite: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fputc('{', f);
	jstr_kv(f, "format", "sluice-bench suite results 1", &first);
	jstr_kv(f, "command", s->cmdline, &first);
	jstr_kv(f, "finished_utc", when, &first);
	jnum_kv(f, "seconds", seconds, &first);
	jkey(f, "quick", &first);
	fputs(s->quick ? "true" : "false", f);
	jkey(f, "profile", &first);
	fputc('{', f);
	jstr_kv(f, "path", s->prof_path, &f2);
	jstr_kv(f, "description", s->prof.description, &f2);
	for (int k = 0; k < HW_NKEYS; k++) {
		jnum_kv(f, hw_key_name[k], s->prof.has[k] ? s->prof.v[k] : NAN, &f2);
	}
	fputc('}', f);
	jkey(f, "limits", &first);
	fputs("{\"nic_MB_per_s\": ", f);
	jnum(f, s->nic_mbps ? s->nic_mbps : NAN);
	fputs(", \"nic\": ", f);
	jstr(f, s->nic_what);
	fputs(", \"disk_write_MB_per_s\": ", f);
	jnum(f, s->disk_w_mbps ? s->disk_w_mbps : NAN);
	fputc('}', f);
	jkey(f, "emulation", &first);
	if (s->emulating) {
		f2 = 1;
		fputc('{', f);
		jstr_kv(f, "netns", s->em.netns, &f2);
		jnum_kv(f, "nic_gbps", s->em.nic_gbps ? s->em.nic_gbps : NAN, &f2);
		jnum_kv(f, "disk_write_MB_per_s", s->em.disk_write_mbps ? s->em.disk_write_mbps : NAN, &f2);
		jnum_kv(f, "disk_read_MB_per_s", s->em.disk_read_mbps ? s->em.disk_read_mbps : NAN, &f2);
		jstr_kv(f, "notes", s->em.notes, &f2);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	jkey(f, "scenarios", &first);
	fputc('[', f);
	for (int i = 0; i < s->nres; i++) {
		fputs(i ? ",\n  " : "\n  ", f);
		json_result(f, &s->res[i]);
	}
	fputs("]}\n", f);
	if (fclose(f)) {
		fprintf(stderr, "suite: %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* ---- the capacity planner's check ----------------------------------------------- */

/* The planner's model (bench/capacity.h) calibrated from the results.json
 * just written, checked against rows its fit did not use: report.md's last
 * section, and one line on stderr. */
static void capacity_check(struct suite *s)
{
	char path[1200], err[1024], rd[32], cp[32], notes[1200] = "";
	struct cap_calib *c = malloc(sizeof(*c));
	double size[16], ratio[16], pc;
	int n;
	FILE *f;

	if (!c)
		return;
	snprintf(path, sizeof(path), "%s/results.json", s->out);
	if (cap_calib_load(path, c, err, sizeof(err)) < 0) {
		fprintf(stderr, "suite: capacity planner check: not calibrated: %s\n", err);
		free(c);
		return;
	}
	snprintf(path, sizeof(path), "%s/report.md", s->out);
	if (!(f = fopen(path, "a"))) {
		fprintf(stderr, "suite: %s: %s\n", path, strerror(errno));
		free(c);
		return;
	}
	if (isnan(c->consume_ratio))
		snprintf(rd, sizeof(rd), "counted as costly as");
	else
		snprintf(rd, sizeof(rd), "is %.2fx", c->consume_ratio);
	if (isnan(c->replica_ratio))
		snprintf(cp, sizeof(cp), "counted as costly as");
	else
		snprintf(cp, sizeof(cp), "is %.2fx", c->replica_ratio);
	for (char *q = c->notes, *o = notes; *q && o < notes + sizeof(notes) - 3; q++)
		if (*q != '\n')
			*o++ = *q;
		else if (q[1])
			*o++ = ';', *o++ = ' ';
	fprintf(f, "## Capacity planner check\n\n");
	fprintf(f, "`sluicectl capacity plan --results %s/results.json` (docs/capacity.md) calibrates from this "
		"run: produce %.0f ns a record + %.3f ns a byte %s (%s), a consumer's read %s a "
		"produce, a follower's copy %s the leader's append. Checked against rows the fit did not use "
		"(a record's cost measured / predicted; 1.00 is exact, above 1 dearer than predicted):\n\n",
		s->out, c->rec_s * 1e9, c->byte_s * 1e9,
		c->cpu_measured ? "of the broker's CPU" : "of the machine (no broker CPU figures)",
		c->sweep_points ? "a fit over the size sweep" : "k14-producer alone", rd, cp);
	pc = cap_check_prodcons(c);
	fprintf(f, "| check | measured / predicted |\n|---|---|\n");
	if (!isnan(pc))
		fprintf(f, "| k14-prodcons: a record produced and read at once, from k14-producer's and "
			"k14-consumer's costs added | %.2f |\n", pc);
	n = cap_check_sweep(c, size, ratio, 16);
	for (int i = 0; i < n; i++)
		fprintf(f, "| size-sweep %.0f B from the fit over the other sizes | %.2f |\n", size[i], ratio[i]);
	if (isnan(pc) && !n)
		fprintf(f, "| (no row to check: run k14-prodcons with k14-producer and k14-consumer, or a size-sweep "
			"of three sizes or more) | |\n");
	if (notes[0])
		fprintf(f, "\nNotes: %s.\n", notes);
	fputc('\n', f);
	fclose(f);
	fprintf(stderr, "suite: capacity planner check: prodcons %.2f, %d size-sweep point%s checked\n", pc, n,
		n == 1 ? "" : "s");
	free(c);
}

int suite_write(struct suite *s, double seconds)
{
	char when[64];
	time_t t = time(NULL);
	struct tm tm;
	int rc, plots = 0;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
	for (int i = 0; i < s->nres; i++) {
		struct result *r = &s->res[i];
		char why[1600] = "";

		if (!r->plot || !r->plot->n)
			continue;
		plot_one(s, r, why, sizeof(why));
		if (why[0]) {
			fprintf(stderr, "suite: %s: plot not drawn: %s\n", r->sc->name, why);
			snprintf(r->summary + strlen(r->summary), sizeof(r->summary) - strlen(r->summary),
				 "%sPlot not drawn: %.400s.", r->summary[0] ? " " : "", why);
		} else {
			plots++;
		}
	}
	if ((rc = write_report(s, seconds, when)) < 0 || (rc = write_json(s, seconds, when)) < 0)
		return rc;
	capacity_check(s);
	headline(s, stdout);
	fprintf(stderr, "suite: wrote %s/report.md, %s/results.json and %d plot%s in %.0f s\n", s->out, s->out,
		plots, plots == 1 ? "" : "s", seconds);
	return 0;
}
