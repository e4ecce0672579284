/* control/ctl_quorum.h — the control thread's state of the metadata log's
 * quorum (control/ctl_quorum.c), shared with the DescribeQuorum views it
 * serves (control/ctl_quorum_describe.c). Not for other files: ctl.h and
 * ctl_internal.h hold the functions the rest of the control thread calls.
 *
 * Thread: the control thread's (@thread ctl), the quorum's callbacks
 * included; ctl->cq points at it from ctl_quorum_open to ctl_quorum_close.
 * Owns: the quorum, the controller channel, the import buffer and the
 * list of own proposals (heap, freed by ctl_quorum_close).
 * Errors: -errno, as ctl_internal.h says per function.
 */
#ifndef SLUICE_CTL_QUORUM_H
#define SLUICE_CTL_QUORUM_H

#include <stddef.h>
#include <stdint.h>

#include "control/ctl_internal.h"
#include "control/metalog.h"
#include "storage/lathist.h"

struct quorum;
struct ctl_channel;

struct ctl_quorum {
	struct quorum *q;
	struct ctl *ctl;
	char dir[4200];
	char cluster_id[23];            /* the directory's (its identity file) */
	/* the record applied last (its proposer's done runs right after) */
	uint64_t last_index;
	int last_rc;
	struct metalog_applied last;
	int failed;                     /* a record this node cannot apply: stopping */
	/* start-up */
	void (*ready)(struct ctl *ctl, int err, const char *msg);
	int started;                    /* ready has run */
	int dir_existed;                /* the quorum's directory was there before this start */
	int scram_boot;                 /* --add-scram: 1 proposed, 2 done */
	int scram_left;                 /* its records not applied yet */
	int barrier_sent;
	void *import_buf;               /* the older broker's image, as a snapshot */
	size_t import_len;
	int import_left, import_err;
	int64_t import_records;
	int closed;
	struct lathist commit_lat;      /* proposed to applied, on this node */
	int applied_fd;                 /* sluice-applied, -1 until started */
	uint64_t applied_max, applied_written;
	/* a quorum of several: the controller channel, and this node's part */
	struct ctl_channel *ch;
	int nvoters;
	int32_t last_leader;            /* the last leader seen (-1: none yet) */
	uint64_t snapshots_installed;   /* snapshots installed after start-up */
	/* a broker-only node: its image on disk (meta_image.h) */
	char image_path[4300];          /* "" on a voter */
	uint64_t image_saved;           /* the index of the image on disk (0: none) */
	unsigned image_every;
	int image_due;                  /* a snapshot was installed: write the image */
	int image_failed;               /* a write failed: said once */
	int32_t took_over;              /* whom this node's leadership replaced (-1: none, or itself) */
	int leading;                    /* the last leader change named this node */
	/* this node's proposals in flight (a hash of each record): a record
	 * applied that is none of them is another node's (ctl->follow) */
	uint64_t *own;
	int nown, cap_own;
};

/* The leader's view for a node that asks over the controller channel
 * (ctl_channel_serve_describe): *buf (malloc()ed) and *len, or -errno
 * (-ESHUTDOWN: no quorum). @thread ctl */
int ctl_quorum_describe_serve(struct ctl *ctl, void **buf, size_t *len);

#endif
