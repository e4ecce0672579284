/* dataplane/kafka/kafka_wire.h — Kafka wire primitives: the bounds-checked
 * read cursor, the size-first writer and the per-request arena.
 *
 * Thread: whichever shard owns the connection (@thread shard); nothing here
 * is shared, nothing locks, nothing calls malloc.
 * Owns: nothing. A cursor borrows the frame, a writer borrows its buffer and
 * iovec array, an arena borrows the memory given to kafka_arena_init().
 * Errors: the cursor and the writer keep the FIRST error (-EBADMSG for a
 * malformed frame, -ENOBUFS when the arena is full, -ENOSPC when the writer's
 * buffer or iovec array is full, -EINVAL for an unencodable value) and turn
 * every later call into a no-op; check ->err once at the end. Functions that
 * return int return 0 or -errno.
 *
 * Decoded strings, bytes and records point into the frame (zero copy): they
 * are borrowed for as long as the frame buffer lives. Arrays live in the
 * arena until kafka_arena_reset() (after the response is sent).
 */
#ifndef SLUICE_KAFKA_WIRE_H
#define SLUICE_KAFKA_WIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* A wire string: len -1 is null. ptr borrows the frame (decode) or the
 * caller's memory (encode); it is not NUL-terminated. */
struct kafka_str {
	const char *ptr;
	int32_t len;
};

/* Wire bytes and records (RecordBatch blobs): len -1 is null. */
struct kafka_bytes {
	const uint8_t *ptr;
	int32_t len;
};

struct kafka_uuid {
	uint8_t b[16];
};

/* Allocation bound (CVE-2022-34917): every array count is checked against
 * the bytes left before anything is allocated, assuming each element takes
 * at least its minimum wire size. The generator records sizeof(element) and
 * that minimum for every array (kafka_array_bounds[]); a unit test checks
 * that no ratio exceeds KAFKA_ARENA_PER_BYTE. Each allocation also rounds up
 * to 8 bytes, and needs at least one count byte on the wire. */
#define KAFKA_ARENA_PER_BYTE 16u
#define KAFKA_ARENA_ALIGN 8u
#define KAFKA_ARENA_BASE 4096u

/* The most arena memory decoding a len-byte message can take. */
static inline size_t kafka_arena_bound(size_t len)
{
	return (KAFKA_ARENA_PER_BYTE + KAFKA_ARENA_ALIGN) * len + KAFKA_ARENA_BASE;
}

/* Per-request bump allocator over caller memory (init/fini pair, no fini
 * needed: the arena owns nothing). */
struct kafka_arena {
	uint8_t *base;
	size_t cap;
	size_t used;
};

static inline void kafka_arena_init(struct kafka_arena *a, void *mem, size_t cap)
{
	a->base = mem;
	a->cap = cap;
	a->used = 0;
}

/* @thread shard. 8-byte aligned memory, or NULL when the arena is full. */
static inline void *kafka_arena_alloc(struct kafka_arena *a, size_t n)
{
	size_t at = (a->used + KAFKA_ARENA_ALIGN - 1) & ~(size_t)(KAFKA_ARENA_ALIGN - 1);

	if (at > a->cap || n > a->cap - at)
		return NULL;
	a->used = at + n;
	return a->base + at;
}

static inline void kafka_arena_reset(struct kafka_arena *a)
{
	a->used = 0;
}

/* ---- read cursor ------------------------------------------------------ */

struct kafka_cursor {
	const uint8_t *p;   /* next byte; borrowed from the frame */
	const uint8_t *end;
	int err;            /* first error, 0 if none */
};

static inline void kafka_cursor_init(struct kafka_cursor *c, const void *buf, size_t len)
{
	c->p = buf;
	c->end = c->p + len;
	c->err = 0;
}

static inline size_t kafka_cursor_left(const struct kafka_cursor *c)
{
	return (size_t)(c->end - c->p);
}

/* Record an error (the first one wins) and stop reading. Returns c->err. */
static inline int kafka_cursor_fail(struct kafka_cursor *c, int err)
{
	if (!c->err)
		c->err = err;
	c->p = c->end;
	return c->err;
}

