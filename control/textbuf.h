/* control/textbuf.h — a growable text buffer for the admin endpoint's
 * responses (Prometheus text, JSON).
 *
 * Thread: whoever owns it (the control thread). Owns: its memory (heap,
 * textbuf_fini frees it). Errors: a failed allocation sets `oom`, and
 * later appends are dropped; the caller checks oom once at the end.
 */
#ifndef SLUICE_TEXTBUF_H
#define SLUICE_TEXTBUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct textbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static inline void textbuf_fini(struct textbuf *t)
{
	free(t->p);
	memset(t, 0, sizeof(*t));
}

static inline int textbuf_reserve(struct textbuf *t, size_t more)
{
	size_t cap;
	char *np;

	if (t->oom)
		return -1;
	if (t->len + more + 1 <= t->cap)
		return 0;
	cap = t->cap ? t->cap : 4096;
	while (cap < t->len + more + 1)
		cap *= 2;
	np = realloc(t->p, cap);
	if (!np) {
		t->oom = 1;
		return -1;
	}
	t->p = np;
	t->cap = cap;
	return 0;
}

__attribute__((format(printf, 2, 3)))
static inline void textbuf_printf(struct textbuf *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (textbuf_reserve(t, 128) < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= t->cap - t->len) {
		if (textbuf_reserve(t, (size_t)n) < 0)
			return;
		va_start(ap, fmt);
		vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	}
	t->len += (size_t)n;
}

/* s as the inside of a JSON string or a Prometheus label value (both
 * escape backslash, double quote and newline; JSON also control bytes). */
static inline void textbuf_escaped(struct textbuf *t, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\' || c == '"')
			textbuf_printf(t, "\\%c", c);
		else if (c == '\n')
			textbuf_printf(t, "\\n");
		else if (c < 0x20)
			textbuf_printf(t, "\\u%04x", c);
		else {
			if (textbuf_reserve(t, 1) < 0)
				return;
			t->p[t->len++] = (char)c;
			t->p[t->len] = 0;
		}
	}
}

#endif
