/*
 * api_auth: who is asking, and from where. A request is authenticated by
 * an API key (Authorization: Bearer) or by the web page's session: its
 * cookie AND its CSRF token (X-Airlock-CSRF on HTTP, the subprotocol entry
 * airlock-csrf.TOKEN on an upgrade; websess.h has the rules, db.h the
 * sessions). A failure is counted as a refusal (api_audit.c), the key
 * itself never logged. api_auth_origin_ok() says whether the Origin of a
 * request is our own address (a change through a session needs it; an
 * upgrade with a foreign one is refused but a runner's).
 *
 * Not here: what each role may do (the route table, api_route.c), the
 * sign-in and sign-out (api_session.c), a runner's token and key
 * (api_runner.c).
 */
#include <libwebsockets.h>
#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "bearer.h"
#include "db.h"
#include "relay.h"
#include "signer.h"
#include "websess.h"

void api_auth_peer(struct lws *wsi, char *peer, size_t cap)
{
    (void)snprintf(peer, cap, "?");
    lws_get_peer_simple(wsi, peer, cap);
}

const char *api_auth_bearer(struct lws *wsi, char *buf, size_t cap)
{
    buf[0] = 0;
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n > 0 && (size_t)n < cap)
        (void)lws_hdr_copy(wsi, buf, (int)cap, WSI_TOKEN_HTTP_AUTHORIZATION);
    return bearer_token(buf[0] ? buf : NULL);
}

/* The CSRF token of this request: X-Airlock-CSRF, or on a WebSocket
 * upgrade its Sec-WebSocket-Protocol entry. NULL when there is none. */
static const char *request_csrf(struct lws *wsi, int upgrade, char *buf, size_t cap)
{
    if (!upgrade)
        return api_http_hdr_custom(wsi, WEBSESS_CSRF_HEADER, buf, cap);
    char list[API_MAX_HEADER * 2];
    const char *p = api_http_hdr(wsi, WSI_TOKEN_PROTOCOL, list, sizeof list);
    return p && websess_ws_csrf(p, buf, cap) == AL_OK ? buf : NULL;
}

/*
 * The user of a session cookie used with its CSRF token. Several cookies of
 * our name may come (another port of this host can set one too): the first
 * that is a live session wins. AL_OK (via filled), AL_E_NOENT (no cookie, or none is a live
 * session), AL_E_PERM (a live session, but the CSRF token is missing or wrong). A session
 * found expired is deleted (db_session_use) and its WebSockets closed (api_wsess.c).
 */
static int session_user(struct api *a, struct lws *wsi, const char *csrf, struct db_user *u,
                        struct who_via *via)
{
    char buf[API_MAX_COOKIE + 1];
    if (!api_http_hdr(wsi, WSI_TOKEN_HTTP_COOKIE, buf, sizeof buf))
        return AL_E_NOENT;
    int rc = AL_E_NOENT;
    for (unsigned i = 0; i < WEBSESS_COOKIES_MAX; i++) {
        char id[WEBSESS_VALUE_MAX];
        int r = websess_cookie_nth(buf, a->tls, i, id, sizeof id);
        if (r == AL_E_NOENT)
            break;
        struct db_session s;
        if (r == AL_OK)
            r = db_session_use(a->db, id, csrf, api_now_ms(), &a->sess, &s);
        if (r == AL_E_EXPIRED) /* its WebSockets end now, not at the next lookup */
            api_wsess_expired(a, id);
        if (r == AL_OK) {
            *u = s.user;
            via->cookie = 1;
            (void)snprintf(via->sid, sizeof via->sid, "%s", id);
            via->expires_at = s.expires_at;
            return AL_OK;
        }
        if (r == AL_E_PERM)
            rc = AL_E_PERM;
    }
    return rc;
}

/* Whether the request's Origin is our own address; *present: it has one. */
int api_auth_origin_ok(const struct api *a, struct lws *wsi, int *present)
{
    char origin[API_MAX_HEADER], host[API_MAX_HEADER];
    *present = lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) > 0;
    return websess_origin_same(api_http_hdr(wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin),
                               api_http_hdr(wsi, WSI_TOKEN_HOST, host, sizeof host), a->tls);
}

