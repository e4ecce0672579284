/* storage/segment.c — a segment file: create (or take the prepared one),
 * the image of its index, free. */
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

void segment_remove_files(int dirfd, const struct segment *seg)
{
	char name[48];

	unlinkat(dirfd, seg->name, 0);
	segment_index_path(seg, name, sizeof(name));
	unlinkat(dirfd, name, 0);
}

int segment_index_image(const struct segment *seg, uint64_t upto, uint8_t **buf, size_t *len, int *whole)
{
	struct seg_index ix = seg->ix;   /* a shallow view: the prefix's entries */
	struct seg_index_trailer tr = {
		.base_offset = seg->base_offset, .max_timestamp = seg->max_timestamp,
	};

	*buf = NULL;
	*len = 0;
	*whole = upto >= seg->end;
	if (*whole) {
		tr.end_pos = seg->end;
		tr.next_offset = seg->next_offset;
	} else {
		/* up to the last indexed batch boundary at or below upto (exact:
		 * a batch starts there) */
		uint32_t k = ix.n_off;

		while (k && ix.off[k - 1].position > upto)
			k--;
		if (!k)
			return 0;
		tr.end_pos = ix.off[k - 1].position;
		tr.next_offset = seg->base_offset + ix.off[k - 1].rel_offset;
		ix.n_off = k - 1;
		while (ix.n_time && ix.time[ix.n_time - 1].position >= tr.end_pos)
			ix.n_time--;
		if (!tr.end_pos)
			return 0;
	}
	return seg_index_encode(&ix, &tr, buf, len);
}
