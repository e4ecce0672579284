/* tests/integration/groups_common.h — what the two consumer-group suites
 * (test_groups.c: members joining, leaving and dying under production;
 * test_groups_fencing.c: the offset invariant and a stale owner's commit
 * refused) share: the broker settings that make groups form at once and
 * notice a dead member in ~2 s, the Kafka error codes they expect, the
 * clock, and the steps of a raw request (harness.h's rawbuf and rawcur):
 * begin it, send it, receive its answer, read a one-partition answer's
 * header, end it. Test process only; single-threaded use. */
#ifndef SLUICE_TESTS_GROUPS_COMMON_H
#define SLUICE_TESTS_GROUPS_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/integration/harness.h"

/* Kafka error codes the tests expect */
#define ERR_ILLEGAL_GENERATION    22
#define ERR_UNKNOWN_MEMBER_ID     25
#define ERR_REBALANCE_IN_PROGRESS 27
#define ERR_MEMBER_ID_REQUIRED    79

static const char *const group_broker_args[] = {
	"--set", "group.initial.rebalance.delay.ms=0",
	"--set", "group.min.session.timeout.ms=1000",
	NULL
};

static inline int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* ---- raw requests ---------------------------------------------------- */

/* Start request key/version in r (rb_init, the header); returns its
 * correlation id, one more than the previous request's. */
static inline int32_t raw_begin(struct rawbuf *r, int16_t key, int16_t version)
{
	static int32_t corr_next = 100;
	int32_t corr = corr_next++;

	rb_init(r);
	rb_request(r, key, version, corr);
	return corr;
}

/* Finish r, send it on fd and free it. */
static inline void raw_send_req(int fd, struct rawbuf *r)
{
	rb_finish(r);
	cr_assert_eq(raw_send(fd, r->p, r->len), 0);
	rb_free(r);
}

/* Receive one frame and check its correlation id; a cursor after it, the
 * frame in *buf (the caller frees it, through raw_end). */
static inline struct rawcur raw_recv_answer(int fd, int32_t corr, uint8_t **buf, const char *what)
{
	size_t len;
	int rc = raw_recv_frame(fd, buf, &len);
	struct rawcur c;

	cr_assert_eq(rc, 0, "no %s response (%s)", what, strerror(-rc));
	c = (struct rawcur){ *buf, *buf + len, 0 };
	cr_assert_eq(rc_i32(&c), corr, "%s: correlation id", what);
	return c;
}

/* The answer was read whole and well: free it. */
static inline void raw_end(struct rawcur *c, uint8_t *buf, const char *what)
{
	cr_assert(!c->bad && c->p == c->end, "malformed %s response", what);
	free(buf);
}

/* Send r and return its answer's error code when that is all it holds
 * (throttle, error: Heartbeat, LeaveGroup). */
static inline int16_t raw_error_call(int fd, struct rawbuf *r, int32_t corr, const char *what)
{
	uint8_t *buf;
	struct rawcur c;
	int16_t err;

	raw_send_req(fd, r);
	c = raw_recv_answer(fd, corr, &buf, what);
	rc_i32(&c);              /* throttle */
	err = rc_i16(&c);
	raw_end(&c, buf, what);
	return err;
}

/* The head of an answer about one partition of one topic (OffsetCommit,
 * OffsetFetch): throttle, one topic named topic, one partition numbered
 * partition; the cursor is left at the partition's fields. */
static inline void raw_one_partition(struct rawcur *c, const char *what, const char *topic, int32_t partition)
{
	char name[64];

	rc_i32(c);               /* throttle */
	cr_assert_eq(rc_i32(c), 1, "%s: topics", what);
	rc_str(c, name, sizeof(name));
	cr_assert_str_eq(name, topic);
	cr_assert_eq(rc_i32(c), 1, "%s: partitions", what);
	cr_assert_eq(rc_i32(c), partition);
}

#endif
