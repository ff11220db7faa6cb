/*
 * endpoint: the airlock.v1 state machine (see endpoint.h, docs/protocol.md),
 * this file for the endpoint itself and its link: creation and the config,
 * ep_link_up/ep_link_down (what a link's end does to every channel),
 * HELLO's state, the timers (ping, idle timeout, token deadline), fatal
 * errors (ERROR, then the close that goes with its code, from one table),
 * the queue of ERRORs to send, the log hook and the event callback.
 *
 * Not here: the channels and their states (endpoint_chan.c), streams and
 * credit (endpoint_stream.c), the frames in and out (endpoint_input.c,
 * endpoint_output.c), the application's calls about a channel
 * (endpoint_host.c, endpoint_ctl.c). endpoint_int.h has the data model.
 */
#include "endpoint.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint_int.h"

void ep_emit(struct ep *ep, struct ep_event *ev)
{
    if (!ep->cfg.on_event)
        return;
    ep->in_callback++;
    ep->cfg.on_event(ep->cfg.ud, ev);
    ep->in_callback--;
}

void ep_log(const struct ep *ep, int level, const char *fmt, ...)
{
    if (!ep->cfg.on_log)
        return;
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ep->cfg.on_log(ep->cfg.ud, level, line);
}

void ep_queue_error(struct ep *ep, uint32_t channel, uint16_t code, const char *msg)
{
    if (ep->nerrs >= AL_MAX_PENDING_ERRORS)
        return; /* the oldest ones already say what went wrong */
    struct errq *e = &ep->errs[ep->nerrs++];
    e->channel = channel;
    e->code = code;
    (void)snprintf(e->msg, sizeof e->msg, "%s", msg);
}

/* The fatal ERROR codes and the WebSocket close each one is followed by
 * (docs/protocol.md §10); every other code is not fatal. */
static const struct {
    uint16_t error;
    uint16_t close;
} fatal_close[] = {
    {FR_ERR_PROTOCOL, AL_CLOSE_PROTOCOL},
    {FR_ERR_VERSION, AL_CLOSE_VERSION},
    {FR_ERR_UNKNOWN_TYPE, AL_CLOSE_PROTOCOL},
    {FR_ERR_TOO_BIG, AL_CLOSE_LIMIT},
    {FR_ERR_TOKEN_EXPIRED, AL_CLOSE_TOKEN_EXPIRED},
    {FR_ERR_INTERNAL, AL_CLOSE_INTERNAL},
    {FR_ERR_TIMEOUT, AL_CLOSE_IDLE},
};

int ep_close_code_of(uint16_t error_code)
{
    for (size_t i = 0; i < sizeof fatal_close / sizeof fatal_close[0]; i++)
        if (fatal_close[i].error == error_code)
            return fatal_close[i].close;
    return 0;
}

/* A fatal error (code is one of fatal_close): say why, then close. */
int ep_failf(struct ep *ep, int err, uint16_t code, const char *fmt, ...)
{
    if (ep->closing)
        return err;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(ep->close_reason, sizeof ep->close_reason, fmt, ap);
    va_end(ap);
    ep_queue_error(ep, 0, code, ep->close_reason);
    ep->closing = 1;
    ep->close_code = ep_close_code_of(code);
    return err;
}

int ep_fail(struct ep *ep, uint16_t code, const char *msg)
{
    if (!ep_close_code_of(code))
        return AL_E_INVAL;
    if (!ep->up)
        return AL_E_CLOSED;
    ep_failf(ep, AL_OK, code, "%s", msg ? msg : ""); /* closing already: that close stands */
    return AL_OK;
}

int ep_fail_proto(struct ep *ep, const char *what, const struct fr_frame *f)
{
    return ep_failf(ep, AL_E_PROTO, FR_ERR_PROTOCOL, "%s (%s on channel %u)", what,
                    fr_type_name(f->type), (unsigned)f->channel);
}

/* DATA, EOF or GAP on a stream we do not receive, ACK on one we do not send. */
int ep_fail_stream(struct ep *ep, const struct fr_frame *f)
{
    char what[48];
    (void)snprintf(what, sizeof what, "%s on a stream we do not %s", fr_type_name(f->type),
                   f->type == FR_ACK ? "send" : "receive");
    return ep_fail_proto(ep, what, f);
}

void ep_config_default(struct ep_config *c, enum fr_role role)
{
    memset(c, 0, sizeof *c);
    c->role = role;
    c->name = role == FR_ROLE_HOST ? "host" : "controller";
    c->tx_ring = EP_DEFAULT_TX_RING;
    c->window = EP_DEFAULT_WINDOW;
    c->ping_interval_us = EP_DEFAULT_PING_US;
    c->idle_timeout_us = EP_DEFAULT_IDLE_US;
}

