/* control/sluicectl_user.c — `sluicectl user create|delete|list`: SCRAM
 * users through Kafka's AlterUserScramCredentials (ApiKey 51) and
 * DescribeUserScramCredentials (50), as kafka-configs --entity-type users
 * does: the salt and the salted password (PBKDF2, the mechanism's hash) are
 * made here, the broker derives StoredKey and ServerKey and writes them into
 * the metadata log; the password never leaves this process.
 * Exit 0 done, 1 refused (Kafka's error named), 2 bad usage.
 * @thread main */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "control/sluicectl.h"

#define SCRAM_SHA_256 1
#define SCRAM_SHA_512 2

static const char *mech_name(int m)
{
	return m == SCRAM_SHA_256 ? "SCRAM-SHA-256" : m == SCRAM_SHA_512 ? "SCRAM-SHA-512" : "UNKNOWN";
}

/* --mechanism: 1, 2, or 0 for both (delete) / -1 bad. */
static int mech_opt(const char *v, int dflt)
{
	if (!v)
		return dflt;
	return !strcmp(v, "SCRAM-SHA-256") ? SCRAM_SHA_256 : !strcmp(v, "SCRAM-SHA-512") ? SCRAM_SHA_512 : -1;
}

static int alter(struct ctl *c, struct kafka_alter_user_scram_credentials_request *req, const char *doing,
		 const char *what)
{
	struct kclient *k = ctl_client(c);
	struct kafka_alter_user_scram_credentials_response *resp;
	int rc = 0;

	ctl_version(c, k, KAFKA_ALTER_USER_SCRAM_CREDENTIALS_KEY, 0);
	resp = ctl_call(c, k, KAFKA_ALTER_USER_SCRAM_CREDENTIALS_KEY, 0, req);
	for (int32_t i = 0; i < resp->Results.count; i++) {
		const struct kafka_alter_user_scram_credentials_response_alter_user_scram_credentials_result *r =
			&resp->Results.items[i];

		if (r->ErrorCode)
			rc = ctl_kafka_error(c, r->ErrorCode, r->ErrorMessage, "%s user '%.*s'", doing, r->User.len,
					     r->User.ptr);
	}
	if (!rc && c->json) {
		json_obj_begin(NULL);
		json_str("result", what);
		json_obj_end();
		json_end();
	} else if (!rc) {
		printf("%s\n", what);
	}
	return rc;
}

static int cmd_user_create(struct ctl *c, const struct args *a)
{
	const char *pw = opt_get(a, "password"), *it = opt_get(a, "iterations");
	int mech = mech_opt(opt_get(a, "mechanism"), SCRAM_SHA_512);
	struct kafka_alter_user_scram_credentials_request req;
	struct kafka_alter_user_scram_credentials_request_scram_credential_upsertion up;
	uint8_t salt[32], salted[64];
	int64_t iterations = 4096;
	int kl = mech == SCRAM_SHA_256 ? 32 : 64;

	if (a->npos != 1)
		return ctl_usage(c, "user create takes one user name");
	if (mech < 0)
		return ctl_usage(c, "--mechanism is SCRAM-SHA-256 or SCRAM-SHA-512");
	if (!pw)
		pw = getenv("SLUICECTL_PASSWORD");
	if (!pw)
		return ctl_usage(c, "--password (or SLUICECTL_PASSWORD in the environment) is needed");
	if (it && !parse_i64(it, 1, INT32_MAX, &iterations))
		return ctl_usage(c, "--iterations wants a number, not '%s'", it);
	if (RAND_bytes(salt, sizeof(salt)) != 1 ||
	    PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, sizeof(salt), (int)iterations,
			      mech == SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512(), kl, salted) != 1)
		return ctl_fail(c, "cannot salt the password (OpenSSL)");
	kafka_alter_user_scram_credentials_request_init(&req);
	memset(&up, 0, sizeof(up));
	up.Name = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
	up.Mechanism = (int8_t)mech;
	up.Iterations = (int32_t)iterations;
	up.Salt = (struct kafka_bytes){ salt, sizeof(salt) };
	up.SaltedPassword = (struct kafka_bytes){ salted, kl };
	req.Deletions.count = 0;
	req.Upsertions.items = &up;
	req.Upsertions.count = 1;
	return alter(c, &req, "creating", "created");
}

