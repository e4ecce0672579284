/* bench/bench_storage.c — `sluice-bench storage`: append and recovery
 * throughput of the partition log against the raw O_DIRECT bandwidth of the
 * same device, measured in the same run.
 *
 * Thread: the benchmark's main thread; one store with a private io_uring for
 * the log and one more ring for the raw baseline.
 *
 * For each workload the log appends for a fixed time (partitions filled
 * round-robin with one prebuilt batch, the log stamps offsets into its own
 * copy); the time includes store_drain, so it covers bytes appended and
 * written per the durability mode. Right after it, the same number of bytes
 * is written to one preallocated file with io_uring O_DIRECT (1 MiB writes,
 * queue depth 4: the device's best sequential rate). Recovery writes a log
 * of --recovery-bytes in one segment, removes its index checkpoint so that
 * plog_open validates every batch, and compares the open with a raw O_DIRECT
 * sequential read of the segment file (1 MiB reads, queue depth 4).
 *
 * Errors: helpers return 0 or -errno; bench_storage returns 0 (figures below
 * target are not failures), 1 on an error, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/store.h"

#define RAW_BLOCK     (1u << 20)      /* raw baseline: 1 MiB per I/O */
#define RAW_QD        4               /* ... queue depth 4 */
#define TAIL_BUDGET   (256u << 20)    /* the store's tail memory */
#define SEGMENT_BYTES (1ull << 30)    /* log.segment.bytes for the workloads */
#define TURN_BYTES    (1u << 20)      /* appended per loop turn, then one group commit */
#define RECORD_BYTES  100             /* approximate size of one record */
#define MAX_PARTS     1000

struct workload {
	const char *name;
	int partitions;
	uint32_t batch_bytes;
	double target;
};

/* One row per workload; the table below drives both the runs and the output. */
static const struct workload workloads[] = {
	{ "1 partition x 64 KiB", 1, 64 * 1024, 0.9 },
	{ "64 partitions x 16 KiB", 64, 16 * 1024, 0.8 },
	{ "1000 partitions x 1 KiB", 1000, 1024, 0.5 },
};
#define NWORKLOADS (int)(sizeof(workloads) / sizeof(workloads[0]))
#define RECOVERY_TARGET 0.5

struct opts {
	const char *dir;
	double seconds;
	int durability;
	uint64_t recovery_bytes;
	int seconds_set;
	int recovery_set;
};

struct result {
	char name[64];
	double log_mbs;
	double raw_mbs;
	double target;
};

/* Everything the run allocates at setup; nothing is allocated per batch. */
struct bench {
	struct opts o;
	char *root;                   /* unique run directory, removed at the end */
	struct io_uring raw_ring;
	int raw_ring_ok;
	uint8_t *raw_buf;             /* RAW_QD x RAW_BLOCK, 4 KiB aligned */
	uint8_t *batch[NWORKLOADS];   /* one prebuilt batch per workload */
	uint32_t batch_size[NWORKLOADS];
	uint8_t *rec_batch;           /* 64 KiB batch for the recovery log */
	uint32_t rec_batch_size;
	struct plog **pls;            /* MAX_PARTS */
	struct result res[NWORKLOADS + 1];
};

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-bench storage [options]\n"
		"\n"
		"Appends to the partition log for a fixed time per workload and compares\n"
		"with a raw io_uring O_DIRECT write of the same bytes (1 MiB writes, QD 4,\n"
		"one preallocated file); then times recovery (plog_open validating every\n"
		"batch) against a raw O_DIRECT sequential read. Progress on stderr, results\n"
		"on stdout.\n"
		"\n"
		"  --dir DIR                 where to write (default /var/tmp); a unique\n"
		"                            subdirectory is created and removed\n"
		"  --seconds N               seconds per workload (default 5)\n"
		"  --durability MODE         write|sync|memory (default write)\n"
		"  --recovery-bytes N        size of the recovery log, suffix K/M/G\n"
		"                            (default 1G)\n"
		"  --quick                   1 s per workload, 64 MiB recovery log\n"
		"  --help                    this text\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int bad_option(const char *opt, const char *why)
{
	fprintf(stderr, "sluice-bench storage: %s: %s\n", opt, why);
	fprintf(stderr, "`sluice-bench storage --help` for the options.\n");
	return 2;
}

