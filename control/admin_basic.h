/* control/admin_basic.h — the admin endpoint's memory of HTTP Basic
 * credentials it verified, so that a dashboard scraping /metrics every few
 * seconds does not cost a PBKDF2 (the SCRAM check: thousands of HMACs) per
 * request. What is kept for a verified user:password is a keyed digest
 * of it, HMAC-SHA-256 under a random key of this process over the
 * credential's stored key, the user and the password, and when it was
 * verified: never the password, nothing that checks a password without
 * the key, which stays in memory only. A request presents its user and
 * password; their digest (one HMAC) is looked up. Bound to the credential:
 * a new password, salt or iteration count (AlterUserScramCredentials) gives
 * a new stored key, so the old entries match nothing from that moment;
 * a deleted user has no credential to look up. Bounded: ADMIN_BASIC_SLOTS
 * entries, each for ADMIN_BASIC_TTL_MS after its check; cleared on SIGHUP.
 *
 * Thread: ctl (@thread ctl): the endpoint's handlers.
 * Owns: its fixed table (no allocation).
 * Errors: none (a miss runs the full check).
 */
#ifndef SLUICE_ADMIN_BASIC_H
#define SLUICE_ADMIN_BASIC_H

#include <stddef.h>
#include <stdint.h>

#define ADMIN_BASIC_SLOTS 32
#define ADMIN_BASIC_TTL_MS 60000
#define ADMIN_BASIC_PASSWORD_MAX 1024 /* a longer password is always checked in full */

struct sasl_scram_cred;

struct admin_basic {
	uint8_t key[32];              /* random, this process's only */
	int keyed;                    /* 0: no random bytes, nothing remembered */
	struct {
		uint8_t digest[32];
		int64_t until_ms;         /* CLOCK_MONOTONIC; 0: free */
	} e[ADMIN_BASIC_SLOTS];
	uint64_t hits;                /* checks answered from here: metrics */
};

/* A fresh key, nothing remembered. 0, or -EIO without random bytes (then
 * nothing is ever remembered). */
int admin_basic_init(struct admin_basic *c);
/* Forget everything (SIGHUP; the endpoint's end). */
void admin_basic_clear(struct admin_basic *c);
/* The digest of user:password for cred (its stored key) into digest;
 * 1 when it was verified less than ADMIN_BASIC_TTL_MS ago, else 0. */
int admin_basic_lookup(struct admin_basic *c, const struct sasl_scram_cred *cred, const char *user,
		       const char *password, size_t pwlen, int64_t now_ms, uint8_t digest[32]);
/* The full check of that digest's password succeeded: remember it (the
 * oldest entry makes room). */
void admin_basic_remember(struct admin_basic *c, const uint8_t digest[32], int64_t now_ms);

#endif
