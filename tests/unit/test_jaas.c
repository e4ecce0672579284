/* tests/unit/test_jaas.c — Kafka's JAAS config form (dataplane/jaas.h):
 * the login module's kind and flag, options in order with values that
 * hold '=' and ';', a login's username and password, and each malformed
 * form refused with a message naming what failed and never a value. */
#include <errno.h>
#include <string.h>

#include "dataplane/jaas.h"
#include "tests/unit/helpers.h"

struct seen {
	int n;
	char keys[4][32];
};

static int collect(void *arg, const struct jaas_option *o, char *err, size_t errlen)
{
	struct seen *s = arg;

	(void)err;
	(void)errlen;
	if (s->n < 4)
		snprintf(s->keys[s->n++], sizeof(s->keys[0]), "%.*s=%.*s", (int)o->klen, o->key, (int)o->vlen, o->val);
	return 0;
}

static int refuse_second(void *arg, const struct jaas_option *o, char *err, size_t errlen)
{
	int *n = arg;

	(void)o;
	if (++*n == 2) {
		snprintf(err, errlen, "second");
		return -ENOENT;
	}
	return 0;
}

Test(jaas, head_and_options_in_order)
{
	struct jaas_head h;
	struct seen s = { 0 };
	char err[256];

	cr_assert_eq(jaas_parse("org.apache.kafka.common.security.plain.PlainLoginModule required\n"
				"  user_a=\"b\"\tuser_x=\"y=;z\"; ignored", &h, collect, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(h.kind, JAAS_MODULE_PLAIN);
	cr_assert_eq(h.flag_len, 8);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.keys[0], "user_a=b");
	cr_assert_str_eq(s.keys[1], "user_x=y=;z");
	cr_assert_eq(jaas_parse("ScramLoginModule OPTIONAL;", &h, NULL, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(h.kind, JAAS_MODULE_SCRAM);
	cr_assert_eq(jaas_parse("com.example.Other sufficient", &h, NULL, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(h.kind, JAAS_MODULE_OTHER);
}

Test(jaas, malformed_forms_name_what_failed)
{
	static const struct {
		const char *jaas, *says;
	} cases[] = {
		{ "", "no login module" },
		{ "  ;", "no login module" },
		{ "PlainLoginModule", "no control flag after the login module 'PlainLoginModule'" },
		{ "PlainLoginModule maybe user_a=\"hush\";", "the control flag 'maybe' is not required" },
		{ "PlainLoginModule required stray user_a=\"hush\";", "not 'stray'" },
		{ "user_a=\"hush\" PlainLoginModule required;", "user_a= comes before the login module" },
		{ "PlainLoginModule required user_a=hush;", "the value of user_a must be in double quotes" },
		{ "PlainLoginModule required user_a=\"hush;", "the value of user_a has no closing quote" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct seen s = { 0 };

		cr_assert_eq(jaas_parse(cases[i].jaas, NULL, collect, &s, err, sizeof(err)), -EINVAL, "%s",
			     cases[i].jaas);
		cr_assert(strstr(err, cases[i].says), "%s: %s", cases[i].jaas, err);
		cr_assert(!strstr(err, "hush"), "%s", err);
	}
}

Test(jaas, an_option_function_stops_the_walk)
{
	char err[64];
	int n = 0;

	cr_assert_eq(jaas_parse("M required a=\"1\" b=\"2\" c=\"3\";", NULL, refuse_second, &n, err, sizeof(err)),
		     -ENOENT);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(err, "second");
}

Test(jaas, login_username_and_password)
{
	struct jaas_head h;
	char u[8], p[8], err[160];
	bool have;

	cr_assert_eq(jaas_login("ScramLoginModule required username=\"ann\" password=\"\" user_b=\"c\";", &h, u,
				sizeof(u), p, sizeof(p), &have, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(u, "ann");
	cr_assert(have);
	cr_assert_str_eq(p, "");
	cr_assert_eq(h.kind, JAAS_MODULE_SCRAM);
	cr_assert_eq(jaas_login("M required username=\"ann\";", NULL, u, sizeof(u), p, sizeof(p), &have, err,
				sizeof(err)), 0, "%s", err);
	cr_assert(!have);
	cr_assert_eq(jaas_login("M required password=\"secret\";", NULL, u, sizeof(u), p, sizeof(p), &have, err,
				sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(u, "");
	cr_assert(have);
	cr_assert_eq(jaas_login("M required username=\"\";", NULL, u, sizeof(u), p, sizeof(p), &have, err,
				sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "username is empty or longer than 7 bytes"), "%s", err);
	cr_assert_eq(jaas_login("M required username=\"ann\" password=\"longsecret\";", NULL, u, sizeof(u), p,
				sizeof(p), &have, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "password is longer than 7 bytes") && !strstr(err, "longsecret"), "%s", err);
	cr_assert(!have);
	cr_assert_str_eq(p, "");
}
