/* dataplane/kafka/kafka_wire.c — the out-of-line part of kafka_wire.h. */
#include "dataplane/kafka/kafka_wire.h"

/* @thread shard. Reference b.len record bytes in place: close the open
 * slice of buf, then add an iovec pointing at the records (borrowed: they
 * must outlive the send). */
void kafka_writer_records_ref(struct kafka_writer *w, struct kafka_bytes b)
{
	kafka_writer_cut(w);
	if (w->err)
		return;
	if (w->buf) {
		if (w->iov_cnt >= w->iov_cap) {
			kafka_writer_fail(w, -ENOSPC);
			return;
		}
		w->iov[w->iov_cnt] = (struct iovec){ (void *)b.ptr, (size_t)b.len };
	}
	w->iov_cnt++;
	w->total += (size_t)b.len;
}
