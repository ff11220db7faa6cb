/*
 * endpoint_ctl: the calls of a controller's application: open a channel
 * (the OPEN is encoded once and kept, to be sent again if a link is lost
 * before an answer), adopt one known from before a restart, resize,
 * signals, snapshot requests, LIST, an in-band token, and TAKEOVER in a
 * relay session. Each only records what to send; ep_output() sends it.
 *
 * Not here: the calls both roles make (endpoint_stream.c, ep_close in
 * endpoint_chan.c), the host's (endpoint_host.c).
 */
#include "endpoint_int.h"

#include <stdlib.h>
#include <string.h>

long ep_open(struct ep *ep, const struct fr_open *o)
{
    if (ep_is_host(ep))
        return AL_E_INVAL;
    if (ep_channel_count(ep) >= AL_MAX_CHANNELS)
        return AL_E_LIMIT;
    uint32_t id = ep->next_id;
    while (ep_chan_find(ep, id) || id == 0 || fr_is_proxy_channel(id))
        id = fr_is_proxy_channel(id) ? 1 : id + 1; /* the top bit's ids are the host's */
    struct fr_frame *f = calloc(1, sizeof *f);
    uint8_t *buf = malloc(AL_MAX_FRAME);
    if (!f || !buf) {
        free(f);
        free(buf);
        return AL_E_NOMEM;
    }
    f->type = FR_OPEN;
    f->channel = id;
    f->u.open = *o;
    long n = fr_encode(f, buf, AL_MAX_FRAME);
    free(f);
    if (n < 0) {
        free(buf);
        return n;
    }
    struct chan *c = ep_chan_new(ep, id, o->mode);
    if (!c) {
        free(buf);
        return AL_E_NOMEM;
    }
    uint8_t *shrunk = realloc(buf, (size_t)n);
    c->open_frame = shrunk ? shrunk : buf;
    c->open_len = (size_t)n;
    (void)ep_chan_set_state(ep, c, CH_NEW, "opened by the application");
    c->cols = o->cols;
    c->rows = o->rows;
    if (ep_ready(ep))
        c->pending |= P_OPEN;
    ep->next_id = id + 1;
    return (long)id;
}

static int adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_next, uint64_t err_next,
                 int held)
{
    if (ep_is_host(ep) || ch == 0 || fr_is_proxy_channel(ch) || mode > FR_MODE_PIPES)
        return AL_E_INVAL;
    if (ep_chan_find(ep, ch))
        return AL_E_EXISTS;
    struct chan *c = ep_chan_new(ep, ch, mode);
    if (!c)
        return ep->nch >= AL_MAX_CHANNELS ? AL_E_LIMIT : AL_E_NOMEM;
    (void)ep_chan_set_state(ep, c, CH_DETACHED, "adopted by the application");
    c->rx[FR_STDOUT].next = c->rx[FR_STDOUT].consumed = out_next;
    c->rx[FR_STDERR].next = c->rx[FR_STDERR].consumed = err_next;
    c->held = held;
    if (ep_ready(ep))
        c->pending |= P_ATTACH;
    if (ch >= ep->next_id)
        ep->next_id = ch + 1;
    return AL_OK;
}

int ep_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_next, uint64_t err_next)
{
    return adopt(ep, ch, mode, out_next, err_next, 1);
}

int ep_attach_new(struct ep *ep, uint32_t ch, uint8_t mode)
{
    return adopt(ep, ch, mode, 0, 0, 0);
}

int ep_resize(struct ep *ep, uint32_t ch, uint16_t cols, uint16_t rows)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (ep_is_host(ep) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    c->cols = cols;
    c->rows = rows;
    c->pending |= P_RESIZE;
    return AL_OK;
}

int ep_signal(struct ep *ep, uint32_t ch, uint8_t signo, uint8_t scope)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (ep_is_host(ep) || !fr_signal_ok(signo) || scope > FR_SIG_TREE)
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!ep_chan_linked(ep, c))
        return AL_E_STATE;
    if (c->nsigs >= AL_MAX_PENDING_SIGNALS)
        return AL_E_LIMIT;
    c->sigs[c->nsigs][0] = signo;
    c->sigs[c->nsigs][1] = scope;
    c->nsigs++;
    return AL_OK;
}

int ep_request_snapshot(struct ep *ep, uint32_t ch)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (ep_is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    c->pending |= P_SNAPREQ;
    return AL_OK;
}

int ep_list(struct ep *ep)
{
    if (ep_is_host(ep))
        return AL_E_INVAL;
    ep->list_due = 1;
    return AL_OK;
}

int ep_send_token(struct ep *ep, const char *token, size_t len)
{
    if (ep_is_host(ep) || len == 0 || len > AL_MAX_TOKEN)
        return AL_E_INVAL;
    memcpy(ep->token, token, len);
    ep->token_len = len;
    return AL_OK;
}

int ep_takeover(struct ep *ep, uint32_t ch)
{
    struct chan *c = ep_chan_find_live(ep, ch);
    if (ep_is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!ep->up)
        return AL_E_STATE;    /* about a link: the next one would drop it */
    c->pending |= P_TAKEOVER; /* sent once the channel is linked */
    return AL_OK;
}
