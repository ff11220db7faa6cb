/*
 * api: see api.h.
 *
 * Data model: struct api is the lws context's user data (no globals): the
 * configuration, the database, the signer (the child process that alone
 * holds the signing key: this process never reads it), the relay, the loop
 * and a tick timer. An HTTP request keeps its body in its per-session struct
 * http_req until it is complete, then is answered at once. A WebSocket
 * connection (client, accepted runner or dialed runner) owns a struct conn
 * attached to its wsi as lws "opaque user data": the message being
 * reassembled, what it is linked to in the relay, and its close state.
 */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libwebsockets.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_log.h"
#include "lsbx.h"
#include "apireq.h"
#include "auditagg.h"
#include "bearer.h"
#include "db.h"
#include "endpoint.h"
#include "subproto.h"
#include "keys.h"
#include "relay.h"
#include "signer.h"
#include "token.h"
#include "websess.h"
#include "wsglue.h"
#include "wslisten.h"

#define API_MAX_URI 512
#define API_MAX_AUTH 512        /* an API key or token header is far shorter */
#define API_MAX_BODY (1u << 20) /* a JSON answer */
#define API_MAX_REQ (64u << 10) /* a JSON request body (APIREQ_MAX_BODY) */
#define API_LIST_MAX 1000       /* rows in one list answer */
#define API_TIMEOUT_S 10
#define API_HEADER_DATA 8192
#define API_TICK_MS 50
#define API_WRITES_PER_CALLBACK 64
#define API_SESSION_TTL_S (12 * 3600) /* a web session, from sign-in, never extended */
#define API_SESSION_IDLE_S 3600       /* a web session unused this long ends */
#define API_MS_PER_S 1000
#define API_MAX_COOKIE 4096
#define API_MAX_HEADER 256 /* Origin, Host, Content-Type, Sec-Fetch-Site */
#define API_MAX_FILE_NAME 128
/* Limits of an exposed server (docs/control-plane.md, "Limits"); the
 * first three can be set in --config. */
#define API_MAX_CONNS 1000          /* connections at once (lowered to fit RLIMIT_NOFILE) */
#define API_MAX_CONNS_PER_IP 100    /* connections at once from one address */
#define API_REQUEST_TIMEOUT_S 10    /* an HTTP request, headers and body, from accept */
#define API_AUDIT_FLUSH_MS 5000     /* refusals: one audit row per source and reason per interval */
#define API_AUDIT_PRUNE_MS 60000    /* how often audit retention runs */
#define API_AUDIT_KEEP_DAYS 90      /* audit rows older than this are removed */
#define API_AUDIT_KEEP_ROWS 1000000 /* at most this many audit rows are kept */
#define API_LOG_INTERVAL_MS 10000   /* refusal log lines: one per interval, with a count */
#define API_MS_PER_DAY 86400000LL

enum method { M_GET, M_POST, M_DELETE, M_OTHER, M_ANY, M_UPGRADE };
enum conn_kind { CONN_CLIENT = 1, CONN_RUNNER, CONN_DIAL };

struct api {
    struct api_config cfg;
    char data_dir[PATH_MAX];
    char runner_bin[PATH_MAX];
    char self_url[300];
    char web_dir[PATH_MAX];
    int tls;
    struct db_session_policy sess; /* web sessions' lifetimes, in ms */
    struct db *db;
    struct signer *signer; /* mints our tokens: the key is in its process only */
    struct relay *relay;
    struct lsbx *lsbx; /* local sandboxes' runners */
    struct lws_context *ctx;
    uv_loop_t *loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t tick;
    /* an accepted upgrade, handed from CONFIRM_UPGRADE to ESTABLISHED */
    struct lws *pending_wsi;
    struct conn *pending;
    struct wsl *wsl;  /* the listening socket, the connection limits */
    struct aagg *agg; /* refusals not yet written to the audit log */
    uint64_t next_flush_ms, next_prune_ms;
    struct al_lograte log_refused;
};

struct conn {
    enum conn_kind kind;
    struct rl_sbx *sb;
    struct rl_client *cl;
    char token[AL_MAX_TOKEN + 1]; /* dial: the bearer we present */
    struct wsg ws;                /* the message being reassembled, the close */
};

struct http_req {
    enum method method;
    char uri[API_MAX_URI];
    char *body;
    size_t len;
    int too_big;
    /* refused before its body was read (401, 404, 413): the body is
     * dropped as it comes, and this is the answer at its end */
    unsigned refused;
};

__attribute__((format(printf, 3, 4))) static void logf_(const struct api *a, int level,
                                                        const char *fmt, ...)
{
    if (level > a->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog("airlockd", a->cfg.listen, level, fmt, ap);
    va_end(ap);
}

static void lsbx_log(void *ud, int level, const char *line)
{
    logf_(ud, level, "%s", line);
}

/* ---- answers ------------------------------------------------------------- */

/* Answer with a body; cookie, when not NULL, is a whole Set-Cookie value. */
static int reply_with(struct lws *wsi, unsigned status, const char *type, const char *body,
                      size_t len, const char *cookie)
{
    uint8_t hdr[LWS_PRE + 1024 + API_MAX_COOKIE + 128];
    uint8_t *start = hdr + LWS_PRE, *p = start, *end = hdr + sizeof hdr - 1;
    if (lws_add_http_common_headers(wsi, status, type, len, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)"no-store", 8, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"x-content-type-options:",
                                    (const unsigned char *)"nosniff", 7, &p, end) ||
        (cookie && lws_add_http_header_by_name(
                       wsi, (const unsigned char *)"set-cookie:", (const unsigned char *)cookie,
                       (int)strlen(cookie), &p, end)) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    uint8_t *buf = malloc(LWS_PRE + len + 1);
    if (!buf)
        return -1;
    memcpy(buf + LWS_PRE, body, len); // NOLINT(bugprone-not-null-terminated-result)
    int n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL);
    free(buf);
    if (n != (int)len)
        return -1;
    /* the next request on this connection has a deadline of its own */
    const struct api *a = lws_context_user(lws_get_context(wsi));
    wsl_deadline(a->wsl, wsi, 1);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int reply(struct lws *wsi, unsigned status, const char *type, const char *body, size_t len)
{
    return reply_with(wsi, status, type, body, len, NULL);
}

/* Send a JSON value (stolen) as the answer, with a cookie if not NULL. */
static int reply_json_cookie(struct lws *wsi, unsigned status, json_t *v, const char *cookie)
{
    if (!v)
        return reply(wsi, 500, "application/json", "{\"error\":\"out of memory\"}\n", 26);
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s || strlen(s) > API_MAX_BODY) {
        free(s);
        return reply(wsi, 500, "application/json", "{\"error\":\"answer too large\"}\n", 29);
    }
    size_t n = strlen(s);
    char *body = malloc(n + 2);
    if (!body) {
        free(s);
        return -1;
    }
    memcpy(body, s, n); // NOLINT(bugprone-not-null-terminated-result): a body, not a string
    body[n] = '\n';
    free(s);
    int rc = reply_with(wsi, status, "application/json", body, n + 1, cookie);
    free(body);
    return rc;
}

static int reply_json(struct lws *wsi, unsigned status, json_t *v)
{
    return reply_json_cookie(wsi, status, v, NULL);
}

static int reply_error(struct lws *wsi, unsigned status, const char *msg)
{
    return reply_json(wsi, status, json_pack("{s:s}", "error", msg));
}

static unsigned status_of(int rc)
{
    switch (rc) {
    case AL_E_NOENT:
        return 404;
    case AL_E_EXISTS:
    case AL_E_STATE:
        return 409;
    case AL_E_INVAL:
    case AL_E_TOOBIG:
    case AL_E_FORMAT:
        return 400;
    case AL_E_LIMIT:
        return 429;
    default:
        return 500;
    }
}

/* ---- JSON views ----------------------------------------------------------- */

struct list_ctx {
    struct api *a;
    json_t *arr;
    size_t n;
};

/* "network" is what a local sandbox's agents get ("host" or "none"; null
 * for the others: airlockd does not start their runners), and
 * "network_default" whether that is the server's --sandbox-network (the
 * sandbox was made without one) rather than its own. */
static json_t *sandbox_json(const struct api *a, const struct db_sandbox *s)
{
    const int local = s->kind == DB_SANDBOX_LOCAL;
    json_t *net =
        local ? json_string(db_sandbox_network_name(relay_sandbox_network(a->relay, s->network)))
              : json_null();
    return json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:b, s:o, s:b}", "id", s->id, "kind",
                     db_sandbox_kind_name(s->kind), "url", s->url, "link_up", (int)s->link_up,
                     "link_since", (json_int_t)s->link_since, "rtt_us", (json_int_t)s->rtt_us,
                     "record_input", (int)s->record_input, "network", net, "network_default",
                     local && s->network == DB_NETWORK_DEFAULT);
}

