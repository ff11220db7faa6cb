/*
 * db_secret: API keys, web session secrets and CSRF tokens: made, checked
 * for form, hashed (db_secret.c). Internal to the data layer: only its
 * db*.c files include it.
 */
#ifndef DB_SECRET_H
#define DB_SECRET_H

#include "db.h"

#include <stdbool.h>

/* hex(SHA-256(key text)) into hex[DB_HASH_HEX + 1]. */
int db_secret_hash(struct db *db, const char *key, char *hex);
/* Whether key is prefix (4 characters) + base64url of DB_KEY_RAW_LEN
 * bytes. Never echoes it. */
bool db_secret_wellformed(const char *key, const char *prefix);
/* Whether h is what db_secret_hash writes: DB_HASH_HEX lowercase hex digits. */
bool db_secret_handle_wellformed(const char *h);
/* A new secret prefix + base64url(DB_KEY_RAW_LEN random bytes) into
 * out[DB_KEY_LEN + 1], and its hash into hex[DB_HASH_HEX + 1]. */
int db_secret_new(struct db *db, const char *prefix, char *out, char *hex);

#endif
