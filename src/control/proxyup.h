/*
 * proxyup: the credential proxy's calls to upstreams, made with libcurl's
 * multi interface on airlockd's libuv loop (curl_multi_socket_action): no
 * thread per request, every socket watched by the loop. Control plane
 * only (al_control).
 *
 * Data model: a proxyup owns one CURLM and the uv handles that watch its
 * sockets and its timer. A call owns one CURL easy handle, its header
 * list and its copy of the URL; the caller's callbacks stream the request
 * body in and the response out, each able to pause its direction (flow
 * control: a slow agent pauses the upstream, a slow upload pauses the
 * reading of the agent's body). A call ends exactly once, with on_done,
 * unless the caller cancels it first (an agent that went away): after
 * proxyup_cancel no callback of that call runs again.
 *
 * Timeouts: connecting is bounded (connect_timeout_ms), and so is the wait
 * for the response head (response_timeout_s, answered as 504 by the
 * caller); once the head is in, a response may stay silent as long as the
 * upstream keeps the connection: agents' streams go quiet for minutes
 * during tool runs.
 */
#ifndef AL_PROXYUP_H
#define AL_PROXYUP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* What a body callback returns to stop its direction for now. */
#define PROXYUP_PAUSE ((size_t)-1)

enum proxyup_result {
    PROXYUP_OK = 0,  /* the response came whole */
    PROXYUP_REFUSED, /* no connection (refused, unreachable, DNS, TLS): 502 */
    PROXYUP_TIMEOUT, /* connect or response-head timeout: 504 */
    PROXYUP_BROKEN,  /* the upstream broke the response off: the agent's stream is cut */
    PROXYUP_ABORTED, /* a callback asked to stop */
};

struct proxyup_cb {
    /* The response's status and each of its header lines (not the status
     * line; names as sent), then the end of the head. */
    void (*on_status)(void *ud, int status);
    void (*on_header)(void *ud, const char *name, size_t nlen, const char *value, size_t vlen);
    void (*on_head_done)(void *ud);
    /* Response body bytes: return n when taken, PROXYUP_PAUSE to be given
     * them again after proxyup_resume_down. */
    size_t (*on_body)(void *ud, const char *p, size_t n);
    /* Request body: copy at most cap bytes into buf and return how many; 0
     * at the end; PROXYUP_PAUSE when none are there yet (then
     * proxyup_resume_up when some are). Unused when the spec has no body. */
    size_t (*read_body)(void *ud, char *buf, size_t cap);
    /* The end, exactly once, with a short reason for a failure (never the
     * secret: curl's messages name the host at most). */
    void (*on_done)(void *ud, enum proxyup_result r, const char *why);
};

struct proxyup_spec {
    const char *method;
    const char *url;
    const char *const *headers; /* "name: value" strings, NULL-terminated */
    int has_body;
    int64_t body_len;    /* -1: unknown, sent chunked */
    const char *ca_file; /* NULL or "": the system's store */
    unsigned connect_timeout_ms;
    unsigned response_timeout_s;
};

struct proxyup;
struct proxyup_call;

int proxyup_new(uv_loop_t *loop, struct proxyup **out);
/* Cancels every call left (no callbacks) and closes the uv handles; the
 * memory is released once the loop has run their close callbacks. */
void proxyup_free(struct proxyup *u);

int proxyup_start(struct proxyup *u, const struct proxyup_spec *spec, const struct proxyup_cb *cb,
                  void *ud, struct proxyup_call **out, char *why, size_t cap);
void proxyup_resume_down(struct proxyup_call *c);
void proxyup_resume_up(struct proxyup_call *c);
void proxyup_cancel(struct proxyup_call *c);

/* Calls in flight, for metrics and tests. */
unsigned proxyup_active(const struct proxyup *u);

#endif
