/* control/hw_profile.h — hardware profiles (the .conf files in hw-profiles/): what a class of
 * machine can physically do, so that a benchmark figure can be given as a
 * fraction of the limit that binds (disk or NIC).
 *
 * Format: key=value lines; '#' starts a comment line; blank lines are
 * ignored; spaces around key and value are trimmed. Keys (every one
 * optional but description; a key absent means "not known", never 0):
 *   description        free text (required)
 *   cores              CPUs (integer)
 *   clock_ghz          GHz
 *   memory_gib         GiB (2^30 bytes)
 *   nic_gbps           NIC line rate, Gb/s (10^9 bits/s)
 *   nic_queues         RX/TX queue pairs the NIC offers (integer)
 *   disk_write_mbps    sequential write, MB/s (10^6 bytes/s), all data disks
 *   disk_read_mbps     sequential read, MB/s
 *   sync_write_us      a small (4 KiB) write + fdatasync, p50, microseconds
 *   sync_write_p99_us  the same, p99
 *   loopback_tcp_gbps  TCP over loopback, Gb/s (scripts/hwprobe)
 *   memif_gbps         DPDK net_memif between two processes, Gb/s
 *   memif_mpps         the same in millions of frames/s
 *   disk_gib           capacity of the data disks, GiB (2^30 bytes)
 * scripts/hwprobe writes hw-profiles/local.conf in this format.
 *
 * Thread: any; pure functions over caller memory. Errors: -errno with err
 * naming the file and line ("FILE:LINE: unknown key 'x'", a value that is
 * not a number, a key given twice, a line without '=').
 */
#ifndef SLUICE_HW_PROFILE_H
#define SLUICE_HW_PROFILE_H

#include <stddef.h>

enum hw_key {
	HW_CORES = 0,
	HW_CLOCK_GHZ,
	HW_MEMORY_GIB,
	HW_NIC_GBPS,
	HW_NIC_QUEUES,
	HW_DISK_WRITE_MBPS,
	HW_DISK_READ_MBPS,
	HW_SYNC_WRITE_US,
	HW_SYNC_WRITE_P99_US,
	HW_LOOPBACK_TCP_GBPS,
	HW_MEMIF_GBPS,
	HW_MEMIF_MPPS,
	HW_DISK_GIB,
	HW_NKEYS
};

extern const char *const hw_key_name[HW_NKEYS];

struct hw_profile {
	char description[256];
	double v[HW_NKEYS];
	unsigned char has[HW_NKEYS];  /* 1: given */
};

/* Parse text (len bytes; name is what errors call it). 0, or -EINVAL with
 * err filled. */
int hw_profile_parse(const char *text, size_t len, const char *name, struct hw_profile *p, char *err,
		     size_t errlen);

/* Read and parse a file. -errno (-ENOENT ...) or -EINVAL, err filled. */
int hw_profile_load(const char *path, struct hw_profile *p, char *err, size_t errlen);

/* The value of k, or 0 when not known (check has[k] first). */
static inline double hw_get(const struct hw_profile *p, enum hw_key k)
{
	return p->has[k] ? p->v[k] : 0;
}

#endif
