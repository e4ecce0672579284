/* control/admin_token.h — the admin endpoint's bearer tokens
 * (admin.auth.token.file): a file of "PRINCIPAL TOKEN" lines, kept as the
 * SHA-256 of each token beside its principal.
 *
 * Thread: ctl (@thread ctl): the admin endpoint's (control/admin_http.c)
 * table, loaded at start and again on SIGHUP. Errors: 0 or -errno with
 * err naming the file (and the line).
 */
#ifndef SLUICE_ADMIN_TOKEN_H
#define SLUICE_ADMIN_TOKEN_H

#include <stddef.h>

struct admin_tokens;

/* Read path: a table in *out, or -EINVAL (-ENOMEM) with err naming the
 * file and the line (a file that others may read or anyone but its owner may
 * write is refused, as ssh refuses such a key). */
int admin_tokens_load(const char *path, struct admin_tokens **out, char *err, size_t errlen);
void admin_tokens_free(struct admin_tokens *t);
int admin_tokens_count(const struct admin_tokens *t);
/* The principal a presented token stands for, or NULL. Every entry is
 * compared (in constant time) whatever matches. */
const char *admin_tokens_find(const struct admin_tokens *t, const char *token, size_t len);

#endif
