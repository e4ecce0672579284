/* control/host_probe.c — reading /proc and /sys under a root; see
 * host_probe.h. @thread any */
#include "control/host_probe.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void host_probe_init(struct host_probe *h, const char *root)
{
	size_t n;

	memset(h, 0, sizeof(*h));
	if (!root || !strcmp(root, "/"))
		return;
	snprintf(h->root, sizeof(h->root), "%s", root);
	n = strlen(h->root);
	while (n > 1 && h->root[n - 1] == '/')
		h->root[--n] = 0;
}

int host_path(const struct host_probe *h, const char *rel, char *out, size_t cap)
{
	int n;

	while (*rel == '/')
		rel++;
	n = snprintf(out, cap, "%s/%s", h->root, rel);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int read_path(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, cap - 1, f);
	if (ferror(f)) {
		int e = errno ? errno : EIO;

		fclose(f);
		return -e;
	}
	fclose(f);
	buf[n] = 0;
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = 0;
	return (int)n;
}

static int vpath(const struct host_probe *h, char *out, size_t cap, const char *rel, va_list ap)
{
	char r[PATH_MAX];
	int n = vsnprintf(r, sizeof(r), rel, ap);

	if (n < 0 || (size_t)n >= sizeof(r))
		return -ENAMETOOLONG;
	return host_path(h, r, out, cap);
}

int host_read(const struct host_probe *h, char *buf, size_t cap, const char *rel, ...)
{
	char path[PATH_MAX];
	va_list ap;
	int rc;

	va_start(ap, rel);
	rc = vpath(h, path, sizeof(path), rel, ap);
	va_end(ap);
	if (rc < 0)
		return rc;
	return read_path(path, buf, cap);
}

int host_read_i64(const struct host_probe *h, int64_t *out, const char *rel, ...)
{
	char path[PATH_MAX], buf[64], *end;
	va_list ap;
	long long v;
	int rc;

	va_start(ap, rel);
	rc = vpath(h, path, sizeof(path), rel, ap);
	va_end(ap);
	if (rc < 0 || (rc = read_path(path, buf, sizeof(buf))) < 0)
		return rc;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	*out = v;
	return 0;
}

int host_cpulist(const char *list, bool *set, int n)
{
	const char *p = list;
	int count = 0;

	while (*p && isspace((unsigned char)*p))
		p++;
	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b;

		if (end == p || a < 0)
			return -EINVAL;
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a)
				return -EINVAL;
			p = end;
		}
		for (long i = a; i <= b; i++) {
			if (i < n && set && !set[i])
				set[i] = true;
			count++;
		}
		if (*p == ',')
			p++;
		else if (*p && !isspace((unsigned char)*p))
			return -EINVAL;
		while (*p && isspace((unsigned char)*p))
			p++;
	}
	return count;
}

void host_selected(const char *text, char *out, size_t cap)
{
	const char *a = strchr(text, '['), *b = a ? strchr(a, ']') : NULL;

	if (a && b)
		snprintf(out, cap, "%.*s", (int)(b - a - 1), a + 1);
	else
		snprintf(out, cap, "%s", text);
}

int host_meminfo(const struct host_probe *h, const char *key, int64_t *kib)
{
	char buf[8192], *line, *save = NULL;
	size_t klen = strlen(key);
	int rc = host_read(h, buf, sizeof(buf), "proc/meminfo");

	if (rc < 0)
		return rc;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			*kib = strtoll(line + klen + 1, NULL, 10);
			return 0;
		}
	return -ENOENT;
}

static int64_t limit_value(const char *s)
{
	return !strncmp(s, "unlimited", 9) ? -1 : strtoll(s, NULL, 10);
}

int host_limit(const struct host_probe *h, int pid, const char *name, int64_t *soft, int64_t *hard)
{
	char buf[4096], *line, *save = NULL;
	size_t nlen = strlen(name);
	int rc = pid ? host_read(h, buf, sizeof(buf), "proc/%d/limits", pid)
		     : host_read(h, buf, sizeof(buf), "proc/self/limits");

	if (rc < 0)
		return rc;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *p = line + nlen;

		if (strncmp(line, name, nlen) || *p != ' ')
			continue;
		while (*p == ' ')
			p++;
		*soft = limit_value(p);
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
		*hard = limit_value(p);
		return 0;
	}
	return -ENOENT;
}

