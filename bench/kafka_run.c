/* bench/kafka_run.c — the loads of the librdkafka benchmarks
 * (bench/kafka.h): kafka_produce (one producer; plain, idempotent or in
 * transactions), kafka_consume (every record read back and checked) and
 * kafka_e2e (end-to-end latency at a fixed rate), each filling a struct run.
 * `sluice-bench produce|consume|e2e|idle` (bench_kafka.c) and the suite
 * (bench_suite.c) run them.
 *
 * Thread: the caller's (the benchmark's main thread, or one of the suite's
 * client threads), which drives the producer and serves its delivery
 * reports (rd_kafka_poll); e2e runs its consumer on one more thread.
 * librdkafka adds its own threads. r->live is written here, for a caller
 * watching from another thread. Errors: -errno.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"

static double rate_of(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}


/* The message opaque of the producer: the send time in ns. */
struct prod_ctx {
	struct client_errs errs;    /* first: the error callback's opaque too */
	struct hist *lat;
	uint64_t acked, failed, acked_bytes;
	rd_kafka_resp_err_t first_err;
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct prod_ctx *pc = opaque;

	(void)rk;
	if (m->err) {
		if (!pc->failed++)
			pc->first_err = m->err;
		return;
	}
	pc->acked++;
	pc->acked_bytes += m->len;
	if (pc->lat)
		hist_add(pc->lat, bench_now_ns() - (uint64_t)(uintptr_t)m->_private);
}

