/*
 * proxyconn: one agent connection through the credential proxy.
 *
 * A request goes through these steps, in this order (docs/proxy.md):
 *   head parsed (proxyreq)      -> 400 413 431 501 505 on a bad request
 *   routed (proxypol_route)     -> 400 404 414 426 501, 401 without a credential
 *   gate begin (the owner)      -> 401 for a credential not valid for the
 *                                  upstream, 429 over a limit, 502 no secret
 *   allowed (proxypol_allowed)  -> 403
 *   upstream call (proxyup)     -> 502 unreachable, 504 no answer in time
 * then the upstream's answer is streamed back as it comes. A refusal is
 * answered with a JSON body and Connection: close, and nothing of it went
 * upstream. After an answer the next request on the connection is read.
 *
 * ops->close and a failed ops->send never free the proxyconn from inside
 * the call (the transport frees it later): so every function here may go
 * on using `c` after them.
 */
#include "proxyconn.h"

#include "al_err.h"
#include "proxypol.h"
#include "proxyreq.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

enum {
    RESP_HEAD_MAX = 32 * 1024,  /* the upstream's response head, as we send it on */
    UP_HEADERS_MAX = 32 * 1024, /* the request head we hand libcurl */
    UP_HEADER_LINES = 128,
    ERROR_BODY_MAX = 1024,
};

struct proxyconn {
    const struct proxycfg *cfg;
    struct proxyup *up;
    const struct proxyconn_gate *gate;
    void *gate_ud;
    struct proxyconn_ops ops;
    void *ud;
    struct proxyreq *rq;
    char source[PROXYCONN_SOURCE_MAX + 1]; /* of the connection: proxyconn_set_source */

    uint8_t in[PROXYCONN_INPUT_MAX]; /* agent bytes not yet parsed */
    size_t in_len;
    int input_short; /* proxyconn_input took less than offered: tell input_ready */
    int feeding;     /* inside process_input (no re-entry) */

    /* the request in flight */
    int busy; /* from its head to the end of its answer */
    struct proxypol_call pc;
    char terminal[PROXYCONN_TERMINAL_MAX + 1];
    char method[PROXYREQ_METHOD_MAX + 1];
    char path[PROXYPOL_PATH_MAX + 1]; /* without the query, for the audit */
    int keep_alive, http10;
    struct proxyup_call *call;
    uint8_t body[PROXYCONN_BODY_MAX]; /* request body for libcurl */
    size_t body_len;
    int body_end;
    int body_paused;              /* proxyreq paused because body[] is nearly full */
    uint64_t max_body, body_seen; /* the upstream's limit, and the body so far */
    char up_hdr[UP_HEADERS_MAX];  /* "name: value" strings, NUL-separated */
    size_t up_hdr_len;
    const char *up_lines[UP_HEADER_LINES + 1];
    unsigned up_nlines;
    uint64_t t0_ns, bytes_up, bytes_down;

    /* its answer */
    int status;
    char head[RESP_HEAD_MAX];
    size_t head_len;
    int head_sent;
    int has_length;       /* the upstream sent Content-Length */
    size_t cl_at, cl_len; /* where its line sits in head */
    int up_te;    /* the upstream sent Transfer-Encoding (Content-Length then means nothing) */
    int bad_head; /* a line the proxy will not pass: a folded one, a name not a token, two lengths
                   */
    int no_body;  /* HEAD, 1xx, 204, 304 */
    int chunked;  /* we frame the body as chunks */
    int close_after;
    int full; /* the transport is full: the upstream is paused */
    int down_paused;

    int closed; /* an error answer went out or the connection ended */
};

/* ---- answers of our own ---- */

#define CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

