/* control/sluicectl_features.c — `sluicectl features describe` and
 * `sluicectl features upgrade --metadata N`, Kafka's kafka-features
 * describe and upgrade: the metadata.version levels a node supports and
 * the cluster's finalized one (ApiVersions v3's tagged fields), and
 * UpdateFeatures (ApiKey 57) to raise it, sent to the active controller
 * as Kafka's admin client sends it. The levels are Sluice's own
 * (docs/cluster.md, rolling upgrades).
 * Exit 0 done, 1 refused (the broker's reason printed), 2 bad usage.
 * @thread main */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl.h"

static int cmd_features_describe(struct ctl *c, const struct args *a)
{
	struct kafka_api_versions_request req;
	struct kafka_api_versions_response *resp;
	struct kclient *k = ctl_client(c);
	int16_t ver;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	ver = ctl_version(c, k, KAFKA_API_VERSIONS_KEY, 3);
	if (ver < 3)
		return ctl_fail(c, "the broker answers ApiVersions v%d: no features before v3", ver);
	kafka_api_versions_request_init(&req);
	req.ClientSoftwareName = (struct kafka_str){ "sluicectl", 9 };
	req.ClientSoftwareVersion = (struct kafka_str){ "1", 1 };
	resp = ctl_call(c, k, KAFKA_API_VERSIONS_KEY, ver, &req);
	if (resp->ErrorCode)
		return ctl_kafka_error(c, resp->ErrorCode, (struct kafka_str){ NULL, -1 }, "asking the features");
	if (c->json) {
		json_obj_begin(NULL);
		json_int("finalized_epoch", resp->FinalizedFeaturesEpoch);
		json_arr_begin("features");
	} else {
		printf("%-20s %-14s %-14s %-10s %s\n", "FEATURE", "SUPPORTED-MIN", "SUPPORTED-MAX", "FINALIZED", "EPOCH");
	}
	for (int32_t i = 0; i < resp->SupportedFeatures.count; i++) {
		const struct kafka_api_versions_response_supported_feature_key *s = &resp->SupportedFeatures.items[i];
		int16_t fin = -1;

		for (int32_t j = 0; j < resp->FinalizedFeatures.count; j++)
			if (resp->FinalizedFeatures.items[j].Name.len == s->Name.len && s->Name.len > 0 &&
			    !memcmp(resp->FinalizedFeatures.items[j].Name.ptr, s->Name.ptr, (size_t)s->Name.len))
				fin = resp->FinalizedFeatures.items[j].MaxVersionLevel;
		if (c->json) {
			json_obj_begin(NULL);
			json_strn("name", s->Name.ptr, s->Name.len);
			json_int("supported_min", s->MinVersion);
			json_int("supported_max", s->MaxVersion);
			json_int_or_null("finalized", fin);
			json_obj_end();
		} else {
			printf("%-20s %-14d %-14d %-10s %lld\n", kstr(s->Name), s->MinVersion, s->MaxVersion,
			       fin >= 0 ? fmt("%d", fin) : "-", (long long)resp->FinalizedFeaturesEpoch);
		}
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	}
	return 0;
}

static int cmd_features_upgrade(struct ctl *c, const struct args *a)
{
	const char *level = opt_get(a, "metadata");
	struct kafka_update_features_request req;
	struct kafka_update_features_request_feature_update_key key;
	struct kafka_update_features_response *resp;
	static const char *const none[1] = { NULL };
	struct kclient *k;
	int32_t ctrl;
	int16_t ver;
	int64_t v;
	int rc = 0;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	if (!level)
		return ctl_usage(c, "features upgrade needs --metadata N (the metadata.version level to raise to)");
	if (!parse_i64(level, 1, INT16_MAX, &v))
		return ctl_usage(c, "--metadata wants a level (1, 2, ...), not '%s'", level);
	kafka_update_features_request_init(&req);
	memset(&key, 0, sizeof(key));
	key.Feature = (struct kafka_str){ "metadata.version", 16 };
	key.MaxVersionLevel = (int16_t)v;
	key.UpgradeType = 1;   /* upgrade only */
	req.timeoutMs = c->timeout_ms;
	req.FeatureUpdates.items = &key;
	req.FeatureUpdates.count = 1;
	req.ValidateOnly = opt_has(a, "validate-only");
	/* to the active controller the Metadata answer names: another node
	 * answers NOT_CONTROLLER */
	ctrl = ctl_metadata(c, none, 0)->ControllerId;
	k = ctrl >= 0 ? ctl_node_of(c, ctrl) : NULL;
	if (!k)
		k = ctl_client(c);
	ver = ctl_version(c, k, KAFKA_UPDATE_FEATURES_KEY, 1);
	if (req.ValidateOnly && ver < 1)
		return ctl_fail(c, "the broker serves UpdateFeatures v0 only: no --validate-only");
	resp = ctl_call(c, k, KAFKA_UPDATE_FEATURES_KEY, ver, &req);
	if (resp->ErrorCode)
		return ctl_kafka_error(c, resp->ErrorCode, resp->ErrorMessage, "raising metadata.version to %lld",
				       (long long)v);
	for (int32_t i = 0; i < resp->Results.count; i++) {
		const struct kafka_update_features_response_updatable_feature_result *r = &resp->Results.items[i];

		if (r->ErrorCode)
			rc = ctl_kafka_error(c, r->ErrorCode, r->ErrorMessage, "raising %s to %lld", kstr(r->Feature),
					     (long long)v);
	}
	if (rc)
		return rc;
	if (c->json) {
		json_obj_begin(NULL);
		json_str("feature", "metadata.version");
		json_int("level", v);
		json_bool("validate_only", req.ValidateOnly);
		json_obj_end();
		json_end();
	} else {
		printf("metadata.version %s %lld\n", req.ValidateOnly ? "can be raised to" : "is now", (long long)v);
	}
	return 0;
}

static const struct opt_spec describe_opts[] = {
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec upgrade_opts[] = {
	{ "metadata", 0, "N", "the metadata.version level to raise the cluster to (docs/cluster.md)" },
	{ "validate-only", 0, NULL, "check that every broker supports it, change nothing" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd features_cmds[] = {
	{ "features", "describe", "", "metadata.version: this node's levels and the cluster's (ApiVersions v3)",
	  describe_opts,
	  "sluicectl features describe\nsluicectl features describe --format json", cmd_features_describe },
	{ "features", "upgrade", "", "raise metadata.version once every broker supports it (UpdateFeatures)",
	  upgrade_opts,
	  "sluicectl features upgrade --metadata 2\nsluicectl features upgrade --metadata 2 --validate-only",
	  cmd_features_upgrade },
};

const int features_ncmds = sizeof features_cmds / sizeof features_cmds[0];
