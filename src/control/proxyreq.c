/*
 * proxyreq: an agent's HTTP/1.1 request stream, parsed by http-parser into
 * a bounded head and body events.
 *
 * The arena holds, in order: the target, then each header name and value,
 * each NUL-terminated. http-parser hands every one of them in pieces that
 * arrive back to back (a piece of one item is never followed by a piece of
 * an earlier one), so each item is one contiguous string once its last
 * piece is in; `open` says which kind of item is being appended.
 */
#include "proxyreq.h"

#include "al_err.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum item { ITEM_NONE, ITEM_TARGET, ITEM_FIELD, ITEM_VALUE };

struct proxyreq {
    http_parser hp;
    http_parser_settings hs;
    proxyreq_cb *cb;
    void *ud;
    uint64_t max_body;
    uint64_t body_seen;
    struct proxyreq_head head;
    size_t used;    /* arena bytes */
    size_t item_at; /* where the open item starts */
    enum item open;
    int status;      /* our own refusal, set by a callback (0: none) */
    const char *why; /* static reason for it */
    char arena[PROXYREQ_HEAD_MAX];
};

static struct proxyreq *of(http_parser *p)
{
    return (struct proxyreq *)p->data;
}

static int refuse(struct proxyreq *r, int status, const char *why)
{
    r->status = status;
    r->why = why;
    return -1;
}

int proxyreq_token(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != 0 && strchr("!#$%&'*+-.^_`|~", c))))
            return 0;
    }
    return 1;
}

/* Terminate the open item with a NUL; record it where it belongs. */
static int close_item(struct proxyreq *r)
{
    if (r->open == ITEM_NONE)
        return 0;
    if (r->used >= sizeof r->arena)
        return refuse(r, 431, "request head too large");
    r->arena[r->used++] = '\0';
    const char *s = r->arena + r->item_at;
    switch (r->open) {
    case ITEM_TARGET:
        r->head.target = s;
        break;
    case ITEM_FIELD:
        if (r->head.nhdr == PROXYREQ_MAX_HEADERS)
            return refuse(r, 431, "too many header lines");
        /* http-parser, as Debian builds it (not strict), lets a space or a
         * tab into a name: "Host :" or "Content-Length :" would pass the
         * proxy's exact-name checks and framing while a lenient upstream
         * trims and honours them */
        if (!proxyreq_token(s, strlen(s)))
            return refuse(r, 400, "a header name that is not a token (a space before the colon?)");
        r->head.hdr[r->head.nhdr].name = s;
        r->head.hdr[r->head.nhdr].value = "";
        break;
    case ITEM_VALUE: {
        /* trim the spaces http-parser leaves at the end of a value */
        char *e = r->arena + r->used - 1;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        r->head.hdr[r->head.nhdr++].value = s;
        break;
    }
    case ITEM_NONE:
        break;
    }
    r->open = ITEM_NONE;
    return 0;
}

static int append(struct proxyreq *r, enum item kind, const char *p, size_t n)
{
    if (r->open != kind) {
        if (close_item(r) != 0)
            return -1;
        r->open = kind;
        r->item_at = r->used;
    }
    if (n >= sizeof r->arena - r->used)
        return refuse(r, 431, "request head too large");
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (kind == ITEM_FIELD && ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        r->arena[r->used++] = ch;
    }
    return 0;
}

static int on_begin(http_parser *p)
{
    struct proxyreq *r = of(p);
    memset(&r->head, 0, sizeof r->head);
    r->head.content_length = -1;
    r->used = 0;
    r->open = ITEM_NONE;
    r->body_seen = 0;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    return append(of(p), ITEM_TARGET, at, n);
}

/* Names and values arrive in pieces; append() closes the item before
 * (a value closes its name, the next name closes the value). */
static int on_field(http_parser *p, const char *at, size_t n)
{
    return append(of(p), ITEM_FIELD, at, n);
}

static int on_value(http_parser *p, const char *at, size_t n)
{
    return append(of(p), ITEM_VALUE, at, n);
}

/* Only "chunked" alone is a transfer coding the proxy takes. */
static int te_ok(const struct proxyreq_head *h)
{
    for (unsigned i = 0; i < h->nhdr; i++) {
        if (strcmp(h->hdr[i].name, "transfer-encoding") == 0 &&
            strcasecmp(h->hdr[i].value, "chunked") != 0)
            return 0;
    }
    return 1;
}

static int on_headers(http_parser *p)
{
    struct proxyreq *r = of(p);
    /* a name with no value: http-parser gives no value callback */
    if (r->open == ITEM_FIELD) {
        if (close_item(r) != 0)
            return -1;
        r->head.nhdr++;
    } else if (close_item(r) != 0) {
        return -1;
    }
    if (!r->head.target)
        return refuse(r, 400, "no request target");
    struct proxyreq_head *h = &r->head;
    const char *m = http_method_str((enum http_method)p->method);
    size_t ml = strlen(m);
    if (ml > PROXYREQ_METHOD_MAX)
        return refuse(r, 501, "unknown method");
    memcpy(h->method, m, ml + 1);
    if (p->http_major != 1)
        return refuse(r, 505, "only HTTP/1.0 and HTTP/1.1 are spoken");
    h->http_minor = p->http_minor;
    h->chunked = (p->flags & F_CHUNKED) != 0;
    if (p->flags & F_CONTENTLENGTH)
        h->content_length = (int64_t)p->content_length;
    h->keep_alive = http_should_keep_alive(p) != 0;
    h->upgrade = p->upgrade != 0;
    if (proxyreq_header(h, "transfer-encoding") && !h->chunked)
        return refuse(r, 400, "chunked must be the last transfer coding");
    if (!te_ok(h))
        return refuse(r, 501, "only the chunked transfer coding is accepted");
    /* libcurl sends a HEAD without a body: framing one for it upstream
     * would make the next request on that shared connection its body */
    if (strcmp(h->method, "HEAD") == 0 && (h->chunked || h->content_length > 0))
        return refuse(r, 400, "a HEAD request has no body");
    if (h->content_length >= 0 && (uint64_t)h->content_length > r->max_body)
        return refuse(r, 413, "request body larger than the upstream's max-body");
    if (r->cb(r->ud, PROXYREQ_HEAD, h, NULL, 0) == 1)
        http_parser_pause(p, 1);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct proxyreq *r = of(p);
    r->body_seen += n;
    if (r->body_seen > r->max_body)
        return refuse(r, 413, "request body larger than the upstream's max-body");
    if (r->cb(r->ud, PROXYREQ_BODY, &r->head, (const uint8_t *)at, n) == 1)
        http_parser_pause(p, 1);
    return 0;
}

