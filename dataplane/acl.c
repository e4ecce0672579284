/* dataplane/acl.c — ACL bindings and their matcher. See dataplane/acl.h.
 * @thread any */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "dataplane/acl.h"

static int icmp(int a, int b)
{
	return (a > b) - (a < b);
}

int acl_cmp(const struct acl_binding *x, const struct acl_binding *y)
{
	int c = icmp(x->res, y->res);

	if (!c)
		c = icmp(x->pat, y->pat);
	if (!c)
		c = strcmp(x->name, y->name);
	if (!c)
		c = strcmp(x->principal, y->principal);
	if (!c)
		c = strcmp(x->host, y->host);
	if (!c)
		c = icmp(x->op, y->op);
	if (!c)
		c = icmp(x->perm, y->perm);
	return c;
}

int acl_find(const struct acl_set *s, const struct acl_binding *b)
{
	int lo = 0, hi = s->n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2, c = acl_cmp(&s->b[mid], b);

		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -lo - 1;
}

static int str_ok(const char *s)
{
	return s && *s && strlen(s) < ACL_STR_MAX;
}

int acl_binding_valid(const struct acl_binding *b)
{
	const char *colon;

	if (b->res < ACL_RES_TOPIC || b->res > ACL_RES_TRANSACTIONAL_ID)
		return -EINVAL;
	if (b->pat != ACL_PAT_LITERAL && b->pat != ACL_PAT_PREFIXED)
		return -EINVAL;
	if (b->op < ACL_ALL || b->op > ACL_IDEMPOTENT_WRITE)
		return -EINVAL;
	if (b->perm != ACL_PERM_DENY && b->perm != ACL_PERM_ALLOW)
		return -EINVAL;
	if (!str_ok(b->name) || !str_ok(b->principal) || !str_ok(b->host))
		return -EINVAL;
	colon = strchr(b->principal, ':');
	if (!colon || colon == b->principal || !colon[1])
		return -EINVAL;
	if (b->res == ACL_RES_CLUSTER && (b->pat != ACL_PAT_LITERAL || strcmp(b->name, ACL_CLUSTER_NAME)))
		return -EINVAL;
	return 0;
}

int acl_filter_valid(const struct acl_filter *f)
{
	if (f->res < ACL_RES_ANY || f->res > ACL_RES_TRANSACTIONAL_ID)
		return -EINVAL;
	if (f->pat < ACL_PAT_ANY || f->pat > ACL_PAT_PREFIXED)
		return -EINVAL;
	if (f->op < ACL_ANY || f->op > ACL_IDEMPOTENT_WRITE)
		return -EINVAL;
	if (f->perm < ACL_PERM_ANY || f->perm > ACL_PERM_ALLOW)
		return -EINVAL;
	return 0;
}

/* Kafka's ResourcePatternFilter.matches. */
static int pattern_match(const struct acl_filter *f, const struct acl_binding *b)
{
	if (f->res != ACL_RES_ANY && f->res != b->res)
		return 0;
	switch (f->pat) {
	case ACL_PAT_ANY:
		return !f->name || !strcmp(f->name, b->name);
	case ACL_PAT_MATCH:
		if (!f->name)
			return 1;
		if (b->pat == ACL_PAT_LITERAL)
			return !strcmp(f->name, b->name) || !strcmp(b->name, ACL_WILDCARD);
		return !strncmp(f->name, b->name, strlen(b->name));
	default:
		return f->pat == b->pat && (!f->name || !strcmp(f->name, b->name));
	}
}

int acl_filter_match(const struct acl_filter *f, const struct acl_binding *b)
{
	return pattern_match(f, b) && (!f->principal || !strcmp(f->principal, b->principal)) &&
	       (!f->host || !strcmp(f->host, b->host)) && (f->op == ACL_ANY || f->op == b->op) &&
	       (f->perm == ACL_PERM_ANY || f->perm == b->perm);
}

/* Compare binding b's (res, pat, name) with a key whose name is the first
 * len bytes of name. */
static int key_cmp(const struct acl_binding *b, int res, int pat, const char *name, size_t len)
{
	int c = icmp(b->res, res);

	if (!c)
		c = icmp(b->pat, pat);
	if (!c) {
		c = strncmp(b->name, name, len);
		if (!c && b->name[len])
			c = 1;
	}
	return c;
}

