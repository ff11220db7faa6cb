/*
 * db_replica: the replicas of the data layer (db.h "Replicas"): the
 * airlockd processes serving one database, each registered under an id
 * that is random at every start of the process, renewing its heartbeat,
 * and marked stopped by a clean stop. This file checks inputs and makes
 * ids; the backends store, and read the database's clock inside each
 * statement (never the caller's: replicas' clocks may differ).
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#define DB_REPLICA_ID_PREFIX "r-"
enum { DB_REPLICA_ID_PREFIX_LEN = 2 };
_Static_assert(DB_REPLICA_ID_PREFIX_LEN + 2 * DB_REPLICA_ID_RANDOM == DB_REPLICA_ID_LEN,
               "a replica id is its prefix and the hex of its random bytes");

/* The URL schemes of a replica's address: what another replica dials. */
static const char *const db_replica_schemes[] = {"ws://", "wss://"};

int db_replica_new_id(struct db *db, char *out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out || cap < DB_REPLICA_ID_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the replica id (%d bytes)",
                       DB_REPLICA_ID_LEN + 1);
    uint8_t raw[DB_REPLICA_ID_RANDOM];
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        return db_fail(db, AL_E_CRYPTO, "no random bytes for the replica id");
    static const char digits[] = "0123456789abcdef";
    memcpy(out, DB_REPLICA_ID_PREFIX, DB_REPLICA_ID_PREFIX_LEN);
    for (size_t i = 0; i < sizeof raw; i++) {
        out[DB_REPLICA_ID_PREFIX_LEN + 2 * i] = digits[raw[i] >> 4];
        out[DB_REPLICA_ID_PREFIX_LEN + 2 * i + 1] = digits[raw[i] & 0xf];
    }
    out[DB_REPLICA_ID_LEN] = '\0';
    return AL_OK;
}

static bool db_replica_id_valid(const char *s)
{
    if (!s || strncmp(s, DB_REPLICA_ID_PREFIX, DB_REPLICA_ID_PREFIX_LEN) != 0 ||
        strnlen(s, DB_REPLICA_ID_LEN + 1) != DB_REPLICA_ID_LEN)
        return false;
    for (size_t i = DB_REPLICA_ID_PREFIX_LEN; i < DB_REPLICA_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool db_replica_address_valid(const char *s)
{
    if (!s)
        return false;
    size_t n = strnlen(s, DB_REPLICA_ADDR_MAX + 1);
    if (n > DB_REPLICA_ADDR_MAX)
        return false;
    bool scheme = false;
    for (size_t i = 0; i < sizeof db_replica_schemes / sizeof db_replica_schemes[0]; i++) {
        size_t sl = strlen(db_replica_schemes[i]);
        if (n > sl && strncmp(s, db_replica_schemes[i], sl) == 0)
            scheme = true;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return false;
    return scheme;
}

static int db_replica_check_id(struct db *db, const char *id)
{
    return db_replica_id_valid(id)
               ? AL_OK
               : db_fail(db, AL_E_INVAL, "a replica id is r- and 24 hex digits");
}

int db_replica_beat(struct db *db, const char *id, const char *address)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_replica_check_id(db, id)) != AL_OK)
        return rc;
    if (!db_replica_address_valid(address))
        return db_fail(db, AL_E_INVAL,
                       "a replica's address is a ws:// or wss:// URL of at most %d characters",
                       DB_REPLICA_ADDR_MAX);
    return db->be->replica_beat(db, id, address);
}

int db_replica_stop(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_replica_check_id(db, id)) != AL_OK)
        return rc;
    return db->be->replica_stop(db, id);
}

int db_replica_list(struct db *db, int64_t stale_ms, db_replica_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    if (stale_ms < 1)
        return db_fail(db, AL_E_INVAL, "a replica's staleness is at least 1 ms");
    return db->be->replica_list(db, stale_ms, cb, ctx);
}

int db_replica_set_jwks(struct db *db, const char *id, const char *jwks)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_replica_check_id(db, id)) != AL_OK)
        return rc;
    if (!jwks || !jwks[0])
        return db_fail(db, AL_E_INVAL, "a replica's public keys are wanted");
    if ((rc = db_check_text(db, "a replica's public keys", jwks, DB_REPLICA_JWKS_MAX)) != AL_OK)
        return rc;
    return db->be->replica_set_jwks(db, id, jwks);
}

int db_replica_jwks_list(struct db *db, db_replica_jwks_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->replica_jwks_list(db, cb, ctx);
}

int db_replica_prune(struct db *db, int64_t keep_ms)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (keep_ms < 1)
        return db_fail(db, AL_E_INVAL, "replicas are kept at least 1 ms");
    return db->be->replica_prune(db, keep_ms);
}
