/*
 * api_session: the web page's sessions, /v1/session (docs/web.md,
 * docs/security.md): the sign-in (POST, an API key in the body, refused
 * when a browser says it comes from another origin: login CSRF), what a
 * session is (GET: never renewed by asking), and the sign-out (DELETE: the
 * session deleted, its cookie cleared). The sign-in's answer holds the
 * CSRF token in its body, never in a cookie.
 *
 * Not here: the cookie and CSRF rules (websess.c), the sessions' rows and
 * lifetimes (db.c), how a later request is recognised (api_auth.c).
 */
#include <jansson.h>
#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "db.h"
#include "websess.h"

/* GET /v1/session: who it is; a session's end, never renewed by asking
 * (the page signs in again after it). */
int api_session_get(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    json_t *o = json_pack("{s:s, s:s}", "name", c->u.name, "role", db_role_name(c->u.role));
    if (o && c->via.cookie)
        (void)json_object_set_new(o, "expires_at",
                                  json_integer((json_int_t)(c->via.expires_at / API_MS_PER_S)));
    return api_reply_json(wsi, 200, o);
}

/* A header present but longer than we read: refused rather than ignored. */
static int hdr_too_long(struct lws *wsi, enum lws_token_indexes t, const char *custom)
{
    int n = custom ? lws_hdr_custom_length(wsi, custom, (int)strlen(custom))
                   : lws_hdr_total_length(wsi, t);
    return n >= API_MAX_HEADER;
}

#define API_SEC_FETCH_SITE "sec-fetch-site:"

/*
 * POST /v1/session {"key": API key}: a web session. Refused when a browser
 * says the request comes from another origin (login CSRF: websess.h). The
 * answer's body holds the CSRF token, which is never in a cookie.
 */
int api_session_login(struct api *a, struct lws *wsi, struct call *c)
{
    const struct http_req *q = c->q;
    char ct[API_MAX_HEADER], origin[API_MAX_HEADER], site[API_MAX_HEADER], host[API_MAX_HEADER];
    char why[128], peer[64], detail[256];
    api_auth_peer(wsi, peer, sizeof peer);
    if (hdr_too_long(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, NULL) ||
        hdr_too_long(wsi, WSI_TOKEN_ORIGIN, NULL) || hdr_too_long(wsi, WSI_TOKEN_HOST, NULL) ||
        hdr_too_long(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, API_SEC_FETCH_SITE))
        return api_reply_error(wsi, 400, "a header of the sign-in is too long");
    struct websess_login lr = {
        .content_type = api_http_hdr(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, ct, sizeof ct),
        .origin = api_http_hdr(wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin),
        .sec_fetch_site = api_http_hdr_custom(wsi, API_SEC_FETCH_SITE, site, sizeof site),
        .host = api_http_hdr(wsi, WSI_TOKEN_HOST, host, sizeof host),
        .tls = a->tls,
    };
    int rc = websess_login_check(&lr, why, sizeof why);
    if (rc != AL_OK) {
        (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\",\"why\":\"%s\"}", peer, why);
        api_audit(a, "anonymous", "login_refused", "/v1/session", detail);
        api_log(a, 1, "sign-in from %s refused: %s", peer, why);
        return api_reply_error(wsi, rc == AL_E_FORMAT ? 415 : 403, why);
    }
    json_error_t jerr;
    json_t *o = q->body ? json_loadb(q->body, q->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    const char *key = o ? json_string_value(json_object_get(o, "key")) : NULL;
    struct db_user u;
    rc = key ? db_user_by_key(a->db, key, &u) : AL_E_INVAL;
    json_decref(o);
    if (rc != AL_OK) {
        api_audit_refused(a, peer, "auth_failed", "sign-in", "/v1/session");
        return api_reply_error(wsi, 401, "unknown API key");
    }
    char sid[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1], cookie[WEBSESS_SET_COOKIE_MAX];
    int64_t now = api_now_ms();
    rc = db_session_add(a->db, u.name, now, &a->sess, sid, sizeof sid, csrf, sizeof csrf);
    if (rc == AL_OK)
        rc = websess_set_cookie(a->tls, sid, a->sess.ttl_ms / API_MS_PER_S, cookie, sizeof cookie);
    OPENSSL_cleanse(sid, sizeof sid);
    if (rc != AL_OK) {
        api_log(a, 0, "session for %s: %s", u.name, db_errmsg(a->db));
        return api_reply_error(wsi, rc == AL_E_LIMIT ? 429 : 500,
                               rc == AL_E_LIMIT ? "too many sessions: sign out elsewhere"
                                                : "cannot make a session");
    }
    (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\"}", peer);
    api_audit(a, u.name, "login", "/v1/session", detail);
    rc = api_reply_json_cookie(
        wsi, 200,
        json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", u.name, "role", db_role_name(u.role), "csrf",
                  csrf, "expires_at", (json_int_t)((now + a->sess.ttl_ms) / API_MS_PER_S),
                  "idle_timeout", (json_int_t)(a->sess.idle_ms / API_MS_PER_S)),
        cookie);
    OPENSSL_cleanse(csrf, sizeof csrf);
    OPENSSL_cleanse(cookie, sizeof cookie);
    return rc;
}

/* DELETE /v1/session: the session is deleted, so its cookie is worthless
 * even if replayed, and the WebSockets it opened are closed (api_wsess.c);
 * the browser is told to drop it. */
int api_session_logout(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    const struct who_via *via = &c->via;
    char clear[WEBSESS_SET_COOKIE_MAX];
    if (websess_set_cookie(a->tls, NULL, 0, clear, sizeof clear) != AL_OK)
        return api_reply_error(wsi, 500, "cannot clear the cookie");
    if (!via->cookie) /* an API key: no session to end */
        return api_reply_json_cookie(wsi, 200, json_pack("{s:b}", "signed_out", 0), clear);
    int rc = db_session_remove(a->db, via->sid);
    if (rc != AL_OK && rc != AL_E_NOENT) {
        api_log(a, 0, "sign-out of %s: %s", u->name, db_errmsg(a->db));
        return api_reply_error(wsi, 500, "database error");
    }
    api_audit(a, u->name, "logout", "/v1/session", NULL);
    api_wsess_signed_out(a, via->sid); /* its WebSockets close too */
    return api_reply_json_cookie(wsi, 200, json_pack("{s:b}", "signed_out", 1), clear);
}
