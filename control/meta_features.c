/* control/meta_features.c — this node's supported range of
 * metadata.version (control/meta_features.h). @thread any */
#include "control/meta_features.h"
#include "storage/slog.h"

#include <stdio.h>
#include <stdlib.h>

int16_t meta_features_local_max(void)
{
	static int16_t max;   /* 0: not read yet; the same value on every read */
	const char *s;
	char *end;
	long v;

	if (max)
		return max;
	s = getenv("SLUICE_TEST_METADATA_VERSION_MAX");
	v = s && *s ? strtol(s, &end, 10) : 0;
	if (s && *s && (*end || v < META_MV_MIN || v > META_MV_MAX)) {
		slog(SLOG_WARN, "SLUICE_TEST_METADATA_VERSION_MAX=%s is not a level between %d and %d: "
			"ignored", s, META_MV_MIN, META_MV_MAX);
		v = 0;
	}
	max = (int16_t)(v ? v : META_MV_MAX);
	return max;
}