static int add_sandbox(void *ctx, const struct db_sandbox *s)
{
    struct list_ctx *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_t *o = sandbox_json(l->a, s);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

static json_t *terminal_json(struct api *a, const struct db_terminal *t)
{
    json_error_t jerr;
    json_t *argv = json_loads(t->argv_json, JSON_REJECT_DUPLICATES, &jerr);
    struct rl_term_info info;
    relay_terminal_info(a->relay, t->id, &info);
    json_t *viewers = json_array();
    for (unsigned i = 0; viewers && i < info.clients; i++)
        (void)json_array_append_new(viewers, json_pack("{s:s, s:s}", "name", info.names[i], "role",
                                                       info.roles[i] == 1 ? "writer" : "viewer"));
    json_t *o = json_pack(
        "{s:s, s:s, s:i, s:o*, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:o*}", "id",
        t->id, "sandbox", t->sandbox_id, "channel", (int)t->channel, "argv", argv, "cwd", t->cwd,
        "mode", db_term_mode_name(t->mode), "state", db_term_state_name(t->state), "cols",
        info.live ? info.cols : t->cols, "rows", info.live ? info.rows : t->rows, "exit_code",
        t->exit_code, "exit_signal", t->exit_signal, "created_at", (json_int_t)t->created_at,
        "ended_at", (json_int_t)t->ended_at, "out_bytes",
        (json_int_t)(info.live && info.out_end > t->out_offset ? info.out_end : t->out_offset),
        "recording_bytes", (json_int_t)(info.live ? info.rec_bytes : t->rec_bytes), "viewers",
        viewers);
    if (o && info.rec_failed)
        (void)json_object_set_new(o, "recording_error", json_string(info.rec_error));
    if (o && info.writer[0])
        (void)json_object_set_new(o, "writer", json_string(info.writer));
    if (o) {
        (void)json_object_set_new(o, "creator", json_string(t->creator));
        (void)json_object_set_new(o, "record_input", json_boolean(t->record_input));
    }
    return o;
}

static int add_terminal(void *ctx, const struct db_terminal *t)
{
    struct list_ctx *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_t *o = terminal_json(l->a, t);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

static int add_audit(void *ctx, const struct db_audit *e)
{
    struct list_ctx *l = ctx;
    json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:s, s:s}", "id", (json_int_t)e->id, "at",
                          (json_int_t)e->at, "actor", e->actor, "action", e->action, "target",
                          e->target, "detail", e->detail);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

/* ---- who is asking ---------------------------------------------------------- */

static void peer_of(struct lws *wsi, char *peer, size_t cap)
{
    (void)snprintf(peer, cap, "?");
    lws_get_peer_simple(wsi, peer, cap);
}

static const char *header_bearer(struct lws *wsi, char *buf, size_t cap)
{
    buf[0] = 0;
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n > 0 && (size_t)n < cap)
        (void)lws_hdr_copy(wsi, buf, (int)cap, WSI_TOKEN_HTTP_AUTHORIZATION);
    return bearer_token(buf[0] ? buf : NULL);
}

/* ---- the web page's sessions (websess.h, db.h) ------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * API_MS_PER_S + ts.tv_nsec / 1000000;
}

/* A request header lws knows into buf: its value, or NULL if absent or too long. */
static const char *hdr(struct lws *wsi, enum lws_token_indexes t, char *buf, size_t cap)
{
    int n = lws_hdr_total_length(wsi, t);
    if (n <= 0 || (size_t)n >= cap || lws_hdr_copy(wsi, buf, (int)cap, t) < 0)
        return NULL;
    return buf;
}

/* A header lws does not know ("name:" in lower case), as hdr(). */
static const char *hdr_custom(struct lws *wsi, const char *name, char *buf, size_t cap)
{
    int nl = (int)strlen(name);
    int n = lws_hdr_custom_length(wsi, name, nl);
    if (n <= 0 || (size_t)n >= cap || lws_hdr_custom_copy(wsi, buf, (int)cap, name, nl) < 0)
        return NULL;
    return buf;
}

/* The CSRF token of this request: X-Airlock-CSRF, or on a WebSocket
 * upgrade its Sec-WebSocket-Protocol entry. NULL when there is none. */
static const char *request_csrf(struct lws *wsi, int upgrade, char *buf, size_t cap)
{
    if (!upgrade)
        return hdr_custom(wsi, WEBSESS_CSRF_HEADER, buf, cap);
    char list[API_MAX_HEADER * 2];
    const char *p = hdr(wsi, WSI_TOKEN_PROTOCOL, list, sizeof list);
    return p && websess_ws_csrf(p, buf, cap) == AL_OK ? buf : NULL;
}

/* How who() found the user: by cookie, the session's secret and expiry. */
struct who_via {
    int cookie;
    char sid[WEBSESS_VALUE_MAX];
    int64_t expires_at; /* Unix ms */
};

/*
 * The user of a session cookie used with its CSRF token. Several cookies of
 * our name may come (another port of this host can set one too): the first
 * that is a live session wins. AL_OK (via filled), AL_E_NOENT (no cookie, or none is a live
 * session), AL_E_PERM (a live session, but the CSRF token is missing or wrong).
 */
static int session_user(struct api *a, struct lws *wsi, const char *csrf, struct db_user *u,
                        struct who_via *via)
{
    char buf[API_MAX_COOKIE + 1];
    if (!hdr(wsi, WSI_TOKEN_HTTP_COOKIE, buf, sizeof buf))
        return AL_E_NOENT;
    int rc = AL_E_NOENT;
    for (unsigned i = 0; i < WEBSESS_COOKIES_MAX; i++) {
        char id[WEBSESS_VALUE_MAX];
        int r = websess_cookie_nth(buf, a->tls, i, id, sizeof id);
        if (r == AL_E_NOENT)
            break;
        struct db_session s;
        if (r == AL_OK)
            r = db_session_use(a->db, id, csrf, now_ms(), &a->sess, &s);
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
static int origin_ok(const struct api *a, struct lws *wsi, int *present)
{
    char origin[API_MAX_HEADER], host[API_MAX_HEADER];
    *present = lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) > 0;
    return websess_origin_same(hdr(wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin),
                               hdr(wsi, WSI_TOKEN_HOST, host, sizeof host), a->tls);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * An unauthenticated peer was refused: counted (auditagg.h) and written to
 * the audit log once per source and reason per API_AUDIT_FLUSH_MS; logged
 * at most once per API_LOG_INTERVAL_MS with the count since the last line.
 */
static void refused(struct api *a, const char *peer, const char *action, const char *why,
                    const char *target)
{
    aagg_add(a->agg, peer, action, why, target, wall_ms());
    unsigned long n = al_lograte_hit(&a->log_refused, uv_now(a->loop), API_LOG_INTERVAL_MS);
    if (n)
        logf_(a, 1, "refused %s %s from %s: %s (%lu refusals since the last line)", action, target,
              peer, why, n);
}

static void audit_row(void *ctx, const struct aagg_row *r)
{
    struct api *a = ctx;
    json_t *d = json_pack("{s:s, s:s, s:I, s:I, s:I}", "peer", r->source, "why", r->reason, "count",
                          (json_int_t)r->count, "first_at", (json_int_t)r->first_ms, "last_at",
                          (json_int_t)r->last_ms);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (db_audit_add(a->db, r->last_ms, "anonymous", r->action, r->target, detail) != AL_OK)
        logf_(a, 0, "audit: %s", db_errmsg(a->db));
    free(detail);
}

/* Write the refusals counted so far; run retention when it is due. */
static void audit_housekeeping(struct api *a, int force)
{
    uint64_t now = uv_now(a->loop);
    if (force || now >= a->next_flush_ms) {
        a->next_flush_ms = now + API_AUDIT_FLUSH_MS;
        (void)aagg_flush(a->agg, audit_row, a);
    }
    if (force || now >= a->next_prune_ms) {
        a->next_prune_ms = now + API_AUDIT_PRUNE_MS;
        int64_t before = wall_ms() - (int64_t)a->cfg.audit_keep_days * API_MS_PER_DAY;
        if (db_audit_prune(a->db, before > 0 ? before : 0, a->cfg.audit_keep_rows) != AL_OK)
            logf_(a, 0, "audit retention: %s", db_errmsg(a->db));
    }
}

/*
 * Who is asking: an API key (Authorization: Bearer), else the session
 * cookie with its CSRF token (upgrade: from the WebSocket subprotocols).
 * 0 and *u (*via set), or -1 with why (for a 401), audited.
 */
static int who(struct api *a, struct lws *wsi, const char *uri, int upgrade, struct db_user *u,
               const char **why, struct who_via *via)
{
    char auth[API_MAX_AUTH + 1], csrf[WEBSESS_VALUE_MAX];
    const char *key = header_bearer(wsi, auth, sizeof auth);
    memset(via, 0, sizeof *via);
    int srx = AL_E_NOENT;
    if (!key) {
        srx = session_user(a, wsi, request_csrf(wsi, upgrade, csrf, sizeof csrf), u, via);
        if (srx == AL_OK) {
            *why = NULL;
            return 0;
        }
    }
    int rc = key ? db_user_by_key(a->db, key, u) : AL_E_NOENT;
    if (rc == AL_OK) {
        *why = NULL;
        return 0;
    }
    char peer[64];
    peer_of(wsi, peer, sizeof peer);
    /* the key itself is never logged, not even in part */
    *why = !key && srx == AL_E_PERM ? "session without its CSRF token"
           : !key                   ? "no API key or live session"
           : rc == AL_E_NOENT       ? "unknown API key"
                                    : "malformed API key";
    refused(a, peer, "auth_failed", *why, uri);
    return -1;
}

/* ---- routes ------------------------------------------------------------------ */

/*
 * The routes are one table, routes[] below: a method, a path pattern, the
 * minimum role with the 403's text below it, and the handler; docs/api.md
 * says what each answers. A pattern is literal but for "{id}" (one path
 * segment that is a valid name, db_name_valid), "{file}" (one non-empty
 * segment: its handler checks it) and a final "*" (whatever follows, ""
 * included). route_http() and route_upgrade() alone compare paths.
 */

/* A route's role besides enum db_role's: no user's credential is asked
 * (nobody needs one, or the handler checks its own: the sign-in's key in
 * its body, a runner's token). */
#define ROUTE_OPEN (-1)
/* The route's {id} is a terminal, loaded before the role is checked: a
 * missing one is 404 whoever asks. */
#define ROUTE_TERMINAL 1u

/* Paths behind a credential: nothing is said about them before it. */
#define API_PREFIX "/v1/"
#define API_METRICS "/metrics"

/* What a handler is given: the request, who asks, what its path held. */
struct call {
    struct http_req *q; /* NULL on an upgrade */
    const char *uri;
    struct db_user u; /* zero on an open route */
    struct who_via via;
    char id[DB_NAME_MAX + 1];         /* the path's {id} */
    char file[API_MAX_FILE_NAME + 1]; /* the path's {file} */
    struct db_terminal *term;         /* ROUTE_TERMINAL: the row of {id} */
    struct conn *conn;                /* an upgrade: the connection it makes */
};

struct route {
    enum method method; /* M_ANY: any method but an upgrade */
    const char *path;
    int role;         /* the minimum enum db_role, or ROUTE_OPEN */
    unsigned flags;   /* ROUTE_TERMINAL */
    const char *deny; /* the 403's text below role */
    int (*fn)(struct api *a, struct lws *wsi, struct call *c);
};

static void audit(struct api *a, const char *actor, const char *action, const char *target,
                  const char *detail)
{
    if (db_audit_add(a->db, 0, actor, action, target, detail) != AL_OK)
        logf_(a, 0, "audit: %s", db_errmsg(a->db));
}

static const char *body_of(const struct call *c)
{
    return c->q->body ? c->q->body : "";
}

/* A list's answer: the rows rc's query put in l, or a database error. */
static int reply_list(struct api *a, struct lws *wsi, const struct call *c, struct list_ctx *l,
                      int rc)
{
    if (rc < 0) {
        json_decref(l->arr);
        logf_(a, 0, "%s: %s", c->uri, db_errmsg(a->db));
        return reply_error(wsi, 500, "database error");
    }
    return reply_json(wsi, 200, l->arr);
}

static int route_sandbox_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct list_ctx l = {a, json_array(), 0};
    if (!l.arr)
        return reply_error(wsi, 500, "out of memory");
    return reply_list(a, wsi, c, &l, db_sandbox_list(a->db, add_sandbox, &l));
}

static int route_terminal_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct list_ctx l = {a, json_array(), 0};
    if (!l.arr)
        return reply_error(wsi, 500, "out of memory");
    return reply_list(a, wsi, c, &l, db_terminal_list(a->db, NULL, add_terminal, &l));
}

