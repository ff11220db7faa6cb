/*
 * api_route: the routes of airlockd, one table, routes[]: a method, a path
 * pattern, the minimum role with the 403's text below it, and the handler
 * (in the file of its resource: api_sandbox.c, api_terminal.c,
 * api_session.c, api_audit.c, api_metrics.c, api_static.c, api_runner.c,
 * api_proxy.c, api_replica.c);
 * docs/api.md says what each answers, and tests/integration/api_doc.mjs
 * checks that both tables have the same rows. One dispatch for HTTP
 * (api_route_http) and one for upgrades (api_route_upgrade) alone compare
 * paths; they check, in order, the credential (api_auth.c), the Origin of
 * a change through a session, the route, its terminal and the role; an
 * upgrade through a session is then watched (api_wsess.c).
 * api_route_body_verdict() decides whether a POST's body is read at all.
 *
 * Not here: reading the request (api_http.c), the answers (api_reply.c),
 * what the handlers do.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "db.h"
#include "subproto.h"

/*
 * The routes are one table, routes[] below: a method, a path pattern, the
 * minimum role with the 403's text below it, and the handler; docs/api.md
 * says what each answers. A pattern is literal but for "{id}" (one path
 * segment that is a valid name, db_name_valid), "{file}" (one non-empty
 * segment: its handler checks it) and a final "*" (whatever follows, ""
 * included). api_route_http() and api_route_upgrade() alone compare paths.
 */

/* A route's role besides enum db_role's: no user's credential is asked
 * (nobody needs one, or the handler checks its own: the sign-in's key in
 * its body, a runner's token). */
#define ROUTE_OPEN (-1)
/* The route's {id} is a terminal, loaded before the role is checked: a
 * missing one is 404 whoever asks. */
#define ROUTE_TERMINAL 1u
/* The action is the sandbox's owner's (it needs the runner's link): at a
 * replica that does not own the sandbox it is forwarded to the owner
 * (api_fwd.c), which takes the forwarding replica's token as the
 * user's credential. */
#define ROUTE_OWNER 2u

struct route {
    enum method method; /* M_ANY: any method but an upgrade */
    const char *path;
    int role;         /* the minimum enum db_role, or ROUTE_OPEN */
    unsigned flags;   /* ROUTE_TERMINAL, ROUTE_OWNER */
    const char *deny; /* the 403's text below role */
    int (*fn)(struct api *a, struct lws *wsi, struct call *c);
};

/* A path under a resource that no method of it takes. */
static int route_not_allowed(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    (void)c;
    return api_reply_error(wsi, 405, "method not allowed here");
}

/* The upgrade's subprotocol offer is none, or one naming airlock.v1 (an
 * offer too long to read is refused too). */
static bool offer_ok(struct lws *wsi)
{
    char list[API_MAX_HEADER * 2];
    if (lws_hdr_total_length(wsi, WSI_TOKEN_PROTOCOL) <= 0)
        return true;
    const char *p = api_http_hdr(wsi, WSI_TOKEN_PROTOCOL, list, sizeof list);
    return p && subproto_acceptable(p);
}

#define ADMINS_SANDBOXES "sandboxes are managed by admins"
#define VIEWERS_OBSERVE "viewers may only observe"

/*
 * Every route, tried in order: the first whose method and pattern match is
 * the request's. The rows ending in "*" take what the rows before them
 * under the same resource do not: 405 for who may change it, 403 for the
 * others, as a route of it would.
 */
