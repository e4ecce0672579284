/* tests/integration/plain_check.h — for the plain (non-Criterion) test
 * programs, which start an EAL once per process: "ok - ..." / "FAIL - ..."
 * result lines with pass/fail counters, and a shell command with a note
 * when it fails. Header-only (static functions): one copy per program.
 *
 * Thread: check() may be called from several threads (its counters are
 * atomic); sh() from any. Output is line-buffered stdout.
 */
#ifndef SLUICE_PLAIN_CHECK_H
#define SLUICE_PLAIN_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int passed, failed;

/* One result line; counts it. */
static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	__atomic_add_fetch(ok ? &passed : &failed, 1, __ATOMIC_RELAXED);
}

/* system() of the formatted command; its status (a note when not 0). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(stdout);
	r = system(cmd);
	if (r != 0)
		printf("note: '%s' exited %d\n", cmd, r);
	return r;
}

#endif
