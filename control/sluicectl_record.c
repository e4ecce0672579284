/* control/sluicectl_record.c — record produce and consume. Batches are
 * built with storage/batch.h's builder; consume reads through
 * sluicectl_fetch.c. See sluicectl.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/sluicectl.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

#define PRODUCE_BATCH_BYTES (512u << 10)
/* ---- produce -------------------------------------------------------------------- */

struct pbuf {
	uint8_t *buf;
	struct batch_builder bb;
	int32_t n;              /* records in the open batch */
	int64_t total, first, last;
};

static int send_batches(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
			struct pbuf *pb, int16_t acks)
{
	int32_t np = t->Partitions.count;
	bool *sent = calloc((size_t)np, sizeof *sent);
	int rc = 0;

	for (int32_t i = 0; i < np && !rc; i++) {
		int32_t leader = t->Partitions.items[i].LeaderId, m = 0;
		struct kafka_produce_request req;
		struct kafka_produce_request_topic_produce_data td;
		struct kafka_produce_request_partition_produce_data *pd;
		struct kafka_produce_response *resp;
		struct kclient *k;
		struct kclient_mem *mark;
		int16_t v;

		if (sent[i] || !pb[i].n)
			continue;
		pd = calloc((size_t)np, sizeof *pd);
		for (int32_t j = i; j < np; j++) {
			ssize_t len;

			if (sent[j] || !pb[j].n || t->Partitions.items[j].LeaderId != leader)
				continue;
			sent[j] = true;
			len = batch_builder_finish(&pb[j].bb, 0, -1, -1, -1, -1);
			if (len < 0) {
				free(pd);
				free(sent);
				return ctl_fail(c, "building a batch failed");
			}
			pd[m].Index = t->Partitions.items[j].PartitionIndex;
			pd[m].Records = (struct kafka_bytes){ pb[j].buf, (int32_t)len };
			m++;
		}
		k = ctl_leader(c, leader);
		mark = k->mem;   /* the metadata (t) lives below the mark */
		v = ctl_version(c, k, KAFKA_PRODUCE_KEY, 7);
		if (v < 3) {
			free(pd);
			free(sent);
			return ctl_fail(c, "the broker's Produce is older than v3 (no RecordBatch v2)");
		}
		kafka_produce_request_init(&req);
		req.TransactionalId = (struct kafka_str){ NULL, -1 };
		req.Acks = acks;
		req.TimeoutMs = c->timeout_ms;
		td.Name = t->Name;
		td.PartitionData.items = pd;
		td.PartitionData.count = m;
		req.TopicData.items = &td;
		req.TopicData.count = 1;
		if (acks == 0) {
			void *none;

			if (kclient_call(k, KAFKA_PRODUCE_KEY, v, &req, true, &none)) {
				rc = ctl_fail(c, "%s", k->err);
			}
		} else {
			resp = ctl_call(c, k, KAFKA_PRODUCE_KEY, v, &req);
			for (int32_t a = 0; a < resp->Responses.count && !rc; a++)
				for (int32_t b = 0; b < resp->Responses.items[a].PartitionResponses.count && !rc; b++) {
					const struct kafka_produce_response_partition_produce_response *pr =
						&resp->Responses.items[a].PartitionResponses.items[b];

					if (pr->ErrorCode) {
						rc = ctl_kafka_error(c, pr->ErrorCode, (struct kafka_str){ NULL, -1 },
								     "producing to %s-%d", kstr(t->Name), pr->Index);
						break;
					}
					for (int32_t j = 0; j < np; j++) {
						if (t->Partitions.items[j].PartitionIndex != pr->Index)
							continue;
						if (pb[j].first < 0)
							pb[j].first = pr->BaseOffset;
						pb[j].last = pr->BaseOffset + pb[j].n - 1;
					}
				}
		}
		for (int32_t j = 0; j < m; j++)
			for (int32_t x = 0; x < np; x++)
				if (t->Partitions.items[x].PartitionIndex == pd[j].Index) {
					pb[x].total += pb[x].n;
					pb[x].n = 0;
					batch_builder_init(&pb[x].bb, pb[x].buf, PRODUCE_BATCH_BYTES, now_ms());
				}
		free(pd);
		kclient_release_to(k, mark);
	}
	free(sent);
	return rc;
}

