/* ui/embed.c — writes the C file that compiles the web console's files
 * into sluiced (control/console_assets.h): each argument URL=FILE becomes
 * an entry served at URL, its Content-Type from FILE's extension.
 *
 *   embed OUT.c /ui/index.html=ui/src/index.html ...
 *
 * A build tool: exits 1 naming the file it could not read or write. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_of(const char *file)
{
	static const char *const map[][2] = {
		{ ".html", "text/html; charset=utf-8" },      { ".js", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },        { ".svg", "image/svg+xml" },
		{ ".json", "application/json" },              { ".png", "image/png" },
	};
	const char *dot = strrchr(file, '.');

	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(dot, map[i][0]))
			return map[i][1];
	return "application/octet-stream";
}

int main(int argc, char **argv)
{
	FILE *out;

	if (argc < 3) {
		fprintf(stderr, "usage: %s OUT.c URL=FILE...\n", argv[0]);
		return 1;
	}
	if (!(out = fopen(argv[1], "w"))) {
		fprintf(stderr, "embed: cannot write %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	fprintf(out, "/* written by ui/embed.c from ui/: do not edit */\n#include \"control/console_assets.h\"\n\n");
	for (int i = 2; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		FILE *in;
		int c, n = 0;

		if (!eq) {
			fprintf(stderr, "embed: '%s' is not URL=FILE\n", argv[i]);
			return 1;
		}
		if (!(in = fopen(eq + 1, "rb"))) {
			fprintf(stderr, "embed: cannot read %s: %s (run `cd ui && npm ci` for the chart library)\n",
				eq + 1, strerror(errno));
			return 1;
		}
		fprintf(out, "static const unsigned char a%d[] = {", i);
		while ((c = getc(in)) != EOF)
			fprintf(out, "%s%d,", n++ % 24 ? "" : "\n", c);
		fprintf(out, "0\n};\n");
		fclose(in);
	}
	fprintf(out, "\nconst struct console_asset console_assets[] = {\n");
	for (int i = 2; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		*eq = 0;
		fprintf(out, "\t{ \"%s\", \"%s\", a%d, sizeof(a%d) - 1 },\n", argv[i], type_of(eq + 1), i, i);
	}
	fprintf(out, "\t{ 0 }\n};\n");
	if (fclose(out) != 0) {
		fprintf(stderr, "embed: cannot write %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return 0;
}