/* Returns -1 to go on, else an exit status. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	int quick = 0;

	o->dir = "/var/tmp";
	o->seconds = 5;
	o->durability = PLOG_DUR_WRITE;
	o->recovery_bytes = 1ull << 30;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const char *eq = strchr(a, '=');
		char name[32];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);

		if (nl >= sizeof(name))
			return bad_option(a, "unknown option");
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(name, "--quick")) {
			if (eq)
				return bad_option(name, "takes no value");
			quick = 1;
			continue;
		}
		if (strcmp(name, "--dir") && strcmp(name, "--seconds") &&
		    strcmp(name, "--durability") && strcmp(name, "--recovery-bytes"))
			return bad_option(a, "unknown option");
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return bad_option(name, "needs a value");
		if (!strcmp(name, "--dir")) {
			if (!*val || strlen(val) > 4000)
				return bad_option(name, "expects a directory path (at most 4000 bytes)");
			o->dir = val;
		} else if (!strcmp(name, "--seconds")) {
			char *end;

			errno = 0;
			o->seconds = strtod(val, &end);
			if (errno || end == val || *end || !(o->seconds > 0) || o->seconds > 3600)
				return bad_option(name, "expects a number of seconds in (0, 3600]");
			o->seconds_set = 1;
		} else if (!strcmp(name, "--durability")) {
			if (!strcmp(val, "write"))
				o->durability = PLOG_DUR_WRITE;
			else if (!strcmp(val, "sync"))
				o->durability = PLOG_DUR_SYNC;
			else if (!strcmp(val, "memory"))
				o->durability = PLOG_DUR_MEMORY;
			else
				return bad_option(name, "expects write, sync or memory");
		} else {
			if (parse_size(val, &o->recovery_bytes) < 0)
				return bad_option(name, "expects a byte count, e.g. 512M or 1G");
			/* one segment; segment positions are 32-bit */
			if (o->recovery_bytes < (1u << 20) || o->recovery_bytes > (3ull << 30))
				return bad_option(name, "must be between 1M and 3G");
			o->recovery_set = 1;
		}
	}
	if (quick) {
		if (!o->seconds_set)
			o->seconds = 1;
		if (!o->recovery_set)
			o->recovery_bytes = 64ull << 20;
	}
	return -1;
}

static const char *durability_name(int d)
{
	return d == PLOG_DUR_SYNC ? "sync" : d == PLOG_DUR_MEMORY ? "memory" : "write";
}

/* ---- setup helpers ------------------------------------------------------ */

/* Bytes one record with a null key, no headers and vlen value bytes takes
 * in a batch (the framing batch_builder_add writes). */
static size_t record_bytes(int32_t i, int32_t vlen)
{
	size_t body = 1 + varint_size(i) + varint_size(i) + varint_size(-1) +
		      varint_size(vlen) + (size_t)vlen + varint_size(0);

	return varint_size((int64_t)body) + body;
}

/* A valid uncompressed batch of `target` bytes at most, made of records of
 * about RECORD_BYTES (null key), the last one trimmed to fill the batch. */
static int build_batch(uint32_t target, uint8_t **out, uint32_t *size)
{
	const int64_t ts = 1700000000000ll;
	struct batch_builder bb;
	uint8_t val[RECORD_BYTES];
	uint8_t *buf;
	ssize_t n;

	if (posix_memalign((void **)&buf, 4096, target))
		return -ENOMEM;
	for (size_t k = 0; k < sizeof(val); k++)
		val[k] = (uint8_t)('a' + k % 26);
	batch_builder_init(&bb, buf, target, ts);
	for (int32_t i = 0;; i++) {
		size_t room = bb.cap - bb.len;
		int32_t vlen = RECORD_BYTES - (int32_t)(record_bytes(i, RECORD_BYTES) - RECORD_BYTES);

		if (record_bytes(i, vlen) > room) {
			/* the last record: the largest value that still fits */
			while (vlen > 0 && record_bytes(i, vlen) > room)
				vlen--;
			if (record_bytes(i, vlen) > room)
				break;
		}
		if (batch_builder_add(&bb, i, ts + i, NULL, 0, val, vlen, NULL, 0, 0) < 0)
			break;
		if (bb.len == bb.cap)
			break;
	}
	n = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	if (n <= 0) {
		free(buf);
		return -ENOBUFS;
	}
	*out = buf;
	*size = (uint32_t)n;
	return 0;
}

