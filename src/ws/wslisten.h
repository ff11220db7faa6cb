/*
 * wslisten: the listening socket of airlockd and of airlock-runner
 * --listen, owned here instead of by libwebsockets, so that a flood of
 * connections costs neither a core nor the log.
 *
 * Why: lws 4.1's listener (lib/roles/listen/ops-listen.c) logs
 * "accept: errno 24" and returns when accept() fails with EMFILE, leaving
 * the listening socket readable: the loop spins at once on it and writes
 * the line millions of times. It has no limit per peer (PEER_LIMITS is not
 * built in Debian's lws) and it restarts its body timeout at every chunk,
 * so a body sent a byte at a time is never timed out.
 *
 * So: the vhost is created without a listener (CONTEXT_PORT_NO_LISTEN_SERVER)
 * and this file accepts on a libuv poll handle, at most WSL_ACCEPT_BURST
 * sockets per wake-up. Each accepted socket is admitted or refused by
 * connlim.c before a byte is read (a one-line 429 or 503 answer, then
 * close), then handed to lws (lws_adopt_descriptor_vhost). When accept()
 * runs out of descriptors, accepting pauses for WSL_PAUSE_MS and the error
 * is logged at most once per WSL_LOG_INTERVAL_MS with a count. A timer
 * closes every connection whose request (headers and body) is not
 * answered within its deadline.
 *
 * The server's lws callback calls wsl_gone() at LWS_CALLBACK_WSI_DESTROY
 * (for every wsi: unknown ones are ignored) and wsl_deadline() when a
 * request is answered (off: a WebSocket; re-armed: keep-alive).
 *
 * Data model: struct wsl owns the listening descriptor, its poll handle,
 * the pause and sweep timers, the connlim table, and the rate-limited log
 * state. Its handles close asynchronously: wsl_close() frees it once libuv
 * has closed them.
 */
#ifndef AL_WSLISTEN_H
#define AL_WSLISTEN_H

#include <libwebsockets.h>
#include <stddef.h>
#include <uv.h>

#include "connlim.h"

#define WSL_ACCEPT_BURST 64       /* accepts per wake-up of the loop */
#define WSL_BACKLOG 511           /* listen() backlog */
#define WSL_PAUSE_MS 250          /* accepting pauses this long when out of descriptors */
#define WSL_LOG_INTERVAL_MS 10000 /* one line per reason per interval, with a count */
#define WSL_SWEEP_MS 250          /* how often deadlines are checked */
#define WSL_FD_RESERVE_MIN 64     /* descriptors kept for files, the database, PTYs */
#define WSL_FD_RESERVE_DIV 4      /* ... or a quarter of RLIMIT_NOFILE if more */

struct wsl_config {
    uv_loop_t *loop;
    struct lws_vhost *vhost; /* created with CONTEXT_PORT_NO_LISTEN_SERVER */
    const char *host;        /* IPv4 address to bind; NULL or "": any */
    int port;
    int tls;                /* the vhost does TLS: adopt with it */
    struct clim_limits lim; /* max_total is lowered to fit RLIMIT_NOFILE */
    const char *prog;       /* for log lines: "airlockd" */
    const char *instance;
    int log_level;
    int log_format; /* enum al_log_format */
};

struct wsl;

/* Bind, listen and start accepting. AL_OK, or an AL_E_* with err set. */
int wsl_start(const struct wsl_config *cfg, struct wsl **out, char *err, size_t cap);
/* Stop accepting and free (after the lws context is destroyed). */
void wsl_close(struct wsl *l);
/* A wsi is being destroyed: free its connection slot, if it had one. */
void wsl_gone(struct wsl *l, struct lws *wsi);
/* The current request of wsi was answered: on 0, no deadline (a
 * WebSocket, a file being streamed); on 1, a fresh one for the next
 * request on the same connection. */
void wsl_deadline(struct wsl *l, struct lws *wsi, int on);
/* The limits in force (max_total after the RLIMIT_NOFILE cap). */
const struct clim_limits *wsl_limits(const struct wsl *l);
/* The port bound (the one the kernel chose when cfg->port was 0), or -1. */
int wsl_port(const struct wsl *l);

#endif
