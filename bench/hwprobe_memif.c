/* bench/hwprobe_memif.c — `hwprobe-memif`: frames per second and bits per
 * second DPDK's net_memif carries between two processes on this machine,
 * for scripts/hwprobe. No hugepages, no NIC (--no-huge --no-pci).
 *
 * Two child processes, each with its own EAL (own --file-prefix, own
 * lcore when there are two cores) and one port opened by
 * dataplane/dpdk_port: the receiver is the memif server, the sender the
 * memif client. The sender fills every queue with fixed-size Ethernet
 * frames (ethertype 0x88B5, local experimental) as fast as the port takes
 * them for the given time; the receiver polls its queues, counts the
 * frames of that type and size (each carries a sequence number, which
 * must grow on each queue) and frees them. Neither side touches the rest
 * of the payload. The figures are the
 * receiver's: frames and frame bytes (Ethernet header and payload; no
 * preamble, no FCS) from the first frame to the last. net_memif copies
 * each frame twice (into the shared ring, out of it), so this is DPDK's
 * copy-mode memif on this CPU, not a NIC.
 *
 * Output: progress on stderr ("hwprobe-memif: ..."; the EAL's own messages
 * too); results on stdout as "# comment" lines and memif_gbps=, memif_mpps=.
 * Where the EAL cannot start (not root, the EAL refuses an option, no
 * memif driver): "SKIPPED: <why>" on stdout and exit 77, never a figure.
 * Exit 1 on any other failure, 2 on bad usage. The EAL's runtime
 * directories are removed.
 *
 * Thread: the parent process only forks and waits (it makes no DPDK call,
 * since the EAL starts once per process); each child runs everything on
 * its EAL main lcore (@thread main). Children report through a pipe.
 * Errors: helpers return 0 or -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_random.h>

#include "dataplane/dpdk_port.h"

#define SKIP_EXIT 77
#define BURST 32
#define MAX_QUEUES 8
#define ETHERTYPE_PROBE 0x88B5
#define SLOT_NS 250000000ull            /* the receiver's rate windows: 0.25 s */
#define MAX_SLOTS 256

struct memif_opts {
	double seconds;
	unsigned queues;
	unsigned frame;                 /* bytes per frame, Ethernet header included */
	const char *eal_extra;          /* appended to both EALs' arguments */
};

/* What a child tells the parent, written once to its pipe at the end
 * (smaller than PIPE_BUF, so one write). */
struct memif_report {
	int status;                     /* 0, SKIP_EXIT or 1 */
	char why[640];                  /* status != 0: what failed or why skipped */
	/* receiver */
	uint64_t frames, bytes, other;  /* ours; anything else seen */
	uint64_t misordered;            /* ours, not after the last one on its queue */
	uint32_t slot_frames[MAX_SLOTS];  /* ours per SLOT_NS from the first frame: shows a disturbed run */
	uint64_t first_ns, last_ns;
	/* sender */
	uint64_t tx_frames;             /* frames the port took */
	uint64_t tx_refused;            /* bursts the port took none of (ring full) */
	uint16_t rx_desc, tx_desc;
};

static volatile sig_atomic_t stop_flag;

