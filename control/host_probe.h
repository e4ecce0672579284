/* control/host_probe.h — reading what the kernel says about the host:
 * files under /proc and /sys, /proc/self/mountinfo, a process's limits, a
 * block device's queue, a NIC's queues and IRQs. `sluicectl host check`
 * (control/sluicectl_host.c) decides what each means for the broker; this
 * file only reads, so that the same code reads the real machine or a fake
 * tree a test built (struct host_probe's root: "proc/..." and "sys/..."
 * are read under it).
 *
 * Thread: any; functions hold no state and touch only caller memory.
 * Owns: nothing beyond the caller's buffers.
 * Errors: 0 or a count on success, -errno on failure (-ENOENT: the file
 * or entry is not there, which on a VM is often the answer).
 */
#ifndef SLUICE_HOST_PROBE_H
#define SLUICE_HOST_PROBE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct host_probe {
	char root[PATH_MAX];    /* "" for the real machine; else a directory holding proc/ and sys/ */
};

/* @thread any. root NULL or "/": the real machine. */
void host_probe_init(struct host_probe *h, const char *root);
/* root + rel into out (rel relative, "proc/meminfo"); -ENAMETOOLONG. */
int host_path(const struct host_probe *h, const char *rel, char *out, size_t cap);
/* The file rel (printf-style) into buf, NUL-terminated, trailing
 * whitespace cut: its length, or -errno. */
int host_read(const struct host_probe *h, char *buf, size_t cap, const char *rel, ...)
	__attribute__((format(printf, 4, 5)));
/* The file's first integer: 0 or -errno (-EINVAL: not a number). */
int host_read_i64(const struct host_probe *h, int64_t *out, const char *rel, ...)
	__attribute__((format(printf, 3, 4)));

/* A CPU list as the kernel writes it ("0-3,8,10-11"; "" is empty): the
 * CPUs into set (set[i] = true; at most n) and their count, or -EINVAL. */
int host_cpulist(const char *list, bool *set, int n);
/* The selected word of a sysfs choice, "none [mq-deadline] kyber" ->
 * "mq-deadline"; a file without brackets gives its whole text. */
void host_selected(const char *text, char *out, size_t cap);

/* /proc/meminfo's KEY (without the colon) in kB: 0 or -ENOENT. */
int host_meminfo(const struct host_probe *h, const char *key, int64_t *kib);

/* A line of /proc/PID/limits ("Max open files"): soft and hard, -1 for
 * unlimited. pid 0: self. 0 or -errno. */
int host_limit(const struct host_probe *h, int pid, const char *name, int64_t *soft, int64_t *hard);
/* The first process whose comm is one of names (NULL-terminated): its pid
 * and which name (index), or -ENOENT. */
int host_find_process(const struct host_probe *h, const char *const *names, int *which);

/* A mount, from /proc/self/mountinfo. */
struct host_mount {
	char point[PATH_MAX];
	char fstype[64];
	char source[256];
	char opts[512];         /* per mount (rw,relatime) then, after a comma, the superblock's */
	unsigned major, minor;
};
/* The mount that holds path (absolute): the longest mount point that is a
 * prefix of it, the last one listed when mounted over. 0 or -errno. */
int host_mount_of(const struct host_probe *h, const char *path, struct host_mount *m);
/* Whether opts (comma-separated) holds opt exactly ("nobarrier") or as
 * opt's key ("barrier=0" matches "barrier=0" only). */
bool host_opt_has(const char *opts, const char *opt);

/* The sysfs directory (relative to the root, "sys/block/vda") of the
 * whole disk behind device major:minor: its queue/ is there (a partition's
 * parent). 0 or -errno. */
int host_block_dir(const struct host_probe *h, unsigned major, unsigned minor, char *out, size_t cap);

/* A network interface backed by a device (not lo, a bridge, a tunnel). */
struct host_nic {
	char name[64];          /* eth0 */
	char device[128];       /* its device's name in sysfs (0000:3b:00.0, virtio2) */
	char driver[64];        /* virtio_net, ice, mlx5_core; "" unknown */
	int rx, tx;             /* queues in sys/class/net/NAME/queues */
	int64_t speed_mbps;     /* -1 when it reports none */
};
/* The NICs backed by a device, at most n: their count, or -errno. */
int host_nics(const struct host_probe *h, struct host_nic *out, int n);

/* The IRQs of nic (from /proc/interrupts: those named after the NIC or
 * its device, its control ones left out: "-config", "-event", "misc",
 * "async", "ctrl"), at most n: each
 * number and the CPUs its affinity allows (smp_affinity_list) into
 * cpus[i] as a CPU list. Their count, or -errno. */
int host_nic_irqs(const struct host_probe *h, const struct host_nic *nic, int *irq, char (*cpus)[64], int n);

/* Partition directories (TOPIC-N) in a data directory: their count, or
 * -errno (-ENOENT: no such directory). */
int host_count_partitions(const char *dir);

#endif
