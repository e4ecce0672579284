/* tests/unit/helpers.h — shared by the storage suites: temporary
 * directories on the work disk and batch construction. */
#ifndef SLUICE_TEST_HELPERS_H
#define SLUICE_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/batch.h"

/* A fresh directory under $TMPDIR (or /var/tmp: a real disk that supports
 * O_DIRECT, unlike some tmpfs). */
static inline char *test_tmpdir(void)
{
	const char *base = getenv("SLUICE_TEST_DIR");
	char *p;

	if (!base)
		base = "/var/tmp";
	cr_assert(asprintf(&p, "%s/sluice-test-XXXXXX", base) > 0);
	cr_assert(mkdtemp(p), "mkdtemp %s", p);
	return p;
}

static inline void test_rmrf(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* A batch of n records whose values are "v<seq>-<i>" padded to vlen and
 * keys "k<i % nkeys>" (NULL keys if nkeys == 0). Returns its size. */
static inline uint32_t test_batch(uint8_t *buf, size_t cap, int64_t seq, int n, int vlen,
				  int nkeys, int64_t ts)
{
	struct batch_builder bb;
	char key[32];
	static char val[2 << 20];

	batch_builder_init(&bb, buf, cap, ts);
	for (int i = 0; i < n; i++) {
		int kl = snprintf(key, sizeof(key), "k%d", nkeys ? (int)((seq + i) % nkeys) : 0);
		int l = snprintf(val, sizeof(val), "v%lld-%d", (long long)seq, i);

		while (l < vlen && l < (int)sizeof(val))
			{ val[l] = (char)('a' + (l % 26)); l++; }
		cr_assert_eq(batch_builder_add(&bb, i, ts + i, nkeys ? key : NULL, kl, val, l,
					       NULL, 0, 0), 0);
	}
	ssize_t sz = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(sz, 0);
	return (uint32_t)sz;
}

#endif