static rd_kafka_t *new_producer(const struct opts *o, const char *bootstrap, struct prod_ctx *pc,
				int linger_ms)
{
	static unsigned txn_seq;
	rd_kafka_conf_t *c = base_conf(bootstrap, &pc->errs);
	char acks[16], linger[16], err[256], txn_id[64];
	rd_kafka_t *rk;

	if (!c)
		return NULL;
	snprintf(acks, sizeof(acks), "%d", o->acks);
	snprintf(linger, sizeof(linger), "%d", linger_ms);
	/* a transactional id of this run's own: a broker kept across runs
	 * (--bootstrap) must not fence or resume another run's producer */
	snprintf(txn_id, sizeof(txn_id), "sluice-bench-%d-%" PRIu64 "-%u", (int)getpid(),
		 (uint64_t)(bench_now_ns() % 1000000000ull), txn_seq++);
	if (o->transactional && conf_set(c, "transactional.id", txn_id) < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	if (conf_set(c, "acks", acks) < 0 || conf_set(c, "linger.ms", linger) < 0 ||
	    conf_set(c, "batch.num.messages", "100000") < 0 ||
	    conf_set(c, "batch.size", "1000000") < 0 ||
	    conf_set(c, "queue.buffering.max.messages", "2000000") < 0 ||
	    conf_set(c, "queue.buffering.max.kbytes", "2097151") < 0 ||
	    conf_set(c, "compression.codec", o->compression) < 0 ||
	    conf_set(c, "enable.idempotence", o->idempotent || o->transactional ? "true" : "false") < 0 ||
	    conf_set(c, "message.timeout.ms", "60000") < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
	rd_kafka_conf_set_opaque(c, pc);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "kafka: producer: %s\n", err);
	return rk;
}

/* ---- payload ------------------------------------------------------------ */

/* Bytes 0..7: record index (little endian); 8..15: send time (e2e);
 * the rest a pattern of the index. */
static void fill_payload(uint8_t *buf, int size, uint64_t idx, uint64_t t_ns)
{
	memcpy(buf, &idx, sizeof(idx) < (size_t)size ? sizeof(idx) : (size_t)size);
	if (size >= 16)
		memcpy(buf + 8, &t_ns, 8);
}

/* ---- produce ------------------------------------------------------------ */

static void progress(const char *what, uint64_t done, uint64_t total, uint64_t t0,
		     uint64_t *last_done, uint64_t *last_t, const struct broker *br, uint64_t *peak_rss,
		     const char *extra)
{
	uint64_t now = bench_now_ns();
	uint64_t rss = proc_rss_kb(br->pid);
	char of[32] = "";

	if (rss > *peak_rss)
		*peak_rss = rss;
	/* a count so large it only bounds a timed run is not a goal */
	if (total < 1000000000)
		snprintf(of, sizeof(of), "/%" PRIu64, total);
	fprintf(stderr, "%s: %.0f s  %" PRIu64 "%s  %.0f records/s now, %.0f avg%s%s",
		what, (double)(now - t0) / 1e9, done, of,
		rate_of(done - *last_done, (double)(now - *last_t) / 1e9),
		rate_of(done, (double)(now - t0) / 1e9), extra ? "  " : "", extra ? extra : "");
	if (rss)
		fprintf(stderr, "  broker RSS %.0f MiB", (double)rss / 1024);
	fputc('\n', stderr);
	*last_done = done;
	*last_t = now;
}

/* A failed transaction API call: report it, free it; -ETIMEDOUT for a
 * timeout, -EIO otherwise. */
static int txn_failed(const char *label, const char *call, rd_kafka_error_t *e)
{
	int rc = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -EIO;

	fprintf(stderr, "%s: %s: %s: %s%s%s\n", label, call, rd_kafka_error_name(e), rd_kafka_error_string(e),
		rd_kafka_error_is_fatal(e) ? " (fatal)" : "",
		rd_kafka_error_txn_requires_abort(e) ? " (transaction must be aborted)" : "");
	rd_kafka_error_destroy(e);
	return rc;
}

/* Commit the open transaction. rd_kafka_commit_transaction flushes the
 * transaction's records (serving their delivery reports), then ends it;
 * a retriable error is retried until STALL_TIMEOUT s after the first call.
 * The time from the first call to the successful return goes to r->commit. */
static int txn_commit(rd_kafka_t *rk, struct run *r, const char *label)
{
	uint64_t t0 = bench_now_ns(), end = t0 + STALL_TIMEOUT * 1000000000ull;

	for (;;) {
		uint64_t now = bench_now_ns();
		int left_ms = now < end ? (int)((end - now) / 1000000) + 1 : 1;
		rd_kafka_error_t *e = rd_kafka_commit_transaction(rk, left_ms);

		if (!e) {
			hist_add(&r->commit, bench_now_ns() - t0);
			r->txns++;
			return 0;
		}
		if (!rd_kafka_error_is_retriable(e) || bench_now_ns() >= end || bench_interrupted)
			return txn_failed(label, "commit_transaction", e);
		fprintf(stderr, "%s: commit_transaction: %s (retriable): retrying\n", label,
			rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		r->commit_retries++;
	}
}

/* Produce o->records (or for o->seconds if set, whichever first) to topic;
 * with o->transactional, in transactions of that many records. */
int kafka_produce(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label)
{
	struct prod_ctx pc = { .lat = &r->lat };
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	uint8_t *buf = calloc(1, (size_t)o->size + 16);
	uint64_t t0, sent = 0, last_done = 0, last_t, next_tick, last_acked = 0, stall_t;
	uint64_t deadline = o->seconds > 0 ? (uint64_t)(o->seconds * 1e9) : UINT64_MAX;
	uint64_t txn = (uint64_t)o->transactional;
	int rc = 0, in_txn = 0;
	char txn_note[64] = "", what[48];
	volatile int *stop = r->stop;

	if (o->client_wide) {
		free(buf);
		return kafka_produce_wide(o, br, topic, records, r, label);
	}
	memset(r, 0, sizeof(*r));
	r->stop = stop;
	hist_init(&r->lat);
	hist_init(&r->commit);
	rk = new_producer(o, br->bootstrap, &pc, o->linger_ms >= 0 ? o->linger_ms : 5);
	if (!rk || !buf) {
		free(buf);
		return -EINVAL;
	}
	if ((rc = check_cluster(rk, br)) < 0)
		goto out;
	if (txn) {
		/* InitProducerId with the transactional id (FindCoordinator first) */
		rd_kafka_error_t *e = rd_kafka_init_transactions(rk, READY_TIMEOUT * 1000);

		if (e) {
			rc = txn_failed(label, "init_transactions", e);
			goto out;
		}
		snprintf(txn_note, sizeof(txn_note), ", transactions of %" PRIu64 " records", txn);
	}
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	for (int i = 0; i < o->size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	if (o->seconds > 0 && records >= 1000000000)
		snprintf(what, sizeof(what), "records for %.1f s", o->seconds);
	else
		snprintf(what, sizeof(what), "%" PRIu64 " records", records);
	fprintf(stderr, "%s: %s x %d bytes to %s (%d partitions), acks=%d, compression=%s, linger.ms=%d%s\n",
		label, what, o->size, topic, o->partitions, o->acks, o->compression,
		o->linger_ms >= 0 ? o->linger_ms : 5, txn_note);
	t0 = last_t = stall_t = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	deadline = deadline == UINT64_MAX ? UINT64_MAX : t0 + deadline;
	while (pc.acked + pc.failed < sent || sent < records) {
		uint64_t now;

		if (stop && *stop && sent < records && !in_txn)
			records = sent;         /* the caller ends the run: drain the acks */
		if (sent < records && o->produce_rate &&
		    sent >= (uint64_t)((double)(bench_now_ns() - t0) * (double)o->produce_rate / 1e9)) {
			/* paced (--rate for produce): ahead of the schedule */
			struct timespec ts = { 0, 100000 };

			rd_kafka_poll(rk, 0);
			nanosleep(&ts, NULL);
		} else if (sent < records && !bench_interrupted) {
			uint64_t t;

			/* a transaction begins with its first record: none is ever
			 * left open and empty */
			if (txn && !in_txn) {
				rd_kafka_error_t *e = rd_kafka_begin_transaction(rk);

				if (e) {
					rc = txn_failed(label, "begin_transaction", e);
					break;
				}
				in_txn = 1;
			}
			t = bench_now_ns();
			fill_payload(buf, o->size, sent, 0);
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)o->partitions),
					     RD_KAFKA_MSG_F_COPY, buf, (size_t)o->size, NULL, 0,
					     (void *)(uintptr_t)t) == -1) {
				rd_kafka_resp_err_t e = rd_kafka_last_error();

				if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					fprintf(stderr, "%s: produce: %s\n", label, rd_kafka_err2str(e));
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 1);
			} else {
				sent++;
				if (txn && (sent % txn == 0 || sent == records)) {
					/* a failed commit stays open: aborted at out */
					if ((rc = txn_commit(rk, r, label)) < 0)
						break;
					in_txn = 0;
				} else if ((sent & 1023) == 0) {
					rd_kafka_poll(rk, 0);
				} else {
					continue;
				}
			}
		} else {
			rd_kafka_poll(rk, 50);
		}
		now = bench_now_ns();
		r->live = pc.acked;
		if (pc.acked + pc.failed != last_acked) {
			last_acked = pc.acked + pc.failed;
			stall_t = now;
		}
		if (now >= next_tick) {
			char extra[96];

			if (txn)
				snprintf(extra, sizeof(extra), "(%" PRIu64 " sent, %" PRIu64 " transactions committed)",
					 sent, r->txns);
			else
				snprintf(extra, sizeof(extra), "(%" PRIu64 " sent)", sent);
			progress(label, pc.acked, records, t0, &last_done, &last_t, br, &r->peak_rss_kb, extra);
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (pc.failed) {
			fprintf(stderr, "%s: delivery failed: %s\n", label, rd_kafka_err2str(pc.first_err));
			rc = -EIO;
			break;
		}
		if (pc.errs.fatal) {
			fprintf(stderr, "%s: client: %s\n", label, pc.errs.first);
			rc = -EIO;
			break;
		}
		if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
			fprintf(stderr, "%s: no delivery report for %d s (%" PRIu64 " sent, %" PRIu64
				" acked): broker stalled\n", label, STALL_TIMEOUT, sent, pc.acked);
			rc = -ETIMEDOUT;
			break;
		}
		if (bench_interrupted) {
			rc = -EINTR;
			break;
		}
		if (now >= deadline && sent < records) {
			records = sent;
			if (in_txn) {
				if ((rc = txn_commit(rk, r, label)) < 0)
					break;
				in_txn = 0;
			}
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	if (proc_rss_kb(br->pid) > r->peak_rss_kb)
		r->peak_rss_kb = proc_rss_kb(br->pid);
	r->records = pc.acked;
	r->bytes = pc.acked_bytes;
	r->errors = pc.failed;
	if (!rc && txn)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s, %" PRIu64 " transactions "
			"committed\n", label, pc.acked, r->seconds, r->txns);
	else if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s\n", label, pc.acked, r->seconds);
	rd_kafka_topic_destroy(rkt);