static double mbs(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / 1e6 / ((double)ns / 1e9) : 0;
}

static void fmt_bytes(char *buf, size_t n, uint64_t v)
{
	if (v >= (1ull << 30) && !(v & ((1ull << 30) - 1)))
		snprintf(buf, n, "%" PRIu64 " GiB", v >> 30);
	else if (v >= (1ull << 20))
		snprintf(buf, n, "%.0f MiB", (double)v / (1 << 20));
	else
		snprintf(buf, n, "%.0f KiB", (double)v / 1024);
}

/* ---- raw baseline ------------------------------------------------------- */

/* `bytes` (a multiple of 4 KiB) read or written sequentially from offset 0
 * of fd, RAW_BLOCK per I/O, RAW_QD in flight. *ns is the elapsed time from
 * the first submission to the last completion. */
static int raw_seq(struct bench *b, int fd, int write, uint64_t bytes, int rwflags, uint64_t *ns)
{
	struct io_uring *ring = &b->raw_ring;
	uint64_t next = 0, done = 0, t0;
	unsigned inflight = 0;
	int rc = 0;

	t0 = bench_now_ns();
	while (done < bytes) {
		struct io_uring_cqe *cqe;

		while (inflight < RAW_QD && next < bytes) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			unsigned slot = (unsigned)((next / RAW_BLOCK) % RAW_QD);
			uint32_t len = bytes - next < RAW_BLOCK ? (uint32_t)(bytes - next) : RAW_BLOCK;

			if (!sqe)
				break;
			if (write)
				io_uring_prep_write(sqe, fd, b->raw_buf + (size_t)slot * RAW_BLOCK, len, next);
			else
				io_uring_prep_read(sqe, fd, b->raw_buf + (size_t)slot * RAW_BLOCK, len, next);
			sqe->rw_flags = rwflags;
			io_uring_sqe_set_data64(sqe, len);
			next += len;
			inflight++;
		}
		rc = io_uring_submit_and_wait(ring, 1);
		if (rc < 0)
			return rc;
		unsigned head, n = 0;

		io_uring_for_each_cqe(ring, head, cqe) {
			if (cqe->res < 0 && !rc)
				rc = cqe->res;
			else if ((uint64_t)cqe->res != cqe->user_data && rc >= 0)
				rc = -EIO;
			done += cqe->user_data;
			n++;
		}
		io_uring_cq_advance(ring, n);
		inflight -= n;
		if (rc < 0)
			break;
		rc = 0;
	}
	while (inflight) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(ring, cqe);
		inflight--;
	}
	*ns = bench_now_ns() - t0;
	return rc;
}

/* The raw write baseline: `bytes` rounded up to whole blocks into one file
 * preallocated first, like the log preallocates its segments. */
static int raw_write(struct bench *b, const char *path, uint64_t bytes, uint64_t *len_out, uint64_t *ns)
{
	uint64_t len = (bytes + RAW_BLOCK - 1) / RAW_BLOCK * RAW_BLOCK;
	int fd, rc;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (fallocate(fd, 0, 0, (off_t)len) < 0) {
		rc = -errno;
		goto out;
	}
	rc = raw_seq(b, fd, 1, len, b->o.durability == PLOG_DUR_SYNC ? RWF_DSYNC : 0, ns);
	*len_out = len;
out:
	close(fd);
	unlink(path);
	return rc;
}

/* ---- log workloads ------------------------------------------------------ */

static void print_store_stats(const struct store *st, uint64_t t_ns)
{
	fprintf(stderr, "storage:   %.1f s, %" PRIu64 " writes (avg %.0f KiB) in %" PRIu64
		" group commits, %" PRIu64 " fallocs, %" PRIu64 " tail evictions, %" PRIu64
		" sync opens\n",
		(double)t_ns / 1e9, st->stats.writes,
		st->stats.writes ? (double)st->stats.write_bytes / 1024 / (double)st->stats.writes : 0,
		st->stats.flushes, st->stats.fallocs, st->tail.evictions, st->stats.sync_opens);
}

