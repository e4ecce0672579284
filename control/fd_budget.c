/* control/fd_budget.c — descriptors in use against RLIMIT_NOFILE. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>

#include "control/fd_budget.h"

int fd_usage(int64_t *in_use, int64_t *limit)
{
	struct rlimit rl;
	DIR *d = opendir("/proc/self/fd");
	int64_t n = 0;

	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	*in_use = n - 1;   /* the directory's own */
	*limit = rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
	return 0;
}