out:
	if (rc && in_txn) {
		/* purges what is queued; waits at most 5 s for what is in flight */
		rd_kafka_error_t *e = rd_kafka_abort_transaction(rk, 5000);

		if (e)
			txn_failed(label, "abort_transaction", e);
	}
	if (rc)
		rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_flush(rk, 5000);
	rd_kafka_destroy(rk);
	free(buf);
	return rc;
}

/* ---- consume ------------------------------------------------------------ */

struct cons_check {
	int partitions;
	int size;
	int64_t *next_off;          /* per partition: the offset expected next */
	uint8_t *seen;              /* bitmap of record indexes */
	uint64_t nrecords;
	uint64_t bad;
	char first_bad[256];
};

static void cons_bad(struct cons_check *cc, const char *fmt, int32_t p, int64_t off, uint64_t idx)
{
	if (!cc->bad++)
		snprintf(cc->first_bad, sizeof(cc->first_bad), "partition %d offset %" PRId64 " index %"
			 PRIu64 ": %s", p, off, idx, fmt);
}

/* Check one record: size, partition = index mod P, contiguous offsets, no
 * duplicate index (only when indexes are < nrecords: the produce bench). */
static void cons_check_msg(struct cons_check *cc, const rd_kafka_message_t *m)
{
	uint64_t idx = 0;
	int32_t p = m->partition;

	if (p < 0 || p >= cc->partitions) {
		cons_bad(cc, "partition out of range", p, m->offset, 0);
		return;
	}
	if ((int)m->len != cc->size) {
		cons_bad(cc, "wrong length", p, m->offset, 0);
		return;
	}
	memcpy(&idx, m->payload, 8);
	if (m->offset != cc->next_off[p])
		cons_bad(cc, "offset not contiguous", p, m->offset, idx);
	cc->next_off[p] = m->offset + 1;
	if (cc->seen) {
		if (idx >= cc->nrecords || (int)(idx % (uint64_t)cc->partitions) != p)
			cons_bad(cc, "index does not belong here", p, m->offset, idx);
		else if (cc->seen[idx >> 3] & (1u << (idx & 7)))
			cons_bad(cc, "duplicate record", p, m->offset, idx);
		else
			cc->seen[idx >> 3] |= (uint8_t)(1u << (idx & 7));
	}
}