/* Append round-robin for o.seconds, then drain; *bytes appended, *ns
 * elapsed including the drain. */
static int run_log(struct bench *b, int wi, const char *dir, uint64_t *bytes, uint64_t *ns)
{
	const struct workload *w = &workloads[wi];
	const uint8_t *batch = b->batch[wi];
	uint32_t size = b->batch_size[wi];
	struct plog_config cfg;
	struct store st;
	uint64_t t0, now, deadline, appended = 0;
	int rc, opened = 0, p = 0;
	int per_turn = (int)(TURN_BYTES / size);

	rc = store_init(&st, NULL, TAIL_BUDGET);
	if (rc < 0)
		return rc;
	plog_config_defaults(&cfg);
	cfg.segment_bytes = SEGMENT_BYTES;
	cfg.durability = b->o.durability;
	if (mkdir(dir, 0755) < 0) {
		rc = -errno;
		goto out;
	}
	for (; opened < w->partitions; opened++) {
		char sub[4300];

		snprintf(sub, sizeof(sub), "%s/p%d", dir, opened);
		st.now_ns = bench_now_ns();
		if ((rc = plog_open(&st, sub, &cfg, &b->pls[opened])) < 0)
			goto out;
	}
	store_drain(&st);
	memset(&st.stats, 0, sizeof(st.stats));
	if (per_turn < 1)
		per_turn = 1;

	t0 = now = bench_now_ns();
	deadline = t0 + (uint64_t)(b->o.seconds * 1e9);
	while (now < deadline) {
		st.now_ns = now;
		for (int k = 0; k < per_turn; k++) {
			int64_t base;

			while ((rc = plog_append(b->pls[p], batch, size, &base)) == -ENOBUFS) {
				store_poll(&st, 1);
				st.now_ns = bench_now_ns();
			}
			if (rc < 0)
				goto out;
			appended += size;
			if (++p == w->partitions)
				p = 0;
		}
		store_poll(&st, 0);
		now = bench_now_ns();
	}
	store_drain(&st);
	now = bench_now_ns();
	for (int i = 0; i < w->partitions; i++)
		if (b->pls[i]->err) {
			rc = b->pls[i]->err;
			goto out;
		}
	*bytes = appended;
	*ns = now - t0;
	print_store_stats(&st, now - t0);
	rc = 0;
out:
	for (int i = 0; i < opened; i++)
		plog_close(b->pls[i]);
	store_fini(&st);
	return rc;
}

static int run_workload(struct bench *b, int wi)
{
	const struct workload *w = &workloads[wi];
	struct result *r = &b->res[wi];
	char dir[4200], raw[4200];
	uint64_t bytes = 0, log_ns = 0, raw_ns = 0, raw_bytes = 0;
	int rc;

	snprintf(dir, sizeof(dir), "%s/w%d", b->root, wi + 1);
	snprintf(raw, sizeof(raw), "%s/raw-w%d", b->root, wi + 1);
	fprintf(stderr, "storage: workload %d/%d %s (batch %u bytes), log for %.1f s ...\n",
		wi + 1, NWORKLOADS, w->name, b->batch_size[wi], b->o.seconds);
	rc = run_log(b, wi, dir, &bytes, &log_ns);
	bench_rmrf(dir, "storage");
	if (rc < 0) {
		fprintf(stderr, "storage: workload %d log: %s\n", wi + 1, strerror(-rc));
		return rc;
	}
	fprintf(stderr, "storage: workload %d/%d %s: log %.1f MB/s (%.0f MB in %.1f s); raw write of the same bytes ...\n",
		wi + 1, NWORKLOADS, w->name, mbs(bytes, log_ns), (double)bytes / 1e6, (double)log_ns / 1e9);
	rc = raw_write(b, raw, bytes, &raw_bytes, &raw_ns);
	if (rc < 0) {
		fprintf(stderr, "storage: workload %d raw write: %s\n", wi + 1, strerror(-rc));
		return rc;
	}
	snprintf(r->name, sizeof(r->name), "%s", w->name);
	r->log_mbs = mbs(bytes, log_ns);
	r->raw_mbs = mbs(raw_bytes, raw_ns);
	r->target = w->target;
	fprintf(stderr, "storage: workload %d/%d %s: raw %.1f MB/s, %.1f s; ratio %.2f\n",
		wi + 1, NWORKLOADS, w->name, r->raw_mbs, (double)raw_ns / 1e9,
		r->raw_mbs > 0 ? r->log_mbs / r->raw_mbs : 0);
	return 0;
}