static int cmd_record_produce(struct ctl *c, const struct args *a)
{
	const char *sep = opt_get(a, "key-separator"), *file = opt_get(a, "file"), *hdrs[64];
	struct kafka_metadata_response *md;
	const struct kafka_metadata_response_metadata_response_topic *t = NULL;
	int64_t acks = -1, part = -1, total = 0;
	uint8_t hraw[8192];
	size_t hlen = 0;
	int nh, rc = 0;
	int32_t np, sticky = 0;
	struct pbuf *pb;
	FILE *in = stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	if (opt_get(a, "acks")) {
		const char *s = opt_get(a, "acks");

		if (!strcmp(s, "all"))
			acks = -1;
		else if (!parse_i64(s, -1, 1, &acks))
			return ctl_usage(c, "--acks is all, -1, 0 or 1, not '%s'", s);
	}
	if (opt_get(a, "partition") && !parse_i64(opt_get(a, "partition"), 0, INT32_MAX, &part))
		return ctl_usage(c, "--partition wants a partition number");
	if (sep && !*sep)
		return ctl_usage(c, "--key-separator must not be empty");
	nh = opt_all(a, "header", hdrs, 64);
	for (int i = 0; i < nh; i++) {
		const char *eq = strchr(hdrs[i], '=');
		size_t kl, vl;

		if (!eq || eq == hdrs[i])
			return ctl_usage(c, "--header wants KEY=VALUE, not '%s'", hdrs[i]);
		kl = (size_t)(eq - hdrs[i]);
		vl = strlen(eq + 1);
		if (hlen + kl + vl + 20 > sizeof hraw)
			return ctl_usage(c, "headers too long");
		hlen += varint_encode(hraw + hlen, (int64_t)kl);
		memcpy(hraw + hlen, hdrs[i], kl);
		hlen += kl;
		hlen += varint_encode(hraw + hlen, (int64_t)vl);
		memcpy(hraw + hlen, eq + 1, vl);
		hlen += vl;
	}
	if (file && strcmp(file, "-") && !(in = fopen(file, "r")))
		return ctl_usage(c, "cannot open %s: %s", file, strerror(errno));

	md = ctl_metadata(c, (const char *const *)a->pos, 1);
	for (int32_t i = 0; i < md->Topics.count; i++)
		if (kafka_str_eq(md->Topics.items[i].Name, a->pos[0]))
			t = &md->Topics.items[i];
	if (!t || t->ErrorCode)
		return ctl_kafka_error(c, t ? t->ErrorCode : 3, (struct kafka_str){ NULL, -1 }, "topic '%s'",
				       a->pos[0]);
	np = t->Partitions.count;
	if (part >= 0) {
		bool found = false;

		for (int32_t i = 0; i < np; i++)
			found |= t->Partitions.items[i].PartitionIndex == part;
		if (!found)
			return ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, (struct kafka_str){ NULL, -1 }, "partition %s-%lld", a->pos[0],
					       (long long)part);
	}
	pb = calloc((size_t)np, sizeof *pb);
	for (int32_t i = 0; i < np; i++)
		pb[i].first = pb[i].last = -1;   /* buffers come with a partition's first record */
	sticky = (int32_t)(now_ms() % (np ? np : 1));
	while (!rc && (n = getline(&line, &cap, in)) >= 0) {
		const char *key = NULL, *val = line;
		int32_t klen = -1, vlen, slot = -1;

		if (n && line[n - 1] == '\n')
			line[--n] = 0;
		if (!n)
			continue;   /* empty lines are not records */
		vlen = (int32_t)n;
		if (sep) {
			char *s = strstr(line, sep);

			if (s) {
				key = line;
				klen = (int32_t)(s - line);
				val = s + strlen(sep);
				vlen = (int32_t)(n - (val - line));
			}
		}
		if (part >= 0) {
			for (int32_t i = 0; i < np; i++)
				if (t->Partitions.items[i].PartitionIndex == part)
					slot = i;
		} else if (key) {
			int32_t pp = murmur2_partition(key, (size_t)klen, np);

			for (int32_t i = 0; i < np; i++)
				if (t->Partitions.items[i].PartitionIndex == pp)
					slot = i;
		} else {
			slot = sticky;   /* null keys: one partition per batch, as Java's sticky partitioner */
		}
		if (!pb[slot].buf) {
			pb[slot].buf = malloc(PRODUCE_BATCH_BYTES);
			if (!pb[slot].buf) {
				rc = ctl_fail(c, "out of memory");
				break;
			}
			batch_builder_init(&pb[slot].bb, pb[slot].buf, PRODUCE_BATCH_BYTES, now_ms());
		}
		for (int tries = 0; tries < 2; tries++) {
			int r = batch_builder_add(&pb[slot].bb, pb[slot].n, now_ms(), key, klen, val, vlen,
						  nh ? hraw : NULL, hlen, nh);

			if (!r) {
				pb[slot].n++;
				total++;
				break;
			}
			if (tries || !pb[slot].n) {
				rc = ctl_fail(c, "a record of %d bytes does not fit in a batch of %u bytes", vlen,
					      PRODUCE_BATCH_BYTES);
				break;
			}
			rc = send_batches(c, t, pb, (int16_t)acks);
			if (rc)
				break;
			sticky = (sticky + 1) % np;
			if (!key && part < 0)
				slot = sticky;
		}
	}
	if (!rc)
		rc = send_batches(c, t, pb, (int16_t)acks);
	free(line);
	if (in != stdin)
		fclose(in);
	if (!rc) {
		struct table tb;
		static const char *heads[] = { "PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET" };

		table_init(&tb, 4, heads);
		for (int col = 0; col < 4; col++)
			table_right(&tb, col);
		if (c->json) {
			json_obj_begin(NULL);
			json_str("topic", a->pos[0]);
			json_int("records", total);
			json_int("acks", acks);
			json_arr_begin("partitions");
		}
		for (int32_t i = 0; i < np; i++) {
			if (!pb[i].total)
				continue;
			if (c->json) {
				json_obj_begin(NULL);
				json_int("partition", t->Partitions.items[i].PartitionIndex);
				json_int("records", pb[i].total);
				if (pb[i].first >= 0) {
					json_int("first_offset", pb[i].first);
					json_int("last_offset", pb[i].last);
				} else {
					json_null("first_offset");
					json_null("last_offset");
				}
				json_obj_end();
			} else {
				table_add(&tb, fmt("%d", t->Partitions.items[i].PartitionIndex),
					  fmt("%lld", (long long)pb[i].total),
					  pb[i].first >= 0 ? fmt("%lld", (long long)pb[i].first) : "-",
					  pb[i].first >= 0 ? fmt("%lld", (long long)pb[i].last) : "-");
			}
		}
		if (c->json) {
			json_arr_end();
			json_obj_end();
			json_end();
		} else {
			printf("produced %lld record(s) to %s%s\n", (long long)total, a->pos[0],
			       acks == 0 ? " (acks=0: offsets unknown)" : "");
			if (total)
				table_print(&tb);
		}
		table_fini(&tb);
	}
	for (int32_t i = 0; i < np; i++)
		free(pb[i].buf);
	free(pb);
	return rc;
}

