/*
 * endpoint_output: ep_output(), the next frame to send, derived from state
 * (pending bits, offsets, queued ERRORs), never from a queue of encoded
 * frames. Order: HELLO, ERRORs, then (once the peer's HELLO came) PONG,
 * PROXY_AT, PING, TOKEN, LIST, LIST_REPLY, then the channels round robin so that
 * one flood cannot starve the others; per channel: CLOSE, PROXY_OPEN, OPEN, ATTACH,
 * OPENED, ATTACHED, then on a linked channel RESIZE, SIGNAL, SNAPSHOT_REQ,
 * TAKEOVER, ROLE, VIEWERS, ACKs, the outgoing streams, EXIT.
 *
 * Snapshots (host): a snapshot at stdout offset X goes out once stdout has
 * been sent up to X (and any GAP before it), and no stdout beyond X goes
 * before its last chunk; so the receiver's next is X when it arrives. A
 * snapshot queued while another is half sent waits in snap_next.
 *
 * Not here: what makes a frame due (the input and the application calls).
 */
#include "endpoint_int.h"

#include <stdlib.h>
#include <string.h>

static long put(const struct fr_frame *f, uint8_t *buf, size_t cap)
{
    return fr_encode(f, buf, cap);
}

/* Host: the next chunk of the outgoing snapshot. */
static long out_snap(const struct ep *ep, struct chan *c, struct fr_frame *f, uint8_t *buf,
                     size_t cap)
{
    struct snap *sn = &c->snap;
    size_t max = AL_MAX_PAYLOAD - 12;
    if (ep->peer_max_frame - AL_FRAME_HEADER - 12 < max)
        max = ep->peer_max_frame - AL_FRAME_HEADER - 12;
    size_t n = sn->len - sn->pos < max ? sn->len - sn->pos : max;
    f->type = FR_SNAPSHOT;
    f->flags = sn->pos + n < sn->len ? FR_SNAPSHOT_MORE : 0;
    f->u.snapshot.offset = sn->off;
    f->u.snapshot.cols = sn->cols;
    f->u.snapshot.rows = sn->rows;
    f->u.snapshot.bytes.p = sn->p ? sn->p + sn->pos : NULL;
    f->u.snapshot.bytes.len = n;
    sn->pos += n;
    long rc = put(f, buf, cap);
    if (sn->pos >= sn->len) {
        ep_chan_snap_clear(sn);
        *sn = c->snap_next; /* the one queued meanwhile, if any */
        memset(&c->snap_next, 0, sizeof c->snap_next);
    }
    return rc;
}

/*
 * A channel's next frame, in the order of the preamble: one function per
 * group. Each returns the frame's length, 0 when it has nothing to send
 * (an encoded frame is never empty), or AL_E_*; f has its header zeroed
 * and its channel set.
 */

/* What opens or re-attaches the channel: OPEN, ATTACH, OPENED, ATTACHED. */
static long out_setup(struct ep *ep, struct chan *c, struct fr_frame *f, uint8_t *buf, size_t cap)
{
    if (c->pending & P_PROXY_OPEN) {
        c->pending &= ~(uint32_t)P_PROXY_OPEN;
        f->type = FR_PROXY_OPEN;
        return put(f, buf, cap);
    }
    if (c->pending & P_OPEN) {
        c->pending &= ~(uint32_t)(P_OPEN | P_ATTACH);
        if (c->state == CH_NEW)
            (void)ep_chan_set_state(ep, c, CH_OPENING, "OPEN sent");
        if (c->open_len > cap)
            return AL_E_TOOBIG;
        memcpy(buf, c->open_frame, c->open_len);
        return (long)c->open_len;
    }
    if (c->pending & P_ATTACH) {
        c->pending &= ~(uint32_t)P_ATTACH;
        ep_stream_grant(ep, &c->rx[FR_STDOUT]);
        ep_stream_grant(ep, &c->rx[FR_STDERR]);
        f->type = FR_ATTACH;
        f->flags = c->held ? FR_ATTACH_RESUME : 0;
        f->u.attach.out_next = c->rx[FR_STDOUT].next;
        f->u.attach.out_limit = c->rx[FR_STDOUT].limit_sent;
        f->u.attach.err_next = c->rx[FR_STDERR].next;
        f->u.attach.err_limit = c->rx[FR_STDERR].limit_sent;
        f->u.attach.cols = f->u.attach.rows = 0; /* only the header was zeroed */
        if (c->pending & P_RESIZE) {
            c->pending &= ~(uint32_t)P_RESIZE;
            f->u.attach.cols = c->cols;
            f->u.attach.rows = c->rows;
        }
        return put(f, buf, cap);
    }
    if (c->pending & P_OPENED) {
        c->pending &= ~(uint32_t)P_OPENED;
        f->type = FR_OPENED;
        f->u.opened.pid = c->pid;
        return put(f, buf, cap);
    }
    if (c->pending & P_ATTACHED) {
        c->pending &= ~(uint32_t)P_ATTACHED;
        f->type = FR_ATTACHED;
        f->u.attached.state = c->exit != EX_RUNNING ? FR_CH_EXITED : FR_CH_RUNNING;
        f->u.attached.in_next = c->rx[FR_STDIN].next;
        f->u.attached.in_limit = c->rx[FR_STDIN].limit_sent;
        return put(f, buf, cap);
    }
    return 0;
}

