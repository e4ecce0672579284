/* bench/bench_scrape.c — `sluice-bench scrape`: what the admin endpoint's
 * /metrics costs the data path, and what a scrape costs; with --console,
 * the same for the web console left open (docs/console.md).
 *
 * One broker (started here, admin.listen on a free port), one librdkafka
 * producer kept saturated (acks=1) on a 6-partition topic. The run
 * alternates phases of --phase seconds without and with a scraper thread
 * that GETs /metrics every 100 ms (off, on, off, on, ... --rounds times
 * each): the ratio of the two produce rates, same broker, same run, is the
 * data path's cost of being watched (target >= 0.99 for the median of the
 * rounds' ratios, which a disturbed round moves less than the mean). Then
 * it creates --partitions more partitions (default 10,000: 100 topics) and
 * times --scrapes scrapes of the whole broker: time (p50, p99, max), size.
 *
 * --console: instead of scraping, the "on" phases do what an open console
 * does, twice over: CONSOLE_STREAMS live streams (/v1/stream) read as
 * they come, and every 2 s the JSON of the overview, the topics, the
 * topic and the groups pages (target >= 0.98); the big broker's timed
 * request is then /v1/topics.
 *
 * Thread: main (the broker, the producer, the phases) and the scraper.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"

#define SCRAPE_EVERY_NS 100000000ull
#define CONSOLE_STREAMS 4
#define CONSOLE_POLL_NS 2000000000ull

struct scraper {
	int port;
	int console;                 /* --console: streams and page polls, not /metrics */
	int streams[CONSOLE_STREAMS];/* open live streams (-1: none) */
	uint64_t next_poll;
	uint64_t stream_bytes;
	volatile int on;             /* scrape while set */
	volatile int stop;
	struct hist time_ns;         /* scrapes while on */
	uint64_t bytes_last;
	uint64_t failures;
};

/* A connection to the admin endpoint with request `req` sent; fd or -errno. */
static int admin_send(int port, const char *req, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(fd, req, len) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* GET path over a new connection; the body's bytes, or -errno. */
static int64_t get_once(int port, const char *path)
{
	static char buf[1 << 16];
	int64_t total = 0, body = -1;
	int fd;
	ssize_t n;
	char first[16] = "";

	snprintf(buf, sizeof(buf), "GET %s HTTP/1.0\r\nHost: bench\r\n\r\n", path);
	if ((fd = admin_send(port, buf, strlen(buf))) < 0)
		return fd;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (!total)
			memcpy(first, buf, n < 15 ? (size_t)n : 15);
		if (body < 0) {
			char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);

			if (end)   /* the headers end in the first read here (they are short) */
				body = total + (int64_t)(end + 4 - buf);
		}
		total += n;
	}
	close(fd);
	if (strncmp(first, "HTTP/1.1 200", 12) || body < 0)
		return -EPROTO;
	return total - body;
}

static int64_t scrape_once(int port)
{
	return get_once(port, "/metrics");
}

