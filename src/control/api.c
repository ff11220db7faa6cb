/*
 * api: see api.h. This file starts and stops `airlockd serve` and holds
 * the one lws callback, which hands each event to the file of its
 * concept:
 *
 *   api_http.c      an HTTP request read: method, path, bounded body
 *   api_route.c     the route table, routes[], and its two dispatches
 *   api_auth.c      who is asking: API key, or session cookie + CSRF; Origin
 *   api_reply.c     the answers
 *   api_view.c      rows as the API's JSON
 *   api_audit.c     the audit log: actions, refusals, rows queued, retention,
 *                   GET /v1/audit
 *   api_sandbox.c, api_terminal.c, api_session.c, api_metrics.c,
 *   api_static.c    the handlers, one file per resource
 *   api_ws.c        WebSocket connections: messages in, frames out, close
 *   api_wsess.c     a web session's WebSockets closed when the session ends
 *   api_runner.c    runner links: accepted at /v1/runners/connect, dialed
 *   api_wsc.c       a dial's link: wslay framing on an lws RAW socket, TLS for wss://
 *   api_proxy.c     the credential proxy: started, stopped, its route
 *   api_replica.c   this replica: registered, its heartbeat, GET /v1/replicas
 *   api_hop.c       an attach relayed to the terminal's owner replica
 *   api_fwd.c       an action forwarded to the sandbox's owner replica
 *
 * api_local.h is what they share; nothing outside src/control/api*.c
 * includes it.
 *
 * Data model: struct api is the lws context's user data (no globals): the
 * configuration, the database, the signer (the child process that alone
 * holds the signing key: this process never reads it), the relay, the loop
 * and a tick timer. An HTTP request keeps its body in its per-session struct
 * http_req until it is complete, then is answered at once (but one
 * forwarded to another replica: at a later HTTP_WRITEABLE). A WebSocket
 * connection (client, accepted runner or dialed runner) owns a struct conn
 * attached to its wsi as lws "opaque user data": the message being
 * reassembled, what it is linked to in the relay, and its close state.
 */
#include "api.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_log.h"
#include "api_local.h"
#include "auditagg.h"
#include "auditq.h"
#include "db.h"
#include "fsutil.h"
#include "lsbx.h"
#include "proxyup.h"
#include "relay.h"
#include "signer.h"
#include "wsctx.h"
#include "wslog.h"
#include "wsg.h"
#include "wslisten.h"

#define API_TIMEOUT_S 10
#define API_HEADER_DATA 8192
#define API_TICK_MS 50
#define API_SESSION_TTL_S (12 * 3600) /* a web session, from sign-in, never extended */
#define API_SESSION_IDLE_S 3600       /* a web session unused this long ends */
/* Limits of an exposed server (docs/control-plane.md, "Limits"); the
 * first three can be set in --config. */
#define API_MAX_CONNS 1000          /* connections at once (lowered to fit RLIMIT_NOFILE) */
#define API_MAX_CONNS_PER_IP 100    /* connections at once from one address */
#define API_REQUEST_TIMEOUT_S 10    /* an HTTP request, headers and body, from accept */
#define API_AUDIT_KEEP_DAYS 90      /* audit rows older than this are removed */
#define API_AUDIT_KEEP_ROWS 1000000 /* at most this many audit rows are kept */

void api_log(const struct api *a, int level, const char *fmt, ...)
{
    if (level > a->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog(a->cfg.log_format, "airlockd", a->cfg.listen, level, fmt, ap);
    va_end(ap);
}

static void lsbx_log(void *ud, int level, const char *line)
{
    api_log(ud, level, "%s", line);
}

int64_t api_now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * API_MS_PER_S + ts.tv_nsec / 1000000;
}