/*
 * Who is asking: an API key (Authorization: Bearer), else the session
 * cookie with its CSRF token (upgrade: from the WebSocket subprotocols).
 * 0 and *u (*via set), or -1 with why (for a 401), audited.
 */
struct by_name {
    const char *name;
    struct db_user *u;
    int found;
};

static int user_named(void *ctx, const struct db_user *u)
{
    struct by_name *b = ctx;
    if (strcmp(u->name, b->name) != 0)
        return 0;
    *b->u = *u;
    b->found = 1;
    return 1; /* found: the listing stops */
}

/* A request another replica sent for one of its users (never an API key:
 * those begin DB_KEY_PREFIX): an attach upgrade (/v1/terminals/ID/attach)
 * it relays, with its hop token (SIGNER_HOP_SCOPE), or an action of a
 * ROUTE_OWNER route it forwards (fwd_ok), with its forwarding token
 * (SIGNER_FWD_SCOPE). Verified with the registered replicas' keys for our
 * id, good once (API_FWD_PEEK: checked, not used up); the user it names is
 * looked up here, and the role is the database's, never the token's. */
static int hop_user(struct api *a, const char *uri, const char *tok, int upgrade, int fwd_ok,
                    struct db_user *u)
{
    static const char pre[] = "/v1/terminals/", suf[] = "/attach";
    size_t n = strlen(uri);
    const int attach = upgrade && !strncmp(uri, pre, sizeof pre - 1) &&
                       n >= sizeof pre - 1 + sizeof suf && !strcmp(uri + n - (sizeof suf - 1), suf);
    if ((!attach && !(fwd_ok && !upgrade)) || !strncmp(tok, DB_KEY_PREFIX, 4))
        return AL_E_NOENT;
    char name[DB_NAME_MAX + 1], why[256];
    int rc = relay_hop_user(a->relay, tok, attach ? SIGNER_HOP_SCOPE : SIGNER_FWD_SCOPE,
                            attach || fwd_ok != API_FWD_PEEK, name, sizeof name, why, sizeof why);
    if (rc != AL_OK) {
        api_log(a, 1, "a replica's token refused: %s", why);
        return rc;
    }
    struct by_name b = {name, u, 0};
    rc = db_user_list(a->db, user_named, &b);
    return b.found ? AL_OK : rc == AL_OK || rc == 1 ? AL_E_NOENT : rc;
}

int api_auth_who(struct api *a, struct lws *wsi, const char *uri, int upgrade, int fwd_ok,
                 struct db_user *u, const char **why, struct who_via *via)
{
    char auth[API_MAX_AUTH + 1], csrf[WEBSESS_VALUE_MAX];
    const char *key = api_auth_bearer(wsi, auth, sizeof auth);
    memset(via, 0, sizeof *via);
    int srx = AL_E_NOENT;
    if (!key) {
        srx = session_user(a, wsi, request_csrf(wsi, upgrade, csrf, sizeof csrf), u, via);
        if (srx == AL_OK) {
            *why = NULL;
            return 0;
        }
    }
    if (key && (upgrade || fwd_ok) && hop_user(a, uri, key, upgrade, fwd_ok, u) == AL_OK) {
        *why = NULL; /* the relaying replica follows the client's credential */
        via->forwarded = !upgrade;
        return 0;
    }
    int rc = key ? db_user_by_key(a->db, key, u) : AL_E_NOENT;
    /* an upgrade's connection is followed by the key's handle (api_wsess.c) */
    if (rc == AL_OK && upgrade)
        rc = db_user_key_handle(a->db, key, via->key_handle, sizeof via->key_handle);
    if (rc == AL_OK) {
        *why = NULL;
        return 0;
    }
    char peer[64];
    api_auth_peer(wsi, peer, sizeof peer);
    /* the key itself is never logged, not even in part */
    *why = !key && srx == AL_E_PERM ? "session without its CSRF token"
           : !key                   ? "no API key or live session"
           : rc == AL_E_NOENT       ? "unknown API key"
                                    : "malformed API key";
    api_audit_refused(a, peer, "auth_failed", *why, uri);
    return -1;
}
