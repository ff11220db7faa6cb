/*
 * cli_wsprobe: `airlock probe ws://…` or `wss://…`: a measurement of the
 * WebSocket path to a runner (a platform's ingress, a load balancer, a
 * proxy), printed as a table or as one JSON object. In order:
 *   1. the phases of a connection: DNS, TCP connect (each on its own),
 *      TLS and the upgrade (lws's connection: from its start to the
 *      request, less the TCP time; from the request to the answer);
 *   2. the upgrade without a token, with a damaged one, with --wrong-token
 *      if given (each expected 403), and with the token (101, the
 *      subprotocol the server chose);
 *   3. on that probe session (docs/protocol.md §13): the request headers
 *      the runner saw (names, values redacted by the runner), the RTT over
 *      N pings (p50, p99), the largest message carried (ECHOs up to the
 *      runner's max_frame), throughput up (SINK, then an ECHO as a
 *      barrier) and down (SOURCE);
 *   4. two sessions at once: one silent (how long until the path cuts an
 *      idle connection, up to --idle-max) and one that pings every
 *      --ping-interval (whether pings keep it alive, and whether the path
 *      cuts connections at a fixed age, up to --age-max), with the close
 *      code or reset seen.
 * The token (scope runner:probe, audience the runner's identifier: make
 * one with `airlockd token --scope runner:probe --aud ID`) opens a probe
 * session, which never disturbs the runner's link to airlockd.
 *
 * Every step has its own time limit; nothing waits forever. The
 * measurement is one state machine on the CLI's libuv loop.
 */
#ifndef CLI_WSPROBE_H
#define CLI_WSPROBE_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "cli_config.h"

enum {
    WSPROBE_DEFAULT_PINGS = 20,
    WSPROBE_MAX_PINGS = 10000,
    WSPROBE_DEFAULT_BYTES = 4 << 20,
    WSPROBE_MAX_BYTES = 64 << 20, /* AL_PROBE_SOURCE_MAX */
    WSPROBE_DEFAULT_IDLE_MAX_S = 30,
    WSPROBE_DEFAULT_AGE_MAX_S = 30,
    WSPROBE_MAX_WAIT_S = 3600, /* --idle-max, --age-max */
    WSPROBE_DEFAULT_PING_MS = 2000,
};

struct wsprobe_opts {
    const char *url;         /* ws:// or wss://, with its query */
    const char *token;       /* NULL: only the refusals are measured */
    const char *wrong_token; /* another audience's token, or NULL */
    unsigned pings;
    uint64_t bytes;
    unsigned idle_max_s, age_max_s; /* 0: that measurement is skipped */
    unsigned ping_interval_ms;
    int json;
};

/* cfg: where the headers, token header and TLS settings are (its URL
 * and key are set from opts). Returns the exit code: 0 when the token
 * opened a probe session and every measurement ran; CLI_EXIT_DOWN the
 * path cannot be reached (or a step ran out of time); CLI_EXIT_AUTH the
 * token was refused or none was given; CLI_EXIT_PROTO the server does
 * not speak airlock.v1 or broke it; CLI_EXIT_USAGE a bad URL. */
int cli_wsprobe(uv_loop_t *loop, struct cli_config *cfg, const struct wsprobe_opts *o, FILE *out);

#endif
