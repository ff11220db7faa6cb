/*
 * api_wsess: a WebSocket opened with a web session ends with the session.
 * An upgrade is authenticated once; the connection it makes is then
 * watched (sesswatch.h): at sign-out here its session's connections are
 * closed at once, and every API_WSESS_CHECK_MS each watched session is
 * looked up in the database (db_session_live), so that one that expired,
 * idled out, was signed out through another airlockd on the same
 * database, or whose user was removed, closes its connections too; a
 * request that finds its session expired closes them at once. The close
 * is WEBSESS_CLOSE_ENDED (4401) with a reason that says which, as far as
 * this airlockd can tell (docs/web.md, docs/api.md).
 *
 * An open WebSocket is not a use of its session: the page's own requests
 * (its keepalive) are what keep a session from idling out.
 *
 * A connection made with an API key ends with its key the same way: every
 * API_WSESS_CHECK_MS its key is looked up (db_user_by_handle), and one no
 * user holds any more (the user was removed, here or through another
 * airlockd on the same database) closes its connections with the same
 * code, reason WEBSESS_CLOSE_KEY_GONE.
 *
 * Data model: a->watch and a->keywatch (struct sesswatch, one entry per
 * watched connection, as many as airlockd takes connections) hold each
 * session's or key's handle (the hash its row is keyed by, never the
 * secret) and the connection's wsi; struct conn's watched says which one
 * it is in.
 * Not here: the sign-out itself (api_session.c), the close frame (wsg).
 */
#include <libwebsockets.h>
#include <openssl/crypto.h>

#include "al_err.h"
#include "al_log.h"
#include "api_local.h"
#include "db.h"
#include "sesswatch.h"
#include "websess.h"
#include "wsg.h"

#define API_WSESS_CHECK_MS 1000       /* each watched session is looked up this often */
#define API_WSESS_LOOKUPS_PER_TICK 16 /* sessions looked up in one tick, at most */
#define API_WSESS_LOG_MS 60000u       /* a failing lookup is logged once per this */

_Static_assert(SESSWATCH_HANDLE_MAX == DB_SESSION_HANDLE_LEN, "a watch holds a session handle");

_Static_assert(SESSWATCH_HANDLE_MAX == DB_KEY_HANDLE_LEN, "a watch holds a key's handle");

int api_wsess_start(struct api *a)
{
    int rc = sesswatch_new(a->cfg.max_conns, API_WSESS_CHECK_MS, &a->watch);
    if (rc == AL_OK &&
        (rc = sesswatch_new(a->cfg.max_conns, API_WSESS_CHECK_MS, &a->keywatch)) != AL_OK) {
        sesswatch_free(a->watch);
        a->watch = NULL;
    }
    return rc;
}

void api_wsess_stop(struct api *a)
{
    sesswatch_free(a->watch);
    sesswatch_free(a->keywatch);
    a->watch = a->keywatch = NULL;
}

int api_wsess_watch(struct api *a, struct lws *wsi, struct conn *c, const struct who_via *via)
{
    if (!via->cookie) {
        int rc = sesswatch_add(a->keywatch, via->key_handle, wsi, uv_now(a->loop));
        if (rc == AL_OK)
            c->watched = API_WATCH_KEY;
        return rc;
    }
    char h[DB_SESSION_HANDLE_LEN + 1];
    int rc = db_session_handle(a->db, via->sid, h, sizeof h);
    if (rc == AL_OK)
        rc = sesswatch_add(a->watch, h, wsi, uv_now(a->loop));
    if (rc == AL_OK)
        c->watched = API_WATCH_SESSION;
    return rc;
}

void api_wsess_forget(struct api *a, struct lws *wsi, struct conn *c)
{
    if (!c || !c->watched)
        return;
    sesswatch_remove(c->watched == API_WATCH_KEY ? a->keywatch : a->watch, wsi);
    c->watched = 0;
}

/* sesswatch_end's function: the close, at the connection's next WRITEABLE. */
static void close_conn(void *why, void *conn)
{
    struct lws *wsi = conn;
    struct conn *c = api_ws_conn(wsi);
    if (!c)
        return;
    c->watched = 0;
    wsg_close_later(&c->ws, wsi, WEBSESS_CLOSE_ENDED, why);
}

static void end_session(struct api *a, const char *handle, const char *why)
{
    unsigned n = sesswatch_end(a->watch, handle, close_conn, (void *)why);
    if (n)
        api_log(a, 1, "%s: %u WebSocket%s closed", why, n, n == 1 ? "" : "s");
}

static void end_by_secret(struct api *a, const char *sid, const char *why)
{
    char h[DB_SESSION_HANDLE_LEN + 1];
    if (db_session_handle(a->db, sid, h, sizeof h) == AL_OK)
        end_session(a, h, why);
    OPENSSL_cleanse(h, sizeof h);
}

void api_wsess_signed_out(struct api *a, const char *sid)
{
    end_by_secret(a, sid, WEBSESS_CLOSE_SIGNED_OUT);
}

/* A request found the session expired (and db_session_use deleted it: a
 * later lookup could not tell why it is gone). */
void api_wsess_expired(struct api *a, const char *sid)
{
    end_by_secret(a, sid, WEBSESS_CLOSE_EXPIRED);
}

/* The keys due: each looked up; one no user holds closes its connections. */
static void keys_tick(struct api *a, uint64_t now)
{
    char h[SESSWATCH_HANDLE_MAX + 1];
    for (int i = 0;
         i < API_WSESS_LOOKUPS_PER_TICK && sesswatch_due(a->keywatch, now, h, sizeof h) == AL_OK;
         i++) {
        struct db_user u;
        int rc = db_user_by_handle(a->db, h, &u);
        if (rc == AL_E_NOENT) {
            unsigned n = sesswatch_end(a->keywatch, h, close_conn, (void *)WEBSESS_CLOSE_KEY_GONE);
            if (n)
                api_log(a, 1, "%s: %u WebSocket%s closed", WEBSESS_CLOSE_KEY_GONE, n,
                        n == 1 ? "" : "s");
        } else if (rc != AL_OK) {
            unsigned long k = al_lograte_hit(&a->log_wsess, now, API_WSESS_LOG_MS);
            if (k)
                api_log(a, 0, "cannot look up an API key (%lu times): %s", k, db_errmsg(a->db));
        }
    }
}

/*
 * The sessions and keys due: each looked up; one that ended closes its
 * connections. A lookup that fails (the database unreachable) keeps them
 * until the next one: requests through the credential fail meanwhile
 * anyway.
 */
void api_wsess_tick(struct api *a)
{
    char h[SESSWATCH_HANDLE_MAX + 1];
    uint64_t now = uv_now(a->loop);
    keys_tick(a, now);
    for (int i = 0;
         i < API_WSESS_LOOKUPS_PER_TICK && sesswatch_due(a->watch, now, h, sizeof h) == AL_OK;
         i++) {
        struct db_session s;
        int rc = db_session_live(a->db, h, api_now_ms(), &a->sess, &s);
        if (rc == AL_E_NOENT || rc == AL_E_EXPIRED) {
            end_session(a, h, rc == AL_E_EXPIRED ? WEBSESS_CLOSE_EXPIRED : WEBSESS_CLOSE_GONE);
        } else if (rc != AL_OK) {
            unsigned long n = al_lograte_hit(&a->log_wsess, now, API_WSESS_LOG_MS);
            if (n)
                api_log(a, 0, "cannot look up a web session (%lu times): %s", n, db_errmsg(a->db));
        }
    }
}
