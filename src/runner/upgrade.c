/*
 * upgrade: see upgrade.h. The order of the checks is the contract; the
 * client learns only the status and a one-word body.
 */
#include "upgrade.h"

#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "al_limits.h"
#include "bearer.h"
#include "subproto.h"

static void answer(struct upgrade_result *out, int status, const char *body, const char *why)
{
    out->status = status;
    out->body = body;
    snprintf(out->log, sizeof out->log, "%s", why);
}

int upgrade_identifier_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n < UPGRADE_IDENTIFIER_MIN || n > UPGRADE_IDENTIFIER_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

void upgrade_decide(const struct upgrade_config *cfg, const struct upgrade_request *req,
                    struct upgrade_result *out)
{
    memset(out, 0, sizeof *out);
    const char *path = req->path ? req->path : "";
    if (!req->is_upgrade) {
        if (!strcmp(path, "/healthz"))
            answer(out, 200, "ok\n", "health check");
        else if (!strcmp(path, "/readyz"))
            answer(out, 200, "ready\n", "readiness check");
        else
            answer(out, 404, "Not Found\n", "plain HTTP request");
        return;
    }
    if (strcmp(path, "/") != 0) {
        answer(out, 404, "Not Found\n", "upgrade on a path other than /");
        return;
    }
    if (!req->api_version || strcmp(req->api_version, UPGRADE_API_VERSION) != 0) {
        answer(out, 400, "Bad Request\n",
               req->api_version ? "unknown api-version" : "missing api-version");
        return;
    }
    if (!subproto_acceptable(req->subprotocols)) {
        answer(out, 400, "Bad Request\n", "subprotocol offer without " AL_SUBPROTOCOL);
        return;
    }
    /* the token is checked before the identifier, and a wrong identifier
     * gets the answer of a bad token: no oracle for identifiers */
    if (!req->auth || !*req->auth) {
        answer(out, 403, "Unauthenticated\n", "no token");
        return;
    }
    const char *tok = bearer_token(req->auth);
    if (!tok) {
        answer(out, 403, "Unauthenticated\n", "token header is not 'Bearer <token>'");
        return;
    }
    /* an identifier still to learn: the request's, whose token must be
     * valid for it (a platform routes a session's identifier to it alone) */
    const char *ident = cfg->identifier;
    if (!ident[0]) {
        if (!upgrade_identifier_ok(req->identifier)) {
            answer(out, 403, "Forbidden\n",
                   req->identifier ? "identifier is not one a runner can take"
                                   : "missing identifier");
            return;
        }
        ident = req->identifier;
    }
    struct tok_verify_params p;
    tok_verify_params_init(&p, ident, UPGRADE_SCOPE, cfg->now);
    if (cfg->leeway >= 0)
        p.leeway = cfg->leeway;
    char why[TOK_REASON_MAX];
    int rc = tok_verify(cfg->keys, tok, strlen(tok), &p, &out->claims, why, sizeof why);
    if (rc != AL_OK) {
        /* not a controller's token: a probe's, perhaps (the first reason
         * is the one logged when neither verifies) */
        struct tok_verify_params pp = p;
        pp.scope = UPGRADE_PROBE_SCOPE;
        char pwhy[TOK_REASON_MAX];
        if (tok_verify(cfg->keys, tok, strlen(tok), &pp, &out->claims, pwhy, sizeof pwhy) ==
            AL_OK) {
            out->probe = 1;
            rc = AL_OK;
        }
    }
    if (rc != AL_OK) {
        out->status = 403;
        out->body = "Forbidden\n";
        snprintf(out->log, sizeof out->log, "token refused: %s (%s)", al_strerror(rc), why);
        return;
    }
    if (!req->identifier || strcmp(req->identifier, ident) != 0) {
        memset(&out->claims, 0, sizeof out->claims);
        out->probe = 0;
        answer(out, 403, "Forbidden\n",
               req->identifier ? "identifier is not this sandbox's" : "missing identifier");
        return;
    }
    out->status = 101;
    out->body = NULL;
    snprintf(out->log, sizeof out->log, "%s token ok: sub=%s jti=%s exp=%lld",
             out->probe ? "probe" : "controller", out->claims.sub, out->claims.jti,
             (long long)out->claims.exp);
}
