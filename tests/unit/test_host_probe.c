/* tests/unit/test_host_probe.c — control/host_probe: the readers behind
 * `sluicectl host check` over small trees written in a temp dir: CPU
 * lists, a sysfs choice, mount options, mountinfo (the longest mount
 * point, mounted over, escapes, a path boundary), /proc/PID/limits, a
 * partition's disk through /sys/dev/block, NICs with and without devices
 * and their IRQs, partition directories. The checks' decisions are
 * tested through the program (tests/integration/test_host_check.py). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/host_probe.h"
#include "tests/unit/helpers.h"

static void put(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	cr_assert_eq(system(cmd), 0);
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(const char *root, const char *rel)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, rel);
	cr_assert_eq(system(cmd), 0);
}

static void link_to(const char *root, const char *target, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	cr_assert_eq(symlink(target, path), 0, "%s", path);
}

Test(host_probe, cpu_lists)
{
	bool set[16] = { false };

	cr_assert_eq(host_cpulist("0-3,8,10-11", set, 16), 7);
	cr_assert(set[0] && set[3] && set[8] && set[11] && !set[4] && !set[9]);
	cr_assert_eq(host_cpulist("", NULL, 0), 0);
	cr_assert_eq(host_cpulist("  \n", NULL, 0), 0);
	cr_assert_eq(host_cpulist("5", NULL, 0), 1);
	cr_assert_eq(host_cpulist("3-1", NULL, 0), -EINVAL);
	cr_assert_eq(host_cpulist("a", NULL, 0), -EINVAL);
	cr_assert_eq(host_cpulist("1;2", NULL, 0), -EINVAL);
	/* CPUs beyond the set are counted, not written */
	cr_assert_eq(host_cpulist("14-17", set, 16), 4);
}

Test(host_probe, selected_and_options)
{
	char out[32];

	host_selected("none [mq-deadline] kyber", out, sizeof(out));
	cr_assert_str_eq(out, "mq-deadline");
	host_selected("always madvise [never]", out, sizeof(out));
	cr_assert_str_eq(out, "never");
	host_selected("write back", out, sizeof(out));
	cr_assert_str_eq(out, "write back");
	cr_assert(host_opt_has("rw,noatime,nobarrier", "nobarrier"));
	cr_assert(host_opt_has("rw,barrier=0", "barrier=0"));
	cr_assert(!host_opt_has("rw,barrier=1", "barrier=0"));
	cr_assert(!host_opt_has("rw,nobarrierx", "nobarrier"));
	cr_assert(host_opt_has("ro", "ro"));
	cr_assert(!host_opt_has("rw,errors=remount-ro", "ro"));
}

Test(host_probe, mountinfo_longest_prefix)
{
	char *root = test_tmpdir();
	struct host_probe h;
	struct host_mount m;

	put(root, "proc/self/mountinfo",
	    "26 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
	    "40 26 259:1 / /var/lib/sluice rw,noatime shared:1 master:2 - xfs /dev/nvme0n1p1 rw,attr2\n"
	    "41 26 0:50 / /var/lib/sluice-old rw - tmpfs tmpfs rw\n"
	    "42 26 0:51 / /mnt/with\\040space rw - tmpfs tmpfs rw,size=1g\n"
	    "43 40 0:52 / /var/lib/sluice rw - tmpfs tmpfs rw\n"
	    "garbage line\n");
	host_probe_init(&h, root);
	cr_assert_eq(host_mount_of(&h, "/var/lib/sluice/orders-0", &m), 0);
	cr_assert_str_eq(m.point, "/var/lib/sluice");
	cr_assert_str_eq(m.fstype, "tmpfs", "mounted over: the last one listed wins");
	cr_assert_eq(host_mount_of(&h, "/var/lib/sluicex", &m), 0);
	cr_assert_str_eq(m.point, "/", "a mount point is a prefix only at a path boundary");
	cr_assert_str_eq(m.fstype, "ext4");
	cr_assert_eq(m.major, 259);
	cr_assert_eq(m.minor, 2);
	cr_assert_eq(host_mount_of(&h, "/mnt/with space/d", &m), 0);
	cr_assert_str_eq(m.point, "/mnt/with space");
	cr_assert_str_eq(m.opts, "rw,rw,size=1g");
	test_rmrf(root);
	free(root);

	host_probe_init(&h, "/nonexistent-host-probe-root");
	cr_assert_eq(host_mount_of(&h, "/", &m), -ENOENT);
}

