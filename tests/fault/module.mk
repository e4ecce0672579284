# tests/fault/module.mk — the fault suite (docs/fault-testing.md), root only.
# make test: the harness's own test (each network nemesis has its effect,
# nothing left behind: about 20 s)
TEST_SCRIPTS += tests/fault/test_netcluster.py
# the disk finding's regression tests (root): a full disk refuses with 56
# and takes produce again once space returns, a read-only one hands the
# leadership to an in-sync follower (about 13-22 s); a read-only one under
# the metadata quorum's log halts the node (about 20 s), and a full one
# under the active controller's halts it and another voter takes over
# (about 40 s)
TEST_SCRIPTS += tests/fault/test_disk_failures.py
# the short fault set: two 15 s scenarios through tests/fault/run.py
# --matrix quick (a majority/minority partition, a leader paused), failing
# on any anomaly: about 55 s
TEST_SCRIPTS += tests/fault/smoke.sh

# make fault: the three workloads on loopback through a leader's SIGKILL
# with DeleteRecords then caught as lost, and the group workload's zombie
# against the no-generation-check control broker and the normal one
# (tests/fault/test_workloads.py, about 80 s; the smoke set covers the same
# workloads under faults in make test), then the whole matrix (hours);
# writes docs/fault-results.md
.PHONY: fault
# Before it: the process, disk and clock nemeses each doing what it says on
# three loopback nodes (tests/fault/test_nemeses_node.py, about 40 s; the
# disk nemeses' effects are also make test's test_disk_failures.py). And
# the transactional drill (sluicectl drill txn-leader-loss, about 25 s with
# its cluster's start).
fault: all control-broker
	$(Q)/usr/bin/python3 tests/fault/test_nemeses_node.py
	$(Q)/usr/bin/python3 tests/integration/test_drill.py --long txn_leader_loss_holds_and_cleans_up
	$(Q)/usr/bin/python3 tests/fault/test_workloads.py
	$(Q)tests/fault/full.sh
