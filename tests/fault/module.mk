# tests/fault/module.mk — the fault suite (docs/fault-testing.md), root only.
# make test: the harness's own test (each network nemesis has its effect,
# nothing left behind: about 20 s)
TEST_SCRIPTS += tests/fault/test_netcluster.py
# the short fault set: three 30 s scenarios through tests/fault/run.py
# --matrix quick (a leader killed, a majority/minority partition, a leader
# paused), failing on any anomaly: about 2 minutes
TEST_SCRIPTS += tests/fault/smoke.sh

# make fault: the whole matrix (hours); writes docs/fault-results.md
.PHONY: fault
fault: all
	$(Q)tests/fault/full.sh
