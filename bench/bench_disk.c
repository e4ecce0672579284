/* bench/bench_disk.c — `sluice-bench disk`: the disk alone, paced as the
 * end-to-end benchmark paces the broker, with no broker and no network:
 * what a record waits for the O_DIRECT write that carries it.
 *
 * Records of --size bytes (plus 70: a one-record batch's header and
 * framing) are due at --rate a second, round robin over --partitions
 * files, as `sluice-bench e2e --linger-ms 0` sends them one a request. Each
 * file is preallocated (fallocate: unwritten extents, as the log's
 * segments) and appended as a partition's log is under
 * log.durability=write: one write in flight per file, the records that
 * came meanwhile in the next one, the partial last block written again
 * with them, through io_uring with O_DIRECT. A record's latency is from
 * its due time to the completion of the write that carried it: the floor
 * under the broker's acknowledgement (and so under the end-to-end
 * latency) at `write` on this disk, a broker that adds nothing. The first
 * second is not timed. The files are removed in every case.
 *
 * Output: progress on stderr; results on stdout as "disk KEY VALUE" lines
 * (records, writes, latency_p50_ms ... latency_max_ms, write_p50_ms ...).
 * Thread: the benchmark's main thread. Errors: exit 1 naming the step, 2
 * on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"

#define DISK_BLOCK 4096u
#define DISK_BATCH_OVERHEAD 70u          /* a one-record batch: 61-byte header, record framing */
#define DISK_BUF (4u << 20)              /* a file's unwritten bytes and its partial block */
#define DISK_MAX_PARTS 64

struct disk_part {
	int fd;
	uint8_t *buf;               /* file bytes [base, end) */
	uint64_t base, end;         /* base: a block boundary */
	uint64_t *due;              /* due times of the records not yet durable, a ring */
	uint64_t qhead, qtail;      /* ring positions: [qhead, qtail) pending */
	uint64_t inflight_to;       /* a write in flight carries the records up to this ring position */
	uint64_t inflight_end;      /* ... and the file bytes up to this offset */
	uint64_t submitted_ns;
	int inflight;
};

struct disk_opts {
	const char *dir;
	double seconds;
	uint64_t rate;
	int size, parts;
	int written;                /* --written: the files' blocks written (zeros) and synced first */
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-bench disk [--dir DIR] [--rate N] [--seconds S] [--size BYTES] [--partitions N]\n"
		   "  The disk alone, paced as `e2e --linger-ms 0` paces the broker: records due at\n"
		   "  --rate a second (default 20000) for --seconds (default 8; the first second not\n"
		   "  timed), round robin over --partitions files (default 6), each appended with\n"
		   "  one O_DIRECT write in flight, as a partition under log.durability=write. A\n"
		   "  record's latency: from its due time to the end of the write that carried it.\n"
		   "  --dir DIR  where to write (default /var/tmp); the files are removed\n"
		   "  --size     record value bytes (default 100; each written with 70 more)\n"
		   "  --written  the files' blocks written with zeros and synced before the run\n"
		   "             (extents already written), instead of fallocate's unwritten ones\n");
}

static int bad(const char *opt, const char *why)
{
	fprintf(stderr, "sluice-bench disk: %s: %s\n`sluice-bench disk --help` for the options.\n", opt, why);
	return 2;
}