/* The first binding of (res, pat, name[0..len)), or s->n. */
static int lower(const struct acl_set *s, int res, int pat, const char *name, size_t len)
{
	int lo = 0, hi = s->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (key_cmp(&s->b[mid], res, pat, name, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether ALLOW of `granted` allows `op` (Kafka's implied operations). */
static int allow_implies(int granted, int op)
{
	if (granted == ACL_ALL || granted == op)
		return 1;
	if (op == ACL_DESCRIBE)
		return granted == ACL_READ || granted == ACL_WRITE || granted == ACL_DELETE || granted == ACL_ALTER;
	if (op == ACL_DESCRIBE_CONFIGS)
		return granted == ACL_ALTER_CONFIGS;
	return 0;
}

struct verdict {
	int any, allow, deny;
};

static void scan(const struct acl_set *s, int res, int pat, const char *name, size_t len, const char *principal,
		 const char *host, int op, struct verdict *v)
{
	for (int i = lower(s, res, pat, name, len); i < s->n && !key_cmp(&s->b[i], res, pat, name, len); i++) {
		const struct acl_binding *b = &s->b[i];

		v->any = 1;
		if (strcmp(b->principal, principal) && strcmp(b->principal, "User:*"))
			continue;
		if (strcmp(b->host, host) && strcmp(b->host, ACL_WILDCARD))
			continue;
		if (b->perm == ACL_PERM_DENY && (b->op == ACL_ALL || b->op == op))
			v->deny = 1;
		else if (b->perm == ACL_PERM_ALLOW && allow_implies(b->op, op))
			v->allow = 1;
	}
}

int acl_authorize(const struct acl_set *s, const char *principal, const char *host, int op, int res,
		  const char *name, int allow_if_none)
{
	return acl_authorize_n(s, principal, host, op, res, name, strlen(name), allow_if_none);
}

int acl_authorize_n(const struct acl_set *s, const char *principal, const char *host, int op, int res,
		    const char *name, size_t len, int allow_if_none)
{
	struct verdict v = { 0, 0, 0 };

	if (s && s->n) {
		scan(s, res, ACL_PAT_LITERAL, name, len, principal, host, op, &v);
		if (len != 1 || name[0] != '*')
			scan(s, res, ACL_PAT_LITERAL, ACL_WILDCARD, 1, principal, host, op, &v);
		for (size_t k = 1; k <= len && !v.deny; k++)
			scan(s, res, ACL_PAT_PREFIXED, name, k, principal, host, op, &v);
	}
	if (v.deny)
		return 0;
	if (v.allow)
		return 1;
	return !v.any && allow_if_none;
}

int acl_w_cmp(const struct acl_binding *x, const struct acl_binding *y)
{
	int c = strcmp(x->principal, y->principal);

	if (!c)
		c = icmp(x->perm, y->perm);
	if (!c)
		c = icmp(x->pat, y->pat);
	if (!c)
		c = strcmp(x->name, y->name);
	if (!c)
		c = strcmp(x->host, y->host);
	if (!c)
		c = icmp(x->op, y->op);
	return c;
}

/* The index's bindings of one principal: [*lo, *hi). */
static void w_range(const struct acl_set *s, const char *principal, int *lo, int *hi)
{
	int a = 0, z = s->nw;

	while (a < z) {
		int mid = a + (z - a) / 2;

		if (strcmp(s->w[mid].principal, principal) < 0)
			a = mid + 1;
		else
			z = mid;
	}
	*lo = a;
	z = s->nw;
	while (a < z) {
		int mid = a + (z - a) / 2;

		if (strcmp(s->w[mid].principal, principal) <= 0)
			a = mid + 1;
		else
			z = mid;
	}
	*hi = a;
}

/* Compare an index binding (of the range's principal) with (perm, pat,
 * the first len bytes of name). */
static int w_key_cmp(const struct acl_binding *b, int perm, int pat, const char *name, size_t len)
{
	int c = icmp(b->perm, perm);

	if (!c)
		c = icmp(b->pat, pat);
	if (!c) {
		c = strncmp(b->name, name, len);
		if (!c && b->name[len])
			c = 1;
	}
	return c;
}

/* Whether [lo, hi) has a binding (perm, pat, name[0..len)) for host. */
static int w_has(const struct acl_set *s, int lo, int hi, int perm, int pat, const char *name, size_t len,
		 const char *host)
{
	int a = lo, z = hi;

	while (a < z) {
		int mid = a + (z - a) / 2;

		if (w_key_cmp(&s->w[mid], perm, pat, name, len) < 0)
			a = mid + 1;
		else
			z = mid;
	}
	for (; a < hi && !w_key_cmp(&s->w[a], perm, pat, name, len); a++)
		if (!strcmp(s->w[a].host, host) || !strcmp(s->w[a].host, ACL_WILDCARD))
			return 1;
	return 0;
}

int acl_write_any_topic(const struct acl_set *s, const char *principal, const char *host)
{
	int lo[2], hi[2], nr = 1;

	if (!s || !s->w || !s->nw)
		return 0;
	w_range(s, principal, &lo[0], &hi[0]);
	if (strcmp(principal, "User:*"))
		w_range(s, "User:*", &lo[nr], &hi[nr]), nr++;
	/* a LITERAL "*" DENY dominates every ALLOW; a LITERAL "*" ALLOW
	 * allows what no such DENY refuses */
	for (int r = 0; r < nr; r++)
		if (w_has(s, lo[r], hi[r], ACL_PERM_DENY, ACL_PAT_LITERAL, ACL_WILDCARD, 1, host))
			return 0;
	for (int r = 0; r < nr; r++)
		if (w_has(s, lo[r], hi[r], ACL_PERM_ALLOW, ACL_PAT_LITERAL, ACL_WILDCARD, 1, host))
			return 1;
	for (int r = 0; r < nr; r++)
		for (int i = lo[r]; i < hi[r]; i++) {
			const struct acl_binding *b = &s->w[i];
			size_t len = strlen(b->name);
			int dominated = 0;

			if (b->perm != ACL_PERM_ALLOW)
				continue;
			if (strcmp(b->host, host) && strcmp(b->host, ACL_WILDCARD))
				continue;
			for (int q = 0; q < nr && b->pat == ACL_PAT_LITERAL && !dominated; q++)
				dominated = w_has(s, lo[q], hi[q], ACL_PERM_DENY, ACL_PAT_LITERAL, b->name, len, host);
			for (size_t k = 1; k <= len && !dominated; k++)
				for (int q = 0; q < nr && !dominated; q++)
					dominated = w_has(s, lo[q], hi[q], ACL_PERM_DENY, ACL_PAT_PREFIXED, b->name, k, host);
			if (!dominated)
				return 1;
		}
	return 0;
}

static const char *const res_names[] = { "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID" };
static const char *const pat_names[] = { "UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED" };
static const char *const op_names[] = { "UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE",
					"ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
					"ALTER_CONFIGS", "IDEMPOTENT_WRITE" };
static const char *const perm_names[] = { "UNKNOWN", "ANY", "DENY", "ALLOW" };

#define NAMES(a) (int)(sizeof(a) / sizeof((a)[0]))

static const char *name_of(const char *const *names, int n, int v)
{
	return v >= 0 && v < n ? names[v] : "UNKNOWN";
}

/* Kafka's names, any case, "-" taken as "_" (sluicectl's "cluster-action");
 * the UNKNOWN value is not parsed. */
static int parse(const char *const *names, int n, const char *s)
{
	char buf[32];
	size_t i;

	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	for (i = 0; s[i]; i++)
		buf[i] = s[i] == '-' ? '_' : s[i];
	buf[i] = 0;
	for (int v = 1; v < n; v++)
		if (!strcasecmp(buf, names[v]))
			return v;
	return -EINVAL;
}

const char *acl_res_name(int res) { return name_of(res_names, NAMES(res_names), res); }
const char *acl_pat_name(int pat) { return name_of(pat_names, NAMES(pat_names), pat); }
const char *acl_op_name(int op) { return name_of(op_names, NAMES(op_names), op); }
const char *acl_perm_name(int perm) { return name_of(perm_names, NAMES(perm_names), perm); }
int acl_res_parse(const char *s) { return parse(res_names, NAMES(res_names), s); }
int acl_pat_parse(const char *s) { return parse(pat_names, NAMES(pat_names), s); }
int acl_op_parse(const char *s) { return parse(op_names, NAMES(op_names), s); }
int acl_perm_parse(const char *s) { return parse(perm_names, NAMES(perm_names), s); }