static int route_audit(struct api *a, struct lws *wsi, struct call *c)
{
    struct list_ctx l = {a, json_array(), 0};
    if (!l.arr)
        return reply_error(wsi, 500, "out of memory");
    /* the refusals counted so far are rows before the log is read */
    (void)aagg_flush(a->agg, audit_row, a);
    struct db_audit_filter f;
    memset(&f, 0, sizeof f);
    f.limit = API_LIST_MAX;
    return reply_list(a, wsi, c, &l, db_audit_query(a->db, &f, add_audit, &l));
}

static void metrics_link_up(void *ud, const char *sandbox, int up, int64_t rtt_us)
{
    (void)rtt_us;
    (void)fprintf(ud, "airlock_link_up{sandbox=\"%s\"} %d\n", sandbox, up ? 1 : 0);
}

static void metrics_link_rtt(void *ud, const char *sandbox, int up, int64_t rtt_us)
{
    (void)up;
    if (rtt_us >= 0)
        (void)fprintf(ud, "airlock_link_rtt_seconds{sandbox=\"%s\"} %.6f\n", sandbox,
                      (double)rtt_us / 1e6);
}

static int route_metrics(struct api *a, struct lws *wsi, struct call *c)
{
    (void)c;
    struct rl_metrics m;
    relay_metrics(a->relay, &m);
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f)
        return reply_error(wsi, 500, "out of memory");
    int n = fprintf(f,
                    "# TYPE airlock_sandboxes gauge\nairlock_sandboxes %u\n"
                    "# TYPE airlock_links_up gauge\nairlock_links_up %u\n"
                    "# TYPE airlock_terminals gauge\nairlock_terminals %u\n"
                    "# TYPE airlock_viewers gauge\nairlock_viewers %u\n"
                    "# TYPE airlock_output_bytes_total counter\nairlock_output_bytes_total %llu\n"
                    "# TYPE airlock_input_bytes_total counter\nairlock_input_bytes_total %llu\n"
                    "# TYPE airlock_resyncs_total counter\nairlock_resyncs_total %llu\n"
                    "# TYPE airlock_recording_errors_total counter\n"
                    "airlock_recording_errors_total %llu\n",
                    m.sandboxes, m.links_up, m.terminals, m.clients,
                    (unsigned long long)m.bytes_out, (unsigned long long)m.bytes_in,
                    (unsigned long long)m.resyncs, (unsigned long long)m.rec_errors);
    /* per sandbox: labels are sandbox ids ([a-z0-9._-]), nothing to escape */
    (void)fputs("# TYPE airlock_link_up gauge\n", f);
    relay_each_link(a->relay, metrics_link_up, f);
    (void)fputs("# TYPE airlock_link_rtt_seconds gauge\n", f);
    relay_each_link(a->relay, metrics_link_rtt, f);
    int bad = n < 0 || ferror(f);
    if (fclose(f) != 0 || bad) {
        free(body);
        return reply_error(wsi, 500, "out of memory");
    }
    int rc = reply(wsi, 200, "text/plain; version=0.0.4", body, blen);
    free(body);
    return rc;
}

static int route_healthz(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    (void)c;
    return reply(wsi, 200, "text/plain", "ok\n", 3);
}

static int route_sandbox_add(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    struct apireq_sandbox s;
    char why[256];
    int rc = apireq_sandbox(body_of(c), c->q->len, &s, why, sizeof why);
    if (rc != AL_OK)
        return reply_error(wsi, 400, why);
    const char *unusable = s.kind == DB_SANDBOX_LOCAL ? lsbx_unusable(a->lsbx) : NULL;
    if (unusable) { /* never an unsafe one instead */
        char msg[600];
        (void)snprintf(msg, sizeof msg, "local sandboxes cannot run on this host: %s", unusable);
        return reply_error(wsi, 503, msg);
    }
    if (s.network == DB_NETWORK_NONE && a->cfg.no_bwrap)
        return reply_error(wsi, 409,
                           "\"network\": none needs bubblewrap; this airlockd runs with "
                           "--no-bwrap (no jail for the agents)");
    const struct db_sandbox_spec sp = {
        .id = s.id,
        .kind = s.kind,
        .url = s.kind == DB_SANDBOX_STATIC ? s.url : NULL,
        .record_input = s.record_input,
        .network = s.network,
    };
    rc = db_sandbox_create(a->db, &sp);
    if (rc != AL_OK)
        return reply_error(wsi, status_of(rc), db_errmsg(a->db));
    /* what differs from the defaults */
    json_t *d = json_object();
    if (d && s.record_input)
        (void)json_object_set_new(d, "record_input", json_true());
    if (d && s.network != DB_NETWORK_DEFAULT)
        (void)json_object_set_new(d, "network", json_string(db_sandbox_network_name(s.network)));
    char *detail = d && json_object_size(d) ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    audit(a, u->name, "sandbox_add", s.id, detail);
    free(detail);
    rc = relay_sandbox_added(a->relay, s.id, why, sizeof why);
    if (rc != AL_OK)
        return reply_error(wsi, 500, why);
    struct db_sandbox row;
    if (db_sandbox_get(a->db, s.id, &row) != AL_OK)
        return reply_error(wsi, 500, db_errmsg(a->db));
    return reply_json(wsi, 201, sandbox_json(a, &row));
}