static const struct {
    int status;
    const char *phrase;
} phrases[] = {
    {200, "OK"},
    {201, "Created"},
    {204, "No Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {426, "Upgrade Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

static const char *phrase_of(int status)
{
    for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
        if (phrases[i].status == status)
            return phrases[i].phrase;
    return "Status";
}

static int send_bytes(struct proxyconn *c, const void *p, size_t n)
{
    int rc = c->ops.send(c->ud, p, n);
    if (rc == 1)
        c->full = 1;
    return rc;
}

/* A JSON string body from a plain reason: quotes, backslashes and control
 * characters escaped. */
static void json_escape(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
}

static void record(struct proxyconn *c, int status)
{
    struct proxyconn_record rec = {
        .terminal = c->terminal,
        .source = c->source,
        .upstream = c->pc.up ? c->pc.up->name : "",
        .method = c->method,
        .path = c->path,
        .status = status,
        .bytes_up = c->bytes_up,
        .bytes_down = c->bytes_down,
        .latency_ms = (uv_hrtime() - c->t0_ns) / 1000000u,
    };
    if (c->gate->record)
        c->gate->record(c->gate_ud, &rec);
}

static void finish_call(struct proxyconn *c)
{
    if (c->terminal[0] && c->gate->end)
        c->gate->end(c->gate_ud, c->terminal, c->pc.up ? c->pc.up->name : "",
                     c->gate->spend ? 0 : c->bytes_up + c->bytes_down);
    c->terminal[0] = '\0';
}

/* n more bytes of the call: 0, or nonzero once the terminal's byte
 * budget is spent (the reason in why). */
static int spend(struct proxyconn *c, uint64_t n, char *why, size_t cap)
{
    if (!c->gate->spend || !c->terminal[0] || n == 0)
        return 0;
    const char *up = c->pc.up ? c->pc.up->name : "";
    if (c->gate->spend(c->gate_ud, c->terminal, up, n) == 0)
        return 0;
    snprintf(why, cap, "terminal %s: its bytes through upstream %s are spent (max-bytes)",
             c->terminal, up);
    return 1;
}

/* The request in flight is over (its answer complete, refused or cut):
 * one audit record, and its share of the limits given back. */
static void end_request(struct proxyconn *c, int status)
{
    if (!c->busy)
        return;
    c->busy = 0;
    record(c, status);
    finish_call(c);
}

static void close_conn(struct proxyconn *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    if (c->call) {
        proxyup_cancel(c->call);
        c->call = NULL;
    }
    end_request(c, 0);
    c->ops.close(c->ud);
}

/* Answer with an error of our own and close. */
static void refuse(struct proxyconn *c, int status, const char *why, unsigned retry_after)
{
    if (c->closed)
        return;
    if (c->call) {
        proxyup_cancel(c->call);
        c->call = NULL;
    }
    if (!c->head_sent) {
        char msg[ERROR_BODY_MAX / 2], body[ERROR_BODY_MAX], head[512], retry[64] = "";
        json_escape(msg, sizeof msg, why);
        int bl =
            snprintf(body, sizeof body,
                     "{\"error\":{\"type\":\"airlock_proxy\",\"status\":%d,\"message\":\"%s\"}}\n",
                     status, msg);
        if (bl < 0 || (size_t)bl >= sizeof body)
            bl = snprintf(body, sizeof body,
                          "{\"error\":{\"type\":\"airlock_proxy\",\"status\":%d}}\n", status);
        if (retry_after)
            snprintf(retry, sizeof retry, "Retry-After: %u\r\n", retry_after);
        int hl =
            snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "%sConnection: close\r\n\r\n",
                     status, phrase_of(status), bl, retry);
        c->head_sent = 1;
        if (send_bytes(c, head, (size_t)hl) >= 0)
            (void)send_bytes(c, body, (size_t)bl);
    }
    end_request(c, status);
    close_conn(c);
}

/* ---- the upstream call's callbacks ---- */

/* Response headers the proxy does not pass on: hop-by-hop ones. */
static const char *const resp_dropped[] = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding",
    "te",         "trailer",    "upgrade",          "proxy-authenticate",
};

static void up_status(void *ud, int status)
{
    struct proxyconn *c = ud;
    c->status = status;
    c->head_len = 0;
    c->has_length = 0;
    c->up_te = 0;
    c->bad_head = 0;
}

