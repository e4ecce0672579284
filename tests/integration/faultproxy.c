/* tests/integration/faultproxy.c — a fault-injecting Kafka TCP proxy for
 * the integration tests (build/itests/faultproxy).
 *
 *   faultproxy --target HOST:PORT [--listen [HOST:]PORT] [--seed N]
 *              [--drop-pct P] [--cut-pct P] [--faults-off]
 *
 * Listens (default 127.0.0.1, port 0 = any free one), connects each client
 * to the target, and forwards bytes both ways, whole Kafka frames at a time
 * (4-byte big-endian size prefix). It remembers each request's correlation
 * id and ApiKey; for each Produce (ApiKey 0) response it draws, from a
 * xorshift generator seeded by --seed:
 *   - with probability cut-pct/100, closes both sides of the connection (the
 *     response is lost, as are the other requests in flight on it);
 *   - else with probability drop-pct/100, drops the response frame and keeps
 *     the connection (the client times out and retries).
 * Everything else passes untouched.
 *
 * Prints "faultproxy listening on HOST:PORT (seed N)" on stdout when ready.
 * SIGUSR1 turns faults off, SIGUSR2 on (--faults-off starts with them off).
 * SIGTERM/SIGINT: prints one line "faultproxy stats: key=value ..." on
 * stdout and exits 0.
 *
 * Single thread, poll(2), non-blocking sockets; the connection to the
 * target is a blocking connect on loopback (refused at once while the
 * broker is down, and the client's connection is then closed). A direction
 * stops reading while more than OUT_HIGH bytes wait to be written to the
 * other side (back-pressure). Responses are matched to requests by
 * correlation id in request order (Kafka answers in order; a request that
 * never gets a response, acks=0 Produce, is passed over).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS    256
#define MAX_FRAME    (256u << 20)
#define OUT_HIGH     (8u << 20)
#define READ_CHUNK   (256u << 10)
#define PENDING_MAX  65536

struct buf {
	uint8_t *p;
	size_t off, len, cap;       /* live bytes are p[off, len) */
};

struct pending {
	int32_t corr;
	int16_t key;
};

/* One client connection and its connection to the target. dir 0 reads the
 * client and writes the target (requests), dir 1 the other way. */
struct pair {
	int fd[2];                  /* [0] client, [1] target */
	struct buf in[2], out[2];   /* in[d]: read from fd[d]; out[d]: to write to fd[d] */
	int eof[2];                 /* fd[d] sent EOF */
	int shut[2];                /* SHUT_WR done on fd[d] */
	struct pending *pend;       /* requests waiting for a response, ring */
	size_t phead, plen;
};

struct stats {
	unsigned long accepted, connect_failed, closed, requests, responses, produce_requests,
		produce_responses, dropped, cut, unmatched, bytes_up, bytes_down;
};

static struct pair *pairs[MAX_PAIRS];
static struct stats st;
static uint64_t rng;
static double drop_p, cut_p;
static int faults_on = 1;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

static double rnd01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void die(const char *what)
{
	fprintf(stderr, "faultproxy: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int buf_reserve(struct buf *b, size_t n)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->len + n <= b->cap)
		return 0;
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + n <= b->cap)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 65536;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int buf_put(struct buf *b, const uint8_t *src, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -ENOMEM;
	memcpy(b->p + b->len, src, n);
	b->len += n;
	return 0;
}

static size_t buf_used(const struct buf *b) { return b->len - b->off; }

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void pair_close(int i)
{
	struct pair *c = pairs[i];

	for (int d = 0; d < 2; d++) {
		if (c->fd[d] >= 0)
			close(c->fd[d]);
		free(c->in[d].p);
		free(c->out[d].p);
	}
	free(c->pend);
	free(c);
	pairs[i] = NULL;
	st.closed++;
}

static int parse_hostport(const char *s, struct sockaddr_in *a, int need_host)
{
	char host[128] = "127.0.0.1";
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (colon) {
		size_t n = (size_t)(colon - s);

		if (n >= sizeof(host))
			return -1;
		if (n) {
			memcpy(host, s, n);
			host[n] = 0;
		}
		s = colon + 1;
	} else if (need_host) {
		return -1;
	}
	port = strtol(s, &end, 10);
	if (*s == 0 || *end || port < 0 || port > 65535)
		return -1;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;

		if (getaddrinfo(host, NULL, &hints, &res))
			return -1;
		a->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
		freeaddrinfo(res);
	}
	return 0;
}

