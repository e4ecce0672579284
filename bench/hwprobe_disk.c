/* bench/hwprobe_disk.c — `hwprobe-disk --dir DIR`: what the disk under DIR
 * does for a log like Sluice's, for scripts/hwprobe.
 *
 *  write: one file preallocated (fallocate, as the log preallocates its
 *         segments), written sequentially with io_uring O_DIRECT, large
 *         aligned blocks, a fixed number in flight; the closing fdatasync
 *         is inside the timed interval.
 *  read:  the same file read back sequentially, O_DIRECT (no page cache).
 *  sync:  4 KiB pwrite + fdatasync, one after the other, each pair timed,
 *         into a second file whose blocks were written and synced first
 *         (so each fdatasync flushes data only, no extent conversion).
 *
 * Each phase stops at its byte or count limit or its time limit, whichever
 * comes first. MB = 10^6 bytes.
 * Output: progress on stderr ("hwprobe-disk: ..."); results on stdout as
 * "# comment" lines and key=value lines (disk_write_mbps, disk_read_mbps,
 * sync_write_us, sync_write_p99_us). Exit 0, 1 on failure (stderr says
 * which step), 2 on bad usage. The files are removed in every case.
 *
 * Thread: the program's main thread only.
 * Errors: helpers return 0 or -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define SYNC_BLOCK 4096u
#define SYNC_FILE_BLOCKS 2048u          /* 8 MiB file, written in a ring */

struct disk_opts {
	const char *dir;
	double seconds;                 /* per bandwidth phase */
	uint64_t max_bytes;             /* of the bandwidth file */
	uint32_t block;                 /* bytes per I/O */
	unsigned qd;                    /* I/Os in flight */
	unsigned syncs;                 /* sync phase: most write+fdatasync pairs */
	double sync_seconds;
};

struct disk_probe {
	struct disk_opts o;
	struct io_uring ring;
	uint8_t *buf;                   /* qd x block, 4 KiB aligned */
	char path[4200];                /* the bandwidth file */
	char sync_path[4200];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hwprobe-disk --dir DIR [--seconds S] [--max-mib N] [--block-kib K] [--qd N]\n"
		"                    [--syncs N] [--sync-seconds S]\n"
		"Sequential O_DIRECT write and read with io_uring (default 1024 KiB blocks, 8 in\n"
		"flight, at most 4096 MiB or 5 s per phase, capped at a quarter of the free\n"
		"space), then 4 KiB write + fdatasync latency (at most 10000 pairs or 5 s).\n"
		"Results as key=value lines on stdout, progress on stderr.\n");
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct disk_opts *o)
{
	o->dir = NULL;
	o->seconds = 5;
	o->max_bytes = 4096ull << 20;
	o->block = 1u << 20;
	o->qd = 8;
	o->syncs = 10000;
	o->sync_seconds = 5;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		double v;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "hwprobe-disk: %s needs a value\n", a);
			return -EINVAL;
		}
		const char *val = argv[++i];

		if (!strcmp(a, "--dir")) {
			o->dir = val;
			continue;
		}
		if (!strcmp(a, "--seconds") && parse_num(val, 0.05, 3600, &v) == 0)
			o->seconds = v;
		else if (!strcmp(a, "--max-mib") && parse_num(val, 1, 1 << 24, &v) == 0)
			o->max_bytes = (uint64_t)v << 20;
		else if (!strcmp(a, "--block-kib") && parse_num(val, 4, 65536, &v) == 0 && (uint32_t)v % 4 == 0)
			o->block = (uint32_t)v << 10;
		else if (!strcmp(a, "--qd") && parse_num(val, 1, 256, &v) == 0)
			o->qd = (unsigned)v;
		else if (!strcmp(a, "--syncs") && parse_num(val, 10, 1e7, &v) == 0)
			o->syncs = (unsigned)v;
		else if (!strcmp(a, "--sync-seconds") && parse_num(val, 0.05, 3600, &v) == 0)
			o->sync_seconds = v;
		else {
			fprintf(stderr, "hwprobe-disk: bad option or value: %s %s\n", a, val);
			return -EINVAL;
		}
	}
	if (!o->dir) {
		fprintf(stderr, "hwprobe-disk: --dir is required\n");
		return -EINVAL;
	}
	return 0;
}

/* Sequential I/O over [0, bytes) of fd, o.block per I/O, o.qd in flight,
 * until bytes are done or the time limit passes (then what is in flight
 * completes). *done_out: bytes completed; *ns: first submission to last
 * completion. */
