#!/usr/bin/env bash
# The controls of tests/fault/test_controls.py that need one broker (3 to
# 11 s): what `make test` runs. `make fault-controls` runs them all (the
# cluster ones too, about a minute).
exec /usr/bin/python3 "$(dirname "$0")/test_controls.py" normal_build_has_no_controls unknown_control_refused no_dedup_duplicates \
  no_seq_check_reorders lso_ignored_shows_aborted no_generation_check_stale_commit end_out_of_range_resets \
  no_crc_check_unexpected replay_first_wins_commits_backwards next_batch_skips