static int route_enroll(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    const char *id = c->id;
    unsigned ttl;
    char why[APIREQ_ERR_MAX];
    if (apireq_enroll(body_of(c), c->q->len, &ttl, why, sizeof why) != AL_OK)
        return reply_error(wsi, 400, why);
    struct db_sandbox row;
    if (db_sandbox_get(a->db, id, &row) != AL_OK)
        return reply_error(wsi, 404, "no such sandbox");
    if (row.kind != DB_SANDBOX_REVERSE)
        return reply_error(wsi, 409, "only reverse sandboxes enroll");
    /* The signer alone holds the key and checks the shape (ttl bound
     * included); we audit on its behalf with what it answered. */
    struct signer_mint m = {SIGNER_SHAPE_ENROLL, id, u->name, ttl};
    struct signer_resp *t = malloc(sizeof *t); /* 4 KiB of token */
    if (!t)
        return reply_error(wsi, 500, "out of memory");
    char swhy[SIGNER_REASON_MAX + 128];
    int rc = signer_mint(a->signer, &m, t, swhy, sizeof swhy);
    if (rc != AL_OK) {
        free(t);
        return reply_error(wsi, rc == AL_E_PERM ? 400 : 500, swhy);
    }
    char detail[512];
    (void)snprintf(detail, sizeof detail,
                   "{\"scope\":\"" SIGNER_RUNNER_SCOPE
                   "\",\"for\":\"enroll\",\"ttl\":%u,\"jti\":\"%s\",\"kid\":\"%s\"}",
                   ttl, t->jti, t->kid);
    audit(a, u->name, "token_mint", id, detail);
    /* a new enrollment: the next runner to link is pinned afresh */
    if (relay_runner_key_forget(a->relay, id) != AL_OK)
        logf_(a, 0, "sandbox %s: cannot forget the pinned runner key", id);
    char url[600], cmd[1200];
    (void)snprintf(url, sizeof url, "%s/v1/runners/connect?identifier=%s", a->self_url, id);
    (void)snprintf(cmd, sizeof cmd,
                   "airlock-runner --connect '%s' --identifier %s --jwks jwks.json "
                   "--token-file token",
                   url, id);
    json_error_t jerr;
    char jwks_path[PATH_MAX + 16];
    (void)snprintf(jwks_path, sizeof jwks_path, "%s/%s", a->data_dir, KEYS_JWKS_FILE);
    json_t *jwks = json_load_file(jwks_path, JSON_REJECT_DUPLICATES, &jerr);
    rc = reply_json(wsi, 200,
                    json_pack("{s:s, s:s, s:s, s:o*, s:I}", "token", t->token, "url", url,
                              "command", cmd, "jwks", jwks, "expires_in", (json_int_t)ttl));
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
    return rc;
}

static int route_terminal_create(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    struct apireq_terminal t;
    memset(&t, 0, sizeof t);
    char why[256];
    int rc = apireq_terminal(body_of(c), c->q->len, &t, why, sizeof why);
    if (rc != AL_OK) {
        apireq_terminal_free(&t);
        return reply_error(wsi, 400, why);
    }
    char id[DB_NAME_MAX + 1];
    rc = relay_terminal_create(a->relay, &t, u->name, id, sizeof id, why, sizeof why);
    apireq_terminal_free(&t);
    if (rc != AL_OK)
        return reply_error(wsi, status_of(rc), why);
    audit(a, u->name, "terminal_create", id, NULL);
    struct db_terminal *row = malloc(sizeof *row);
    if (!row || db_terminal_get(a->db, id, row) != AL_OK) {
        free(row);
        return reply_error(wsi, 500, "terminal vanished");
    }
    json_t *o = terminal_json(a, row);
    free(row);
    return reply_json(wsi, 201, o);
}

static int route_sandbox_remove(struct api *a, struct lws *wsi, struct call *c)
{
    int rc = db_sandbox_remove(a->db, c->id);
    if (rc != AL_OK)
        return reply_error(wsi, status_of(rc), db_errmsg(a->db));
    relay_sandbox_removed(a->relay, c->id);
    audit(a, c->u.name, "sandbox_remove", c->id, NULL);
    return reply_json(wsi, 200, json_pack("{s:s}", "id", c->id));
}

static int route_terminal_get(struct api *a, struct lws *wsi, struct call *c)
{
    return reply_json(wsi, 200, terminal_json(a, c->term));
}

