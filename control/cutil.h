/* control/cutil.h — small helpers the control thread's coordinators share:
 * clocks, allocation that cannot fail (the control thread aborts without
 * memory), Kafka string copies, big-endian record field writers,
 * little-endian loads and stores, the partition Kafka picks for a
 * coordinator key, and a directory's write probe (after a disk error).
 *
 * Thread: any (pure functions); used by the control thread. */
#ifndef SLUICE_CUTIL_H
#define SLUICE_CUTIL_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/kafka/kafka_wire.h"
#include "dataplane/topic_name.h"
#include "storage/batch_format.h"

/* The clock the shards count their busy cycles in (TSC on x86, else
 * monotonic ns): a shard's busy share is its busy_cycles over this. */
static inline uint64_t cycles_now(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);

	if (!p)
		abort();   /* the control thread cannot go on without memory */
	return p;
}

/* A NUL-terminated copy; NULL for a null string. */
static inline char *kdup(struct kafka_str s)
{
	char *p;

	if (s.len < 0 || !s.ptr)
		return NULL;
	p = xcalloc(1, (size_t)s.len + 1);
	memcpy(p, s.ptr, (size_t)s.len);
	return p;
}

static inline size_t put16(uint8_t *p, int16_t v) { be16_store(p, (uint16_t)v); return 2; }
static inline size_t put32(uint8_t *p, int32_t v) { be32_store(p, (uint32_t)v); return 4; }
static inline size_t put64(uint8_t *p, int64_t v) { be64_store(p, (uint64_t)v); return 8; }

/* Little-endian fields, for the formats that are the nodes' own: the
 * node-to-node channel (ctl_channel.c), the metadata image (meta_image.c),
 * the quorum status (ctl_quorum.c). Kafka's are big-endian: put16/32/64
 * above and storage/batch_format.h's be*_load. */
static inline void le16_store(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}

static inline uint16_t le16_load(const void *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}

static inline void le32_store(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void le64_store(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static inline uint32_t le32_load(const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t le64_load(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

/* An int16-length string (Kafka's record key and value formats). */
static inline size_t putstr(uint8_t *p, const char *s)
{
	size_t n = strlen(s);

	put16(p, (int16_t)n);
	memcpy(p + 2, s, n);
	return 2 + n;
}

/* The partition of n that Kafka gives the NUL-terminated key s
 * (dataplane/topic_name.h). */
static inline int32_t java_key_partition(const char *s, int32_t n)
{
	return topic_key_partition(s, strlen(s), n);
}

/* What a 4 KiB write (and fsync) into dir says now: 0 or -errno (a
 * library's message may give the errno only as a number, or none).
 * Blocks: only after a disk error. */
static inline int dir_write_probe(const char *dir)
{
	static const char page[4096];
	char path[PATH_MAX];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/sluice-write-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page) || fsync(fd) < 0)
		rc = errno ? -errno : -ENOSPC;
	close(fd);
	unlink(path);
	return rc;
}

#endif
