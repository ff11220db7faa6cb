/*
 * db_runner_key: the runner keys of the data layer (db.h "Runner keys"):
 * the hex SHA-256 of the key a sandbox's dialing runner must present
 * (rkey.h), kept in the sandbox's row beside its lease, so that every
 * replica of one database checks the same pin. This file checks inputs;
 * the backends store, each call in one statement.
 *
 * Who may pin: the first runner with a valid token for a sandbox without a
 * pin (pinned in the same statement that reads the pin: two replicas
 * racing pin one key, and both compare against it), airlockd for a local
 * runner it starts (fenced: only the owner), an admin's new enrollment
 * (forgets the pin).
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#include <string.h>

_Static_assert((int)DB_RUNNER_KEY_HEX == (int)DB_HASH_HEX, "one hash form");

static int db_runner_key_check(struct db *db, const char *sandbox_id, const char *h)
{
    int rc = db_check_name(db, "sandbox id", sandbox_id);
    if (rc != AL_OK || !h)
        return rc;
    bool ok = strnlen(h, DB_RUNNER_KEY_HEX + 1) == DB_RUNNER_KEY_HEX;
    for (size_t i = 0; ok && i < DB_RUNNER_KEY_HEX; i++)
        ok = (h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f');
    return ok ? AL_OK
              : db_fail(db, AL_E_INVAL, "a runner key's hash is %d lowercase hex digits",
                        DB_RUNNER_KEY_HEX);
}

int db_runner_key_pin(struct db *db, const char *sandbox_id, const char *hash_hex, char *pinned,
                      size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!hash_hex || !pinned || cap < DB_RUNNER_KEY_HEX + 1)
        return db_fail(db, AL_E_INVAL, "a hash to pin and room for the pin (%d bytes) wanted",
                       DB_RUNNER_KEY_HEX + 1);
    if ((rc = db_runner_key_check(db, sandbox_id, hash_hex)) != AL_OK)
        return rc;
    return db->be->runner_key_pin(db, sandbox_id, hash_hex, pinned);
}

int db_runner_key_set(struct db *db, const char *sandbox_id, const char *hash_hex, int64_t fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_runner_key_check(db, sandbox_id, hash_hex)) != AL_OK)
        return rc;
    if (fence < DB_NO_FENCE)
        return db_fail(db, AL_E_INVAL, "a fence is 0 or more (or DB_NO_FENCE)");
    return db->be->runner_key_set(db, sandbox_id, hash_hex, fence);
}