/* Recordings: admins and the terminal's creator (docs/recording.md). */
static int route_recording(struct api *a, struct lws *wsi, struct call *c)
{
    if (c->u.role != DB_ROLE_ADMIN &&
        !(c->term->creator[0] && !strcmp(c->term->creator, c->u.name)))
        return reply_error(wsi, 403,
                           "a recording is readable by admins and the terminal's creator only");
    char path[PATH_MAX + DB_NAME_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/recordings/%s.cast", a->data_dir, c->id);
    struct stat st;
    if (stat(path, &st) != 0)
        return reply_error(wsi, 404, "no recording");
    wsl_deadline(a->wsl, wsi, 0); /* streamed: re-armed at HTTP_FILE_COMPLETION */
    int n = lws_serve_http_file(wsi, path, "application/x-asciicast", NULL, 0);
    return n < 0 ? -1 : 0;
}

static int route_kill(struct api *a, struct lws *wsi, struct call *c)
{
    unsigned signo;
    char why[256];
    int rc = apireq_signal(body_of(c), c->q->len, &signo, why, sizeof why);
    if (rc != AL_OK)
        return reply_error(wsi, 400, why);
    rc = relay_terminal_signal(a->relay, c->id, signo);
    if (rc != AL_OK)
        return reply_error(wsi, 409, "the terminal is not running");
    char detail[64];
    (void)snprintf(detail, sizeof detail, "{\"signal\":%u}", signo);
    audit(a, c->u.name, "kill", c->id, detail);
    return reply_json(wsi, 202, json_pack("{s:s, s:i}", "id", c->id, "signal", (int)signo));
}

static int route_terminal_close(struct api *a, struct lws *wsi, struct call *c)
{
    int rc = relay_terminal_close(a->relay, c->id);
    if (rc == AL_E_NOENT) { /* not live: only the row is left */
        rc = db_terminal_remove(a->db, c->id);
        if (rc != AL_OK)
            return reply_error(wsi, status_of(rc), db_errmsg(a->db));
    } else if (rc != AL_OK) {
        return reply_error(wsi, status_of(rc), al_strerror(rc));
    }
    audit(a, c->u.name, "terminal_close", c->id, NULL);
    return reply_json(wsi, 202, json_pack("{s:s}", "id", c->id));
}

/* GET /v1/session: who it is; a session's end, never renewed by asking
 * (the page signs in again after it). */
static int route_session(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    json_t *o = json_pack("{s:s, s:s}", "name", c->u.name, "role", db_role_name(c->u.role));
    if (o && c->via.cookie)
        (void)json_object_set_new(o, "expires_at",
                                  json_integer((json_int_t)(c->via.expires_at / API_MS_PER_S)));
    return reply_json(wsi, 200, o);
}

/* A path under a resource that no method of it takes. */
static int route_not_allowed(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    (void)c;
    return reply_error(wsi, 405, "method not allowed here");
}

/* A file of the web page: web_dir/SUB/NAME, NAME checked here. */
static int serve_file(struct api *a, struct lws *wsi, const char *sub, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > API_MAX_FILE_NAME || name[0] == '.' ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        return reply_error(wsi, 404, "not found");
    static const struct {
        const char *ext, *mime;
    } types[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript"},
                 {".mjs", "text/javascript"},
                 {".css", "text/css"},
                 {".svg", "image/svg+xml"},
                 {".png", "image/png"},
                 {".json", "application/json"},
                 {".map", "application/json"}};
    const char *mime = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t el = strlen(types[i].ext);
        if (n > el && !strcmp(name + n - el, types[i].ext))
            mime = types[i].mime;
    }
    char path[PATH_MAX + API_MAX_FILE_NAME + 16];
    (void)snprintf(path, sizeof path, "%s/%s%s", a->web_dir, sub, name);
    struct stat st;
    if (!mime || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return reply_error(wsi, 404, "not found");
    wsl_deadline(a->wsl, wsi, 0); /* streamed: re-armed at HTTP_FILE_COMPLETION */
    return lws_serve_http_file(wsi, path, mime, NULL, 0) < 0 ? -1 : 0;
}

/* GET /, /app/NAME, /vendor/NAME: the web page's files from web_dir. */
static int route_index(struct api *a, struct lws *wsi, struct call *c)
{
    (void)c;
    return serve_file(a, wsi, "", "index.html");
}

static int route_app(struct api *a, struct lws *wsi, struct call *c)
{
    return serve_file(a, wsi, "", c->file);
}

static int route_vendor(struct api *a, struct lws *wsi, struct call *c)
{
    return serve_file(a, wsi, "vendor/", c->file);
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
static int route_login(struct api *a, struct lws *wsi, struct call *c)
{
    const struct http_req *q = c->q;
    char ct[API_MAX_HEADER], origin[API_MAX_HEADER], site[API_MAX_HEADER], host[API_MAX_HEADER];
    char why[128], peer[64], detail[256];
    peer_of(wsi, peer, sizeof peer);
    if (hdr_too_long(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, NULL) ||
        hdr_too_long(wsi, WSI_TOKEN_ORIGIN, NULL) || hdr_too_long(wsi, WSI_TOKEN_HOST, NULL) ||
        hdr_too_long(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, API_SEC_FETCH_SITE))
        return reply_error(wsi, 400, "a header of the sign-in is too long");
    struct websess_login lr = {
        .content_type = hdr(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, ct, sizeof ct),
        .origin = hdr(wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin),
        .sec_fetch_site = hdr_custom(wsi, API_SEC_FETCH_SITE, site, sizeof site),
        .host = hdr(wsi, WSI_TOKEN_HOST, host, sizeof host),
        .tls = a->tls,
    };
    int rc = websess_login_check(&lr, why, sizeof why);
    if (rc != AL_OK) {
        (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\",\"why\":\"%s\"}", peer, why);
        audit(a, "anonymous", "login_refused", "/v1/session", detail);
        logf_(a, 1, "sign-in from %s refused: %s", peer, why);
        return reply_error(wsi, rc == AL_E_FORMAT ? 415 : 403, why);
    }
    json_error_t jerr;
    json_t *o = q->body ? json_loadb(q->body, q->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    const char *key = o ? json_string_value(json_object_get(o, "key")) : NULL;
    struct db_user u;
    rc = key ? db_user_by_key(a->db, key, &u) : AL_E_INVAL;
    json_decref(o);
    if (rc != AL_OK) {
        refused(a, peer, "auth_failed", "sign-in", "/v1/session");
        return reply_error(wsi, 401, "unknown API key");
    }
    char sid[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1], cookie[WEBSESS_SET_COOKIE_MAX];
    int64_t now = now_ms();
    rc = db_session_add(a->db, u.name, now, &a->sess, sid, sizeof sid, csrf, sizeof csrf);
    if (rc == AL_OK)
        rc = websess_set_cookie(a->tls, sid, a->sess.ttl_ms / API_MS_PER_S, cookie, sizeof cookie);
    OPENSSL_cleanse(sid, sizeof sid);
    if (rc != AL_OK) {
        logf_(a, 0, "session for %s: %s", u.name, db_errmsg(a->db));
        return reply_error(wsi, rc == AL_E_LIMIT ? 429 : 500,
                           rc == AL_E_LIMIT ? "too many sessions: sign out elsewhere"
                                            : "cannot make a session");
    }
    (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\"}", peer);
    audit(a, u.name, "login", "/v1/session", detail);
    rc = reply_json_cookie(wsi, 200,
                           json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", u.name, "role",
                                     db_role_name(u.role), "csrf", csrf, "expires_at",
                                     (json_int_t)((now + a->sess.ttl_ms) / API_MS_PER_S),
                                     "idle_timeout", (json_int_t)(a->sess.idle_ms / API_MS_PER_S)),
                           cookie);
    OPENSSL_cleanse(csrf, sizeof csrf);
    OPENSSL_cleanse(cookie, sizeof cookie);
    return rc;
}

/* DELETE /v1/session: the session is deleted, so its cookie is worthless
 * even if replayed; the browser is told to drop it. */
static int route_logout(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    const struct who_via *via = &c->via;
    char clear[WEBSESS_SET_COOKIE_MAX];
    if (websess_set_cookie(a->tls, NULL, 0, clear, sizeof clear) != AL_OK)
        return reply_error(wsi, 500, "cannot clear the cookie");
    if (!via->cookie) /* an API key: no session to end */
        return reply_json_cookie(wsi, 200, json_pack("{s:b}", "signed_out", 0), clear);
    int rc = db_session_remove(a->db, via->sid);
    if (rc != AL_OK && rc != AL_E_NOENT) {
        logf_(a, 0, "sign-out of %s: %s", u->name, db_errmsg(a->db));
        return reply_error(wsi, 500, "database error");
    }
    audit(a, u->name, "logout", "/v1/session", NULL);
    return reply_json_cookie(wsi, 200, json_pack("{s:b}", "signed_out", 1), clear);
}

/* ---- WebSocket connections ------------------------------------------------------ */

static void wake_conn(void *conn)
{
    lws_callback_on_writable((struct lws *)conn);
}

static struct conn *conn_of(struct lws *wsi)
{
    return lws_get_opaque_user_data(wsi);
}

static void conn_free(struct lws *wsi, struct conn *c)
{
    if (!c)
        return;
    wsg_release(&c->ws);
    free(c);
    lws_set_opaque_user_data(wsi, NULL);
}

static int ws_receive(struct api *a, struct lws *wsi, struct conn *c, const void *in, size_t len)
{
    if (!c)
        return 0;
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&c->ws, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    int rc = AL_OK;
    if (rx == WSG_REFUSED) {
        /* the endpoint says why in an ERROR, then asks for the close */
        logf_(a, 1, "peer's message refused: %s", c->ws.refused_why);
        if (c->cl)
            rc = relay_client_refuse(c->cl, c->ws.refused, c->ws.refused_why);
        else if (c->sb)
            rc = relay_runner_refuse(c->sb, wsi, c->ws.refused, c->ws.refused_why);
        if (rc != AL_OK) /* no endpoint to say it: close at once */
            wsg_close_later(&c->ws, wsi, ep_close_code_of(c->ws.refused), c->ws.refused_why);
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (rx != WSG_MESSAGE)
        return 0;
    if (c->cl)
        rc = relay_client_input(c->cl, c->ws.msg, n);
    else if (c->sb)
        rc = relay_runner_input(c->sb, wsi, c->ws.msg, n);
    if (rc != AL_OK)
        logf_(a, 1, "peer broke the protocol: %s", al_strerror(rc));
    lws_callback_on_writable(wsi);
    return 0;
}

static int ws_writeable(struct api *a, struct lws *wsi, struct conn *c)
{
    if (!c)
        return -1;
    if (c->ws.close_code)
        return wsg_close_now(&c->ws, wsi);
    static uint8_t buf[LWS_PRE + AL_MAX_FRAME];
    int wrote = 0;
    for (int i = 0; i < API_WRITES_PER_CALLBACK; i++) {
        long n = c->cl   ? relay_client_output(c->cl, buf + LWS_PRE, AL_MAX_FRAME)
                 : c->sb ? relay_runner_output(c->sb, wsi, buf + LWS_PRE, AL_MAX_FRAME)
                         : 0;
        if (n < 0) {
            logf_(a, 0, "cannot encode a frame: %s", al_strerror((int)n));
            return -1;
        }
        if (n == 0)
            break;
        if (lws_write(wsi, buf + LWS_PRE, (size_t)n, LWS_WRITE_BINARY) < n)
            return -1;
        wrote = 1;
        if (lws_send_pipe_choked(wsi)) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        if (i == API_WRITES_PER_CALLBACK - 1)
            lws_callback_on_writable(wsi);
    }
    int code = 0;
    const char *reason = NULL;
    int closing = c->cl   ? relay_client_closing(c->cl, &code, &reason)
                  : c->sb ? relay_runner_closing(c->sb, wsi, &code, &reason)
                          : 1;
    if (closing) {
        if (wrote) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        wsg_close_later(&c->ws, wsi, code ? code : 1000, reason ? reason : "closing");
    }
    return 0;
}

static void ws_closed(struct api *a, struct lws *wsi, struct conn *c)
{
    (void)a;
    if (!c)
        return;
    if (c->cl)
        relay_client_gone(c->cl);
    else if (c->sb)
        relay_runner_down(c->sb, wsi);
    conn_free(wsi, c);
}

/* A runner link is up; the one it replaces, if any, is closed now (each
 * replaced link, however many follow each other before it writes). */
static void runner_up(struct api *a, struct conn *c, struct lws *wsi)
{
    void *old = NULL;
    (void)relay_runner_up(c->sb, wsi, &old);
    struct conn *oc = old ? conn_of(old) : NULL;
    if (oc) {
        logf_(a, 1, "a newer runner link replaces the current one");
        wsg_close_later(&oc->ws, old, EP_CLOSE_REPLACED, "replaced by a newer connection");
    }
}

/* A query argument's value (lws 4.1 hands back "name=value"). */
static const char *urlarg(struct lws *wsi, const char *name, char *buf, int cap)
{
    char key[64];
    (void)snprintf(key, sizeof key, "%s=", name);
    if (!lws_get_urlarg_by_name(wsi, key, buf, cap))
        return NULL;
    size_t kl = strlen(key);
    return !strncmp(buf, key, kl) ? buf + kl : buf;
}

/* The upgrade's subprotocol offer is none, or one naming airlock.v1 (an
 * offer too long to read is refused too). */
static bool offer_ok(struct lws *wsi)
{
    char list[API_MAX_HEADER * 2];
    if (lws_hdr_total_length(wsi, WSI_TOKEN_PROTOCOL) <= 0)
        return true;
    const char *p = hdr(wsi, WSI_TOKEN_PROTOCOL, list, sizeof list);
    return p && subproto_acceptable(p);
}

/* GET /v1/runners/connect?identifier=ID: a runner, by its runner:connect
 * token and its pinned key. */
static int upgrade_runner(struct api *a, struct lws *wsi, struct call *c)
{
    char argb[300], peer[64], why[256];
    peer_of(wsi, peer, sizeof peer);
    const char *ident = urlarg(wsi, "identifier", argb, sizeof argb);
    struct rl_sbx *sb = ident ? relay_sandbox(a->relay, ident) : NULL;
    char auth[AL_MAX_TOKEN + 16];
    const char *tok = header_bearer(wsi, auth, sizeof auth);
    int rc = !sb ? AL_E_NOENT : relay_runner_token_ok(a->relay, ident, tok, why, sizeof why);
    if (rc != AL_OK) {
        refused(a, peer, "runner_refused", !sb ? "unknown sandbox" : why, ident ? ident : "");
        (void)reply_error(wsi, 403, "a valid runner:connect token is required");
        return -1;
    }
    /* a valid token is not enough: the runner's own key must be the
     * pinned one (a copied token alone takes nothing over) */
    char key[AL_RUNNER_KEY_LEN + 8] = "";
    int kn = lws_hdr_custom_copy(wsi, key, sizeof key, AL_RUNNER_KEY_HEADER ":",
                                 (int)strlen(AL_RUNNER_KEY_HEADER ":"));
    rc = relay_runner_key_ok(a->relay, ident, kn > 0 ? key : NULL, why, sizeof why);
    OPENSSL_cleanse(key, sizeof key);
    if (rc != AL_OK) {
        char detail[300];
        (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\",\"why\":\"%.200s\"}", peer, why);
        audit(a, "anonymous", "runner_impostor", ident, detail);
        logf_(a, 0, "sandbox %s: runner link from %s refused: %s", ident, peer, why);
        (void)reply_error(wsi, 403, "this runner's key is not the sandbox's");
        return -1;
    }
    c->conn->kind = CONN_RUNNER;
    c->conn->sb = sb;
    return 0;
}

/* GET /v1/terminals/ID/attach[?mode=read]: a client of a live terminal. */
static int upgrade_attach(struct api *a, struct lws *wsi, struct call *c)
{
    char argb[300], why[256];
    const char *mode = urlarg(wsi, "mode", argb, sizeof argb);
    struct rl_attach at = {c->id, c->u.name, c->u.role, mode && !strcmp(mode, "read"), wsi};
    int rc = relay_attach(a->relay, &at, &c->conn->cl, why, sizeof why);
    if (rc != AL_OK) {
        logf_(a, 1, "attach of %s by %s refused: %s", c->id, c->u.name, why);
        (void)reply_error(wsi, status_of(rc), rc == AL_E_NOENT ? "no such live terminal" : why);
        return -1;
    }
    c->conn->kind = CONN_CLIENT;
    return 0;
}

/* ---- the route table ------------------------------------------------------------ */

#define ADMINS_SANDBOXES "sandboxes are managed by admins"
#define VIEWERS_OBSERVE "viewers may only observe"

/*
 * Every route, tried in order: the first whose method and pattern match is
 * the request's. The rows ending in "*" take what the rows before them
 * under the same resource do not: 405 for who may change it, 403 for the
 * others, as a route of it would.
 */
static const struct route routes[] = {
    {M_ANY, "/healthz", ROUTE_OPEN, 0, NULL, route_healthz},
    {M_GET, "/", ROUTE_OPEN, 0, NULL, route_index},
    {M_GET, "/app/{file}", ROUTE_OPEN, 0, NULL, route_app},
    {M_GET, "/vendor/{file}", ROUTE_OPEN, 0, NULL, route_vendor},
    {M_GET, "/metrics", DB_ROLE_VIEWER, 0, NULL, route_metrics},
    {M_POST, "/v1/session", ROUTE_OPEN, 0, NULL, route_login},
    {M_GET, "/v1/session", DB_ROLE_VIEWER, 0, NULL, route_session},
    {M_DELETE, "/v1/session", DB_ROLE_VIEWER, 0, NULL, route_logout},
    {M_GET, "/v1/sandboxes", DB_ROLE_VIEWER, 0, NULL, route_sandbox_list},
    {M_POST, "/v1/sandboxes", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, route_sandbox_add},
    {M_DELETE, "/v1/sandboxes/{id}", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, route_sandbox_remove},
    {M_POST, "/v1/sandboxes/{id}/enroll", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, route_enroll},
    {M_ANY, "/v1/sandboxes/{id}*", DB_ROLE_ADMIN, 0, ADMINS_SANDBOXES, route_not_allowed},
    {M_GET, "/v1/terminals", DB_ROLE_VIEWER, 0, NULL, route_terminal_list},
    {M_POST, "/v1/terminals", DB_ROLE_OPERATOR, 0, VIEWERS_OBSERVE, route_terminal_create},
    {M_GET, "/v1/terminals/{id}", DB_ROLE_VIEWER, ROUTE_TERMINAL, NULL, route_terminal_get},
    {M_POST, "/v1/terminals/{id}/kill", DB_ROLE_OPERATOR, ROUTE_TERMINAL, VIEWERS_OBSERVE,
     route_kill},
    {M_DELETE, "/v1/terminals/{id}", DB_ROLE_OPERATOR, ROUTE_TERMINAL, VIEWERS_OBSERVE,
     route_terminal_close},
    {M_GET, "/v1/terminals/{id}/recording", DB_ROLE_VIEWER, ROUTE_TERMINAL, NULL, route_recording},
    {M_ANY, "/v1/terminals/{id}*", DB_ROLE_OPERATOR, ROUTE_TERMINAL, VIEWERS_OBSERVE,
     route_not_allowed},
    {M_UPGRADE, "/v1/terminals/{id}/attach", DB_ROLE_VIEWER, 0, NULL, upgrade_attach},
    {M_GET, "/v1/audit", DB_ROLE_ADMIN, 0, "the audit log is for admins", route_audit},
    {M_UPGRADE, "/v1/runners/connect", ROUTE_OPEN, 0, NULL, upgrade_runner},
};

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
static int route_http(struct api *a, struct lws *wsi, struct http_req *q)
{
    struct call c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.uri = q->uri;
    const struct route *r = route_find(q->method, q->uri, &c);
    const int api = api_path(q->uri);
    if (q->too_big && api)
        return reply_error(wsi, 413, "request body over 64 KiB");
    if (r && r->role == ROUTE_OPEN)
        return r->fn(a, wsi, &c);
    if (!api)
        return reply_error(wsi, 404, "not found");
    const char *why;
    if (who(a, wsi, q->uri, 0, &c.u, &why, &c.via) != 0)
        return reply_error(wsi, 401,
                           "a valid API key (Authorization: Bearer <key>), or a session with its "
                           "CSRF token (X-Airlock-CSRF), is required");
    int has_origin;
    if (c.via.cookie && q->method != M_GET && !origin_ok(a, wsi, &has_origin))
        return reply_error(wsi, 403, "a change through a session needs our own Origin");
    logf_(a, 2, "%s %s for %s", method_name(q->method), q->uri, c.u.name);
    if (!r)
        return reply_error(wsi, 404, "not found");
    if (r->flags & ROUTE_TERMINAL) {
        c.term = malloc(sizeof *c.term);
        if (!c.term)
            return reply_error(wsi, 500, "out of memory");
        if (db_terminal_get(a->db, c.id, c.term) != AL_OK) {
            free(c.term);
            return reply_error(wsi, 404, "no such terminal");
        }
    }
    int rc = (int)c.u.role < r->role ? reply_error(wsi, 403, r->deny) : r->fn(a, wsi, &c);
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
static int route_upgrade(struct api *a, struct lws *wsi)
{
    struct call c;
    memset(&c, 0, sizeof c);
    char uri[API_MAX_URI] = "", peer[64];
    if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) < 0)
        uri[0] = 0;
    c.uri = uri;
    peer_of(wsi, peer, sizeof peer);
    const struct route *r = route_find(M_UPGRADE, uri, &c);
    int has_origin;
    if (!(r && r->role == ROUTE_OPEN) && !origin_ok(a, wsi, &has_origin) && has_origin) {
        refused(a, peer, "origin_refused", "foreign Origin", uri);
        (void)reply_error(wsi, 403, "cross-site WebSocket refused (foreign Origin)");
        return -1;
    }
    if (!offer_ok(wsi)) {
        refused(a, peer, "subprotocol_refused", "offer without " AL_SUBPROTOCOL, uri);
        (void)reply_error(wsi, 400,
                          "the subprotocol " AL_SUBPROTOCOL " is required "
                          "(Sec-WebSocket-Protocol: " AL_SUBPROTOCOL ")");
        return -1;
    }
    if (!r) {
        (void)reply_error(wsi, 404, "not found");
        return -1;
    }
    const char *why;
    if (r->role != ROUTE_OPEN && who(a, wsi, uri, 1, &c.u, &why, &c.via) != 0) {
        (void)reply_error(wsi, 401,
                          "a valid API key, or a session with its CSRF token "
                          "(Sec-WebSocket-Protocol: airlock.v1, airlock-csrf.TOKEN), is required");
        return -1;
    }
    if ((int)c.u.role < r->role) {
        (void)reply_error(wsi, 403, r->deny);
        return -1;
    }
    c.conn = calloc(1, sizeof *c.conn);
    if (!c.conn)
        return -1;
    if (r->fn(a, wsi, &c) != 0) {
        free(c.conn);
        return -1;
    }
    lws_set_opaque_user_data(wsi, c.conn);
    return 0;
}

/* ---- dialing static sandboxes ------------------------------------------------------ */

static int dial(void *ud, struct rl_sbx *sb, const char *url, const char *token)
{
    struct api *a = ud;
    char parsed[DB_SANDBOX_URL_MAX + 1], path[DB_SANDBOX_URL_MAX + 2];
    (void)snprintf(parsed, sizeof parsed, "%s", url);
    const char *prot, *addr, *p;
    int port;
    if (lws_parse_uri(parsed, &prot, &addr, &port, &p))
        return AL_E_INVAL;
    (void)snprintf(path, sizeof path, "/%s", p);
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    c->kind = CONN_DIAL;
    c->sb = sb;
    (void)snprintf(c->token, sizeof c->token, "%s", token);
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = a->ctx;
    ci.address = addr;
    ci.port = port;
    ci.path = path;
    ci.host = addr;
    ci.origin = addr;
    ci.protocol = AL_SUBPROTOCOL;
    ci.ssl_connection = !strcmp(prot, "wss") ? LCCSCF_USE_SSL : 0;
    ci.opaque_user_data = c;
    if (!lws_client_connect_via_info(&ci)) {
        free(c);
        return AL_E_IO;
    }
    return AL_OK;
}

/* ---- the lws callback ------------------------------------------------------------------ */

/*
 * Before a byte of a POST body is read: 0 (read it), or the status that
 * answers it (its bytes are then dropped as they come, never buffered).
 * Only an open route takes a body without a credential (the sign-in: the
 * key is the body).
 */
static unsigned body_verdict(struct api *a, struct lws *wsi, const struct http_req *q, long len)
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
    return who(a, wsi, q->uri, 0, &c.u, &why, &c.via) == 0 ? 0 : 401;
}

static int answer_refused(struct lws *wsi, unsigned status)
{
    return reply_error(wsi, status,
                       status == 401   ? "a valid API key is required (Authorization: Bearer <key>)"
                       : status == 413 ? "request body over 64 KiB"
                                       : "not found");
}

static int http_request(struct api *a, struct lws *wsi, struct http_req *q)
{
    memset(q, 0, sizeof *q);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0) {
        q->method = M_GET;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_GET_URI);
    } else if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0) {
        q->method = M_POST;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_POST_URI);
    } else if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0) {
        q->method = M_DELETE;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_DELETE_URI);
    } else {
        return reply_error(wsi, 405, "method not allowed");
    }
    if (q->method == M_POST) {
        char cl[32] = "";
        long n = 0;
        if (lws_hdr_copy(wsi, cl, sizeof cl, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0)
            n = strtol(cl, NULL, 10);
        if (n != 0) {
            q->refused = body_verdict(a, wsi, q, n);
            return 0; /* answered once the body is in (or dropped) */
        }
    }
    return route_http(a, wsi, q);
}

