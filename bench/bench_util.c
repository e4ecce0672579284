/* bench/bench_util.c — small helpers every sluice-bench subcommand may use
 * (declared in bench/bench.h): a free loopback port, removing a run's
 * directory tree.
 *
 * Thread: any.
 */
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"

int bench_free_port(int type)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), port = -1;

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

void bench_rmrf(const char *path, const char *who)
{
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		fprintf(stderr, "%s: could not remove %s: %s\n", who, path, strerror(errno));
}

void bench_repo_root(char *buf, size_t len)
{
	char self[800];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	snprintf(buf, len, ".");
	if (n <= 0)
		return;
	self[n] = 0;
	if ((slash = strrchr(self, '/')))
		*slash = 0;
	if ((slash = strrchr(self, '/')))
		*slash = 0;
	snprintf(buf, len, "%s", self);
}
