/*
 * api: `airlockd serve`, the control plane's network side: the JSON API
 * behind API keys, the WebSocket endpoints (runners dialing in at
 * /v1/runners/connect, clients attaching at /v1/terminals/ID/attach), and
 * the dialer for static sandboxes. The live state is relay.h's; the api*.c
 * files are the libwebsockets glue and the routes (api.c lists them; they
 * share api_local.h, and this header is all the rest of airlockd sees).
 *
 * The routes are one table, routes[] in api_route.c: a method, a path pattern,
 * the minimum role and a handler, matched by one dispatch function;
 * docs/api.md is their reference (each route, who may call it, its body,
 * its answers), and a test checks that both tables have the same rows.
 * A request is authenticated by an API key (Authorization: Bearer) or by
 * the web page's session: its cookie AND its CSRF token (websess.h); 401
 * without either, 403 when the role does not allow it. A request
 * authenticated by cookie that changes something (POST, DELETE) must also
 * carry an Origin equal to our own address, and any WebSocket upgrade with
 * a foreign Origin is refused (403) but a runner's.
 */
#ifndef AL_API_H
#define AL_API_H

#include <stddef.h>

#include "cgroup.h"
#include "platform.h"
#include "proxycfg.h"

struct api_config {
    const char *data_dir;
    const char *db_url;       /* a db.h URL; NULL: sqlite:DATA_DIR/airlock.db */
    const char *listen;       /* HOST:PORT */
    const char *runner_bin;   /* NULL: airlock-runner beside this program */
    int no_bwrap;             /* local runners without bubblewrap (unsafe) */
    const char *sandbox_user; /* as root: the host user sandboxes run as */
    int sandbox_no_network;   /* agents of local sandboxes without a network of their
                                 own get loopback only */
    struct cg_limits sandbox_limits;
    int log_level;        /* 0 errors, 1 info, 2 debug */
    int log_format;       /* enum al_log_format: text or json lines */
    const char *tls_cert; /* PEM files: serve https/wss (both or neither) */
    const char *tls_key;
    const char *web_dir; /* NULL: web/ beside this program */
    /* limits (docs/control-plane.md, "Limits"); 0: the default */
    unsigned max_conns;         /* connections at once (API_MAX_CONNS) */
    unsigned max_conns_per_ip;  /* from one address (API_MAX_CONNS_PER_IP) */
    unsigned request_timeout_s; /* a request's headers and body (API_REQUEST_TIMEOUT_S) */
    unsigned audit_keep_days;   /* audit rows older are removed (API_AUDIT_KEEP_DAYS) */
    unsigned audit_keep_rows;   /* at most this many audit rows (API_AUDIT_KEEP_ROWS) */
    unsigned session_ttl_s;     /* a web session's absolute lifetime; 0: 12 hours */
    unsigned session_idle_s;    /* ... and unused; 0: 1 hour (at most the lifetime) */
    /* every airlock.v1 link's (runners' and clients'): a PING after this
     * long, and the close (4003) after this long without a byte from the
     * peer; 0: the protocol's defaults (EP_DEFAULT_PING_US, EP_DEFAULT_IDLE_US) */
    unsigned ping_interval_s, idle_timeout_s;
    /* the credential proxy (docs/proxy.md): its upstreams (checked by
     * proxycfg_finish; NULL or none: no proxy), and where its direct path
     * listens (ADDR:PORT; NULL: not served) */
    const struct proxycfg *proxy;
    const char *proxy_listen;
    /* terminals get the direct path only: local runners serve no proxy
     * listener (--proxy-path direct; docs/proxy.md) */
    int proxy_direct;
    /* the platforms aca sandboxes run on, their tokens' cache (checked by
     * platform_finish; NULL or none: no aca sandbox can be added) */
    struct platforms *platforms;
    /* the address other replicas reach this one at, a ws:// or wss:// URL
     * (docs/scale-out.md); NULL: the address local runners dial back */
    const char *advertise;
    /* where recordings are kept (docs/recording.md); NULL: DATA_DIR/recordings.
     * Replicas on one database share one (docs/scale-out.md) */
    const char *recordings_dir;
};

/* Run until SIGTERM or SIGINT. 0, or AL_E_* with a reason in err. */
int api_serve(const struct api_config *cfg, char *err, size_t cap);

#endif
