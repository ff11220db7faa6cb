/*
 * cli_net: see cli_net.h.
 *
 * Every lws connection carries, as its opaque user data, a pointer to
 * either a struct http_req (on the stack of cli_http, cleared before that
 * returns) or a struct cli_ws (heap, freed after its on_closed). Both start
 * with an int kind so one callback can tell them apart. A connection whose
 * owner went away has NULL user data and is ignored until lws drops it.
 */
#include "cli_net.h"

#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "al_err.h"
#include "al_limits.h"
#include "endpoint.h"
#include "wsctx.h"
#include "wsg.h"

#define PROTO_NAME AL_SUBPROTOCOL
/* lws 4.1's private value for a close frame (the public enum skips 4). */
#define CONNECT_TIMEOUT_S 10
#define MAX_HEADER_DATA 8192
#define HTTP_READ_CHUNK 4096
#define CLOSE_WHY_MAX 120
#define PATH_MAX_LEN 4096
#define AUTH_MAX (CLI_KEY_MAX + 16)
#define MS_PER_S 1000

enum conn_kind { K_HTTP = 1, K_WS = 2 };

struct cli_net {
    uv_loop_t *loop;
    struct lws_context *ctx;
    struct cli_config cfg;
};

struct http_req {
    int kind;
    struct cli_net *n;
    const char *body;
    size_t body_len, max;
    int is_post;
    struct cli_http_result *res;
    int done, rc;
    char *buf;
    size_t len, cap;
};

struct cli_ws {
    int kind;
    struct cli_net *n;
    struct lws *wsi;
    struct cli_ws_handler h;
    struct wsg g; /* the message being reassembled, the close to send */
    int opened, closed;
    int opening; /* inside lws_client_connect_via_info() */
    int drop;
    int peer_code; /* from the peer's close frame */
    char peer_why[CLOSE_WHY_MAX];
    char key[CLI_KEY_MAX]; /* the key presented, as it was when opened */
    char subproto[128];    /* the server's Sec-WebSocket-Protocol, read before it is freed */
};

size_t cli_ws_pre(void)
{
    return LWS_PRE;
}

/* ---- shared -------------------------------------------------------------- */

/* A header "name:" as lws wants it: lower case, with the colon. */
static int header_name(const char *name, size_t n, char *out, size_t cap)
{
    if (n == 0 || n + 2 > cap)
        return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    out[n] = ':';
    out[n + 1] = 0;
    return 0;
}

/* The key as "Bearer KEY" in Authorization or in cfg.token_header, then
 * the configured extra headers. */
static int add_auth(struct cli_net *n, const char *key, struct lws *wsi, unsigned char **p,
                    unsigned char *end)
{
    char name[CLI_HEADER_NAME_MAX + 2];
    if (key[0]) {
        char hv[AUTH_MAX];
        int len = snprintf(hv, sizeof hv, "Bearer %s", key);
        if (len < 0 || (size_t)len >= sizeof hv)
            return -1;
        const char *th = n->cfg.token_header;
        if (!th[0] || !strcasecmp(th, "authorization")) {
            if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, (unsigned char *)hv,
                                             len, p, end))
                return -1;
        } else if (header_name(th, strlen(th), name, sizeof name) ||
                   lws_add_http_header_by_name(wsi, (unsigned char *)name, (unsigned char *)hv, len,
                                               p, end)) {
            return -1;
        }
    }
    for (int i = 0; i < n->cfg.nheaders; i++) {
        const char *h = n->cfg.headers[i], *colon = strchr(h, ':');
        if (!colon || header_name(h, (size_t)(colon - h), name, sizeof name))
            return -1;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        if (lws_add_http_header_by_name(wsi, (unsigned char *)name, (const unsigned char *)v,
                                        (int)strlen(v), p, end))
            return -1;
    }
    return 0;
}

/* https/wss: verify the server's certificate against the system's CA
 * store, unless --insecure (a self-signed, expired or misnamed one). */
