/*
 * endpoint_host: the calls of a host's application: answering OPEN
 * (ep_opened, ep_open_failed), the process's exit, snapshots, and relay
 * sessions (docs/protocol.md §9): serving a channel that lives elsewhere
 * (ep_host_adopt), jumping its stdout forward (ep_resync), roles and the
 * list of viewers.
 *
 * Relay sessions: a channel may be a viewer, whose stdin gets no credit;
 * the application moves stdin offsets with ep_set_role() because it merges
 * several writers into one stream. The controller follows ROLE.
 *
 * Not here: the calls both roles make (streams: endpoint_stream.c;
 * ep_close: endpoint_chan.c), the controller's (endpoint_ctl.c).
 */
#include "endpoint_int.h"

#include <stdlib.h>
#include <string.h>

/*
 * Host: queue a snapshot whose bytes `p` (owned from now on) redraw the
 * screen at stdout offset off. One already half sent finishes first.
 */
static void snap_put(struct chan *c, uint64_t off, uint16_t cols, uint16_t rows, uint8_t *p,
                     size_t n)
{
    struct snap *s = c->snap.active && c->snap.pos > 0 ? &c->snap_next : &c->snap;
    ep_chan_snap_clear(s);
    s->active = 1;
    s->p = p;
    s->len = n; /* an empty screen is one empty final chunk */
    s->off = off;
    s->cols = cols;
    s->rows = rows;
}

int ep_opened(struct ep *ep, uint32_t ch, uint32_t pid)
{
    struct chan *c = ep_chan_find(ep, ch);
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->state != CH_OPENING)
        return AL_E_STATE;
    (void)ep_chan_set_state(ep, c, CH_LINKED, "opened by the application");
    c->pid = pid;
    ep_stream_grant(ep, &c->rx[FR_STDIN]);
    c->rx[FR_STDIN].limit_sent = 0; /* first ACK after OPENED grants it */
    c->pending |= P_OPENED;
    return AL_OK;
}

int ep_open_failed(struct ep *ep, uint32_t ch, const char *why)
{
    struct chan *c = ep_chan_find(ep, ch);
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->state != CH_OPENING)
        return AL_E_STATE;
    ep_queue_error(ep, ch, FR_ERR_OPEN_FAILED, why ? why : "could not start");
    ep_chan_kill(ep, c, "OPEN failed");
    return AL_OK;
}

int ep_exit(struct ep *ep, uint32_t ch, int32_t code, uint8_t signo, uint8_t core)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->exit != EX_RUNNING)
        return AL_E_STATE;
    if (signo ? code != -1 || signo >= 128 : code < 0 || code > 255)
        return AL_E_INVAL;
    (void)ep_chan_set_exit(ep, c, EX_EXITED, "exit from the application");
    c->exit_code = code;
    c->exit_sig = signo;
    c->exit_core = core ? 1 : 0;
    c->tx[FR_STDOUT].eof = 1;
    c->tx[FR_STDERR].eof = 1;
    return AL_OK;
}

int ep_snapshot(struct ep *ep, uint32_t ch, uint64_t offset, uint16_t cols, uint16_t rows,
                const uint8_t *p, size_t n)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!ep_is_host(ep) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (n > AL_MAX_SNAPSHOT)
        return AL_E_TOOBIG;
    if (offset > c->tx[FR_STDOUT].ring.end)
        return AL_E_INVAL; /* a screen of bytes never written */
    if (!ep_chan_linked(ep, c))
        return AL_E_STATE;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return AL_E_NOMEM;
    if (n)
        memcpy(copy, p, n);
    snap_put(c, offset, cols, rows, copy, n);
    return AL_OK;
}