static int parse(int argc, char **argv, struct disk_opts *o)
{
	*o = (struct disk_opts){ "/var/tmp", 8, 20000, 100, 6, 0 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		char *end;
		double x;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--written")) {
			o->written = 1;
			continue;
		}
		if (strcmp(a, "--dir") && strcmp(a, "--rate") && strcmp(a, "--seconds") && strcmp(a, "--size") &&
		    strcmp(a, "--partitions"))
			return bad(a, "unknown option");
		if (i + 1 >= argc)
			return bad(a, "needs a value");
		v = argv[++i];
		if (!strcmp(a, "--dir")) {
			o->dir = v;
			continue;
		}
		errno = 0;
		x = strtod(v, &end);
		if (errno || end == v || *end || !(x > 0))
			return bad(a, "expects a positive number");
		if (!strcmp(a, "--seconds") && x <= 3600)
			o->seconds = x;
		else if (!strcmp(a, "--rate") && x <= 10000000 && x == (uint64_t)x)
			o->rate = (uint64_t)x;
		else if (!strcmp(a, "--size") && x <= 65536 && x == (int)x)
			o->size = (int)x;
		else if (!strcmp(a, "--partitions") && x <= DISK_MAX_PARTS && x == (int)x)
			o->parts = (int)x;
		else
			return bad(a, "out of range (--seconds <= 3600, --rate <= 10000000, --size <= 65536, "
				      "--partitions <= 64, whole numbers)");
	}
	return -1;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static int submit_write(struct io_uring *ring, struct disk_part *p, int idx, uint64_t now)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	/* from the block the previous write ended in (its partial block,
	 * written again) to the end of the last record, whole blocks */
	uint64_t from = p->inflight_end & ~(uint64_t)(DISK_BLOCK - 1);
	uint64_t to = (p->end + DISK_BLOCK - 1) & ~(uint64_t)(DISK_BLOCK - 1);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_write(sqe, p->fd, p->buf + (from - p->base), (unsigned)(to - from), from);
	io_uring_sqe_set_data64(sqe, (uint64_t)idx);
	p->inflight = 1;
	p->inflight_to = p->qtail;
	p->inflight_end = p->end;
	p->submitted_ns = now;
	return 0;
}