struct consumer {
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	rd_kafka_queue_t *q;        /* NULL: a group consumer (group_consumer_open) */
	struct client_errs errs;
	int partitions;
	int part_mod, part_rem;     /* partitions p % part_mod == part_rem (mod 0: all) */
	int group;                  /* subscribed: rd_kafka_consumer_poll, rd_kafka_consumer_close */
};

static int consumer_has(const struct consumer *c, int p)
{
	return c->part_mod <= 1 || p % c->part_mod == c->part_rem;
}

/* The topic's partition count from a metadata request (every partition
 * with a leader), or -errno. */
static int topic_partitions(rd_kafka_t *rk, rd_kafka_topic_t *rkt)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
	int n = -EIO;

	if (err) {
		fprintf(stderr, "kafka: consumer: metadata: %s\n", rd_kafka_err2str(err));
		return -EIO;
	}
	if (md->topic_cnt == 1 && md->topics[0].err)
		n = -EAGAIN;    /* unknown here yet, or no leader */
	if (md->topic_cnt == 1 && !md->topics[0].err) {
		n = md->topics[0].partition_cnt;
		for (int j = 0; j < md->topics[0].partition_cnt; j++)
			if (md->topics[0].partitions[j].leader < 0)
				n = -EAGAIN;
	}
	rd_kafka_metadata_destroy(md);
	return n;
}

