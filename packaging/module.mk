# packaging/: `make deb`, the Debian packages in $(BUILD)/deb/ (sluice,
# libsluice-native1, libsluice-native-dev) from this build, with dpkg's
# tools (packaging/build-deb; docs/install.md). The units are
# packaging/systemd/, the maintainer scripts and control files
# packaging/debian/. /etc/sluice/sluiced.properties is written by
# config-doc from the key table, so it cannot drift from the code.
.PHONY: deb
deb: all $(BUILD)/config-doc
	$(Q)BUILD=$(BUILD) MAKE="$(MAKE)" packaging/build-deb

# make deb, then the packages: their contents, lintian (no error), the
# units through systemd-analyze verify, an installation into a throwaway
# root and its removal and purge, and the packaged broker started with
# the packaged configuration (tests/packaging_smoke.sh)
TEST_SCRIPTS += tests/packaging_smoke.sh
# make test builds what its scripts run before it runs them
test-bins: $(BUILD)/config-doc