static long out_viewers(struct chan *c, struct fr_frame *f, uint8_t *buf, size_t cap)
{
    c->pending &= ~(uint32_t)P_VIEWERS;
    const struct vlist *v = c->viewers;
    if (!v)
        return AL_E_STATE; /* cannot happen: P_VIEWERS comes with a list */
    f->type = FR_VIEWERS;
    f->u.viewers.count = (uint16_t)v->count;
    for (unsigned i = 0; i < v->count; i++) {
        f->u.viewers.e[i].name.p = v->name[i];
        f->u.viewers.e[i].name.len = v->len[i];
        f->u.viewers.e[i].role = v->role[i];
    }
    long n = put(f, buf, cap);
    free(c->viewers);
    c->viewers = NULL;
    return n;
}

/* A linked channel's control frames: RESIZE, SIGNAL, SNAPSHOT_REQ,
 * TAKEOVER, ROLE, VIEWERS. */
static long out_control(struct chan *c, struct fr_frame *f, uint8_t *buf, size_t cap)
{
    if (c->pending & P_RESIZE) {
        c->pending &= ~(uint32_t)P_RESIZE;
        f->type = FR_RESIZE;
        f->u.resize.cols = c->cols;
        f->u.resize.rows = c->rows;
        return put(f, buf, cap);
    }
    if (c->nsigs) {
        f->type = FR_SIGNAL;
        f->u.signal.signo = c->sigs[0][0];
        f->u.signal.scope = c->sigs[0][1];
        memmove(c->sigs[0], c->sigs[1], (--c->nsigs) * sizeof c->sigs[0]);
        return put(f, buf, cap);
    }
    if (c->pending & P_SNAPREQ) {
        c->pending &= ~(uint32_t)P_SNAPREQ;
        f->type = FR_SNAPSHOT_REQ;
        return put(f, buf, cap);
    }
    if (c->pending & P_TAKEOVER) {
        c->pending &= ~(uint32_t)P_TAKEOVER;
        f->type = FR_TAKEOVER;
        return put(f, buf, cap);
    }
    if ((c->pending & P_ROLE) && ep_chan_is_open(c)) {
        const struct rxs *r = &c->rx[FR_STDIN];
        c->pending &= ~(uint32_t)P_ROLE;
        f->type = FR_ROLE;
        f->u.role.role = c->viewer ? FR_VIEWER : FR_WRITER;
        f->u.role.in_next = r->next;
        f->u.role.in_limit = r->limit_sent > r->next ? r->limit_sent : r->next;
        return put(f, buf, cap);
    }
    if ((c->pending & P_VIEWERS) && ep_chan_is_open(c))
        return out_viewers(c, f, buf, cap);
    return 0;
}

/* An acknowledgement, when a quarter window of credit can be returned, or
 * once a stream has gone quiet with bytes consumed and not acknowledged
 * (so that the sender may free its ring: EP_ACK_SETTLE_US). */
static long out_ack(const struct ep *ep, struct chan *c, struct fr_frame *f, uint8_t *buf,
                    size_t cap)
{
    for (unsigned s = 0; s < FR_NSTREAMS; s++) {
        struct rxs *r = &c->rx[s];
        if (ep_is_tx(ep, s) || !ep_stream_used(c, s) || r->eof)
            continue;
        if (s == FR_STDIN && c->viewer)
            continue; /* a relay viewer never gets stdin credit */
        uint32_t window = ep->cfg.window;
        if (c->mode == FR_MODE_PROXY && window > EP_PROXY_WINDOW)
            window = EP_PROXY_WINDOW; /* within the peer's proxy ring: §5a */
        uint64_t limit = r->consumed + window;
        int settle = r->settle && r->consumed > r->ack_sent;
        if (settle || (limit - r->limit_sent >= window / 4 && limit > r->limit_sent)) {
            r->settle = 0;
            r->ack_sent = r->consumed;
            if (limit < r->limit_sent)
                limit = r->limit_sent; /* a limit never goes back */
            r->limit_sent = limit;
            f->type = FR_ACK;
            f->flags = (uint8_t)s;
            f->u.ack.ack = r->ack_sent;
            f->u.ack.limit = r->limit_sent;
            return put(f, buf, cap);
        }
    }
    return 0;
}

