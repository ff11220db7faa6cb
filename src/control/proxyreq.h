/*
 * proxyreq: the HTTP/1.1 requests an agent sends to the credential proxy,
 * parsed from the bytes of one connection (the agent's socket on the
 * direct path, the channel's stream on the runner path). Untrusted input;
 * control plane only (al_control). Pure: bytes in, events out, no I/O, no
 * clock; the parsing itself is http-parser's (libhttp-parser), this file
 * keeps the head in bounded memory and refuses what a proxy must not pass
 * on (docs/proxy.md, "what is refused").
 *
 * Data model: a proxyreq owns one arena of PROXYREQ_HEAD_MAX bytes that
 * holds the current request's head (method, target, header names in lower
 * case, values); a head handed to the callback points into it and is valid
 * until the callback for that request's END returns. Requests on one
 * connection are served one at a time: after END the parser pauses, and
 * the caller resumes it (proxyreq_next) once it has answered, so that a
 * pipelined request is never read ahead of its turn.
 */
#ifndef AL_PROXYREQ_H
#define AL_PROXYREQ_H

#include <stddef.h>
#include <stdint.h>

enum {
    PROXYREQ_HEAD_MAX = 64 * 1024, /* bytes of a request line and headers */
    PROXYREQ_MAX_HEADERS = 100,    /* header lines in one request */
    PROXYREQ_METHOD_MAX = 16,
};

struct proxyreq_hdr {
    const char *name;  /* lower case */
    const char *value; /* as sent, without surrounding spaces */
};

struct proxyreq_head {
    char method[PROXYREQ_METHOD_MAX + 1];
    const char *target; /* the request target, as sent */
    struct proxyreq_hdr hdr[PROXYREQ_MAX_HEADERS];
    unsigned nhdr;
    int64_t content_length; /* -1: none */
    int chunked;            /* Transfer-Encoding: chunked */
    int keep_alive;         /* the connection may carry another request */
    int upgrade;            /* an Upgrade request (e.g. a WebSocket) */
    int http_minor;         /* HTTP/1.x */
};

enum proxyreq_ev {
    PROXYREQ_HEAD, /* a complete head: h is set */
    PROXYREQ_BODY, /* body bytes (chunked framing removed): p, n */
    PROXYREQ_END,  /* the request is complete */
};

/* Return 0 to go on, 1 to pause the parser after this event (the caller
 * resumes with proxyreq_resume), for flow control of the body. */
typedef int proxyreq_cb(void *ud, enum proxyreq_ev ev, const struct proxyreq_head *h,
                        const uint8_t *p, size_t n);

struct proxyreq;

/* max_body: bytes of body allowed per request (413 above it). */
int proxyreq_new(uint64_t max_body, proxyreq_cb *cb, void *ud, struct proxyreq **out);
void proxyreq_free(struct proxyreq *r);

/*
 * Feed bytes. *used says how many were taken. Returns:
 *   AL_OK        all taken, waiting for more;
 *   AL_E_AGAIN   paused (by the callback, or after END): the rest waits
 *                for proxyreq_resume / proxyreq_next;
 *   < 0 other    the request is refused and the connection must close
 *                after the answer: *status is the HTTP status to answer
 *                (400, 413, 431, 501, 505) and why a reason without any
 *                of the request's bytes beyond the method.
 */
int proxyreq_feed(struct proxyreq *r, const uint8_t *p, size_t n, size_t *used, int *status,
                  char *why, size_t cap);

/* Let a paused body go on. */
void proxyreq_resume(struct proxyreq *r);

/* After the answer to a request: read the next one (keep-alive). */
void proxyreq_next(struct proxyreq *r);

/* The value of the first header named `name` (lower case), or NULL. */
const char *proxyreq_header(const struct proxyreq_head *h, const char *name);
/* 1 if the n bytes at s are a token (RFC 9110 §5.6.2), as a header's name
 * must be: no space, tab, colon or control byte; not empty. */
int proxyreq_token(const char *s, size_t n);

#endif
