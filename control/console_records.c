/* control/console_records.c — the record browser's pages and a
 * partition's producers, read from its owner shard (see
 * console_records.h). @thread ctl */
#include "control/console_records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "control/ctl.h"
#include "control/ctl_homes.h"
#include "control/ctl_internal.h"
#include "control/record_walk.h"
#include "control/textbuf.h"
#include "dataplane/broker.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"

#define CONSOLE_RECORDS_DEFAULT 50

struct console_call {
	struct part_peek_req req;
	struct part_producers_req preq;  /* a producers page (req unused) */
	struct part_producer_view *views;
	console_done done;           /* NULL: cancelled */
	void *cookie;
	char topic[256];
	int32_t partition;
	int64_t want;                /* the first offset of the page (newest: computed) */
	int64_t end;                 /* newest order: the page's last offset + 1; -1 none */
	int newest;                  /* listed newest first */
	int limit;
	uint8_t *buf;                /* a records page's: PART_PEEK_MAX bytes */
};

/* a decimal int64 >= min, or -1 on anything else */
static int parse_i64(const char *s, int64_t min, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min)
		return -1;
	*out = v;
	return 0;
}

static void b64(struct textbuf *t, const uint8_t *p, int32_t n)
{
	if (!p || n < 0) {
		textbuf_printf(t, "null");
		return;
	}
	if (textbuf_reserve(t, (size_t)(4 * ((n + 2) / 3) + 3)) < 0)
		return;
	t->p[t->len++] = '"';
	t->len += (size_t)EVP_EncodeBlock((unsigned char *)t->p + t->len, p, n);
	t->p[t->len++] = '"';
	t->p[t->len] = 0;
}

/* the records, gathered for the page (oldest first), then written */
struct page {
	struct textbuf *t;
	int n, limit;
	int64_t end;                 /* -1: none */
	size_t *starts;              /* each record's JSON's start in t (newest first: reversed) */
	size_t *lens;
};

static int one(void *arg, const struct fetched *r)
{
	struct page *pg = arg;
	struct textbuf *t = pg->t;
	const uint8_t *h = r->headers, *he = r->headers + r->headers_len;
	size_t at = t->len;

	if (pg->end >= 0 && r->offset >= pg->end)
		return 1;
	textbuf_printf(t, "{\"offset\": %lld, \"timestamp\": %lld, \"key\": ", (long long)r->offset,
		       (long long)r->timestamp);
	b64(t, r->key, r->key_len);
	textbuf_printf(t, ", \"value\": ");
	b64(t, r->value, r->value_len);
	textbuf_printf(t, ", \"headers\": [");
	for (int32_t i = 0; i < r->headers_count; i++) {
		int64_t kl, vl;
		size_t n;

		if (!(n = varint_decode(h, he, &kl)) || kl < 0 || (size_t)kl > (size_t)(he - h - (ptrdiff_t)n))
			break;
		h += n;
		textbuf_printf(t, "%s{\"key\": ", i ? ", " : "");
		b64(t, h, (int32_t)kl);   /* a header key is a string: bytes all the same */
		h += kl;
		if (!(n = varint_decode(h, he, &vl)) || (vl >= 0 && (size_t)vl > (size_t)(he - h - (ptrdiff_t)n))) {
			textbuf_printf(t, "}");
			break;
		}
		h += n;
		textbuf_printf(t, ", \"value\": ");
		b64(t, vl < 0 ? NULL : h, (int32_t)vl);
		textbuf_printf(t, "}");
		if (vl > 0)
			h += vl;
	}
	textbuf_printf(t, "]}");
	pg->starts[pg->n] = at;
	pg->lens[pg->n++] = t->len - at;
	return pg->n >= pg->limit;
}

