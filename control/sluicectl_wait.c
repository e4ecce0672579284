/* control/sluicectl_wait.c — sluicectl's wait on a socket: poll until it
 * is ready or a deadline on the monotonic clock passes. The Kafka client
 * (sluicectl_client.c), the admin endpoint's client (sluicectl_admin.c)
 * and the TLS handshake and records (sluicectl_sec.c) wait here. See
 * sluicectl.h. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>

#include "control/sluicectl.h"

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ctl_wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int64_t left = deadline - mono_ms();
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}