/* DATA of stream s below end, within the peer's credit and frame size. */
static long out_data(const struct ep *ep, struct txs *t, unsigned s, uint64_t end,
                     struct fr_frame *f, uint8_t *buf, size_t cap)
{
    size_t max = AL_MAX_DATA;
    if (ep->peer_max_frame - AL_FRAME_HEADER - 8 < max)
        max = ep->peer_max_frame - AL_FRAME_HEADER - 8;
    if (t->limit - t->sent < max)
        max = (size_t)(t->limit - t->sent);
    if (end - t->sent < max)
        max = (size_t)(end - t->sent);
    const uint8_t *p;
    size_t n = ring_peek(&t->ring, t->sent, max, &p);
    if (n == 0)
        return AL_E_STATE; /* cannot happen: sent >= base always */
    f->type = FR_DATA;
    f->flags = (uint8_t)s;
    f->u.data.offset = t->sent;
    f->u.data.bytes.p = p;
    f->u.data.bytes.len = n;
    t->sent += n;
    return put(f, buf, cap);
}

/* One outgoing stream: gap, data, eof; the host's snapshot at X goes in
 * stdout's place once stdout is sent up to X, and nothing beyond X goes
 * before its last chunk. */
static long out_stream(const struct ep *ep, struct chan *c, unsigned s, struct fr_frame *f,
                       uint8_t *buf, size_t cap)
{
    struct txs *t = &c->tx[s];
    if (!ep_is_tx(ep, s) || !ep_stream_used(c, s))
        return 0;
    int snap = ep_is_host(ep) && s == FR_STDOUT && c->snap.active;
    if (snap && c->snap.pos > 0)
        return out_snap(ep, c, f, buf, cap); /* half sent: finish it first */
    if (t->gap_to > t->gap_from) {
        f->type = FR_GAP;
        f->flags = (uint8_t)s;
        f->u.gap.from = t->gap_from;
        f->u.gap.to = t->gap_to;
        t->gap_from = t->gap_to = 0;
        return put(f, buf, cap);
    }
    uint64_t end = t->ring.end;
    if (snap && end > c->snap.off)
        end = c->snap.off > t->sent ? c->snap.off : t->sent; /* nothing beyond X */
    if (t->sent < end && t->sent < t->limit)
        return out_data(ep, t, s, end, f, buf, cap);
    if (snap)
        return t->sent >= c->snap.off ? out_snap(ep, c, f, buf, cap)
                                      : 0; /* stdout below X waits for credit */
    if (t->eof && !t->eof_sent && t->sent == t->ring.end) {
        t->eof_sent = 1;
        f->type = FR_EOF;
        f->flags = (uint8_t)s;
        f->u.eof.offset = t->ring.end;
        return put(f, buf, cap);
    }
    return 0;
}

/* Host: EXIT, once all output is sent. */
static long out_exit(struct ep *ep, struct chan *c, struct fr_frame *f, uint8_t *buf, size_t cap)
{
    if (!ep_is_host(ep) || c->exit != EX_EXITED || !c->tx[FR_STDOUT].eof_sent ||
        (c->mode == FR_MODE_PIPES && !c->tx[FR_STDERR].eof_sent))
        return 0;
    (void)ep_chan_set_exit(ep, c, EX_REPORTED, "EXIT sent");
    f->type = FR_EXIT;
    f->u.exit.code = c->exit_code;
    f->u.exit.signo = c->exit_sig;
    f->u.exit.core = c->exit_core;
    f->u.exit.out_end = c->tx[FR_STDOUT].ring.end;
    f->u.exit.err_end = c->tx[FR_STDERR].ring.end;
    return put(f, buf, cap);
}

