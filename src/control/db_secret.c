/*
 * db_secret: the secrets of the data layer: API keys ("alk_"), web session
 * secrets ("als_") and their CSRF tokens ("alc_"), each a prefix and the
 * strict, canonical base64url of DB_KEY_RAW_LEN random bytes. Only
 * hex(SHA-256(text)) is ever stored; a secret's text is shown once and
 * cleansed from every buffer here. Not here: which table keeps the hash
 * (db_user.c, db_session.c).
 */
#include "db_secret.h"

#include "al_err.h"
#include "b64url.h"
#include "db_backend.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>

enum { DB_HASH_LEN = 32 }; /* SHA-256 */

_Static_assert(DB_KEY_LEN == sizeof DB_KEY_PREFIX - 1 + B64U_ENC_LEN(DB_KEY_RAW_LEN),
               "DB_KEY_LEN matches the key's text form");
_Static_assert(DB_SESSION_LEN == DB_KEY_LEN && DB_SESSION_RAW_LEN == DB_KEY_RAW_LEN &&
                   sizeof DB_SESSION_PREFIX == sizeof DB_KEY_PREFIX &&
                   sizeof DB_CSRF_PREFIX == sizeof DB_KEY_PREFIX,
               "session secrets and CSRF tokens have the form of API keys");

/* hex(SHA-256(key text)) into hex[DB_HASH_HEX + 1]. */
int db_secret_hash(struct db *db, const char *key, char *hex)
{
    unsigned char md[DB_HASH_LEN];
    unsigned int mdlen = 0;
    if (EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != DB_HASH_LEN)
        return db_fail(db, AL_E_CRYPTO, "SHA-256 failed");
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < DB_HASH_LEN; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 0xf];
    }
    hex[DB_HASH_HEX] = '\0';
    return AL_OK;
}

/* Whether s is prefix (4 characters) + base64url of 32 bytes: the text
 * form of API keys, session secrets and CSRF tokens. Never echoes it. */
bool db_secret_wellformed(const char *key, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (!key || strnlen(key, DB_KEY_LEN + 1) != DB_KEY_LEN || strncmp(key, prefix, plen) != 0)
        return false;
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t n = 0;
    int rc = b64u_decode(key + plen, DB_KEY_LEN - plen, raw, sizeof raw, &n);
    OPENSSL_cleanse(raw, sizeof raw);
    return rc == AL_OK && n == DB_KEY_RAW_LEN;
}

/* A new secret prefix + base64url(DB_KEY_RAW_LEN random bytes) into
 * out[DB_KEY_LEN + 1], and its hash into hex[DB_HASH_HEX + 1]. */
bool db_secret_handle_wellformed(const char *h)
{
    if (!h || strlen(h) != DB_HASH_HEX)
        return false;
    for (size_t i = 0; i < DB_HASH_HEX; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return false;
    return true;
}

int db_secret_new(struct db *db, const char *prefix, char *out, char *hex)
{
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t plen = strlen(prefix);
    memcpy(out, prefix, plen + 1); /* with its NUL: out is a string at every step */
    int rc = AL_OK;
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        rc = db_fail(db, AL_E_CRYPTO, "no random bytes for a secret");
    else if (b64u_encode(raw, sizeof raw, out + plen, DB_KEY_LEN + 1 - plen, NULL) != AL_OK)
        rc = db_fail(db, AL_E_CRYPTO, "cannot encode a secret");
    else
        rc = db_secret_hash(db, out, hex);
    OPENSSL_cleanse(raw, sizeof raw);
    return rc;
}
