/*
 * api_runner: runner links, both ways. A runner dials in at
 * /v1/runners/connect?identifier=ID with its runner:connect token and its
 * own key, which must be the sandbox's pinned one (rkey.h: a copied token
 * alone takes nothing over; an impostor is audited). For a static sandbox
 * airlockd dials the runner (api_runner_dial, called by the relay with its
 * backoff), presenting a token as Bearer; for an aca sandbox it dials the
 * platform's front with the platform's token (platform.h) in
 * Authorization and ours in AL_PLATFORM_TOKEN_HEADER, and tells the
 * front's refusals from the runner's. Either way a link that comes up
 * replaces the sandbox's current one, which is closed (4005).
 *
 * Not here: the tokens and keys' checks and the redials (relay_cred.c,
 * relay_runner.c), the link's messages (api_ws.c).
 */
#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "al_err.h"
#include "al_limits.h"
#include "api_local.h"
#include "db.h"
#include "endpoint.h"
#include "platform.h"
#include "relay.h"
#include "wsc.h"
#include "wsctls.h"
#include "wsctx.h"
#include "wsg.h"

/* A runner link is up; the one it replaces, if any, is closed now (each
 * replaced link, however many follow each other before it writes). */
void api_runner_up(struct api *a, struct conn *c, struct lws *wsi)
{
    void *old = NULL;
    (void)relay_runner_up(c->sb, wsi, &old);
    struct conn *oc = old ? api_ws_conn(old) : NULL;
    if (oc) {
        api_log(a, 1, "a newer runner link replaces the current one");
        if (oc->wsc)
            api_wsc_close(oc, AL_CLOSE_REPLACED, "replaced by a newer connection");
        else
            wsg_close_later(&oc->ws, old, AL_CLOSE_REPLACED, "replaced by a newer connection");
    }
}

/* GET /v1/runners/connect?identifier=ID: a runner, by its runner:connect
 * token and its pinned key. */
int api_runner_connect(struct api *a, struct lws *wsi, struct call *c)
{
    char argb[300], peer[64], why[256];
    api_auth_peer(wsi, peer, sizeof peer);
    const char *ident = wsg_urlarg(wsi, "identifier", argb, sizeof argb);
    struct rl_sbx *sb = ident ? relay_sandbox_known(a->relay, ident) : NULL;
    char auth[AL_MAX_TOKEN + 16];
    const char *tok = api_auth_bearer(wsi, auth, sizeof auth);
    int rc = !sb ? AL_E_NOENT : relay_cred_token_ok(a->relay, ident, tok, why, sizeof why);
    if (rc != AL_OK) {
        api_audit_refused(a, peer, "runner_refused", !sb ? "unknown sandbox" : why,
                          ident ? ident : "");
        (void)api_reply_error(wsi, 403, "a valid runner:connect token is required");
        return -1;
    }
    /* a valid token is not enough: the runner's own key must be the
     * pinned one (a copied token alone takes nothing over) */
    char key[AL_RUNNER_KEY_LEN + 8] = "";
    int kn = lws_hdr_custom_copy(wsi, key, sizeof key, AL_RUNNER_KEY_HEADER ":",
                                 (int)strlen(AL_RUNNER_KEY_HEADER ":"));
    rc = relay_cred_key_ok(a->relay, ident, kn > 0 ? key : NULL, why, sizeof why);
    OPENSSL_cleanse(key, sizeof key);
    if (rc != AL_OK) {
        /* one audit row per source and reason per interval, as every
         * refusal: a copied token must not flood the audit table; the
         * sandbox counts them too (GET /v1/sandboxes: refused_links) */
        api_audit_refused(a, peer, "runner_impostor", why, ident);
        api_log(a, 0, "sandbox %s: runner link from %s refused: %s", ident, peer, why);
        (void)api_reply_error(wsi, 403, "this runner's key is not the sandbox's");
        return -1;
    }
    /* accepted where it landed: the sandbox's lease moves to this replica
     * (docs/scale-out.md: fronts do not follow redirects for upgrades);
     * the runner only chose which replica, never the owner's id or fence */
    rc = relay_lease_claim(a->relay, sb, why, sizeof why);
    if (rc != AL_OK) {
        api_log(a, 1, "sandbox %s: runner link from %s not taken now: %s", ident, peer, why);
        (void)api_reply_error(wsi, 503, why);
        return -1;
    }
    c->conn->kind = CONN_RUNNER;
    c->conn->sb = sb;
    return 0;
}

/* A dial's link: its upgrade request with our token as Bearer in
 * Authorization; behind a platform's front, the front's token there and
 * ours in AL_PLATFORM_TOKEN_HEADER (as api_runner_handshake). */
static int dial_link(struct conn *c, const char *addr, int port, const char *path)
{
    static char extra[2 * PLATFORM_TOKEN_MAX + AL_MAX_TOKEN + 256];
    int n = c->platform_token
                ? snprintf(extra, sizeof extra,
                           "Origin: http://%s\r\nAuthorization: Bearer %s\r\n%s: Bearer %s\r\n",
                           addr, c->platform_token, AL_PLATFORM_TOKEN_HEADER, c->token)
                : snprintf(extra, sizeof extra, "Origin: http://%s\r\nAuthorization: Bearer %s\r\n",
                           addr, c->token);
    if (n > 0 && (size_t)n < sizeof extra) {
        struct wscu_request r = {addr, port, path, AL_SUBPROTOCOL, extra, AL_RUNNER_REPLY_HEADER};
        c->wsc = wsc_new(&r, api_wsc_events(), c);
    }
    OPENSSL_cleanse(extra, sizeof extra);
    return c->wsc ? AL_OK : AL_E_NOMEM;
}