/* ---- recovery ----------------------------------------------------------- */

static int run_recovery(struct bench *b)
{
	struct result *r = &b->res[NWORKLOADS];
	struct plog_config cfg;
	struct store st;
	struct plog *pl = NULL;
	char dir[4200], path[4300], human[32];
	uint64_t target = b->o.recovery_bytes, written = 0, t0, open_ns, raw_ns, log_end;
	int rc, fd;

	snprintf(dir, sizeof(dir), "%s/recovery", b->root);
	fmt_bytes(human, sizeof(human), target);
	fprintf(stderr, "storage: recovery: writing a %s log (64 KiB batches) ...\n", human);
	if ((rc = store_init(&st, NULL, TAIL_BUDGET)) < 0)
		return rc;
	plog_config_defaults(&cfg);
	/* one segment holds the whole log */
	cfg.segment_bytes = (target + (64ull << 20) + RAW_BLOCK - 1) / RAW_BLOCK * RAW_BLOCK;
	cfg.durability = PLOG_DUR_WRITE;
	st.now_ns = bench_now_ns();
	if ((rc = plog_open(&st, dir, &cfg, &pl)) < 0)
		goto out;
	while (written < target) {
		int64_t base;

		st.now_ns = bench_now_ns();
		for (int k = 0; k < 16 && written < target; k++) {
			while ((rc = plog_append(pl, b->rec_batch, b->rec_batch_size, &base)) == -ENOBUFS)
				store_poll(&st, 1);
			if (rc < 0)
				goto out;
			written += b->rec_batch_size;
		}
		store_poll(&st, 0);
	}
	store_drain(&st);
	if (pl->err) {
		rc = pl->err;
		goto out;
	}
	log_end = plog_size(pl);
	plog_close(pl);
	pl = NULL;
	/* without the checkpoint, recovery validates every batch of the segment */
	snprintf(path, sizeof(path), "%s/%020d.index", dir, 0);
	if (unlink(path) < 0) {
		rc = -errno;
		fprintf(stderr, "storage: recovery: no index checkpoint %s to remove\n", path);
		goto out;
	}

	fprintf(stderr, "storage: recovery: raw O_DIRECT read of the segment ...\n");
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = raw_seq(b, fd, 0, (log_end + 4095) & ~4095ull, 0, &raw_ns);
	close(fd);
	if (rc < 0)
		goto out;

	fprintf(stderr, "storage: recovery: plog_open (full scan) ...\n");
	st.now_ns = t0 = bench_now_ns();
	rc = plog_open(&st, dir, &cfg, &pl);
	open_ns = bench_now_ns() - t0;
	if (rc < 0)
		goto out;
	if (pl->recovery.bytes_scanned != log_end || pl->recovery.truncated_reason) {
		fprintf(stderr, "storage: recovery scanned %" PRIu64 " of %" PRIu64 " bytes (reason %d)\n",
			pl->recovery.bytes_scanned, log_end, pl->recovery.truncated_reason);
		rc = -EBADMSG;
		goto out;
	}
	snprintf(r->name, sizeof(r->name), "recovery %s (full scan)", human);
	r->log_mbs = mbs(log_end, open_ns);
	r->raw_mbs = mbs(log_end, raw_ns);
	r->target = RECOVERY_TARGET;
	fprintf(stderr, "storage: recovery: %" PRId64 " batches, open %.2f s (%.1f MB/s), raw read %.2f s (%.1f MB/s)\n",
		pl->recovery.batches, (double)open_ns / 1e9, r->log_mbs, (double)raw_ns / 1e9, r->raw_mbs);
	rc = 0;
out:
	if (pl)
		plog_close(pl);
	store_fini(&st);
	bench_rmrf(dir, "storage");
	if (rc < 0)
		fprintf(stderr, "storage: recovery: %s\n", strerror(-rc));
	return rc;
}

