/* dataplane/scram.h — the primitives SCRAM (RFC 5802, 7677) is made of,
 * shared by its server side (dataplane/sasl.c) and its client side
 * (dataplane/scram_client.c): the hash and HMAC of a SCRAM type, Hi()
 * (PBKDF2), base64, the nonce and the attribute reader. OpenSSL's
 * libcrypto underneath; pure CPU work, no I/O and no allocation.
 *
 * Thread: any (no state). Owns: nothing.
 * Errors: as each function says (lengths, or -1 / -errno).
 */
#ifndef SLUICE_SCRAM_H
#define SLUICE_SCRAM_H

#include <stddef.h>
#include <stdint.h>

/* Kafka's ScramMechanism numbers (AlterUserScramCredentials, the
 * metadata log's SCRAM records). */
enum sasl_scram_type { SASL_SCRAM_SHA_256 = 1, SASL_SCRAM_SHA_512 = 2 };

#define SCRAM_KEY_MAX 64         /* SHA-512's output */

/* The hash size of a SCRAM type (32, 64), 0 for another. */
int sasl_scram_key_len(int type);
/* HMAC(key, msg) with the type's hash into out (its key length). */
void scram_hmac(int type, const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t *out);
/* H(in) with the type's hash into out. */
void scram_hash(int type, const void *in, size_t len, uint8_t *out);
/* Hi(password, salt, i) (PBKDF2 with the type's HMAC) into out (the
 * key length): 0 or -EIO. */
int scram_salt_password(int type, const char *password, size_t pwlen, const uint8_t *salt, size_t salt_len,
			int32_t iterations, uint8_t *out);
/* Base64 of in into out (4 * ceil(len / 3) + 1 bytes, NUL-terminated);
 * returns the length without the NUL. */
size_t scram_b64_enc(const uint8_t *in, size_t len, char *out);
/* Decode base64 in[0..len) into out (at most cap bytes): the length, or
 * -1 for bad input or more than cap bytes. */
int scram_b64_dec(const char *in, size_t len, uint8_t *out, size_t cap);
/* A fresh nonce: base64 of 18 random bytes (24 characters + NUL, so cap
 * >= 25): 0 or -EIO. */
int scram_nonce(char *out, size_t cap);
/* The value of attribute `a` ("r=...") at *pp in the comma-separated
 * *pp..e: its start and length, *pp moved past it; -1 when the next
 * attribute is not `a`. */
int scram_attr(const char **pp, const char *e, char a, const char **v, size_t *vlen);

#endif
