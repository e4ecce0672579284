/* docs/config_doc.c — `make docs`: rewrite the configuration table of
 * docs/configuration.md, between its config-table markers, from the table in
 * control/config.c (config_doc_markdown), so the page cannot drift from the
 * code (STYLE 27; tests/unit/test_config.c checks it). With --properties it
 * writes the same table as the commented sluiced.properties the Debian
 * package installs in /etc/sluice (config_doc_properties; packaging/).
 *
 * Thread: a program of its own, one thread; not part of the broker.
 * Owns: the page's text while it rewrites it.
 * Errors: exit 0 when the page was written (or already matched), 1 when the
 * page cannot be read or written or has no markers, 2 on bad usage.
 *
 * Usage: build/config-doc [PAGE]   (default docs/configuration.md)
 *        build/config-doc --properties OUT [KEY=VALUE]...
 *            (each KEY=VALUE written uncommented: the package's own values)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"

#define BEGIN "<!-- config-table:begin -->\n"
#define END   "<!-- config-table:end -->"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;

	*len = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (*len + 65536 + 1 > cap) {
			char *n = realloc(buf, cap = cap * 2 + 65536 + 1);

			if (!n) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = n;
		}
		size_t r = fread(buf + *len, 1, cap - *len - 1, f);

		*len += r;
		if (r == 0)
			break;
	}
	buf[*len] = 0;
	fclose(f);
	return buf;
}

static const char properties_head[] =
	"# sluiced.properties — the broker's configuration (sluiced --config FILE;\n"
	"# the sluiced service reads /etc/sluice/sluiced.properties).\n"
	"#\n"
	"# Kafka's properties format: key=value, # comments. Every key Sluice knows is\n"
	"# listed below with what it does and, commented out, its default: uncomment a\n"
	"# line to change it. The lines not commented out are the package's choices.\n"
	"# The same table as a page: /usr/share/doc/sluice/configuration.md.\n"
	"#\n"
	"# A change takes effect at the next start: systemctl restart sluiced.\n"
	"# systemctl reload sluiced (SIGHUP) reads again only the TLS certificates,\n"
	"# keys and trusted CAs and the admin endpoint's tokens (docs/install.md).\n"
	"#\n"
	"# Written by config-doc --properties from the key table (control/config.c).\n";

/* --properties OUT [KEY=VALUE]...: 0, or 1 when OUT cannot be written. */
static int write_properties(const char *path, const char *const *set, int nset)
{
	char tmp[4096];
	FILE *o;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	o = fopen(tmp, "w");
	if (!o) {
		perror(tmp);
		return 1;
	}
	fputs(properties_head, o);
	config_doc_properties(o, set, nset);
	if (ferror(o) || fclose(o) != 0 || rename(tmp, path) != 0) {
		perror(tmp);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "docs/configuration.md";
	char *gen = NULL, *page;
	size_t glen = 0, plen;

	if (argc > 2 && !strcmp(argv[1], "--properties")) {
		for (int i = 3; i < argc; i++)
			if (!strchr(argv[i], '=')) {
				fprintf(stderr, "config-doc: %s: expected KEY=VALUE\n", argv[i]);
				return 2;
			}
		return write_properties(argv[2], (const char *const *)argv + 3, argc - 3);
	}
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: config-doc [PAGE]\n"
				"       config-doc --properties OUT [KEY=VALUE]...\n");
		return 2;
	}
	page = slurp(path, &plen);
	if (!page) {
		perror(path);
		return 1;
	}
	char *b = strstr(page, BEGIN), *e = b ? strstr(b, END) : NULL;

	if (!b || !e) {
		fprintf(stderr, "%s: no config-table markers\n", path);
		free(page);
		return 1;
	}
	b += strlen(BEGIN);

	FILE *m = open_memstream(&gen, &glen);

	if (!m)
		return 1;
	config_doc_markdown(m);
	fclose(m);
	if ((size_t)(e - b) == glen && !memcmp(b, gen, glen)) {
		free(gen);
		free(page);
		return 0;
	}

	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *o = fopen(tmp, "w");

	if (!o || fwrite(page, 1, b - page, o) != (size_t)(b - page) ||
	    fwrite(gen, 1, glen, o) != glen ||
	    fwrite(e, 1, plen - (e - page), o) != plen - (size_t)(e - page) ||
	    fclose(o) != 0 || rename(tmp, path) != 0) {
		perror(tmp);
		return 1;
	}
	fprintf(stderr, "config-doc: %s rewritten\n", path);
	free(gen);
	free(page);
	return 0;
}
