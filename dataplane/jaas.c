/* dataplane/jaas.c — Kafka's JAAS config form (see dataplane/jaas.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dataplane/jaas.h"

#define JAAS_USAGE "expected <LoginModule> <flag> key=\"value\" ...;"

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int ends_with(const char *s, size_t len, const char *tail)
{
	size_t tl = strlen(tail);

	return len >= tl && !strncmp(s + len - tl, tail, tl);
}

/* Kafka's four control flags (JaasConfig's, any case). */
static int known_flag(const char *f, size_t len)
{
	static const char *const flags[] = { "required", "requisite", "sufficient", "optional" };

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (len == strlen(flags[i]) && !strncasecmp(f, flags[i], len))
			return 1;
	return 0;
}

static int clip(size_t len)
{
	return len > 80 ? 80 : (int)len;
}

int jaas_parse(const char *jaas, struct jaas_head *head,
	       int (*opt)(void *arg, const struct jaas_option *o, char *err, size_t errlen), void *arg, char *err,
	       size_t errlen)
{
	struct jaas_head h = { 0 };
	const char *p = jaas;
	int words = 0, rc;

	while (*p) {
		struct jaas_option o;
		const char *k;

		while (is_space(*p))
			p++;
		if (!*p || *p == ';')
			break;
		k = p;
		while (*p && *p != '=' && !is_space(*p) && *p != ';')
			p++;
		if (*p != '=') {
			/* the login module's class, then its control flag */
			size_t len = (size_t)(p - k);

			if (++words == 1) {
				h.module = k;
				h.module_len = len;
				h.kind = ends_with(k, len, "PlainLoginModule")	 ? JAAS_MODULE_PLAIN
					 : ends_with(k, len, "ScramLoginModule") ? JAAS_MODULE_SCRAM
										 : JAAS_MODULE_OTHER;
			} else if (words == 2) {
				if (!known_flag(k, len)) {
					snprintf(err, errlen, "the control flag '%.*s' is not required, requisite, "
						 "sufficient or optional", clip(len), k);
					return -EINVAL;
				}
				h.flag = k;
				h.flag_len = len;
			} else {
				snprintf(err, errlen, "expected key=\"value\" after the login module and its control "
					 "flag, not '%.*s'", clip(len), k);
				return -EINVAL;
			}
			continue;
		}
		o.key = k;
		o.klen = (size_t)(p - k);
		if (words < 2) {
			snprintf(err, errlen, "%s: %.*s= comes before the login module and its control flag",
				 JAAS_USAGE, clip(o.klen), k);
			return -EINVAL;
		}
		if (*++p != '"') {
			snprintf(err, errlen, "the value of %.*s must be in double quotes", clip(o.klen), k);
			return -EINVAL;
		}
		o.val = ++p;
		while (*p && *p != '"')
			p++;
		if (*p != '"') {
			snprintf(err, errlen, "the value of %.*s has no closing quote", clip(o.klen), k);
			return -EINVAL;
		}
		o.vlen = (size_t)(p - o.val);
		p++;
		if (opt && (rc = opt(arg, &o, err, errlen)) < 0)
			return rc;
	}
	if (words == 0) {
		snprintf(err, errlen, "no login module: %s", JAAS_USAGE);
		return -EINVAL;
	}
	if (words == 1) {
		snprintf(err, errlen, "no control flag after the login module '%.*s': %s", clip(h.module_len), h.module,
			 JAAS_USAGE);
		return -EINVAL;
	}
	if (head)
		*head = h;
	return 0;
}

struct login {
	char *user, *password;
	size_t ulen, plen;
	bool *have_password;
};

static int login_option(void *arg, const struct jaas_option *o, char *err, size_t errlen)
{
	struct login *l = arg;

	if (o->klen == 8 && !strncmp(o->key, "username", 8)) {
		if (!o->vlen || o->vlen >= l->ulen) {
			snprintf(err, errlen, "username is empty or longer than %zu bytes", l->ulen - 1);
			return -EINVAL;
		}
		memcpy(l->user, o->val, o->vlen);
		l->user[o->vlen] = 0;
	} else if (o->klen == 8 && !strncmp(o->key, "password", 8)) {
		if (o->vlen >= l->plen) {
			snprintf(err, errlen, "password is longer than %zu bytes", l->plen - 1);
			return -EINVAL;
		}
		memcpy(l->password, o->val, o->vlen);
		l->password[o->vlen] = 0;
		*l->have_password = true;
	}
	/* other options (user_<name> of a PLAIN listener, ...) are not a login's */
	return 0;
}

int jaas_login(const char *jaas, struct jaas_head *head, char *user, size_t ulen, char *password, size_t plen,
	       bool *have_password, char *err, size_t errlen)
{
	struct login l = { user, password, ulen, plen, have_password };
	int rc;

	*user = 0;
	*password = 0;
	*have_password = false;
	if ((rc = jaas_parse(jaas, head, login_option, &l, err, errlen)) < 0) {
		memset(password, 0, plen);
		*have_password = false;
		return rc;
	}
	return 0;
}