static int ssl_flags(const struct cli_config *c)
{
    if (!c->tls)
        return 0;
    if (!c->insecure)
        return LCCSCF_USE_SSL;
    return LCCSCF_USE_SSL | LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
           LCCSCF_ALLOW_EXPIRED;
}

/* What an HTTP request and a WebSocket share: airlockd's address, the path,
 * TLS. No Origin: lws would send "http://HOST" even over TLS, which
 * airlockd rightly refuses as foreign on https; a CLI is not a browser
 * page. */
static void connect_info(const struct cli_net *n, const char *path,
                         struct lws_client_connect_info *ci)
{
    wsctx_dial_info(ci, n->ctx, n->cfg.host, n->cfg.port, path, ssl_flags(&n->cfg));
    ci->local_protocol_name = PROTO_NAME;
}

/* ---- HTTP ---------------------------------------------------------------- */

static void http_finish(struct lws *wsi, struct http_req *q, int rc)
{
    if (q->done)
        return;
    q->done = 1;
    q->rc = rc;
    lws_set_opaque_user_data(wsi, NULL);
}

static void http_neterr(struct lws *wsi, struct http_req *q, const char *why)
{
    q->res->neterr = 1;
    (void)snprintf(q->res->why, sizeof q->res->why, "%s", why ? why : "connection failed");
    http_finish(wsi, q, AL_E_IO);
}

static int http_append(struct http_req *q, const void *in, size_t len)
{
    if (len > q->max - q->len)
        return AL_E_TOOBIG;
    if (q->len + len + 1 > q->cap) {
        size_t cap = q->cap ? q->cap : HTTP_READ_CHUNK;
        while (cap < q->len + len + 1)
            cap *= 2;
        char *b = realloc(q->buf, cap);
        if (!b)
            return AL_E_NOMEM;
        q->buf = b;
        q->cap = cap;
    }
    memcpy(q->buf + q->len, in, len);
    q->len += len;
    q->buf[q->len] = 0;
    return AL_OK;
}

static int http_callback(struct lws *wsi, enum lws_callback_reasons reason, struct http_req *q,
                         void *in, size_t len)
{
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        unsigned char **p = (unsigned char **)in, *end = (*p) + len;
        if (add_auth(q->n, q->n->cfg.key, wsi, p, end))
            return -1;
        if (!q->is_post)
            return 0;
        char cl[32];
        int n = snprintf(cl, sizeof cl, "%zu", q->body_len);
        if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
                                         (const unsigned char *)"application/json", 16, p, end) ||
            lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH,
                                         (const unsigned char *)cl, n, p, end))
            return -1;
        lws_client_http_body_pending(wsi, 1);
        lws_callback_on_writable(wsi);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_HTTP_WRITEABLE: {
        if (!q->is_post)
            return 0;
        uint8_t *buf = malloc(LWS_PRE + q->body_len + 1);
        if (!buf)
            return -1;
        memcpy(buf + LWS_PRE, q->body, q->body_len);
        lws_client_http_body_pending(wsi, 0);
        int w = lws_write(wsi, buf + LWS_PRE, q->body_len, LWS_WRITE_HTTP_FINAL);
        free(buf);
        q->is_post = 0;
        return w < (int)q->body_len ? -1 : 0;
    }
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
        q->res->status = lws_http_client_http_response(wsi);
        (void)lws_get_peer_simple(wsi, q->res->peer, sizeof q->res->peer);
        if (lws_hdr_copy(wsi, q->res->server, (int)sizeof q->res->server, WSI_TOKEN_HTTP_SERVER) <
            0)
            q->res->server[0] = 0;
        return 0;
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP: {
        char buf[LWS_PRE + HTTP_READ_CHUNK];
        char *px = buf + LWS_PRE;
        int lenx = HTTP_READ_CHUNK;
        return lws_http_client_read(wsi, &px, &lenx) < 0 ? -1 : 0;
    }
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ: {
        int rc = http_append(q, in, len);
        if (rc != AL_OK) {
            http_finish(wsi, q, rc);
            return -1;
        }
        return 0;
    }
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
        if (!q->res->status)
            q->res->status = lws_http_client_http_response(wsi);
        http_finish(wsi, q, AL_OK);
        return -1; /* one request per connection: close it */
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
        unsigned st = lws_http_client_http_response(wsi);
        if (st) { /* lws calls some answers errors: an answer is an answer */
            q->res->status = st;
            http_finish(wsi, q, AL_OK);
            return 0;
        }
        http_neterr(wsi, q, in ? (const char *)in : "connection failed");
        return 0;
    }
    case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
        http_neterr(wsi, q, "the server closed the connection before answering");
        return 0;
    default:
        return 0;
    }
}