static void on_term(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

_Static_assert(sizeof(struct memif_report) <= PIPE_BUF, "a report is one atomic pipe write");

static void report_write(int fd, const struct memif_report *r)
{
	if (write(fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		fprintf(stderr, "hwprobe-memif: report pipe: %s\n", strerror(errno));
}

/* Starts the EAL and opens the port for role 0 (server, receiver) or 1
 * (client, sender). On failure fills r (status SKIP_EXIT when the EAL did
 * not start) and returns -errno. runtime gets the EAL's runtime directory. */
static int side_start(int role, const struct memif_opts *o, const char *sock, struct dpdk_port *port,
		      struct memif_report *r, char *runtime, size_t runtime_len)
{
	char args[1024], err[512];
	struct dpdk_port_config pc;
	int rc;

	snprintf(args, sizeof(args),
		 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l %d --file-prefix=sluice-hwprobe-memif%d-%d "
		 "--vdev=net_memif0,role=%s,socket=%s %s",
		 role && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, role, (int)getppid(), role ? "client" : "server",
		 sock, o->eal_extra);
	rc = dpdk_eal_start(args, err, sizeof(err));
	if (rc < 0) {
		r->status = SKIP_EXIT;
		snprintf(r->why, sizeof(r->why), "the %s's EAL could not start%s: %s", role ? "sender" : "receiver",
			 geteuid() ? " (not root)" : "", err);
		return rc;
	}
	snprintf(runtime, runtime_len, "%s", rte_eal_get_runtime_dir());
	/* reseed: DPDK seeded its PRNG before main, and both children inherited
	 * the same state, so both ports would draw the same random MAC */
	rte_srand(now_ns() ^ ((uint64_t)getpid() << 32));
	dpdk_port_config_defaults(&pc);
	pc.shards = (uint16_t)o->queues;
	pc.replication = 0;
	pc.rss = 0;
	pc.csum_offload = 0;
	rc = dpdk_port_init(port, &pc, err, sizeof(err));
	if (rc < 0) {
		r->status = 1;
		snprintf(r->why, sizeof(r->why), "the %s's port did not open: %s", role ? "sender" : "receiver", err);
		dpdk_eal_stop();
		rmdir(runtime);
		return rc;
	}
	r->rx_desc = port->rx_desc;
	r->tx_desc = port->tx_desc;
	return 0;
}

static void side_stop(struct dpdk_port *port, const char *runtime)
{
	dpdk_port_fini(port);
	dpdk_eal_stop();
	rmdir(runtime);
}

/* The server: tells the parent its MAC through ready_fd once it listens,
 * then counts frames until SIGTERM (or the deadline). */
static int receiver_run(const struct memif_opts *o, const char *sock, int ready_fd, int report_fd)
{
	static struct dpdk_port port;
	struct memif_report r;
	struct rte_mbuf *pkts[BURST];
	uint64_t next_seq[MAX_QUEUES] = { 0 };   /* per queue: the sequence number after the last one seen */
	char runtime[512];
	uint64_t deadline;

	memset(&r, 0, sizeof(r));
	signal(SIGTERM, on_term);
	if (side_start(0, o, sock, &port, &r, runtime, sizeof(runtime)) < 0) {
		report_write(report_fd, &r);
		return r.status;
	}
	if (write(ready_fd, port.mac.addr_bytes, 6) != 6)
		fprintf(stderr, "hwprobe-memif: ready pipe: %s\n", strerror(errno));
	close(ready_fd);
	deadline = now_ns() + (uint64_t)((o->seconds + 60) * 1e9);
	while (!stop_flag) {
		uint64_t got = 0, ours = r.frames;

		for (unsigned q = 0; q < o->queues; q++) {
			uint16_t n = rte_eth_rx_burst(port.port_id, (uint16_t)q, pkts, BURST);

			for (uint16_t i = 0; i < n; i++) {
				const struct rte_ether_hdr *eh = rte_pktmbuf_mtod(pkts[i], const struct rte_ether_hdr *);

				if (pkts[i]->pkt_len == o->frame && eh->ether_type == rte_cpu_to_be_16(ETHERTYPE_PROBE)) {
					uint64_t seq;

					memcpy(&seq, eh + 1, sizeof(seq));
					if (next_seq[q] && seq < next_seq[q])
						r.misordered++;
					next_seq[q] = seq + 1;
					r.frames++;
					r.bytes += pkts[i]->pkt_len;
				} else {
					r.other++;
				}
			}
			rte_pktmbuf_free_bulk(pkts, n);
			got += n;
		}
		if (got) {
			r.last_ns = now_ns();
			if (!r.first_ns)
				r.first_ns = r.last_ns;
			uint64_t slot = (r.last_ns - r.first_ns) / SLOT_NS;

			if (slot < MAX_SLOTS)
				r.slot_frames[slot] += (uint32_t)(r.frames - ours);
		} else if (now_ns() > deadline) {
			break;
		}
	}
	side_stop(&port, runtime);
	report_write(report_fd, &r);
	return 0;
}

/* The client: waits for the link, then sends for o->seconds. */
static int sender_run(const struct memif_opts *o, const char *sock, const struct rte_ether_addr *dst,
		      int report_fd)
{
	static struct dpdk_port port;
	static struct rte_mbuf *pend[MAX_QUEUES][BURST];
	uint16_t npend[MAX_QUEUES] = { 0 };
	struct memif_report r;
	struct rte_eth_link link;
	char runtime[512];
	uint64_t t0, end, seq = 0;

	memset(&r, 0, sizeof(r));
	if (side_start(1, o, sock, &port, &r, runtime, sizeof(runtime)) < 0) {
		report_write(report_fd, &r);
		return r.status;
	}
	end = now_ns() + 10000000000ull;
	do {
		memset(&link, 0, sizeof(link));
		rte_eth_link_get_nowait(port.port_id, &link);
		if (link.link_status != RTE_ETH_LINK_UP)
			usleep(1000);
	} while (link.link_status != RTE_ETH_LINK_UP && now_ns() < end);
	if (link.link_status != RTE_ETH_LINK_UP) {
		r.status = 1;
		snprintf(r.why, sizeof(r.why), "the memif link did not come up in 10 s");
		goto out;
	}
	fprintf(stderr, "hwprobe-memif: link up; sending %u-byte frames on %u queue(s) for %.1f s ...\n", o->frame,
		o->queues, o->seconds);
	t0 = now_ns();
	end = t0 + (uint64_t)(o->seconds * 1e9);
	while (now_ns() < end) {
		for (unsigned q = 0; q < o->queues; q++) {
			struct rte_mbuf **p = pend[q];
			uint16_t n = npend[q], want = BURST - n, sent;

			if (want && rte_pktmbuf_alloc_bulk(port.pools[q], p + n, want) == 0) {
				for (uint16_t i = n; i < BURST; i++) {
					struct rte_ether_hdr *eh = (struct rte_ether_hdr *)rte_pktmbuf_append(p[i],
											       (uint16_t)o->frame);

					eh->dst_addr = *dst;
					eh->src_addr = port.mac;
					eh->ether_type = rte_cpu_to_be_16(ETHERTYPE_PROBE);
					memcpy(eh + 1, &seq, sizeof(seq));
					seq++;
				}
				n = BURST;
			}
			sent = rte_eth_tx_burst(port.port_id, (uint16_t)q, p, n);
			if (!sent)
				r.tx_refused++;
			r.tx_frames += sent;
			memmove(p, p + sent, (size_t)(n - sent) * sizeof(*p));
			npend[q] = (uint16_t)(n - sent);
		}
	}
	/* let the receiver drain the rings before the link goes */
	usleep(200000);
out:
	for (unsigned q = 0; q < o->queues; q++)
		rte_pktmbuf_free_bulk(pend[q], npend[q]);
	side_stop(&port, runtime);
	report_write(report_fd, &r);
	return r.status;
}

/* the child's report, or a made-up failure if it died without one */
static void report_read(int fd, struct memif_report *r, const char *who)
{
	ssize_t n = read(fd, r, sizeof(*r));

	if (n != (ssize_t)sizeof(*r)) {
		memset(r, 0, sizeof(*r));
		r->status = 1;
		snprintf(r->why, sizeof(r->why), "the %s exited without a report", who);
	}
}

static int wait_child(pid_t p)
{
	int st;

	if (waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hwprobe-memif [--seconds S] [--queues N] [--frame BYTES] [--eal 'ARGS']\n"
		"DPDK net_memif between two processes: one sends BYTES-byte frames (default 1400)\n"
		"on N queues (default 1, at most %d) for S seconds (default 5), the other counts.\n"
		"--eal: more EAL arguments for both processes (e.g. --log-level=pmd.net.memif:debug).\n"
		"Results as key=value on stdout; SKIPPED: <why> and exit 77 where the EAL cannot start.\n",
		MAX_QUEUES);
}

static int finish(int status, const char *why)
{
	if (status == SKIP_EXIT) {
		printf("SKIPPED: %s\n", why);
		return SKIP_EXIT;
	}
	fprintf(stderr, "hwprobe-memif: FAILED: %s\n", why);
	return 1;
}

int main(int argc, char **argv)
{
	struct memif_opts o = { .seconds = 5, .queues = 1, .frame = 1400, .eal_extra = "" };
	struct memif_report rr, sr;
	struct rte_ether_addr dst;
	int ready[2], rrep[2], srep[2], rcs, rcr;
	char sock[108];
	pid_t pr, ps;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		char *e = NULL;
		double v = 0;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 < argc && !strcmp(argv[i], "--eal")) {
			o.eal_extra = argv[++i];
			continue;
		}
		if (i + 1 < argc)
			v = strtod(argv[i + 1], &e);
		if (!e || *e) {
			fprintf(stderr, "hwprobe-memif: bad option or value: %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
		if (!strcmp(argv[i], "--seconds") && v >= 0.1 && v <= 3600)
			o.seconds = v;
		else if (!strcmp(argv[i], "--queues") && v >= 1 && v <= MAX_QUEUES)
			o.queues = (unsigned)v;
		else if (!strcmp(argv[i], "--frame") && v >= 60 && v <= 1514)
			o.frame = (unsigned)v;
		else {
			fprintf(stderr, "hwprobe-memif: bad option or value: %s %s\n", argv[i], argv[i + 1]);
			usage(stderr);
			return 2;
		}
		i++;
	}
	snprintf(sock, sizeof(sock), "/tmp/sluice-hwprobe-memif-%d.sock", (int)getpid());
	if (pipe(ready) < 0 || pipe(rrep) < 0 || pipe(srep) < 0)
		return finish(1, strerror(errno));
	fflush(NULL);
	pr = fork();
	if (pr == 0) {
		close(ready[0]);
		close(rrep[0]);
		alarm((unsigned)o.seconds + 90);
		exit(receiver_run(&o, sock, ready[1], rrep[1]));
	}
	close(ready[1]);
	close(rrep[1]);
	if (pr < 0)
		return finish(1, strerror(errno));
	fprintf(stderr, "hwprobe-memif: receiver (memif server) starting its EAL ...\n");
	if (read(ready[0], dst.addr_bytes, 6) != 6) {
		report_read(rrep[0], &rr, "receiver");
		wait_child(pr);
		unlink(sock);
		return finish(rr.status ? rr.status : 1, rr.why);
	}
	fprintf(stderr, "hwprobe-memif: sender (memif client) starting its EAL ...\n");
	fflush(NULL);
	ps = fork();
	if (ps == 0) {
		close(srep[0]);
		alarm((unsigned)o.seconds + 60);
		exit(sender_run(&o, sock, &dst, srep[1]));
	}
	close(srep[1]);
	if (ps < 0) {
		kill(pr, SIGTERM);
		wait_child(pr);
		return finish(1, strerror(errno));
	}
	report_read(srep[0], &sr, "sender");
	rcs = wait_child(ps);
	kill(pr, SIGTERM);
	report_read(rrep[0], &rr, "receiver");
	rcr = wait_child(pr);
	unlink(sock);
	if (sr.status)
		return finish(sr.status, sr.why);
	if (rr.status)
		return finish(rr.status, rr.why);
	if (rcs || rcr) {
		char why[128];

		snprintf(why, sizeof(why), "exit status: sender %d, receiver %d", rcs, rcr);
		return finish(1, why);
	}
	if (rr.frames < 2 || rr.last_ns <= rr.first_ns)
		return finish(1, "the receiver counted no frames");
	if (rr.misordered || rr.frames > sr.tx_frames) {
		char why[160];

		snprintf(why, sizeof(why), "%" PRIu64 " frames out of order, %" PRIu64 " received of %" PRIu64 " sent",
			 rr.misordered, rr.frames, sr.tx_frames);
		return finish(1, why);
	}

	double secs = (double)(rr.last_ns - rr.first_ns) / 1e9;
	double gbps = (double)rr.bytes * 8 / secs / 1e9, mpps = (double)rr.frames / secs / 1e6;
	uint64_t lost = sr.tx_frames > rr.frames ? sr.tx_frames - rr.frames : 0;

	/* the slowest and fastest whole window: far apart, something else
	 * ran on a core the probe polls on */
	uint64_t full = (rr.last_ns - rr.first_ns) / SLOT_NS, lo = UINT64_MAX, hi = 0;

	for (uint64_t i = 0; i < full && i < MAX_SLOTS; i++) {
		lo = rr.slot_frames[i] < lo ? rr.slot_frames[i] : lo;
		hi = rr.slot_frames[i] > hi ? rr.slot_frames[i] : hi;
	}
	char windows[200] = "";

	if (hi)
		snprintf(windows, sizeof(windows), "; per 0.25 s window: slowest %.2f, fastest %.2f Mpps%s",
			 (double)lo * 4 / 1e6, (double)hi * 4 / 1e6,
			 lo * 2 < hi ? ", DISTURBED: something else ran on a polled core" : "");
	fprintf(stderr, "hwprobe-memif: received %" PRIu64 " frames in %.2f s: %.2f Mpps, %.2f Gb/s (sent %" PRIu64
		", %" PRIu64 " not received, %" PRIu64 " other frames%s)\n", rr.frames, secs, mpps, gbps, sr.tx_frames,
		lost, rr.other, windows);
	printf("# memif: DPDK net_memif (copy mode) between two processes, each its own EAL (--no-huge, one lcore "
	       "each); %u queue(s), %u/%u descriptors, %u-byte frames for %.1f s; received %" PRIu64 " frames in "
	       "%.2f s (the sender's port took %" PRIu64 ", %" PRIu64 " not received%s); Gb/s = 10^9 bits/s of "
	       "Ethernet header + payload\n", o.queues, rr.rx_desc, rr.tx_desc, o.frame, o.seconds, rr.frames,
	       secs, sr.tx_frames, lost, windows);
	printf("memif_gbps=%.2f\n", gbps);
	printf("memif_mpps=%.3f\n", mpps);
	return 0;
}
