/* bench/hwprobe_net.c — `hwprobe-net`: TCP bandwidth over the kernel's
 * loopback between two threads of one process, for scripts/hwprobe.
 *
 * The main thread connects to 127.0.0.1 and sends a fixed buffer as fast
 * as send() takes it for the given time, then shuts the connection down;
 * the receiving thread reads into its own buffer and counts. The figure is
 * the receiver's: bytes received from the first byte to the end of the
 * stream. It is what the kernel's TCP stack and memory copies give on this
 * machine (two copies per byte), an upper bound for a client and a broker
 * on one host; it says nothing about a NIC. Gb/s = 10^9 bits/s.
 *
 * Output: progress on stderr ("hwprobe-net: ..."); results on stdout as a
 * "# comment" line and loopback_tcp_gbps=. Exit 0, 1 on failure, 2 on bad
 * usage.
 *
 * Thread: main (sender, @thread main) and one receiver (@thread rx); they
 * share only struct net_rx, which the receiver fills and main reads after
 * pthread_join.
 * Errors: helpers return 0 or -errno.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The receiver's side: written by the rx thread only, read by main after
 * the join. */
struct net_rx {
	int listen_fd;
	size_t buf_bytes;
	uint64_t bytes;
	uint64_t first_ns, last_ns;
	int err;                        /* 0 or -errno */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* @thread rx */
static void *net_rx_run(void *arg)
{
	struct net_rx *rx = arg;
	uint8_t *buf = malloc(rx->buf_bytes);
	int fd;

	if (!buf) {
		rx->err = -ENOMEM;
		return NULL;
	}
	fd = accept(rx->listen_fd, NULL, NULL);
	if (fd < 0) {
		rx->err = -errno;
		free(buf);
		return NULL;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, rx->buf_bytes, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rx->err = -errno;
			break;
		}
		if (n == 0)
			break;
		rx->last_ns = now_ns();
		if (!rx->bytes)
			rx->first_ns = rx->last_ns;
		rx->bytes += (uint64_t)n;
	}
	close(fd);
	free(buf);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hwprobe-net [--seconds S] [--buf-kib K]\n"
		"TCP over 127.0.0.1 between two threads for S seconds (default 3), K KiB per\n"
		"send and recv (default 256). Result as key=value on stdout.\n");
}

int main(int argc, char **argv)
{
	double seconds = 3, kib = 256;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct net_rx rx;
	pthread_t thr;
	uint64_t sent = 0, t0, end;
	uint8_t *buf;
	int lfd, fd, one = 1, rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		char *e = NULL;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
			seconds = strtod(argv[++i], &e);
		else if (i + 1 < argc && !strcmp(argv[i], "--buf-kib"))
			kib = strtod(argv[++i], &e);
		if (!e || *e || seconds < 0.05 || seconds > 3600 || kib < 1 || kib > 65536) {
			fprintf(stderr, "hwprobe-net: bad option or value: %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	memset(&rx, 0, sizeof(rx));
	rx.buf_bytes = (size_t)kib << 10;
	buf = malloc(rx.buf_bytes);
	if (!buf)
		return 1;
	memset(buf, 0x5a, rx.buf_bytes);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		fprintf(stderr, "hwprobe-net: listening on 127.0.0.1: %s\n", strerror(errno));
		return 1;
	}
	rx.listen_fd = lfd;
	if (pthread_create(&thr, NULL, net_rx_run, &rx) != 0) {
		fprintf(stderr, "hwprobe-net: pthread_create failed\n");
		return 1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "hwprobe-net: connect to 127.0.0.1:%u: %s\n", ntohs(sa.sin_port), strerror(errno));
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fprintf(stderr, "hwprobe-net: TCP over loopback, %.0f KiB sends, %.1f s ...\n", kib, seconds);
	t0 = now_ns();
	end = t0 + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		ssize_t n = send(fd, buf, rx.buf_bytes, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			fprintf(stderr, "hwprobe-net: send: %s\n", strerror(errno));
			break;
		}
		sent += (uint64_t)n;
	}
	shutdown(fd, SHUT_WR);
	pthread_join(thr, NULL);
	close(fd);
	close(lfd);
	free(buf);
	if (rx.err < 0) {
		fprintf(stderr, "hwprobe-net: receiver: %s\n", strerror(-rx.err));
		return 1;
	}
	if (rc < 0 || rx.bytes != sent || rx.last_ns <= rx.first_ns) {
		fprintf(stderr, "hwprobe-net: sent %" PRIu64 " bytes, received %" PRIu64 "\n", sent, rx.bytes);
		return 1;
	}
	double secs = (double)(rx.last_ns - rx.first_ns) / 1e9, gbps = (double)rx.bytes * 8 / secs / 1e9;

	fprintf(stderr, "hwprobe-net: %.2f GB in %.2f s: %.2f Gb/s\n", (double)rx.bytes / 1e9, secs, gbps);
	printf("# loopback TCP: one connection over 127.0.0.1 between two threads, %.0f KiB sends, %.2f GB "
	       "received in %.2f s; Gb/s = 10^9 bits/s of payload\n", kib, (double)rx.bytes / 1e9, secs);
	printf("loopback_tcp_gbps=%.2f\n", gbps);
	return 0;
}