static void accept_one(int lfd, const struct sockaddr_in *target)
{
	int one = 1, slot = -1;
	int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	int tfd;
	struct pair *c;

	if (cfd < 0)
		return;
	st.accepted++;
	for (int i = 0; i < MAX_PAIRS; i++)
		if (!pairs[i]) {
			slot = i;
			break;
		}
	tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (slot < 0 || tfd < 0 || connect(tfd, (const struct sockaddr *)target, sizeof(*target)) < 0) {
		st.connect_failed++;
		if (tfd >= 0)
			close(tfd);
		close(cfd);
		return;
	}
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(tfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_nonblock(cfd);
	set_nonblock(tfd);
	c = calloc(1, sizeof(*c));
	if (!c)
		die("calloc");
	c->pend = calloc(PENDING_MAX, sizeof(*c->pend));
	if (!c->pend)
		die("calloc");
	c->fd[0] = cfd;
	c->fd[1] = tfd;
	pairs[slot] = c;
}

/* A whole request frame (f: size prefix + body) passes from client to
 * target: note its correlation id and ApiKey. */
static void note_request(struct pair *c, const uint8_t *f, uint32_t size)
{
	struct pending *p;

	st.requests++;
	if (size < 8)
		return;
	if (c->plen == PENDING_MAX) {   /* never answered (acks=0): forget the oldest */
		c->phead = (c->phead + 1) % PENDING_MAX;
		c->plen--;
	}
	p = &c->pend[(c->phead + c->plen) % PENDING_MAX];
	p->key = (int16_t)(f[4] << 8 | f[5]);
	p->corr = (int32_t)rd32(f + 8);
	c->plen++;
	if (p->key == 0)
		st.produce_requests++;
}

/* The ApiKey of the request a response answers, -1 if none matches. */
static int response_key(struct pair *c, const uint8_t *f, uint32_t size)
{
	int32_t corr;

	if (size < 4)
		return -1;
	corr = (int32_t)rd32(f + 4);
	for (size_t i = 0; i < c->plen; i++) {
		struct pending *p = &c->pend[(c->phead + i) % PENDING_MAX];

		if (p->corr == corr) {
			int key = p->key;

			/* requests before it will never be answered */
			c->phead = (c->phead + i + 1) % PENDING_MAX;
			c->plen -= i + 1;
			return key;
		}
	}
	return -1;
}

/* Move the whole frames of in[d] to out[!d]. Returns -1 to cut the pair. */
static int pump_frames(struct pair *c, int d)
{
	struct buf *in = &c->in[d], *out = &c->out[!d];

	while (buf_used(in) >= 4) {
		const uint8_t *f = in->p + in->off;
		uint32_t size = rd32(f);
		int forward = 1;

		if (size > MAX_FRAME)
			return -1;
		if (buf_used(in) < 4 + (size_t)size)
			break;
		if (d == 0) {
			note_request(c, f, size);
		} else {
			int key = response_key(c, f, size);

			st.responses++;
			if (key < 0)
				st.unmatched++;
			if (key == 0) {
				st.produce_responses++;
				if (faults_on && cut_p > 0 && rnd01() < cut_p) {
					st.cut++;
					return -1;
				}
				if (faults_on && drop_p > 0 && rnd01() < drop_p) {
					st.dropped++;
					forward = 0;
				}
			}
		}
		if (forward && buf_put(out, f, 4 + (size_t)size) < 0)
			return -1;
		in->off += 4 + (size_t)size;
	}
	return 0;
}

/* Service one pair after poll. Returns -1 when it is finished. */
static int pair_io(struct pair *c, const short *rev)
{
	for (int d = 0; d < 2; d++) {
		if (rev[d] & (POLLIN | POLLHUP | POLLERR)) {
			if (!c->eof[d] && buf_used(&c->out[!d]) < OUT_HIGH) {
				ssize_t r;

				if (buf_reserve(&c->in[d], READ_CHUNK) < 0)
					return -1;
				r = recv(c->fd[d], c->in[d].p + c->in[d].len, READ_CHUNK, 0);
				if (r > 0) {
					c->in[d].len += (size_t)r;
					if (d == 0)
						st.bytes_up += (unsigned long)r;
					else
						st.bytes_down += (unsigned long)r;
					if (pump_frames(c, d) < 0)
						return -1;
				} else if (r == 0) {
					c->eof[d] = 1;
				} else if (errno != EAGAIN && errno != EINTR) {
					return -1;
				}
			} else if (rev[d] & POLLERR) {
				return -1;
			}
		}
	}
	for (int d = 0; d < 2; d++) {
		struct buf *o = &c->out[d];

		while (buf_used(o)) {
			ssize_t w = send(c->fd[d], o->p + o->off, buf_used(o), MSG_NOSIGNAL);

			if (w > 0) {
				o->off += (size_t)w;
			} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				break;
			} else {
				return -1;
			}
		}
		/* the other side is done and everything it sent is through:
		 * pass the EOF on (a partial frame left behind is dropped) */
		if (c->eof[!d] && !buf_used(o) && !c->shut[d]) {
			shutdown(c->fd[d], SHUT_WR);
			c->shut[d] = 1;
		}
	}
	if (c->shut[0] && c->shut[1])
		return -1;
	return 0;
}

