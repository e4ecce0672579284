/* control/config_file.c — the broker's properties file (Kafka's format:
 * key=value, key:value or key value, comments, continuations, escapes)
 * read into a struct config, each key through config_set with the source
 * "FILE:LINE". The keys, their parsing and validation are config.c's.
 * See config.h.
 *
 * @thread control, at start-up (blocking file reads: never on a shard).
 * Errors: 0 or -errno, as config.h says; err names the file and line. */
#include "control/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Java properties escapes, in place: \t \n \r \f \uXXXX, \x -> x. */
static int unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (*r != '\\') {
			*w++ = *r;
			continue;
		}
		r++;
		switch (*r) {
		case 0: r--; break;   /* lone trailing backslash: drop */
		case 't': *w++ = '\t'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 'f': *w++ = '\f'; break;
		case 'u': {
			unsigned cp = 0;

			for (int j = 1; j <= 4; j++) {
				char h = r[j];

				if (!isxdigit((unsigned char)h))
					return -EINVAL;
				cp = cp * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
			}
			r += 4;
			if (cp < 0x80) {
				*w++ = (char)cp;
			} else if (cp < 0x800) {
				*w++ = (char)(0xc0 | (cp >> 6));
				*w++ = (char)(0x80 | (cp & 0x3f));
			} else {   /* \uXXXX is 6 bytes of input, at most 3 of output */
				*w++ = (char)(0xe0 | (cp >> 12));
				*w++ = (char)(0x80 | ((cp >> 6) & 0x3f));
				*w++ = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default: *w++ = *r; break;
		}
	}
	*w = 0;
	return 0;
}

/* Ends with an odd number of backslashes: continues on the next line. */
static int line_continues(const char *s, size_t n)
{
	size_t bs = 0;

	while (bs < n && s[n - 1 - bs] == '\\')
		bs++;
	return bs & 1;
}

/* One logical line (already joined): split into key and value at the first
 * unescaped '=', ':' or whitespace, then unescape both. */
static int property_apply(struct config *c, char *line, const char *source, char *err, size_t errlen)
{
	char *p = line, *key, *val;

	while (isspace((unsigned char)*p))
		p++;
	if (!*p || *p == '#' || *p == '!')
		return 0;
	key = p;
	while (*p && *p != '=' && *p != ':' && !isspace((unsigned char)*p)) {
		if (*p == '\\' && p[1])
			p++;
		p++;
	}
	val = p;
	if (*p) {
		int ws = isspace((unsigned char)*p);

		*p++ = 0;
		val = p;
		if (ws) {
			while (isspace((unsigned char)*val))
				val++;
			if (*val == '=' || *val == ':')
				val++;
		}
	}
	if (unescape(key) < 0 || unescape(val) < 0) {
		if (err && errlen)
			snprintf(err, errlen, "%s: malformed \\uXXXX escape", source);
		return -EINVAL;
	}
	if (!*key) {
		if (err && errlen)
			snprintf(err, errlen, "%s: missing key before '='", source);
		return -EINVAL;
	}
	return config_set(c, key, val, source, err, errlen);
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *logical = NULL, source[4200];
	size_t cap = 0, llen = 0;
	ssize_t n;
	int lineno = 0, start = 0, rc = 0, cont = 0;

	if (!f) {
		rc = -errno;
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	while (1) {
		n = getline(&line, &cap, f);
		if (n < 0) {
			if (ferror(f)) {
				rc = -EIO;
				if (err && errlen)
					snprintf(err, errlen, "%s: read error", path);
				break;
			}
			if (!cont)
				break;
			n = 0;   /* a continuation on the last line: end it here */
			line = line ? line : strdup("");
			if (!line) {
				rc = -ENOMEM;
				break;
			}
			line[0] = 0;
		} else {
			lineno++;
		}
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		char *seg = line;
		size_t slen = (size_t)n;

		if (cont) {
			/* leading whitespace of a continuation line is dropped */
			while (slen && isspace((unsigned char)*seg)) {
				seg++;
				slen--;
			}
		} else {
			const char *q = seg;

			while (isspace((unsigned char)*q))
				q++;
			if (*q == '#' || *q == '!' || !*q)
				continue;   /* comments never continue */
			start = lineno;
			llen = 0;
		}
		int more = line_continues(seg, slen) && !feof(f);

		if (line_continues(seg, slen))
			slen--;   /* drop the continuation backslash */
		char *nl = realloc(logical, llen + slen + 1);

		if (!nl) {
			rc = -ENOMEM;
			break;
		}
		logical = nl;
		memcpy(logical + llen, seg, slen);
		llen += slen;
		logical[llen] = 0;
		if (more) {
			cont = 1;
			continue;
		}
		cont = 0;
		snprintf(source, sizeof(source), "%s:%d", path, start);
		if ((rc = property_apply(c, logical, source, err, errlen)) < 0)
			break;
		if (n == 0 && feof(f))
			break;
	}
	free(line);
	free(logical);
	fclose(f);
	return rc;
}