/* The one lws callback of both protocols: each event to the file of its
 * concept (this file's preamble lists them). */
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
        return q ? api_http_request(a, wsi, q) : -1;
    case LWS_CALLBACK_HTTP_BODY:
        return q ? api_http_body(q, in, len) : -1;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return q ? api_http_done(a, wsi, q) : -1;
    case LWS_CALLBACK_HTTP_FILE_COMPLETION:
        wsl_deadline(a->wsl, wsi, 1);
        break;
    case LWS_CALLBACK_HTTP_WRITEABLE: /* a forwarded action's answer (api_fwd.c) */
        return q ? api_fwd_writeable(wsi, q) : 0;
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
    case LWS_CALLBACK_CLOSED_HTTP:
        if (q) {
            free(q->body);
            q->body = NULL;
            api_fwd_cancel(q);
        }
        break;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        if (!in || strcmp((const char *)in, "websocket") != 0) {
            (void)api_reply_error(wsi, 400, "only WebSocket upgrades");
            return -1;
        }
        return api_route_upgrade(a, wsi);
    case LWS_CALLBACK_ESTABLISHED: {
        struct conn *c = api_ws_conn(wsi);
        if (!c)
            return -1;
        wsg_nodelay(wsi);
        wsl_deadline(a->wsl, wsi, 0);
        if (c->kind == CONN_RUNNER)
            api_runner_up(a, c, wsi);
        lws_callback_on_writable(wsi);
        return 0;
    }
    case LWS_CALLBACK_RAW_CONNECTED: { /* a dial (api_wsc.c) */
        struct conn *c = api_ws_conn(wsi);
        if (!c || !c->wsc)
            return -1;
        api_wsc_connected(a, wsi, c);
        return 0;
    }
    case LWS_CALLBACK_RAW_RX:
        return api_wsc_receive(api_ws_conn(wsi), in, len);
    case LWS_CALLBACK_RAW_WRITEABLE:
        return api_wsc_writeable(a, wsi, api_ws_conn(wsi));
    case LWS_CALLBACK_RAW_CLOSE:
        api_wsc_closed(a, wsi, api_ws_conn(wsi));
        return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        api_runner_dial_failed(wsi, in);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return api_ws_receive(a, wsi, api_ws_conn(wsi), in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return api_ws_writeable(a, wsi, api_ws_conn(wsi));
    case LWS_CALLBACK_CLOSED:
        api_ws_closed(a, wsi, api_ws_conn(wsi));
        return 0;
    case LWS_CALLBACK_WSI_DESTROY: {
        wsl_gone(a->wsl, wsi);
        struct conn *c = api_ws_conn(wsi);
        if (c) /* never established */
            api_ws_closed(a, wsi, c);
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

static void on_stop(uv_signal_t *h, int signum)
{
    struct api *a = h->data;
    api_log(a, 1, "signal %d: stopping (terminals keep running in their runners)", signum);
    uv_stop(a->loop);
}

static void on_tick(uv_timer_t *h)
{
    struct api *a = h->data;
    relay_tick(a->relay, relay_now_us());
    api_wsess_tick(a);
    api_audit_housekeeping(a, 0);
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
    struct signer_config sc = {NULL, a->data_dir, a->cfg.log_level, a->cfg.log_format};
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

/* --recordings DIR (made if missing, 0700), else DATA/recordings. */
static int resolve_recordings(struct api *a, char *err, size_t cap)
{
    const char *dir = a->cfg.recordings_dir;
    int m = dir ? snprintf(a->rec_dir, sizeof a->rec_dir, "%s", dir)
                : snprintf(a->rec_dir, sizeof a->rec_dir, "%s/recordings", a->data_dir);
    if (m < 0 || (size_t)m >= sizeof a->rec_dir - DB_NAME_MAX - 16) {
        al_errf(err, cap, "recordings directory: path too long");
        return AL_E_TOOBIG;
    }
    char real[PATH_MAX];
    if (fsutil_mkdir_p(a->rec_dir, 0700) != AL_OK || !realpath(a->rec_dir, real)) {
        al_errf(err, cap, "recordings directory %s: %s", a->rec_dir, strerror(errno));
        return AL_E_IO;
    }
    (void)snprintf(a->rec_dir, sizeof a->rec_dir, "%s", real);
    return AL_OK;
}

static int resolve_paths(struct api *a, char *err, size_t cap)
{
    if (!realpath(a->cfg.data_dir, a->data_dir)) {
        al_errf(err, cap, "data directory %s: %s", a->cfg.data_dir, strerror(errno));
        return AL_E_IO;
    }
    int rrc = resolve_recordings(a, err, cap);
    if (rrc != AL_OK)
        return rrc;
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
    SSL_CTX_free(a->dial_tls); /* after the context: its dials are gone */
    a->dial_tls = NULL;
    proxyup_free(a->fwd_up); /* after the context: its forwards were cancelled */
    a->fwd_up = NULL;
    wsl_close(a->wsl); /* after the context: its wsis left their slots */
    a->wsl = NULL;
    api_wsess_stop(a); /* after the context: its connections are forgotten */
    relay_free(a->relay);
    a->relay = NULL;
    api_proxy_stop(a); /* after the relay: it revokes through the proxy */
    lsbx_free(a->lsbx);
    a->lsbx = NULL;
    api_ws_wake_close(a); /* after the context and the relay: nothing wakes a connection now */
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(a->loop, close_walk, NULL);
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(a->loop);
}

/* --listen, cut up: HOST ("" or 0.0.0.0: every address) and PORT (0: the
 * kernel chooses). */
struct listen_addr {
    char host[256];
    long port;
};

/* "ws://HOST:PORT" or wss: how local runners dial us back. */
static void set_self_url(struct api *a, const struct listen_addr *l, long port)
{
    (void)snprintf(a->self_url, sizeof a->self_url, "%s://%s:%ld", a->tls ? "wss" : "ws",
                   l->host[0] && strcmp(l->host, "0.0.0.0") != 0 ? l->host : "127.0.0.1", port);
}

/* The configuration's defaults, and its checks that need no system call. */
static int configure(struct api *a, const struct api_config *cfg, struct listen_addr *l, char *err,
                     size_t cap)
{
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
    const char *colon = cfg->listen ? strrchr(cfg->listen, ':') : NULL;
    char *end = NULL;
    l->port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || !end || *end || l->port < 0 || l->port > 65535 ||
        (size_t)(colon - cfg->listen) >= sizeof l->host) {
        al_errf(err, cap, "--listen wants HOST:PORT");
        return AL_E_INVAL;
    }
    memcpy(l->host, cfg->listen, (size_t)(colon - cfg->listen));
    l->host[colon - cfg->listen] = 0;
    if (!cfg->tls_cert != !cfg->tls_key) {
        al_errf(err, cap, "TLS wants both --tls-cert and --tls-key");
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
        return AL_E_INVAL;
    }
    set_self_url(a, l, l->port);
    return AL_OK;
}

/* The loop, the local sandboxes' runners (lsbx) and the relay. */
static int start_relay(struct api *a, char *err, size_t cap)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); /* a file over its size limit is a write error, reported */
    /* lws's own lines, rate-limited: a peer can repeat their cause at will */
    wslog_init(LLL_ERR, a->cfg.log_format, "airlockd", "lws", 0);
    a->loop = uv_default_loop();
    struct lsbx_config sbx_cfg = {
        .loop = a->loop,
        .runner_bin = a->runner_bin,
        .data_dir = a->data_dir,
        .user = a->cfg.sandbox_user,
        .unsafe = a->cfg.no_bwrap,
        .limits = a->cfg.sandbox_limits,
        .log = lsbx_log,
        .log_ud = a,
    };
    int rc = lsbx_new(&sbx_cfg, &a->lsbx);
    if (rc != AL_OK)
        return rc;
    if (lsbx_unusable(a->lsbx))
        api_log(a, 0, "local sandboxes cannot run here: %s", lsbx_unusable(a->lsbx));
    if (a->cfg.no_bwrap)
        api_log(a, 0,
                "--no-bwrap: local sandboxes run WITHOUT isolation; their agents can read "
                "this host as airlockd's user does");
    if ((rc = api_proxy_start(a, err, cap)) != AL_OK)
        return rc;
    struct relay_config rc_cfg = {
        .db = a->db,
        .signer = a->signer,
        .data_dir = a->data_dir,
        .rec_dir = a->rec_dir,
        /* another replica may hold a recording open: take it over by a copy */
        .rec_fenced = a->cfg.db_url &&
                      strncmp(a->cfg.db_url, DB_SQLITE_PREFIX, strlen(DB_SQLITE_PREFIX)) != 0,
        .lsbx = a->lsbx,
        .self_url = a->self_url,
        .no_network = a->cfg.sandbox_no_network,
        .insecure_tls = a->tls, /* local runners dial our own certificate */
        .log_level = a->cfg.log_level,
        .log_format = a->cfg.log_format,
        .proxy = a->proxy,
        .platforms = a->cfg.platforms,
        .proxy_base = a->proxysrv ? a->proxy_base : NULL,
        .proxy_direct = a->cfg.proxy_direct,
        .ping_us = (uint64_t)a->cfg.ping_interval_s * 1000000u,
        .idle_us = (uint64_t)a->cfg.idle_timeout_s * 1000000u,
        .loop = a->loop,
        .wake = api_ws_wake,
        .dial = api_runner_dial,
        .dial_ud = a,
    };
    rc = relay_new(&rc_cfg, &a->relay, err, cap);
    if (rc == AL_OK && (rc = api_wsess_start(a)) != AL_OK) {
        al_errf(err, cap, "web sessions' WebSockets: %s", al_strerror(rc));
        relay_free(a->relay);
        a->relay = NULL;
    }
    if (rc != AL_OK) {
        api_proxy_stop(a);
        for (int i = 0; i < 10 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
            ;
    }
    return rc;
}

/* The lws context and the listening socket; on failure, both gone. */
static int start_listening(struct api *a, const struct listen_addr *l, char *err, size_t cap)
{
    const struct wsctx_config wc = {
        .loop = a->loop,
        .protocols = protocols,
        .user = a,
        .server = 1, /* wslisten.c accepts (wslisten.h says why) */
        /* lws speaks TLS only as our server (wss:// dials are
         * wsctls.c's): without it, no CA store is loaded at the start */
        .ssl = a->tls,
        .timeout_s = API_TIMEOUT_S,
        .max_header_data = API_HEADER_DATA,
        .tls_cert = a->cfg.tls_cert,
        .tls_key = a->cfg.tls_key,
    };
    a->ctx = wsctx_new(&wc);
    struct wsl_config lc = {
        .loop = a->loop,
        .vhost = a->ctx ? lws_get_vhost_by_name(a->ctx, "default") : NULL,
        .host = l->host[0] && strcmp(l->host, "0.0.0.0") != 0 ? l->host : NULL,
        .port = (int)l->port,
        .tls = a->tls,
        .lim = {a->cfg.max_conns, a->cfg.max_conns_per_ip,
                (uint64_t)a->cfg.request_timeout_s * 1000u},
        .prog = "airlockd",
        .instance = a->cfg.listen,
        .log_level = a->cfg.log_level,
        .log_format = a->cfg.log_format,
    };
    char lerr[256] = "";
    if (!a->ctx || !lc.vhost || wsl_start(&lc, &a->wsl, lerr, sizeof lerr) != AL_OK) {
        al_errf(err, cap, "cannot listen on %s (is the port free? %s) %s", a->cfg.listen,
                a->tls ? "are the certificate and key readable PEM files?" : "", lerr);
        teardown(a);
        return AL_E_IO;
    }
    /* port 0: the kernel chose one; dial-backs name it */
    if (l->port == 0)
        set_self_url(a, l, wsl_port(a->wsl));
    return AL_OK;
}

/* Serve until SIGTERM or SIGINT, then close what the loop holds. */
static void run(struct api *a, const struct listen_addr *l)
{
    char bound[sizeof l->host + 8]; /* port 0: the log names the kernel's choice */
    (void)snprintf(bound, sizeof bound, "%s:%d", l->host, wsl_port(a->wsl));
    (void)uv_signal_init(a->loop, &a->sigterm);
    (void)uv_signal_init(a->loop, &a->sigint);
    (void)uv_timer_init(a->loop, &a->tick);
    (void)uv_timer_init(a->loop, &a->auditq_timer);
    a->sigterm.data = a->sigint.data = a->tick.data = a->auditq_timer.data = a;
    a->auditq_timer_on = 1;
    (void)uv_signal_start(&a->sigterm, on_stop, SIGTERM);
    (void)uv_signal_start(&a->sigint, on_stop, SIGINT);
    (void)uv_timer_start(&a->tick, on_tick, API_TICK_MS, API_TICK_MS);
    api_audit_housekeeping(a, 1);
    api_log(a, 1,
            "at most %u connections, %u per address; %u s per request; audit kept %u days, "
            "%u rows",
            wsl_limits(a->wsl)->max_total, wsl_limits(a->wsl)->max_per_ip, a->cfg.request_timeout_s,
            a->cfg.audit_keep_days, a->cfg.audit_keep_rows);

    api_log(a, 1, "serving %s on %s (data %s, key %s in signer pid %ld, runner %s, web %s)",
            a->tls ? "https" : "http", l->port ? a->cfg.listen : bound, a->data_dir,
            signer_kid(a->signer), (long)signer_pid(a->signer), a->runner_bin, a->web_dir);

    uv_run(a->loop, UV_RUN_DEFAULT);

    api_replica_stop(a); /* a clean stop: others see it gone at once */
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->tick, NULL);
    a->auditq_timer_on = 0; /* rows queued from now on wait for the flush below */
    uv_close((uv_handle_t *)&a->auditq_timer, NULL);
    teardown(a);
    api_audit_housekeeping(a, 1); /* the refusals counted, the rows queued since the last flush */
}