/* Borrow n bytes, or NULL (and -EBADMSG) if fewer are left. */
static inline const uint8_t *kafka_cursor_take(struct kafka_cursor *c, size_t n)
{
	const uint8_t *p = c->p;

	if (c->err || n > kafka_cursor_left(c)) {
		kafka_cursor_fail(c, -EBADMSG);
		return NULL;
	}
	c->p += n;
	return p;
}

static inline uint64_t kafka_load_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t kafka_cursor_be(struct kafka_cursor *c, int n)
{
	const uint8_t *p = kafka_cursor_take(c, (size_t)n);

	return p ? kafka_load_be(p, n) : 0;
}

static inline int8_t kafka_cursor_int8(struct kafka_cursor *c) { return (int8_t)kafka_cursor_be(c, 1); }
static inline int16_t kafka_cursor_int16(struct kafka_cursor *c) { return (int16_t)kafka_cursor_be(c, 2); }
static inline uint16_t kafka_cursor_uint16(struct kafka_cursor *c) { return (uint16_t)kafka_cursor_be(c, 2); }
static inline int32_t kafka_cursor_int32(struct kafka_cursor *c) { return (int32_t)kafka_cursor_be(c, 4); }
static inline uint32_t kafka_cursor_uint32(struct kafka_cursor *c) { return (uint32_t)kafka_cursor_be(c, 4); }
static inline int64_t kafka_cursor_int64(struct kafka_cursor *c) { return (int64_t)kafka_cursor_be(c, 8); }
static inline bool kafka_cursor_bool(struct kafka_cursor *c) { return kafka_cursor_be(c, 1) != 0; }

static inline double kafka_cursor_float64(struct kafka_cursor *c)
{
	uint64_t u = kafka_cursor_be(c, 8);
	double d;

	memcpy(&d, &u, sizeof d);
	return d;
}

static inline struct kafka_uuid kafka_cursor_uuid(struct kafka_cursor *c)
{
	struct kafka_uuid u = { { 0 } };
	const uint8_t *p = kafka_cursor_take(c, sizeof u.b);

	if (p)
		memcpy(u.b, p, sizeof u.b);
	return u;
}

/* Unsigned base-128 varint of at most 32 bits. */
static inline uint32_t kafka_cursor_uvarint(struct kafka_cursor *c)
{
	uint32_t v = 0;

	for (int shift = 0; shift < 35; shift += 7) {
		const uint8_t *p = kafka_cursor_take(c, 1);

		if (!p)
			return 0;
		if (shift == 28 && (*p & 0xf0)) {
			kafka_cursor_fail(c, -EBADMSG);
			return 0;
		}
		v |= (uint32_t)(*p & 0x7f) << shift;
		if (!(*p & 0x80))
			return v;
	}
	return 0;
}

/* Length of a string/bytes/array: -1 for null. Compact (flexible) lengths
 * are uvarint N+1; classic ones are int16 (strings) or int32. */
static inline int32_t kafka_cursor_len(struct kafka_cursor *c, bool compact, bool wide)
{
	int32_t n;

	if (compact) {
		uint32_t u = kafka_cursor_uvarint(c);

		if (u > (uint32_t)INT32_MAX)
			return kafka_cursor_fail(c, -EBADMSG), 0;
		n = (int32_t)u - 1;
	} else {
		n = wide ? kafka_cursor_int32(c) : kafka_cursor_int16(c);
	}
	if (n < -1)
		return kafka_cursor_fail(c, -EBADMSG), 0;
	return c->err ? 0 : n;
}

/* Read the length of a blob, check the bytes are there, borrow them. */
static inline struct kafka_bytes kafka_cursor_blob(struct kafka_cursor *c, bool compact,
						   bool wide, bool nullable)
{
	struct kafka_bytes b = { NULL, kafka_cursor_len(c, compact, wide) };

	if (b.len < 0 && !nullable) {
		kafka_cursor_fail(c, -EBADMSG);
		b.len = 0;
	}
	if (b.len > 0)
		b.ptr = kafka_cursor_take(c, (size_t)b.len);
	else if (b.len == 0)
		b.ptr = (const uint8_t *)"";
	if (c->err)
		b.len = 0;
	return b;
}

static inline struct kafka_str kafka_cursor_string(struct kafka_cursor *c, bool compact, bool nullable)
{
	struct kafka_bytes b = kafka_cursor_blob(c, compact, false, nullable);

	return (struct kafka_str){ (const char *)b.ptr, b.len };
}

