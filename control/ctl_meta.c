/* control/ctl_meta.c — how the control thread changes the metadata: a
 * record built against the image (metalog_build_*) is proposed, and the
 * proposer's continuation runs once the record was applied, or refused.
 * The image changes only when a record is applied (metalog_apply), in log
 * order; a record that no longer applies there (a topic created twice by
 * racing proposals) is a no-op whose proposer gets the error.
 *
 * Underneath: the Raft quorum (ctl_quorum.c): the record is committed by
 * a majority of the voters (durable on each), applied on every node in log
 * order, and `done` runs on the proposer from ctl_meta_poll (a turn of the
 * loop), never inside ctl_meta_propose.
 * @thread ctl */
#include <errno.h>
#include <stdlib.h>

#include "control/ctl_internal.h"
#include "control/metalog.h"

struct ctl_meta_done {
	struct ctl_meta_done *next;
	ctl_meta_done_fn done;
	void *cookie;
	int err;
	struct metalog_applied a;
};

static void ctl_meta_complete(struct ctl *ctl, ctl_meta_done_fn done, void *cookie, int err,
			      const struct metalog_applied *a)
{
	struct ctl_meta_done *d = calloc(1, sizeof(*d));

	if (!d)
		abort();   /* the control thread's own bookkeeping */
	d->done = done;
	d->cookie = cookie;
	d->err = err;
	if (a)
		d->a = *a;
	if (ctl->meta_tail)
		ctl->meta_tail->next = d;
	else
		ctl->meta_head = d;
	ctl->meta_tail = d;
}

/* A proposal in flight: whose continuation to queue once it is applied. */
struct ctl_meta_wait {
	struct ctl *ctl;
	ctl_meta_done_fn done;
	void *cookie;
};

static void ctl_meta_applied(void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_meta_wait *w = cookie;

	ctl_meta_complete(w->ctl, w->done, w->cookie, err, a);
	free(w);
}

void ctl_meta_propose(struct ctl *ctl, struct metalog_rec *rec, ctl_meta_done_fn done, void *cookie)
{
	static const struct metalog_applied nothing = { 0 };
	struct ctl_meta_wait *w;
	int rc;

	if (!rec->len) {
		/* nothing to write: the image already says it */
		ctl_meta_complete(ctl, done, cookie, 0, &nothing);
		return;
	}
	if (!(w = malloc(sizeof(*w))))
		abort();   /* the control thread's own bookkeeping */
	w->ctl = ctl;
	w->done = done;
	w->cookie = cookie;
	rc = ctl_quorum_propose(ctl, rec->buf, rec->len, ctl_meta_applied, w);
	metalog_rec_free(rec);
	if (rc < 0) {
		free(w);
		ctl_meta_complete(ctl, done, cookie, rc, NULL);
	}
}

void ctl_meta_refuse(struct ctl *ctl, int err, ctl_meta_done_fn done, void *cookie)
{
	ctl_meta_complete(ctl, done, cookie, err, NULL);
}

int ctl_meta_poll(struct ctl *ctl)
{
	int n = 0;

	/* done may propose again: those complete at the next turn */
	struct ctl_meta_done *d = ctl->meta_head;

	ctl->meta_head = ctl->meta_tail = NULL;
	while (d) {
		struct ctl_meta_done *next = d->next;

		d->done(ctl, d->cookie, d->err, &d->a);
		free(d);
		d = next;
		n++;
	}
	return n;
}

int ctl_meta_waiting(const struct ctl *ctl)
{
	return ctl->meta_head != NULL;
}

void ctl_meta_fini(struct ctl *ctl)
{
	/* the loop has stopped: nobody waits for these any more */
	while (ctl->meta_head) {
		struct ctl_meta_done *d = ctl->meta_head;

		ctl->meta_head = d->next;
		free(d);
	}
	ctl->meta_tail = NULL;
}