int ep_new(const struct ep_config *c, struct ep **out)
{
    if (c->role != FR_ROLE_HOST && c->role != FR_ROLE_CONTROLLER)
        return AL_E_INVAL;
    if (c->window < EP_MIN_WINDOW || c->tx_ring < c->window || c->tx_ring > (1u << 30))
        return AL_E_INVAL;
    struct ep *ep = calloc(1, sizeof *ep);
    if (!ep)
        return AL_E_NOMEM;
    ep->cfg = *c;
    (void)snprintf(ep->name, sizeof ep->name, "%s", c->name ? c->name : "");
    ep->cfg.name = ep->name;
    ep->next_id = 1;
    ep->scratch = malloc(sizeof *ep->scratch);
    if (!ep->scratch) {
        free(ep);
        return AL_E_NOMEM;
    }
    *out = ep;
    return AL_OK;
}

int ep_new_with(enum fr_role role, const char *name, size_t tx_ring, uint32_t window,
                ep_event_fn *on_event, void *ud, struct ep **out)
{
    struct ep_config c;
    ep_config_default(&c, role);
    c.name = name;
    if (tx_ring)
        c.tx_ring = tx_ring;
    if (window)
        c.window = window;
    c.on_event = on_event;
    c.ud = ud;
    return ep_new(&c, out);
}

void ep_free(struct ep *ep)
{
    if (!ep)
        return;
    for (unsigned i = 0; i < ep->nch; i++)
        ep_chan_free(ep->ch[i]);
    free(ep->scratch);
    free(ep);
}

void ep_link_up(struct ep *ep, uint64_t now_us)
{
    ep_link_down(ep);
    ep->up = 1;
    ep->proxy_at_due = ep->proxy_url[0] != '\0';
    ep->last_rx_us = now_us;
    ep->last_ping_us = now_us;
}

void ep_link_down(struct ep *ep)
{
    ep->up = 0;
    ep->hello_sent = ep->peer_hello = 0;
    ep->version = 0;
    ep->ping_due = ep->pong_due = 0;
    ep->list_due = ep->list_reply_due = 0;
    ep->token_len = 0;
    ep->token_deadline_us = 0;
    ep->closing = 0;
    ep->close_code = 0;
    ep->close_reason[0] = 0;
    ep->nerrs = 0;
    ep->proxy_at_due = 0;
    ep_proxy_drop_all(ep); /* proxy channels are not resumed */
    for (unsigned i = 0; i < ep->nch; i++) {
        struct chan *c = ep->ch[i];
        if (c->state == CH_LINKED)
            (void)ep_chan_set_state(ep, c, CH_DETACHED, "link down");
        if (c->exit == EX_REPORTED)
            (void)ep_chan_set_exit(ep, c, EX_EXITED, "link down");
        c->nsigs = 0; /* signals are at most once */
        c->in_stale = 0;
        /* ROLE, VIEWERS and TAKEOVER are about this link only */
        c->pending &= P_CLOSE | P_RESIZE | P_SNAPREQ;
        free(c->viewers);
        c->viewers = NULL;
        for (unsigned s = 0; s < FR_NSTREAMS; s++) {
            c->tx[s].sent = c->tx[s].acked;
            c->tx[s].eof_sent = 0;
            c->tx[s].gap_from = c->tx[s].gap_to = 0;
            c->tx[s].role_sent = 0;
        }
        /* a half-sent or half-received snapshot is worthless */
        ep_chan_snap_clear(&c->snap);
        ep_chan_snap_clear(&c->snap_next);
        if (ep_is_host(ep) &&
            c->state == CH_CLOSING) /* the next controller learns it from ATTACH */
            (void)ep_chan_set_state(ep, c, CH_DEAD, "link down while closing");
        if (ep_is_host(ep) &&
            c->state == CH_OPENING) /* never confirmed: the controller will re-OPEN */
            (void)ep_chan_set_state(ep, c, CH_DEAD, "link down before OPENED");
    }
    ep_chan_reap(ep);
}

/* Not our own HELLO: ep_output sends it before anything else, and the
 * peer's may come first. An OPEN queued in between waited for a link that
 * was never to come (the peer's HELLO had resumed the channels already). */
int ep_ready(const struct ep *ep)
{
    return ep->up && ep->peer_hello;
}

int ep_closing(const struct ep *ep, int *code, const char **reason)
{
    if (!ep->closing)
        return 0;
    if (code)
        *code = ep->close_code;
    if (reason)
        *reason = ep->close_reason;
    return 1;
}

/* Streams gone quiet. An outgoing one whose bytes are all acknowledged
 * gives its ring's memory back after EP_RING_IDLE_US (ring.h: taken again
 * at the next byte; nothing it held is ever sent again, a resume from below
 * the acknowledged offset is a GAP as when the ring has moved on). An
 * incoming one with bytes consumed but not acknowledged (less than the
 * quarter window that triggers an ACK) is acknowledged after
 * EP_ACK_SETTLE_US, so that its sender can do the same. */