static int http_body(struct http_req *q, const void *in, size_t len)
{
    if (q->refused)
        return 0;
    if (q->too_big || len > API_MAX_REQ - q->len) {
        q->too_big = 1;
        return 0;
    }
    char *p = realloc(q->body, q->len + len + 1);
    if (!p)
        return -1;
    q->body = p;
    memcpy(q->body + q->len, in, len);
    q->len += len;
    q->body[q->len] = 0;
    return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct api *a = ctx ? lws_context_user(ctx) : NULL;
    if (!a)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    struct http_req *q = user;
    switch (reason) {
    case LWS_CALLBACK_HTTP:
        return q ? http_request(a, wsi, q) : -1;
    case LWS_CALLBACK_HTTP_BODY:
        return q ? http_body(q, in, len) : -1;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        if (!q)
            return -1;
        /* answering may end the transaction and reset q: own the body first */
        struct http_req req = *q;
        q->body = NULL;
        int rc = req.refused ? answer_refused(wsi, req.refused) : route_http(a, wsi, &req);
        free(req.body);
        return rc;
    }
    case LWS_CALLBACK_HTTP_FILE_COMPLETION:
        wsl_deadline(a->wsl, wsi, 1);
        break;
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
    case LWS_CALLBACK_CLOSED_HTTP:
        if (q) {
            free(q->body);
            q->body = NULL;
        }
        break;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        if (!in || strcmp((const char *)in, "websocket") != 0) {
            (void)reply_error(wsi, 400, "only WebSocket upgrades");
            return -1;
        }
        return route_upgrade(a, wsi);
    case LWS_CALLBACK_ESTABLISHED: {
        struct conn *c = conn_of(wsi);
        if (!c)
            return -1;
        wsg_nodelay(wsi);
        wsl_deadline(a->wsl, wsi, 0);
        if (c->kind == CONN_RUNNER)
            runner_up(a, c, wsi);
        lws_callback_on_writable(wsi);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_ESTABLISHED: {
        struct conn *c = conn_of(wsi);
        if (!c)
            return -1;
        wsg_nodelay(wsi);
        logf_(a, 1, "dialed a runner");
        runner_up(a, c, wsi);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        struct conn *c = conn_of(wsi);
        unsigned char **p = (unsigned char **)in, *end = (*p) + len;
        char hv[AL_MAX_TOKEN + 16];
        int n = snprintf(hv, sizeof hv, "Bearer %s", c ? c->token : "");
        if (n < 0 || (size_t)n >= sizeof hv)
            return -1;
        return lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, (unsigned char *)hv,
                                            n, p, end)
                   ? -1
                   : 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
        struct conn *c = conn_of(wsi);
        if (c) {
            relay_dial_failed(c->sb, in ? (const char *)in : "connection failed");
            conn_free(wsi, c);
        }
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return ws_receive(a, wsi, conn_of(wsi), in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        return ws_writeable(a, wsi, conn_of(wsi));
    case LWS_CALLBACK_CLOSED:
    case LWS_CALLBACK_CLIENT_CLOSED:
        ws_closed(a, wsi, conn_of(wsi));
        return 0;
    case LWS_CALLBACK_WSI_DESTROY: {
        wsl_gone(a->wsl, wsi);
        struct conn *c = conn_of(wsi);
        if (c) /* never established */
            ws_closed(a, wsi, c);
        break;
    }
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(struct http_req), AL_MAX_FRAME, 0, NULL, AL_MAX_FRAME},
    {AL_SUBPROTOCOL, callback, sizeof(struct http_req), AL_MAX_FRAME, 0, NULL, AL_MAX_FRAME},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- start and stop ----------------------------------------------------------- */

static void on_stop(uv_signal_t *h, int signum)
{
    struct api *a = h->data;
    logf_(a, 1, "signal %d: stopping (terminals keep running in their runners)", signum);
    uv_stop(a->loop);
}

static void on_tick(uv_timer_t *h)
{
    struct api *a = h->data;
    relay_tick(a->relay, relay_now_us());
    audit_housekeeping(a, 0);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* The signer: the child that alone loads the signing key (creating it on
 * first start, refusing one others can read). Started before anything
 * untrusted is read, and before the database is opened. */
static int start_signer(struct api *a, char *err, size_t cap)
{
    struct signer_config sc = {NULL, a->data_dir, a->cfg.log_level};
    return signer_start(&sc, &a->signer, err, cap);
}

/* --db URL (never logged: it may hold a password), else DATA/airlock.db. */
static int open_db(struct api *a, char *err, size_t cap)
{
    char url[DB_URL_MAX + 1], why[DB_MSG_MAX];
    int n = snprintf(url, sizeof url, "%s%s/%s", DB_SQLITE_PREFIX, a->data_dir, DB_FILE_NAME);
    if (!a->cfg.db_url && (n < 0 || (size_t)n >= sizeof url)) {
        al_errf(err, cap, "--data path too long");
        return AL_E_TOOBIG;
    }
    int rc = db_open(a->cfg.db_url ? a->cfg.db_url : url, &a->db, why, sizeof why);
    if (rc != AL_OK)
        al_errf(err, cap, "database: %s", why);
    return rc;
}

static int resolve_paths(struct api *a, char *err, size_t cap)
{
    if (!realpath(a->cfg.data_dir, a->data_dir)) {
        al_errf(err, cap, "data directory %s: %s", a->cfg.data_dir, strerror(errno));
        return AL_E_IO;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        al_errf(err, cap, "cannot find this program's directory");
        return AL_E_IO;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    int m = snprintf(a->web_dir, sizeof a->web_dir, "%s", a->cfg.web_dir ? a->cfg.web_dir : "");
    if (!a->cfg.web_dir)
        m = snprintf(a->web_dir, sizeof a->web_dir, "%s/web", self);
    if (m < 0 || (size_t)m >= sizeof a->web_dir)
        return AL_E_TOOBIG;
    if (a->cfg.runner_bin) {
        if (!realpath(a->cfg.runner_bin, a->runner_bin)) {
            al_errf(err, cap, "runner %s: %s", a->cfg.runner_bin, strerror(errno));
            return AL_E_IO;
        }
        return AL_OK;
    }
    m = snprintf(a->runner_bin, sizeof a->runner_bin, "%s/airlock-runner", self);
    if (m < 0 || (size_t)m >= sizeof a->runner_bin)
        return AL_E_TOOBIG;
    return AL_OK;
}

static void teardown(struct api *a)
{
    if (a->ctx)
        lws_context_destroy(a->ctx);
    a->ctx = NULL;
    wsl_close(a->wsl); /* after the context: its wsis left their slots */
    a->wsl = NULL;
    relay_free(a->relay);
    a->relay = NULL;
    lsbx_free(a->lsbx);
    a->lsbx = NULL;
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(a->loop, close_walk, NULL);
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(a->loop);
}

int api_serve(const struct api_config *cfg, char *err, size_t cap)
{
    struct api *a = calloc(1, sizeof *a);
    if (!a)
        return AL_E_NOMEM;
    a->cfg = *cfg;
    if (!a->cfg.max_conns)
        a->cfg.max_conns = API_MAX_CONNS;
    if (!a->cfg.max_conns_per_ip)
        a->cfg.max_conns_per_ip = API_MAX_CONNS_PER_IP;
    if (!a->cfg.request_timeout_s)
        a->cfg.request_timeout_s = API_REQUEST_TIMEOUT_S;
    if (!a->cfg.audit_keep_days)
        a->cfg.audit_keep_days = API_AUDIT_KEEP_DAYS;
    if (!a->cfg.audit_keep_rows)
        a->cfg.audit_keep_rows = API_AUDIT_KEEP_ROWS;
    if (aagg_new(&a->agg) != AL_OK) {
        free(a);
        return AL_E_NOMEM;
    }
    char host[256];
    const char *colon = cfg->listen ? strrchr(cfg->listen, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || !end || *end || port < 0 || port > 65535 ||
        (size_t)(colon - cfg->listen) >= sizeof host) {
        al_errf(err, cap, "--listen wants HOST:PORT");
        aagg_free(a->agg);
        free(a);
        return AL_E_INVAL;
    }
    memcpy(host, cfg->listen, (size_t)(colon - cfg->listen));
    host[colon - cfg->listen] = 0;
    if (!cfg->tls_cert != !cfg->tls_key) {
        al_errf(err, cap, "TLS wants both --tls-cert and --tls-key");
        aagg_free(a->agg);
        free(a);
        return AL_E_INVAL;
    }
    a->tls = cfg->tls_cert != NULL;
    a->sess.ttl_ms =
        (int64_t)(cfg->session_ttl_s ? cfg->session_ttl_s : API_SESSION_TTL_S) * API_MS_PER_S;
    a->sess.idle_ms =
        (int64_t)(cfg->session_idle_s ? cfg->session_idle_s : API_SESSION_IDLE_S) * API_MS_PER_S;
    if (a->sess.idle_ms > a->sess.ttl_ms)
        a->sess.idle_ms = a->sess.ttl_ms;
    if (a->sess.ttl_ms > DB_SESSION_TTL_MAX_MS) {
        al_errf(err, cap, "--session-ttl: at most 30 days");
        free(a);
        return AL_E_INVAL;
    }
    (void)snprintf(a->self_url, sizeof a->self_url, "%s://%s:%ld", a->tls ? "wss" : "ws",
                   host[0] && strcmp(host, "0.0.0.0") != 0 ? host : "127.0.0.1", port);
    int rc = resolve_paths(a, err, cap);
    if (rc == AL_OK)
        rc = start_signer(a, err, cap);
    if (rc == AL_OK)
        rc = open_db(a, err, cap);
    if (rc != AL_OK) {
        (void)db_close(a->db);
        signer_stop(a->signer);
        aagg_free(a->agg);
        free(a);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); /* a file over its size limit is a write error, reported */
    lws_set_log_level(LLL_ERR, NULL);
    a->loop = uv_default_loop();
    struct lsbx_config sbx_cfg = {
        .loop = a->loop,
        .runner_bin = a->runner_bin,
        .data_dir = a->data_dir,
        .user = cfg->sandbox_user,
        .unsafe = cfg->no_bwrap,
        .limits = cfg->sandbox_limits,
        .log = lsbx_log,
        .log_ud = a,
    };
    rc = lsbx_new(&sbx_cfg, &a->lsbx);
    if (rc == AL_OK && lsbx_unusable(a->lsbx))
        logf_(a, 0, "local sandboxes cannot run here: %s", lsbx_unusable(a->lsbx));
    if (rc == AL_OK && cfg->no_bwrap)
        logf_(a, 0,
              "--no-bwrap: local sandboxes run WITHOUT isolation; their agents can read "
              "this host as airlockd's user does");
    struct relay_config rc_cfg = {
        .db = a->db,
        .signer = a->signer,
        .data_dir = a->data_dir,
        .lsbx = a->lsbx,
        .self_url = a->self_url,
        .no_network = cfg->sandbox_no_network,
        .insecure_tls = a->tls, /* local runners dial our own certificate */
        .log_level = cfg->log_level,
        .loop = a->loop,
        .wake = wake_conn,
        .dial = dial,
        .dial_ud = a,
    };
    if (rc == AL_OK)
        rc = relay_new(&rc_cfg, &a->relay, err, cap);
    if (rc != AL_OK) {
        lsbx_free(a->lsbx);
        (void)db_close(a->db);
        signer_stop(a->signer);
        aagg_free(a->agg);
        free(a);
        return rc;
    }
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {a->loop};
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER; /* wslisten.c accepts (wslisten.h says why) */
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DISABLE_IPV6 |
                   LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.foreign_loops = loops;
    info.protocols = protocols;
    info.user = a;
    info.timeout_secs = API_TIMEOUT_S;
    info.max_http_header_data = API_HEADER_DATA;
    info.gid = -1;
    info.uid = -1;
    info.ssl_cert_filepath = cfg->tls_cert;
    info.ssl_private_key_filepath = cfg->tls_key;
    a->ctx = lws_create_context(&info);
    struct wsl_config lc = {
        .loop = a->loop,
        .vhost = a->ctx ? lws_get_vhost_by_name(a->ctx, "default") : NULL,
        .host = host[0] && strcmp(host, "0.0.0.0") != 0 ? host : NULL,
        .port = (int)port,
        .tls = a->tls,
        .lim = {a->cfg.max_conns, a->cfg.max_conns_per_ip,
                (uint64_t)a->cfg.request_timeout_s * 1000u},
        .prog = "airlockd",
        .instance = cfg->listen,
        .log_level = cfg->log_level,
    };
    char lerr[256] = "";
    if (!a->ctx || !lc.vhost || wsl_start(&lc, &a->wsl, lerr, sizeof lerr) != AL_OK) {
        al_errf(err, cap, "cannot listen on %s (is the port free? %s) %s", cfg->listen,
                a->tls ? "are the certificate and key readable PEM files?" : "", lerr);
        teardown(a);
        (void)db_close(a->db);
        signer_stop(a->signer);
        aagg_free(a->agg);
        free(a);
        return AL_E_IO;
    }
    /* port 0: the kernel chose one; dial-backs and the log name it */
    char bound[sizeof host + 8];
    (void)snprintf(bound, sizeof bound, "%s:%d", host, wsl_port(a->wsl));
    if (port == 0)
        (void)snprintf(a->self_url, sizeof a->self_url, "%s://%s:%d", a->tls ? "wss" : "ws",
                       host[0] && strcmp(host, "0.0.0.0") != 0 ? host : "127.0.0.1",
                       wsl_port(a->wsl));
    (void)uv_signal_init(a->loop, &a->sigterm);
    (void)uv_signal_init(a->loop, &a->sigint);
    (void)uv_timer_init(a->loop, &a->tick);
    a->sigterm.data = a->sigint.data = a->tick.data = a;
    (void)uv_signal_start(&a->sigterm, on_stop, SIGTERM);
    (void)uv_signal_start(&a->sigint, on_stop, SIGINT);
    (void)uv_timer_start(&a->tick, on_tick, API_TICK_MS, API_TICK_MS);
    audit_housekeeping(a, 1);
    logf_(a, 1,
          "at most %u connections, %u per address; %u s per request; audit kept %u days, "
          "%u rows",
          wsl_limits(a->wsl)->max_total, wsl_limits(a->wsl)->max_per_ip, a->cfg.request_timeout_s,
          a->cfg.audit_keep_days, a->cfg.audit_keep_rows);

    logf_(a, 1, "serving %s on %s (data %s, key %s in signer pid %ld, runner %s, web %s)",
          a->tls ? "https" : "http", port ? cfg->listen : bound, a->data_dir, signer_kid(a->signer),
          (long)signer_pid(a->signer), a->runner_bin, a->web_dir);

    uv_run(a->loop, UV_RUN_DEFAULT);

    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->tick, NULL);
    teardown(a);
    audit_housekeeping(a, 1); /* the refusals counted since the last flush */
    rc = db_close(a->db);
    signer_stop(a->signer);
    aagg_free(a->agg);
    free(a);
    if (rc != AL_OK)
        al_errf(err, cap, "closing the database: %s", al_strerror(rc));
    return rc;
}
