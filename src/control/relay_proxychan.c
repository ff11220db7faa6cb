/*
 * relay_proxychan: the credential proxy's path through a runner, airlockd's
 * side (docs/proxy.md; docs/protocol.md §5a). A runner that serves a
 * proxy listener opens one proxy channel per agent connection on its
 * sandbox's link; each one is fed to a proxyconn of the proxy exactly as a
 * TCP connection of the direct path is (proxysrv.c), so every check, limit,
 * audit row and metric is the direct path's. Its gate is scoped to the
 * sandbox (proxy_conn_in): a runner's channel spends only the credentials
 * of its own sandbox's terminals.
 *
 * The bytes: the channel's stdout (the agent's request) goes into
 * proxyconn_input, credit granted back (ep_consume) only for what it took;
 * the rest waits in `held` (bounded by the credit window) until
 * ops.input_ready. The answer (ops.send) goes into the channel's stdin
 * ring; what the ring cannot take waits in `out` and the proxyconn is told
 * it is full until EP_EV_WRITABLE drains it. ops.close (the answer is
 * complete, or refused) is EOF on stdin once `out` is empty: the runner
 * writes the rest to the agent and closes the channel.
 *
 * A request head must be whole within PROXYSRV_HEAD_TIMEOUT_MS of the
 * channel's opening or of its last answer, as on the direct path; an
 * answer in flight is never cut for silence.
 *
 * Data model: the sandbox (struct rl_sbx) owns its list of rl_pxch; each
 * owns its proxyconn, its scope (the proxyconn's gate ud) and its two
 * buffers. One ends when its channel ends (EP_EV_CLOSED: the runner closed
 * it, or the link dropped) or when we close it.
 */
#include "relay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "endpoint.h"
#include "proxysrv.h"

struct rl_pxch {
    struct rl_sbx *sb;
    struct rl_pxch *next;
    uint32_t ch;
    struct proxyconn *pc;
    struct proxy_scope scope;
    uint8_t *held; /* agent bytes the proxyconn has not taken (credit bounds them) */
    size_t held_len, held_cap;
    int agent_eof, eof_given; /* the agent's EOF came / was passed on */
    uint8_t *out;             /* answer bytes the channel's ring has not taken */
    size_t out_len, out_cap;
    int out_full;     /* the proxyconn was told the transport is full */
    size_t resume_at; /* the ring's room at which the upstream resumes: half its size */
    int answer_done;  /* ops.close: EOF once `out` is empty */
    int eof_sent;     /* EOF on stdin queued */
    uint64_t idle_us; /* since when no request is in flight */
};

static struct rl_pxch *find(const struct rl_sbx *sb, uint32_t ch)
{
    for (struct rl_pxch *p = sb->pxchs; p; p = p->next)
        if (p->ch == ch)
            return p;
    return NULL;
}

/* Free one taken off its sandbox's list. */
static void pxch_release(struct rl_pxch *p)
{
    proxyconn_free(p->pc); /* cancels the upstream call; no callback after */
    free(p->held);
    free(p->out);
    free(p);
}

static void pxch_free(struct rl_pxch *p)
{
    struct rl_pxch **pp = &p->sb->pxchs;
    while (*pp && *pp != p)
        pp = &(*pp)->next;
    if (*pp)
        *pp = p->next;
    pxch_release(p);
}