int ep_host_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_base, uint64_t err_base,
                  uint64_t in_next)
{
    if (!ep_is_host(ep) || ch == 0 || fr_is_proxy_channel(ch) || mode > FR_MODE_PIPES)
        return AL_E_INVAL;
    if (ep_chan_find(ep, ch))
        return AL_E_EXISTS;
    struct chan *c = ep_chan_new(ep, ch, mode);
    if (!c)
        return ep->nch >= AL_MAX_CHANNELS ? AL_E_LIMIT : AL_E_NOMEM;
    c->viewer = 1;                     /* until ep_set_role(FR_WRITER) */
    if (ep->up && ep->attach_ch == ch) /* its ATTACH is being processed */
        (void)ep_chan_set_state(ep, c, CH_LINKED, "adopted during its ATTACH");
    else
        (void)ep_chan_set_state(ep, c, CH_DETACHED, "adopted by the application");
    ep_stream_restart(&c->tx[FR_STDOUT], out_base);
    ep_stream_restart(&c->tx[FR_STDERR], err_base);
    struct rxs *r = &c->rx[FR_STDIN];
    r->next = r->consumed = r->ack_sent = r->limit_sent = in_next;
    return AL_OK;
}

int ep_resync(struct ep *ep, uint32_t ch, uint64_t offset, uint16_t cols, uint16_t rows,
              const uint8_t *snap, size_t n)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (snap && (cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    struct txs *t = &c->tx[FR_STDOUT];
    if (offset < t->ring.end)
        return AL_E_INVAL; /* only forward, past everything written */
    if (!ep_chan_is_open(c) || t->eof)
        return AL_E_STATE;
    if (snap && n > AL_MAX_SNAPSHOT)
        return AL_E_TOOBIG;
    uint8_t *copy = NULL;
    int linked = ep_chan_linked(ep, c);
    if (snap && linked) { /* copy first: a failure changes nothing */
        copy = malloc(n ? n : 1);
        if (!copy)
            return AL_E_NOMEM;
        if (n)
            memcpy(copy, snap, n);
    }
    if (linked && t->sent < offset) {
        /* a pending GAP ends at `sent` (no DATA passes it): extend it */
        if (t->gap_to <= t->gap_from)
            t->gap_from = t->sent;
        t->gap_to = offset;
    }
    ring_reset(&t->ring, offset);
    t->sent = t->acked = offset;
    /* a snapshot not yet started shows the screen before the jump; one half
     * sent finishes first (stdout waits for it) */
    if (!(c->snap.active && c->snap.pos > 0))
        ep_chan_snap_clear(&c->snap);
    ep_chan_snap_clear(&c->snap_next);
    if (copy)
        snap_put(c, offset, cols, rows, copy, n);
    return AL_OK;
}

int ep_set_role(struct ep *ep, uint32_t ch, uint8_t role, uint64_t in_next)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!ep_is_host(ep) || (role != FR_WRITER && role != FR_VIEWER))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!ep_chan_is_open(c))
        return AL_E_STATE;
    if (ep_chan_linked(ep, c) && !c->viewer)
        c->in_stale = 1; /* it may have stdin in flight, numbered the old way */
    c->viewer = role == FR_VIEWER;
    struct rxs *r = &c->rx[FR_STDIN];
    r->next = r->consumed = in_next;
    r->eof = 0;
    ep_stream_grant_stdin(ep, c);
    c->pending |= P_ROLE;
    return AL_OK;
}

int ep_viewers(struct ep *ep, uint32_t ch, unsigned count, const char *const *names,
               const uint8_t *roles)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (!ep_is_host(ep) || (count && (!names || !roles)))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!ep_chan_is_open(c))
        return AL_E_STATE;
    if (count > AL_MAX_VIEWERS)
        return AL_E_TOOBIG;
    for (unsigned i = 0; i < count; i++) {
        if (!names[i] || (roles[i] != FR_WRITER && roles[i] != FR_VIEWER))
            return AL_E_INVAL;
        size_t len = strnlen(names[i], AL_MAX_VIEWER_NAME + 1);
        if (len == 0)
            return AL_E_INVAL;
        if (len > AL_MAX_VIEWER_NAME)
            return AL_E_TOOBIG;
    }
    struct vlist *v = malloc(sizeof *v);
    if (!v)
        return AL_E_NOMEM;
    v->count = count;
    for (unsigned i = 0; i < count; i++) {
        v->len[i] = (uint8_t)strnlen(names[i], AL_MAX_VIEWER_NAME);
        memcpy(v->name[i], names[i], v->len[i]);
        v->role[i] = roles[i];
    }
    free(c->viewers);
    c->viewers = v;
    c->pending |= P_VIEWERS;
    return AL_OK;
}
