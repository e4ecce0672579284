/* dataplane/native/native_client_udp.c — the kernel UDP transport of
 * libsluice_native (native_client.h): one non-blocking socket connected
 * to the broker (so that the kernel's SO_REUSEPORT hash keeps the flow on
 * one shard, the one holding the session), datagrams sent in batches with
 * sendmmsg and received in batches with recvmmsg into a ring of buffers
 * allocated at creation. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/native/native_client.h"

#define UDP_BURST 64                  /* datagrams per sendmmsg / recvmmsg */
#define UDP_BUF 9216                  /* one buffer (>= NATIVE_MAX_DATAGRAM) */

struct udp_transport {
	struct native_transport t;
	int fd;
	/* transmit queue: tx[0..ntx) are written, slot ntx is lent by tx_get */
	unsigned ntx;
	uint8_t *tx_mem;
	struct mmsghdr tx_msgs[UDP_BURST];
	struct iovec tx_iov[UDP_BURST];
	/* receive ring: lent by rx_burst until rx_done (the next burst reuses it) */
	uint8_t *rx_mem;
	struct mmsghdr rx_msgs[UDP_BURST];
	struct iovec rx_iov[UDP_BURST];
	uint64_t tx_dropped;
};

static struct udp_transport *udp_of(struct native_transport *t)
{
	return (struct udp_transport *)t;
}

static int udp_tx_flush(struct native_transport *t)
{
	struct udp_transport *u = udp_of(t);
	unsigned done = 0;
	int n;

	while (done < u->ntx) {
		n = sendmmsg(u->fd, u->tx_msgs + done, u->ntx - done, MSG_DONTWAIT);
		if (n > 0) {
			done += (unsigned)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
		    errno != ECONNREFUSED && errno != EMSGSIZE) {
			int e = errno;

			u->tx_dropped += u->ntx - done;
			u->ntx = 0;
			return -e;
		}
		if (n < 0 && (errno == ECONNREFUSED || errno == EMSGSIZE)) {
			/* ICMP from an earlier datagram (no broker yet) or one
			 * datagram too large: skip it, keep the rest */
			u->tx_dropped++;
			done++;
			continue;
		}
		/* the socket buffer is full: the rest is lost like any datagram */
		break;
	}
	u->tx_dropped += u->ntx - done;
	u->ntx = 0;
	return (int)done;
}

static int udp_tx_get(struct native_transport *t, struct native_dgram *d)
{
	struct udp_transport *u = udp_of(t);

	if (u->ntx == UDP_BURST)
		udp_tx_flush(t);
	d->data = u->tx_mem + (size_t)u->ntx * UDP_BUF;
	d->cap = UDP_BUF;
	d->len = 0;
	d->priv = NULL;
	return 0;
}

static void udp_tx_put(struct native_transport *t, struct native_dgram *d)
{
	struct udp_transport *u = udp_of(t);

	u->tx_iov[u->ntx] = (struct iovec){ d->data, d->len };
	u->tx_msgs[u->ntx].msg_hdr = (struct msghdr){ .msg_iov = &u->tx_iov[u->ntx], .msg_iovlen = 1 };
	u->ntx++;
	if (u->ntx == UDP_BURST)
		udp_tx_flush(t);
}

static int udp_rx_burst(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	struct udp_transport *u = udp_of(t);
	int got;

	if (n > UDP_BURST)
		n = UDP_BURST;
	for (unsigned i = 0; i < n; i++) {
		u->rx_iov[i] = (struct iovec){ u->rx_mem + (size_t)i * UDP_BUF, UDP_BUF };
		u->rx_msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &u->rx_iov[i], .msg_iovlen = 1 };
	}
	do
		got = recvmmsg(u->fd, u->rx_msgs, n, MSG_DONTWAIT, NULL);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		/* ECONNREFUSED: an ICMP port unreachable for an earlier send
		 * (the broker is not up yet); the protocol resends */
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED ? 0 : -errno;
	}
	for (int i = 0; i < got; i++)
		d[i] = (struct native_dgram){ .data = u->rx_iov[i].iov_base, .len = u->rx_msgs[i].msg_len,
					      .cap = UDP_BUF };
	return got;
}

static void udp_rx_done(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	(void)t;
	(void)d;
	(void)n;   /* the ring is reused by the next burst */
}

static int udp_wait(struct native_transport *t, int timeout_ms)
{
	struct pollfd p = { .fd = udp_of(t)->fd, .events = POLLIN };
	int rc = poll(&p, 1, timeout_ms);

	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc > 0;
}

static int udp_path_mtu(struct native_transport *t)
{
	int mtu = 0;
	socklen_t len = sizeof(mtu);

	if (getsockopt(udp_of(t)->fd, IPPROTO_IP, IP_MTU, &mtu, &len) < 0 || mtu <= 28)
		return 0;
	return mtu - 28;   /* IPv4 and UDP headers */
}

static int udp_fd(struct native_transport *t)
{
	return udp_of(t)->fd;
}

static void udp_stats(struct native_transport *t, struct sluice_stats *st)
{
	st->tx_dropped += udp_of(t)->tx_dropped;
}

static void udp_destroy(struct native_transport *t)
{
	struct udp_transport *u = udp_of(t);

	if (!u)
		return;
	udp_tx_flush(t);
	if (u->fd >= 0)
		close(u->fd);
	free(u->tx_mem);
	free(u->rx_mem);
	free(u);
}

static const struct native_transport_ops udp_ops = {
	.name = "udp",
	.tx_get = udp_tx_get,
	.tx_put = udp_tx_put,
	.tx_flush = udp_tx_flush,
	.rx_burst = udp_rx_burst,
	.rx_done = udp_rx_done,
	.wait = udp_wait,
	.path_mtu = udp_path_mtu,
	.fd = udp_fd,
	.stats = udp_stats,
	.destroy = udp_destroy,
};

int native_udp_create(const char *host_port, uint32_t socket_buffer, struct native_transport **out, char *err,
		      size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	char host[256];
	const char *colon = host_port ? strrchr(host_port, ':') : NULL;
	struct udp_transport *u;
	int rc, sz = (int)socket_buffer;

	if (!colon || colon == host_port || (size_t)(colon - host_port) >= sizeof(host) || !colon[1]) {
		snprintf(err, errlen, "'%s' is not host:port", host_port ? host_port : "(null)");
		return -EINVAL;
	}
	memcpy(host, host_port, (size_t)(colon - host_port));
	host[colon - host_port] = 0;
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0 || !ai) {
		snprintf(err, errlen, "cannot resolve %s: %s", host_port, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	u = calloc(1, sizeof(*u)); /* style: allow setup */
	if (!u) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	u->t.ops = &udp_ops;
	u->tx_mem = malloc((size_t)UDP_BURST * UDP_BUF); /* style: allow setup */
	u->rx_mem = malloc((size_t)UDP_BURST * UDP_BUF); /* style: allow setup */
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!u->tx_mem || !u->rx_mem || u->fd < 0) {
		rc = u->fd < 0 ? -errno : -ENOMEM;
		snprintf(err, errlen, "udp socket: %s", strerror(-rc));
		freeaddrinfo(ai);
		udp_destroy(&u->t);
		return rc;
	}
	if (sz > 0) {
		setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	if (connect(u->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		rc = -errno;
		snprintf(err, errlen, "connect %s: %s", host_port, strerror(-rc));
		freeaddrinfo(ai);
		udp_destroy(&u->t);
		return rc;
	}
	freeaddrinfo(ai);
	*out = &u->t;
	return 0;
}