/* Grow a buffer to hold n more bytes. */
static int buf_put(uint8_t **b, size_t *len, size_t *cap, const uint8_t *p, size_t n)
{
    if (n > *cap - *len) {
        size_t want = *cap ? *cap : 4096;
        while (want - *len < n)
            want *= 2;
        uint8_t *q = realloc(*b, want);
        if (!q)
            return AL_E_NOMEM;
        *b = q;
        *cap = want;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    return AL_OK;
}

/* End the channel from our side (the runner confirms; we forget it now). */
static void pxch_close(struct rl_pxch *p)
{
    struct rl_sbx *sb = p->sb;
    (void)ep_close(sb->ep, p->ch);
    pxch_free(p);
    relay_wake(sb->r, sb->conn);
}

/* Queued answer bytes into the channel's ring; EOF once all are in. */
static void flush_out(struct rl_pxch *p)
{
    struct rl_sbx *sb = p->sb;
    if (p->out_len) {
        long n = ep_write(sb->ep, p->ch, FR_STDIN, p->out, p->out_len);
        if (n < 0)
            return;
        memmove(p->out, p->out + n, p->out_len - (size_t)n);
        p->out_len -= (size_t)n;
        relay_wake(sb->r, sb->conn);
    }
    if (p->out_len)
        return;
    if (p->answer_done && !p->eof_sent) {
        p->eof_sent = 1;
        (void)ep_eof(sb->ep, p->ch, FR_STDIN);
        relay_wake(sb->r, sb->conn);
    }
}

/* Held agent bytes into the proxyconn, credit for what it took. */
static void feed(struct rl_pxch *p)
{
    struct rl_sbx *sb = p->sb;
    if (p->held_len) {
        size_t took = proxyconn_input(p->pc, p->held, p->held_len);
        memmove(p->held, p->held + took, p->held_len - took);
        p->held_len -= took;
        if (took) {
            (void)ep_consume(sb->ep, p->ch, FR_STDOUT, took);
            relay_wake(sb->r, sb->conn);
        }
    }
    if (!p->held_len && p->agent_eof && !p->eof_given) {
        p->eof_given = 1;
        proxyconn_input_end(p->pc);
    }
}

/* ---- the proxyconn's transport ------------------------------------------------ */

static int op_send(void *ud, const uint8_t *b, size_t n)
{
    struct rl_pxch *p = ud;
    struct rl_sbx *sb = p->sb;
    if (p->eof_sent)
        return -1;
    if (!p->out_len) {
        long took = ep_write(sb->ep, p->ch, FR_STDIN, b, n);
        if (took < 0)
            return -1;
        b += took;
        n -= (size_t)took;
        relay_wake(sb->r, sb->conn);
    }
    if (n && buf_put(&p->out, &p->out_len, &p->out_cap, b, n) != AL_OK)
        return -1;
    if (p->out_len || ep_writable(sb->ep, p->ch, FR_STDIN) == 0) {
        p->out_full = 1;
        return 1;
    }
    return 0;
}

static void op_close(void *ud)
{
    struct rl_pxch *p = ud;
    p->answer_done = 1;
    flush_out(p);
}

static void op_input_ready(void *ud)
{
    feed(ud);
}

static const struct proxyconn_ops pxch_ops = {op_send, op_close, op_input_ready};

/* ---- the endpoint's events ------------------------------------------------------ */

static void relay_proxychan_open(struct rl_sbx *sb, uint32_t ch)
{
    struct relay *r = sb->r;
    if (!r->cfg.proxy) { /* cannot happen: the endpoint refuses for us */
        (void)ep_proxy_refuse(sb->ep, ch, FR_ERR_FORBIDDEN, "airlockd has no upstream");
        return;
    }
    struct rl_pxch *p = calloc(1, sizeof *p);
    if (!p) {
        (void)ep_proxy_refuse(sb->ep, ch, FR_ERR_INTERNAL, "out of memory");
        return;
    }
    p->sb = sb;
    p->ch = ch;
    p->resume_at = ep_writable(sb->ep, ch, FR_STDIN) / 2; /* the ring is empty now */
    p->idle_us = relay_now_us();
    p->scope.p = r->cfg.proxy;
    (void)snprintf(p->scope.sandbox, sizeof p->scope.sandbox, "%s", sb->id);
    if (proxy_conn_in(&p->scope, &pxch_ops, p, &p->pc) != AL_OK) {
        free(p);
        (void)ep_proxy_refuse(sb->ep, ch, FR_ERR_INTERNAL, "cannot serve the proxy now");
        return;
    }
    char source[PROXYCONN_SOURCE_MAX + 1];
    (void)snprintf(source, sizeof source, "sandbox %s", sb->id);
    proxyconn_set_source(p->pc, source);
    p->next = sb->pxchs;
    sb->pxchs = p;
    relay_log(r, 2, "sandbox %s: proxy channel %u opened", sb->id, (unsigned)ch);
    relay_wake(r, sb->conn);
}

void relay_proxychan_event(struct rl_sbx *sb, const struct ep_event *ev)
{
    struct rl_pxch *p = find(sb, ev->channel);
    if (ev->type == EP_EV_PROXY_OPEN) {
        relay_proxychan_open(sb, ev->channel);
        return;
    }
    if (!p)
        return;
    switch (ev->type) {
    case EP_EV_DATA:
        if (ev->stream != FR_STDOUT)
            return;
        if (!p->held_len) {
            size_t took = proxyconn_input(p->pc, ev->data, ev->len);
            if (took)
                (void)ep_consume(sb->ep, p->ch, FR_STDOUT, took);
            if (took < ev->len && buf_put(&p->held, &p->held_len, &p->held_cap, ev->data + took,
                                          ev->len - took) != AL_OK)
                pxch_close(p);
        } else if (buf_put(&p->held, &p->held_len, &p->held_cap, ev->data, ev->len) != AL_OK) {
            pxch_close(p);
        }
        relay_wake(sb->r, sb->conn);
        return;
    case EP_EV_EOF:
        if (ev->stream == FR_STDOUT) {
            p->agent_eof = 1;
            feed(p);
        }
        return;
    case EP_EV_WRITABLE:
        if (ev->stream != FR_STDIN)
            return;
        flush_out(p);
        /* the upstream is resumed once half the ring is free, not at each
         * ACK (a quarter window): each resume costs libcurl a pause and a
         * resume of its socket */
        if (!p->out_len && p->out_full && !p->answer_done &&
            ep_writable(sb->ep, p->ch, FR_STDIN) >= p->resume_at) {
            p->out_full = 0;
            proxyconn_writable(p->pc);
        }
        return;
    case EP_EV_CLOSED: /* the runner closed it, or the link dropped */
        pxch_free(p);
        return;
    default:
        return;
    }
}

void relay_proxychan_tick(struct rl_sbx *sb, uint64_t now)
{
    struct rl_pxch *p = sb->pxchs;
    while (p) {
        struct rl_pxch *next = p->next;
        if (proxyconn_busy(p->pc) || p->answer_done)
            p->idle_us = now;
        else if (now - p->idle_us >= (uint64_t)PROXYSRV_HEAD_TIMEOUT_MS * 1000u)
            pxch_close(p); /* no request head in time */
        p = next;
    }
}

void relay_proxychan_free_all(struct rl_sbx *sb)
{
    while (sb->pxchs) {
        struct rl_pxch *p = sb->pxchs;
        sb->pxchs = p->next;
        pxch_release(p);
    }
}

uint64_t relay_proxychan_deadline(const struct rl_sbx *sb)
{
    uint64_t d = UINT64_MAX;
    for (const struct rl_pxch *p = sb->pxchs; p; p = p->next) {
        uint64_t due = p->idle_us + (uint64_t)PROXYSRV_HEAD_TIMEOUT_MS * 1000u;
        if (!proxyconn_busy(p->pc) && !p->answer_done && due < d)
            d = due;
    }
    return d;
}
