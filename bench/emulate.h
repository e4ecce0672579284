/* bench/emulate.h — sluice-bench suite --emulate PROFILE: run the broker on
 * a slower machine's terms on this one. The broker goes into a network
 * namespace of its own joined to this one by a veth pair whose both ends
 * are shaped (tc) to the profile's NIC line rate; the clients stay here and
 * reach it at em->broker_ip. The broker's disk bandwidth is capped with a
 * cgroup v2 io.max limit (rbps/wbps = the profile's disk read/write MB/s) on
 * the block device holding its data directory, when this machine allows it.
 *
 * Whatever could not be emulated (no cgroup v2, no io controller, a data
 * directory on a filesystem without a block device, a profile without the
 * key) is said in em->notes, one sentence per item: the report prints them.
 * Only a failure to build the network part is an error.
 *
 * Names carry the pid of the process that made them: namespace and cgroup
 * "sluice-em-PID", veth "semPIDh" (here) / "semPIDb" (the broker's), the
 * private cgroup2 mount /run/sluice-em-PID.cgroup2; emulate_cleanup_stale()
 * removes those whose process is gone (a suite that was killed).
 *
 * When the io controller is bound to a cgroup v1 hierarchy (a hybrid setup,
 * where cgroup v2 cannot have it), the disk is capped with the v1 blkio
 * throttle instead (blkio.throttle.{read,write}_bps_device): em->cgroup is
 * then a v1 blkio directory, which has a cgroup.procs too, and em->notes
 * says so (v1 limits O_DIRECT and read I/O, not buffered writeback).
 *
 * Thread: the suite's main thread. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
 */
#ifndef SLUICE_BENCH_EMULATE_H
#define SLUICE_BENCH_EMULATE_H

#include "control/hw_profile.h"

struct emulation {
	char netns[32];          /* the broker's namespace (/var/run/netns/NAME) */
	char host_ip[16];        /* this namespace's end of the veth */
	char broker_ip[16];      /* the broker's end: listen and bootstrap here */
	double nic_gbps;         /* the shaped rate, 0: not shaped */
	char cgroup[256];        /* cgroup v2 directory for the broker, "" if none */
	double disk_write_mbps;  /* the io.max limits set, 0: not limited */
	double disk_read_mbps;
	char notes[1024];        /* what was not emulated and why */
	int up;                  /* 1 between setup and teardown */
	/* what teardown undoes (emulate.c's own) */
	char veth[16];           /* this namespace's end, "" once gone */
	char cg_mount[64];       /* a cgroup2 mount setup made, "" if none */
};

/* Build the namespace, veth, shaping and cgroup for profile p; data_dir is
 * where the broker will keep its log (its block device gets io.max).
 * 0, or -errno with err saying what failed and what to do. */
int emulate_setup(const struct hw_profile *p, const char *data_dir, struct emulation *em, char *err,
		  size_t errlen);
/* Shape one link of a machine the suite did not set up (a node of
 * scripts/cluster --netns, each its own machine): tbf at gbps on dev, in
 * network namespace ns (NULL: this one), as setup shapes the broker's
 * veth. The qdisc goes with the device. 0, or -errno with err saying what
 * failed. */
int emulate_shape_link(const char *ns, const char *dev, double gbps, char *err, size_t errlen);
/* Run argv (argv[0] a path, or a tool found as iproute2's are) with its
 * stdout and stderr into out (newlines as spaces, trimmed). 0 when it
 * exits 0, its exit status, or -errno when it cannot be started. */
int emulate_run(const char *const argv[], char *out, size_t outlen);
/* Remove everything setup made; safe to call twice or after a failed setup. */
void emulate_teardown(struct emulation *em);
/* Remove the namespaces, veths, cgroups and mounts named sluice-em-PID (see
 * above) whose process PID is no longer alive. Quiet; best effort. */
void emulate_cleanup_stale(void);

#endif
