/* control/admin_token.c — the admin endpoint's bearer tokens (see
 * admin_token.h). */
#include "control/admin_token.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#define TOKEN_MAX 4096          /* bytes of one token */
#define PRINCIPAL_MAX 256

struct admin_token {
	uint8_t hash[SHA256_DIGEST_LENGTH];
	char principal[PRINCIPAL_MAX];
};

struct admin_tokens {
	int n;
	struct admin_token *v;
};

static int is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int admin_tokens_load(const char *path, struct admin_tokens **out, char *err, size_t errlen)
{
	struct admin_tokens *t;
	struct stat st;
	char line[PRINCIPAL_MAX + TOKEN_MAX + 16];
	int lineno = 0, rc = 0;
	FILE *f;

	*out = NULL;
	if (!(f = fopen(path, "r"))) {
		snprintf(err, errlen, "admin.auth.token.file: %s: %s", path, strerror(errno));
		return -EINVAL;   /* a configuration error: exit 2 */
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "admin.auth.token.file: %s: not a regular file", path);
		fclose(f);
		return -EINVAL;
	}
	if (st.st_mode & (S_IRWXO | S_IWGRP)) {
		snprintf(err, errlen, "admin.auth.token.file: %s: permissions %04o are too open: others may %s it "
			 "(chmod 600 or 640)", path, (unsigned)(st.st_mode & 07777),
			 st.st_mode & S_IRWXO ? "read or write" : "write");
		fclose(f);
		return -EINVAL;
	}
	if (!(t = calloc(1, sizeof(*t)))) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *principal, *tok, *e;
		size_t plen, tlen;
		struct admin_token *nv;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "admin.auth.token.file: %s:%d: line longer than %zu bytes", path, lineno,
				 sizeof(line) - 2);
			rc = -EINVAL;
			break;
		}
		while (is_space(*p))
			p++;
		if (!*p || *p == '#')
			continue;
		principal = p;
		while (*p && !is_space(*p))
			p++;
		plen = (size_t)(p - principal);
		while (is_space(*p))
			p++;
		tok = p;
		while (*p && !is_space(*p))
			p++;
		tlen = (size_t)(p - tok);
		for (e = p; is_space(*e); e++)
			;
		if (!tlen || *e || strncmp(principal, "User:", 5) || plen <= 5 || plen >= PRINCIPAL_MAX ||
		    tlen > TOKEN_MAX) {
			snprintf(err, errlen, "admin.auth.token.file: %s:%d: want 'User:NAME TOKEN' (a principal, then "
				 "one token of at most %d bytes)", path, lineno, TOKEN_MAX);
			rc = -EINVAL;
			break;
		}
		if (!(nv = realloc(t->v, (size_t)(t->n + 1) * sizeof(*nv)))) {
			rc = -ENOMEM;
			break;
		}
		t->v = nv;
		SHA256((const unsigned char *)tok, tlen, t->v[t->n].hash);
		memcpy(t->v[t->n].principal, principal, plen);
		t->v[t->n].principal[plen] = 0;
		t->n++;
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	if (rc < 0) {
		admin_tokens_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void admin_tokens_free(struct admin_tokens *t)
{
	if (!t)
		return;
	if (t->v)
		OPENSSL_cleanse(t->v, (size_t)t->n * sizeof(*t->v));
	free(t->v);
	free(t);
}

int admin_tokens_count(const struct admin_tokens *t)
{
	return t ? t->n : 0;
}

const char *admin_tokens_find(const struct admin_tokens *t, const char *token, size_t len)
{
	uint8_t h[SHA256_DIGEST_LENGTH];
	const char *found = NULL;

	if (!t || !len || len > TOKEN_MAX)
		return NULL;
	SHA256((const unsigned char *)token, len, h);
	for (int i = 0; i < t->n; i++)
		if (!CRYPTO_memcmp(h, t->v[i].hash, sizeof(h)) && !found)
			found = t->v[i].principal;
	OPENSSL_cleanse(h, sizeof(h));
	return found;
}