static int consumer_open(struct consumer *c, const struct opts *o, const struct broker *br,
			 const char *topic, int64_t start)
{
	rd_kafka_topic_partition_list_t *offs;
	rd_kafka_conf_t *conf;
	char err[256];
	int rc;

	memset(c, 0, sizeof(*c));
	c->partitions = o->partitions;
	c->part_mod = o->part_mod;
	c->part_rem = o->part_rem;
	conf = base_conf(br->bootstrap, &c->errs);
	if (!conf || conf_set(conf, "enable.auto.commit", "false") < 0 ||
	    conf_set(conf, "enable.auto.offset.store", "false") < 0 ||
	    conf_set(conf, "fetch.wait.max.ms", "100") < 0 ||
	    conf_set(conf, "fetch.message.max.bytes", "4194304") < 0 ||
	    conf_set(conf, "fetch.max.bytes", "52428800") < 0 ||
	    conf_set(conf, "queued.min.messages", "1000000") < 0 ||
	    conf_set(conf, "queued.max.messages.kbytes", "262144") < 0 ||
	    conf_set(conf, "fetch.error.backoff.ms", "10") < 0 ||
	    conf_set(conf, "group.id", "sluice-bench") < 0) {
		if (conf)
			rd_kafka_conf_destroy(conf);
		return -EINVAL;
	}
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!c->rk) {
		fprintf(stderr, "kafka: consumer: %s\n", err);
		return -EINVAL;
	}
	c->rkt = rd_kafka_topic_new(c->rk, topic, NULL);
	/* Ask for the topic's metadata first, as a simple-consumer application
	 * does to learn its partitions: rd_kafka_metadata connects at once,
	 * where waiting in rd_kafka_clusterid waits for librdkafka's 1 s timer
	 * (sparse connections: nothing else asks for a connection yet). */
	/* another node of a cluster may not know the new topic yet: asked
	 * again for up to 10 s */
	for (int tries = 0; (rc = topic_partitions(c->rk, c->rkt)) == -EAGAIN && tries < 100; tries++)
		usleep(100000);
	if (rc != o->partitions) {
		if (rc >= 0)
			fprintf(stderr, "kafka: consumer: topic %s has %d partitions, expected %d\n", topic,
				rc, o->partitions);
		else
			fprintf(stderr, "kafka: consumer: no metadata with a leader for every partition of "
				"%s\n", topic);
		return -EIO;
	}
	if (check_cluster(c->rk, br) < 0)
		return -EADDRINUSE;
	c->q = rd_kafka_queue_new(c->rk);
	/* Start at explicit offsets from one ListOffsets for the topic (-2 and
	 * -1, the logical BEGINNING and END, are also ListOffsets' timestamps
	 * for the log start and end). Given a logical offset, consume_start
	 * sends that ListOffsets itself, but librdkafka 2.0.2 retries it 500 ms
	 * later when the partition has not yet joined its broker thread ("no
	 * current leader for partition"): 4 starts of 30 here. */
	offs = rd_kafka_topic_partition_list_new(o->partitions);
	for (int p = 0; p < o->partitions; p++)
		if (consumer_has(c, p))
			rd_kafka_topic_partition_list_add(offs, topic, p)->offset = start;
	if (start == RD_KAFKA_OFFSET_BEGINNING || start == RD_KAFKA_OFFSET_END) {
		rd_kafka_resp_err_t e;

		/* In a cluster a new partition's leader may answer before it
		 * applied the topic's records (metadata from another node said
		 * it leads), and the client's own metadata may lag: asked again
		 * for up to 10 s, as a client retries. */
		for (int tries = 0;; tries++) {
			for (int i = 0; i < offs->cnt; i++)
				offs->elems[i].offset = start;
			e = rd_kafka_offsets_for_times(c->rk, offs, 10000);
			for (int i = 0; !e && i < offs->cnt; i++)
				e = offs->elems[i].err ? offs->elems[i].err :
				    offs->elems[i].offset < 0 ? RD_KAFKA_RESP_ERR__NO_OFFSET : 0;
			if (tries >= 100 || (e != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
					     e != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION &&
					     e != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION &&
					     e != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE))
				break;
			usleep(100000);
		}
		if (e) {
			fprintf(stderr, "kafka: consumer: offsets of %s: %s\n", topic, rd_kafka_err2str(e));
			rd_kafka_topic_partition_list_destroy(offs);
			return -EIO;
		}
	}
	for (int i = 0; i < offs->cnt; i++)
		if (rd_kafka_consume_start_queue(c->rkt, offs->elems[i].partition, offs->elems[i].offset,
						 c->q) == -1) {
			fprintf(stderr, "kafka: consume_start %s [%d]: %s\n", topic, offs->elems[i].partition,
				rd_kafka_err2str(rd_kafka_last_error()));
			rd_kafka_topic_partition_list_destroy(offs);
			return -EIO;
		}
	rd_kafka_topic_partition_list_destroy(offs);
	return 0;
}

/* A group consumer as an application writes one from librdkafka's example:
 * its default settings but a group of its own and auto.offset.reset
 * earliest (a new group reads from the log start), subscribed to topic. */
static int group_consumer_open(struct consumer *c, const struct opts *o, const struct broker *br,
			       const char *topic)
{
	rd_kafka_topic_partition_list_t *subs;
	rd_kafka_conf_t *conf;
	rd_kafka_resp_err_t e;
	char err[256], group[64];

	memset(c, 0, sizeof(*c));
	c->partitions = o->partitions;
	c->group = 1;
	snprintf(group, sizeof(group), "sluice-bench-defaults-%d-%" PRIu64, (int)getpid(), bench_now_ns());
	conf = base_conf(br->bootstrap, &c->errs);
	if (!conf || conf_set(conf, "group.id", group) < 0 || conf_set(conf, "auto.offset.reset", "earliest") < 0) {
		if (conf)
			rd_kafka_conf_destroy(conf);
		return -EINVAL;
	}
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!c->rk) {
		fprintf(stderr, "kafka: group consumer: %s\n", err);
		return -EINVAL;
	}
	rd_kafka_poll_set_consumer(c->rk);
	subs = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(subs, topic, RD_KAFKA_PARTITION_UA);
	e = rd_kafka_subscribe(c->rk, subs);
	rd_kafka_topic_partition_list_destroy(subs);
	if (e) {
		fprintf(stderr, "kafka: group consumer: subscribe to %s: %s\n", topic, rd_kafka_err2str(e));
		return -EIO;
	}
	return 0;
}

