/*
 * runner_listen: see runner_listen.h. The decision itself is upgrade.c's,
 * a pure function of the request; this file reads the request's parts
 * from lws and writes the answer. An accepted upgrade's token expiry
 * waits in runner_app.pending_exp until the connection is established.
 */
#include "runner_listen.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "al_err.h"
#include "al_limits.h"
#include "rprobe.h"
#include "runner_opts.h"
#include "token.h"
#include "upgrade.h"
#include "wsg.h"
#include "wslisten.h"

/* What one runner accepts at once. It serves one link (and the ingress's
 * health checks), usually all from one ingress address. */
#define LISTEN_MAX_CONNS 64
#define LISTEN_MAX_CONNS_PER_IP 32
#define LISTEN_REQUEST_TIMEOUT_MS (RUNNER_APP_HANDSHAKE_S * 1000ull) /* headers, from accept */
#define REPLY_BODY_MAX 255 /* bytes of an answer's body: one word */

static int http_reply(struct lws *wsi, unsigned status, const char *body)
{
    uint8_t buf[LWS_PRE + 1024];
    uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
    size_t len = strlen(body);
    if (len > REPLY_BODY_MAX)
        len = REPLY_BODY_MAX; /* never more than body_buf holds */
    if (lws_add_http_common_headers(wsi, status, "text/plain", len, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, (const unsigned char *)"close", 5,
                                     &p, end) ||
        /* the runner answered, not a front before it (al_limits.h) */
        lws_add_http_header_by_name(wsi, (const unsigned char *)AL_RUNNER_REPLY_HEADER ":",
                                    (const unsigned char *)"1", 1, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    uint8_t body_buf[LWS_PRE + REPLY_BODY_MAX + 1];
    memcpy(body_buf + LWS_PRE, body, len); // NOLINT(bugprone-not-null-terminated-result)
    if (lws_write(wsi, body_buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) != (int)len)
        return -1;
    const struct runner_app *a = lws_context_user(lws_get_context(wsi));
    wsl_deadline(a->wsl, wsi, 1);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* The token of the upgrade: in Authorization, or in --token-header.
 * *too_long: one was there, over UPGRADE_MAX_HEADER (refused as none, but
 * the log says so). */
static const char *read_auth(const struct runner_app *a, struct lws *wsi, char *auth, int cap,
                             int *too_long)
{
    int nl = (int)strlen(a->token_header_lc);
    int n = a->header_is_auth ? lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION)
                              : lws_hdr_custom_length(wsi, a->token_header_lc, nl);
    *too_long = n > UPGRADE_MAX_HEADER;
    if (n <= 0 || n > UPGRADE_MAX_HEADER)
        return NULL;
    int got = a->header_is_auth ? lws_hdr_copy(wsi, auth, cap, WSI_TOKEN_HTTP_AUTHORIZATION)
                                : lws_hdr_custom_copy(wsi, auth, cap, a->token_header_lc, nl);
    return got > 0 ? auth : NULL;
}

/* Ingress headers worth seeing that libwebsockets does not parse by
 * name (docs/platforms.md): a probe reports those present. */
static const char *const ingress_headers[] = {"x-request-id:",
                                              "x-real-ip:",
                                              "x-forwarded-port:",
                                              "x-forwarded-host:",
                                              "x-original-url:",
                                              "x-original-host:",
                                              "x-envoy-external-address:",
                                              "x-envoy-expected-rq-timeout-ms:",
                                              "x-envoy-attempt-count:",
                                              "x-arr-ssl:",
                                              "x-arr-log-id:",
                                              "x-ms-client-principal-name:",
                                              "x-ms-client-principal-id:",
                                              "x-ms-containerapp-name:",
                                              "x-azure-ref:",
                                              "x-azure-fdid:",
                                              "x-azure-clientip:",
                                              "x-amzn-trace-id:",
                                              "x-amzn-tls-version:",
                                              "cf-ray:",
                                              "cf-connecting-ip:",
                                              "cf-ipcountry:",
                                              "cdn-loop:",
                                              "traceparent:",
                                              "tracestate:",
                                              "x-cloud-trace-context:",
                                              "via:",
                                              "x-airlock-token:",
                                              NULL};

/* The upgrade's headers as a probe session reports them (§13): those lws
 * parses by name, then the ingress ones above and our own token header. */
static size_t probe_headers(const struct runner_app *a, struct lws *wsi, struct rprobe_header *h)
{
    size_t n = 0;
    char v[UPGRADE_MAX_HEADER + 1], name[AL_PROBE_MAX_HEADER_NAME + 2];
    for (int t = 0; t < WSI_TOKEN_COUNT && n < AL_PROBE_MAX_HEADERS; t++) {
        const char *s = (const char *)lws_token_to_string((enum lws_token_indexes)t);
        size_t sl = s ? strlen(s) : 0;
        int len = lws_hdr_total_length(wsi, (enum lws_token_indexes)t);
        if (sl < 2 || s[sl - 1] != ':' || sl - 1 > AL_PROBE_MAX_HEADER_NAME || len <= 0)
            continue;
        memcpy(name, s, sl - 1);
        name[sl - 1] = 0;
        if (len > UPGRADE_MAX_HEADER ||
            lws_hdr_copy(wsi, v, sizeof v, (enum lws_token_indexes)t) < 0)
            v[0] = 0; /* its length is all a probe learns */
        n += (size_t)rprobe_redact(name, v, (size_t)len, a->header_is_auth ? NULL : a->token_header,
                                   &h[n]);
    }
    for (size_t i = 0; ingress_headers[i] && n < AL_PROBE_MAX_HEADERS; i++) {
        const char *hn = ingress_headers[i];
        int nl = (int)strlen(hn);
        int len = lws_hdr_custom_length(wsi, hn, nl);
        if (len <= 0)
            continue;
        if (len > UPGRADE_MAX_HEADER || lws_hdr_custom_copy(wsi, v, sizeof v, hn, nl) < 0)
            v[0] = 0;
        memcpy(name, hn, (size_t)nl - 1);
        name[nl - 1] = 0;
        n += (size_t)rprobe_redact(name, v, (size_t)len, a->header_is_auth ? NULL : a->token_header,
                                   &h[n]);
    }
    if (!a->header_is_auth && n < AL_PROBE_MAX_HEADERS &&
        strcmp(a->token_header_lc, "x-airlock-token:") != 0) {
        int nl = (int)strlen(a->token_header_lc);
        int len = lws_hdr_custom_length(wsi, a->token_header_lc, nl);
        if (len > 0) {
            memcpy(name, a->token_header_lc, (size_t)nl - 1);
            name[nl - 1] = 0;
            n += (size_t)rprobe_redact(name, "", (size_t)len, a->token_header, &h[n]);
        }
    }
    return n;
}

/* A probe session for an accepted upgrade (§13), or the refusal of one
 * too many: 0, or -1 after the answer. */
static int start_probe(struct runner_app *a, struct lws *wsi, int64_t exp)
{
    if (a->nprobes >= RUNNER_MAX_PROBES) {
        runner_log(a->runner, 1, "probe session refused: %d already open", RUNNER_MAX_PROBES);
        (void)http_reply(wsi, 503, "Busy\n");
        return -1;
    }
    static struct rprobe_header h[AL_PROBE_MAX_HEADERS];
    size_t n = probe_headers(a, wsi, h);
    int64_t left_s = exp + a->rcfg.leeway - tok_now();
    uint64_t now_us = uv_hrtime() / 1000u;
    uint64_t deadline = left_s > 0 ? now_us + (uint64_t)left_s * 1000000u : now_us;
    struct rprobe *p;
    if (rprobe_new(h, n, "airlock-runner", deadline, &p) != AL_OK) {
        (void)http_reply(wsi, 503, "Busy\n");
        return -1;
    }
    a->pending_probe = p;
    return 0;
}

static int confirm_upgrade(struct runner_app *a, struct lws *wsi)
{
    char path[512] = "", idb[300], apib[128];
    char auth[UPGRADE_MAX_HEADER + 1];
    if (lws_hdr_copy(wsi, path, sizeof path, WSI_TOKEN_GET_URI) < 0)
        path[0] = 0;
    struct upgrade_request req;
    memset(&req, 0, sizeof req);
    req.path = path;
    req.is_upgrade = 1;
    req.identifier = wsg_urlarg(wsi, "identifier", idb, sizeof idb);
    req.api_version = wsg_urlarg(wsi, "api-version", apib, sizeof apib);
    char protob[UPGRADE_MAX_HEADER + 1];
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_PROTOCOL);
    if (n > UPGRADE_MAX_HEADER)
        req.subprotocols = "?"; /* too long to read: refused as an offer without ours */
    else if (n > 0 && lws_hdr_copy(wsi, protob, sizeof protob, WSI_TOKEN_PROTOCOL) > 0)
        req.subprotocols = protob;
    int too_long = 0;
    req.auth = read_auth(a, wsi, auth, (int)sizeof auth, &too_long);
    struct upgrade_config cfg = {a->identifier, a->keys, tok_now(), a->leeway};
    struct upgrade_result res;
    upgrade_decide(&cfg, &req, &res);
    char peer[64] = "?";
    lws_get_peer_simple(wsi, peer, sizeof peer);
    if (res.status != 101) {
        if (too_long)
            runner_log(a->runner, 1,
                       "upgrade from %s refused %d: its token header is over %d bytes", peer,
                       res.status, UPGRADE_MAX_HEADER);
        else
            runner_log(a->runner, 1, "upgrade from %s refused %d: %s", peer, res.status, res.log);
        (void)http_reply(wsi, (unsigned)res.status, res.body);
        return -1;
    }
    rprobe_free(a->pending_probe); /* one never established */
    a->pending_probe = NULL;
    if (res.probe && start_probe(a, wsi, res.claims.exp) != 0)
        return -1;
    if (!a->identifier[0] && !res.probe) {
        /* --identifier-from request: this one is ours from now on */
        (void)snprintf(a->identifier_pinned, sizeof a->identifier_pinned, "%s", req.identifier);
        a->identifier = a->identifier_pinned;
        runner_set_identifier(a->runner, a->identifier);
        runner_log(a->runner, 1, "identifier %s taken from the first valid upgrade", a->identifier);
    }
    runner_log(a->runner, 1, "upgrade from %s accepted: %s", peer, res.log);
    a->pending_exp = res.claims.exp;
    a->pending_wsi = wsi;
    return 0;
}

int runner_listen_upgrade(struct runner_app *a, struct lws *wsi, const void *in)
{
    if (!in || strcmp((const char *)in, "websocket") != 0) {
        (void)http_reply(wsi, 400, "Bad Request\n");
        return -1;
    }
    return confirm_upgrade(a, wsi);
}

int runner_listen_http(struct runner_app *a, struct lws *wsi)
{
    char path[256] = "";
    if (lws_hdr_copy(wsi, path, sizeof path, WSI_TOKEN_GET_URI) < 0)
        path[0] = 0;
    struct upgrade_request req = {path, 0, NULL, NULL, NULL, NULL};
    struct upgrade_config cfg = {a->identifier, a->keys, tok_now(), a->leeway};
    struct upgrade_result res;
    upgrade_decide(&cfg, &req, &res);
    return http_reply(wsi, (unsigned)res.status, res.body);
}

int64_t runner_listen_accepted(struct runner_app *a, struct lws *wsi)
{
    int64_t exp = a->pending_wsi == wsi ? a->pending_exp : 0;
    a->pending_wsi = NULL;
    wsl_deadline(a->wsl, wsi, 0);
    return exp;
}

int runner_listen_parse(struct runner_app *a)
{
    const char *colon = strrchr(a->listen, ':');
    uint64_t port;
    if (!colon || runner_opts_u64(colon + 1, 65535, &port) != 0 ||
        (size_t)(colon - a->listen) >= sizeof a->l_host) {
        fprintf(stderr, "airlock-runner: --listen wants HOST:PORT, got %s\n", a->listen);
        return -1;
    }
    memcpy(a->l_host, a->listen, (size_t)(colon - a->listen));
    a->l_host[colon - a->listen] = 0;
    a->l_port = (int)port;
    return 0;
}

int runner_listen_start(struct runner_app *a)
{
    struct wsl_config lc = {
        .loop = a->loop,
        .vhost = lws_get_vhost_by_name(a->ctx, "default"),
        .host = a->l_host[0] && strcmp(a->l_host, "0.0.0.0") != 0 ? a->l_host : NULL,
        .port = a->l_port,
        .lim = {LISTEN_MAX_CONNS, LISTEN_MAX_CONNS_PER_IP, LISTEN_REQUEST_TIMEOUT_MS},
        .prog = "airlock-runner",
        .instance = a->identifier,
        .log_level = a->rcfg.log_level,
        .log_format = a->rcfg.log_format,
    };
    char lerr[256] = "";
    if (!lc.vhost || wsl_start(&lc, &a->wsl, lerr, sizeof lerr) != AL_OK) {
        fprintf(stderr, "airlock-runner: %s (is the port free?)\n", lerr);
        lws_context_destroy(a->ctx);
        a->ctx = NULL;
        return -1;
    }
    return 0;
}

void runner_listen_announce(struct runner_app *a)
{
    char bound[sizeof a->l_host + 8]; /* port 0: the one the kernel chose */
    (void)snprintf(bound, sizeof bound, "%s:%d", a->l_host, wsl_port(a->wsl));
    runner_log(a->runner, 1, "listening on %s for identifier %s", a->l_port ? a->listen : bound,
               a->identifier[0] ? a->identifier : "(the first valid upgrade's)");
}