/* ---- driver ------------------------------------------------------------- */

static void print_results(const struct bench *b)
{
	printf("# sluice-bench storage: durability=%s, %.1f s per workload, tail budget %u MiB, "
	       "segments %llu MiB; MB = 10^6 bytes\n",
	       durability_name(b->o.durability), b->o.seconds, TAIL_BUDGET >> 20,
	       SEGMENT_BYTES >> 20);
	printf("# raw = the same bytes via io_uring O_DIRECT on one preallocated file in the same "
	       "directory, 1 MiB I/Os at queue depth 4%s; recovery raw = sequential read of the segment\n",
	       b->o.durability == PLOG_DUR_SYNC ? ", RWF_DSYNC" : "");
	printf("%-34s %11s %10s %7s %8s\n", "workload", "append MB/s", "raw MB/s", "ratio", "target");
	for (int i = 0; i <= NWORKLOADS; i++) {
		const struct result *r = &b->res[i];
		double ratio = r->raw_mbs > 0 ? r->log_mbs / r->raw_mbs : 0;

		printf("%-34s %11.1f %10.1f %7.2f  >= %.2f %s\n", r->name, r->log_mbs, r->raw_mbs,
		       ratio, r->target, ratio >= r->target ? "ok" : "below");
	}
}

static int bench_setup(struct bench *b)
{
	char *root;
	int rc;

	if (asprintf(&root, "%s/sluice-bench-XXXXXX", b->o.dir) < 0)
		return -ENOMEM;
	if (!mkdtemp(root)) {
		rc = -errno;
		fprintf(stderr, "sluice-bench storage: cannot create a directory in %s: %s\n",
			b->o.dir, strerror(errno));
		free(root);
		return rc;
	}
	b->root = root;
	if ((rc = io_uring_queue_init(2 * RAW_QD, &b->raw_ring, 0)) < 0)
		return rc;
	b->raw_ring_ok = 1;
	if (posix_memalign((void **)&b->raw_buf, 4096, (size_t)RAW_QD * RAW_BLOCK))
		return -ENOMEM;
	b->pls = calloc(MAX_PARTS, sizeof(*b->pls));
	if (!b->pls)
		return -ENOMEM;
	for (int i = 0; i < NWORKLOADS; i++)
		if ((rc = build_batch(workloads[i].batch_bytes, &b->batch[i], &b->batch_size[i])) < 0)
			return rc;
	if ((rc = build_batch(64 * 1024, &b->rec_batch, &b->rec_batch_size)) < 0)
		return rc;
	/* raw writes carry batch bytes, not zeros */
	for (size_t at = 0; at < (size_t)RAW_QD * RAW_BLOCK; at += b->rec_batch_size) {
		size_t n = (size_t)RAW_QD * RAW_BLOCK - at;

		memcpy(b->raw_buf + at, b->rec_batch, n < b->rec_batch_size ? n : b->rec_batch_size);
	}
	return 0;
}

static void bench_teardown(struct bench *b)
{
	if (b->root) {
		bench_rmrf(b->root, "storage");
		free(b->root);
	}
	if (b->raw_ring_ok)
		io_uring_queue_exit(&b->raw_ring);
	free(b->raw_buf);
	free(b->pls);
	for (int i = 0; i < NWORKLOADS; i++)
		free(b->batch[i]);
	free(b->rec_batch);
}

int bench_storage(int argc, char **argv)
{
	struct bench b;
	int rc;

	memset(&b, 0, sizeof(b));
	if ((rc = parse_opts(argc, argv, &b.o)) >= 0)
		return rc;
	if ((rc = bench_setup(&b)) < 0) {
		fprintf(stderr, "sluice-bench storage: setup: %s\n", strerror(-rc));
		bench_teardown(&b);
		return 1;
	}
	fprintf(stderr, "storage: run directory %s, durability=%s\n", b.root,
		durability_name(b.o.durability));
	for (int i = 0; i < NWORKLOADS && rc == 0; i++)
		rc = run_workload(&b, i);
	if (rc == 0)
		rc = run_recovery(&b);
	bench_teardown(&b);
	if (rc < 0)
		return 1;
	print_results(&b);
	return 0;
}
