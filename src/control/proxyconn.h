/*
 * proxyconn: one agent connection to the credential proxy, whichever way
 * it came (a socket of the direct path, a channel of the runner path):
 * the agent's bytes in, the upstream's answer out, one request at a time.
 * Control plane only (al_control).
 *
 * It ties the pieces together: proxyreq parses the agent's bytes, proxypol
 * routes and checks each head, the owner (proxy.c) checks the credential,
 * the per-terminal limits and hands out the real secret, proxyup makes the
 * call, and this file frames the answer back as HTTP/1.1 (the upstream's
 * Content-Length kept, else chunked, else close-delimited for HTTP/1.0).
 * Every refusal is a JSON body {"error": {"type": "airlock_proxy",
 * "status": N, "message": "..."}} and then the connection closes.
 *
 * Data model: a proxyconn owns its proxyreq, at most one proxyup call, a
 * bounded input buffer (the agent's bytes not yet parsed) and a bounded
 * body buffer (request body bytes not yet taken by libcurl). The transport
 * owns the connection: it hands bytes in with proxyconn_input, takes bytes
 * out through ops->send, and frees the proxyconn when the connection ends.
 * Flow control both ways: proxyconn_input takes only what fits (the rest
 * waits for ops->input_ready); ops->send says when the transport is full,
 * and the upstream is paused until proxyconn_writable.
 */
#ifndef AL_PROXYCONN_H
#define AL_PROXYCONN_H

#include "proxycfg.h"
#include "proxyup.h"

#include <stddef.h>
#include <stdint.h>

enum {
    PROXYCONN_INPUT_MAX = 64 * 1024, /* agent bytes held unparsed */
    PROXYCONN_BODY_MAX = 128 * 1024, /* request body bytes held for libcurl */
    PROXYCONN_TERMINAL_MAX = 64,
    PROXYCONN_REASON_MAX = 256,
    PROXYCONN_SOURCE_MAX = 80,      /* where a call came from: an address, "sandbox ID" */
    PROXYCONN_SPENT_RETRY_S = 3600, /* Retry-After once a terminal's byte budget is spent */
};

/* One call, as the audit table keeps it. */
struct proxyconn_record {
    const char *terminal; /* "" when the credential was not valid */
    const char *source;   /* where the call came from (proxyconn_set_source; "" unset) */
    const char *upstream; /* "" when unknown */
    const char *method;
    const char *path; /* without the query */
    int status;       /* what the agent got; 0: the answer was cut */
    uint64_t bytes_up, bytes_down;
    uint64_t latency_ms; /* to the end of the answer */
};

struct proxyconn_ops {
    /* Bytes toward the agent. Return 0 when there is room for more, 1 when
     * the transport is now full (then call proxyconn_writable when it has
     * drained), < 0 when the connection is gone. */
    int (*send)(void *ud, const uint8_t *p, size_t n);
    /* Close toward the agent after what was sent. */
    void (*close)(void *ud);
    /* proxyconn_input took less than it was given: call it again with the
     * rest now. */
    void (*input_ready)(void *ud);
};

/* What the owner decides about a routed head (proxy.c). */
struct proxyconn_gate {
    /* 0: go on, with the terminal's id and the secret filled in; else an
     * HTTP status (401, 429, 502) with a reason, and for 429 the seconds
     * to wait. `begin` counts the call against the terminal's limits;
     * `end` gives it back with the bytes it moved. */
    int (*begin)(void *gate_ud, const struct proxy_upstream *up, const char *credential,
                 char *terminal, size_t tcap, char *secret, size_t scap, unsigned *retry_after,
                 char *why, size_t wcap);
    void (*end)(void *gate_ud, const char *terminal, const char *upstream, uint64_t bytes);
    void (*record)(void *gate_ud, const struct proxyconn_record *rec);
    /* Optional: the bytes of a call as they move, either way, counted
     * against the terminal's byte budget at once (so that no call runs
     * past it); nonzero once the budget is spent, and the call is cut
     * (429 before the answer's head, else the answer is cut short). With
     * it, end is handed 0 bytes. */
    int (*spend)(void *gate_ud, const char *terminal, const char *upstream, uint64_t bytes);
};

struct proxyconn;

int proxyconn_new(const struct proxycfg *cfg, struct proxyup *up, const struct proxyconn_gate *gate,
                  void *gate_ud, const struct proxyconn_ops *ops, void *ud, struct proxyconn **out);
/* Where its calls come from, for the records (cut to
 * PROXYCONN_SOURCE_MAX bytes): the direct path's peer address, or
 * "sandbox ID" for a runner's channel. */
void proxyconn_set_source(struct proxyconn *c, const char *source);
/* Cancels the upstream call if one is in flight; no callback runs after. */
void proxyconn_free(struct proxyconn *c);

/* Bytes from the agent: returns how many were taken (all, unless the
 * connection is busy with a request and its buffers are full). */
size_t proxyconn_input(struct proxyconn *c, const uint8_t *p, size_t n);
/* The agent closed its side (no more input). */
void proxyconn_input_end(struct proxyconn *c);
/* The transport drained after send returned 1. */
void proxyconn_writable(struct proxyconn *c);
/* 1 from a request's whole head to the end of its answer (a transport
 * bounds the wait for a head, never an answer in flight), else 0. */
int proxyconn_busy(const struct proxyconn *c);

#endif