int host_find_process(const struct host_probe *h, const char *const *names, int *which)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int found = -ENOENT;

	if (host_path(h, "proc", path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (!(d = opendir(path)))
		return -errno;
	while (found < 0 && (e = readdir(d))) {
		char comm[64];

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (host_read(h, comm, sizeof(comm), "proc/%s/comm", e->d_name) < 0)
			continue;
		for (int i = 0; names[i]; i++)
			if (!strcmp(comm, names[i])) {
				*which = i;
				found = atoi(e->d_name);
				break;
			}
	}
	closedir(d);
	return found;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* how much of path the mount point covers: its length when it is a prefix
 * at a path boundary, else -1 */
static int covers(const char *point, const char *path)
{
	size_t n = strlen(point);

	if (!strcmp(point, "/"))
		return 1;
	if (strncmp(point, path, n) || (path[n] && path[n] != '/'))
		return -1;
	return (int)n;
}

int host_mount_of(const struct host_probe *h, const char *path, struct host_mount *m)
{
	char file[PATH_MAX], line[8192];
	int best = -1;
	FILE *f;

	if (host_path(h, "proc/self/mountinfo", file, sizeof(file)) < 0)
		return -ENAMETOOLONG;
	if (!(f = fopen(file, "r")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *tok[16], *save = NULL, *t;
		int nt = 0, dash = -1, len;

		line[strcspn(line, "\n")] = 0;
		for (t = strtok_r(line, " ", &save); t && nt < 16; t = strtok_r(NULL, " ", &save)) {
			if (!strcmp(t, "-") && dash < 0)
				dash = nt;
			tok[nt++] = t;
		}
		/* id parent maj:min root point opts [optional...] - fstype source superopts */
		if (nt < 6 || dash < 6 || dash + 3 > nt)
			continue;
		unescape(tok[4]);
		len = covers(tok[4], path);
		if (len < 0 || len < best)
			continue;
		best = len;
		snprintf(m->point, sizeof(m->point), "%s", tok[4]);
		snprintf(m->fstype, sizeof(m->fstype), "%s", tok[dash + 1]);
		snprintf(m->source, sizeof(m->source), "%s", tok[dash + 2]);
		snprintf(m->opts, sizeof(m->opts), "%s%s%s", tok[5], dash + 3 < nt ? "," : "",
			 dash + 3 < nt ? tok[dash + 3] : "");
		if (sscanf(tok[2], "%u:%u", &m->major, &m->minor) != 2)
			m->major = m->minor = 0;
	}
	fclose(f);
	return best < 0 ? -ENOENT : 0;
}

bool host_opt_has(const char *opts, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, opt, n) && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

int host_block_dir(const struct host_probe *h, unsigned major, unsigned minor, char *out, size_t cap)
{
	char link[PATH_MAX], real[PATH_MAX], rootreal[PATH_MAX], probe[PATH_MAX + 16];
	struct stat st;
	size_t rl = 0;

	if (host_path(h, "sys/dev/block", link, sizeof(link)) < 0)
		return -ENAMETOOLONG;
	snprintf(link + strlen(link), sizeof(link) - strlen(link), "/%u:%u", major, minor);
	if (!realpath(link, real))
		return -errno;
	/* a partition's queue/ is its parent's */
	snprintf(probe, sizeof(probe), "%s/partition", real);
	if (stat(probe, &st) == 0) {
		char *slash = strrchr(real, '/');

		if (slash)
			*slash = 0;
	}
	if (h->root[0]) {
		if (!realpath(h->root, rootreal))
			return -errno;
		rl = strlen(rootreal);
		if (strncmp(real, rootreal, rl) || real[rl] != '/')
			return -EXDEV;   /* the link leaves the tree */
		rl++;
	} else {
		rl = 1;
	}
	snprintf(out, cap, "%s", real + rl);
	return 0;
}

/* the last component of the link rel points to, or "" */
static void link_base(const struct host_probe *h, const char *rel, char *out, size_t cap)
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t n;
	const char *b;

	out[0] = 0;
	if (host_path(h, rel, path, sizeof(path)) < 0 || (n = readlink(path, target, sizeof(target) - 1)) < 0)
		return;
	target[n] = 0;
	b = strrchr(target, '/');
	b = b ? b + 1 : target;
	if (strlen(b) < cap)
		memcpy(out, b, strlen(b) + 1);
}

static void count_queues(const struct host_probe *h, struct host_nic *nic)
{
	char path[PATH_MAX], rel[PATH_MAX];
	struct dirent *e;
	DIR *d;

	nic->rx = nic->tx = 0;
	snprintf(rel, sizeof(rel), "sys/class/net/%s/queues", nic->name);
	if (host_path(h, rel, path, sizeof(path)) < 0 || !(d = opendir(path)))
		return;
	while ((e = readdir(d))) {
		nic->rx += !strncmp(e->d_name, "rx-", 3);
		nic->tx += !strncmp(e->d_name, "tx-", 3);
	}
	closedir(d);
}

int host_nics(const struct host_probe *h, struct host_nic *out, int n)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int count = 0;

	if (host_path(h, "sys/class/net", path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (!(d = opendir(path)))
		return -errno;
	while ((e = readdir(d)) && count < n) {
		struct host_nic *nic = &out[count];
		char rel[PATH_MAX];
		int64_t speed;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(nic->name))
			continue;
		memset(nic, 0, sizeof(*nic));
		memcpy(nic->name, e->d_name, strlen(e->d_name) + 1);   /* its length checked above */
		snprintf(rel, sizeof(rel), "sys/class/net/%s/device", e->d_name);
		link_base(h, rel, nic->device, sizeof(nic->device));
		if (!nic->device[0])
			continue;   /* lo, bridges, tunnels, ifb: no device */
		snprintf(rel, sizeof(rel), "sys/class/net/%s/device/driver", e->d_name);
		link_base(h, rel, nic->driver, sizeof(nic->driver));
		count_queues(h, nic);
		nic->speed_mbps = host_read_i64(h, &speed, "sys/class/net/%s/speed", e->d_name) == 0 && speed > 0
					  ? speed : -1;
		count++;
	}
	closedir(d);
	return count;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

int host_nic_irqs(const struct host_probe *h, const struct host_nic *nic, int *irq, char (*cpus)[64], int n)
{
	char file[PATH_MAX], line[4096], devdash[160];
	int count = 0;
	FILE *f;

	if (host_path(h, "proc/interrupts", file, sizeof(file)) < 0)
		return -ENAMETOOLONG;
	if (!(f = fopen(file, "r")))
		return -errno;
	snprintf(devdash, sizeof(devdash), "%s-", nic->device);
	while (fgets(line, sizeof(line), f) && count < n) {
		char *end, *name;
		long num;

		line[strcspn(line, "\n")] = 0;
		num = strtol(line, &end, 10);
		if (end == line || *end != ':')
			continue;
		name = strrchr(line, ' ');
		name = name ? name + 1 : end + 1;
		/* a device's control IRQs, not a queue's */
		if (ends_with(name, "-config") || ends_with(name, "-event") || ends_with(name, "misc") ||
		    strstr(name, "async") || strstr(name, "ctrl"))
			continue;
		if (!strstr(name, nic->name) && !(nic->device[0] && (!strncmp(name, devdash, strlen(devdash)) ||
								     strstr(name, nic->device))))
			continue;
		/* "eth1" is not "eth10"'s: the name must end there or at '-' */
		if (strstr(name, nic->name)) {
			const char *after = strstr(name, nic->name) + strlen(nic->name);

			if (*after && *after != '-' && *after != '@' && *after != ':' &&
			    !(nic->device[0] && strstr(name, nic->device)))
				continue;
		}
		irq[count] = (int)num;
		if (host_read(h, cpus[count], sizeof(cpus[count]), "proc/irq/%ld/effective_affinity_list", num) <= 0 &&
		    host_read(h, cpus[count], sizeof(cpus[count]), "proc/irq/%ld/smp_affinity_list", num) < 0)
			snprintf(cpus[count], sizeof(cpus[count]), "?");
		count++;
	}
	fclose(f);
	return count;
}

int host_count_partitions(const char *dir)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int count = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		const char *dash = strrchr(e->d_name, '-');
		const char *p;

		if (!dash || dash == e->d_name || !dash[1])
			continue;
		for (p = dash + 1; *p && isdigit((unsigned char)*p); p++)
			;
		count += !*p;
	}
	closedir(d);
	return count;
}
