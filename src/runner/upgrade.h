/*
 * upgrade: the runner's decision on an incoming HTTP request, as a pure
 * function (no I/O, time passed in), so every case is unit-testable.
 *
 * The runner accepts exactly what a managed sandbox platform forwards:
 *   GET /?identifier=ID&api-version=2024-02-02-preview
 *   Authorization: Bearer <token>            (header name configurable)
 * Decisions, in order: GET /healthz -> 200 (liveness) and GET /readyz ->
 * 200 (readiness: the runner answers only once its key set is loaded and
 * it listens, so both are true together; two paths for the platforms'
 * two probes), no auth, revealing nothing;
 * another path -> 404; api-version missing or unknown -> 400; a
 * Sec-WebSocket-Protocol offer without airlock.v1 -> 400; no token ->
 * 403 "Unauthenticated"; a token that does not verify (aud = our ID, scope
 * runner:connect, or runner:probe for a probe session) -> 403 "Forbidden",
 * with the precise reason kept for the log only; identifier missing or not ours -> 403 "Forbidden"
 * too, checked after the token, so that a peer without a valid token cannot tell a wrong identifier
 * from a bad token; else 101.
 */
#ifndef AL_UPGRADE_H
#define AL_UPGRADE_H

#include <stdint.h>

#include "token.h"

#define UPGRADE_API_VERSION "2024-02-02-preview"
#define UPGRADE_SCOPE "runner:connect"
#define UPGRADE_PROBE_SCOPE "runner:probe" /* a probe session (docs/protocol.md §13) */
#define UPGRADE_MAX_HEADER 4096            /* bytes of the token header's value */

struct upgrade_request {
    const char *path;         /* without the query */
    int is_upgrade;           /* a WebSocket upgrade (else plain HTTP) */
    const char *identifier;   /* query argument, NULL if absent */
    const char *api_version;  /* query argument, NULL if absent */
    const char *auth;         /* the token header's value, NULL if absent */
    const char *subprotocols; /* Sec-WebSocket-Protocol's value, NULL if absent */
};

struct upgrade_config {
    const char *identifier; /* "": not known yet, the request's is taken
                             * (a runner:connect or runner:probe token for
                             * it must verify; status 101 then) */
    const struct tok_keyset *keys;
    int64_t now; /* Unix seconds */
    int64_t leeway;
};

struct upgrade_result {
    int status;               /* 101, 200, 400, 403, 404 */
    const char *body;         /* response body for non-101 answers */
    char log[640];            /* the precise reason, for the runner's log only */
    struct tok_claims claims; /* valid when status == 101 */
    int probe;                /* 101 for a probe session: the token covers runner:probe only */
};

#define UPGRADE_IDENTIFIER_MIN 1
#define UPGRADE_IDENTIFIER_MAX 128 /* a platform's identifiers: 4 to 128 */

/* Whether an identifier from a request may be taken as the runner's:
 * 1..128 of [A-Za-z0-9._-]. */
int upgrade_identifier_ok(const char *id);

/* Decide; never fails (a bad request is a status). */
void upgrade_decide(const struct upgrade_config *cfg, const struct upgrade_request *req,
                    struct upgrade_result *out);

#endif
