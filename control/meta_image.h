/* control/meta_image.h — a broker-only node's metadata image on disk
 * between starts: the image as a snapshot (metalog_snapshot's bytes) and
 * the log index it was taken at, in one file of its data directory, so a
 * restart fetches only the records after it (control/ctl_quorum.c).
 *
 * The file: "SLMIMAGE", u32 version (1), u32 CRC-32C of everything after
 * it, u64 the index, u64 the snapshot's length, the snapshot; integers
 * little-endian. Written crash-safely: a temporary name, fsync, rename
 * over the old file, fsync of the directory; a crash leaves the old file
 * or the new one, never a mix.
 *
 * @thread ctl. Blocking file I/O (the image once in a while, and at start
 * and stop): never on a shard.
 * Errors: 0 or -errno; load: -ENOENT (no file), -EPROTO (not this format,
 * another version, a CRC or length that does not hold: why is in err). */
#ifndef SLUICE_META_IMAGE_H
#define SLUICE_META_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define META_IMAGE_FILE "sluice-metadata.image"
#define META_IMAGE_VERSION 1

int meta_image_save(const char *path, uint64_t index, const void *snap, size_t len);
/* *snap malloc()ed, the caller's. */
int meta_image_load(const char *path, uint64_t *index, void **snap, size_t *len, char *err, size_t errlen);

#endif