static void print_stats(void)
{
	printf("faultproxy stats: accepted=%lu connect_failed=%lu closed=%lu requests=%lu responses=%lu "
	       "produce_requests=%lu produce_responses=%lu dropped=%lu cut=%lu unmatched=%lu "
	       "bytes_up=%lu bytes_down=%lu\n",
	       st.accepted, st.connect_failed, st.closed, st.requests, st.responses, st.produce_requests,
	       st.produce_responses, st.dropped, st.cut, st.unmatched, st.bytes_up, st.bytes_down);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: faultproxy --target HOST:PORT [--listen [HOST:]PORT] [--seed N] "
			"[--drop-pct P] [--cut-pct P] [--faults-off]\n");
	exit(2);
}

static double pct_arg(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == 0 || *end || v < 0 || v > 100)
		usage();
	return v / 100.0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in listen_a, target_a;
	const char *listen_s = "127.0.0.1:0", *target_s = NULL;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	static struct pollfd pfd[2 + 2 * MAX_PAIRS];
	static int pfd_pair[2 + 2 * MAX_PAIRS];
	socklen_t alen = sizeof(listen_a);
	int lfd, sfd, one = 1;
	char host[INET_ADDRSTRLEN];
	sigset_t mask;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--faults-off")) {
			faults_on = 0;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--listen"))
			listen_s = v;
		else if (!strcmp(a, "--target"))
			target_s = v;
		else if (!strcmp(a, "--seed"))
			seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--drop-pct"))
			drop_p = pct_arg(v);
		else if (!strcmp(a, "--cut-pct"))
			cut_p = pct_arg(v);
		else
			usage();
	}
	if (!target_s || parse_hostport(target_s, &target_a, 1) < 0 || parse_hostport(listen_s, &listen_a, 0) < 0)
		usage();
	rng = seed ? seed : 0x9E3779B97F4A7C15ULL;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		die("signalfd");

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&listen_a, sizeof(listen_a)) < 0)
		die("bind");
	if (listen(lfd, 128) < 0)
		die("listen");
	set_nonblock(lfd);
	if (getsockname(lfd, (struct sockaddr *)&listen_a, &alen) < 0)
		die("getsockname");
	inet_ntop(AF_INET, &listen_a.sin_addr, host, sizeof(host));
	printf("faultproxy listening on %s:%d (seed %llu, target %s, drop %.2f%%, cut %.2f%%%s)\n", host,
	       ntohs(listen_a.sin_port), (unsigned long long)seed, target_s, drop_p * 100, cut_p * 100,
	       faults_on ? "" : ", faults off");
	fflush(stdout);

	for (;;) {
		int n = 0;

		pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *c = pairs[i];

			if (!c)
				continue;
			for (int d = 0; d < 2; d++) {
				short ev = 0;

				if (!c->eof[d] && buf_used(&c->out[!d]) < OUT_HIGH)
					ev |= POLLIN;
				if (buf_used(&c->out[d]))
					ev |= POLLOUT;
				pfd_pair[n] = i;
				pfd[n++] = (struct pollfd){ .fd = c->fd[d], .events = ev };
			}
		}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGUSR1) {
					faults_on = 0;
				} else if (si.ssi_signo == SIGUSR2) {
					faults_on = 1;
				} else {
					print_stats();
					return 0;
				}
			}
		}
		for (int k = 2; k < n; k += 2) {
			int i = pfd_pair[k];
			short rev[2] = { pfd[k].revents, pfd[k + 1].revents };

			if (pairs[i] && (rev[0] | rev[1]) && pair_io(pairs[i], rev) < 0)
				pair_close(i);
		}
		if (pfd[1].revents & POLLIN)
			for (int k = 0; k < 64; k++) {
				int before = (int)st.accepted;

				accept_one(lfd, &target_a);
				if ((int)st.accepted == before)
					break;
			}
	}
}
