/*
 * db_lease: the leases of the data layer (db.h "Leases"): which replica
 * owns a sandbox's runner link, until when, and under which fencing token
 * (the fence, one more at every change of owner). This file checks inputs
 * and tells why a take was refused; the backends store, each call in one
 * statement reading the database's clock (never a replica's).
 *
 * Who may choose the owner: only the replica itself, by its own id; nothing
 * a runner or a client sends reaches these calls but the sandbox's id, and
 * the fence is computed by the database alone.
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#include <stdlib.h>
#include <string.h>

/* A replica id as db_replica.c makes them: "r-" and 24 lowercase hex. */
static int db_lease_check(struct db *db, const char *sandbox_id, const char *replica_id,
                          int64_t lease_ms)
{
    int rc = sandbox_id ? db_check_name(db, "sandbox id", sandbox_id) : AL_OK;
    if (rc != AL_OK)
        return rc;
    bool ok = replica_id && strnlen(replica_id, DB_REPLICA_ID_LEN + 1) == DB_REPLICA_ID_LEN &&
              !strncmp(replica_id, "r-", 2);
    for (size_t i = 2; ok && i < DB_REPLICA_ID_LEN; i++)
        ok = (replica_id[i] >= '0' && replica_id[i] <= '9') ||
             (replica_id[i] >= 'a' && replica_id[i] <= 'f');
    if (!ok)
        return db_fail(db, AL_E_INVAL, "a replica id is r- and 24 hex digits");
    if (lease_ms < 1)
        return db_fail(db, AL_E_INVAL, "a lease lasts at least 1 ms");
    return AL_OK;
}

int db_lease_take(struct db *db, const char *sandbox_id, const char *replica_id, int64_t stale_ms,
                  int64_t lease_ms, int64_t *fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_lease_check(db, sandbox_id, replica_id, lease_ms)) != AL_OK)
        return rc;
    if (stale_ms < 1 || !fence)
        return db_fail(db, AL_E_INVAL, "a replica's staleness is at least 1 ms; fence wanted");
    rc = db->be->lease_take(db, sandbox_id, replica_id, stale_ms, lease_ms, fence);
    if (rc != AL_E_STATE)
        return rc;
    struct db_sandbox *sb = malloc(sizeof *sb);
    if (!sb)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    rc = db->be->sandbox_get(db, sandbox_id, sb);
    if (rc == AL_OK)
        rc = db_fail(db, AL_E_STATE, "sandbox %s is held by replica %s (fence %lld)", sandbox_id,
                     sb->owner, (long long)sb->fence);
    free(sb);
    return rc;
}

int db_lease_take_free(struct db *db, const char *replica_id, int64_t stale_ms, int64_t lease_ms,
                       db_lease_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_lease_check(db, NULL, replica_id, lease_ms)) != AL_OK)
        return rc;
    if (stale_ms < 1 || !cb)
        return db_fail(db, AL_E_INVAL, "a replica's staleness is at least 1 ms; callback wanted");
    return db->be->lease_take_free(db, replica_id, stale_ms, lease_ms, cb, ctx);
}

int db_lease_move(struct db *db, const char *sandbox_id, const char *replica_id, int64_t lease_ms,
                  int64_t *fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_lease_check(db, sandbox_id, replica_id, lease_ms)) != AL_OK)
        return rc;
    if (!fence)
        return db_fail(db, AL_E_INVAL, "fence wanted");
    return db->be->lease_move(db, sandbox_id, replica_id, lease_ms, fence);
}

int db_lease_renew(struct db *db, const char *replica_id, int64_t lease_ms, db_lease_cb cb,
                   void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_lease_check(db, NULL, replica_id, lease_ms)) != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->lease_renew(db, replica_id, lease_ms, cb, ctx);
}

int db_lease_release(struct db *db, const char *replica_id)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_lease_check(db, NULL, replica_id, 1)) != AL_OK)
        return rc;
    return db->be->lease_release(db, replica_id);
}