static void consumer_close(struct consumer *c)
{
	if (c->group && c->rk)
		rd_kafka_consumer_close(c->rk);
	if (c->rkt) {
		for (int p = 0; p < c->partitions; p++)
			if (consumer_has(c, p))
				rd_kafka_consume_stop(c->rkt, p);
		rd_kafka_topic_destroy(c->rkt);
	}
	if (c->q)
		rd_kafka_queue_destroy(c->q);
	if (c->rk)
		rd_kafka_destroy(c->rk);
	memset(c, 0, sizeof(*c));
}

#define BATCH 10000

int kafka_consume(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label)
{
	struct consumer c;
	struct cons_check cc = { .partitions = o->partitions, .size = o->size, .nrecords = records };
	rd_kafka_message_t **msgs = calloc(BATCH, sizeof(*msgs));
	uint64_t t0, got = 0, bytes = 0, last_done = 0, last_t, next_tick, stall_t, first_t = 0;
	volatile int *stop = r->stop;
	int rc;

	memset(r, 0, sizeof(*r));
	r->stop = stop;
	hist_init(&r->lat);
	/* A share of the partitions (o->part_mod): its records' indexes run
	 * up to about part_mod times its count. Unbounded (a run the caller
	 * stops): no duplicate bitmap, offsets are still checked. */
	if (o->part_mod > 1)
		cc.nrecords = records * (uint64_t)o->part_mod + (uint64_t)o->partitions;
	cc.next_off = calloc((size_t)o->partitions, sizeof(*cc.next_off));
	cc.seen = cc.nrecords <= KAFKA_CHECKED_MAX ? calloc(cc.nrecords / 8 + 1, 1) : NULL;
	if (!msgs || !cc.next_off || (!cc.seen && cc.nrecords <= KAFKA_CHECKED_MAX)) {
		rc = -ENOMEM;
		goto out0;
	}
	if (o->group_defaults)
		fprintf(stderr, "%s: reading %" PRIu64 " records from %s (%d partitions), group consumer with "
			"librdkafka's defaults, one poll a record\n", label, records, topic, o->partitions);
	else
		fprintf(stderr, "%s: reading %" PRIu64 " records from %s (%d partitions%s), simple consumer, "
			"one queue\n", label, records, topic, o->partitions, o->part_mod > 1 ? ", a share" : "");
	t0 = last_t = stall_t = bench_now_ns();
	rc = o->group_defaults ? group_consumer_open(&c, o, br, topic) :
				 consumer_open(&c, o, br, topic, RD_KAFKA_OFFSET_BEGINNING);
	next_tick = t0 + 1000000000ull;
	while (!rc && got < records && !(stop && *stop)) {
		/* one record (waiting up to 100 ms), then what is already queued:
		 * a partial batch is never held back for its timeout (a group
		 * consumer: one record a poll, as its applications read) */
		rd_kafka_message_t *first = c.group ? rd_kafka_consumer_poll(c.rk, 100) : rd_kafka_consume_queue(c.q, 100);
		ssize_t n = 0;
		uint64_t now = bench_now_ns();

		if (first && c.group) {
			if (!first_t) {
				first_t = now;
				fprintf(stderr, "%s: first record after %.3f s (connect, join the group, fetch "
					"offsets, first Fetch)\n", label, (double)(now - t0) / 1e9);
			}
			msgs[0] = first;
			n = 1;
		} else if (first) {
			if (!first_t) {
				first_t = now;
				fprintf(stderr, "%s: first record after %.3f s (connect, metadata, "
					"ListOffsets, first Fetch)\n", label, (double)(now - t0) / 1e9);
			}
			msgs[0] = first;
			n = rd_kafka_consume_batch_queue(c.q, 0, msgs + 1, BATCH - 1);
			n = (n < 0 ? 0 : n) + 1;
		}

		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];

			if (m->err) {
				if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
					fprintf(stderr, "consume: %s [%d]: %s\n", topic, m->partition,
						rd_kafka_message_errstr(m));
					rc = -EIO;
				}
			} else {
				cons_check_msg(&cc, m);
				got++;
				bytes += m->len;
			}
			rd_kafka_message_destroy(m);
		}
		if (n > 0)
			stall_t = now;
		r->live = got;
		if (cc.bad) {
			fprintf(stderr, "consume: WRONG DATA: %s (%" PRIu64 " bad records so far)\n",
				cc.first_bad, cc.bad);
			rc = -EBADMSG;
		}
		if (now >= next_tick) {
			progress(label, got, records, t0, &last_done, &last_t, br, &r->peak_rss_kb, NULL);
			next_tick += 1000000000ull;
			if (!broker_alive(br))
				rc = -ECHILD;
		}
		if (c.errs.fatal) {
			fprintf(stderr, "consume: client: %s\n", c.errs.first);
			rc = -EIO;
		}
		if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
			fprintf(stderr, "consume: nothing received for %d s (%" PRIu64 " of %" PRIu64
				"): broker stalled\n", STALL_TIMEOUT, got, records);
			rc = -ETIMEDOUT;
		}
		if (bench_interrupted)
			rc = -EINTR;
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	if (proc_rss_kb(br->pid) > r->peak_rss_kb)
		r->peak_rss_kb = proc_rss_kb(br->pid);
	r->records = got;
	r->bytes = bytes;
	r->reading_s = first_t ? (double)(bench_now_ns() - first_t) / 1e9 : 0.0;
	if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records in %.2f s, all checked (%.2f s from the first "
			"record)\n", label, got, r->seconds, r->reading_s);
	consumer_close(&c);
