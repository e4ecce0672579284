/* bench/capacity.h — the capacity planner's model (`sluicectl capacity
 * plan`, docs/capacity.md): a workload and a hardware profile in, the
 * number of servers out, with the resource that binds and its headroom.
 *
 * The per-record and per-byte costs are not constants of this file: they
 * are calibrated from the rows of a `sluice-bench suite` run (its
 * results.json) on the hardware of the profile it names:
 *   - produce: the broker's CPU per record and per byte, a least-squares
 *     fit t(s) = rec + byte * s over the size-sweep points (relative error,
 *     the points spanning three orders of magnitude), else the k14-producer
 *     row alone (100-byte records: the per-byte cost then unknown, 0). The
 *     rows' broker_cpu_ns_per_record (the suite samples the broker's
 *     /proc/PID/stat around each run); a results.json without it gives
 *     machine-seconds, 1 / records_per_s, the clients' CPU included;
 *   - consume: k14-consumer against k14-producer, at 100 bytes;
 *   - a follower's copy: k14-replicated's acks=1 row (three nodes on one
 *     machine: the machine did one append and two copies per record);
 *   - latency: k14-latency's end-to-end p50 and p99 (acks=1, at a rate far
 *     below the saturating one);
 *   - partitions: the partition-sweep's cost a record against the
 *     partitions of one server (interpolated in log-log; a record costs
 *     more as each partition's batches thin out), relative to the 6 of the
 *     rows above; its largest count is the most a server is planned with
 *     (beyond it nothing was measured).
 * A row the run did not have leaves its cost out with a note (plan()
 * says what it could not check), never a made-up figure.
 *
 * Where a cost is machine-seconds (no CPU figure, or k14-replicated: three
 * nodes on one machine) it includes the clients' CPU: the planner errs on
 * the side of more servers.
 *
 * Thread: any; pure functions over caller memory (cap_calib_load reads a
 * file). Errors: -errno with err naming the file, the scenario or row, or
 * the workload key and what is wrong with it.
 */
#ifndef SLUICE_BENCH_CAPACITY_H
#define SLUICE_BENCH_CAPACITY_H

#include <stddef.h>

#include "control/hw_profile.h"

/* What a suite run says one server of its profile costs. A cost of 0 (or
 * a NaN figure) is one the run did not measure; *_from names the rows. */
struct cap_calib {
	char source[512];            /* the results.json, for messages */
	struct hw_profile prof;      /* the profile the suite ran against */
	int cpu_measured;            /* 1: the costs are the broker's own CPU (core-seconds, its rows'
				      * broker_cpu_ns_per_record); 0: machine-seconds of the run
				      * (1 / records_per_s: the clients' CPU included) */
	double rec_s;                /* produce: seconds per record (as cpu_measured says) */
	double byte_s;               /* produce: seconds per byte of record */
	int sweep_points;            /* size-sweep points the fit used (0: k14-producer alone) */
	double consume_ratio;        /* consuming a record / producing it (NaN: not measured) */
	double replica_ratio;        /* a follower's copy / the leader's append (NaN: not measured) */
	double e2e_p50_ms, e2e_p99_ms;   /* k14-latency (NaN: not measured) */
	double e2e_rate;             /* the rate k14-latency ran at, records/s */
	double max_partitions;       /* the most partitions the partition-sweep measured on one server (NaN) */
	int npsweep;                 /* the partition-sweep's points: a record's cost against the */
	double psweep_n[8], psweep_t[8];   /* server's partitions (as cpu_measured says) */
	double prodcons_rps;         /* k14-prodcons measured (NaN), for the check */
	double producer_rps;         /* k14-producer measured (NaN) */
	double consumer_rps;         /* k14-consumer measured (NaN) */
	double prodcons_cpu_ns, producer_cpu_ns, consumer_cpu_ns;   /* their broker CPU a record (NaN) */
	int nsweep;                  /* the size-sweep's CPU-bound points, for the check */
	double sweep_size[16], sweep_rps[16], sweep_t[16];   /* t: the cost a record, seconds */
	char notes[1024];            /* rows missing, in words */
};

enum { CAP_ACKS_ALL = -1 };

/* The workload. Rates in records/s; sizes in bytes of a record's key,
 * value and headers. */