static void on_http_timeout(uv_timer_t *t)
{
    int *expired = t->data;
    *expired = 1;
}

int cli_http(struct cli_net *n, const char *method, const char *path, const char *body,
             size_t max_body, struct cli_http_result *res)
{
    memset(res, 0, sizeof *res);
    struct http_req q;
    memset(&q, 0, sizeof q);
    q.kind = K_HTTP;
    q.n = n;
    q.res = res;
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    q.is_post = body != NULL;
    q.max = max_body;
    char full[PATH_MAX_LEN];
    int fl = snprintf(full, sizeof full, "%s%s", n->cfg.prefix, path);
    if (fl < 0 || (size_t)fl >= sizeof full)
        return AL_E_TOOBIG;
    struct lws_client_connect_info ci;
    connect_info(n, full, &ci);
    ci.method = method;
    ci.opaque_user_data = &q;
    struct lws *wsi = NULL;
    ci.pwsi = &wsi;
    uv_timer_t timer;
    int expired = 0;
    (void)uv_timer_init(n->loop, &timer);
    timer.data = &expired;
    (void)uv_timer_start(&timer, on_http_timeout, (uint64_t)CLI_HTTP_TIMEOUT_S * MS_PER_S, 0);
    if (!lws_client_connect_via_info(&ci) && !q.done) {
        res->neterr = 1;
        (void)snprintf(res->why, sizeof res->why, "cannot start a connection to %.200s:%d",
                       n->cfg.host, n->cfg.port);
        q.done = 1;
        q.rc = AL_E_IO;
    }
    while (!q.done && !expired)
        (void)uv_run(n->loop, UV_RUN_ONCE);
    (void)uv_timer_stop(&timer);
    uv_close((uv_handle_t *)&timer, NULL);
    (void)uv_run(n->loop, UV_RUN_NOWAIT); /* let the timer close before it goes */
    if (!q.done) {
        if (wsi) {
            lws_set_opaque_user_data(wsi, NULL);
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        }
        res->neterr = 1;
        (void)snprintf(res->why, sizeof res->why, "no answer within %d s", CLI_HTTP_TIMEOUT_S);
        q.rc = AL_E_IO;
    }
    if (q.rc != AL_OK) {
        free(q.buf);
        return q.rc;
    }
    res->body = q.buf;
    res->len = q.len;
    return AL_OK;
}

/* ---- WebSocket ------------------------------------------------------------- */

static void ws_closed(struct lws *wsi, struct cli_ws *ws, unsigned status, const char *why)
{
    lws_set_opaque_user_data(wsi, NULL);
    if (ws->closed)
        return;
    ws->closed = 1;
    if (ws->opening)
        return; /* cli_ws_open reports it and frees ws */
    char msg[CLI_NET_WHY_MAX];
    if (ws->peer_code)
        (void)snprintf(msg, sizeof msg, "%.100s (close %d%s%.100s)", why, ws->peer_code,
                       ws->peer_why[0] ? ": " : "", ws->peer_why);
    else
        (void)snprintf(msg, sizeof msg, "%.200s", why);
    if (ws->h.on_closed)
        ws->h.on_closed(ws->h.ud, ws, ws->opened, status, msg);
    wsg_release(&ws->g);
    free(ws);
}