static inline struct kafka_bytes kafka_cursor_bytes(struct kafka_cursor *c, bool compact, bool nullable)
{
	return kafka_cursor_blob(c, compact, true, nullable);
}

/* Array count, -1 for null. The count is refused unless count * min_wire
 * bytes are left, so the caller may allocate count elements. */
static inline int32_t kafka_cursor_array_len(struct kafka_cursor *c, bool compact, bool nullable,
					     size_t min_wire)
{
	int32_t n = kafka_cursor_len(c, compact, true);

	if (n < 0 && !nullable)
		return kafka_cursor_fail(c, -EBADMSG), 0;
	if (n > 0 && (uint64_t)n * (min_wire ? min_wire : 1) > kafka_cursor_left(c))
		return kafka_cursor_fail(c, -EBADMSG), 0;
	return n;
}

/* Split off the next n bytes into sub (a tagged field's payload). */
static inline void kafka_cursor_sub(struct kafka_cursor *c, size_t n, struct kafka_cursor *sub)
{
	const uint8_t *p = kafka_cursor_take(c, n);

	kafka_cursor_init(sub, p ? p : c->end, p ? n : 0);
}

/* ---- writer ----------------------------------------------------------- */

/* Records of at least this many bytes are referenced by an iovec instead
 * of copied, when the writer has an iovec array. */
#define KAFKA_WRITER_ZC_MIN 512

/* Three modes: measure (buf NULL: count bytes only, so a message's exact
 * size is known before anything is written), flat (everything copied into
 * buf) and iovec (records referenced in place: iov[] alternates slices of
 * buf with borrowed record data). */
struct kafka_writer {
	uint8_t *buf;          /* borrowed; NULL in measure mode */
	size_t cap;
	size_t len;            /* bytes in buf (or that buf would need) */
	size_t total;          /* frame bytes: len + referenced record bytes */
	struct iovec *iov;     /* borrowed; NULL unless zero-copy */
	int iov_cap;
	int iov_cnt;           /* iovecs used (or needed) so far */
	size_t seg_start;      /* start in buf of the open slice */
	bool zero_copy;
	int err;
};

static inline void kafka_writer_init(struct kafka_writer *w, void *buf, size_t cap)
{
	memset(w, 0, sizeof *w);
	w->buf = buf;
	w->cap = cap;
}

/* Measure mode; zero_copy says whether records will be referenced. */
static inline void kafka_writer_init_measure(struct kafka_writer *w, bool zero_copy)
{
	kafka_writer_init(w, NULL, 0);
	w->zero_copy = zero_copy;
}

static inline void kafka_writer_init_iov(struct kafka_writer *w, void *buf, size_t cap,
					 struct iovec *iov, int iov_cap)
{
	kafka_writer_init(w, buf, cap);
	w->iov = iov;
	w->iov_cap = iov_cap;
	w->zero_copy = true;
}

static inline int kafka_writer_fail(struct kafka_writer *w, int err)
{
	if (!w->err)
		w->err = err;
	return w->err;
}

/* Reserve n bytes of buf; NULL in measure mode or after an error. */
static inline uint8_t *kafka_writer_reserve(struct kafka_writer *w, size_t n)
{
	uint8_t *p = NULL;

	if (w->err)
		return NULL;
	if (w->buf) {
		if (n > w->cap - w->len) {
			kafka_writer_fail(w, -ENOSPC);
			return NULL;
		}
		p = w->buf + w->len;
	}
	w->len += n;
	w->total += n;
	return p;
}

static inline void kafka_store_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline void kafka_writer_be(struct kafka_writer *w, uint64_t v, int n)
{
	uint8_t *p = kafka_writer_reserve(w, (size_t)n);

	if (p)
		kafka_store_be(p, v, n);
}

static inline void kafka_writer_int8(struct kafka_writer *w, int8_t v) { kafka_writer_be(w, (uint8_t)v, 1); }
static inline void kafka_writer_int16(struct kafka_writer *w, int16_t v) { kafka_writer_be(w, (uint16_t)v, 2); }
static inline void kafka_writer_uint16(struct kafka_writer *w, uint16_t v) { kafka_writer_be(w, v, 2); }
static inline void kafka_writer_int32(struct kafka_writer *w, int32_t v) { kafka_writer_be(w, (uint32_t)v, 4); }
static inline void kafka_writer_uint32(struct kafka_writer *w, uint32_t v) { kafka_writer_be(w, v, 4); }
static inline void kafka_writer_int64(struct kafka_writer *w, int64_t v) { kafka_writer_be(w, (uint64_t)v, 8); }
static inline void kafka_writer_bool(struct kafka_writer *w, bool v) { kafka_writer_be(w, v ? 1 : 0, 1); }