/* --console, on: the streams open and drained, the pages' JSON polled */
static int console_turn(struct scraper *s, uint64_t now)
{
	static const char *const pages[] = { "/v1/cluster", "/v1/history", "/v1/topics", "/v1/topics/scrape-bench",
					     "/v1/groups" };
	static const char req[] = "GET /v1/stream HTTP/1.1\r\nHost: bench\r\n\r\n";
	static char buf[1 << 14];

	for (int i = 0; i < CONSOLE_STREAMS; i++) {
		ssize_t n;

		if (s->streams[i] < 0 && (s->streams[i] = admin_send(s->port, req, sizeof(req) - 1)) < 0) {
			s->streams[i] = -1;
			return -1;
		}
		while ((n = recv(s->streams[i], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			s->stream_bytes += (uint64_t)n;
		if (n == 0) {   /* the endpoint ended it: a failure */
			close(s->streams[i]);
			s->streams[i] = -1;
			return -1;
		}
	}
	if (now < s->next_poll)
		return 0;
	s->next_poll = now + CONSOLE_POLL_NS;
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		if (get_once(s->port, pages[i]) < 0)
			return -1;
	hist_add(&s->time_ns, bench_now_ns() - now);
	return 0;
}

static void console_close(struct scraper *s)
{
	for (int i = 0; i < CONSOLE_STREAMS; i++)
		if (s->streams[i] >= 0) {
			close(s->streams[i]);
			s->streams[i] = -1;
		}
	s->next_poll = 0;
}

static void *scraper_main(void *arg)
{
	struct scraper *s = arg;
	uint64_t next = bench_now_ns();

	while (!s->stop) {
		uint64_t now = bench_now_ns();

		if (now < next) {
			usleep((useconds_t)((next - now) / 1000));
			continue;
		}
		next += SCRAPE_EVERY_NS;
		if (next < now)
			next = now + SCRAPE_EVERY_NS;
		if (s->console) {
			if (!s->on)
				console_close(s);
			else if (console_turn(s, now) < 0)
				s->failures++;
			continue;
		}
		if (s->on) {
			int64_t n = scrape_once(s->port);

			if (n < 0) {
				s->failures++;
				continue;
			}
			hist_add(&s->time_ns, bench_now_ns() - now);
			s->bytes_last = (uint64_t)n;
		}
	}
	console_close(s);
	return NULL;
}

struct prod {
	struct client_errs errs;     /* first: the error callback's opaque */
	uint64_t acked, failed;
};

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct prod *p = opaque;

	(void)rk;
	if (m->err)
		p->failed++;
	else
		p->acked++;
}

/* Keep the producer saturated for `seconds`; the records acknowledged in
 * that window per second. */
static double produce_phase(rd_kafka_t *rk, struct prod *p, double seconds, int size)
{
	static char payload[1 << 16];
	uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), a0 = p->acked;
	uint64_t now;

	while ((now = bench_now_ns()) < end && !bench_interrupted) {
		rd_kafka_resp_err_t err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("scrape-bench"),
							    RD_KAFKA_V_VALUE(payload, (size_t)size),
							    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);

		if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
			rd_kafka_poll(rk, 1);
		else
			rd_kafka_poll(rk, 0);
	}
	return (double)(p->acked - a0) / ((double)(bench_now_ns() - t0) / 1e9);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-bench scrape [--console] [--phase S] [--rounds N] [--size B] [--partitions N] "
		"[--scrapes N]\n"
		"  --console        the web console open (its streams and page polls), not /metrics\n"
		"  --phase S        seconds per phase (default 2)\n"
		"  --rounds N       off/on phase pairs, at most 64 (default 10)\n"
		"  --size B         record size (default 100)\n"
		"  --partitions N   partitions for the big scrape, in topics of 100 (default 10000)\n"
		"  --scrapes N      timed scrapes of the big broker (default 20)\n");
}

