/* dataplane/broker.c — ring matrix sends with wake-ups, snapshot lookup. */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dataplane/broker.h"
#include "dataplane/sasl.h"

int broker_send(struct broker *b, int from, int to, const struct shard_msg *m)
{
	int rc = spsc_push(b->rings[from][to], m);

	if (rc < 0)
		return rc;
	/* A sleeping consumer set its word before its last look at the rings
	 * (seq_cst on both sides), so either it sees the message or we see
	 * the word and wake it. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(b->sleeping[to], __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;

		if (write(b->wake_fd[to], &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is saturated, a wake is pending anyway */
		}
	}
	return 0;
}

void broker_wake(struct broker *b, int to)
{
	uint64_t one = 1;

	if (write(b->wake_fd[to], &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, a wake is pending anyway */
	}
}

const struct md_topic *md_find(const struct md_snapshot *md, const char *name, int32_t len)
{
	int lo = 0, hi = md ? md->ntopics : 0;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		const struct md_topic *t = md->topics[mid];
		int32_t n = t->name_len < len ? t->name_len : len;
		int c = memcmp(t->name, name, (size_t)n);

		if (!c)
			c = t->name_len < len ? -1 : t->name_len > len;
		if (!c)
			return t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct md_topic *md_find_id(const struct md_snapshot *md, const uint8_t id[16])
{
	static const uint8_t zero[16];

	if (!md || !memcmp(id, zero, 16))
		return NULL;
	if (md->by_id) {
		/* binary search: a Fetch v13+ names its topics by id */
		int lo = 0, hi = md->ntopics - 1;

		while (lo <= hi) {
			int mid = lo + (hi - lo) / 2, c = memcmp(md->by_id[mid]->id, id, 16);

			if (!c)
				return md->by_id[mid];
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid - 1;
		}
		return NULL;
	}
	for (int i = 0; i < md->ntopics; i++)
		if (!memcmp(md->topics[i]->id, id, 16))
			return md->topics[i];
	return NULL;
}

const struct sasl_scram_cred *md_scram_find(const struct md_snapshot *md, const char *name, int type)
{
	int lo = 0, hi = md ? md->nscram - 1 : -1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(md->scram[mid].name, name);

		if (!c)
			c = md->scram[mid].type - type;
		if (!c)
			return &md->scram[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

uint64_t broker_shard_md_seen(const struct broker *b, int i)
{
	return __atomic_load_n(b->md_seen[i], __ATOMIC_ACQUIRE);
}

uint64_t broker_shard_busy_cycles(const struct broker *b, int i)
{
	return __atomic_load_n(b->busy_cycles[i], __ATOMIC_RELAXED);
}
