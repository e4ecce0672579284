/* control/console_records.h — what the web console reads from a
 * partition's owner shard: a page of its records as JSON (GET
 * /v1/records/<topic>/<partition>), and its idempotent producers (GET
 * /v1/producers/<topic>/<partition>). Records are
 * read by the partition's owner shard through a typed message
 * (part_proxy_peek: one read on its read path, at most PART_PEEK_MAX bytes
 * of whole batches), decoded here (control/record_walk.h).
 *
 * Query: offset=N (from N, oldest first), timestamp=MS (from the first
 * record at or after it), or neither (the newest); order=newest|oldest
 * (newest: the page ends at the offset, or at the high watermark, and is
 * listed newest first); limit=N (1..CONSOLE_RECORDS_MAX, default 50).
 * Keys, values and header values are base64 (bytes as they are: the page
 * shows them as text, JSON or hex).
 *
 * Thread: ctl (@thread ctl). Owns: its calls until they answer (a call
 * whose connection went away is cancelled and freed when its answer
 * comes). Errors: an HTTP status with a message.
 */
#ifndef SLUICE_CONSOLE_RECORDS_H
#define SLUICE_CONSOLE_RECORDS_H

#include <stdint.h>

#define CONSOLE_RECORDS_MAX 500

struct broker;
struct ctl;
struct textbuf;
struct console_call;

struct console_records_args {
	const char *offset;           /* the query's values as given, NULL: absent */
	const char *timestamp;
	const char *order;
	const char *limit;
};

/* done(cookie, status, body): the answer, on this thread; body is the
 * callee's until done returns (the callee may take its buffer: t->p). */
typedef void (*console_done)(void *cookie, unsigned status, struct textbuf *body);

/* path: "<topic>/<partition>". 0: pending, *call set, done runs later
 * (unless console_call_cancel); else the HTTP status now, with the
 * message in t. */
unsigned console_records_start(struct ctl *ctl, struct broker *b, const char *path,
			       const struct console_records_args *args, console_done done, void *cookie,
			       struct console_call **call, struct textbuf *t);
/* GET /v1/producers/<topic>/<partition>: the partition's idempotent
 * producers as its owner shard's table has them (part_proxy_producers, at
 * most PART_PRODUCERS_MAX, the most recent first), as for records. */
unsigned console_producers_start(struct ctl *ctl, struct broker *b, const char *path, console_done done,
				 void *cookie, struct console_call **call, struct textbuf *t);
/* The connection is gone: done will not run; the call is freed when its
 * answer comes. */
void console_call_cancel(struct console_call *c);

#endif
