/* bench/peer_nats.c — placeholder until the peer lands: always fails. */
#include <errno.h>
#include <stdio.h>

#include "bench/peer.h"

int peer_nats_run(const struct peer_params *p, struct peer_result *r)
{
	(void)p;
	snprintf(r->error, sizeof(r->error), "peer_nats: not implemented yet");
	return -ENOSYS;
}