out0:
	free(msgs);
	free(cc.next_off);
	free(cc.seen);
	return rc;
}

/* ---- e2e ---------------------------------------------------------------- */

struct e2e_reader {
	struct consumer c;
	struct hist lat;
	uint64_t warm_until;        /* records sent before this are not counted */
	uint64_t got, counted;
	volatile int stop;
	int rc;
	struct cons_check cc;
};

static void *e2e_reader_main(void *arg)
{
	struct e2e_reader *rd = arg;
	rd_kafka_message_t **msgs = calloc(BATCH, sizeof(*msgs));

	while (!rd->stop && msgs) {
		/* consume_batch_queue waits for a full batch or its timeout, which
		 * at a steady rate adds up to the whole timeout to every record:
		 * wait for one record, then take what else is already there */
		rd_kafka_message_t *first = rd_kafka_consume_queue(rd->c.q, 50);
		ssize_t n = 0;
		uint64_t now = bench_now_ns();

		if (first) {
			msgs[0] = first;
			n = rd_kafka_consume_batch_queue(rd->c.q, 0, msgs + 1, BATCH - 1);
			n = (n < 0 ? 0 : n) + 1;
		}

		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];
			uint64_t ts;

			if (m->err) {
				if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && !rd->rc) {
					fprintf(stderr, "e2e: consumer [%d]: %s\n", m->partition,
						rd_kafka_message_errstr(m));
					rd->rc = -EIO;
				}
			} else if (m->len >= 16) {
				cons_check_msg(&rd->cc, m);
				memcpy(&ts, (const uint8_t *)m->payload + 8, 8);
				rd->got++;
				if (ts >= rd->warm_until) {
					hist_add(&rd->lat, now > ts ? now - ts : 0);
					rd->counted++;
				}
			}
			rd_kafka_message_destroy(m);
		}
	}
	free(msgs);
	return NULL;
}

