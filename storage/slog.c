/* storage/slog.c — one log line per event, with a level (slog.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/slog.h"

/* written once by slog_init() before threads start, read only after */
static int journal;
static const char *prog_name = "sluiced";

void slog_init(const char *prog)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (prog)
		prog_name = prog;
	/* $JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected;
	 * stderr may have been redirected since (a shell in between): compare */
	journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
		  (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

const char *slog_level_word(int level)
{
	return level <= SLOG_CRIT ? "fatal: " : level == SLOG_ERR ? "error: " : level == SLOG_WARN ? "warning: " : "";
}

void vslog(int level, const char *fmt, va_list ap) /* style: allow the definition */
{
	char line[SLOG_LINE_MAX];
	size_t n;
	int k;

	if (journal)
		k = snprintf(line, sizeof(line), "<%d>%s: ", level < 0 ? 0 : level > 7 ? 7 : level, prog_name);
	else
		k = snprintf(line, sizeof(line), "%s: %s", prog_name, slog_level_word(level));
	n = k < 0 ? 0 : (size_t)k;
	k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (k >= 0 && n + (size_t)k < sizeof(line) - 1) {
		n += (size_t)k;
	} else if (k >= 0) {
		n = sizeof(line) - 5;
		memcpy(line + n, "...", 3);
		n += 3;
	}
	while (n > 0 && line[n - 1] == '\n')   /* one newline, ours */
		n--;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to say it */
	}
}

void slog(int level, const char *fmt, ...) /* style: allow the definition */
{
	va_list ap;

	va_start(ap, fmt);
	vslog(level, fmt, ap); /* style: allow the definition */
	va_end(ap);
}
