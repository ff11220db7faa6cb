/*
 * db_session: the web page's sign-ins in the data layer (db.h "Web
 * sessions"): add one (a secret and a CSRF token, shown once), use one
 * (both must match; expiry by an absolute lifetime and an idle limit, with
 * the clock passed in), follow one by its handle without using it (the
 * WebSockets it opened end with it), sign out, expire. Not here: the secrets' text and
 * hashes (db_secret.c), cookies and Origin checks (api.c), storing (the
 * backends' session_* calls).
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"
#include "db_secret.h"

#include <openssl/crypto.h>
#include <string.h>

static int db_check_policy(struct db *db, const struct db_session_policy *p)
{
    if (!p || p->ttl_ms < 1 || p->ttl_ms > DB_SESSION_TTL_MAX_MS || p->idle_ms < 0 ||
        p->idle_ms > p->ttl_ms)
        return db_fail(db, AL_E_INVAL, "session lifetime must be 1 ms..30 days, idle 0..lifetime");
    return AL_OK;
}

int db_session_add(struct db *db, const char *user, int64_t now, const struct db_session_policy *p,
                   char *id_out, size_t id_cap, char *csrf_out, size_t csrf_cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (id_out && id_cap > 0)
        id_out[0] = '\0';
    if (csrf_out && csrf_cap > 0)
        csrf_out[0] = '\0';
    if ((rc = db_check_name(db, "user name", user)) != AL_OK ||
        (rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    if (now < 0)
        return db_fail(db, AL_E_INVAL, "time before 1970");
    if (!id_out || id_cap < DB_SESSION_LEN + 1 || !csrf_out || csrf_cap < DB_SESSION_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the session (%d bytes each)",
                       DB_SESSION_LEN + 1);
    /* expired rows go first, so that they never count against the limit */
    if ((rc = db->be->session_expire(db, now, p->idle_ms)) != AL_OK)
        return rc;
    char id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    char id_hex[DB_HASH_HEX + 1], csrf_hex[DB_HASH_HEX + 1];
    rc = db_secret_new(db, DB_SESSION_PREFIX, id, id_hex);
    if (rc == AL_OK)
        rc = db_secret_new(db, DB_CSRF_PREFIX, csrf, csrf_hex);
    if (rc == AL_OK)
        rc = db->be->session_add(db, id_hex, csrf_hex, user, now, now + p->ttl_ms,
                                 DB_SESSIONS_PER_USER_MAX);
    if (rc == AL_OK) {
        memcpy(id_out, id, DB_SESSION_LEN + 1);
        memcpy(csrf_out, csrf, DB_SESSION_LEN + 1);
    }
    OPENSSL_cleanse(id, sizeof id);
    OPENSSL_cleanse(csrf, sizeof csrf);
    return rc;
}

static bool db_session_expired(const struct db_session *s, int64_t now,
                               const struct db_session_policy *p)
{
    return now >= s->expires_at || (p->idle_ms > 0 && now - s->last_seen >= p->idle_ms);
}

int db_session_use(struct db *db, const char *id, const char *csrf, int64_t now,
                   const struct db_session_policy *p, struct db_session *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    if (!db_secret_wellformed(id, DB_SESSION_PREFIX))
        return db_fail(db, AL_E_NOENT, "malformed session");
    char id_hex[DB_HASH_HEX + 1], csrf_hex[DB_HASH_HEX + 1], want[DB_HASH_HEX + 1];
    if ((rc = db_secret_hash(db, id, id_hex)) != AL_OK ||
        (rc = db->be->session_get(db, id_hex, out, want)) != AL_OK)
        return rc;
    if (db_session_expired(out, now, p)) {
        (void)db->be->session_remove(db, id_hex);
        return db_fail(db, AL_E_EXPIRED, "session expired");
    }
    if (!db_secret_wellformed(csrf, DB_CSRF_PREFIX))
        return db_fail(db, AL_E_PERM, "session used without its CSRF token");
    if ((rc = db_secret_hash(db, csrf, csrf_hex)) != AL_OK)
        return rc;
    if (CRYPTO_memcmp(csrf_hex, want, DB_HASH_HEX) != 0)
        return db_fail(db, AL_E_PERM, "session used with a wrong CSRF token");
    if ((rc = db->be->session_touch(db, id_hex, now)) != AL_OK)
        return rc;
    out->last_seen = now;
    return AL_OK;
}

_Static_assert((int)DB_SESSION_HANDLE_LEN == (int)DB_HASH_HEX,
               "a handle is the key of the session's row");

int db_session_handle(struct db *db, const char *id, char *out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out || cap < DB_SESSION_HANDLE_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the handle (%d bytes)",
                       DB_SESSION_HANDLE_LEN + 1);
    out[0] = '\0';
    if (!db_secret_wellformed(id, DB_SESSION_PREFIX))
        return db_fail(db, AL_E_NOENT, "malformed session");
    return db_secret_hash(db, id, out);
}

int db_session_live(struct db *db, const char *handle, int64_t now,
                    const struct db_session_policy *p, struct db_session *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    if (!db_secret_handle_wellformed(handle))
        return db_fail(db, AL_E_INVAL, "not a session handle");
    char csrf_hex[DB_HASH_HEX + 1];
    if ((rc = db->be->session_get(db, handle, out, csrf_hex)) != AL_OK)
        return rc;
    if (db_session_expired(out, now, p)) {
        (void)db->be->session_remove(db, handle);
        return db_fail(db, AL_E_EXPIRED, "session expired");
    }
    return AL_OK;
}

int db_session_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!db_secret_wellformed(id, DB_SESSION_PREFIX))
        return db_fail(db, AL_E_NOENT, "malformed session");
    char hex[DB_HASH_HEX + 1];
    if ((rc = db_secret_hash(db, id, hex)) != AL_OK)
        return rc;
    return db->be->session_remove(db, hex);
}

int db_session_expire(struct db *db, int64_t now, const struct db_session_policy *p)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    return db->be->session_expire(db, now, p->idle_ms);
}