/* ---- consume --------------------------------------------------------------------- */

struct consumer {
	struct ctl *c;
	const char *tmpl;
	int64_t limit, seen;
};

static void put_bytes(const uint8_t *p, int32_t len, const char *null_as)
{
	if (len < 0 || !p)
		fputs(null_as, stdout);
	else
		fwrite(p, 1, (size_t)len, stdout);
}

/* Each header as (key, value): fills up to cap, returns the count. */
static int headers_parse(const struct fetched *r, const uint8_t **kp, int32_t *kl, const uint8_t **vp,
			 int32_t *vl, int cap)
{
	const uint8_t *p = r->headers, *end = r->headers + r->headers_len;
	int n = 0;

	for (int32_t i = 0; i < r->headers_count && n < cap; i++) {
		int64_t l;
		size_t s = varint_decode(p, end, &l);

		if (!s || l < 0 || (int64_t)(end - p - (ptrdiff_t)s) < l)
			break;
		p += s;
		kp[n] = p;
		kl[n] = (int32_t)l;
		p += l;
		s = varint_decode(p, end, &l);
		if (!s || (l >= 0 && (int64_t)(end - p - (ptrdiff_t)s) < l))
			break;
		p += s;
		vp[n] = l >= 0 ? p : NULL;
		vl[n] = (int32_t)l;
		p += l > 0 ? l : 0;
		n++;
	}
	return n;
}

