/* control/coord_load.c — a coordinator's partitions, loaded or not (see
 * coord_load.h). @thread ctl */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/coord_load.h"
#include "dataplane/kafka_errors.h"

int coord_load_resize(struct coord_load *cl, int32_t n)
{
	uint8_t *st;
	uint32_t *gen;

	if (n <= cl->n)
		return 0;
	st = realloc(cl->state, (size_t)n);
	if (!st)
		return -ENOMEM;
	cl->state = st;
	gen = realloc(cl->gen, (size_t)n * sizeof(*gen));
	if (!gen)
		return -ENOMEM;
	cl->gen = gen;
	memset(cl->state + cl->n, COORD_UNLOADED, (size_t)(n - cl->n));
	memset(cl->gen + cl->n, 0, (size_t)(n - cl->n) * sizeof(*gen));
	cl->n = n;
	return 0;
}

void coord_load_fini(struct coord_load *cl)
{
	free(cl->state);
	free(cl->gen);
	memset(cl, 0, sizeof(*cl));
}

enum coord_action coord_load_lead(struct coord_load *cl, int32_t p, int leads, uint32_t *gen)
{
	if (p < 0 || p >= cl->n)
		return COORD_NONE;
	if (leads && cl->state[p] == COORD_UNLOADED) {
		cl->state[p] = COORD_LOADING;
		*gen = ++cl->gen[p];
		cl->loads++;
		return COORD_LOAD;
	}
	if (!leads && cl->state[p] != COORD_UNLOADED) {
		if (cl->state[p] == COORD_LOADED)
			cl->loaded--;
		cl->state[p] = COORD_UNLOADED;
		*gen = ++cl->gen[p];
		cl->unloads++;
		return COORD_UNLOAD;
	}
	return COORD_NONE;
}

int coord_load_current(const struct coord_load *cl, int32_t p, uint32_t gen)
{
	return p >= 0 && p < cl->n && cl->state[p] == COORD_LOADING && cl->gen[p] == gen;
}

int coord_load_done(struct coord_load *cl, int32_t p, uint32_t gen)
{
	if (!coord_load_current(cl, p, gen))
		return 0;
	cl->state[p] = COORD_LOADED;
	cl->loaded++;
	return 1;
}

int16_t coord_load_err(const struct coord_load *cl, int32_t p)
{
	if (cl->n <= 0)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	if (p < 0 || p >= cl->n)
		return KERR_NOT_COORDINATOR;
	switch (cl->state[p]) {
	case COORD_LOADED: return 0;
	case COORD_LOADING: return KERR_COORDINATOR_LOAD_IN_PROGRESS;
	default: return KERR_NOT_COORDINATOR;
	}
}
