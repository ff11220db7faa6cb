/*
 * api: see api.h.
 *
 * Data model: struct api is the lws context's user data (no globals): the
 * configuration, the database, the signing key (loaded at start so a key
 * others can read stops airlockd before it listens), and the loop. A
 * request is answered within its LWS_CALLBACK_HTTP: read the route and the
 * key, check the role, build a JSON body with jansson, write it.
 */
#include "api.h"

#include <errno.h>
#include <jansson.h>
#include <libwebsockets.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "al_err.h"
#include "al_log.h"
#include "bearer.h"
#include "db.h"
#include "keys.h"

#define API_MAX_URI 512
#define API_MAX_AUTH 512        /* an API key header is far shorter */
#define API_MAX_BODY (1u << 20) /* a JSON answer */
#define API_LIST_MAX 1000       /* rows in one list answer */
#define API_TIMEOUT_S 10
#define API_HEADER_DATA 8192

struct api {
    struct api_config cfg;
    struct db *db;
    struct keys_signing *key;
    uv_loop_t *loop;
    uv_signal_t sigterm, sigint;
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

/* ---- answers ------------------------------------------------------------- */

static int reply(struct lws *wsi, unsigned status, const char *type, const char *body, size_t len)
{
    uint8_t hdr[LWS_PRE + 1024];
    uint8_t *start = hdr + LWS_PRE, *p = start, *end = hdr + sizeof hdr - 1;
    if (lws_add_http_common_headers(wsi, status, type, len, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)"no-store", 8, &p, end) ||
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
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Send a JSON value (stolen) as the answer. */
static int reply_json(struct lws *wsi, unsigned status, json_t *v)
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
    int rc = reply(wsi, status, "application/json", body, n + 1);
    free(body);
    return rc;
}

static int reply_error(struct lws *wsi, unsigned status, const char *msg)
{
    return reply_json(wsi, status, json_pack("{s:s}", "error", msg));
}

/* ---- routes ---------------------------------------------------------------- */

struct list_ctx {
    json_t *arr;
    size_t n;
};

static int add_sandbox(void *ctx, const struct db_sandbox *s)
{
    struct list_ctx *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_t *o = json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", s->id, "kind",
                          db_sandbox_kind_name(s->kind), "link_up", (int)s->link_up, "link_since",
                          (json_int_t)s->link_since, "rtt_us", (json_int_t)s->rtt_us);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

static int add_terminal(void *ctx, const struct db_terminal *t)
{
    struct list_ctx *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_error_t jerr;
    json_t *argv = json_loads(t->argv_json, JSON_REJECT_DUPLICATES, &jerr);
    json_t *o = json_pack("{s:s, s:s, s:o*, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "id",
                          t->id, "sandbox", t->sandbox_id, "argv", argv, "mode",
                          db_term_mode_name(t->mode), "state", db_term_state_name(t->state), "cols",
                          t->cols, "rows", t->rows, "exit_code", t->exit_code, "exit_signal",
                          t->exit_signal, "created_at", (json_int_t)t->created_at, "ended_at",
                          (json_int_t)t->ended_at, "out_bytes", (json_int_t)t->out_offset);
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

/* Who is asking: 0 and *u, or an answer already sent (401) and -2. */
static int authenticate(struct api *a, struct lws *wsi, const char *uri, struct db_user *u)
{
    char auth[API_MAX_AUTH + 1] = "";
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n > 0 && n <= API_MAX_AUTH)
        (void)lws_hdr_copy(wsi, auth, sizeof auth, WSI_TOKEN_HTTP_AUTHORIZATION);
    const char *key = bearer_token(auth[0] ? auth : NULL);
    int rc = key ? db_user_by_key(a->db, key, u) : AL_E_NOENT;
    if (rc == AL_OK)
        return 0;
    char peer[64] = "?";
    lws_get_peer_simple(wsi, peer, sizeof peer);
    /* the key itself is never logged, not even in part */
    const char *why = !key               ? "no API key"
                      : rc == AL_E_NOENT ? "unknown API key"
                                         : "malformed API key";
    logf_(a, 1, "401 %s from %s: %s", uri, peer, why);
    char detail[128];
    (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\",\"why\":\"%s\"}", peer, why);
    if (db_audit_add(a->db, 0, "anonymous", "auth_failed", uri, detail) != AL_OK)
        logf_(a, 0, "audit: %s", db_errmsg(a->db));
    (void)reply_error(wsi, 401, "a valid API key is required (Authorization: Bearer <key>)");
    return -2;
}

static int route(struct api *a, struct lws *wsi)
{
    char uri[API_MAX_URI] = "";
    int is_get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
    if (!is_get) {
        (void)lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_POST_URI);
        return reply_error(wsi, 405, "only GET is served yet");
    }
    if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) < 0)
        return reply_error(wsi, 414, "URI too long");
    if (!strcmp(uri, "/healthz"))
        return reply(wsi, 200, "text/plain", "ok\n", 3);
    if (strncmp(uri, "/v1/", 4) != 0)
        return reply_error(wsi, 404, "not found");

    struct db_user u;
    if (authenticate(a, wsi, uri, &u) != 0)
        return 0;
    struct list_ctx l = {json_array(), 0};
    if (!l.arr)
        return reply_error(wsi, 500, "out of memory");
    int rc;
    if (!strcmp(uri, "/v1/sandboxes")) {
        rc = db_sandbox_list(a->db, add_sandbox, &l);
    } else if (!strcmp(uri, "/v1/terminals")) {
        rc = db_terminal_list(a->db, NULL, add_terminal, &l);
    } else if (!strcmp(uri, "/v1/audit")) {
        if (u.role != DB_ROLE_ADMIN) {
            json_decref(l.arr);
            return reply_error(wsi, 403, "the audit log is for admins");
        }
        struct db_audit_filter f;
        memset(&f, 0, sizeof f);
        f.limit = API_LIST_MAX;
        rc = db_audit_query(a->db, &f, add_audit, &l);
    } else {
        json_decref(l.arr);
        return reply_error(wsi, 404, "not found");
    }
    if (rc < 0) {
        json_decref(l.arr);
        logf_(a, 0, "%s: %s", uri, db_errmsg(a->db));
        return reply_error(wsi, 500, "database error");
    }
    logf_(a, 2, "200 %s for %s", uri, u.name);
    return reply_json(wsi, 200, l.arr);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct api *a = ctx ? lws_context_user(ctx) : NULL;
    if (a && reason == LWS_CALLBACK_HTTP)
        return route(a, wsi);
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"http", callback, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- start and stop ----------------------------------------------------------- */