static void up_header(void *ud, const char *n, size_t nl, const char *v, size_t vl)
{
    struct proxyconn *c = ud;
    if (!proxyreq_token(n, nl)) {
        c->bad_head = 1; /* an obs-fold line (" folded: b") or a name with a space */
        return;
    }
    if (nl == 17 && strncasecmp(n, "transfer-encoding", 17) == 0)
        c->up_te = 1;
    for (size_t i = 0; i < sizeof resp_dropped / sizeof resp_dropped[0]; i++)
        if (strlen(resp_dropped[i]) == nl && strncasecmp(resp_dropped[i], n, nl) == 0)
            return;
    int is_length = nl == 14 && strncasecmp(n, "content-length", 14) == 0;
    if (is_length && c->has_length) {
        c->bad_head = 1;
        return;
    }
    if (c->head_len + nl + vl + 4 >= sizeof c->head) {
        c->head_len = sizeof c->head; /* marks the overflow */
        return;
    }
    size_t at = c->head_len;
    c->head_len += (size_t)snprintf(c->head + c->head_len, sizeof c->head - c->head_len,
                                    "%.*s: %.*s\r\n", (int)nl, n, (int)vl, v);
    if (is_length) {
        c->has_length = 1;
        c->cl_at = at;
        c->cl_len = c->head_len - at;
    }
}

