/* control/sluicectl_out.c — aligned tables that fit 80 columns, a streaming
 * JSON writer, and small formatting helpers; see sluicectl.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define TABLE_WIDTH 80

static char *xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d) {
		fprintf(stderr, "sluicectl: out of memory\n");
		exit(EXIT_KAFKA);
	}
	return d;
}

void table_init(struct table *t, int ncols, const char **heads)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols;
	t->heads = heads;
	t->right = calloc((size_t)ncols, sizeof *t->right);
}

void table_right(struct table *t, int col)
{
	t->right[col] = true;
}

void table_add(struct table *t, ...)
{
	va_list ap;

	if (t->rows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->cells = realloc(t->cells, (size_t)t->cap * (size_t)t->ncols * sizeof *t->cells);
		if (!t->cells) {
			fprintf(stderr, "sluicectl: out of memory\n");
			exit(EXIT_KAFKA);
		}
	}
	va_start(ap, t);
	for (int i = 0; i < t->ncols; i++)
		t->cells[t->rows * t->ncols + i] = xstrdup(va_arg(ap, const char *));
	va_end(ap);
	t->rows++;
}

static void cell_print(const char *s, int w, bool right, bool last)
{
	int n = (int)strlen(s);

	if (n > w) {   /* cut, marking the cut */
		printf("%.*s~", w - 1, s);
	} else if (right) {
		printf("%*s", w, s);
	} else if (last) {
		printf("%s", s);
	} else {
		printf("%-*s", w, s);
	}
}

static int sort_ncols;

static int row_cmp(const void *a, const void *b)
{
	char *const *x = a, *const *y = b;
	int r = strcmp(x[0], y[0]);

	if (r || sort_ncols < 2)
		return r;
	return strtoll(x[1], NULL, 10) < strtoll(y[1], NULL, 10) ? -1 :
	       strtoll(x[1], NULL, 10) > strtoll(y[1], NULL, 10);
}

void table_sort(struct table *t)
{
	sort_ncols = t->ncols;
	if (t->rows > 1)
		qsort(t->cells, (size_t)t->rows, (size_t)t->ncols * sizeof *t->cells, row_cmp);
}

void table_print(struct table *t)
{
	int *w = calloc((size_t)t->ncols, sizeof *w);
	int total;

	for (int c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->heads[c]);
		for (int r = 0; r < t->rows; r++) {
			int n = (int)strlen(t->cells[r * t->ncols + c]);

			if (n > w[c])
				w[c] = n;
		}
	}
	/* Narrow the widest column until the row fits; never below 8. */
	for (;;) {
		int widest = 0;

		total = 0;
		for (int c = 0; c < t->ncols; c++) {
			total += w[c] + (c ? 2 : 0);
			if (w[c] > w[widest])
				widest = c;
		}
		if (total <= TABLE_WIDTH || w[widest] <= 8)
			break;
		w[widest] -= total - TABLE_WIDTH < w[widest] - 8 ? total - TABLE_WIDTH : w[widest] - 8;
	}
	for (int r = -1; r < t->rows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *s = r < 0 ? t->heads[c] : t->cells[r * t->ncols + c];

			if (c)
				fputs("  ", stdout);
			cell_print(s, w[c], t->right[c], c == t->ncols - 1);
		}
		putchar('\n');
	}
	free(w);
}

void table_fini(struct table *t)
{
	for (int i = 0; i < t->rows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->right);
	memset(t, 0, sizeof *t);
}

/* ---- JSON ------------------------------------------------------------- */

/* Nesting: first[depth] is true until the container has a member. */
static bool jfirst[64] = { true };
static int jdepth;

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static size_t utf8_len(const uint8_t *p, size_t left)
{
	size_t len;
	uint32_t cp;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > left)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;   /* overlong, a surrogate, or beyond Unicode */
	return len;
}

static void jstring(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", stdout);
		else if (ch == '\t')
			fputs("\\t", stdout);
		else if (ch == '\r')
			fputs("\\r", stdout);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else if (ch < 0x80)
			putchar(ch);
		else {
			size_t len = utf8_len((const uint8_t *)s + i, n - i);

			if (len) {   /* a whole, valid UTF-8 sequence passes through */
				fwrite(s + i, 1, len, stdout);
				i += len - 1;
			} else {
				fputs("\\ufffd", stdout);   /* not UTF-8: the replacement character */
			}
		}
	}
	putchar('"');
}

static void jkey(const char *key)
{
	if (!jfirst[jdepth])
		putchar(',');
	jfirst[jdepth] = false;
	if (key) {
		jstring(key, strlen(key));
		putchar(':');
	}
}

void json_obj_begin(const char *key)
{
	jkey(key);
	putchar('{');
	jfirst[++jdepth] = true;
}

void json_obj_end(void)
{
	putchar('}');
	jdepth--;
}

void json_arr_begin(const char *key)
{
	jkey(key);
	putchar('[');
	jfirst[++jdepth] = true;
}

void json_arr_end(void)
{
	putchar(']');
	jdepth--;
}

void json_str(const char *key, const char *v)
{
	jkey(key);
	if (v)
		jstring(v, strlen(v));
	else
		fputs("null", stdout);
}

void json_strn(const char *key, const char *v, int32_t len)
{
	jkey(key);
	if (len >= 0)
		jstring(v, (size_t)len);
	else
		fputs("null", stdout);
}

void json_int(const char *key, int64_t v)
{
	jkey(key);
	printf("%lld", (long long)v);
}

void json_num(const char *key, double v)
{
	jkey(key);
	if (isnan(v) || isinf(v))
		fputs("null", stdout);
	else
		printf("%.6g", v);
}

void json_null(const char *key)
{
	jkey(key);
	fputs("null", stdout);
}

void json_int_or_null(const char *key, int64_t v)
{
	if (v >= 0)
		json_int(key, v);
	else
		json_null(key);
}

void json_bool(const char *key, bool v)
{
	jkey(key);
	fputs(v ? "true" : "false", stdout);
}

void json_end(void)
{
	putchar('\n');
	jdepth = 0;
	jfirst[0] = true;
}

/* ---- helpers ---------------------------------------------------------- */

static char rot[16][1024];
static int rot_i;

const char *fmt(const char *f, ...)
{
	char *b = rot[rot_i++ % 16];
	va_list ap;

	va_start(ap, f);
	vsnprintf(b, sizeof rot[0], f, ap);
	va_end(ap);
	return b;
}

const char *kstr(struct kafka_str s)
{
	if (s.len < 0)
		return "";
	return fmt("%.*s", (int)s.len, s.ptr);
}

void progress(const char *label, int64_t done, int64_t total)
{
	if (!isatty(2))
		return;
	fprintf(stderr, "\r%s %lld/%lld%s", label, (long long)done, (long long)total,
		done >= total ? "\n" : "");
}
