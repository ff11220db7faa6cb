/*
 * websess: the web page's session rules, pure (no I/O, no clock): the
 * session cookie's name and attributes, finding it in a Cookie header, the
 * CSRF token of a WebSocket upgrade, and which sign-in requests are refused
 * as cross-site. api.c is the glue; db.h keeps the sessions themselves.
 *
 * Why a second secret: browsers scope cookies by host, not by port, so a
 * server on another port of the same host (say an agent's dev server on
 * 127.0.0.1:3000) receives the session cookie whenever the browser visits
 * it, and can replay it with any Origin it likes. So a cookie alone never
 * authenticates: the page also holds a CSRF token, handed out only in the
 * body of the sign-in answer and kept in the page's sessionStorage, which
 * is scoped by origin (scheme, host AND port). Every request authenticated
 * by the cookie carries it: header X-Airlock-CSRF on HTTP, and on a
 * WebSocket upgrade (where a browser cannot set headers) an extra entry
 * "airlock-csrf.TOKEN" in Sec-WebSocket-Protocol, after "airlock.v1".
 * Requests with Authorization: Bearer are not concerned.
 */
#ifndef AL_WEBSESS_H
#define AL_WEBSESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "al_close.h"

#define WEBSESS_COOKIE "airlock_session"            /* over plain http */
#define WEBSESS_COOKIE_TLS "__Host-airlock_session" /* under TLS: Secure, Path=/, no Domain */
#define WEBSESS_CSRF_HEADER "x-airlock-csrf:"       /* as lws names a custom header */
#define WEBSESS_WS_CSRF_PREFIX "airlock-csrf."      /* a Sec-WebSocket-Protocol entry */

/* The close of a WebSocket whose session ended (api_wsess.c): signed out,
 * expired or idle, or its user removed. A close of airlockd's own, as
 * 4005 (replaced) is, not an ERROR of the protocol; the page signs in
 * again instead of reconnecting. 4401: the 401 of an open connection. */
#define WEBSESS_CLOSE_ENDED AL_CLOSE_SESSION_ENDED
#define WEBSESS_CLOSE_SIGNED_OUT "session ended: signed out"
#define WEBSESS_CLOSE_EXPIRED "session ended: expired"
/* its row is gone, for a reason this airlockd cannot tell (signed out
 * through another airlockd, its user removed) */
#define WEBSESS_CLOSE_GONE "session ended"
/* ... and of a connection made with an API key no user holds any more */
#define WEBSESS_CLOSE_KEY_GONE "API key revoked: its user was removed"

enum {
    WEBSESS_VALUE_MAX = 128,      /* a cookie value or CSRF token we accept */
    WEBSESS_SET_COOKIE_MAX = 256, /* a whole Set-Cookie value */
    WEBSESS_COOKIES_MAX = 4,      /* same-named cookies tried (another port may add its own) */
};

/* The n-th (0-based) cookie of our name in a Cookie header: AL_OK,
 * AL_E_NOENT (no such one), AL_E_TOOBIG (value over cap - 1 bytes). */
int websess_cookie_nth(const char *header, bool tls, unsigned n, char *out, size_t cap);

/* A Set-Cookie value: the session (value) for max_age_s seconds, or, with
 * value NULL, one that clears it. AL_OK or AL_E_TOOBIG / AL_E_INVAL. */
int websess_set_cookie(bool tls, const char *value, int64_t max_age_s, char *out, size_t cap);

/* The CSRF token in a Sec-WebSocket-Protocol list ("a, b, c"): AL_OK,
 * AL_E_NOENT (none), AL_E_TOOBIG. */
int websess_ws_csrf(const char *protocols, char *out, size_t cap);

/* Whether origin is exactly http(s)://host (tls picks the scheme). */
bool websess_origin_same(const char *origin, const char *host, bool tls);

/* What a sign-in request (POST /v1/session) says about where it comes
 * from; NULL: the header is absent. */
struct websess_login {
    const char *content_type;
    const char *origin;
    const char *sec_fetch_site;
    const char *host;
    bool tls;
};

/* AL_OK, or AL_E_FORMAT (not application/json: 415) or AL_E_PERM
 * (cross-site or another origin: 403), with the reason in why. */
int websess_login_check(const struct websess_login *r, char *why, size_t cap);

#endif
