/*
 * endpoint_input: ep_input(), one received frame at a time: decoding, the
 * checks every type gets, and the dispatch to its handler.
 *
 * Which frame types the peer's role may send, which of them need a channel
 * linked on this link (with the words of the error when it is not), and
 * the answer to a frame for an unknown channel (NO_CHANNEL from a host,
 * dropped when it may race a CLOSE, else a protocol error) come from
 * frame.c's table of types (fr_type_info); the handlers check the rest,
 * and refuse what does not fit the channel's state before they move it.
 *
 * Not here: the stream frames' checks (DATA, ACK, EOF, GAP:
 * endpoint_stream.c), the states and their moves (endpoint_chan.c).
 */
#include "endpoint_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_hello(struct ep *ep, const struct fr_frame *f)
{
    if (ep->peer_hello)
        return ep_fail_proto(ep, "second HELLO", f);
    uint16_t lo = f->u.hello.version_min, hi = f->u.hello.version_max;
    if (lo > AL_PROTO_VERSION || hi < AL_PROTO_VERSION)
        return ep_failf(ep, AL_E_VERSION, FR_ERR_VERSION,
                        "no common version: peer speaks %u..%u, we speak %u", lo, hi,
                        AL_PROTO_VERSION);
    if (f->u.hello.role == ep->cfg.role)
        return ep_failf(ep, AL_E_PROTO, FR_ERR_PROTOCOL, "both sides claim the %s role",
                        ep_is_host(ep) ? "host" : "controller");
    ep->peer_hello = 1;
    ep->version = AL_PROTO_VERSION;
    ep->peer_max_frame = f->u.hello.max_frame;
    if (!ep_is_host(ep)) {
        /* resume every channel the controller knows */
        for (unsigned i = 0; i < ep->nch; i++) {
            struct chan *c = ep->ch[i];
            if (c->mode == FR_MODE_PROXY || c->state == CH_DEAD)
                continue; /* proxy channels are not resumed */
            if (c->state == CH_CLOSING)
                c->pending |= P_CLOSE;
            else if (c->state == CH_NEW)
                c->pending |= P_OPEN;
            else
                c->pending |= P_ATTACH;
        }
    }
    struct ep_event ev = {.type = EP_EV_READY, .version = ep->version};
    ep_emit(ep, &ev);
    return AL_OK;
}

static int on_open(struct ep *ep, const struct fr_frame *f)
{
    if (ep_chan_find(ep, f->channel)) {
        ep_queue_error(ep, f->channel, FR_ERR_CHANNEL_EXISTS, "channel already open");
        return AL_OK;
    }
    struct chan *c = ep_chan_new(ep, f->channel, f->u.open.mode);
    if (!c) {
        ep_queue_error(ep, f->channel, FR_ERR_LIMIT, "too many channels");
        return AL_OK;
    }
    (void)ep_chan_set_state(ep, c, CH_OPENING, "OPEN received");
    c->cols = f->u.open.cols;
    c->rows = f->u.open.rows;
    struct ep_event ev = {.type = EP_EV_OPEN, .channel = f->channel, .open = &f->u.open};
    ep_emit(ep, &ev);
    return AL_OK;
}

static int on_attach(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (c->state == CH_OPENING) /* the app has not answered the OPEN yet */
        return ep_fail_proto(ep, "ATTACH before OPENED", f);
    if (ep_stream_resume(&c->tx[FR_STDOUT], f->u.attach.out_next, f->u.attach.out_limit, 0) ||
        ep_stream_resume(&c->tx[FR_STDERR], f->u.attach.err_next, f->u.attach.err_limit, 0))
        return ep_fail_proto(ep, "ATTACH beyond the end of the stream", f);
    (void)ep_chan_set_state(ep, c, CH_LINKED, "ATTACH received");
    ep_stream_grant_stdin(ep, c);
    c->pending |= P_ATTACHED;
    if (f->u.attach.cols && (f->u.attach.cols != c->cols || f->u.attach.rows != c->rows)) {
        c->cols = f->u.attach.cols;
        c->rows = f->u.attach.rows;
        struct ep_event ev = {
            .type = EP_EV_RESIZE, .channel = c->id, .cols = c->cols, .rows = c->rows};
        ep_emit(ep, &ev);
    }
    return AL_OK;
}

