/* dataplane/topic_name.h — what a topic may be called: Kafka's legal names,
 * and the internal names that belong to the broker itself.
 *
 * Thread: any (pure functions of their arguments, no state).
 *
 * Internal topics are the broker's own logs. No client may create, delete,
 * grow, reconfigure, write to or trim one (Kafka's rule, and more: Kafka
 * lets AlterConfigs change its internal topics). `__cluster_metadata` is
 * the metadata log; its directory `<data.dir>/__cluster_metadata-0` is the
 * one a topic of that name would get, so letting a client create and
 * delete it would delete the metadata log (issue 17). A new internal topic
 * is added to topic_name_internal's table and to nothing else.
 */
#ifndef SLUICE_TOPIC_NAME_H
#define SLUICE_TOPIC_NAME_H

#include <stdint.h>
#include <string.h>

#define TOPIC_NAME_MAX 249
#define TOPIC_CLUSTER_METADATA "__cluster_metadata"
#define TOPIC_CONSUMER_OFFSETS "__consumer_offsets"
#define TOPIC_TRANSACTION_STATE "__transaction_state"

/* The partition of n that Kafka gives a group id or transactional id s of
 * len bytes (its partitionFor): Java's String.hashCode, Kafka's Utils.abs
 * (0 for INT32_MIN), modulo n (ids are mostly ASCII, where the UTF-16 hash
 * is the byte hash). */
static inline int32_t topic_key_partition(const char *s, size_t len, int32_t n)
{
	int32_t h = 0;

	for (size_t i = 0; i < len; i++)
		h = (int32_t)(31u * (uint32_t)h + (unsigned char)s[i]);
	return (int32_t)((h == INT32_MIN ? 0 : (h < 0 ? -h : h)) % (n > 0 ? n : 1));
}

/* Kafka's legal topic name: 1-249 characters of [a-zA-Z0-9._-], not "."
 * or "..". `len` bytes at `p` (not NUL-terminated). */
static inline int topic_name_valid(const char *p, int32_t len)
{
	if (!p || len <= 0 || len > TOPIC_NAME_MAX)
		return 0;
	if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
		return 0;
	for (int32_t i = 0; i < len; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* 1 when the name is one of the broker's internal topics. */
static inline int topic_name_internal(const char *p, int32_t len)
{
	static const char *const internal[] = { TOPIC_CLUSTER_METADATA, TOPIC_CONSUMER_OFFSETS, TOPIC_TRANSACTION_STATE };

	if (!p || len <= 0)
		return 0;
	for (unsigned i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		if ((size_t)len == strlen(internal[i]) && !memcmp(p, internal[i], (size_t)len))
			return 1;
	return 0;
}

#endif