static void answer(struct console_call *c)
{
	struct part_peek_req *q = &c->req;
	struct textbuf t = { 0 }, recs = { 0 };
	struct page pg = { .t = &recs, .limit = c->limit, .end = c->end };
	int64_t offset = q->from;
	int rc = 0;
	unsigned status = 200;

	if (q->err == -ENOENT) {
		textbuf_printf(&t, "the partition is not held on this node (or was deleted): ask its leader's admin "
			       "endpoint\n");
		status = 404;
	} else if (q->err == -EFBIG) {
		textbuf_printf(&t, "a record batch at offset %lld is larger than a page (%u bytes): read it with "
			       "sluicectl record consume\n", (long long)q->from, PART_PEEK_MAX);
		status = 413;
	} else if (q->err) {
		textbuf_printf(&t, "reading the partition failed: %s; try again\n", strerror(-q->err));
		status = q->err == -EAGAIN ? 503 : 500;
	} else {
		pg.starts = calloc((size_t)c->limit, sizeof(*pg.starts));
		pg.lens = calloc((size_t)c->limit, sizeof(*pg.lens));
		if (!pg.starts || !pg.lens)
			recs.oom = 1;
		else
			rc = record_walk(c->topic, c->partition, c->buf, q->len, &offset, c->end, one, &pg);
		if (rc < 0) {
			textbuf_printf(&t, "the partition's batches at offset %lld do not decode: %s\n", (long long)q->from,
				       strerror(-rc));
			status = 500;
		}
	}
	if (status == 200) {
		textbuf_printf(&t, "{\"topic\": ");
		textbuf_printf(&t, "\"");
		textbuf_escaped(&t, c->topic);
		textbuf_printf(&t, "\", \"partition\": %d, \"log_start_offset\": %lld, \"high_watermark\": %lld, "
			       "\"order\": \"%s\", \"from\": %lld, \"next_offset\": %lld, \"records\": [",
			       c->partition, (long long)q->log_start, (long long)q->hw, c->newest ? "newest" : "oldest",
			       (long long)q->from, (long long)offset);
		for (int i = 0; i < pg.n; i++) {
			int k = c->newest ? pg.n - 1 - i : i;

			textbuf_printf(&t, "%s\n  ", i ? "," : "");
			if (textbuf_reserve(&t, pg.lens[k]) == 0) {
				memcpy(t.p + t.len, recs.p + pg.starts[k], pg.lens[k]);
				t.len += pg.lens[k];
				t.p[t.len] = 0;
			}
		}
		textbuf_printf(&t, "\n]}\n");
		if (recs.oom)
			t.oom = 1;
	}
	free(pg.starts);
	free(pg.lens);
	textbuf_fini(&recs);
	c->done(c->cookie, status, &t);
	textbuf_fini(&t);
}

static void peeked(void *self, void *cookie)
{
	struct console_call *c = cookie;

	(void)self;
	if (c->done)
		answer(c);
	free(c->buf);
	free(c);
}

void console_call_cancel(struct console_call *c)
{
	c->done = NULL;
}

/* "<topic>/<partition>" of a partition held here: 0 with its topic, number
 * and owner shard, else an HTTP status with the message in t. */
static unsigned locate(struct ctl *ctl, const char *path, char topic[256], int64_t *partition_out,
		       const struct md_topic **tp_out, int32_t *owner_out, struct textbuf *t)
{
	const char *slash = strrchr(path, '/');
	const struct md_topic *tp;
	int64_t partition;
	int32_t owner;

	if (!slash || slash == path || (size_t)(slash - path) >= 256) {
		textbuf_printf(t, "not found: give <topic>/<partition>\n");
		return 404;
	}
	memcpy(topic, path, (size_t)(slash - path));
	topic[slash - path] = 0;
	if (parse_i64(slash + 1, 0, &partition) < 0 || partition > INT32_MAX) {
		textbuf_printf(t, "bad partition number '%s'\n", slash + 1);
		return 400;
	}
	tp = ctl_topic_served(ctl, topic, (int32_t)strlen(topic));
	if (!tp || partition >= tp->nparts) {
		textbuf_printf(t, "no such topic or partition\n");
		return 404;
	}
	if ((owner = ctl_part_open_on(ctl, tp->id, (int32_t)partition)) < 0) {
		textbuf_printf(t, "partition %s-%lld is not held on this node: ask its leader's admin endpoint\n",
			       topic, (long long)partition);
		return 404;
	}
	*partition_out = partition;
	*tp_out = tp;
	*owner_out = owner;
	return 0;
}

unsigned console_records_start(struct ctl *ctl, struct broker *b, const char *path,
			       const struct console_records_args *args, console_done done, void *cookie,
			       struct console_call **call, struct textbuf *t)
{
	const struct md_topic *tp;
	struct console_call *c;
	int64_t partition, offset = -1, ts = -1, limit = CONSOLE_RECORDS_DEFAULT;
	int32_t owner;
	char topic[256];
	struct part_proxy px;
	unsigned st;

