/* tests/unit/test_meta_image.c — a broker-only node's metadata image on
 * disk (control/meta_image.h): written and read back at its index; a
 * missing file is -ENOENT; a damaged, truncated, foreign or other-version
 * file is -EPROTO with a reason; a write replaces the file whole and
 * leaves no temporary behind. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "control/meta_image.h"
#include "tests/unit/dir_fixture.h"
#include "tests/unit/helpers.h"

TestSuite(meta_image, .init = dir_setup, .fini = dir_teardown, .timeout = 60);

static void poke(const char *path, off_t at, uint8_t x)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= x;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static int load(const char *path, uint64_t *index, char *why)
{
	void *snap = NULL;
	size_t len = 0;
	int rc;

	why[0] = 0;
	rc = meta_image_load(path, index, &snap, &len, why, 300);
	free(snap);
	return rc;
}

Test(meta_image, an_image_is_read_back_and_a_bad_one_is_refused_with_a_reason)
{
	char path[600], tmp[700], why[300];
	const char snap[] = "SLMETA01 and the records of an image";
	void *got = NULL;
	size_t len = 0;
	uint64_t index = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, META_IMAGE_FILE);
	cr_assert_eq(load(path, &index, why), -ENOENT);

	cr_assert_eq(meta_image_save(path, 1234, snap, sizeof(snap)), 0);
	cr_assert_eq(meta_image_load(path, &index, &got, &len, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(index, 1234);
	cr_assert_eq(len, sizeof(snap));
	cr_assert_eq(memcmp(got, snap, len), 0);
	free(got);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	cr_assert_neq(access(tmp, F_OK), 0, "the temporary file is gone");

	/* a later write replaces it */
	cr_assert_eq(meta_image_save(path, 1300, "x", 1), 0);
	cr_assert_eq(load(path, &index, why), 0);
	cr_assert_eq(index, 1300);

	cr_assert_eq(meta_image_save(path, 1234, snap, sizeof(snap)), 0);
	poke(path, 40, 0x01);                    /* a byte of the snapshot */
	cr_assert_eq(load(path, &index, why), -EPROTO);
	cr_assert(strstr(why, "CRC"), "%s", why);

	cr_assert_eq(meta_image_save(path, 1234, snap, sizeof(snap)), 0);
	poke(path, 16, 0x01);                    /* the index */
	cr_assert_eq(load(path, &index, why), -EPROTO);
	cr_assert(strstr(why, "CRC"), "%s", why);

	cr_assert_eq(meta_image_save(path, 1234, snap, sizeof(snap)), 0);
	poke(path, 8, 0x02);                     /* the version: 3 */
	cr_assert_eq(load(path, &index, why), -EPROTO);
	cr_assert(strstr(why, "version 3"), "%s", why);

	cr_assert_eq(meta_image_save(path, 1234, snap, sizeof(snap)), 0);
	cr_assert_eq(truncate(path, 40), 0);
	cr_assert_eq(load(path, &index, why), -EPROTO);
	cr_assert(strstr(why, "header says"), "%s", why);

	cr_assert_eq(truncate(path, 5), 0);
	cr_assert_eq(load(path, &index, why), -EPROTO);
	cr_assert(strstr(why, "not a metadata image"), "%s", why);
}
