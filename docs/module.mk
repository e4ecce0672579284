# docs/: the manual, one page per subject. `make docs` rewrites the generated
# parts in place: today the configuration table of docs/configuration.md,
# from control/config.c (tests/unit/test_config.c fails when they differ).
.PHONY: docs
docs: $(BUILD)/config-doc
	$(Q)$(BUILD)/config-doc docs/configuration.md

$(BUILD)/config-doc: $(BUILD)/obj/docs/config_doc.o $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $< -o $@ $(BUILD)/libsluice_core.a $(LDLIBS)