static void up_head_done(void *ud)
{
    struct proxyconn *c = ud;
    if (c->head_len >= sizeof c->head) {
        refuse(c, 502, "the upstream's response head is too large", 0);
        return;
    }
    if (c->bad_head) {
        refuse(c, 502,
               "the upstream's response head has a folded line, a header name that is not a "
               "token or two Content-Length lines",
               0);
        return;
    }
    if (c->up_te && c->has_length) {
        /* the body comes chunked (libcurl decodes it): its Content-Length
         * means nothing and must not reach the agent (RFC 9112 §6.3) */
        memmove(c->head + c->cl_at, c->head + c->cl_at + c->cl_len,
                c->head_len - c->cl_at - c->cl_len);
        c->head_len -= c->cl_len;
        c->has_length = 0;
    }
    c->no_body =
        strcmp(c->method, "HEAD") == 0 || c->status < 200 || c->status == 204 || c->status == 304;
    c->chunked = !c->no_body && !c->has_length && !c->http10;
    if (!c->no_body && !c->has_length && c->http10)
        c->close_after = 1;
    /* An upstream that answers before the agent's body is all in (a 401
     * or 403 to a push it will not take): the rest of that body must not
     * be read as the next request, and need not reach anyone, so the
     * connection ends with this answer (what is left is dropped). */
    if (!c->keep_alive || !c->body_end)
        c->close_after = 1;
    char line[128];
    int ll = snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", c->status, phrase_of(c->status));
    const char *tail =
        c->chunked ? (c->close_after ? "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                     : "Transfer-Encoding: chunked\r\n\r\n")
                   : (c->close_after ? "Connection: close\r\n\r\n" : "\r\n");
    c->head_sent = 1;
    if (send_bytes(c, line, (size_t)ll) < 0 || send_bytes(c, c->head, c->head_len) < 0 ||
        send_bytes(c, tail, strlen(tail)) < 0)
        close_conn(c);
}

static size_t up_body(void *ud, const char *p, size_t n)
{
    struct proxyconn *c = ud;
    if (c->closed)
        return 0;
    if (c->full) {
        c->down_paused = 1;
        return PROXYUP_PAUSE;
    }
    if (n == 0 || c->no_body)
        return n;
    char why[PROXYCONN_REASON_MAX];
    if (spend(c, n, why, sizeof why)) {
        close_conn(c); /* the answer's head is out: it is cut short */
        return 0;
    }
    int rc = 0;
    if (c->chunked) {
        char sz[32];
        int l = snprintf(sz, sizeof sz, "%zx\r\n", n);
        rc = send_bytes(c, sz, (size_t)l);
        if (rc >= 0)
            rc = send_bytes(c, p, n);
        if (rc >= 0)
            rc = send_bytes(c, "\r\n", 2);
    } else {
        rc = send_bytes(c, p, n);
    }
    if (rc < 0) {
        close_conn(c);
        return 0;
    }
    c->bytes_down += n;
    return n;
}

static void process_input(struct proxyconn *c);

/* 413 naming the limit and where it is set: git, for one, shows a push's
 * refusal as "HTTP 413" alone, so the audit and the agent's own trace
 * must say which setting to raise. */
static void refuse_too_large(struct proxyconn *c)
{
    char why[PROXYCONN_REASON_MAX];
    snprintf(why, sizeof why,
             "request body larger than upstream %s's max-body (%llu bytes; "
             "upstream.%s.max-body in airlockd's configuration)",
             c->pc.up->name, (unsigned long long)c->max_body, c->pc.up->name);
    refuse(c, 413, why, 0);
}

static size_t up_read(void *ud, char *buf, size_t cap)
{
    struct proxyconn *c = ud;
    if (c->body_len == 0)
        return c->body_end ? 0 : PROXYUP_PAUSE;
    size_t n = c->body_len < cap ? c->body_len : cap;
    memcpy(buf, c->body, n);
    memmove(c->body, c->body + n, c->body_len - n);
    c->body_len -= n;
    c->bytes_up += n;
    char why[PROXYCONN_REASON_MAX];
    if (spend(c, n, why, sizeof why)) {
        refuse(c, 429, why, PROXYCONN_SPENT_RETRY_S); /* cancels the call */
        return PROXYUP_PAUSE;
    }
    if (c->body_paused && c->body_len <= PROXYCONN_BODY_MAX - PROXYCONN_INPUT_MAX) {
        c->body_paused = 0;
        proxyreq_resume(c->rq);
        process_input(c);
    }
    return n;
}

static void next_request(struct proxyconn *c);

static void up_done(void *ud, enum proxyup_result r, const char *why)
{
    struct proxyconn *c = ud;
    c->call = NULL; /* proxyup frees it after this returns */
    if (c->closed)
        return;
    char msg[PROXYCONN_REASON_MAX];
    switch (r) {
    case PROXYUP_OK:
        if (c->chunked && send_bytes(c, "0\r\n\r\n", 5) < 0) {
            close_conn(c);
            return;
        }
        end_request(c, c->status);
        if (c->close_after)
            close_conn(c);
        else
            next_request(c);
        return;
    case PROXYUP_REFUSED:
        snprintf(msg, sizeof msg, "upstream %s unreachable: %s", c->pc.up->name, why);
        refuse(c, 502, msg, 0);
        return;
    case PROXYUP_TIMEOUT:
        snprintf(msg, sizeof msg, "upstream %s did not answer in time", c->pc.up->name);
        refuse(c, 504, msg, 0);
        return;
    case PROXYUP_BROKEN:
    case PROXYUP_ABORTED:
        close_conn(c); /* the answer was cut: status 0 in the audit */
        return;
    }
}

static const struct proxyup_cb up_cbs = {up_status, up_header, up_head_done,
                                         up_body,   up_read,   up_done};

/* ---- the agent's request ---- */

static int add_header(void *ud, const char *name, const char *value)
{
    struct proxyconn *c = ud;
    size_t need = strlen(name) + 2 + strlen(value) + 1;
    if (c->up_nlines == UP_HEADER_LINES || c->up_hdr_len + need > sizeof c->up_hdr)
        return AL_E_TOOBIG;
    char *at = c->up_hdr + c->up_hdr_len;
    if (value[0])
        snprintf(at, need, "%s: %s", name, value);
    else /* "name:" alone tells libcurl to leave the header out */
        snprintf(at, need, "%s;", name);
    c->up_lines[c->up_nlines++] = at;
    c->up_lines[c->up_nlines] = NULL;
    c->up_hdr_len += need;
    return 0;
}

static void on_head(struct proxyconn *c, const struct proxyreq_head *h)
{
    c->busy = 1;
    c->t0_ns = uv_hrtime();
    c->bytes_up = c->bytes_down = 0;
    c->status = 0;
    c->head_sent = c->has_length = c->no_body = c->chunked = c->close_after = 0;
    c->body_len = 0;
    c->body_end = 0;
    c->up_hdr_len = 0;
    c->up_nlines = 0;
    c->terminal[0] = '\0';
    snprintf(c->method, sizeof c->method, "%s", h->method);
    snprintf(c->path, sizeof c->path, "%.*s", (int)strcspn(h->target ? h->target : "", "?"),
             h->target ? h->target : "");
    c->keep_alive = h->keep_alive;
    c->http10 = h->http_minor == 0;
    char why[PROXYCONN_REASON_MAX];
    int st = proxypol_route(c->cfg, h, &c->pc, why, sizeof why);
    if (st != 0) {
        refuse(c, st, why, 0);
        return;
    }
    snprintf(c->path, sizeof c->path, "%.*s", (int)strcspn(c->pc.path, "?"), c->pc.path);
    c->max_body = c->pc.up->max_body;
    c->body_seen = 0;
    if (h->content_length >= 0 && (uint64_t)h->content_length > c->max_body) {
        refuse_too_large(c);
        return;
    }
    char secret[PROXY_SECRET_MAX + 1];
    unsigned retry = 0;
    st = c->gate->begin(c->gate_ud, c->pc.up, c->pc.credential, c->terminal, sizeof c->terminal,
                        secret, sizeof secret, &retry, why, sizeof why);
    OPENSSL_cleanse(c->pc.credential, sizeof c->pc.credential);
    if (st != 0) {
        c->terminal[0] = '\0';
        OPENSSL_cleanse(secret, sizeof secret);
        refuse(c, st, why, retry);
        return;
    }
    st = proxypol_allowed(&c->pc, h, why, sizeof why);
    if (st == 0 && proxypol_headers(&c->pc, h, secret, add_header, c) != 0) {
        st = 431;
        snprintf(why, sizeof why, "too many or too large headers");
    }
    OPENSSL_cleanse(secret, sizeof secret);
    if (st != 0) {
        OPENSSL_cleanse(c->up_hdr, sizeof c->up_hdr);
        refuse(c, st, why, 0);
        return;
    }
    const struct proxy_upstream *u = c->pc.up;
    struct proxyup_spec spec = {
        .method = h->method,
        .url = c->pc.url,
        .headers = c->up_lines,
        .has_body = h->chunked || h->content_length > 0,
        .body_len = h->chunked ? -1 : h->content_length,
        .ca_file = u->ca_file,
        .connect_timeout_ms = u->connect_timeout_ms,
        .response_timeout_s = u->response_timeout_s,
    };
    st = proxyup_start(c->up, &spec, &up_cbs, c, &c->call, why, sizeof why);
    /* libcurl copied the header list: our copy, with the secret, goes */
    OPENSSL_cleanse(c->up_hdr, sizeof c->up_hdr);
    if (st != AL_OK) {
        refuse(c, 502, "cannot start the upstream request", 0);
        return;
    }
    /* An agent that waits for "100 Continue" before its body (curl does
     * over 1 MiB) gets it now that the request is on its way: the upstream
     * is sent no Expect, so no 100 would come from there, and the agent
     * would sit out its own timeout (curl's: 1 s) on every upload. An
     * interim answer: the final one, even a refusal, may still follow. */
    const char *expect = proxyreq_header(h, "expect");
    if (spec.has_body && !c->http10 && expect && strcasecmp(expect, "100-continue") == 0 &&
        send_bytes(c, CONTINUE, sizeof CONTINUE - 1) < 0)
        close_conn(c);
}

static int on_req(void *ud, enum proxyreq_ev ev, const struct proxyreq_head *h, const uint8_t *p,
                  size_t n)
{
    struct proxyconn *c = ud;
    if (c->closed)
        return 1;
    switch (ev) {
    case PROXYREQ_HEAD:
        on_head(c, h);
        return c->closed ? 1 : 0;
    case PROXYREQ_BODY:
        c->body_seen += n;
        if (c->body_seen > c->max_body) {
            refuse_too_large(c);
            return 1;
        }
        /* n <= PROXYCONN_INPUT_MAX: it fits, as the parser pauses below */
        memcpy(c->body + c->body_len, p, n);
        c->body_len += n;
        if (c->call)
            proxyup_resume_up(c->call);
        if (c->body_len > PROXYCONN_BODY_MAX - PROXYCONN_INPUT_MAX) {
            c->body_paused = 1;
            return 1;
        }
        return 0;
    case PROXYREQ_END:
        c->body_end = 1;
        if (c->call)
            proxyup_resume_up(c->call);
        return 0;
    }
    return 0;
}

static void process_input(struct proxyconn *c)
{
    if (c->feeding)
        return;
    c->feeding = 1;
    while (!c->closed && c->in_len > 0) {
        size_t used = 0;
        int status = 0;
        char why[PROXYCONN_REASON_MAX];
        int rc = proxyreq_feed(c->rq, c->in, c->in_len, &used, &status, why, sizeof why);
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
        if (rc == AL_E_PROTO) {
            refuse(c, status, why, 0);
            break;
        }
        if (rc == AL_E_AGAIN || used == 0)
            break;
    }
    c->feeding = 0;
    if (c->closed)
        c->in_len = 0;
    if (c->input_short && c->in_len < PROXYCONN_INPUT_MAX) {
        c->input_short = 0;
        c->ops.input_ready(c->ud);
    }
}

static void next_request(struct proxyconn *c)
{
    c->pc.up = NULL;
    proxyreq_next(c->rq);
    process_input(c);
}

void proxyconn_set_source(struct proxyconn *c, const char *source)
{
    (void)snprintf(c->source, sizeof c->source, "%s", source ? source : "");
}

int proxyconn_new(const struct proxycfg *cfg, struct proxyup *up, const struct proxyconn_gate *gate,
                  void *gate_ud, const struct proxyconn_ops *ops, void *ud, struct proxyconn **out)
{
    if (!cfg || !up || !gate || !gate->begin || !ops || !ops->send || !ops->close ||
        !ops->input_ready || !out)
        return AL_E_INVAL;
    struct proxyconn *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    uint64_t max_body = 0;
    for (unsigned i = 0; i < cfg->n; i++)
        if (cfg->up[i].max_body > max_body)
            max_body = cfg->up[i].max_body;
    int rc = proxyreq_new(max_body ? max_body : PROXY_DEFAULT_MAX_BODY, on_req, c, &c->rq);
    if (rc != AL_OK) {
        free(c);
        return rc;
    }
    c->cfg = cfg;
    c->up = up;
    c->gate = gate;
    c->gate_ud = gate_ud;
    c->ops = *ops;
    c->ud = ud;
    *out = c;
    return AL_OK;
}

void proxyconn_free(struct proxyconn *c)
{
    if (!c)
        return;
    if (c->call)
        proxyup_cancel(c->call);
    end_request(c, 0);
    proxyreq_free(c->rq);
    OPENSSL_cleanse(c->body, sizeof c->body);
    free(c);
}

size_t proxyconn_input(struct proxyconn *c, const uint8_t *p, size_t n)
{
    if (c->closed)
        return n; /* the answer went out: the rest is dropped */
    size_t room = PROXYCONN_INPUT_MAX - c->in_len;
    size_t k = n < room ? n : room;
    memcpy(c->in + c->in_len, p, k);
    c->in_len += k;
    if (k < n)
        c->input_short = 1;
    process_input(c);
    return k;
}

void proxyconn_input_end(struct proxyconn *c)
{
    /* an agent that goes away cancels its call */
    close_conn(c);
}

void proxyconn_writable(struct proxyconn *c)
{
    c->full = 0;
    if (c->call && c->down_paused) {
        c->down_paused = 0;
        proxyup_resume_down(c->call);
    }
}

int proxyconn_busy(const struct proxyconn *c)
{
    return c->busy;
}
