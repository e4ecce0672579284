/* tests/unit/dir_fixture.h — the fixture of the suites whose every test
 * works in a fresh temporary directory of its own and nothing else
 * (test_meta_image.c, test_meta_parts.c, test_metalog.c):
 *
 *	TestSuite(name, .init = dir_setup, .fini = dir_teardown, ...);
 *
 * then `dir` is the test's directory, removed after it. Include it once,
 * in the suite's .c file. Thread: the test's. */
#ifndef SLUICE_TEST_DIR_FIXTURE_H
#define SLUICE_TEST_DIR_FIXTURE_H

#include <stdlib.h>

#include "tests/unit/helpers.h"

static char *dir;

static void dir_setup(void)
{
	dir = test_tmpdir();
}

static void dir_teardown(void)
{
	test_rmrf(dir);
	free(dir);
}

#endif