static int on_attached(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (c->state == CH_LINKED || c->state == CH_CLOSING)
        return ep_fail_proto(ep, "unexpected ATTACHED", f);
    /* in_next beyond what we wrote: we restarted, or (relay session) another
     * writer typed in between; either way stdin goes on there */
    (void)ep_stream_resume(&c->tx[FR_STDIN], f->u.attached.in_next, f->u.attached.in_limit, 1);
    (void)ep_chan_set_state(ep, c, CH_LINKED, "ATTACHED received");
    c->held = 1;
    struct ep_event ev = {.type = EP_EV_ATTACHED, .channel = c->id, .state = f->u.attached.state};
    ep_emit(ep, &ev);
    return AL_OK;
}

static int on_exit_frame(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (f->u.exit.out_end != c->rx[FR_STDOUT].next || f->u.exit.err_end != c->rx[FR_STDERR].next)
        return ep_fail_proto(ep, "EXIT before all output", f);
    if (c->exit != EX_RUNNING)
        return AL_OK; /* resent after a resume */
    (void)ep_chan_set_exit(ep, c, EX_EXITED, "EXIT received");
    c->exit_code = f->u.exit.code;
    c->exit_sig = f->u.exit.signo;
    c->exit_core = f->u.exit.core;
    struct ep_event ev = {.type = EP_EV_EXIT,
                          .channel = c->id,
                          .exit_code = f->u.exit.code,
                          .signo = f->u.exit.signo,
                          .core = f->u.exit.core};
    ep_emit(ep, &ev);
    return AL_OK;
}

static int on_snapshot(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    const struct fr_bytes *b = &f->u.snapshot.bytes;
    struct snap *sn = &c->snap;
    if (!sn->active) {
        sn->active = 1;
        sn->off = f->u.snapshot.offset;
        sn->cols = f->u.snapshot.cols;
        sn->rows = f->u.snapshot.rows;
    } else if (sn->off != f->u.snapshot.offset || sn->cols != f->u.snapshot.cols ||
               sn->rows != f->u.snapshot.rows) {
        return ep_fail_proto(ep, "SNAPSHOT chunks disagree", f);
    }
    if (b->len > AL_MAX_SNAPSHOT - sn->len)
        return ep_failf(ep, AL_E_TOOBIG, FR_ERR_TOO_BIG, "snapshot larger than %u bytes",
                        (unsigned)AL_MAX_SNAPSHOT);
    if (b->len) {
        uint8_t *p = realloc(sn->p, sn->len + b->len);
        if (!p)
            return ep_failf(ep, AL_E_NOMEM, FR_ERR_INTERNAL, "out of memory");
        memcpy(p + sn->len, b->p, b->len);
        sn->p = p;
        sn->len += b->len;
    }
    if (f->flags & FR_SNAPSHOT_MORE)
        return AL_OK;
    c->pending &= ~(uint32_t)P_SNAPREQ;
    struct ep_event ev = {.type = EP_EV_SNAPSHOT,
                          .channel = c->id,
                          .data = sn->p,
                          .len = sn->len,
                          .offset = sn->off,
                          .cols = sn->cols,
                          .rows = sn->rows};
    ep_emit(ep, &ev);
    ep_chan_snap_clear(sn);
    return AL_OK;
}

/* Controller: the host (a relay) says whether we write, and where stdin
 * goes on. Unsent input was typed under the old role: it is dropped. */
static int on_role(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    struct txs *t = &c->tx[FR_STDIN];
    uint64_t next = f->u.role.in_next;
    size_t before = ep_writable(ep, c->id, FR_STDIN);
    t->ring.end = t->sent; /* drop [sent, end): base <= sent <= end holds */
    if (next > t->ring.end || next < t->ring.base) {
        ring_reset(&t->ring, next);
        t->role_sent = 0;
    } else {
        /* [next, end) went out under the old role: sent again from next,
         * and the host may still acknowledge it */
        t->role_sent = t->ring.end;
    }
    t->sent = t->acked = next;
    t->limit = f->u.role.in_limit;
    t->gap_from = t->gap_to = 0;
    t->eof_sent = 0;
    struct ep_event ev = {.type = EP_EV_ROLE,
                          .channel = c->id,
                          .state = f->u.role.role,
                          .offset = next,
                          .to = f->u.role.in_limit};
    ep_emit(ep, &ev);
    if (ep_writable(ep, c->id, FR_STDIN) > before) {
        struct ep_event w = {.type = EP_EV_WRITABLE, .channel = c->id, .stream = FR_STDIN};
        ep_emit(ep, &w);
    }
    return AL_OK;
}