Test(host_probe, mountinfo_options_both_halves)
{
	char *root = test_tmpdir();
	struct host_probe h;
	struct host_mount m;

	put(root, "proc/self/mountinfo", "40 26 259:1 / /data rw,noatime shared:1 - xfs /dev/sdb1 rw,nobarrier\n");
	host_probe_init(&h, root);
	cr_assert_eq(host_mount_of(&h, "/data", &m), 0);
	cr_assert_str_eq(m.opts, "rw,noatime,rw,nobarrier");
	cr_assert_str_eq(m.source, "/dev/sdb1");
	cr_assert(host_opt_has(m.opts, "nobarrier") && host_opt_has(m.opts, "noatime"));
	test_rmrf(root);
	free(root);
}

Test(host_probe, limits_meminfo_and_files)
{
	char *root = test_tmpdir(), buf[64];
	struct host_probe h;
	int64_t soft, hard, v;

	put(root, "proc/self/limits",
	    "Limit                     Soft Limit           Hard Limit           Units\n"
	    "Max open files            1024                 524288               files\n"
	    "Max locked memory         unlimited            unlimited            bytes\n");
	put(root, "proc/77/limits", "Max open files            65536                65536                files\n");
	put(root, "proc/77/comm", "sluiced\n");
	put(root, "proc/meminfo", "MemTotal:       1000 kB\nSwapTotal:         0 kB\nHugePages_Total:   16\n");
	put(root, "proc/sys/vm/swappiness", "60\n");
	host_probe_init(&h, root);
	cr_assert_eq(host_limit(&h, 0, "Max open files", &soft, &hard), 0);
	cr_assert(soft == 1024 && hard == 524288);
	cr_assert_eq(host_limit(&h, 0, "Max locked memory", &soft, &hard), 0);
	cr_assert(soft == -1 && hard == -1, "unlimited is -1");
	cr_assert_eq(host_limit(&h, 0, "Max processes", &soft, &hard), -ENOENT);
	cr_assert_eq(host_limit(&h, 77, "Max open files", &soft, &hard), 0);
	cr_assert_eq(soft, 65536);
	cr_assert_eq(host_meminfo(&h, "HugePages_Total", &v), 0);
	cr_assert_eq(v, 16);
	cr_assert_eq(host_meminfo(&h, "MemTotal", &v), 0);
	cr_assert_eq(v, 1000);
	cr_assert_eq(host_meminfo(&h, "Mem", &v), -ENOENT, "a key matches whole");
	cr_assert_eq(host_read_i64(&h, &v, "proc/sys/vm/%s", "swappiness"), 0);
	cr_assert_eq(v, 60);
	cr_assert_eq(host_read(&h, buf, sizeof(buf), "proc/77/comm"), 7, "trailing newline cut");
	cr_assert_str_eq(buf, "sluiced");
	cr_assert_eq(host_read(&h, buf, sizeof(buf), "proc/none"), -ENOENT);

	static const char *const names[] = { "chronyd", "sluiced", NULL };
	int which = -1;

	cr_assert_eq(host_find_process(&h, names, &which), 77);
	cr_assert_eq(which, 1);
	test_rmrf(root);
	free(root);
}

