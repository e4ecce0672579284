/* tests/unit/test_docs.c — pages of docs/ that restate a table in code are
 * checked against it (STYLE 27): the Kafka APIs and versions that
 * docs/kafka-protocol.md lists are those ApiVersions advertises. (The
 * configuration table is checked by test_config, the metrics table by
 * tests/integration/test_metrics.py.) Run from the repository root, as
 * make test does. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka/kafka_msgs.h"

/* The text of the page's section under HEADING, up to the next "## ",
 * with every run of whitespace made one space. NULL: no page or section. */
static char *section(const char *path, const char *heading)
{
	FILE *f = fopen(path, "r");
	char *page = malloc(1 << 20), *out;
	size_t len;

	if (!f) {
		free(page);
		return NULL;
	}
	len = fread(page, 1, (1 << 20) - 1, f);
	page[len] = 0;
	fclose(f);
	char *b = strstr(page, heading), *e;

	if (!b) {
		free(page);
		return NULL;
	}
	b += strlen(heading);
	e = strstr(b, "\n## ");
	if (e)
		*e = 0;
	out = malloc(strlen(b) + 2);
	char *o = out;

	*o++ = ' ';
	for (; *b; b++) {
		if (*b == ' ' || *b == '\n' || *b == '\t') {
			if (o[-1] != ' ')
				*o++ = ' ';
		} else {
			*o++ = *b;
		}
	}
	*o = 0;
	free(page);
	return out;
}

Test(docs, kafka_protocol_lists_the_advertised_api_versions)
{
	char *text = section("docs/kafka-protocol.md", "\n## Kafka APIs implemented\n");

	if (!text)
		cr_skip_test("docs/kafka-protocol.md not found (not run from the repository root)");

	struct kafka_api_versions_response r;
	struct kafka_api_versions_response_api_version keys[KAFKA_API_COUNT];
	int n = kafka_api_versions_fill(&r, keys, KAFKA_API_COUNT);

	cr_assert_gt(n, 0);
	for (int i = 0; i < n; i++) {
		const struct kafka_api *api = kafka_api_find(keys[i].ApiKey);
		char want[96];

		cr_assert(api);
		if (keys[i].MinVersion == keys[i].MaxVersion)
			snprintf(want, sizeof(want), " %s %d", api->name, keys[i].MinVersion);
		else
			snprintf(want, sizeof(want), " %s %d-%d", api->name, keys[i].MinVersion,
				 keys[i].MaxVersion);
		const char *p = strstr(text, want);
		char next = p ? p[strlen(want)] : 0;

		cr_expect(p && !(next >= '0' && next <= '9') && next != '-',
			  "docs/kafka-protocol.md does not list \"%s\" as ApiVersions advertises it", want + 1);
	}

	/* and lists nothing else: every "Name N" or "Name N-M" is one of them */
	regex_t re;
	regmatch_t m;
	int listed = 0;

	cr_assert_eq(regcomp(&re, " [A-Z][A-Za-z]+ [0-9]+(-[0-9]+)?[^0-9-]", REG_EXTENDED), 0);
	for (const char *p = text; !regexec(&re, p, 1, &m, 0); p += m.rm_eo - 1)
		listed++;
	regfree(&re);
	cr_expect_eq(listed, n, "docs/kafka-protocol.md lists %d APIs, ApiVersions advertises %d", listed, n);
	free(text);
}
