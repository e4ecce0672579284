/* control/hw_profile.c — hardware profiles: see hw_profile.h. */
#include "control/hw_profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hw_key_name[HW_NKEYS] = {
	[HW_CORES] = "cores",
	[HW_CLOCK_GHZ] = "clock_ghz",
	[HW_MEMORY_GIB] = "memory_gib",
	[HW_NIC_GBPS] = "nic_gbps",
	[HW_NIC_QUEUES] = "nic_queues",
	[HW_DISK_WRITE_MBPS] = "disk_write_mbps",
	[HW_DISK_READ_MBPS] = "disk_read_mbps",
	[HW_SYNC_WRITE_US] = "sync_write_us",
	[HW_SYNC_WRITE_P99_US] = "sync_write_p99_us",
	[HW_LOOPBACK_TCP_GBPS] = "loopback_tcp_gbps",
	[HW_MEMIF_GBPS] = "memif_gbps",
	[HW_MEMIF_MPPS] = "memif_mpps",
	[HW_DISK_GIB] = "disk_gib",
};

/* Keys whose value is a count, not a measure. */
static int integral(int k)
{
	return k == HW_CORES || k == HW_NIC_QUEUES;
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && (**b == ' ' || **b == '\t'))
		(*b)++;
	while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r'))
		(*e)--;
}

int hw_profile_parse(const char *text, size_t len, const char *name, struct hw_profile *p, char *err,
		     size_t errlen)
{
	const char *at = text, *end = text + len;
	int line = 0, have_desc = 0;

	memset(p, 0, sizeof(*p));
	while (at < end) {
		const char *nl = memchr(at, '\n', (size_t)(end - at)), *le = nl ? nl : end;
		const char *kb = at, *ke, *vb, *ve, *eq;
		char key[64], val[256], *stop;
		int k;

		line++;
		at = nl ? nl + 1 : end;
		trim(&kb, &le);
		if (kb == le || *kb == '#')
			continue;
		eq = memchr(kb, '=', (size_t)(le - kb));
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected key=value, found '%.*s'", name, line,
				 (int)(le - kb > 60 ? 60 : le - kb), kb);
			return -EINVAL;
		}
		ke = eq;
		vb = eq + 1;
		ve = le;
		trim(&kb, &ke);
		trim(&vb, &ve);
		if (ke - kb >= (long)sizeof(key) || ve - vb >= (long)sizeof(val)) {
			snprintf(err, errlen, "%s:%d: key or value too long", name, line);
			return -EINVAL;
		}
		memcpy(key, kb, (size_t)(ke - kb));
		key[ke - kb] = 0;
		memcpy(val, vb, (size_t)(ve - vb));
		val[ve - vb] = 0;
		if (!strcmp(key, "description")) {
			if (have_desc++) {
				snprintf(err, errlen, "%s:%d: description given twice", name, line);
				return -EINVAL;
			}
			snprintf(p->description, sizeof(p->description), "%s", val);
			continue;
		}
		for (k = 0; k < HW_NKEYS && strcmp(key, hw_key_name[k]); k++)
			;
		if (k == HW_NKEYS) {
			snprintf(err, errlen, "%s:%d: unknown key '%s' (known: description, cores, clock_ghz, memory_gib, "
				 "nic_gbps, nic_queues, disk_write_mbps, disk_read_mbps, sync_write_us, sync_write_p99_us, "
				 "loopback_tcp_gbps, memif_gbps, memif_mpps)", name, line, key);
			return -EINVAL;
		}
		if (p->has[k]) {
			snprintf(err, errlen, "%s:%d: %s given twice", name, line, key);
			return -EINVAL;
		}
		errno = 0;
		p->v[k] = strtod(val, &stop);
		if (!val[0] || *stop || errno || !isfinite(p->v[k]) || p->v[k] <= 0 ||
		    (integral(k) && p->v[k] != floor(p->v[k]))) {
			snprintf(err, errlen, "%s:%d: %s: '%s' is not a %s", name, line, key, val,
				 integral(k) ? "positive whole number" : "positive number");
			return -EINVAL;
		}
		p->has[k] = 1;
	}
	if (!have_desc) {
		snprintf(err, errlen, "%s: no description= line (say what machine this is)", name);
		return -EINVAL;
	}
	return 0;
}

int hw_profile_load(const char *path, struct hw_profile *p, char *err, size_t errlen)
{
	static char buf[64 * 1024];
	FILE *f = fopen(path, "r");
	size_t n;
	int e;

	if (!f) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	n = fread(buf, 1, sizeof(buf), f);
	e = ferror(f) ? errno : 0;
	fclose(f);
	if (e) {
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (n == sizeof(buf)) {
		snprintf(err, errlen, "%s: larger than %zu bytes: not a profile", path, sizeof(buf));
		return -EFBIG;
	}
	return hw_profile_parse(buf, n, path, p, err, errlen);
}