static int on_error(struct ep *ep, const struct fr_frame *f)
{
    struct chan *c = f->channel ? ep_chan_find(ep, f->channel) : NULL;
    if (c && c->mode == FR_MODE_PROXY)
        return ep_proxy_on_error(ep, c, f);
    if (c && !ep_is_host(ep) && f->u.error.code == FR_ERR_NO_CHANNEL) {
        if (ep_chan_is_opening(c)) {
            c->pending |= P_OPEN; /* the OPEN was lost with the last link */
            return AL_OK;
        }
        struct ep_event ev = {.type = c->state == CH_CLOSING ? EP_EV_CLOSED : EP_EV_LOST,
                              .channel = c->id};
        ep_emit(ep, &ev);
        ep_chan_kill(ep, c, "NO_CHANNEL received");
        return AL_OK;
    }
    if (c && !ep_is_host(ep) && ep_chan_is_opening(c) &&
        (f->u.error.code == FR_ERR_OPEN_FAILED || f->u.error.code == FR_ERR_LIMIT ||
         f->u.error.code == FR_ERR_CHANNEL_EXISTS)) {
        struct ep_event ev = {.type = EP_EV_ERROR,
                              .channel = c->id,
                              .code = f->u.error.code,
                              .data = (const uint8_t *)f->u.error.msg.p,
                              .len = f->u.error.msg.len};
        ep_emit(ep, &ev);
        struct ep_event cl = {.type = EP_EV_CLOSED, .channel = c->id};
        ep_emit(ep, &cl);
        ep_chan_kill(ep, c, "OPEN refused");
        return AL_OK;
    }
    struct ep_event ev = {.type = EP_EV_ERROR,
                          .channel = f->channel,
                          .code = f->u.error.code,
                          .data = (const uint8_t *)f->u.error.msg.p,
                          .len = f->u.error.msg.len};
    ep_emit(ep, &ev);
    return AL_OK;
}

/* Whether the peer's role may send a frame type (frame.c's table). */
static int allowed(const struct ep *ep, const struct fr_typeinfo *t)
{
    return (t->senders & FR_BY(ep_is_host(ep) ? FR_ROLE_CONTROLLER : FR_ROLE_HOST)) != 0;
}

/* A frame that needs a linked channel came for one not linked on this
 * link: say what should have come first (for a stream frame, that it is
 * about a stream we do not have). */
static int fail_unlinked(struct ep *ep, const struct fr_typeinfo *t, const struct fr_frame *f)
{
    if (t->props & FR_T_STREAM)
        return ep_fail_stream(ep, f);
    char what[48];
    int relay = (t->props & FR_T_RELAY) != 0;
    (void)snprintf(what, sizeof what, "%s before %s", t->name,
                   ep_is_host(ep) ? (relay ? "ATTACH" : "OPEN/ATTACH")
                                  : (relay ? "ATTACHED" : "OPENED/ATTACHED"));
    return ep_fail_proto(ep, what, f);
}

