/* control/console_assets.h — the web console's files (ui/src and the
 * chart library from ui/node_modules), compiled into sluiced at build
 * time by ui/embed.c (ui/module.mk writes $(BUILD)/gen/console_assets.c),
 * so the console works offline and on an air-gapped server.
 *
 * Thread: any (read-only data). Owns: nothing.
 */
#ifndef SLUICE_CONSOLE_ASSETS_H
#define SLUICE_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
	const char *path;             /* as requested: "/ui/console.js" */
	const char *type;             /* Content-Type */
	const unsigned char *data;
	size_t len;
};

/* Ended by an entry whose path is NULL. */
extern const struct console_asset console_assets[];

#endif