/* What outlives the loop: the local sandboxes' state, the database, the
 * signer, the refusals' counts, the audit queue (empty after a run). */
static void release(struct api *a)
{
    lsbx_free(a->lsbx);
    (void)db_close(a->db);
    signer_stop(a->signer);
    aagg_free(a->agg);
    auditq_free(a->auditq);
    free(a);
}

int api_serve(const struct api_config *cfg, char *err, size_t cap)
{
    struct api *a = calloc(1, sizeof *a);
    if (!a)
        return AL_E_NOMEM;
    if (aagg_new(&a->agg) != AL_OK || auditq_new(&a->auditq) != AL_OK) {
        aagg_free(a->agg);
        free(a);
        return AL_E_NOMEM;
    }
    struct listen_addr l;
    int rc = configure(a, cfg, &l, err, cap);
    if (rc == AL_OK)
        rc = resolve_paths(a, err, cap);
    if (rc == AL_OK)
        rc = start_signer(a, err, cap);
    if (rc == AL_OK)
        rc = open_db(a, err, cap);
    if (rc == AL_OK)
        rc = start_relay(a, err, cap);
    if (rc == AL_OK)
        rc = start_listening(a, &l, err, cap);
    if (rc == AL_OK && (rc = api_replica_start(a, err, cap)) != AL_OK)
        teardown(a);
    if (rc == AL_OK) {
        run(a, &l);
        rc = db_close(a->db);
        a->db = NULL;
        if (rc != AL_OK)
            al_errf(err, cap, "closing the database: %s", al_strerror(rc));
    }
    release(a);
    return rc;
}
