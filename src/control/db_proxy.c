/*
 * db_proxy: the credential proxy's credentials in the data layer (db.h
 * "Proxy credentials"): bind one to a live terminal and its upstreams,
 * look one up for an upstream, revoke a terminal's, revoke those of every
 * terminal that ended (at start), read a terminal's newest. Not here:
 * minting and hashing a credential (proxy.c: the data layer only ever
 * sees its SHA-256), the check of a request (proxy.c's gate), storing (the
 * backends' proxy_* calls).
 *
 * Data model: a credential is one row; its upstreams are stored as one
 * text "a,b" (names of [a-z0-9_-], 1..DB_PROXY_NAME_MAX each, no
 * duplicates, at most DB_PROXY_UPSTREAMS_MAX): a lookup reads the row and
 * decides here, so that both backends answer the same.
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#include <stdlib.h>
#include <string.h>

_Static_assert((int)DB_PROXY_HASH_HEX == (int)DB_HASH_HEX, "one hash form");

static bool db_proxy_hash_ok(const char *h)
{
    if (!h || strnlen(h, DB_PROXY_HASH_HEX + 1) != DB_PROXY_HASH_HEX)
        return false;
    for (size_t i = 0; i < DB_PROXY_HASH_HEX; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return false;
    return true;
}

static int db_proxy_check_hash(struct db *db, const char *h)
{
    return db_proxy_hash_ok(h) ? AL_OK
                               : db_fail(db, AL_E_INVAL,
                                         "a proxy credential's hash must be %d "
                                         "lowercase hex digits",
                                         DB_PROXY_HASH_HEX);
}

static int db_proxy_check_upstream(struct db *db, const char *name)
{
    return name && db_proxy_name_valid(name, strnlen(name, DB_PROXY_NAME_MAX + 1))
               ? AL_OK
               : db_fail(db, AL_E_INVAL, "an upstream's name must be 1 to %d of a-z 0-9 _ -",
                         DB_PROXY_NAME_MAX);
}

/* Whether the stored list "a,b" holds name. */
static bool db_proxy_opens(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

static bool db_proxy_live(enum db_term_state s)
{
    return s == DB_TERM_OPENING || s == DB_TERM_RUNNING;
}

/* The n names joined by ',' into out[DB_PROXY_UPSTREAMS_TEXT_MAX + 1]. */
static int db_proxy_join(struct db *db, const char *const *upstreams, size_t n, char *out)
{
    if (!upstreams || n == 0 || n > DB_PROXY_UPSTREAMS_MAX)
        return db_fail(db, AL_E_INVAL, "a proxy credential opens 1 to %d upstreams",
                       DB_PROXY_UPSTREAMS_MAX);
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int rc = db_proxy_check_upstream(db, upstreams[i]);
        if (rc != AL_OK)
            return rc;
        if (db_proxy_opens(out, upstreams[i]))
            return db_fail(db, AL_E_INVAL, "upstream %s is named twice", upstreams[i]);
        size_t len = strlen(upstreams[i]);
        if (o)
            out[o++] = ',';
        memcpy(out + o, upstreams[i], len + 1);
        o += len;
    }
    return AL_OK;
}

int db_proxy_add(struct db *db, const char *hash_hex, const char *terminal_id,
                 const char *const *upstreams, size_t n)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    char list[DB_PROXY_UPSTREAMS_TEXT_MAX + 1];
    if ((rc = db_proxy_check_hash(db, hash_hex)) != AL_OK ||
        (rc = db_check_name(db, "terminal id", terminal_id)) != AL_OK ||
        (rc = db_proxy_join(db, upstreams, n, list)) != AL_OK)
        return rc;
    struct db_terminal *t = malloc(sizeof *t); /* argv and env buffers: large */
    if (!t)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    rc = db->be->terminal_get(db, terminal_id, t);
    bool live = rc == AL_OK && db_proxy_live(t->state);
    enum db_term_state st = rc == AL_OK ? t->state : DB_TERM_LOST;
    free(t);
    if (rc != AL_OK)
        return rc;
    if (!live)
        return db_fail(db, AL_E_STATE, "terminal %s is %s: it gets no proxy credential",
                       terminal_id, db_term_state_name(st));
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->proxy_add(db, hash_hex, terminal_id, list, now);
}

int db_proxy_lookup(struct db *db, const char *hash_hex, const char *upstream, char *terminal_out,
                    size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (terminal_out && cap > 0)
        terminal_out[0] = '\0';
    if (!terminal_out || cap < DB_NAME_MAX + 1)
        return db_fail(db, AL_E_INVAL, "no room for the terminal id (%d bytes)", DB_NAME_MAX + 1);
    if ((rc = db_proxy_check_hash(db, hash_hex)) != AL_OK ||
        (rc = db_proxy_check_upstream(db, upstream)) != AL_OK)
        return rc;
    struct db_proxy p;
    enum db_term_state st = DB_TERM_LOST;
    if ((rc = db->be->proxy_get(db, hash_hex, &p, &st)) != AL_OK)
        return rc;
    /* one message for every refusal: a caller may pass it on */
    if (p.revoked || !db_proxy_live(st) || !db_proxy_opens(p.upstreams, upstream))
        return db_fail(db, AL_E_NOENT, "no live proxy credential for upstream %s", upstream);
    memcpy(terminal_out, p.terminal_id, strlen(p.terminal_id) + 1);
    return AL_OK;
}

int db_proxy_revoke_terminal(struct db *db, const char *terminal_id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    int64_t now = 0;
    if ((rc = db_check_name(db, "terminal id", terminal_id)) != AL_OK ||
        (rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->proxy_revoke_terminal(db, terminal_id, now);
}

int db_proxy_revoke_ended(struct db *db)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->proxy_revoke_ended(db, now);
}

int db_proxy_of_terminal(struct db *db, const char *terminal_id, struct db_proxy *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_name(db, "terminal id", terminal_id)) != AL_OK)
        return rc;
    return db->be->proxy_of_terminal(db, terminal_id, out);
}
