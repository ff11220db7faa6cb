/*
 * db_user: the users of the data layer (db.h "Users"): add one with a new
 * API key shown once, find a user by key, list, remove. Not here: the key
 * text and its hash (db_secret.c), storing (the backends' user_* calls).
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"
#include "db_secret.h"

#include <openssl/crypto.h>
#include <string.h>

int db_user_add(struct db *db, const char *name, enum db_role role, char *key_out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (key_out && cap > 0)
        key_out[0] = '\0';
    if ((rc = db_check_name(db, "user name", name)) != AL_OK)
        return rc;
    if (!db_role_name(role))
        return db_fail(db, AL_E_INVAL, "role must be admin, operator or viewer");
    if (!key_out || cap < DB_KEY_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the API key (%d bytes)", DB_KEY_LEN + 1);
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;

    char key[DB_KEY_LEN + 1], hex[DB_HASH_HEX + 1];
    rc = db_secret_new(db, DB_KEY_PREFIX, key, hex);
    if (rc == AL_OK)
        rc = db->be->user_add(db, name, role, hex, now);
    if (rc == AL_OK)
        memcpy(key_out, key, DB_KEY_LEN + 1);
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

int db_user_by_key(struct db *db, const char *key, struct db_user *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if (!db_secret_wellformed(key, DB_KEY_PREFIX))
        return db_fail(db, AL_E_INVAL, "malformed API key (expected %s + %d base64url characters)",
                       DB_KEY_PREFIX, DB_KEY_LEN - (int)(sizeof DB_KEY_PREFIX - 1));
    char hex[DB_HASH_HEX + 1];
    if ((rc = db_secret_hash(db, key, hex)) != AL_OK)
        return rc;
    return db->be->user_by_hash(db, hex, out);
}

int db_user_key_handle(struct db *db, const char *key, char *out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out || cap < DB_KEY_HANDLE_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the handle (%d bytes)", DB_KEY_HANDLE_LEN + 1);
    out[0] = '\0';
    if (!db_secret_wellformed(key, DB_KEY_PREFIX))
        return db_fail(db, AL_E_INVAL, "malformed API key");
    return db_secret_hash(db, key, out);
}

int db_user_by_handle(struct db *db, const char *handle, struct db_user *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if (!db_secret_handle_wellformed(handle))
        return db_fail(db, AL_E_INVAL, "not a key's handle");
    return db->be->user_by_hash(db, handle, out);
}

int db_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->user_list(db, cb, ctx);
}

int db_user_remove(struct db *db, const char *name)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "user name", name)) != AL_OK)
        return rc;
    return db->be->user_remove(db, name);
}
