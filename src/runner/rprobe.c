/*
 * rprobe: a probe session (rprobe.h, docs/protocol.md §13).
 */
#include "rprobe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "al_close.h"
#include "al_err.h"
#include "endpoint.h"
#include "frame.h"

/* A reply waiting to be pulled: one encoded frame. */
struct reply {
    struct reply *next;
    size_t len;
    uint8_t bytes[];
};

struct rprobe {
    struct rprobe_header h[AL_PROBE_MAX_HEADERS];
    size_t nh;
    char name[AL_MAX_NAME + 1]; /* our HELLO's */
    uint64_t deadline_us;
    int peer_hello;
    uint32_t peer_max_frame;
    struct reply *head, *tail;
    size_t queued; /* bytes in the queue */
    uint64_t source_left;
    int close_code; /* 0: open */
    const char *close_reason;
};

/* Credentials' names, and the words that make a name one (§13). */
static const char *const secret_names[] = {"authorization", "proxy-authorization", "cookie", NULL};
static const char *const secret_words[] = {"token",  "key",       "secret", "auth",
                                           "cookie", "signature", NULL};
/* HTTP authentication schemes kept in front of a redacted value. */
static const char *const schemes[] = {"Bearer",           "Basic",     "Digest", "Negotiate",
                                      "AWS4-HMAC-SHA256", "SharedKey", NULL};

static int is_secret(const char *lc, const char *token_header)
{
    for (size_t i = 0; secret_names[i]; i++)
        if (!strcmp(lc, secret_names[i]))
            return 1;
    if (token_header && !strcasecmp(lc, token_header))
        return 1;
    for (size_t i = 0; secret_words[i]; i++)
        if (strstr(lc, secret_words[i]))
            return 1;
    return 0;
}

int rprobe_redact(const char *name, const char *value, size_t value_len, const char *token_header,
                  struct rprobe_header *out)
{
    size_t n = strlen(name);
    if (n == 0 || n > AL_PROBE_MAX_HEADER_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return 0;
        out->name[i] = c;
    }
    out->name[n] = 0;
    if (!is_secret(out->name, token_header)) {
        size_t k = value_len < AL_PROBE_MAX_HEADER_VALUE ? value_len : AL_PROBE_MAX_HEADER_VALUE;
        for (size_t i = 0; i < k; i++) /* a NUL cannot travel in a str */
            out->value[i] = value[i] ? value[i] : '?';
        out->value[k] = 0;
        return 1;
    }
    for (size_t i = 0; schemes[i]; i++) {
        size_t sl = strlen(schemes[i]);
        if (value_len > sl && !strncasecmp(value, schemes[i], sl) && value[sl] == ' ') {
            size_t rest = value_len - sl - 1;
            (void)snprintf(out->value, sizeof out->value, "%s (%zu)", schemes[i], rest);
            return 1;
        }
    }
    (void)snprintf(out->value, sizeof out->value, "(%zu)", value_len);
    return 1;
}

static int queue(struct rprobe *p, const struct fr_frame *f)
{
    uint8_t buf[AL_MAX_FRAME];
    long n = fr_encode(f, buf, sizeof buf);
    if (n < 0)
        return (int)n;
    struct reply *r = malloc(sizeof *r + (size_t)n);
    if (!r)
        return AL_E_NOMEM;
    r->next = NULL;
    r->len = (size_t)n;
    memcpy(r->bytes, buf, (size_t)n);
    if (p->tail)
        p->tail->next = r;
    else
        p->head = r;
    p->tail = r;
    p->queued += (size_t)n;
    return AL_OK;
}

/* The session ends: ERROR (channel 0) then the close of its code. */
static int fail(struct rprobe *p, int rc, uint16_t code, const char *msg)
{
    if (p->close_code)
        return rc;
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_ERROR;
    f.u.error.code = code;
    f.u.error.msg = (struct fr_str){msg, (uint16_t)strlen(msg)};
    (void)queue(p, &f);
    p->close_code = ep_close_code_of(code);
    p->close_reason = msg;
    return rc;
}

void rprobe_fail(struct rprobe *p, uint16_t code, const char *why)
{
    (void)fail(p, AL_E_PROTO, code, why);
}