Test(host_probe, partition_to_its_disk)
{
	char *root = test_tmpdir(), dir[PATH_MAX];
	struct host_probe h;

	put(root, "sys/block/nvme0n1/queue/write_cache", "write back\n");
	put(root, "sys/block/nvme0n1/nvme0n1p1/partition", "1\n");
	mkdirs(root, "sys/dev/block");
	link_to(root, "../../block/nvme0n1/nvme0n1p1", "sys/dev/block/259:1");
	link_to(root, "../../block/nvme0n1", "sys/dev/block/259:0");
	link_to(root, "/", "sys/dev/block/8:0");
	host_probe_init(&h, root);
	cr_assert_eq(host_block_dir(&h, 259, 1, dir, sizeof(dir)), 0);
	cr_assert_str_eq(dir, "sys/block/nvme0n1", "a partition's queue is its disk's");
	cr_assert_eq(host_block_dir(&h, 259, 0, dir, sizeof(dir)), 0);
	cr_assert_str_eq(dir, "sys/block/nvme0n1");
	cr_assert_eq(host_block_dir(&h, 8, 0, dir, sizeof(dir)), -EXDEV, "a link out of the tree");
	cr_assert_eq(host_block_dir(&h, 9, 9, dir, sizeof(dir)), -ENOENT);
	test_rmrf(root);
	free(root);
}

Test(host_probe, nics_and_their_irqs)
{
	char *root = test_tmpdir(), cpus[8][64];
	struct host_probe h;
	struct host_nic nics[4];
	int irq[8], n;

	mkdirs(root, "sys/devices/pci/0000:3b:00.0");
	mkdirs(root, "sys/bus/pci/drivers/ice");
	link_to(root, "../../../bus/pci/drivers/ice", "sys/devices/pci/0000:3b:00.0/driver");
	mkdirs(root, "sys/class/net/eth1/queues/rx-0");
	mkdirs(root, "sys/class/net/eth1/queues/rx-1");
	mkdirs(root, "sys/class/net/eth1/queues/tx-0");
	link_to(root, "../../../devices/pci/0000:3b:00.0", "sys/class/net/eth1/device");
	put(root, "sys/class/net/eth1/speed", "-1\n");
	mkdirs(root, "sys/class/net/lo/queues/rx-0");
	put(root, "proc/interrupts",
	    "           CPU0       CPU1\n"
	    " 30:          0          0  PCI-MSI 1-edge      ice-0000:3b:00.0:misc\n"
	    " 31:          5          0  PCI-MSI 2-edge      ice-eth1-TxRx-0\n"
	    " 32:          5          0  PCI-MSI 3-edge      ice-eth1-TxRx-1\n"
	    " 33:          5          0  PCI-MSI 4-edge      ice-eth10-TxRx-0\n"
	    "LOC:      79162      80742   Local timer interrupts\n");
	put(root, "proc/irq/31/smp_affinity_list", "1\n");
	put(root, "proc/irq/32/effective_affinity_list", "0\n");
	put(root, "proc/irq/32/smp_affinity_list", "0-1\n");
	host_probe_init(&h, root);
	n = host_nics(&h, nics, 4);
	cr_assert_eq(n, 1, "lo has no device");
	cr_assert_str_eq(nics[0].name, "eth1");
	cr_assert_str_eq(nics[0].device, "0000:3b:00.0");
	cr_assert_str_eq(nics[0].driver, "ice");
	cr_assert(nics[0].rx == 2 && nics[0].tx == 1);
	cr_assert_eq(nics[0].speed_mbps, -1);
	n = host_nic_irqs(&h, &nics[0], irq, cpus, 8);
	cr_assert_eq(n, 2, "the misc IRQ and eth10's are not eth1's queues");
	cr_assert(irq[0] == 31 && irq[1] == 32);
	cr_assert_str_eq(cpus[0], "1");
	cr_assert_str_eq(cpus[1], "0", "the effective affinity first");
	test_rmrf(root);
	free(root);
}

Test(host_probe, partition_directories)
{
	char *root = test_tmpdir(), path[PATH_MAX];

	mkdirs(root, "d/orders-0");
	mkdirs(root, "d/orders-12");
	mkdirs(root, "d/__cluster_metadata-0");
	mkdirs(root, "d/not-a-partition");
	mkdirs(root, "d/trailing-");
	snprintf(path, sizeof(path), "%s/d", root);
	cr_assert_eq(host_count_partitions(path), 3);
	snprintf(path, sizeof(path), "%s/none", root);
	cr_assert_eq(host_count_partitions(path), -ENOENT);
	test_rmrf(root);
	free(root);
}
