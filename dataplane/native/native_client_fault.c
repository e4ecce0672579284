/* dataplane/native/native_client_fault.c — a transport that wraps another
 * and damages datagrams on the way, for tests (sluice_config.fault): loss,
 * duplication, reordering (a datagram held back behind up to `window`
 * later ones, or 2 ms at most), truncation to a random shorter length and
 * single bit flips, in either direction. Decisions come from a seeded
 * generator, one draw sequence per direction, so a run can be repeated
 * (the timing of the real network beneath still varies).
 *
 * Received datagrams are copied into the wrapper's own slots (a test
 * transport: copies are fine), so that held and duplicated ones outlive
 * the inner transport's burst. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/native/native_client.h"

#define FSLOT_BUF 9216
#define FSLOTS 512                    /* received datagrams held or ready */
#define FTX_HELD 64                   /* sent datagrams held back */
#define HOLD_NS 2000000ull            /* a held datagram goes at the latest after this */

struct fslot {
	uint32_t len;
	int after;                    /* held: released after this many later datagrams */
	uint64_t deadline;            /* held: released at the latest then */
	uint8_t *buf;
};

struct fdir {                         /* one direction's generator and counters */
	uint64_t rng;
	int on;
};

struct fault_transport {
	struct native_transport t;
	struct native_transport *inner;
	struct sluice_fault f;
	struct fdir tx, rx;
	/* transmit: the buffer lent by tx_get, and datagrams held back */
	uint8_t *tx_stage;
	struct fslot tx_held[FTX_HELD];
	unsigned ntx_held;
	/* receive: slots free / ready (FIFO) / held / lent to the client */
	struct fslot slot[FSLOTS];
	int free_[FSLOTS], nfree;
	int ready[FSLOTS];
	unsigned ready_head, nready;
	int held[FSLOTS], nheld;
	int lent[64], nlent;
	uint64_t dropped, duplicated, truncated, corrupted, reordered, overflow;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64 */
static uint64_t rnd(struct fdir *d)
{
	uint64_t z = (d->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int chance(struct fdir *d, double pct)
{
	return pct > 0 && (double)(rnd(d) % 1000000) < pct * 10000.0;
}

static struct fault_transport *fault_of(struct native_transport *t)
{
	return (struct fault_transport *)t;
}

/* Damage in place: truncate or flip a bit. Returns the new length. */
static uint32_t damage(struct fault_transport *ft, struct fdir *d, uint8_t *p, uint32_t len)
{
	if (len > 1 && chance(d, ft->f.truncate_pct)) {
		len = 1 + (uint32_t)(rnd(d) % (len - 1));
		ft->truncated++;
	}
	if (len && chance(d, ft->f.corrupt_pct)) {
		p[rnd(d) % len] ^= (uint8_t)(1u << (rnd(d) % 8));
		ft->corrupted++;
	}
	return len;
}

/* ---- transmit ----------------------------------------------------------------------- */

static void emit(struct fault_transport *ft, const uint8_t *p, uint32_t len)
{
	struct native_dgram d;

	if (ft->inner->ops->tx_get(ft->inner, &d) < 0)
		return;
	memcpy(d.data, p, len);
	d.len = len;
	ft->inner->ops->tx_put(ft->inner, &d);
}

/* A datagram went out: held ones waiting for it move closer; release
 * those due (all of them when force). */
static void tx_release(struct fault_transport *ft, int counted, int force)
{
	uint64_t now = ft->ntx_held ? mono_ns() : 0;

	for (unsigned i = 0; i < ft->ntx_held;) {
		struct fslot *s = &ft->tx_held[i];

		if (counted)
			s->after--;
		if (force || s->after <= 0 || now >= s->deadline) {
			uint8_t *buf = s->buf;

			emit(ft, buf, s->len);
			/* keep the buffer with the slot: swap the last in */
			ft->tx_held[i] = ft->tx_held[--ft->ntx_held];
			ft->tx_held[ft->ntx_held].buf = buf;
			continue;
		}
		i++;
	}
}

static int fault_tx_get(struct native_transport *t, struct native_dgram *d)
{
	struct fault_transport *ft = fault_of(t);

	d->data = ft->tx_stage;
	d->cap = FSLOT_BUF;
	d->len = 0;
	d->priv = NULL;
	return 0;
}

static void fault_tx_put(struct native_transport *t, struct native_dgram *d)
{
	struct fault_transport *ft = fault_of(t);
	struct fdir *r = &ft->tx;
	uint32_t len = d->len;
	int copies = 1;

	if (r->on) {
		if (chance(r, ft->f.loss_pct)) {
			ft->dropped++;
			return;
		}
		if (chance(r, ft->f.dup_pct)) {
			copies = 2;
			ft->duplicated++;
		}
		len = damage(ft, r, d->data, len);
		if (ft->ntx_held < FTX_HELD && chance(r, ft->f.reorder_pct)) {
			struct fslot *s = &ft->tx_held[ft->ntx_held++];

			memcpy(s->buf, d->data, len);
			s->len = len;
			s->after = 1 + (int)(rnd(r) % ft->f.reorder_window);
			s->deadline = mono_ns() + HOLD_NS;
			ft->reordered++;
			if (--copies == 0)
				return;
		}
	}
	while (copies--) {
		emit(ft, d->data, len);
		tx_release(ft, 1, 0);
	}
}

static int fault_tx_flush(struct native_transport *t)
{
	struct fault_transport *ft = fault_of(t);

	tx_release(ft, 0, 0);
	return ft->inner->ops->tx_flush(ft->inner);
}

/* ---- receive ------------------------------------------------------------------------- */

static int slot_take(struct fault_transport *ft)
{
	return ft->nfree ? ft->free_[--ft->nfree] : -1;
}

static void ready_push(struct fault_transport *ft, int i)
{
	ft->ready[(ft->ready_head + ft->nready++) % FSLOTS] = i;
}

static void rx_release(struct fault_transport *ft, int counted)
{
	uint64_t now = ft->nheld ? mono_ns() : 0;

	for (int i = 0; i < ft->nheld;) {
		struct fslot *s = &ft->slot[ft->held[i]];

		if (counted)
			s->after--;
		if (s->after <= 0 || now >= s->deadline) {
			ready_push(ft, ft->held[i]);
			ft->held[i] = ft->held[--ft->nheld];
			continue;
		}
		i++;
	}
}

/* One datagram from the inner transport: judged, copied into slots. */
static void rx_take(struct fault_transport *ft, const struct native_dgram *in)
{
	struct fdir *r = &ft->rx;
	int copies = 1, i;

	if (r->on) {
		if (chance(r, ft->f.loss_pct)) {
			ft->dropped++;
			return;
		}
		if (chance(r, ft->f.dup_pct)) {
			copies = 2;
			ft->duplicated++;
		}
	}
	for (int c = 0; c < copies; c++) {
		if ((i = slot_take(ft)) < 0) {
			ft->overflow++;
			return;
		}
		struct fslot *s = &ft->slot[i];

		memcpy(s->buf, in->data, in->len);
		s->len = in->len;
		if (r->on && c == 0) {
			s->len = damage(ft, r, s->buf, s->len);
			if (chance(r, ft->f.reorder_pct)) {
				s->after = 1 + (int)(rnd(r) % ft->f.reorder_window);
				s->deadline = mono_ns() + HOLD_NS;
				ft->held[ft->nheld++] = i;
				ft->reordered++;
				continue;
			}
		}
		ready_push(ft, i);
		rx_release(ft, 1);
	}
}

static int fault_rx_burst(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	struct fault_transport *ft = fault_of(t);
	struct native_dgram in[32];
	unsigned out = 0;
	int got;

	if (n > 64 - (unsigned)ft->nlent)
		n = 64 - (unsigned)ft->nlent;
	/* refill while there is room for a whole inner burst */
	while (ft->nfree >= 2 * 32) {
		got = ft->inner->ops->rx_burst(ft->inner, in, 32);
		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			rx_take(ft, &in[i]);
		if (got)
			ft->inner->ops->rx_done(ft->inner, in, (unsigned)got);
		if (got < 32)
			break;
	}
	rx_release(ft, 0);
	while (out < n && ft->nready) {
		int i = ft->ready[ft->ready_head];

		ft->ready_head = (ft->ready_head + 1) % FSLOTS;
		ft->nready--;
		ft->lent[ft->nlent++] = i;
		d[out++] = (struct native_dgram){ .data = ft->slot[i].buf, .len = ft->slot[i].len, .cap = FSLOT_BUF };
	}
	return (int)out;
}

static void fault_rx_done(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	struct fault_transport *ft = fault_of(t);

	(void)d;
	(void)n;
	/* rx_done gives back the whole last burst */
	while (ft->nlent)
		ft->free_[ft->nfree++] = ft->lent[--ft->nlent];
}

static int fault_wait(struct native_transport *t, int timeout_ms)
{
	struct fault_transport *ft = fault_of(t);

	if (ft->nready)
		return 1;
	if (ft->nheld || ft->ntx_held) {
		/* held datagrams are due within HOLD_NS: come back for them */
		int rc = ft->inner->ops->wait(ft->inner, timeout_ms < 1 ? timeout_ms : 1);

		if (ft->ntx_held) {
			tx_release(ft, 0, 0);
			ft->inner->ops->tx_flush(ft->inner);
		}
		return rc != 0 ? rc : ft->nheld ? 1 : 0;
	}
	return ft->inner->ops->wait(ft->inner, timeout_ms);
}

static int fault_path_mtu(struct native_transport *t)
{
	struct fault_transport *ft = fault_of(t);

	return ft->inner->ops->path_mtu(ft->inner);
}

static int fault_fd(struct native_transport *t)
{
	struct fault_transport *ft = fault_of(t);

	return ft->inner->ops->fd(ft->inner);
}

static void fault_stats(struct native_transport *t, struct sluice_stats *st)
{
	struct fault_transport *ft = fault_of(t);

	ft->inner->ops->stats(ft->inner, st);
	st->fault_dropped += ft->dropped + ft->overflow;
	st->fault_duplicated += ft->duplicated;
	st->fault_truncated += ft->truncated;
	st->fault_corrupted += ft->corrupted;
	st->fault_reordered += ft->reordered;
}

static void fault_destroy(struct native_transport *t)
{
	struct fault_transport *ft = fault_of(t);

	if (!ft)
		return;
	if (ft->inner) {
		tx_release(ft, 0, 1);
		ft->inner->ops->destroy(ft->inner);
	}
	for (int i = 0; i < FSLOTS; i++)
		free(ft->slot[i].buf);
	for (int i = 0; i < FTX_HELD; i++)
		free(ft->tx_held[i].buf);
	free(ft->tx_stage);
	free(ft);
}

static const struct native_transport_ops fault_ops = {
	.name = "fault",
	.tx_get = fault_tx_get,
	.tx_put = fault_tx_put,
	.tx_flush = fault_tx_flush,
	.rx_burst = fault_rx_burst,
	.rx_done = fault_rx_done,
	.wait = fault_wait,
	.path_mtu = fault_path_mtu,
	.fd = fault_fd,
	.stats = fault_stats,
	.destroy = fault_destroy,
};

int native_fault_create(struct native_transport *inner, const struct sluice_fault *f, struct native_transport **out)
{
	struct fault_transport *ft = calloc(1, sizeof(*ft)); /* style: allow setup (a test transport) */
	unsigned dirs = f->directions ? f->directions : SLUICE_FAULT_TX | SLUICE_FAULT_RX;
	int bad = !ft;

	if (ft) {
		ft->t.ops = &fault_ops;
		ft->inner = inner;
		ft->tx_stage = malloc(FSLOT_BUF); /* style: allow setup */
		bad |= !ft->tx_stage;
		for (int i = 0; i < FSLOTS; i++) {
			ft->slot[i].buf = malloc(FSLOT_BUF); /* style: allow setup */
			bad |= !ft->slot[i].buf;
			ft->free_[ft->nfree++] = FSLOTS - 1 - i;
		}
		for (int i = 0; i < FTX_HELD; i++) {
			ft->tx_held[i].buf = malloc(FSLOT_BUF); /* style: allow setup */
			bad |= !ft->tx_held[i].buf;
		}
	}
	if (bad) {
		if (ft)
			fault_destroy(&ft->t);
		else
			inner->ops->destroy(inner);
		return -ENOMEM;
	}
	ft->f = *f;
	if (ft->f.reorder_pct > 0 && ft->f.reorder_window == 0)
		ft->f.reorder_window = 8;
	if (ft->f.reorder_window == 0)
		ft->f.reorder_window = 1;
	ft->tx.rng = (f->seed ? f->seed : 1) * 2 + 1;
	ft->rx.rng = (f->seed ? f->seed : 1) * 2 + 2;
	ft->tx.on = !!(dirs & SLUICE_FAULT_TX);
	ft->rx.on = !!(dirs & SLUICE_FAULT_RX);
	*out = &ft->t;
	return 0;
}