static int ws_receive(struct lws *wsi, struct cli_ws *ws, const void *in, size_t len)
{
    if (ws->drop)
        return 0;
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&ws->g, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    if (rx == WSG_REFUSED) {
        if (ws->h.on_refused)
            ws->h.on_refused(ws->h.ud, ws, ws->g.refused, ws->g.refused_why);
        else
            wsg_close_later(&ws->g, wsi, ep_close_code_of(ws->g.refused), ws->g.refused_why);
    }
    if (rx == WSG_MESSAGE && ws->h.on_message)
        ws->h.on_message(ws->h.ud, ws, ws->g.msg, n);
    return 0;
}

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, struct cli_ws *ws,
                       void *in, size_t len)
{
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        unsigned char **p = (unsigned char **)in, *end = (*p) + len;
        if (ws->h.on_request)
            ws->h.on_request(ws->h.ud, ws);
        return add_auth(ws->n, ws->key, wsi, p, end);
    }
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
        /* the answer's headers are freed once established */
        if (lws_hdr_copy(wsi, ws->subproto, sizeof ws->subproto, WSI_TOKEN_PROTOCOL) < 0)
            ws->subproto[0] = 0;
        return 0;
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        ws->opened = 1;
        ws->wsi = wsi;
        wsg_nodelay(wsi);
        if (ws->h.on_open)
            ws->h.on_open(ws->h.ud, ws);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return ws_receive(wsi, ws, in, len);
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (ws->drop)
            return -1;
        if (ws->g.close_code)
            return wsg_close_now(&ws->g, wsi);
        if (ws->h.on_writable)
            ws->h.on_writable(ws->h.ud, ws);
        return ws->drop ? -1 : 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (in && len >= 2) {
            const uint8_t *b = in;
            ws->peer_code = (b[0] << 8) | b[1];
            size_t n = len - 2 < sizeof ws->peer_why - 1 ? len - 2 : sizeof ws->peer_why - 1;
            memcpy(ws->peer_why, b + 2, n);
            ws->peer_why[n] = 0;
        }
        return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        ws_closed(wsi, ws, lws_http_client_http_response(wsi),
                  in ? (const char *)in : "connection failed");
        return 0;
    case LWS_CALLBACK_CLIENT_CLOSED:
        ws_closed(wsi, ws, 0, "connection closed");
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        ws_closed(wsi, ws, 0, "connection gone");
        return 0;
    default:
        return 0;
    }
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    int *kind = lws_get_opaque_user_data(wsi);
    if (kind && *kind == K_HTTP)
        return http_callback(wsi, reason, (struct http_req *)kind, in, len);
    if (kind && *kind == K_WS)
        return ws_callback(wsi, reason, (struct cli_ws *)kind, in, len);
    switch (reason) {
    case LWS_CALLBACK_CLIENT_WRITEABLE:
    case LWS_CALLBACK_CLIENT_HTTP_WRITEABLE:
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP:
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
        return -1; /* an abandoned connection */
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static const struct lws_protocols protocols[] = {
    {PROTO_NAME, callback, 0, AL_MAX_FRAME, 0, NULL, AL_MAX_FRAME},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

int cli_ws_open(struct cli_net *n, const char *path, const struct cli_ws_handler *h,
                struct cli_ws **out)
{
    char full[PATH_MAX_LEN];
    int fl = snprintf(full, sizeof full, "%s%s", n->cfg.prefix, path);
    if (fl < 0 || (size_t)fl >= sizeof full)
        return AL_E_TOOBIG;
    struct cli_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return AL_E_NOMEM;
    ws->kind = K_WS;
    ws->n = n;
    ws->h = *h;
    (void)snprintf(ws->key, sizeof ws->key, "%s", n->cfg.key);
    struct lws_client_connect_info ci;
    connect_info(n, full, &ci);
    ci.protocol = AL_SUBPROTOCOL;
    ci.opaque_user_data = ws;
    ci.pwsi = &ws->wsi;
    ws->opening = 1;
    struct lws *wsi = lws_client_connect_via_info(&ci);
    ws->opening = 0;
    if (!wsi || ws->closed) {
        if (wsi && !ws->closed)
            lws_set_opaque_user_data(wsi, NULL);
        free(ws);
        return AL_E_IO;
    }
    *out = ws;
    return AL_OK;
}

void cli_net_set_key(struct cli_net *n, const char *key)
{
    (void)snprintf(n->cfg.key, sizeof n->cfg.key, "%s", key ? key : "");
}

int cli_ws_subprotocol(const struct cli_ws *ws, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!ws->opened)
        return AL_E_STATE;
    return snprintf(buf, cap, "%s", ws->subproto) < (int)cap ? AL_OK : AL_E_TOOBIG;
}

void cli_ws_want_write(struct cli_ws *ws)
{
    if (ws && ws->wsi && ws->opened)
        lws_callback_on_writable(ws->wsi);
}

int cli_ws_send(struct cli_ws *ws, uint8_t *msg, size_t len)
{
    if (ws->g.close_code || ws->drop)
        return 0;
    int rc = wsg_write(ws->wsi, msg, len);
    return rc < 0 ? AL_E_IO : rc;
}

void cli_ws_close(struct cli_ws *ws, int code, const char *reason)
{
    if (!ws || ws->g.close_code)
        return;
    if (ws->wsi && ws->opened) {
        wsg_close_later(&ws->g, ws->wsi, code, reason);
    } else {
        ws->g.close_code = code;
        cli_ws_drop(ws);
    }
}

void cli_ws_abandon(struct cli_ws *ws)
{
    if (!ws)
        return;
    memset(&ws->h, 0, sizeof ws->h);
    cli_ws_drop(ws);
}

void cli_ws_drop(struct cli_ws *ws)
{
    if (!ws)
        return;
    ws->drop = 1;
    if (ws->wsi)
        lws_set_timeout(ws->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

const char *cli_net_hint(const struct cli_net *n, const char *why)
{
    if (!n->cfg.tls || n->cfg.insecure || !why)
        return "";
    if (strstr(why, "SSL") || strstr(why, "ssl") || strstr(why, "cert") || strstr(why, "CERT") ||
        strstr(why, "tls"))
        return " (TLS: if the server's certificate is self-signed, --insecure accepts it)";
    return "";
}

/* ---- the context ------------------------------------------------------------ */

int cli_net_new(uv_loop_t *loop, const struct cli_config *cfg, struct cli_net **out, char *why,
                size_t cap)
{
    struct cli_net *n = calloc(1, sizeof *n);
    if (!n)
        return AL_E_NOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    lws_set_log_level(getenv("AIRLOCK_LWS_DEBUG") ? 0xfff : 0, NULL);
    struct wsctx_config wc = {
        .loop = loop,
        .protocols = protocols,
        /* TLS (and its client context, the system's CA store) only for https */
        .ssl = cfg->tls,
        .timeout_s = CONNECT_TIMEOUT_S,
        .connect_timeout_s = CONNECT_TIMEOUT_S,
        .max_header_data = MAX_HEADER_DATA,
        .serv_buf_size = AL_MAX_FRAME + LWS_PRE + 1024,
        .ca_file = cfg->cacert[0] ? cfg->cacert : NULL,
    };
    n->ctx = wsctx_new(&wc);
    if (!n->ctx) {
        al_errf(why, cap, "cannot start the network library");
        free(n);
        return AL_E_NOMEM;
    }
    *out = n;
    return AL_OK;
}

void cli_net_free(struct cli_net *n)
{
    if (!n)
        return;
    lws_context_destroy(n->ctx);
    free(n);
}
