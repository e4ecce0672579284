# ui/: the web console (docs/console.md). Its files (ui/src) and the chart
# library (uPlot, from npm, pinned by ui/package-lock.json) are compiled
# into sluiced: ui/embed.c writes $(BUILD)/gen/console_assets.c, a table
# the admin endpoint serves under /ui/ (control/console_assets.h).

UI_SRCS   := $(wildcard ui/src/*)
UI_NPM    := ui/node_modules/.sluice-stamp
UI_UPLOT  := ui/node_modules/uplot/dist
UI_ASSETS := $(BUILD)/gen/console_assets.c
CORE_SRCS += $(UI_ASSETS)

# npm ci: exactly the versions ui/package-lock.json pins (run again when it
# changes); the registry is needed once, the build after that is offline
$(UI_NPM): ui/package-lock.json | $(SETUP_STAMP)
	@$(if $(Q),echo "  NPM     ui (npm ci)")
	$(Q)cd ui && npm ci --no-audit --no-fund --loglevel=error
	$(Q)touch $@

$(BUILD)/ui-embed: ui/embed.c | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 -O1 -Wall -Wextra -Werror $< -o $@

$(UI_ASSETS): $(UI_SRCS) $(UI_NPM) $(BUILD)/ui-embed
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  EMBED   $@")
	$(Q)$(BUILD)/ui-embed $@.tmp $(foreach f,$(UI_SRCS),/ui/$(notdir $(f))=$(f)) \
		/ui/uPlot.min.js=$(UI_UPLOT)/uPlot.iife.min.js /ui/uPlot.min.css=$(UI_UPLOT)/uPlot.min.css \
		/ui/LICENSE.uPlot.txt=ui/node_modules/uplot/LICENSE
	$(Q)mv $@.tmp $@
