/* bench/suite_cpu.c — the CPU a suite row used, the broker's and the
 * clients': see suite.h. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/suite.h"

/* The broker's CPU time so far, user and system, all its threads
 * (/proc/PID/stat), seconds; NaN when it cannot be read. */
static double broker_cpu_s(const struct broker *br)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)br->pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NAN;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NAN;
	buf[n] = '\0';
	/* after the command's ")": state, then fields 4..13, then utime, stime */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return NAN;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

struct cpu_mark cpu_mark(const struct broker *br)
{
	struct rusage ru;
	struct cpu_mark m = { broker_cpu_s(br), NAN };

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		m.clients = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	return m;
}

void row_cpu_run(struct row *w, const struct run *run)
{
	row_cpu(w, (struct cpu_mark){ 0, 0 }, (struct cpu_mark){ run->broker_cpu_s, run->client_cpu_s }, run->records);
}

void row_cpu(struct row *w, struct cpu_mark m0, struct cpu_mark m1, uint64_t records)
{
	if (!records)
		return;
	if (!isnan(m0.broker) && !isnan(m1.broker))
		w->cpu_ns = (m1.broker - m0.broker) / (double)records * 1e9;
	if (!isnan(m0.clients) && !isnan(m1.clients))
		w->client_cpu_ns = (m1.clients - m0.clients) / (double)records * 1e9;
}