static int disk_seq(struct disk_probe *d, int fd, int write, uint64_t bytes, uint64_t *done_out, uint64_t *ns)
{
	struct io_uring *ring = &d->ring;
	uint64_t next = 0, done = 0, t0 = now_ns();
	uint64_t deadline = t0 + (uint64_t)(d->o.seconds * 1e9);
	unsigned inflight = 0;
	int rc = 0;

	while (rc == 0 && (inflight || next < bytes)) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		if (now_ns() >= deadline)
			bytes = next;   /* submit no more */
		while (inflight < d->o.qd && next < bytes) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			uint8_t *b = d->buf + (size_t)((next / d->o.block) % d->o.qd) * d->o.block;
			uint32_t len = bytes - next < d->o.block ? (uint32_t)(bytes - next) : d->o.block;

			if (!sqe)
				break;
			if (write)
				io_uring_prep_write(sqe, fd, b, len, next);
			else
				io_uring_prep_read(sqe, fd, b, len, next);
			io_uring_sqe_set_data64(sqe, len);
			next += len;
			inflight++;
		}
		if (!inflight)
			break;
		rc = io_uring_submit_and_wait(ring, 1);
		if (rc < 0)
			break;
		rc = 0;
		io_uring_for_each_cqe(ring, head, cqe) {
			if (cqe->res < 0 && rc == 0)
				rc = cqe->res;
			else if ((uint64_t)cqe->res != cqe->user_data && rc == 0)
				rc = -EIO;   /* short: O_DIRECT on a preallocated file should not be */
			else
				done += cqe->user_data;
			n++;
		}
		io_uring_cq_advance(ring, n);
		inflight -= n;
	}
	while (inflight) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(ring, cqe);
		inflight--;
	}
	if (rc == 0 && write && fdatasync(fd) < 0)
		rc = -errno;
	*ns = now_ns() - t0;
	*done_out = done;
	return rc;
}

static double mbs(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / ((double)ns / 1e9) / 1e6 : 0;
}

/* write then read the bandwidth file; prints its result lines */
static int disk_bandwidth(struct disk_probe *d)
{
	struct statvfs sv;
	uint64_t bytes = d->o.max_bytes, written = 0, readb = 0, wns = 0, rns = 0;
	int fd, rc;

	if (statvfs(d->o.dir, &sv) == 0) {
		uint64_t quarter = (uint64_t)sv.f_bavail * sv.f_frsize / 4;

		if (bytes > quarter)
			bytes = quarter;
	}
	bytes = bytes / d->o.block * d->o.block;
	if (bytes < d->o.block) {
		fprintf(stderr, "hwprobe-disk: too little free space in %s\n", d->o.dir);
		return -ENOSPC;
	}
	fd = open(d->path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		fprintf(stderr, "hwprobe-disk: open %s with O_DIRECT: %s\n", d->path, strerror(-rc));
		return rc;
	}
	fprintf(stderr, "hwprobe-disk: preallocating %" PRIu64 " MiB in %s ...\n", bytes >> 20, d->o.dir);
	if (fallocate(fd, 0, 0, (off_t)bytes) < 0) {
		rc = -errno;
		fprintf(stderr, "hwprobe-disk: fallocate: %s\n", strerror(-rc));
		goto out;
	}
	fprintf(stderr, "hwprobe-disk: sequential write, %u KiB x %u in flight, up to %.1f s ...\n",
		d->o.block >> 10, d->o.qd, d->o.seconds);
	rc = disk_seq(d, fd, 1, bytes, &written, &wns);
	if (rc < 0) {
		fprintf(stderr, "hwprobe-disk: write: %s\n", strerror(-rc));
		goto out;
	}
	fprintf(stderr, "hwprobe-disk: wrote %" PRIu64 " MiB in %.2f s: %.1f MB/s\n", written >> 20,
		(double)wns / 1e9, mbs(written, wns));
	fprintf(stderr, "hwprobe-disk: sequential read of the same bytes ...\n");
	rc = disk_seq(d, fd, 0, written, &readb, &rns);
	if (rc < 0) {
		fprintf(stderr, "hwprobe-disk: read: %s\n", strerror(-rc));
		goto out;
	}
	fprintf(stderr, "hwprobe-disk: read %" PRIu64 " MiB in %.2f s: %.1f MB/s\n", readb >> 20,
		(double)rns / 1e9, mbs(readb, rns));
	printf("# disk: io_uring O_DIRECT sequential, %u KiB I/Os, %u in flight, one preallocated file in %s; "
	       "wrote %" PRIu64 " MiB in %.2f s (closing fdatasync included), read %" PRIu64 " MiB in %.2f s; "
	       "MB = 10^6 bytes\n", d->o.block >> 10, d->o.qd, d->o.dir, written >> 20, (double)wns / 1e9,
	       readb >> 20, (double)rns / 1e9);
	printf("disk_write_mbps=%.1f\n", mbs(written, wns));
	printf("disk_read_mbps=%.1f\n", mbs(readb, rns));
out:
	close(fd);
	unlink(d->path);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* the value at quantile q of n sorted samples (nearest rank) */
static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)n);

	return v[i >= n ? n - 1 : i];
}

