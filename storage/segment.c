/* storage/segment.c — a segment file: create (or take the prepared one),
 * seal with its index, free. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "storage/segment.h"

void segment_index_path(const struct segment *seg, char *buf, size_t n)
{
	snprintf(buf, n, "%020" PRId64 ".index", seg->base_offset);
}

int segment_create(int dirfd, int64_t base, int fd, const char *from, uint64_t alloc, uint64_t extent,
		   struct segment **out)
{
	struct segment *seg = calloc(1, sizeof(*seg)); /* style: allow once per segment */

	if (!seg)
		return -ENOMEM;
	snprintf(seg->name, sizeof(seg->name), "%020" PRId64 ".log", base);
	if (fd >= 0 && from) {
		/* the prepared next segment: give it its name */
		if (renameat(dirfd, from, dirfd, seg->name) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		fd = openat(dirfd, seg->name, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
		if (fd < 0) {
			int e = -errno;

			free(seg);
			return e;
		}
		alloc = 0;
	}
	seg->fd = fd;
	seg->base_offset = base;
	seg->next_offset = base;
	seg->max_timestamp = INT64_MIN;
	seg->alloc = alloc;
	seg->extent = extent;
	seg_index_init(&seg->ix);
	*out = seg;
	return 0;
}

void segment_free(struct segment *seg)
{
	if (seg->falloc_inflight) {    /* freed by the completion */
		seg->dead = 1;
		return;
	}
	if (seg->fd >= 0)
		close(seg->fd);
	seg_index_fini(&seg->ix);
	free(seg);
}

void segment_seal_index(struct segment *seg, const char *dir, int sync)
{
	struct seg_index_trailer tr = {
		.base_offset = seg->base_offset, .next_offset = seg->next_offset,
		.end_pos = seg->end, .max_timestamp = seg->max_timestamp,
	};
	char name[48], path[4200];

	if (sync && fdatasync(seg->fd) < 0) /* style: allow blocking: at roll, not yet on the ring */
		return;
	segment_index_path(seg, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (seg_index_save(&seg->ix, path, &tr) == 0)
		seg->index_saved = 1;
}