/* The relay's dial function: connect to a static or aca sandbox's runner
 * at d->url, presenting our token (and an aca sandbox's platform token);
 * the link comes up when the upgrade is answered (api_wsc.c). */
int api_runner_dial(void *ud, struct rl_sbx *sb, const struct rl_dial *d, char *why, size_t cap)
{
    struct api *a = ud;
    char parsed[DB_SANDBOX_URL_MAX + DB_IDENT_MAX + 64], path[sizeof parsed + 1];
    (void)snprintf(parsed, sizeof parsed, "%s", d->url);
    const char *prot, *addr, *p;
    int port;
    if (lws_parse_uri(parsed, &prot, &addr, &port, &p)) {
        al_errf(why, cap, "its url cannot be parsed");
        return AL_E_INVAL;
    }
    (void)snprintf(path, sizeof path, "/%s", p);
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    if (d->platform) {
        /* the front's own token: airlockd's alone, never the runner's */
        c->platform_token = malloc(PLATFORM_TOKEN_MAX + 1);
        int rc = c->platform_token
                     ? platform_token(a->cfg.platforms, d->platform, (int64_t)uv_now(a->loop),
                                      (int64_t)time(NULL), c->platform_token,
                                      PLATFORM_TOKEN_MAX + 1, why, cap)
                     : AL_E_NOMEM;
        if (rc != AL_OK) {
            api_conn_wipe(c);
            free(c);
            return rc;
        }
        (void)snprintf(c->platform, sizeof c->platform, "%s", d->platform);
    }
    c->kind = CONN_DIAL;
    c->sb = sb;
    (void)snprintf(c->token, sizeof c->token, "%s", d->token);
    /* a socket only: wsc.c speaks WebSocket on it (api_wsc.c), through
     * wsctls.c's TLS for wss:// (lws 4.1.6 starts no RAW client with TLS) */
    int rc = AL_OK;
    if (!strcmp(prot, "wss")) {
        if (!a->dial_tls) /* the system's store (SSL_CERT_FILE where set) */
            a->dial_tls = wsctls_ctx_new(NULL, 0, why, cap);
        rc = !a->dial_tls                                ? AL_E_CRYPTO
             : !(c->tls = wsctls_new(a->dial_tls, addr)) ? AL_E_NOMEM
                                                         : AL_OK;
    }
    if (rc == AL_OK)
        rc = dial_link(c, addr, port, path);
    api_conn_wipe(c); /* the tokens are in the request now */
    if (rc != AL_OK) {
        wsctls_free(c->tls);
        free(c);
        if (rc != AL_E_CRYPTO)
            al_errf(why, cap, "cannot make the upgrade request");
        return rc;
    }
    struct lws_client_connect_info ci;
    wsctx_dial_info(&ci, a->ctx, addr, port, path, 0);
    ci.method = "RAW";
    ci.local_protocol_name = AL_SUBPROTOCOL;
    ci.opaque_user_data = c;
    if (!lws_client_connect_via_info(&ci)) {
        wsc_free(c->wsc);
        wsctls_free(c->tls);
        api_conn_wipe(c);
        free(c);
        al_errf(why, cap, "cannot start the connection");
        return AL_E_IO;
    }
    return AL_OK;
}

/* What a front's refusal means, by its status (docs/aca.md). */
static const struct {
    unsigned status;
    const char *meaning;
} front_says[] = {
    {401, "its token was refused: check platform.%s's token"},
    {403, "its token was refused: check platform.%s's token"},
    {404, "no session for the identifier: the pool is at its max-sessions or the endpoint "
          "is wrong (platform %s)"},
    {429, "too many requests (platform %s)"},
};

/* A dial failed before the link was up: the relay redials. A refusal is
 * the runner's when its answer carries AL_RUNNER_REPLY_HEADER, else the
 * front's (an aca sandbox) or the server's at the url. */
void api_runner_dial_failed(struct lws *wsi, const void *in)
{
    struct conn *c = api_ws_conn(wsi);
    if (!c)
        return;
    if (c->kind == CONN_HOP_OUT) { /* a relayed client's dial of the owner */
        api_hop_out_closed(c);
        api_ws_free(wsi, c);
        return;
    }
    unsigned status = lws_http_client_http_response(wsi);
    const char *hn = AL_RUNNER_REPLY_HEADER ":";
    int runner = status && lws_hdr_custom_length(wsi, hn, (int)strlen(hn)) > 0;
    api_runner_refused(c, status, runner, in ? (const char *)in : "connection failed");
    api_ws_free(wsi, c);
}

void api_runner_refused(struct conn *c, unsigned status, int runner, const char *lws_why)
{
    char why[RL_LINK_ERROR_MAX];
    if (!status) {
        (void)snprintf(why, sizeof why, "%s", lws_why);
    } else if (status == 101) { /* an upgrade answered, but not as it must be */
        (void)snprintf(why, sizeof why, "%s (HTTP 101)", lws_why);
    } else if (runner) {
        (void)snprintf(why, sizeof why, "the runner refused the upgrade: HTTP %u%s", status,
                       status == 403 ? " (airlockd's runner:connect token was not accepted)" : "");
    } else if (c->platform[0]) {
        const char *m = NULL;
        for (size_t i = 0; i < sizeof front_says / sizeof front_says[0]; i++)
            if (front_says[i].status == status)
                m = front_says[i].meaning;
        char meaning[160] = "";
        if (m)
            (void)snprintf(meaning, sizeof meaning, m, c->platform);
        (void)snprintf(why, sizeof why, "the platform's front refused the upgrade: HTTP %u%s%s",
                       status, m ? ": " : "", meaning);
    } else {
        (void)snprintf(why, sizeof why, "no runner answered the upgrade: HTTP %u from the server",
                       status);
    }
    relay_runner_dial_failed(c->sb, why);
}