/* A chunk's declared size counts against the limit before its bytes come. */
static int on_chunk(http_parser *p)
{
    struct proxyreq *r = of(p);
    if (p->content_length > r->max_body - r->body_seen)
        return refuse(r, 413, "request body larger than the upstream's max-body");
    return 0;
}

static int on_complete(http_parser *p)
{
    struct proxyreq *r = of(p);
    (void)r->cb(r->ud, PROXYREQ_END, &r->head, NULL, 0);
    http_parser_pause(p, 1); /* one request at a time: proxyreq_next */
    return 0;
}

int proxyreq_new(uint64_t max_body, proxyreq_cb *cb, void *ud, struct proxyreq **out)
{
    if (!cb || !out)
        return AL_E_INVAL;
    struct proxyreq *r = calloc(1, sizeof *r);
    if (!r)
        return AL_E_NOMEM;
    http_parser_init(&r->hp, HTTP_REQUEST);
    r->hp.data = r;
    http_parser_settings_init(&r->hs);
    r->hs.on_message_begin = on_begin;
    r->hs.on_url = on_url;
    r->hs.on_header_field = on_field;
    r->hs.on_header_value = on_value;
    r->hs.on_headers_complete = on_headers;
    r->hs.on_body = on_body;
    r->hs.on_chunk_header = on_chunk;
    r->hs.on_message_complete = on_complete;
    r->cb = cb;
    r->ud = ud;
    r->max_body = max_body;
    *out = r;
    return AL_OK;
}

void proxyreq_free(struct proxyreq *r)
{
    free(r);
}

/* http-parser's errors as the status a client gets. */
static const struct {
    enum http_errno e;
    int status;
    const char *why;
} parse_errors[] = {
    {HPE_HEADER_OVERFLOW, 431, "request head too large"},
    {HPE_INVALID_VERSION, 505, "only HTTP/1.0 and HTTP/1.1 are spoken"},
    {HPE_INVALID_METHOD, 501, "unknown method"},
    {HPE_UNEXPECTED_CONTENT_LENGTH, 400, "conflicting Content-Length or Transfer-Encoding"},
    {HPE_INVALID_TRANSFER_ENCODING, 400, "chunked must be the last transfer coding"},
    {HPE_INVALID_CONTENT_LENGTH, 400, "invalid Content-Length"},
};

int proxyreq_feed(struct proxyreq *r, const uint8_t *p, size_t n, size_t *used, int *status,
                  char *why, size_t cap)
{
    *used = 0;
    *status = 0;
    if (!r)
        return AL_E_INVAL;
    if (r->status) {
        *status = r->status;
        al_errf(why, cap, "%s", r->why);
        return AL_E_PROTO;
    }
    if (HTTP_PARSER_ERRNO(&r->hp) == HPE_PAUSED)
        return AL_E_AGAIN;
    if (r->head.upgrade)
        return AL_E_AGAIN; /* the bytes after an upgrade head are not HTTP */
    if (n == 0)
        return AL_OK; /* http-parser takes 0 bytes as the end of the stream */
    size_t k = http_parser_execute(&r->hp, &r->hs, (const char *)p, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->hp);
    *used = k;
    if (e == HPE_PAUSED)
        return AL_E_AGAIN;
    if (e == HPE_OK)
        return r->head.upgrade && k < n ? AL_E_AGAIN : AL_OK;
    if (r->status) {
        *status = r->status;
        al_errf(why, cap, "%s", r->why);
        return AL_E_PROTO;
    }
    *status = 400;
    const char *reason = "malformed HTTP request";
    for (size_t i = 0; i < sizeof parse_errors / sizeof parse_errors[0]; i++) {
        if (parse_errors[i].e == e) {
            *status = parse_errors[i].status;
            reason = parse_errors[i].why;
        }
    }
    r->status = *status;
    r->why = reason;
    al_errf(why, cap, "%s", reason);
    return AL_E_PROTO;
}

void proxyreq_resume(struct proxyreq *r)
{
    if (r && HTTP_PARSER_ERRNO(&r->hp) == HPE_PAUSED)
        http_parser_pause(&r->hp, 0);
}

void proxyreq_next(struct proxyreq *r)
{
    proxyreq_resume(r);
}

const char *proxyreq_header(const struct proxyreq_head *h, const char *name)
{
    for (unsigned i = 0; h && i < h->nhdr; i++)
        if (strcmp(h->hdr[i].name, name) == 0)
            return h->hdr[i].value;
    return NULL;
}