static const struct route routes[] = {
    {M_ANY, "/healthz", ROUTE_OPEN, 0, NULL, api_metrics_healthz},
    {M_GET, "/", ROUTE_OPEN, 0, NULL, api_static_index},
    {M_GET, "/app/{file}", ROUTE_OPEN, 0, NULL, api_static_app},
    {M_GET, "/vendor/{file}", ROUTE_OPEN, 0, NULL, api_static_vendor},
    {M_GET, "/metrics", DB_ROLE_VIEWER, 0, NULL, api_metrics_get},
    {M_POST, "/v1/session", ROUTE_OPEN, 0, NULL, api_session_login},
    {M_GET, "/v1/session", DB_ROLE_VIEWER, 0, NULL, api_session_get},
    {M_DELETE, "/v1/session", DB_ROLE_VIEWER, 0, NULL, api_session_logout},
    {M_GET, "/v1/sandboxes", DB_ROLE_VIEWER, 0, NULL, api_sandbox_list},
    {M_POST, "/v1/sandboxes", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, api_sandbox_add},
    {M_DELETE, "/v1/sandboxes/{id}", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, api_sandbox_remove},
    {M_POST, "/v1/sandboxes/{id}/enroll", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, api_sandbox_enroll},
    {M_ANY, "/v1/sandboxes/{id}*", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, route_not_allowed},
    {M_GET, "/v1/terminals", DB_ROLE_VIEWER, 0, NULL, api_terminal_list},
    {M_POST, "/v1/terminals", DB_ROLE_OPERATOR, ROUTE_OWNER, VIEWERS_OBSERVE, api_terminal_create},
    {M_GET, "/v1/terminals/{id}", DB_ROLE_VIEWER, ROUTE_TERMINAL, NULL, api_terminal_get},
    {M_POST, "/v1/terminals/{id}/kill", DB_ROLE_OPERATOR, ROUTE_TERMINAL | ROUTE_OWNER,
     VIEWERS_OBSERVE, api_terminal_kill},
    {M_DELETE, "/v1/terminals/{id}", DB_ROLE_OPERATOR, ROUTE_TERMINAL | ROUTE_OWNER,
     VIEWERS_OBSERVE, api_terminal_close},
    {M_GET, "/v1/terminals/{id}/recording", DB_ROLE_VIEWER, ROUTE_TERMINAL, NULL,
     api_terminal_recording},
    {M_POST, "/v1/terminals/{id}/proxy/revoke", DB_ROLE_OPERATOR, ROUTE_TERMINAL, VIEWERS_OBSERVE,
     api_terminal_proxy_revoke},
    {M_ANY, "/v1/terminals/{id}*", DB_ROLE_OPERATOR, ROUTE_TERMINAL, VIEWERS_OBSERVE,
     route_not_allowed},
    {M_UPGRADE, "/v1/terminals/{id}/attach", DB_ROLE_VIEWER, 0, NULL, api_terminal_attach},
    {M_GET, "/v1/proxy/upstreams", DB_ROLE_OPERATOR, 0,
     "the proxy's upstreams are listed for operators and admins", api_proxy_upstreams},
    {M_GET, "/v1/audit", DB_ROLE_ADMIN, 0, "the audit log is for admins", api_audit_list},
    {M_GET, "/v1/replicas", DB_ROLE_ADMIN, 0, "replicas are listed for admins", api_replica_list},
    {M_UPGRADE, "/v1/runners/connect", ROUTE_OPEN, 0, NULL, api_runner_connect},
};

/* Paths behind a credential: nothing is said about them before it. */
#define API_PREFIX "/v1/"
#define API_METRICS "/metrics"

/* Whether uri matches pat (the {id} or {file} it holds into c). */
static int path_match(const char *pat, const char *uri, struct call *c)
{
    while (*pat && *pat != '*') {
        if (*pat != '{') {
            if (*pat++ != *uri++)
                return 0;
            continue;
        }
        const int is_id = !strncmp(pat, "{id}", 4);
        const char *close = strchr(pat, '}');
        char *arg = is_id ? c->id : c->file;
        size_t n = strcspn(uri, "/"), cap = is_id ? sizeof c->id : sizeof c->file;
        if (!close || n == 0 || n >= cap)
            return 0;
        memcpy(arg, uri, n);
        arg[n] = 0;
        if (is_id && !db_name_valid(arg))
            return 0;
        uri += n;
        pat = close + 1;
    }
    return *pat == '*' || !*uri;
}

/* The first route taking this method and path, c's id or file filled; NULL: none. */
static const struct route *route_find(enum method m, const char *uri, struct call *c)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if ((r->method == m || (r->method == M_ANY && m != M_UPGRADE)) &&
            path_match(r->path, uri, c))
            return r;
    }
    return NULL;
}

static int api_path(const char *uri)
{
    return !strncmp(uri, API_PREFIX, strlen(API_PREFIX)) || !strcmp(uri, API_METRICS);
}

static const char *method_name(enum method m)
{
    return m == M_GET ? "GET" : m == M_POST ? "POST" : "DELETE";
}

/*
 * Answer an HTTP request: the open routes at once; any other path is 404
 * unless it is the API's, which first wants a credential (401), our own
 * Origin for a change through a session (403), then a route (404), its
 * terminal (404) and its role (403).
 */
int api_route_http(struct api *a, struct lws *wsi, struct http_req *q)
{
    struct call c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.uri = q->uri;
    const struct route *r = route_find(q->method, q->uri, &c);
    const int api = api_path(q->uri);
    if (q->too_big && api)
        return api_reply_error(wsi, 413, "request body over 64 KiB");
    if (r && r->role == ROUTE_OPEN)
        return r->fn(a, wsi, &c);
    if (!api)
        return api_reply_error(wsi, 404, "not found");
    const char *why;
    const int fwd_ok = r && (r->flags & ROUTE_OWNER) ? API_FWD_TAKE : API_FWD_NO;
    if (api_auth_who(a, wsi, q->uri, 0, fwd_ok, &c.u, &why, &c.via) != 0)
        return api_reply_error(
            wsi, 401,
            "a valid API key (Authorization: Bearer <key>), or a session with its "
            "CSRF token (X-Airlock-CSRF), is required");
    int has_origin;
    if (c.via.cookie && q->method != M_GET && !api_auth_origin_ok(a, wsi, &has_origin))
        return api_reply_error(wsi, 403, "a change through a session needs our own Origin");
    api_log(a, 2, "%s %s for %s", method_name(q->method), q->uri, c.u.name);
    if (!r)
        return api_reply_error(wsi, 404, "not found");
    if (r->flags & ROUTE_TERMINAL) {
        c.term = malloc(sizeof *c.term);
        if (!c.term)
            return api_reply_error(wsi, 500, "out of memory");
        if (db_terminal_get(a->db, c.id, c.term) != AL_OK) {
            free(c.term);
            return api_reply_error(wsi, 404, "no such terminal");
        }
    }
    int rc;
    if ((int)c.u.role < r->role)
        rc = api_reply_error(wsi, 403, r->deny);
    else if (!(r->flags & ROUTE_OWNER) || (rc = api_fwd_start(a, wsi, &c)) == AL_E_NOENT)
        rc = r->fn(a, wsi, &c); /* ours to answer */
    else if (rc == AL_OK)
        rc = 0; /* answered once the owner has */
    else
        rc = api_reply_error(wsi, 503, "the sandbox's owner cannot be asked now: try again");
    free(c.term);
    return rc;
}

