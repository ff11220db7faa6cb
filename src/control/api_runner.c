/*
 * api_runner: runner links, both ways. A runner dials in at
 * /v1/runners/connect?identifier=ID with its runner:connect token and its
 * own key, which must be the sandbox's pinned one (rkey.h: a copied token
 * alone takes nothing over; an impostor is audited). For a static sandbox
 * airlockd dials the runner (api_runner_dial, called by the relay with its
 * backoff), presenting a token as Bearer. Either way a link that comes up
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

#include "al_err.h"
#include "al_limits.h"
#include "api_local.h"
#include "db.h"
#include "endpoint.h"
#include "relay.h"
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
    struct rl_sbx *sb = ident ? relay_sandbox(a->relay, ident) : NULL;
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
        char detail[300];
        (void)snprintf(detail, sizeof detail, "{\"peer\":\"%.60s\",\"why\":\"%.200s\"}", peer, why);
        api_audit(a, "anonymous", "runner_impostor", ident, detail);
        api_log(a, 0, "sandbox %s: runner link from %s refused: %s", ident, peer, why);
        (void)api_reply_error(wsi, 403, "this runner's key is not the sandbox's");
        return -1;
    }
    c->conn->kind = CONN_RUNNER;
    c->conn->sb = sb;
    return 0;
}

/* The relay's dial function: connect to a static sandbox's runner at url,
 * presenting token; the link comes up at CLIENT_ESTABLISHED. */
int api_runner_dial(void *ud, struct rl_sbx *sb, const char *url, const char *token)
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
    wsctx_dial_info(&ci, a->ctx, addr, port, path, !strcmp(prot, "wss") ? LCCSCF_USE_SSL : 0);
    ci.origin = addr;
    ci.protocol = AL_SUBPROTOCOL;
    ci.opaque_user_data = c;
    if (!lws_client_connect_via_info(&ci)) {
        free(c);
        return AL_E_IO;
    }
    return AL_OK;
}

/* A dial's upgrade request: our token for the runner. */
int api_runner_handshake(struct lws *wsi, void *in, size_t len)
{
    struct conn *c = api_ws_conn(wsi);
    unsigned char **p = (unsigned char **)in, *end = (*p) + len;
    char hv[AL_MAX_TOKEN + 16];
    int n = snprintf(hv, sizeof hv, "Bearer %s", c ? c->token : "");
    if (n < 0 || (size_t)n >= sizeof hv)
        return -1;
    return lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, (unsigned char *)hv, n,
                                        p, end)
               ? -1
               : 0;
}

/* A dial failed before the link was up: the relay redials. */
void api_runner_dial_failed(struct lws *wsi, const void *in)
{
    struct conn *c = api_ws_conn(wsi);
    if (c) {
        relay_runner_dial_failed(c->sb, in ? (const char *)in : "connection failed");
        api_ws_free(wsi, c);
    }
}