static void settle_streams(struct ep *ep, uint64_t now_us)
{
    for (unsigned i = 0; i < ep->nch; i++) {
        struct chan *c = ep->ch[i];
        for (unsigned s = 0; c && s < FR_NSTREAMS; s++) {
            struct txs *t = &c->tx[s];
            if (t->appended) {
                t->appended = 0;
                t->quiet_us = now_us;
            } else if (t->ring.buf && t->acked == t->ring.end && t->sent == t->ring.end &&
                       now_us - t->quiet_us >= EP_RING_IDLE_US) {
                ring_free(&t->ring);
            }
            struct rxs *r = &c->rx[s];
            if (r->got) {
                r->got = 0;
                r->quiet_us = now_us;
            } else if (r->consumed > r->ack_sent && now_us - r->quiet_us >= EP_ACK_SETTLE_US) {
                r->settle = 1;
            }
        }
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* When settle_streams next has something to do; UINT64_MAX: nothing. A
 * stream that moved since the last tick is looked at one period after it
 * (not at once: a busy stream must not make every turn a tick). */
static uint64_t settle_deadline(const struct ep *ep)
{
    uint64_t d = UINT64_MAX;
    for (unsigned i = 0; i < ep->nch; i++) {
        const struct chan *c = ep->ch[i];
        for (unsigned s = 0; c && s < FR_NSTREAMS; s++) {
            const struct txs *t = &c->tx[s];
            if (t->appended)
                d = min_u64(d, ep->last_tick_us + EP_RING_IDLE_US);
            else if (t->ring.buf && t->acked == t->ring.end)
                d = min_u64(d, t->quiet_us + EP_RING_IDLE_US);
            const struct rxs *r = &c->rx[s];
            if (r->got)
                d = min_u64(d, ep->last_tick_us + EP_ACK_SETTLE_US);
            else if (!r->settle && r->consumed > r->ack_sent)
                d = min_u64(d, r->quiet_us + EP_ACK_SETTLE_US);
        }
    }
    return d;
}

void ep_tick(struct ep *ep, uint64_t now_us)
{
    if (!ep->up || ep->closing)
        return;
    settle_streams(ep, now_us);
    ep->last_tick_us = now_us;
    if (ep->token_deadline_us && now_us >= ep->token_deadline_us) {
        ep_failf(ep, AL_E_EXPIRED, FR_ERR_TOKEN_EXPIRED, "token expired and no fresh one arrived");
        return;
    }
    if (ep->cfg.idle_timeout_us && now_us - ep->last_rx_us >= ep->cfg.idle_timeout_us) {
        ep_failf(ep, AL_E_TIMEOUT, FR_ERR_TIMEOUT, "peer silent for %llu ms",
                 (unsigned long long)((now_us - ep->last_rx_us) / 1000));
        return;
    }
    if (ep->cfg.ping_interval_us && ep_ready(ep) &&
        now_us - ep->last_ping_us >= ep->cfg.ping_interval_us) {
        ep->last_ping_us = now_us;
        ep->ping_due = 1;
    }
}

void ep_set_timers(struct ep *ep, uint64_t ping_interval_us, uint64_t idle_timeout_us)
{
    ep->cfg.ping_interval_us = ping_interval_us;
    ep->cfg.idle_timeout_us = idle_timeout_us;
}

int ep_ping(struct ep *ep)
{
    if (!ep_ready(ep))
        return AL_E_STATE;
    ep->ping_due = 1;
    return AL_OK;
}

uint64_t ep_next_deadline(const struct ep *ep)
{
    uint64_t t = UINT64_MAX;
    if (!ep->up || ep->closing)
        return t;
    if (ep->token_deadline_us)
        t = ep->token_deadline_us;
    if (ep->cfg.idle_timeout_us && ep->last_rx_us + ep->cfg.idle_timeout_us < t)
        t = ep->last_rx_us + ep->cfg.idle_timeout_us;
    if (ep->cfg.ping_interval_us && ep->last_ping_us + ep->cfg.ping_interval_us < t)
        t = ep->last_ping_us + ep->cfg.ping_interval_us;
    return min_u64(t, settle_deadline(ep));
}

int ep_send_error(struct ep *ep, uint32_t ch, uint16_t code, const char *msg)
{
    if (code == 0 || !msg)
        return AL_E_INVAL;
    if (ep->nerrs >= AL_MAX_PENDING_ERRORS)
        return AL_E_LIMIT;
    ep_queue_error(ep, ch, code, msg);
    return AL_OK;
}

void ep_set_token_deadline(struct ep *ep, uint64_t deadline_us)
{
    ep->token_deadline_us = deadline_us;
}