static int dispatch_chan(struct ep *ep, struct chan *c, const struct fr_typeinfo *t,
                         const struct fr_frame *f)
{
    if (c->mode == FR_MODE_PROXY && !(t->props & FR_T_PROXY))
        return ep_fail_proto(ep, "frame not for a proxy channel", f);
    if ((t->props & FR_T_LINKED) && !ep_chan_linked(ep, c))
        return fail_unlinked(ep, t, f);
    switch (f->type) {
    case FR_OPENED:
        if (!ep_chan_is_opening(c))
            return ep_fail_proto(ep, "unexpected OPENED", f);
        (void)ep_chan_set_state(ep, c, CH_LINKED, "OPENED received");
        c->pid = f->u.opened.pid;
        c->held = 1;
        /* a new channel starts with no credit: grant it afresh, even if an
         * ATTACH refused by the host claimed to */
        for (unsigned st = FR_STDOUT; st <= FR_STDERR; st++) {
            c->rx[st].ack_sent = c->rx[st].consumed;
            c->rx[st].limit_sent = 0;
        }
        {
            struct ep_event ev = {.type = EP_EV_OPENED, .channel = c->id, .pid = c->pid};
            ep_emit(ep, &ev);
        }
        return AL_OK;
    case FR_ATTACH:
        return on_attach(ep, c, f);
    case FR_ATTACHED:
        return on_attached(ep, c, f);
    case FR_DATA:
        return ep_stream_on_data(ep, c, f);
    case FR_ACK:
        return ep_stream_on_ack(ep, c, f);
    case FR_EOF:
        return ep_stream_on_eof(ep, c, f);
    case FR_GAP:
        return ep_stream_on_gap(ep, c, f);
    case FR_EXIT:
        return on_exit_frame(ep, c, f);
    case FR_SNAPSHOT:
        return on_snapshot(ep, c, f);
    case FR_RESIZE:
        c->cols = f->u.resize.cols;
        c->rows = f->u.resize.rows;
        {
            struct ep_event ev = {
                .type = EP_EV_RESIZE, .channel = c->id, .cols = c->cols, .rows = c->rows};
            ep_emit(ep, &ev);
        }
        return AL_OK;
    case FR_SIGNAL: {
        struct ep_event ev = {.type = EP_EV_SIGNAL,
                              .channel = c->id,
                              .signo = f->u.signal.signo,
                              .scope = f->u.signal.scope};
        ep_emit(ep, &ev);
        return AL_OK;
    }
    case FR_SNAPSHOT_REQ: {
        struct ep_event ev = {.type = EP_EV_SNAPSHOT_REQ, .channel = c->id};
        ep_emit(ep, &ev);
        return AL_OK;
    }
    case FR_TAKEOVER: {
        struct ep_event ev = {.type = EP_EV_TAKEOVER, .channel = c->id};
        ep_emit(ep, &ev);
        return AL_OK;
    }
    case FR_ROLE:
        return on_role(ep, c, f);
    case FR_VIEWERS: {
        struct ep_event ev = {.type = EP_EV_VIEWERS, .channel = c->id, .list = f};
        ep_emit(ep, &ev);
        return AL_OK;
    }
    case FR_CLOSE: {
        struct ep_event ev = {.type = EP_EV_CLOSED, .channel = c->id};
        if (c->mode == FR_MODE_PROXY)
            return ep_proxy_on_close(ep, c);
        if (ep_is_host(ep)) {
            /* the controller asks: stop it, forget it, confirm */
            ep_emit(ep, &ev);
            (void)ep_chan_set_state(ep, c, CH_CLOSING, "CLOSE received");
            c->pending = P_CLOSE;
        } else {
            /* the host closed it, or confirms our CLOSE */
            ep_emit(ep, &ev);
            ep_chan_kill(ep, c, "CLOSE received");
        }
        return AL_OK;
    }
    default:
        return ep_fail_proto(ep, "unexpected frame", f);
    }
}

/* Host: an ATTACH for a channel we do not hold; the application may adopt
 * it (ep_host_adopt) in the callback. Returns the channel, or NULL. */
static struct chan *offer_attach(struct ep *ep, const struct fr_frame *f)
{
    struct ep_event ev = {.type = EP_EV_ATTACH,
                          .channel = f->channel,
                          .offset = f->u.attach.out_next,
                          .to = f->u.attach.err_next,
                          .cols = f->u.attach.cols,
                          .rows = f->u.attach.rows,
                          .resume = (uint8_t)(f->flags & FR_ATTACH_RESUME)};
    ep->attach_ch = f->channel;
    ep_emit(ep, &ev);
    ep->attach_ch = 0;
    return ep_chan_find(ep, f->channel);
}