int kafka_e2e(const struct opts *o, struct broker *br, const char *topic, struct run *r)
{
	struct prod_ctx pc = { 0 };
	struct e2e_reader *rd = calloc(1, sizeof(*rd));
	rd_kafka_t *rk = NULL;
	rd_kafka_topic_t *rkt = NULL;
	uint8_t *buf = calloc(1, (size_t)o->size + 16);
	double secs = o->seconds > 0 ? o->seconds : 10;
	uint64_t total = (uint64_t)((secs + 1) * (double)o->rate), sent = 0, t0, next_tick;
	uint64_t last_done = 0, last_t, end_wait;
	pthread_t th;
	int rc = 0, started = 0, linger = o->linger_ms >= 0 ? o->linger_ms : 1;

	memset(r, 0, sizeof(*r));
	hist_init(&r->lat);
	if (!rd || !buf) {
		free(rd);
		free(buf);
		return -ENOMEM;
	}
	hist_init(&rd->lat);
	rd->cc.partitions = o->partitions;
	rd->cc.size = o->size;
	rd->cc.next_off = calloc((size_t)o->partitions, sizeof(*rd->cc.next_off));
	if (o->size < 16) {
		fprintf(stderr, "e2e: --size must be at least 16 (index and timestamp)\n");
		rc = -EINVAL;
		goto out;
	}
	if ((rc = consumer_open(&rd->c, o, br, topic, RD_KAFKA_OFFSET_END)) < 0)
		goto out;
	rd->warm_until = UINT64_MAX;
	if (pthread_create(&th, NULL, e2e_reader_main, rd)) {
		rc = -EAGAIN;
		goto out;
	}
	started = 1;
	rk = new_producer(o, br->bootstrap, &pc, linger);
	if (!rk) {
		rc = -EINVAL;
		goto out;
	}
	if ((rc = check_cluster(rk, br)) < 0)
		goto out;
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	/* let the consumer reach the end of every partition */
	usleep(1500000);
	for (int i = 0; i < o->size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	fprintf(stderr, "e2e: %" PRIu64 " records/s for %.0f s (+1 s warm-up), %d bytes, %d partitions, "
		"acks=%d, linger.ms=%d, compression=%s\n", o->rate, secs, o->size, o->partitions, o->acks,
		linger, o->compression);
	t0 = last_t = bench_now_ns();
	rd->warm_until = t0 + 1000000000ull;
	next_tick = t0 + 1000000000ull;
	while (sent < total && !bench_interrupted) {
		uint64_t now = bench_now_ns();
		/* record k is due at k / rate: it goes once that time has come */
		uint64_t due = (uint64_t)((double)(now - t0) * (double)o->rate / 1e9) + 1;

		if (due > total)
			due = total;
		while (sent < due) {
			/* the time this record was due: a late producer counts */
			uint64_t ts = t0 + (uint64_t)((double)sent * 1e9 / (double)o->rate);

			fill_payload(buf, o->size, sent, ts);
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)o->partitions),
					     RD_KAFKA_MSG_F_COPY, buf, (size_t)o->size, NULL, 0, NULL) == -1) {
				if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 1);
				continue;
			}
			sent++;
		}
		rd_kafka_poll(rk, 0);
		if (rc)
			break;
		if (now >= next_tick) {
			char extra[96];

			snprintf(extra, sizeof(extra), "(sent %" PRIu64 ", received %" PRIu64 ")", sent, rd->got);
			progress("e2e", rd->got, total, t0, &last_done, &last_t, br, &r->peak_rss_kb, extra);
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (pc.failed || pc.errs.fatal || rd->rc || rd->cc.bad)
			break;
		{
			struct timespec ts = { 0, 50000 };  /* 50 us */

			nanosleep(&ts, NULL);
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	/* wait for the tail */
	end_wait = bench_now_ns() + 10000000000ull;
	while (!rc && rd->got < sent && bench_now_ns() < end_wait && !pc.failed)
		rd_kafka_poll(rk, 10);
	if (pc.failed) {
		fprintf(stderr, "e2e: delivery failed: %s\n", rd_kafka_err2str(pc.first_err));
		rc = -EIO;
	}
	if (!rc && rd->cc.bad) {
		fprintf(stderr, "e2e: WRONG DATA: %s\n", rd->cc.first_bad);
		rc = -EBADMSG;
	}
	if (!rc && rd->rc)
		rc = rd->rc;
	if (!rc && rd->got != sent) {
		fprintf(stderr, "e2e: sent %" PRIu64 ", received %" PRIu64 " after 10 s\n", sent, rd->got);
		rc = -EIO;
	}
out:
	if (started) {
		rd->stop = 1;
		pthread_join(th, NULL);
	}
	r->records = rd->got;
	r->bytes = rd->got * (uint64_t)o->size;
	hist_merge(&r->lat, &rd->lat);
	if (!rc)
		fprintf(stderr, "e2e: %" PRIu64 " records sent and received, %" PRIu64 " after warm-up timed\n",
			sent, rd->counted);
	if (rkt)
		rd_kafka_topic_destroy(rkt);
	if (rk) {
		rd_kafka_flush(rk, 5000);
		rd_kafka_destroy(rk);
	}
	consumer_close(&rd->c);
	free(rd->cc.next_off);
	free(rd);
	free(buf);
	return rc;
}