/*
 * Decide a WebSocket upgrade: 0 (accepted, its conn set) or -1 (answered).
 * A foreign Origin is refused before anything else but on the open routes
 * (runners authenticate with a header browsers cannot set), then an offer
 * without airlock.v1; then a route (404) and, but on the open routes, a
 * user's credential (401).
 */
int api_route_upgrade(struct api *a, struct lws *wsi)
{
    struct call c;
    memset(&c, 0, sizeof c);
    char uri[API_MAX_URI] = "", peer[64];
    if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) < 0)
        uri[0] = 0;
    c.uri = uri;
    api_auth_peer(wsi, peer, sizeof peer);
    const struct route *r = route_find(M_UPGRADE, uri, &c);
    int has_origin;
    if (!(r && r->role == ROUTE_OPEN) && !api_auth_origin_ok(a, wsi, &has_origin) && has_origin) {
        api_audit_refused(a, peer, "origin_refused", "foreign Origin", uri);
        (void)api_reply_error(wsi, 403, "cross-site WebSocket refused (foreign Origin)");
        return -1;
    }
    if (!offer_ok(wsi)) {
        api_audit_refused(a, peer, "subprotocol_refused", "offer without " AL_SUBPROTOCOL, uri);
        (void)api_reply_error(wsi, 400,
                              "the subprotocol " AL_SUBPROTOCOL " is required "
                              "(Sec-WebSocket-Protocol: " AL_SUBPROTOCOL ")");
        return -1;
    }
    if (!r) {
        (void)api_reply_error(wsi, 404, "not found");
        return -1;
    }
    const char *why;
    if (r->role != ROUTE_OPEN &&
        api_auth_who(a, wsi, uri, 1, API_FWD_NO, &c.u, &why, &c.via) != 0) {
        (void)api_reply_error(
            wsi, 401,
            "a valid API key, or a session with its CSRF token "
            "(Sec-WebSocket-Protocol: airlock.v1, airlock-csrf.TOKEN), is required");
        return -1;
    }
    if ((int)c.u.role < r->role) {
        (void)api_reply_error(wsi, 403, r->deny);
        return -1;
    }
    c.conn = calloc(1, sizeof *c.conn);
    if (!c.conn)
        return -1;
    /* a session's connection ends with the session, a key's with the key
     * (api_wsess.c); the watches have room for every connection airlockd
     * takes */
    if ((c.via.cookie || c.via.key_handle[0]) && api_wsess_watch(a, wsi, c.conn, &c.via) != AL_OK) {
        free(c.conn);
        (void)api_reply_error(wsi, 500, "cannot follow the credential");
        return -1;
    }
    if (r->fn(a, wsi, &c) != 0) {
        api_wsess_forget(a, wsi, c.conn);
        free(c.conn);
        return -1;
    }
    lws_set_opaque_user_data(wsi, c.conn);
    return 0;
}

/*
 * Before a byte of a POST body is read: 0 (read it), or the status that
 * answers it (its bytes are then dropped as they come, never buffered).
 * Only an open route takes a body without a credential (the sign-in: the
 * key is the body).
 */
unsigned api_route_body_verdict(struct api *a, struct lws *wsi, const struct http_req *q, long len)
{
    if (strncmp(q->uri, API_PREFIX, strlen(API_PREFIX)) != 0)
        return 404;
    if (len < 0 || (unsigned long)len > API_MAX_REQ)
        return 413;
    struct call c;
    memset(&c, 0, sizeof c);
    const struct route *r = route_find(q->method, q->uri, &c);
    if (r && r->role == ROUTE_OPEN)
        return 0;
    const char *why;
    const int fwd_ok = r && (r->flags & ROUTE_OWNER) ? API_FWD_PEEK : API_FWD_NO;
    return api_auth_who(a, wsi, q->uri, 0, fwd_ok, &c.u, &why, &c.via) == 0 ? 0 : 401;
}