int bench_disk(int argc, char **argv)
{
	struct disk_opts o;
	struct disk_part parts[DISK_MAX_PARTS] = { 0 };
	struct io_uring ring;
	struct hist *lat = malloc(sizeof(*lat)), *wlat = malloc(sizeof(*wlat));
	uint64_t total, queued = 0, writes = 0, t0, warm, deadline, qcap, rec, file_bytes;
	char path[4200];
	int rc = parse(argc, argv, &o), failed = 0, opened = 0;

	if (rc >= 0 || !lat || !wlat) {
		free(lat);
		free(wlat);
		return rc >= 0 ? rc : 1;
	}
	hist_init(lat);
	hist_init(wlat);
	rec = (uint64_t)o.size + DISK_BATCH_OVERHEAD;
	total = (uint64_t)((o.seconds + 1) * (double)o.rate);
	/* each file preallocated for its share of the run and a quarter more,
	 * whole MiB (a short run takes little of a small disk) */
	file_bytes = ((total / (uint64_t)o.parts + 1) * rec * 5 / 4 + (2u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	qcap = 1u << 20;
	if ((rc = io_uring_queue_init(256, &ring, 0)) < 0) {
		fprintf(stderr, "sluice-bench disk: io_uring_queue_init: %s\n", strerror(-rc));
		return 1;
	}
	for (int i = 0; i < o.parts && !failed; i++, opened++) {
		struct disk_part *p = &parts[i];

		snprintf(path, sizeof(path), "%s/sluice-bench-disk-%d-%d", o.dir, (int)getpid(), i);
		p->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (p->fd < 0 || unlink(path) < 0 || fallocate(p->fd, 0, 0, (off_t)file_bytes) < 0 ||
		    posix_memalign((void **)&p->buf, DISK_BLOCK, DISK_BUF) ||
		    !(p->due = malloc(qcap * sizeof(uint64_t)))) {
			fprintf(stderr, "sluice-bench disk: %s: %s (O_DIRECT and fallocate on --dir's filesystem)\n", path,
				strerror(errno ? errno : ENOMEM));
			failed = 1;
		} else {
			memset(p->buf, 0, DISK_BUF);
			for (uint64_t off = 0, n = 0; o.written && off < file_bytes && !failed; off += n) {
				n = file_bytes - off < DISK_BUF ? file_bytes - off : DISK_BUF;
				if (pwrite(p->fd, p->buf, n, (off_t)off) != (ssize_t)n) {
					fprintf(stderr, "sluice-bench disk: writing %s's blocks: %s\n", path, strerror(errno));
					failed = 1;
				}
			}
			if (o.written && !failed && fdatasync(p->fd) < 0) {
				fprintf(stderr, "sluice-bench disk: fdatasync %s: %s\n", path, strerror(errno));
				failed = 1;
			}
		}
	}
	fprintf(stderr, "sluice-bench disk: %" PRIu64 " records of %d bytes (+%u) at %" PRIu64
		"/s over %d file(s) in %s (%s), one O_DIRECT write in flight each\n",
		total, o.size, DISK_BATCH_OVERHEAD, o.rate, o.parts, o.dir,
		o.written ? "blocks written first" : "fallocated: unwritten extents");
	t0 = bench_now_ns();
	warm = t0 + 1000000000ull;
	deadline = t0 + (uint64_t)((o.seconds + 1 + 30) * 1e9);
	for (uint64_t durable = 0; !failed && durable < total;) {
		uint64_t now = bench_now_ns(), due, next, wait;
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts;
		unsigned head, n = 0;

		if (now > deadline) {
			fprintf(stderr, "sluice-bench disk: %" PRIu64 " of %" PRIu64 " records durable after %.0f s: the disk "
				"fell behind the rate\n", durable, total, o.seconds + 31);
			failed = 1;
			break;
		}
		due = (uint64_t)((double)(now - t0) * (double)o.rate / 1e9) + 1;
		for (due = due < total ? due : total; queued < due; queued++) {
			struct disk_part *p = &parts[queued % (uint64_t)o.parts];

			if (p->end + rec - p->base > DISK_BUF || p->end + rec > file_bytes ||
			    p->qtail - p->qhead >= qcap) {
				fprintf(stderr, "sluice-bench disk: a file's unwritten bytes outgrew their buffer: the "
					"disk fell behind the rate\n");
				failed = 1;
				break;
			}
			memset(p->buf + (p->end - p->base), (int)(queued & 0xff), rec);
			p->end += rec;
			p->due[p->qtail++ % qcap] = t0 + (uint64_t)((double)queued * 1e9 / (double)o.rate);
		}
		for (int i = 0; i < o.parts && !failed; i++)
			if (!parts[i].inflight && parts[i].qtail > parts[i].qhead && submit_write(&ring, &parts[i], i, now) < 0)
				failed = 1;
		next = queued < total ? t0 + (uint64_t)((double)queued * 1e9 / (double)o.rate) : now + 1000000;
		now = bench_now_ns();
		wait = next > now ? next - now : 0;
		ts.tv_sec = 0;
		ts.tv_nsec = (long long)(wait < 1000000 ? wait : 1000000);
		rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
		if (rc < 0 && rc != -ETIME && rc != -EINTR) {
			fprintf(stderr, "sluice-bench disk: io_uring_submit_and_wait_timeout: %s\n", strerror(-rc));
			failed = 1;
		}
		now = bench_now_ns();
		io_uring_for_each_cqe(&ring, head, cqe) {
			struct disk_part *p = &parts[io_uring_cqe_get_data64(cqe)];
			uint64_t newbase;

			n++;
			if (cqe->res < 0) {
				fprintf(stderr, "sluice-bench disk: write: %s\n", strerror(-cqe->res));
				failed = 1;
				continue;
			}
			writes++;
			hist_add(wlat, now - p->submitted_ns);
			for (; p->qhead < p->inflight_to; p->qhead++, durable++) {
				uint64_t d = p->due[p->qhead % qcap];

				if (d >= warm)
					hist_add(lat, now - d);
			}
			/* keep the partial block and what came since at the buffer's start */
			newbase = p->inflight_end & ~(uint64_t)(DISK_BLOCK - 1);
			memmove(p->buf, p->buf + (newbase - p->base), p->end - newbase);
			p->base = newbase;
			p->inflight = 0;
		}
		io_uring_cq_advance(&ring, n);
	}
	for (int i = 0; i < opened; i++) {
		if (parts[i].fd >= 0)
			close(parts[i].fd);
		free(parts[i].buf);
		free(parts[i].due);
	}
	io_uring_queue_exit(&ring);
	if (!failed) {
		printf("disk records %" PRIu64 " (timed %" PRIu64 "), writes %" PRIu64 " (%.2f records a write)\n", total,
		       lat->count, writes, writes ? (double)total / (double)writes : 0.0);
		printf("disk latency_p50_ms %.3f\ndisk latency_p99_ms %.3f\ndisk latency_p99.9_ms %.3f\n"
		       "disk latency_max_ms %.3f\n",
		       ms(hist_percentile(lat, 50)), ms(hist_percentile(lat, 99)), ms(hist_percentile(lat, 99.9)),
		       ms(lat->max));
		printf("disk write_p50_ms %.3f\ndisk write_p99_ms %.3f\ndisk write_max_ms %.3f\n",
		       ms(hist_percentile(wlat, 50)), ms(hist_percentile(wlat, 99)), ms(wlat->max));
	}
	free(lat);
	free(wlat);
	return failed ? 1 : 0;
}
