/* storage/controls.c — the control build's switch (storage/controls.h):
 * env SLUICE_CONTROL read once before main. Compiled only into
 * BUILD/control/sluiced (tests/fault/controls.mk), never into the broker. */
#ifndef SLUICE_CONTROLS
#error "storage/controls.c belongs to the control build only (-DSLUICE_CONTROLS)"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/controls.h"
#include "storage/slog.h"

int sluice_control;

static const char *const names[SLUICE_CONTROL_COUNT] = {
	[SLUICE_CONTROL_ack_before_isr] = "ack-before-isr",
	[SLUICE_CONTROL_no_dedup] = "no-dedup",
	[SLUICE_CONTROL_no_seq_check] = "no-seq-check",
	[SLUICE_CONTROL_no_truncate] = "no-truncate",
	[SLUICE_CONTROL_no_generation_check] = "no-generation-check",
	[SLUICE_CONTROL_lso_ignored] = "lso-ignored",
	[SLUICE_CONTROL_end_out_of_range] = "end-out-of-range",
	[SLUICE_CONTROL_no_crc_check] = "no-crc-check",
	[SLUICE_CONTROL_replay_first_wins] = "replay-first-wins",
	[SLUICE_CONTROL_unanswered_marker_taken] = "unanswered-marker-taken",
	[SLUICE_CONTROL_next_batch] = "next-batch",
};

__attribute__((constructor)) static void control_from_env(void)
{
	const char *v = getenv("SLUICE_CONTROL");

	if (!v || !*v) {
		slog(SLOG_INFO, "CONTROL BUILD (test only): SLUICE_CONTROL unset, every protection on"); /* style: allow start-up, before main */
		return;
	}
	for (int i = 1; i < SLUICE_CONTROL_COUNT; i++)
		if (!strcmp(v, names[i])) {
			sluice_control = i;
			slog(SLOG_WARN, /* style: allow start-up, before main */
				"CONTROL BUILD (test only): protection '%s' is OFF: broken on purpose", v);
			return;
		}
	{
		char known[512];
		size_t k = 0;

		known[0] = '\0';
		for (int i = 1; i < SLUICE_CONTROL_COUNT && k < sizeof(known); i++) {
			int w = snprintf(known + k, sizeof(known) - k, " %s", names[i]);

			k += w > 0 ? (size_t)w : 0;
		}
		slog(SLOG_ERR, "SLUICE_CONTROL=%s: unknown control; known:%s", v, known); /* style: allow start-up */
	}
	exit(2);
}
