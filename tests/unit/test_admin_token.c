/* tests/unit/test_admin_token.c — the admin endpoint's bearer token file
 * (control/admin_token.h): lines parsed (comments, blank lines, spaces),
 * a token found with its principal and a near miss not, bad lines named
 * by file and line, a file others may read or the group may write refused
 * naming the file and its mode. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/admin_token.h"
#include "tests/unit/helpers.h"

static char path[64];

static void write_file(const char *text, mode_t mode)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/sluice-admin-token-XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
}

Test(admin_token, parse_and_find)
{
	struct admin_tokens *t;
	char err[256] = "";

	write_file("# tokens\n\nUser:ops   tok-1\n  User:prom\ttok-2  # not a comment: refused below\n", 0600);
	cr_assert_eq(admin_tokens_load(path, &t, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, ":4: want 'User:NAME TOKEN'"), "%s", err);
	unlink(path);
	write_file("# tokens\n\nUser:ops   tok-1\n  User:prom\ttok-2  \r\n", 0640);
	cr_assert_eq(admin_tokens_load(path, &t, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_eq(admin_tokens_count(t), 2);
	cr_assert_str_eq(admin_tokens_find(t, "tok-1", 5), "User:ops");
	cr_assert_str_eq(admin_tokens_find(t, "tok-2", 5), "User:prom");
	cr_assert_null(admin_tokens_find(t, "tok-", 4));
	cr_assert_null(admin_tokens_find(t, "tok-12", 6));
	cr_assert_null(admin_tokens_find(t, "", 0));
	admin_tokens_free(t);
}

Test(admin_token, refusals_name_the_file)
{
	static const struct { const char *text; mode_t mode; const char *want; } cases[] = {
		{ "User:ops tok\n", 0644, "permissions 0644 are too open" },
		{ "User:ops tok\n", 0620, "permissions 0620 are too open" },
		{ "ops tok\n", 0600, ":1: want" },
		{ "User: tok\n", 0600, ":1: want" },
		{ "User:ops\n", 0600, ":1: want" },
	};
	struct admin_tokens *t;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_file(cases[i].text, cases[i].mode);
		err[0] = 0;
		cr_assert_lt(admin_tokens_load(path, &t, err, sizeof(err)), 0, "case %zu", i);
		cr_assert(strstr(err, path) && strstr(err, cases[i].want), "case %zu: %s", i, err);
		unlink(path);
	}
	cr_assert_eq(admin_tokens_load("/nonexistent/tokens", &t, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "admin.auth.token.file: /nonexistent/tokens"), "%s", err);
}