static int cmd_user_delete(struct ctl *c, const struct args *a)
{
	int mech = mech_opt(opt_get(a, "mechanism"), 0);
	struct kafka_alter_user_scram_credentials_request req;
	struct kafka_alter_user_scram_credentials_request_scram_credential_deletion del;

	if (a->npos != 1)
		return ctl_usage(c, "user delete takes one user name");
	if (mech < 0)
		return ctl_usage(c, "--mechanism is SCRAM-SHA-256 or SCRAM-SHA-512");
	if (!mech) {
		/* both: each one the user has (a request may not name a user twice) */
		struct kclient *k = ctl_client(c);
		struct kafka_describe_user_scram_credentials_request dq;
		struct kafka_describe_user_scram_credentials_request_user_name un;
		struct kafka_describe_user_scram_credentials_response *dr;
		int rc = 0;

		kafka_describe_user_scram_credentials_request_init(&dq);
		un.Name = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
		dq.Users.items = &un;
		dq.Users.count = 1;
		dr = ctl_call(c, k, KAFKA_DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0, &dq);
		if (dr->Results.count != 1 || dr->Results.items[0].ErrorCode)
			return ctl_kafka_error(c, dr->Results.count == 1 ? dr->Results.items[0].ErrorCode : KERR_UNKNOWN_SERVER_ERROR,
					       dr->Results.count == 1 ? dr->Results.items[0].ErrorMessage
								      : (struct kafka_str){ NULL, -1 },
					       "user '%s'", a->pos[0]);
		for (int32_t i = 0; i < dr->Results.items[0].CredentialInfos.count && !rc; i++) {
			kafka_alter_user_scram_credentials_request_init(&req);
			del.Name = un.Name;
			del.Mechanism = dr->Results.items[0].CredentialInfos.items[i].Mechanism;
			req.Deletions.items = &del;
			req.Deletions.count = 1;
			req.Upsertions.count = 0;
			rc = alter(c, &req, "deleting", "deleted");
		}
		return rc;
	}
	kafka_alter_user_scram_credentials_request_init(&req);
	del.Name = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
	del.Mechanism = (int8_t)mech;
	req.Deletions.items = &del;
	req.Deletions.count = 1;
	req.Upsertions.count = 0;
	return alter(c, &req, "deleting", "deleted");
}

static int cmd_user_list(struct ctl *c, const struct args *a)
{
	struct kclient *k = ctl_client(c);
	struct kafka_describe_user_scram_credentials_request dq;
	struct kafka_describe_user_scram_credentials_response *dr;
	static const char *heads[] = { "USER", "MECHANISM", "ITERATIONS" };
	struct table t;

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	kafka_describe_user_scram_credentials_request_init(&dq);
	dq.Users.count = -1;   /* every user */
	ctl_version(c, k, KAFKA_DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0);
	dr = ctl_call(c, k, KAFKA_DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0, &dq);
	if (dr->ErrorCode)
		return ctl_kafka_error(c, dr->ErrorCode, dr->ErrorMessage, "listing users");
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("users");
	} else {
		table_init(&t, 3, heads);
		table_right(&t, 2);
	}
	for (int32_t i = 0; i < dr->Results.count; i++) {
		const struct kafka_describe_user_scram_credentials_response_describe_user_scram_credentials_result *r =
			&dr->Results.items[i];

		for (int32_t j = 0; j < r->CredentialInfos.count; j++) {
			const struct kafka_describe_user_scram_credentials_response_credential_info *ci =
				&r->CredentialInfos.items[j];

			if (c->json) {
				json_obj_begin(NULL);
				json_strn("user", r->User.ptr, r->User.len);
				json_str("mechanism", mech_name(ci->Mechanism));
				json_int("iterations", ci->Iterations);
				json_obj_end();
			} else {
				table_add(&t, kstr(r->User), mech_name(ci->Mechanism), fmt("%d", ci->Iterations));
			}
		}
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else {
		table_print(&t);
		table_fini(&t);
	}
	return 0;
}

static const struct opt_spec create_opts[] = {
	{ "password", 0, "PASSWORD", "the password (or SLUICECTL_PASSWORD in the environment, kept out of ps)" },
	{ "mechanism", 'm', "MECH", "SCRAM-SHA-512 (default) or SCRAM-SHA-256" },
	{ "iterations", 0, "N", "PBKDF2 iterations, 4096 (default) to 16384" },
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec delete_opts[] = {
	{ "mechanism", 'm', "MECH", "only this mechanism's credential (default: every one the user has)" },
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec list_opts[] = {
	{ NULL, 0, NULL, NULL },
};

const struct cmd user_cmds[] = {
	{ "user", "create", "NAME", "add or replace a SCRAM user (AlterUserScramCredentials)", create_opts,
	  "SLUICECTL_PASSWORD=s3cret sluicectl user create alice\n"
	  "sluicectl user create bob --password s3cret --mechanism SCRAM-SHA-256 --iterations 8192",
	  cmd_user_create },
	{ "user", "delete", "NAME", "remove a SCRAM user's credentials (AlterUserScramCredentials)", delete_opts,
	  "sluicectl user delete alice\nsluicectl user delete bob --mechanism SCRAM-SHA-256", cmd_user_delete },
	{ "user", "list", "", "the SCRAM users, their mechanisms and iterations (DescribeUserScramCredentials)",
	  list_opts, "sluicectl user list\nsluicectl user list --format json", cmd_user_list },
};

const int user_ncmds = sizeof user_cmds / sizeof user_cmds[0];
