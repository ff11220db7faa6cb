/*
 * keys: the control plane's Ed25519 signing keys and their files.
 *
 * Control plane only (al_control): the sandbox side never links this.
 *
 * Data model:
 *   struct keys_signing  opaque, owned by the caller (keys_free): one
 *                        Ed25519 private key and its kid, the RFC 7638 JWK
 *                        thumbprint of the public half (base64url, 43 chars).
 *   A data directory (0700) holds:
 *     signing-key.pem    the current private key, PKCS#8 PEM, mode 0600,
 *                        created with O_EXCL and that mode (never chmod);
 *     jwks.json          the public keys verifiers accept, current first,
 *                        then earlier keys kept by rotation (bounded by
 *                        TOK_MAX_KEYS).
 * Errors: AL_OK or a negative AL_E_* code, with a one-line reason.
 */
#ifndef KEYS_H
#define KEYS_H

#include "token.h"

#include <stddef.h>
#include <stdint.h>

#define KEYS_PRIVATE_FILE "signing-key.pem"
#define KEYS_JWKS_FILE "jwks.json"

enum {
    KEYS_KID_LEN = 43,         /* base64url of a SHA-256 thumbprint */
    KEYS_MAX_PEM_BYTES = 8192, /* a private key file larger than this is refused */
    KEYS_PATH_MAX = 4096,      /* paths built from the data directory */
    KEYS_SEED_LEN = 32,        /* raw Ed25519 private key */
    KEYS_PRIVATE_MODE = 0600,  /* signing-key.pem */
    KEYS_JWKS_MODE = 0644,     /* jwks.json: public */
    KEYS_DIR_MODE = 0700,      /* the data directory when we create it */
};

struct keys_signing;

/* A fresh random key. */
int keys_generate(struct keys_signing **out, char *reason, size_t cap);
/* A key from a fixed 32-byte seed: for tests and fixtures only. */
int keys_from_seed(const uint8_t seed[KEYS_SEED_LEN], struct keys_signing **out, char *reason,
                   size_t cap);
/* Load a PKCS#8 PEM Ed25519 key. Refuses, with AL_E_PERM, a file whose mode
 * gives group or others any access; AL_E_NOENT when missing; AL_E_FORMAT
 * for anything but an unencrypted Ed25519 private key. */
int keys_load_private(const char *path, struct keys_signing **out, char *reason, size_t cap);
/* Write the private key as PKCS#8 PEM to a new file: O_CREAT|O_EXCL with
 * mode 0600 (AL_E_EXISTS if the path exists; a symlink is not followed). */
int keys_write_private(const struct keys_signing *k, const char *path, char *reason, size_t cap);
void keys_free(struct keys_signing *k);

/* The kid (owned by k). */
const char *keys_kid(const struct keys_signing *k);
/* The raw 32-byte public key. */
int keys_public_raw(const struct keys_signing *k, uint8_t x[TOK_KEY_LEN]);
/* RFC 7638 thumbprint of an Ed25519 public key, base64url, NUL-terminated
 * (cap >= KEYS_KID_LEN + 1). */
int keys_thumbprint(const uint8_t x[TOK_KEY_LEN], char *kid, size_t cap);
/* Ed25519 signature of msg (64 bytes into sig). */
int keys_sign(const struct keys_signing *k, const uint8_t *msg, size_t len,
              uint8_t sig[TOK_SIG_LEN]);

/* JWKS text with the public halves of keys[0..n), in that order. *out is
 * malloc'd (caller frees). */
int keys_jwks_json(const struct keys_signing *const *keys, size_t n, char **out, char *reason,
                   size_t cap);

struct keys_init_result {
    char kid[KEYS_KID_LEN + 1]; /* the new current key */
    size_t jwks_keys;           /* keys now published in jwks.json */
};

/*
 * keygen for a data directory: creates dir (mode 0700) if missing, writes a
 * new signing-key.pem and jwks.json. Without rotate an existing key is
 * never replaced (AL_E_EXISTS). With rotate the new key becomes current and
 * jwks.json keeps the previous key and earlier published keys after it
 * (oldest dropped beyond TOK_MAX_KEYS). jwks.json is published before the
 * new private key is installed, so every token minted verifies.
 */
int keys_init_dir(const char *dir, bool rotate, struct keys_init_result *res, char *reason,
                  size_t cap);
/* Build "dir/name" into out; AL_E_TOOBIG when it does not fit. */
int keys_path(const char *dir, const char *name, char *out, size_t cap);

#endif