static void on_stop(uv_signal_t *h, int signum)
{
    struct api *a = h->data;
    logf_(a, 1, "signal %d: stopping", signum);
    uv_stop(a->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* The signing key: created on first start, refused if others can read it. */
static int load_key(struct api *a, char *err, size_t cap)
{
    char path[4096], why[256];
    int rc = keys_path(a->cfg.data_dir, KEYS_PRIVATE_FILE, path, sizeof path);
    if (rc != AL_OK) {
        al_errf(err, cap, "--data path too long");
        return rc;
    }
    rc = keys_load_private(path, &a->key, why, sizeof why);
    if (rc == AL_E_NOENT) {
        struct keys_init_result res;
        rc = keys_init_dir(a->cfg.data_dir, false, &res, why, sizeof why);
        if (rc == AL_OK) {
            logf_(a, 1, "created signing key %s", res.kid);
            rc = keys_load_private(path, &a->key, why, sizeof why);
        }
    }
    if (rc != AL_OK)
        al_errf(err, cap, "signing key: %s", why);
    return rc;
}

static int open_db(struct api *a, char *err, size_t cap)
{
    char url[DB_URL_MAX + 1], why[DB_MSG_MAX];
    int n = snprintf(url, sizeof url, "%s%s/%s", DB_SQLITE_PREFIX, a->cfg.data_dir, DB_FILE_NAME);
    if (n < 0 || (size_t)n >= sizeof url) {
        al_errf(err, cap, "--data path too long");
        return AL_E_TOOBIG;
    }
    int rc = db_open(url, &a->db, why, sizeof why);
    if (rc != AL_OK)
        al_errf(err, cap, "database: %s", why);
    return rc;
}

int api_serve(const struct api_config *cfg, char *err, size_t cap)
{
    struct api a;
    memset(&a, 0, sizeof a);
    a.cfg = *cfg;
    char host[256];
    const char *colon = cfg->listen ? strrchr(cfg->listen, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || !end || *end || port < 1 || port > 65535 ||
        (size_t)(colon - cfg->listen) >= sizeof host) {
        al_errf(err, cap, "--listen wants HOST:PORT");
        return AL_E_INVAL;
    }
    memcpy(host, cfg->listen, (size_t)(colon - cfg->listen));
    host[colon - cfg->listen] = 0;
    int rc = load_key(&a, err, cap);
    if (rc == AL_OK)
        rc = open_db(&a, err, cap);
    if (rc != AL_OK) {
        keys_free(a.key);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    lws_set_log_level(LLL_ERR, NULL);
    a.loop = uv_default_loop();
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {a.loop};
    info.port = (int)port;
    info.iface = host[0] && strcmp(host, "0.0.0.0") != 0 ? host : NULL;
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DISABLE_IPV6;
    info.foreign_loops = loops;
    info.protocols = protocols;
    info.user = &a;
    info.timeout_secs = API_TIMEOUT_S;
    info.max_http_header_data = API_HEADER_DATA;
    info.gid = -1;
    info.uid = -1;
    struct lws_context *ctx = lws_create_context(&info);
    if (!ctx) {
        al_errf(err, cap, "cannot listen on %s (is the port free?)", cfg->listen);
        (void)db_close(a.db);
        keys_free(a.key);
        return AL_E_IO;
    }
    (void)uv_signal_init(a.loop, &a.sigterm);
    (void)uv_signal_init(a.loop, &a.sigint);
    a.sigterm.data = a.sigint.data = &a;
    (void)uv_signal_start(&a.sigterm, on_stop, SIGTERM);
    (void)uv_signal_start(&a.sigint, on_stop, SIGINT);
    logf_(&a, 1, "serving on %s (data %s, key %s)", cfg->listen, cfg->data_dir, keys_kid(a.key));

    uv_run(a.loop, UV_RUN_DEFAULT);

    uv_close((uv_handle_t *)&a.sigterm, NULL);
    uv_close((uv_handle_t *)&a.sigint, NULL);
    lws_context_destroy(ctx);
    for (int i = 0; i < 100 && uv_run(a.loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(a.loop, close_walk, NULL);
    for (int i = 0; i < 100 && uv_run(a.loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(a.loop);
    rc = db_close(a.db);
    keys_free(a.key);
    if (rc != AL_OK)
        al_errf(err, cap, "closing the database: %s", al_strerror(rc));
    return rc;
}
