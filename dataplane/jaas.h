/* dataplane/jaas.h — Kafka's JAAS config form, as its *.sasl.jaas.config
 * keys hold it: `<LoginModule class> <control flag> key="value" ... ;`.
 * One reader for its three users: a listener's PLAIN users
 * (user_<name>="<password>", dataplane/sasl.c), the broker's own login
 * between brokers (dataplane/sasl_client.c) and sluicectl's
 * --command-config (control/sluicectl_sec.c). Values are in double quotes
 * with no escapes; what follows the ';' is not read.
 *
 * Thread: any (@thread any); pure functions of their arguments.
 * Owns: nothing: an option points into the caller's string.
 * Errors: 0, or -EINVAL with err naming what failed (the key, the word
 * or the login module; never a value, which may be a password); or what
 * the caller's option function returned.
 */
#ifndef SLUICE_JAAS_H
#define SLUICE_JAAS_H

#include <stdbool.h>
#include <stddef.h>

/* The login module's kind, by the end of its class name. */
enum jaas_module { JAAS_MODULE_OTHER, JAAS_MODULE_PLAIN, JAAS_MODULE_SCRAM };

/* One key="value" option; both point into the parsed string (borrowed
 * for the call of the option function only). */
struct jaas_option {
	const char *key;
	size_t klen;
	const char *val;
	size_t vlen;
};

/* The login module and its control flag; they point into the parsed
 * string (borrowed while it lives). */
struct jaas_head {
	const char *module;
	size_t module_len;
	int kind;                         /* enum jaas_module */
	const char *flag;
	size_t flag_len;
};

/* Read jaas, calling opt(arg, o, err, errlen) for each option in order;
 * a negative return stops the walk and is returned (opt fills err).
 * head (may be NULL) gets the login module and flag. -EINVAL when the
 * module or the flag is missing, a third bare word stands where an option
 * should, an option comes before them, or a value is not in double
 * quotes. @thread any */
int jaas_parse(const char *jaas, struct jaas_head *head,
	       int (*opt)(void *arg, const struct jaas_option *o, char *err, size_t errlen), void *arg, char *err,
	       size_t errlen);

/* A login's username="..." and password="..." (Kafka's client and
 * inter-broker form) into user and password (the last of each wins).
 * Either may be absent: user is then "" and *have_password false; callers
 * say which they need. -EINVAL also for an empty username or one longer
 * than ulen - 1, or a password longer than plen - 1 (err never quotes
 * it). head (may be NULL) as for jaas_parse. @thread any */
int jaas_login(const char *jaas, struct jaas_head *head, char *user, size_t ulen, char *password, size_t plen,
	       bool *have_password, char *err, size_t errlen);

#endif