int bench_scrape(int argc, char **argv)
{
	struct opts o = { .cmd = "scrape", .acks = 1 };
	struct broker br;
	struct scraper s = { 0 };
	struct prod p = { 0 };
	double phase = 2, off_sum = 0, on_sum = 0, rate[2][64], ratio[64], median;
	int rounds = 10, size = 100, parts = 10000, scrapes = 20, rc = 1;
	char admin[64], err[256];
	struct hist big;
	uint64_t big_bytes = 0;
	pthread_t th;
	rd_kafka_conf_t *c;
	rd_kafka_t *rk;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--console")) {
			s.console = 1;
			continue;
		}
		if (!v)
			return bad_option("scrape", a, "needs a value");
		if (!strcmp(a, "--phase"))
			phase = atof(v);
		else if (!strcmp(a, "--rounds"))
			rounds = atoi(v);
		else if (!strcmp(a, "--size"))
			size = atoi(v);
		else if (!strcmp(a, "--partitions"))
			parts = atoi(v);
		else if (!strcmp(a, "--scrapes"))
			scrapes = atoi(v);
		else
			return bad_option("scrape", a, "unknown option");
		i++;
	}
	if (phase <= 0 || rounds < 1 || rounds > 64 || size < 1 || size > (1 << 16) || parts < 0 || scrapes < 1)
		return bad_option("scrape", "", "out of range");
	for (int i = 0; i < CONSOLE_STREAMS; i++)
		s.streams[i] = -1;
	s.port = free_port();
	snprintf(admin, sizeof(admin), "admin.listen=127.0.0.1:%d", s.port);
	o.sets[o.nsets++] = admin;
	o.sets[o.nsets++] = "num.partitions=6";
	hist_init(&s.time_ns);
	hist_init(&big);
	if (broker_start(&br, 2, &o) < 0)
		return 1;
	if (create_topics(br.bootstrap, "scrape-bench", 1, 1, 6) < 0)
		goto out;
	c = base_conf(br.bootstrap, &p.errs);
	if (!c || conf_set(c, "acks", "1") < 0 || conf_set(c, "linger.ms", "5") < 0 ||
	    conf_set(c, "batch.num.messages", "10000") < 0 || conf_set(c, "queue.buffering.max.messages", "200000") < 0)
		goto out;
	rd_kafka_conf_set_dr_msg_cb(c, dr);
	rd_kafka_conf_set_opaque(c, &p);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "scrape: producer: %s\n", err);
		goto out;
	}
	if (pthread_create(&th, NULL, scraper_main, &s)) {
		rd_kafka_destroy(rk);
		goto out;
	}
	produce_phase(rk, &p, 1.0, size);   /* warm-up */
	for (int r = 0; r < rounds && !bench_interrupted; r++)
		for (int on = 0; on < 2; on++) {
			s.on = on;
			rate[on][r] = produce_phase(rk, &p, phase, size);
			fprintf(stderr, "scrape: round %d, %s %s: %.0f records/s\n", r + 1,
				s.console ? "console" : "scraping", on ? "on " : "off", rate[on][r]);
		}
	s.on = 0;
	rd_kafka_flush(rk, 30000);
	rd_kafka_destroy(rk);
	for (int r = 0; r < rounds; r++) {
		off_sum += rate[0][r];
		on_sum += rate[1][r];
		ratio[r] = rate[0][r] > 0 ? rate[1][r] / rate[0][r] : 0;
	}
	/* the median of the rounds' ratios: a round the machine disturbed
	 * (another process, a flush) moves it less than the mean */
	for (int i = 1; i < rounds; i++)
		for (int j = i; j > 0 && ratio[j - 1] > ratio[j]; j--) {
			double x = ratio[j];

			ratio[j] = ratio[j - 1];
			ratio[j - 1] = x;
		}
	median = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
	/* the big broker: --partitions more, then timed scrapes */
	s.stop = 1;
	pthread_join(th, NULL);
	if (parts > 0) {
		int topics = (parts + 99) / 100;

		fprintf(stderr, "scrape: creating %d topics x %d partitions\n", topics, parts < 100 ? parts : 100);
		if (create_topics(br.bootstrap, "scrape-big", topics, 0, parts < 100 ? parts : 100) < 0)
			goto out;
	}
	for (int i = 0; i < scrapes && !bench_interrupted; i++) {
		uint64_t t0 = bench_now_ns();
		int64_t n = get_once(s.port, s.console ? "/v1/topics" : "/metrics");

		if (n < 0) {
			fprintf(stderr, "scrape: %s failed: %s\n", s.console ? "/v1/topics" : "/metrics", strerror((int)-n));
			goto out;
		}
		hist_add(&big, bench_now_ns() - t0);
		big_bytes = (uint64_t)n;
		usleep(100000);
	}
	rc = 0;
	{
		const char *what = s.console ? "the console open" : "a /metrics scrape every 100 ms";
		const char *on_col = s.console ? "console_open" : "scrape_100ms";
		double target = s.console ? 0.98 : 0.99;

		printf("# sluice-bench scrape%s: 2 shards, acks=1, %d-byte records on 6 partitions; %d rounds of %.1f s "
		       "without and with %s\n", s.console ? " --console" : "", size, rounds, phase, what);
		if (s.console)
			printf("# the console: %d live streams (/v1/stream) read as they come, and /v1/cluster, /v1/history, "
			       "/v1/topics, /v1/topics/scrape-bench and /v1/groups every 2 s\n", CONSOLE_STREAMS);
		printf("%-34s %14s %14s %8s\n", "metric", s.console ? "no_console" : "no_scrape", on_col, "ratio");
		for (int r = 0; r < rounds; r++)
			printf("produce_records_per_s_round%-2d      %14.0f %14.0f %8.3f\n", r + 1, rate[0][r], rate[1][r],
			       rate[0][r] > 0 ? rate[1][r] / rate[0][r] : 0);
		printf("produce_records_per_s_mean         %14.0f %14.0f %8.3f\n", off_sum / rounds, on_sum / rounds,
		       off_sum > 0 ? on_sum / off_sum : 0);
		printf("produce_ratio_median_of_rounds     %14s %14s %8.3f  (target >= %.2f: %s)\n", "", "", median,
		       target, median >= target ? "met" : "missed");
		if (s.console)
			printf("console page_polls %" PRIu64 " failures %" PRIu64 " poll_p50_ms %.2f poll_p99_ms %.2f "
			       "stream_bytes %" PRIu64 "\n", s.time_ns.count, s.failures,
			       (double)hist_percentile(&s.time_ns, 50) / 1e6, (double)hist_percentile(&s.time_ns, 99) / 1e6,
			       s.stream_bytes);
		else
			printf("scrape during_produce_count %" PRIu64 " failures %" PRIu64 " p50_ms %.2f p99_ms %.2f bytes %" PRIu64
			       "\n", s.time_ns.count, s.failures, (double)hist_percentile(&s.time_ns, 50) / 1e6,
			       (double)hist_percentile(&s.time_ns, 99) / 1e6, s.bytes_last);
		printf("%s partitions %d (and the internal topics' and the 6 produced) count %" PRIu64 " p50_ms %.1f "
		       "p99_ms %.1f max_ms %.1f bytes %" PRIu64 "\n", s.console ? "topics_json" : "scrape", parts, big.count,
		       (double)hist_percentile(&big, 50) / 1e6, (double)hist_percentile(&big, 99) / 1e6,
		       (double)big.max / 1e6, big_bytes);
	}
out:
	if (broker_stop(&br) < 0)
		rc = 1;
	return rc;
}