static int consume_cb(void *arg, const struct fetched *r)
{
	struct consumer *cs = arg;
	const uint8_t *kp[32], *vp[32];
	int32_t kl[32], vl[32];
	int nh = headers_parse(r, kp, kl, vp, vl, 32);

	if (cs->c->json) {
		json_obj_begin(NULL);
		json_str("topic", r->topic);
		json_int("partition", r->partition);
		json_int("offset", r->offset);
		json_int("timestamp", r->timestamp);
		json_strn("key", (const char *)r->key, r->key ? r->key_len : -1);
		json_strn("value", (const char *)r->value, r->value ? r->value_len : -1);
		json_arr_begin("headers");
		for (int i = 0; i < nh; i++) {
			json_obj_begin(NULL);
			json_strn("key", (const char *)kp[i], kl[i]);
			json_strn("value", (const char *)vp[i], vp[i] ? vl[i] : -1);
			json_obj_end();
		}
		json_arr_end();
		json_obj_end();
		json_end();
	} else {
		for (const char *f = cs->tmpl; *f; f++) {
			if (*f == '\\' && f[1]) {
				f++;
				putchar(*f == 'n' ? '\n' : *f == 't' ? '\t' : *f);
				continue;
			}
			if (*f != '%' || !f[1]) {
				putchar(*f);
				continue;
			}
			switch (*++f) {
			case 't': fputs(r->topic, stdout); break;
			case 'p': printf("%d", r->partition); break;
			case 'o': printf("%lld", (long long)r->offset); break;
			case 'T': printf("%lld", (long long)r->timestamp); break;
			case 'k': put_bytes(r->key, r->key ? r->key_len : -1, ""); break;
			case 'v': put_bytes(r->value, r->value ? r->value_len : -1, ""); break;
			case 'K': printf("%d", r->key ? r->key_len : -1); break;
			case 'V': printf("%d", r->value ? r->value_len : -1); break;
			case 'h':
				for (int i = 0; i < nh; i++) {
					printf("%s%.*s=", i ? "," : "", (int)kl[i], (const char *)kp[i]);
					put_bytes(vp[i], vp[i] ? vl[i] : -1, "");
				}
				break;
			case '%': putchar('%'); break;
			default: putchar('%'); putchar(*f); break;
			}
		}
	}
	cs->seen++;
	return cs->limit >= 0 && cs->seen >= cs->limit;
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int cmd_record_consume(struct ctl *c, const struct args *a)
{
	const char *from = opt_get(a, "offset"), *group = opt_get(a, "group");
	struct kafka_metadata_response *md;
	const struct kafka_metadata_response_metadata_response_topic *t = NULL;
	struct consumer cs = { c, opt_get(a, "print"), -1, 0 };
	bool follow = opt_has(a, "follow");
	int64_t part = -1, fixed = -1, ts = -1, *pos, *committed = NULL;
	int64_t *hi;
	int32_t np;
	int16_t err = 0;
	int rc = 0;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	if (!cs.tmpl)
		cs.tmpl = "%v\\n";
	if (opt_get(a, "count") && !parse_i64(opt_get(a, "count"), 1, INT64_MAX, &cs.limit))
		return ctl_usage(c, "-n wants a record count >= 1");
	if (opt_get(a, "partition") && !parse_i64(opt_get(a, "partition"), 0, INT32_MAX, &part))
		return ctl_usage(c, "--partition wants a partition number");
	if (!from)
		from = "earliest";
	if (strcmp(from, "earliest") && strcmp(from, "latest")) {
		if (from[0] == '@') {
			if (!parse_time_ms(from + 1, &ts))
				return ctl_usage(c, "--offset @TIME wants YYYY-MM-DDTHH:MM:SSZ (UTC) or epoch ms");
		} else if (!parse_i64(from, 0, INT64_MAX, &fixed)) {
			return ctl_usage(c, "--offset is earliest, latest, an offset, or @TIME");
		}
	}
	md = ctl_metadata(c, (const char *const *)a->pos, 1);
	for (int32_t i = 0; i < md->Topics.count; i++)
		if (kafka_str_eq(md->Topics.items[i].Name, a->pos[0]))
			t = &md->Topics.items[i];
	if (!t || t->ErrorCode)
		return ctl_kafka_error(c, t ? t->ErrorCode : 3, (struct kafka_str){ NULL, -1 }, "topic '%s'",
				       a->pos[0]);
	np = t->Partitions.count;
	pos = calloc((size_t)np + 1, sizeof *pos);
	hi = calloc((size_t)np + 1, sizeof *hi);
	if (part >= 0) {
		bool found = false;

		for (int32_t i = 0; i < np; i++)
			found |= t->Partitions.items[i].PartitionIndex == part;
		if (!found)
			return ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, (struct kafka_str){ NULL, -1 }, "partition %s-%lld", a->pos[0],
					       (long long)part);
	}
	/* Start positions: the group's commits, else --offset. */
	if (fixed >= 0) {
		for (int32_t i = 0; i < np; i++)
			pos[i] = fixed;
	} else if (ctl_list_offsets(c, t, ts >= 0 ? ts : !strcmp(from, "latest") ? -1 : -2, pos, &err)) {
		return ctl_kafka_error(c, err, (struct kafka_str){ NULL, -1 }, "offsets of '%s'", a->pos[0]);
	}
	if (ts >= 0)   /* nothing at or after the time: start at the end */
		for (int32_t i = 0; i < np; i++)
			if (pos[i] < 0 && ctl_list_offsets(c, t, -1, hi, &err) == 0)
				pos[i] = hi[i];
	if (group) {
		committed = calloc((size_t)np + 1, sizeof *committed);
		group_committed(c, group, t, committed);
		for (int32_t i = 0; i < np; i++)
			if (committed[i] >= 0)
				pos[i] = committed[i];
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (;;) {
		int64_t before = cs.seen;

		if (ctl_list_offsets(c, t, -1, hi, &err)) {
			rc = ctl_kafka_error(c, err, (struct kafka_str){ NULL, -1 }, "offsets of '%s'", a->pos[0]);
			break;
		}
		for (int32_t i = 0; i < np && !rc && !stop_flag; i++) {
			int32_t p = t->Partitions.items[i].PartitionIndex;
			int16_t kerr = 0;
			int r;

			if ((part >= 0 && p != part) || pos[i] >= hi[i])
				continue;
			r = ctl_fetch_range(c, t, p, &pos[i], hi[i], consume_cb, &cs, &kerr);
			if (kerr)
				rc = ctl_kafka_error(c, kerr, (struct kafka_str){ NULL, -1 }, "reading %s-%d at offset %lld",
						     a->pos[0], p, (long long)pos[i]);
			else if (r < 0)
				rc = ctl_fail(c, "reading %s-%d: %s", a->pos[0], p, strerror(-r));
			if (cs.limit >= 0 && cs.seen >= cs.limit)
				break;
		}
		fflush(stdout);
		if (rc || stop_flag || (cs.limit >= 0 && cs.seen >= cs.limit) || !follow)
			break;
		if (cs.seen == before)
			usleep(200 * 1000);
	}
	if (!rc && group) {
		int32_t *parts = calloc((size_t)np + 1, sizeof *parts);
		int64_t *offs = calloc((size_t)np + 1, sizeof *offs);
		int n = 0;

		for (int32_t i = 0; i < np; i++) {
			int32_t p = t->Partitions.items[i].PartitionIndex;

			if ((part >= 0 && p != part) || pos[i] == committed[i] || pos[i] < 0)
				continue;
			parts[n] = p;
			offs[n++] = pos[i];
		}
		if (n)
			rc = group_commit(c, group, a->pos[0], parts, offs, n);
		free(parts);
		free(offs);
	}
	if (!c->json && isatty(2))
		fprintf(stderr, "sluicectl: %lld record(s)\n", (long long)cs.seen);
	free(pos);
	free(hi);
	free(committed);
	return rc;
}

/* ---- the record commands' table ---------------------------------------------------- */

static const struct opt_spec produce_opts[] = {
	{ "file", 'f', "FILE", "read lines from FILE (default: stdin); one record per line, empty lines skipped" },
	{ "key-separator", 'k', "SEP", "split each line at the first SEP into key and value" },
	{ "header", 'H', "KEY=VALUE", "a header on every record (repeatable)" },
	{ "acks", 'a', "all|-1|0|1", "acknowledgement to wait for (default all)" },
	{ "partition", 'p', "N", "write every record to partition N (default: murmur2 of the key; "
	  "records without a key go to one partition per batch)" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec consume_opts[] = {
	{ "offset", 'o', "WHERE", "earliest (default), latest, an offset, or @TIME (YYYY-MM-DDTHH:MM:SSZ or epoch ms)" },
	{ "count", 'n', "N", "stop after N records" },
	{ "partition", 'p', "N", "read only partition N" },
	{ "group", 'g', "GROUP", "start from GROUP's committed offsets and commit what was read (group must be empty)" },
	{ "follow", 'F', NULL, "keep waiting for new records (Ctrl-C stops) instead of stopping at the end" },
	{ "print", 0, "FMT", "per record: %t topic %p partition %o offset %T timestamp (ms) %k key %v value "
	  "%h headers %K/%V key/value length, \\n \\t (default '%v\\n'); --format json prints one object per line" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd record_cmds[] = {
	{ "record", "produce", "TOPIC", "write lines from stdin or a file as records", produce_opts,
	  "seq 1 100 | sluicectl record produce orders\n"
	  "printf 'k1:v1\\nk2:v2\\n' | sluicectl record produce orders -k : -H source=cli\n"
	  "sluicectl record produce orders -f lines.txt -p 0 --acks 1", cmd_record_produce },
	{ "record", "consume", "TOPIC", "print records (stops at the end unless --follow)", consume_opts,
	  "sluicectl record consume orders -n 10\n"
	  "sluicectl record consume orders -o latest --follow\n"
	  "sluicectl record consume orders --print '%p/%o %k=%v %h\\n'\n"
	  "sluicectl record consume orders -o @2026-11-29T12:00:00Z --format json\n"
	  "sluicectl record consume orders --group audit -n 100", cmd_record_consume },
};
const int record_ncmds = sizeof record_cmds / sizeof record_cmds[0];
