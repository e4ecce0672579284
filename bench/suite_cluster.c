/* bench/suite_cluster.c — the suite's three nodes (k14-replicated): a
 * cluster started and stopped with scripts/cluster in a directory of its
 * own; under --emulate each node in a network namespace of its own
 * (scripts/cluster --netns) with both ends of its veth shaped as the one
 * broker's (emulate_shape_link), and the three in the one broker's disk
 * cgroup. See suite.h.
 *
 * Thread: the suite's main thread (it runs scripts/cluster as a child).
 * Errors: -errno, with err saying what failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/emulate.h"
#include "bench/suite.h"

/* scripts/cluster ARGS (up to five; NULL-terminated) --dir dir; its output
 * into out. 0 or -errno (out says why). */
static int cluster_cmd(const char *dir, char *out, size_t outlen, const char *const args[])
{
	char root[700], script[800];
	const char *argv[16];
	int n = 0, rc;

	bench_repo_root(root, sizeof(root));
	snprintf(script, sizeof(script), "%s/scripts/cluster", root);
	argv[n++] = script;
	for (int i = 0; args[i] && i < 5; i++)
		argv[n++] = args[i];
	argv[n++] = "--dir";
	argv[n++] = dir;
	argv[n] = NULL;
	rc = emulate_run(argv, out, outlen);
	return rc == 0 ? 0 : rc < 0 ? rc : -EIO;
}

/* The first line of path into buf ("" when it cannot be read). */
static void first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
}

/* Both ends of each node's veth at the emulated NIC's rate. */
static int shape_nodes(const char *k, double gbps, char *err, size_t errlen)
{
	for (int i = 1; i <= 3; i++) {
		char ns[32], veth[32], e[512];
		int rc;

		snprintf(ns, sizeof(ns), "sluice%sn%d", k, i);
		snprintf(veth, sizeof(veth), "sluice%sv%d", k, i);
		if ((rc = emulate_shape_link(NULL, veth, gbps, e, sizeof(e))) < 0 ||
		    (rc = emulate_shape_link(ns, "eth0", gbps, e, sizeof(e))) < 0) {
			snprintf(err, errlen, "shaping node %d's link: %s", i, e);
			return rc;
		}
	}
	return 0;
}

/* The nodes' pids into the cgroup's cgroup.procs. */
static int cgroup_nodes(const char *dir, const char *cgroup, char *err, size_t errlen)
{
	for (int i = 1; i <= 3; i++) {
		char path[1200], pid[32];
		FILE *f;

		snprintf(path, sizeof(path), "%s/n%d/pid", dir, i);
		first_line(path, pid, sizeof(pid));
		snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
		if (!pid[0] || !(f = fopen(path, "w"))) {
			snprintf(err, errlen, "putting node %d (pid '%s') into %s failed", i, pid, path);
			return -EIO;
		}
		if (fputs(pid, f) < 0 || fclose(f) != 0) {
			snprintf(err, errlen, "writing node %d's pid %s to %s failed", i, pid, path);
			return -EIO;
		}
	}
	return 0;
}

int suite_cluster_start(const char *dir, int shards, const struct emulation *em, char *bootstrap, size_t blen,
			char *k, size_t klen, char *err, size_t errlen)
{
	char nshards[16], path[1200];
	int rc;

	k[0] = 0;
	bootstrap[0] = 0;
	snprintf(nshards, sizeof(nshards), "%d", shards);
	rc = cluster_cmd(dir, err, errlen, (const char *const[]){ "start", "3", "--shards", nshards,
								   em ? "--netns" : NULL, NULL });
	if (rc < 0)
		return rc;
	if (em && em->nic_gbps > 0) {
		snprintf(path, sizeof(path), "%s/netns", dir);
		first_line(path, k, klen);
		if (!k[0]) {
			snprintf(err, errlen, "scripts/cluster --netns left no %s", path);
			return -EIO;
		}
		if ((rc = shape_nodes(k, em->nic_gbps, err, errlen)) < 0)
			return rc;
	}
	if (em && em->cgroup[0] && (rc = cgroup_nodes(dir, em->cgroup, err, errlen)) < 0)
		return rc;
	if ((rc = cluster_cmd(dir, bootstrap, blen, (const char *const[]){ "bootstrap", NULL })) < 0 ||
	    !bootstrap[0]) {
		snprintf(err, errlen, "scripts/cluster bootstrap: %s", bootstrap);
		return rc < 0 ? rc : -EIO;
	}
	return 0;
}

int suite_cluster_stop(const char *dir, char *err, size_t errlen)
{
	return cluster_cmd(dir, err, errlen, (const char *const[]){ "stop", NULL });
}