struct cap_workload {
	double rate;                 /* average */
	double peak_rate;            /* sizes for it (0: the average) */
	double record_bytes;         /* average */
	double record_bytes_p99;     /* 0: the average */
	double partitions;           /* of all topics */
	double retention_s;          /* how long records are kept */
	int replication;             /* replication factor */
	int fanout;                  /* consumer groups reading everything */
	int acks;                    /* 0, 1 or CAP_ACKS_ALL */
	int sync;                    /* log.durability=sync (each ack waits for a flush) */
	double retry;                /* fraction of produce traffic sent again (0.05: 5 %) */
	double batch_records;        /* records per produce batch (a client's batching density) */
	double processing_ms;        /* a consumer's time per record */
	int concurrency;             /* records a consumer instance processes at once */
	double headroom;             /* fraction of each resource kept free at the peak (0.3) */
	double disk_gib;             /* per server; 0: the profile's disk_gib */
	double tail_s;               /* seconds of writes each server keeps in memory for readers */
};

void cap_workload_defaults(struct cap_workload *w);

enum cap_res {
	CAP_CPU = 0,     /* of the server, in shares of its cores */
	CAP_DISK_WRITE,  /* MB/s */
	CAP_DISK_SPACE,  /* GiB */
	CAP_NIC_IN,      /* MB/s */
	CAP_NIC_OUT,     /* MB/s */
	CAP_MEMORY,      /* GiB */
	CAP_PARTITIONS,  /* partition replicas */
	CAP_NRES
};

extern const char *const cap_res_name[CAP_NRES];
extern const char *const cap_res_unit[CAP_NRES];

struct cap_use {
	double need;                 /* per server, at the peak (space: at the average) */
	double have;                 /* the profile's (0: not known, not checked) */
	double util;                 /* need / have (NaN when not checked) */
};

#define CAP_MAX_SERVERS 100000

struct cap_plan {
	int servers;                 /* 0: no count up to CAP_MAX_SERVERS fits */
	int binding;                 /* enum cap_res of the highest utilisation */
	int servers_for[CAP_NRES];   /* the fewest servers each resource alone needs (0: not checked) */
	struct cap_use use[CAP_NRES];
	double cpu_scale;            /* target server / calibration machine (cores x clock) */
	double stored_bytes;         /* per record on disk and on the wire */
	double part_factor;          /* a record's cost at the plan's partitions a server / at 6 */
	double p50_ms, p99_ms;       /* end to end, estimated (NaN: k14-latency not measured) */
	const char *latency_class;
	int consumers;               /* instances each group needs */
	int min_partitions;          /* for a replica or more on every server */
	char warnings[2048];         /* one per line */
};

/* Parse a results.json (text, len; name for messages). 0, or -EINVAL with
 * err naming the file and what is missing or wrong. */
int cap_calib_parse(const char *text, size_t len, const char *name, struct cap_calib *c, char *err,
		    size_t errlen);
int cap_calib_load(const char *path, struct cap_calib *c, char *err, size_t errlen);

/* Check the workload: 0, or -EINVAL with err naming the key. */
int cap_workload_check(const struct cap_workload *w, char *err, size_t errlen);

/* Plan for target (the profile of the servers to buy; NULL: the
 * calibration's). 0, or -EINVAL (a workload key out of range, a target
 * without what the plan divides by), err filled. */
int cap_plan(const struct cap_calib *c, const struct hw_profile *target, const struct cap_workload *w,
	     struct cap_plan *p, char *err, size_t errlen);

/* Machine-seconds the calibration machine spends producing one record of
 * s bytes. */
double cap_produce_cost(const struct cap_calib *c, double s);

/* The suite's checks of the model against rows it did not fit, each a
 * cost a record measured over predicted (1.0 exact, above 1 dearer than
 * the model says). k14-prodcons (one producer and one consumer at once):
 * the broker's CPU a produced record (its read included) against the
 * producer's and the consumer's own rows added; without CPU figures the
 * machine-seconds, 1 / records_per_s. NaN: not run. */
double cap_check_prodcons(const struct cap_calib *c);
/* Each size-sweep point the fit used, its cost predicted by the fit over
 * the others: measured / predicted into ratio[] and its size into size[]
 * (at most n); returns how many (0 with fewer than three points). */
int cap_check_sweep(const struct cap_calib *c, double *size, double *ratio, int n);

#endif