/* 4 KiB pwrite + fdatasync pairs; prints its result lines */
static int disk_sync(struct disk_probe *d)
{
	uint64_t *lat = calloc(d->o.syncs, sizeof(*lat));
	uint8_t *blk = d->buf;          /* the first 4 KiB of the aligned buffer */
	uint64_t t0, deadline;
	size_t n = 0;
	int fd, rc = 0;

	if (!lat)
		return -ENOMEM;
	fd = open(d->sync_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		fprintf(stderr, "hwprobe-disk: open %s: %s\n", d->sync_path, strerror(-rc));
		free(lat);
		return rc;
	}
	/* write every block once and sync: later syncs flush data, not metadata */
	memset(blk, 0x5a, SYNC_BLOCK);
	for (unsigned i = 0; i < SYNC_FILE_BLOCKS && rc == 0; i++)
		if (pwrite(fd, blk, SYNC_BLOCK, (off_t)i * SYNC_BLOCK) != (ssize_t)SYNC_BLOCK)
			rc = errno ? -errno : -EIO;
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, "hwprobe-disk: preparing the sync file: %s\n", strerror(-rc));
		goto out;
	}
	fprintf(stderr, "hwprobe-disk: 4 KiB write + fdatasync, up to %u pairs or %.1f s ...\n", d->o.syncs,
		d->o.sync_seconds);
	t0 = now_ns();
	deadline = t0 + (uint64_t)(d->o.sync_seconds * 1e9);
	while (n < d->o.syncs && (n < 10 || now_ns() < deadline)) {
		uint64_t s = now_ns();

		blk[0] = (uint8_t)n;
		if (pwrite(fd, blk, SYNC_BLOCK, (off_t)(n % SYNC_FILE_BLOCKS) * SYNC_BLOCK) != (ssize_t)SYNC_BLOCK) {
			rc = errno ? -errno : -EIO;
			break;
		}
		if (fdatasync(fd) < 0) {
			rc = -errno;
			break;
		}
		lat[n++] = now_ns() - s;
	}
	if (rc < 0) {
		fprintf(stderr, "hwprobe-disk: write + fdatasync: %s\n", strerror(-rc));
		goto out;
	}
	qsort(lat, n, sizeof(*lat), cmp_u64);
	double p50 = (double)quantile(lat, n, 0.50) / 1e3, p99 = (double)quantile(lat, n, 0.99) / 1e3;

	fprintf(stderr, "hwprobe-disk: %zu pairs in %.2f s: p50 %.1f us, p99 %.1f us, max %.1f us\n", n,
		(double)(now_ns() - t0) / 1e9, p50, p99, (double)lat[n - 1] / 1e3);
	printf("# sync: %zu x (4 KiB pwrite + fdatasync) over an 8 MiB file already written and synced in %s; "
	       "p50 %.1f us, p99 %.1f us, max %.1f us\n", n, d->o.dir, p50, p99, (double)lat[n - 1] / 1e3);
	printf("sync_write_us=%.1f\n", p50);
	printf("sync_write_p99_us=%.1f\n", p99);
out:
	close(fd);
	unlink(d->sync_path);
	free(lat);
	return rc;
}

int main(int argc, char **argv)
{
	struct disk_probe d;
	struct io_uring_params p;
	int rc;

	memset(&d, 0, sizeof(d));
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv, &d.o) < 0) {
		usage(stderr);
		return 2;
	}
	snprintf(d.path, sizeof(d.path), "%s/hwprobe-seq-%d", d.o.dir, (int)getpid());
	snprintf(d.sync_path, sizeof(d.sync_path), "%s/hwprobe-sync-%d", d.o.dir, (int)getpid());
	if (posix_memalign((void **)&d.buf, 4096, (size_t)d.o.qd * d.o.block) != 0) {
		fprintf(stderr, "hwprobe-disk: out of memory for %u x %u bytes\n", d.o.qd, d.o.block);
		return 1;
	}
	memset(d.buf, 0xa5, (size_t)d.o.qd * d.o.block);
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init_params(d.o.qd * 2, &d.ring, &p);
	if (rc == -EINVAL) {    /* a kernel before 6.1 */
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(d.o.qd * 2, &d.ring, &p);
	}
	if (rc < 0) {
		fprintf(stderr, "hwprobe-disk: io_uring_queue_init: %s\n", strerror(-rc));
		free(d.buf);
		return 1;
	}
	rc = disk_bandwidth(&d);
	if (rc == 0)
		rc = disk_sync(&d);
	io_uring_queue_exit(&d.ring);
	free(d.buf);
	return rc < 0 ? 1 : 0;
}