static inline void kafka_writer_float64(struct kafka_writer *w, double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof u);
	kafka_writer_be(w, u, 8);
}

static inline void kafka_writer_raw(struct kafka_writer *w, const void *src, size_t n)
{
	uint8_t *p = kafka_writer_reserve(w, n);

	if (p && n)
		memcpy(p, src, n);
}

static inline void kafka_writer_uuid(struct kafka_writer *w, struct kafka_uuid u)
{
	kafka_writer_raw(w, u.b, sizeof u.b);
}

static inline void kafka_writer_uvarint(struct kafka_writer *w, uint32_t v)
{
	uint8_t tmp[5];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	kafka_writer_raw(w, tmp, n);
}

static inline size_t kafka_uvarint_size(uint32_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Length prefix: -1 is null (refused with -EINVAL unless nullable). */
static inline void kafka_writer_len(struct kafka_writer *w, int32_t n, bool compact, bool wide,
				    bool nullable)
{
	if (n < -1 || (n < 0 && !nullable) || (!wide && !compact && n > INT16_MAX)) {
		kafka_writer_fail(w, -EINVAL);
		return;
	}
	if (compact)
		kafka_writer_uvarint(w, (uint32_t)(n + 1));
	else if (wide)
		kafka_writer_int32(w, n);
	else
		kafka_writer_int16(w, (int16_t)n);
}

static inline void kafka_writer_string(struct kafka_writer *w, struct kafka_str s, bool compact,
				       bool nullable)
{
	kafka_writer_len(w, s.len, compact, false, nullable);
	if (s.len > 0)
		kafka_writer_raw(w, s.ptr, (size_t)s.len);
}

static inline void kafka_writer_bytes(struct kafka_writer *w, struct kafka_bytes b, bool compact,
				      bool nullable)
{
	kafka_writer_len(w, b.len, compact, true, nullable);
	if (b.len > 0)
		kafka_writer_raw(w, b.ptr, (size_t)b.len);
}

/* Close the open slice of buf into the iovec array. */
static inline void kafka_writer_cut(struct kafka_writer *w)
{
	if (w->len == w->seg_start)
		return;
	if (w->buf) {
		if (w->iov_cnt >= w->iov_cap) {
			kafka_writer_fail(w, -ENOSPC);
			return;
		}
		w->iov[w->iov_cnt] = (struct iovec){ w->buf + w->seg_start, w->len - w->seg_start };
	}
	w->iov_cnt++;
	w->seg_start = w->len;
}

void kafka_writer_records_ref(struct kafka_writer *w, struct kafka_bytes b);

/* Records: like bytes, but referenced (not copied) when zero_copy is set. */
static inline void kafka_writer_records(struct kafka_writer *w, struct kafka_bytes b, bool compact,
					bool nullable)
{
	kafka_writer_len(w, b.len, compact, true, nullable);
	if (b.len <= 0 || w->err)
		return;
	if (w->zero_copy && b.len >= KAFKA_WRITER_ZC_MIN)
		kafka_writer_records_ref(w, b);
	else
		kafka_writer_raw(w, b.ptr, (size_t)b.len);
}

/* End the message: close the last slice. Returns the number of iovecs
 * (0 in flat mode) or the first error. */
static inline int kafka_writer_finish(struct kafka_writer *w)
{
	if (w->zero_copy && !w->err)
		kafka_writer_cut(w);
	return w->err ? w->err : w->iov_cnt;
}

static inline bool kafka_str_eq(struct kafka_str s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len >= 0 && (size_t)s.len == n && (n == 0 || !memcmp(s.ptr, lit, n));
}

static inline bool kafka_uuid_is_zero(struct kafka_uuid u)
{
	static const struct kafka_uuid zero;

	return !memcmp(u.b, zero.b, sizeof u.b);
}

#endif