	(void)b;
	if (args->offset && parse_i64(args->offset, 0, &offset) < 0) {
		textbuf_printf(t, "bad offset '%s': a record offset, 0 or more\n", args->offset);
		return 400;
	}
	if (args->timestamp && parse_i64(args->timestamp, 0, &ts) < 0) {
		textbuf_printf(t, "bad timestamp '%s': milliseconds since the epoch\n", args->timestamp);
		return 400;
	}
	if (args->offset && args->timestamp) {
		textbuf_printf(t, "give offset or timestamp, not both\n");
		return 400;
	}
	if (args->limit && (parse_i64(args->limit, 1, &limit) < 0 || limit > CONSOLE_RECORDS_MAX)) {
		textbuf_printf(t, "bad limit '%s': 1 to %d records a page\n", args->limit, CONSOLE_RECORDS_MAX);
		return 400;
	}
	if (args->order && strcmp(args->order, "newest") && strcmp(args->order, "oldest")) {
		textbuf_printf(t, "bad order '%s': newest or oldest\n", args->order);
		return 400;
	}
	if (args->order && !strcmp(args->order, "newest") && args->timestamp) {
		textbuf_printf(t, "order=newest pages back from an offset (or the end), not from a timestamp\n");
		return 400;
	}
	if ((st = locate(ctl, path, topic, &partition, &tp, &owner, t)) != 0)
		return st;
	if (!(c = calloc(1, sizeof(*c))) || !(c->buf = malloc(PART_PEEK_MAX))) {
		free(c);
		textbuf_printf(t, "out of memory\n");
		return 503;
	}
	snprintf(c->topic, sizeof(c->topic), "%s", topic);
	c->partition = (int32_t)partition;
	c->limit = (int)limit;
	c->done = done;
	c->cookie = cookie;
	c->end = -1;
	c->newest = args->order ? !strcmp(args->order, "newest") : !args->offset && !args->timestamp;
	if (c->newest && offset >= 0) {
		/* the page ends at the offset asked, inclusive */
		c->end = offset + 1;
		c->want = offset + 1 > limit ? offset + 1 - limit : 0;
	} else {
		c->want = offset >= 0 ? offset : 0;
	}
	c->req.offset = c->want;
	c->req.ts = ts;
	c->req.back = c->newest && offset < 0 ? limit : 0;   /* the newest: the owner knows where it ends */
	c->req.buf = c->buf;
	c->req.cap = PART_PEEK_MAX;
	c->req.done = peeked;
	c->req.cookie = c;
	part_proxy_peek(ctl_part_proxy(ctl, &px), owner, part_addr_of(tp->id, (int32_t)partition), &c->req);
	*call = c;
	return 0;
}

/* ---- producers --------------------------------------------------------------- */

static int by_last_append(const void *a, const void *b)
{
	const struct part_producer_view *x = a, *y = b;

	return x->last_ms < y->last_ms ? 1 : x->last_ms > y->last_ms ? -1 : 0;
}

static void producers_answered(void *self, void *cookie)
{
	struct console_call *c = cookie;
	struct part_producers_req *q = &c->preq;
	struct textbuf t = { 0 };
	unsigned status = 200;

	(void)self;
	if (!c->done) {
		free(c->views);
		free(c);
		return;
	}
	if (q->err) {
		textbuf_printf(&t, "the partition is not held on this node (or was deleted): ask its leader's admin "
			       "endpoint\n");
		status = 404;
	} else {
		qsort(c->views, q->n, sizeof(*c->views), by_last_append);
		textbuf_printf(&t, "{\"topic\": \"");
		textbuf_escaped(&t, c->topic);
		textbuf_printf(&t, "\", \"partition\": %d, \"total\": %u, \"producers\": [", c->partition, q->total);
		for (uint32_t i = 0; i < q->n; i++) {
			const struct part_producer_view *v = &c->views[i];

			textbuf_printf(&t, "%s\n  {\"producer_id\": %lld, \"epoch\": %d, \"last_sequence\": %d, "
				       "\"last_offset\": %lld, \"last_append_ms\": %lld, \"transaction_first_offset\": %lld}",
				       i ? "," : "", (long long)v->pid, v->epoch, v->last_seq, (long long)v->last_offset,
				       (long long)v->last_ms, (long long)v->txn_first);
		}
		textbuf_printf(&t, "\n]}\n");
	}
	c->done(c->cookie, status, &t);
	textbuf_fini(&t);
	free(c->views);
	free(c);
}

unsigned console_producers_start(struct ctl *ctl, struct broker *b, const char *path, console_done done,
				 void *cookie, struct console_call **call, struct textbuf *t)
{
	const struct md_topic *tp;
	struct console_call *c;
	int64_t partition;
	int32_t owner;
	char topic[256];
	struct part_proxy px;
	unsigned st;

	(void)b;
	if ((st = locate(ctl, path, topic, &partition, &tp, &owner, t)) != 0)
		return st;
	if (!(c = calloc(1, sizeof(*c))) ||
	    !(c->views = calloc(PART_PRODUCERS_MAX, sizeof(*c->views)))) {
		free(c);
		textbuf_printf(t, "out of memory\n");
		return 503;
	}
	snprintf(c->topic, sizeof(c->topic), "%s", topic);
	c->partition = (int32_t)partition;
	c->done = done;
	c->cookie = cookie;
	c->preq = (struct part_producers_req){ .out = c->views, .cap = PART_PRODUCERS_MAX,
					       .done = producers_answered, .cookie = c };
	part_proxy_producers(ctl_part_proxy(ctl, &px), owner, part_addr_of(tp->id, (int32_t)partition), &c->preq);
	*call = c;
	return 0;
}
