/*
 * endpoint_stream: a channel's streams (docs/protocol.md §6, §7): offsets,
 * credit granted and used, acknowledgements, and a stream's resume on a new
 * link (rewind to what the peer has, or a GAP past what the ring lost).
 * The incoming stream frames (DATA, ACK, EOF, GAP) are checked here, and
 * the application's stream calls (ep_write, ep_writable, ep_eof,
 * ep_consume, ep_stream_info) live here.
 *
 * Credit is granted only for what the application delivered (ep_consume):
 * the peer may send below consumed + window. Relay sessions: a viewer's
 * stdin gets no credit; after a ROLE, stdin the controller sent under its
 * old role may still come on this link (in_stale) and is dropped, not an
 * error.
 *
 * Not here: when an ACK or DATA goes out (endpoint_output.c derives it
 * from these offsets), ROLE's effect on the controller's stdin
 * (endpoint_input.c, on_role).
 */
#include "endpoint_int.h"

#include <string.h>

/* Credit afresh: a whole window beyond what the application consumed. */
void ep_stream_grant(struct ep *ep, struct rxs *r)
{
    r->ack_sent = r->consumed;
    r->limit_sent = r->consumed + ep->cfg.window;
}

/* Host: grant stdin credit afresh, none to a viewer. */
void ep_stream_grant_stdin(struct ep *ep, struct chan *c)
{
    struct rxs *r = &c->rx[FR_STDIN];
    if (!c->viewer) {
        ep_stream_grant(ep, r);
        return;
    }
    r->ack_sent = r->consumed;
    r->limit_sent = r->next;
}

/* An outgoing stream restarts, empty, at offset off. */
void ep_stream_restart(struct txs *t, uint64_t off)
{
    ring_reset(&t->ring, off);
    t->sent = t->acked = off;
    t->gap_from = t->gap_to = 0;
    t->role_sent = 0;
}

/*
 * The peer says it has received up to `next` of an outgoing stream and lets
 * us send below `limit`: rewind to there, or past a gap if the ring no
 * longer holds it. Returns 0 or AL_E_PROTO.
 */
int ep_stream_resume(struct txs *t, uint64_t next, uint64_t limit, int may_skip)
{
    if (next > t->ring.end) {
        if (!may_skip)
            return AL_E_PROTO;
        ring_reset(&t->ring, next); /* sender lost its state: go on there */
    }
    t->gap_from = t->gap_to = 0;
    if (next < t->ring.base) {
        t->gap_from = next;
        t->gap_to = t->ring.base;
        next = t->ring.base;
    }
    t->sent = next;
    t->acked = next;
    t->limit = limit;
    t->eof_sent = 0;
    t->role_sent = 0;
    return AL_OK;
}

int ep_stream_on_data(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    uint64_t off = f->u.data.offset, n = f->u.data.bytes.len;
    if (ep_is_tx(ep, s) || !ep_stream_used(c, s))
        return ep_fail_stream(ep, f);
    if (c->in_stale && s == FR_STDIN && (r->eof || off > r->next || off + n > r->limit_sent))
        return AL_OK; /* sent before our ROLE reached the controller */
    if (r->eof)
        return ep_fail_proto(ep, "DATA after EOF", f);
    if (off > r->next)
        return ep_fail_proto(ep, "DATA leaves a hole", f);
    if (off + n > r->limit_sent)
        return ep_fail_proto(ep, "DATA beyond the granted credit", f);
    if (off + n <= r->next)
        return AL_OK; /* already have it all */
    uint64_t skip = r->next - off;
    r->next = off + n;
    r->got = 1;
    struct ep_event ev = {.type = EP_EV_DATA,
                          .channel = c->id,
                          .stream = s,
                          .offset = off + skip,
                          .data = f->u.data.bytes.p + skip,
                          .len = (size_t)(n - skip)};
    ep_emit(ep, &ev);
    return AL_OK;
}

int ep_stream_on_ack(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct txs *t = &c->tx[s];
    if (!ep_is_tx(ep, s))
        return ep_fail_stream(ep, f);
    if (!ep_stream_used(c, s)) {
        /* a PTY's stderr: never carries a byte, so credit on it is
         * harmless and ignored; acknowledging a byte of it is not */
        if (f->u.ack.ack != 0)
            return ep_fail_proto(ep, "ACK of bytes never sent", f);
        return AL_OK;
    }
    if (f->u.ack.ack > t->sent && f->u.ack.ack > t->role_sent)
        return ep_fail_proto(ep, "ACK of bytes never sent", f);
    size_t before = ep_writable(ep, c->id, s);
    if (f->u.ack.ack > t->sent)
        t->sent = f->u.ack.ack; /* sent before a ROLE: no need to send them again */
    if (f->u.ack.ack > t->acked)
        t->acked = f->u.ack.ack;
    if (f->u.ack.limit > t->limit)
        t->limit = f->u.ack.limit;
    if (ep_writable(ep, c->id, s) > before) {
        struct ep_event ev = {.type = EP_EV_WRITABLE, .channel = c->id, .stream = s};
        ep_emit(ep, &ev);
    }
    return AL_OK;
}

