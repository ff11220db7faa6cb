/*
 * runner: the sandbox side's core. It owns the host endpoint (airlock.v1),
 * the terminals (a process from proc.c and a screen model from vt.c each)
 * and their event-loop handles. It knows nothing of WebSockets: the link
 * glue (runner_conn.c) hands it whole messages and pulls frames from it.
 *
 * Data model: one struct runner per process, on one libuv loop. Terminals
 * are kept in a fixed table indexed by search on the channel id (at most
 * AL_MAX_CHANNELS). A terminal lives from OPEN until the controller closes
 * it, or until the grace time passes with no controller connected; its
 * process keeps running across connections. Every PTY terminal has a
 * screen model; their estimated heap (vt_mem_estimate) is summed and kept
 * within screen_budget: an OPEN or RESIZE that would pass it is refused.
 */
#ifndef AL_RUNNER_H
#define AL_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "token.h"

struct runner;

struct jail;

struct runner_config {
    const char *identifier;
    const struct tok_keyset *keys; /* borrowed; outlives the runner */
    size_t ring;                   /* output ring per stream, bytes */
    uint32_t window;               /* stdin credit, bytes */
    uint64_t ping_interval_ms, idle_timeout_ms;
    uint64_t grace_ms;            /* terminals outlive a lost link this long */
    const char *const *env_allow; /* names passed from our environment */
    int set_user;                 /* run agents as uid/gid */
    uid_t uid;
    gid_t gid;
    uint64_t max_data;       /* RLIMIT_DATA of each agent process (0: unchanged) */
    int log_level;           /* 0 errors, 1 info, 2 debug */
    int log_format;          /* enum al_log_format: text or json lines */
    const struct jail *jail; /* borrowed: agents start in it (NULL: as we are) */
    /* heap all screen models together may hold (vt_mem_estimate); 0: the default */
    size_t screen_budget;
    /* seconds of clock skew tolerated on token times, 0..TOK_LEEWAY_MAX: a
     * token is valid until exp + leeway, at the upgrade, in a TOKEN frame
     * and for the connection it keeps alive (tokens.md, "Leeway") */
    int64_t leeway;
    /* the credential proxy's listener (runner_proxy.h): a loopback
     * "ADDR:PORT" and/or a unix socket's path; NULL: none */
    const char *proxy_listen, *proxy_socket;
};

#define RUNNER_DEFAULT_GRACE_MS (3600ull * 1000u)
#define RUNNER_DEFAULT_RING (4u << 20)
/* All terminals' screen models together: 256 MiB holds about 3 screens of
 * 1024x1024 or 1700 of 80x24. An OPEN or RESIZE beyond it is refused. */
#define RUNNER_DEFAULT_SCREEN_BUDGET ((size_t)256 << 20)
#define RUNNER_MIN_SCREEN_BUDGET ((size_t)1 << 20) /* --screen-budget at least */
/* Snapshots the controller may have made: a burst, then one per interval
 * (all channels together); requests beyond wait, coalesced per channel. */
#define RUNNER_SNAP_BURST 8
#define RUNNER_SNAP_INTERVAL_US 50000ull

/* The link glue's side: asked to call runner_output() soon. */
typedef void runner_want_write_fn(void *link);

/* The identifier learnt from the first valid upgrade (--identifier-from
 * request): the audience of in-band tokens and the logs' name from now on. */
void runner_set_identifier(struct runner *r, const char *id);
int runner_new(uv_loop_t *loop, const struct runner_config *cfg, struct runner **out);
/* Kill every terminal and release everything once the loop has closed the
 * handles (call uv_run after it). */
void runner_free(struct runner *r);

/* A connection is up (its token expires at token_exp, Unix seconds). */
void runner_link_up(struct runner *r, void *link, runner_want_write_fn *want_write,
                    int64_t token_exp);
/* The connection is gone. */
void runner_link_down(struct runner *r, void *link);
/* Whether this link is the current one. */
int runner_link_is(const struct runner *r, const void *link);
/* A whole binary message arrived; 0 or AL_E_* (then see runner_closing). */
int runner_input(struct runner *r, const uint8_t *msg, size_t len);
/* The WebSocket layer refused a message (text, too big): ERROR code with
 * why, then the close (see runner_closing). 0 or AL_E_*. */
int runner_refuse(struct runner *r, uint16_t code, const char *why);
/* The next frame to send into buf (cap >= AL_MAX_FRAME), 0 if none. */
long runner_output(struct runner *r, uint8_t *buf, size_t cap);
/* Non-zero once the link must close (after draining runner_output). */
int runner_closing(const struct runner *r, int *code, const char **reason);

/* The newest token the controller handed over in band (verified when it
 * came; it may have expired since), or NULL if none yet; *exp gets its
 * expiry (Unix seconds). A runner that dials uses it to redial once the
 * token it started with has expired: it stays linked-in as long as it is
 * never cut off for longer than a token lives. */
const char *runner_latest_token(const struct runner *r, int64_t *exp);

/* Log one line (the runner's own log). */
void runner_log(const struct runner *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
