/* control/config_print.c — the configuration table printed as documentation:
 * the markdown table of docs/configuration.md and the commented properties
 * file the package installs, both from config_key_at(). See config.h.
 * @thread any (reads only the constant key table) */
#include "control/config.h"

#include <string.h>

static void md_cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else
			fputc(*s, f);
	}
}

void config_doc_markdown(FILE *f)
{
	fputs("| Key | Type | Default | Description |\n", f);
	fputs("|---|---|---|---|\n", f);
	struct config_key_info ki, *k = &ki;

	for (int i = 0; config_key_at(i, k) == 0; i++) {
		fputs("| `", f);
		md_cell(f, k->name);
		fprintf(f, "` | %s | ", k->type_name);
		if (*k->def) {
			fputc('`', f);
			md_cell(f, k->def);
			fputc('`', f);
		} else {
			fputs("(empty)", f);
		}
		fputs(" | ", f);
		md_cell(f, k->doc);
		if (k->type == CONFIG_INT || k->type == CONFIG_LONG || k->type == CONFIG_ENUM) {
			fputs(" Allowed: ", f);
			md_cell(f, k->allowed);
			fputc('.', f);
		}
		if (k->alias)
			fprintf(f, " Alias: `%s`.", k->alias);
		if (k->topic)
			fprintf(f, " Topic-level: `%s`.", k->topic);
		fputs(" |\n", f);
	}
}

/* "# " and text wrapped at 78 columns. */
static void prop_comment(FILE *f, const char *text)
{
	const char *p = text;

	while (*p) {
		const char *end = p, *brk = NULL;

		while (*end && end - p < 76) {
			if (*end == ' ')
				brk = end;
			end++;
		}
		if (*end && brk)
			end = brk;
		fprintf(f, "# %.*s\n", (int)(end - p), p);
		p = end;
		while (*p == ' ')
			p++;
	}
}

void config_doc_properties(FILE *f, const char *const *set, int nset)
{
	struct config_key_info ki, *k = &ki;

	for (int i = 0; config_key_at(i, k) == 0; i++) {
		const char *mine = NULL;
		size_t nlen = strlen(k->name);

		for (int j = 0; j < nset; j++)
			if (!strncmp(set[j], k->name, nlen) && set[j][nlen] == '=')
				mine = set[j] + nlen + 1;
		fprintf(f, "\n# %s (%s", k->name, k->type_name);
		if (k->alias)
			fprintf(f, "; alias %s", k->alias);
		if (k->topic)
			fprintf(f, "; topic-level %s", k->topic);
		fputs(")\n", f);
		prop_comment(f, k->doc);
		fprintf(f, "# Allowed: %s.\n", k->allowed);
		if (mine)
			fprintf(f, "# (default: %s)\n%s=%s\n", *k->def ? k->def : "empty", k->name, mine);
		else
			fprintf(f, "#%s=%s\n", k->name, k->def);
	}
}
