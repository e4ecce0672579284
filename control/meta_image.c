/* control/meta_image.c — a broker-only node's metadata image on disk
 * (meta_image.h). @thread ctl */
#include "control/meta_image.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <isa-l/crc.h>

#include "control/cutil.h"

#define MAGIC "SLMIMAGE"
#define HDR 32                       /* magic, version, crc, index, length */

/* CRC-32C (isa-l's, Kafka's convention) of the index, the length and the
 * snapshot. */
static uint32_t crc_of(const uint8_t *hdr, const void *snap, size_t len)
{
	uint32_t crc = crc32_iscsi((unsigned char *)hdr + 16, 16, 0xffffffffu);

	return crc32_iscsi((unsigned char *)snap, (int)len, crc) ^ 0xffffffffu;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -(n < 0 ? errno : EIO);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int meta_image_save(const char *path, uint64_t index, const void *snap, size_t len)
{
	uint8_t hdr[HDR];
	char tmp[4200], dir[4200];
	int fd, dfd, rc;

	if (len > INT32_MAX - 16)
		return -EFBIG;
	memcpy(hdr, MAGIC, 8);
	le32_store(hdr + 8, META_IMAGE_VERSION);
	le64_store(hdr + 16, index);
	le64_store(hdr + 24, len);
	le32_store(hdr + 12, crc_of(hdr, snap, len));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return -errno;
	rc = write_all(fd, hdr, HDR);
	if (!rc)
		rc = write_all(fd, snap, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	if ((dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	rc = fsync(dfd) < 0 ? -errno : 0;
	close(dfd);
	return rc;
}

int meta_image_load(const char *path, uint64_t *index, void **snap, size_t *len, char *err, size_t errlen)
{
	uint8_t hdr[HDR];
	struct stat st;
	uint64_t n;
	void *buf;
	int fd;

	*snap = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || pread(fd, hdr, HDR, 0) != HDR || memcmp(hdr, MAGIC, 8)) {
		close(fd);
		snprintf(err, errlen, "not a metadata image (too short, or another format)");
		return -EPROTO;
	}
	if (le32_load(hdr + 8) != META_IMAGE_VERSION) {
		close(fd);
		snprintf(err, errlen, "version %u, which this version (%d) does not read", le32_load(hdr + 8),
			 META_IMAGE_VERSION);
		return -EPROTO;
	}
	n = le64_load(hdr + 24);
	if (n > INT32_MAX - 16 || (uint64_t)st.st_size != HDR + n) {
		close(fd);
		snprintf(err, errlen, "%lld bytes where its header says %llu", (long long)st.st_size,
			 (unsigned long long)(HDR + n));
		return -EPROTO;
	}
	if (!(buf = malloc(n ? n : 1))) {
		close(fd);
		return -ENOMEM;
	}
	if (pread(fd, buf, n, HDR) != (ssize_t)n) {
		close(fd);
		free(buf);
		snprintf(err, errlen, "cannot read it whole");
		return -EPROTO;
	}
	close(fd);
	if (crc_of(hdr, buf, n) != le32_load(hdr + 12)) {
		free(buf);
		snprintf(err, errlen, "its CRC does not match (damaged)");
		return -EPROTO;
	}
	*index = le64_load(hdr + 16);
	*snap = buf;
	*len = n;
	return 0;
}
