/* storage/slog.h — the broker's log: one line per event, with a level, on
 * stderr. Under systemd stderr is the journal, which adds the time, the
 * unit and the process; Sluice keeps no log files of its own.
 *
 * A line reads "sluiced: TEXT" on a terminal or a file, with the level
 * named for what needs a look ("sluiced: warning: TEXT", "sluiced: error:
 * TEXT", "sluiced: fatal: TEXT"); when stderr is the journal (systemd sets
 * $JOURNAL_STREAM to its device and inode) the line starts with the
 * syslog priority instead, "<4>sluiced: TEXT", which journald takes off and
 * stores as the entry's PRIORITY (`journalctl -u sluiced -p warning`).
 *
 * Each line goes out in one write(2) of at most SLOG_LINE_MAX bytes (a
 * longer one is cut, "..." at its end), so lines from several threads never
 * interleave. No allocation, no lock: callable from any thread, the
 * shards' included (on the data path only where check-style allows it: an
 * event, not a record).
 *
 * The lowest layer's, so that storage/, dataplane/ and control/ all log
 * the same way.
 */
#ifndef SLUICE_SLOG_H
#define SLUICE_SLOG_H

#include <stdarg.h>

/* syslog's priorities (RFC 5424), the journal's PRIORITY */
enum slog_level {
	SLOG_CRIT = 2,     /* the node halts: "fatal" */
	SLOG_ERR = 3,      /* something failed and was not done */
	SLOG_WARN = 4,     /* something failed and was handled, or a setting that will hurt */
	SLOG_NOTICE = 5,   /* a state change an operator wants to see (leaders, fencing) */
	SLOG_INFO = 6,     /* start-up, shut-down, reports asked for */
};

#define SLOG_LINE_MAX 2048

/* Call once in main, before other threads start: looks whether stderr is
 * the journal. Without it lines read as on a terminal. */
void slog_init(const char *prog);

/* One log line: FMT without the program's prefix and without a newline. */
void slog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3))); /* style: allow */
void vslog(int level, const char *fmt, va_list ap); /* style: allow */

/* The level's word off the journal: "fatal: ", "error: ", "warning: " or "". */
const char *slog_level_word(int level);

#endif