static long out_chan(struct ep *ep, struct chan *c, uint8_t *buf, size_t cap)
{
    struct fr_frame f;
    memset(&f, 0, offsetof(struct fr_frame, u));
    f.channel = c->id;
    if (c->pending & P_CLOSE) {
        c->pending = 0;
        f.type = FR_CLOSE;
        long n = put(&f, buf, cap);
        if (c->mode == FR_MODE_PROXY ? c->close_answer : ep_is_host(ep))
            ep_chan_kill(ep, c,
                         "CLOSE sent"); /* a proxy channel's CLOSE of ours waits for the answer */
        return n;
    }
    if (c->state == CH_CLOSING)
        return 0;
    long n = out_setup(ep, c, &f, buf, cap);
    if (n != 0 || !ep_chan_linked(ep, c))
        return n;
    if ((n = out_control(c, &f, buf, cap)) != 0 || (n = out_ack(ep, c, &f, buf, cap)) != 0)
        return n;
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        if ((n = out_stream(ep, c, s, &f, buf, cap)) != 0)
            return n;
    return out_exit(ep, c, &f, buf, cap);
}

long ep_output(struct ep *ep, uint8_t *buf, size_t cap, uint64_t now_us)
{
    struct fr_frame f;
    memset(&f, 0, offsetof(struct fr_frame, u));
    (void)now_us;
    if (!ep->up)
        return 0;
    ep_chan_reap(ep);
    if (!ep->hello_sent) {
        ep->hello_sent = 1;
        f.type = FR_HELLO;
        f.u.hello.version_min = AL_PROTO_VERSION;
        f.u.hello.version_max = AL_PROTO_VERSION;
        f.u.hello.role = (uint8_t)ep->cfg.role;
        f.u.hello.max_frame = AL_MAX_FRAME;
        f.u.hello.name.p = ep->name;
        f.u.hello.name.len = (uint16_t)strlen(ep->name);
        return put(&f, buf, cap);
    }
    if (ep->nerrs) {
        struct errq e = ep->errs[0];
        memmove(&ep->errs[0], &ep->errs[1], (--ep->nerrs) * sizeof ep->errs[0]);
        f.type = FR_ERROR;
        f.channel = e.channel;
        f.u.error.code = e.code;
        f.u.error.msg.p = e.msg;
        f.u.error.msg.len = (uint16_t)strlen(e.msg);
        return put(&f, buf, cap);
    }
    if (ep->closing || !ep->peer_hello)
        return 0;
    if (ep_proxy_at_due(ep, &f))
        return put(&f, buf, cap);
    if (ep->pong_due) {
        ep->pong_due = 0;
        f.type = FR_PONG;
        f.u.ping.ts_us = ep->pong_ts;
        return put(&f, buf, cap);
    }
    if (ep->ping_due) {
        ep->ping_due = 0;
        f.type = FR_PING;
        f.u.ping.ts_us = now_us;
        return put(&f, buf, cap);
    }
    if (ep->token_len) {
        f.type = FR_TOKEN;
        f.u.token.p = ep->token;
        f.u.token.len = ep->token_len;
        ep->token_len = 0;
        return put(&f, buf, cap);
    }
    if (ep->list_due) {
        ep->list_due = 0;
        f.type = FR_LIST;
        return put(&f, buf, cap);
    }
    if (ep->list_reply_due) {
        ep->list_reply_due = 0;
        struct fr_frame *lf = calloc(1, sizeof *lf);
        if (!lf)
            return AL_E_NOMEM;
        lf->type = FR_LIST_REPLY;
        for (unsigned i = 0; i < ep->nch; i++) {
            const struct chan *c = ep->ch[i];
            if (!ep_chan_is_open(c) || c->mode == FR_MODE_PROXY)
                continue; /* proxy channels are not listed: nothing resumes them */
            struct fr_list_entry *e = &lf->u.list.e[lf->u.list.count++];
            e->channel = c->id;
            int exited = c->exit != EX_RUNNING;
            e->state = exited ? FR_CH_EXITED : FR_CH_RUNNING;
            e->mode = c->mode;
            e->exit_code = exited ? c->exit_code : 0;
            e->exit_signal = exited ? c->exit_sig : 0;
            e->out_end = c->tx[FR_STDOUT].ring.end;
            e->err_end = c->tx[FR_STDERR].ring.end;
            e->in_next = c->rx[FR_STDIN].next;
        }
        long n = put(lf, buf, cap);
        free(lf);
        return n;
    }
    /* channels, round robin so that one flood cannot starve the others */
    for (unsigned k = 0; k < ep->nch; k++) {
        unsigned i = (ep->rr + k) % ep->nch;
        struct chan *c = ep->ch[i];
        if (c->state == CH_DEAD)
            continue;
        long n = out_chan(ep, c, buf, cap);
        if (n != 0) {
            ep->rr = ep->nch ? (i + 1) % ep->nch : 0;
            return n;
        }
    }
    return 0;
}