int rprobe_new(const struct rprobe_header *h, size_t n, const char *name, uint64_t deadline_us,
               struct rprobe **out)
{
    *out = NULL;
    if (n > AL_PROBE_MAX_HEADERS || strlen(name) > AL_MAX_NAME)
        return AL_E_INVAL;
    struct rprobe *p = calloc(1, sizeof *p);
    if (!p)
        return AL_E_NOMEM;
    if (n)
        memcpy(p->h, h, n * sizeof *h);
    p->nh = n;
    (void)snprintf(p->name, sizeof p->name, "%s", name);
    p->deadline_us = deadline_us;
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_HELLO;
    f.u.hello.version_min = f.u.hello.version_max = AL_PROTO_VERSION;
    f.u.hello.role = FR_ROLE_HOST;
    f.u.hello.max_frame = AL_MAX_FRAME;
    f.u.hello.name = (struct fr_str){p->name, (uint16_t)strlen(p->name)};
    int rc = queue(p, &f);
    if (rc != AL_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return AL_OK;
}

void rprobe_free(struct rprobe *p)
{
    if (!p)
        return;
    while (p->head) {
        struct reply *r = p->head;
        p->head = r->next;
        free(r);
    }
    free(p);
}

static int on_hello(struct rprobe *p, const struct fr_frame *f)
{
    if (p->peer_hello)
        return fail(p, AL_E_PROTO, FR_ERR_PROTOCOL, "second HELLO");
    if (f->u.hello.version_min > AL_PROTO_VERSION || f->u.hello.version_max < AL_PROTO_VERSION)
        return fail(p, AL_E_VERSION, FR_ERR_VERSION, "no common version");
    if (f->u.hello.role != FR_ROLE_CONTROLLER)
        return fail(p, AL_E_PROTO, FR_ERR_PROTOCOL, "both sides claim the host role");
    p->peer_hello = 1;
    p->peer_max_frame = f->u.hello.max_frame;
    return AL_OK;
}

static int on_probe(struct rprobe *p, const struct fr_frame *f)
{
    struct fr_frame r;
    memset(&r, 0, sizeof r);
    r.type = FR_PROBE_REPLY;
    r.u.probe.op = f->u.probe.op;
    switch (f->u.probe.op) {
    case FR_PROBE_HEADERS:
        r.u.probe.nheaders = (uint16_t)p->nh;
        for (size_t i = 0; i < p->nh; i++) {
            r.u.probe.h[i].name = (struct fr_str){p->h[i].name, (uint16_t)strlen(p->h[i].name)};
            r.u.probe.h[i].value = (struct fr_str){p->h[i].value, (uint16_t)strlen(p->h[i].value)};
        }
        return queue(p, &r);
    case FR_PROBE_ECHO:
        if (AL_FRAME_HEADER + 1 + f->u.probe.bytes.len > p->peer_max_frame)
            return fail(p, AL_E_TOOBIG, FR_ERR_TOO_BIG, "an ECHO larger than the peer's max_frame");
        r.u.probe.bytes = f->u.probe.bytes;
        return queue(p, &r);
    case FR_PROBE_SINK:
        return AL_OK;
    case FR_PROBE_SOURCE:
        if (p->source_left + f->u.probe.count > AL_PROBE_SOURCE_MAX) {
            r.type = FR_ERROR;
            r.u.error.code = FR_ERR_LIMIT;
            r.u.error.msg = (struct fr_str){"SOURCE over the limit", 21};
            return queue(p, &r);
        }
        p->source_left += f->u.probe.count;
        return AL_OK;
    default:
        return fail(p, AL_E_PROTO, FR_ERR_PROTOCOL, "unknown PROBE op");
    }
}

int rprobe_input(struct rprobe *p, const uint8_t *msg, size_t len)
{
    if (p->close_code)
        return AL_OK;         /* closing: the rest is dropped */
    static struct fr_frame f; /* large; the runner is single-threaded */
    int rc = fr_decode(msg, len, &f);
    if (rc == AL_E_TOOBIG)
        return fail(p, rc, FR_ERR_TOO_BIG, "frame too big");
    if (rc == AL_E_TYPE)
        return fail(p, rc, FR_ERR_UNKNOWN_TYPE, "unknown frame type");
    if (rc != AL_OK)
        return fail(p, rc, FR_ERR_PROTOCOL, "malformed frame");
    if (!p->peer_hello && f.type != FR_HELLO)
        return fail(p, AL_E_PROTO, FR_ERR_PROTOCOL, "frame before HELLO");
    switch (f.type) {
    case FR_HELLO:
        return on_hello(p, &f);
    case FR_PING:
        f.type = FR_PONG;
        return queue(p, &f);
    case FR_PONG:
        return AL_OK;
    case FR_PROBE:
        return on_probe(p, &f);
    default:
        return fail(p, AL_E_PROTO, FR_ERR_PROTOCOL, "a probe session carries only PING and PROBE");
    }
}

long rprobe_output(struct rprobe *p, uint8_t *buf, size_t cap, uint64_t now_us)
{
    if (!p->close_code && p->deadline_us && now_us >= p->deadline_us)
        (void)fail(p, AL_E_EXPIRED, FR_ERR_TOKEN_EXPIRED, "token expired");
    if (p->head) {
        struct reply *r = p->head;
        if (r->len > cap)
            return AL_E_TOOBIG;
        memcpy(buf, r->bytes, r->len);
        p->head = r->next;
        if (!p->head)
            p->tail = NULL;
        p->queued -= r->len;
        long n = (long)r->len;
        free(r);
        return n;
    }
    if (p->close_code || !p->peer_hello || !p->source_left)
        return 0;
    /* SOURCE: as large a chunk as the peer takes */
    size_t room = p->peer_max_frame < cap ? p->peer_max_frame : cap;
    size_t chunk = room - AL_FRAME_HEADER - 1;
    if (chunk > AL_MAX_PAYLOAD - 1)
        chunk = AL_MAX_PAYLOAD - 1;
    if (chunk > p->source_left)
        chunk = (size_t)p->source_left;
    static const uint8_t zeros[AL_MAX_PAYLOAD];
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE_REPLY;
    f.u.probe.op = FR_PROBE_SOURCE;
    f.u.probe.bytes = (struct fr_bytes){zeros, chunk};
    long n = fr_encode(&f, buf, cap);
    if (n > 0)
        p->source_left -= chunk;
    return n;
}

int rprobe_wants_input(const struct rprobe *p)
{
    return !p->close_code && p->queued < RPROBE_QUEUE_MAX;
}

int rprobe_closing(const struct rprobe *p, int *code, const char **reason)
{
    if (!p->close_code || p->head)
        return 0; /* the ERROR goes first */
    *code = p->close_code;
    *reason = p->close_reason;
    return 1;
}
