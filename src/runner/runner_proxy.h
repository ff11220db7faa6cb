/*
 * runner_proxy: the runner's credential proxy listener (docs/proxy.md,
 * "The path through the runner"; docs/protocol.md §5a). Agents in the
 * sandbox that cannot reach airlockd connect to it (--proxy-listen on a
 * loopback address, --proxy-socket on a unix socket); each connection is
 * carried as raw bytes on one proxy channel of the airlock.v1 link, and
 * airlockd does the rest. The runner parses no HTTP and links no HTTP
 * library: the only HTTP it ever writes is one canned answer, `503` with
 * the proxy's JSON error body, to a connection made while no link is up
 * (or while every proxy channel is taken).
 *
 * Data model: a runner_proxy owns its listening handles, a periodic timer
 * and its connections; each connection owns its stream handle and its
 * pending writes (each a copy of the bytes it carries). It borrows the
 * runner's endpoint, whose proxy channels map 1:1 to connections. Credit
 * toward airlockd is granted for answer bytes the socket has taken; the
 * agent's bytes are read only while the channel's ring has room.
 */
#ifndef AL_RUNNER_PROXY_H
#define AL_RUNNER_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "al_limits.h"

struct ep;
struct ep_event;
struct runner_proxy;

/* Connections at once, proxy channels and canned answers together: one
 * more is closed at once. */
#define RUNNER_PROXY_MAX_CONNS (2 * AL_MAX_PROXY_CHANNELS)
/* A connection whose answer is complete, or that got the canned 503, is
 * closed once its agent has closed too, or after this. */
#define RUNNER_PROXY_CLOSE_MS 5000
#define RUNNER_PROXY_TICK_MS 500
#define RUNNER_PROXY_ADDR_MAX 64 /* "127.0.0.1:PORT", "[::1]:PORT" */

/* Asks the runner to call ep_output soon. */
typedef void runner_proxy_wake_fn(void *ud);
typedef void runner_proxy_log_fn(void *ud, int level, const char *msg);

struct runner_proxy_config {
    const char *listen; /* "127.0.0.1:PORT" (loopback only; PORT 0: any), or NULL */
    const char *socket; /* a unix socket's path, or NULL */
    struct ep *ep;      /* borrowed: the runner's host endpoint */
    runner_proxy_wake_fn *wake;
    runner_proxy_log_fn *log;
    void *ud;
};

/* Whether addr is "ADDR:PORT" with a loopback ADDR (127.0.0.0/8 or [::1])
 * and PORT 0..65535. */
int runner_proxy_addr_ok(const char *addr);

/* Listen as cfg says, and tell the endpoint where (ep_proxy_at). 0, or
 * AL_E_* with why filled in (a bad address, a bind that failed). */
int runner_proxy_new(uv_loop_t *loop, const struct runner_proxy_config *cfg,
                     struct runner_proxy **out, char *why, size_t cap);
/* Close everything; the memory goes once the loop has run the close
 * callbacks. */
void runner_proxy_free(struct runner_proxy *px);

/* An endpoint event about a proxy channel (fr_is_proxy_channel). */
void runner_proxy_event(struct runner_proxy *px, const struct ep_event *ev);
/* The TCP port bound (0: none). */
int runner_proxy_port(const struct runner_proxy *px);
/* Connections open now. */
unsigned runner_proxy_conns(const struct runner_proxy *px);

#endif