int ep_input(struct ep *ep, const uint8_t *msg, size_t len, uint64_t now_us)
{
    if (!ep->up || ep->closing)
        return AL_E_CLOSED;
    ep->last_rx_us = now_us;
    struct fr_frame *f = ep->scratch;
    int rc = fr_decode(msg, len, f);
    if (rc == AL_E_TYPE) {
        rc = ep_failf(ep, rc, FR_ERR_UNKNOWN_TYPE, "unknown frame type 0x%02x", len ? msg[0] : 0);
    } else if (rc == AL_E_TOOBIG) {
        rc = ep_failf(ep, rc, FR_ERR_TOO_BIG, "frame larger than %u bytes", (unsigned)AL_MAX_FRAME);
    } else if (rc < 0) {
        rc =
            ep_failf(ep, rc, FR_ERR_PROTOCOL, "malformed %s frame", fr_type_name(len ? msg[0] : 0));
    } else if (!ep->peer_hello && f->type != FR_HELLO) {
        rc = ep_fail_proto(ep, "frame before HELLO", f);
    } else if (!allowed(ep, fr_type_info(f->type))) {
        rc = ep_fail_proto(
            ep, ep_is_host(ep) ? "frame only a host may send" : "frame only a controller may send",
            f);
    } else if (fr_type_info(f->type)->props & FR_T_PROBE) {
        rc = ep_fail_proto(ep, "a probe frame outside a probe session", f);
    } else {
        switch (f->type) {
        case FR_HELLO:
            rc = on_hello(ep, f);
            break;
        case FR_PING:
            ep->pong_due = 1;
            ep->pong_ts = f->u.ping.ts_us;
            break;
        case FR_PONG: {
            struct ep_event ev = {.type = EP_EV_PONG,
                                  .rtt_us =
                                      now_us >= f->u.ping.ts_us ? now_us - f->u.ping.ts_us : 0};
            ep_emit(ep, &ev);
            break;
        }
        case FR_TOKEN: {
            struct ep_event ev = {.type = EP_EV_TOKEN, .data = f->u.token.p, .len = f->u.token.len};
            ep_emit(ep, &ev);
            break;
        }
        case FR_ERROR:
            rc = on_error(ep, f);
            break;
        case FR_LIST:
            ep->list_reply_due = 1;
            break;
        case FR_LIST_REPLY: {
            struct ep_event ev = {.type = EP_EV_LIST, .list = f};
            ep_emit(ep, &ev);
            break;
        }
        case FR_OPEN:
            rc = on_open(ep, f);
            break;
        case FR_PROXY_AT: {
            struct ep_event ev = {.type = EP_EV_PROXY_AT,
                                  .data = (const uint8_t *)f->u.proxy_at.p,
                                  .len = f->u.proxy_at.len};
            ep_emit(ep, &ev);
            break;
        }
        case FR_PROXY_OPEN:
            rc = ep_proxy_on_open(ep, f);
            break;
        default: {
            const struct fr_typeinfo *t = fr_type_info(f->type);
            struct chan *c = ep_chan_find(ep, f->channel);
            if (!c && ep_is_host(ep) && f->type == FR_ATTACH) {
                c = offer_attach(ep, f);
                if (!ep->up || ep->closing)
                    break; /* the application dropped the link */
            }
            if (!c) {
                if (ep_is_host(ep) && (t->props & FR_T_NO_CHANNEL) &&
                    !fr_is_proxy_channel(f->channel))
                    ep_queue_error(ep, f->channel, FR_ERR_NO_CHANNEL, "no such channel");
                else if (!(t->props & FR_T_LATE))
                    rc = ep_fail_proto(ep, "frame for an unknown channel", f);
                /* ACK/DATA/EOF racing a close are dropped (and a controller
                 * drops CLOSE); a host answers a CLOSE it cannot match (its
                 * confirmation was lost) with NO_CHANNEL, which the
                 * controller takes as the answer */
            } else if (c->state == CH_CLOSING && f->type != FR_CLOSE) {
                /* in flight before our CLOSE: ignore */
            } else {
                rc = dispatch_chan(ep, c, t, f);
            }
            break;
        }
        }
    }
    ep_chan_reap(ep);
    return rc;
}
