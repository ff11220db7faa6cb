/*
 * proxypol: what the credential proxy lets through, as rules over a parsed
 * request head (proxyreq). Control plane only (al_control). Pure: no I/O,
 * no clock, no global state; the credential's validity (a database look-up)
 * is the caller's, between proxypol_route and proxypol_allowed.
 *
 * The order of the checks is the order of the answers a client can get
 * (docs/proxy.md): a request the proxy cannot even read as one of its own
 * (400, 414, 426, 501) comes first, then an unknown upstream (404), then a
 * missing credential (401), then, after the caller has checked the
 * credential (401), a method or path the upstream does not allow (403).
 */
#ifndef AL_PROXYPOL_H
#define AL_PROXYPOL_H

#include "proxycfg.h"
#include "proxyreq.h"

#include <stddef.h>

#define PROXYPOL_PREFIX "/v1/proxy/" /* every proxied target starts so */

enum {
    PROXYPOL_PATH_MAX = 8192, /* bytes of the path and query sent upstream (414 above) */
    PROXYPOL_CRED_MAX = 128,  /* bytes of an agent's credential */
    PROXYPOL_URL_MAX = PROXY_URL_MAX + PROXYPOL_PATH_MAX,
    PROXYPOL_UPGRADE_REFUSED = 426, /* the answer to a protocol upgrade (a WebSocket) */
};

struct proxypol_call {
    const struct proxy_upstream *up;  /* points into the proxycfg */
    char path[PROXYPOL_PATH_MAX + 1]; /* "/v1/messages?beta=true": after the upstream's name */
    char url[PROXYPOL_URL_MAX + 1];   /* up->url followed by path */
    char credential[PROXYPOL_CRED_MAX + 1];
};

/* Route a head to its upstream and take the agent's credential out of it.
 * 0 on success; otherwise the HTTP status to answer (400, 401, 404, 414,
 * 426, 501) with a reason in why that quotes nothing of the credential. */
int proxypol_route(const struct proxycfg *cfg, const struct proxyreq_head *h,
                   struct proxypol_call *out, char *why, size_t cap);

/* 0 when the upstream allows the head's method and the call's path; 403
 * with a reason otherwise. */
int proxypol_allowed(const struct proxypol_call *c, const struct proxyreq_head *h, char *why,
                     size_t cap);

/* The headers to send upstream, one call of fn per header: every header of
 * the agent's but the hop-by-hop ones, those its Connection header names,
 * Host, Content-Length, Expect and every credential header (libcurl sets
 * Host, the length or the chunked coding itself), then the upstream's own
 * credential header built from `secret`. Returns what fn returned first
 * when not 0, or AL_E_TOOBIG when the credential header does not fit. */
typedef int proxypol_header_fn(void *ud, const char *name, const char *value);
int proxypol_headers(const struct proxypol_call *c, const struct proxyreq_head *h,
                     const char *secret, proxypol_header_fn *fn, void *ud);

/* 1 when a header of that (lower-case) name is never forwarded. */
int proxypol_header_dropped(const char *name);

#endif
