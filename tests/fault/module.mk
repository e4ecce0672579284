# tests/fault/module.mk — the fault suite (docs/fault-testing.md), root only.
# make test: the harness's own test (each network nemesis has its effect,
# nothing left behind: about 20 s)
TEST_SCRIPTS += tests/fault/test_netcluster.py