int ep_stream_on_eof(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    if (ep_is_tx(ep, s) || !ep_stream_used(c, s))
        return ep_fail_stream(ep, f);
    if (s == FR_STDIN && c->in_stale && (c->viewer || f->u.eof.offset != r->next))
        return AL_OK; /* sent before our ROLE reached the controller */
    if (s == FR_STDIN && c->viewer) {
        ep_queue_error(ep, c->id, FR_ERR_FORBIDDEN, "a viewer may not end the input");
        return AL_OK;
    }
    if (f->u.eof.offset != r->next)
        return ep_fail_proto(ep, "EOF not at the end of the received data", f);
    if (r->eof)
        return AL_OK; /* resent after a resume */
    r->eof = 1;
    struct ep_event ev = {.type = EP_EV_EOF, .channel = c->id, .stream = s, .offset = r->next};
    ep_emit(ep, &ev);
    return AL_OK;
}

int ep_stream_on_gap(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    if (ep_is_tx(ep, s) || !ep_stream_used(c, s))
        return ep_fail_stream(ep, f);
    if (f->u.gap.from != r->next || r->eof)
        return ep_fail_proto(ep, "GAP does not start at the next byte", f);
    r->next = f->u.gap.to;
    r->consumed = r->next; /* nothing to deliver */
    struct ep_event ev = {.type = EP_EV_GAP,
                          .channel = c->id,
                          .stream = s,
                          .offset = f->u.gap.from,
                          .to = f->u.gap.to};
    ep_emit(ep, &ev);
    return AL_OK;
}

long ep_write(struct ep *ep, uint32_t ch, unsigned stream, const uint8_t *p, size_t n)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || !ep_is_tx(ep, stream) || !ep_stream_used(c, stream))
        return AL_E_INVAL;
    struct txs *t = &c->tx[stream];
    if (t->eof)
        return AL_E_STATE;
    size_t room = ep_writable(ep, ch, stream);
    if (n > room)
        n = room;
    t->appended = 1;
    int rc = ring_append(&t->ring, p, n);
    return rc < 0 ? rc : (long)n;
}

size_t ep_writable(const struct ep *ep, uint32_t ch, unsigned stream)
{
    const struct chan *c = ep_chan_find_live(ep, ch);
    if (!c || stream >= FR_NSTREAMS || !ep_is_tx(ep, stream) || c->tx[stream].eof)
        return 0;
    const struct txs *t = &c->tx[stream];
    uint64_t used = t->ring.end - t->acked;
    return used >= t->ring.cap ? 0 : (size_t)(t->ring.cap - used);
}

int ep_eof(struct ep *ep, uint32_t ch, unsigned stream)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || !ep_is_tx(ep, stream) || !ep_stream_used(c, stream))
        return AL_E_INVAL;
    c->tx[stream].eof = 1;
    return AL_OK;
}

int ep_consume(struct ep *ep, uint32_t ch, unsigned stream, size_t n)
{
    struct chan *c = ep_chan_find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || ep_is_tx(ep, stream))
        return AL_E_INVAL;
    struct rxs *r = &c->rx[stream];
    if (n > r->next - r->consumed)
        return AL_E_INVAL;
    r->consumed += n;
    return AL_OK;
}

int ep_stream_info(const struct ep *ep, uint32_t ch, unsigned stream, struct ep_stream_info *out)
{
    const struct chan *c = ep_chan_find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS)
        return AL_E_INVAL;
    memset(out, 0, sizeof *out);
    if (ep_is_tx(ep, stream)) {
        out->end = c->tx[stream].ring.end;
        out->acked = c->tx[stream].acked;
        out->base = c->tx[stream].ring.base;
        out->eof = c->tx[stream].eof;
    } else {
        out->end = c->rx[stream].next;
        out->consumed = c->rx[stream].consumed;
        out->eof = c->rx[stream].eof;
    }
    return AL_OK;
}
