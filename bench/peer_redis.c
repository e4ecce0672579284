/* bench/peer_redis.c — placeholder until the peer lands: always fails. */
#include <errno.h>
#include <stdio.h>

#include "bench/peer.h"

int peer_redis_run(const struct peer_params *p, struct peer_result *r)
{
	(void)p;
	snprintf(r->error, sizeof(r->error), "peer_redis: not implemented yet");
	return -ENOSYS;
}
