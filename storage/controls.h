/* storage/controls.h — test-only control builds: one protection removed.
 *
 * A checker that cannot fail is no checker (issue 20): each anomaly the
 * fault checker counts has a control, a broker that lacks the one
 * protection against it, and tests/fault/test_controls.py shows the
 * checker reporting the anomaly against that broker and not against the
 * normal one. `make control-broker` builds BUILD/control/sluiced with
 * -DSLUICE_CONTROLS from the same sources; there env SLUICE_CONTROL=NAME
 * turns off protection NAME (storage/controls.c: the names, the refusal
 * of an unknown one, the loud line at startup). In the normal build
 * SLUICE_CONTROL_OFF(name) is the constant 0 and none of this exists.
 *
 * Thread: sluice_control is written once, before main (a constructor),
 * and only read afterwards, by any thread.
 * Names (the token is the env name with '_' for '-'): see controls.c and
 * docs/fault-testing.md#controls for what each removes.
 */
#ifndef SLUICE_CONTROLS_H
#define SLUICE_CONTROLS_H

#ifdef SLUICE_CONTROLS
enum sluice_control_id {
	SLUICE_CONTROL_none,
	SLUICE_CONTROL_ack_before_isr,      /* acks=all (and the coordinators' writes) answered once the leader's log has it */
	SLUICE_CONTROL_no_dedup,            /* an idempotent producer's resent batch appended again */
	SLUICE_CONTROL_no_seq_check,        /* a batch past a sequence gap accepted */
	SLUICE_CONTROL_no_truncate,         /* a follower keeps its divergent tail */
	SLUICE_CONTROL_no_generation_check, /* OffsetCommit from a stale generation or non-member taken */
	SLUICE_CONTROL_lso_ignored,         /* read_committed served as read_uncommitted */
	SLUICE_CONTROL_end_out_of_range,    /* a consumer's fetch at the log end answered OFFSET_OUT_OF_RANGE */
	SLUICE_CONTROL_no_crc_check,        /* a produced batch whose CRC does not match appended */
	SLUICE_CONTROL_replay_first_wins,   /* __consumer_offsets read back: a key's first commit kept, not its last */
	SLUICE_CONTROL_unanswered_marker_taken, /* a WriteTxnMarkers left unanswered taken as written */
	SLUICE_CONTROL_next_batch,          /* a read from inside a batch starts at the next batch */
	SLUICE_CONTROL_COUNT
};
extern int sluice_control;
#define SLUICE_CONTROL_OFF(name) (sluice_control == SLUICE_CONTROL_##name)
#else
#define SLUICE_CONTROL_OFF(name) 0
#endif

#endif
