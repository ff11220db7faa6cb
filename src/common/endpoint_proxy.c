/*
 * endpoint_proxy: the credential proxy's channels (docs/protocol.md §5a).
 * A host that serves a local proxy listener opens one channel per agent
 * connection (PROXY_OPEN, on an id with FR_PROXY_CHANNEL_BIT, which the
 * controller never picks) and says where the listener is (PROXY_AT, after
 * HELLO on every link). The channel is two byte streams with the usual
 * credit: FR_STDOUT the agent's bytes (host -> controller), FR_STDIN the
 * answer (controller -> host). EOF is a half close; CLOSE from either side
 * ends the channel and the other side answers with CLOSE. Nothing of them
 * is resumed: a link that goes down ends them all on both sides.
 *
 * EP_EV_CLOSED comes once for each channel the application did not close
 * itself: when the peer closes it, refuses it (host) or the link drops.
 *
 * Data model: a proxy channel is a struct chan of mode FR_MODE_PROXY, in
 * the endpoint's table beside the terminals but counted apart
 * (AL_MAX_PROXY_CHANNELS), with rings of at most EP_PROXY_RING. Its states
 * are drawn in endpoint_chan.c. `close_answer` marks the CLOSE we owe the
 * peer (the channel is forgotten once it is sent); a CLOSE of ours waits
 * in CLOSING for the peer's.
 *
 * Not here: the streams themselves (endpoint_stream.c), the frames out
 * (endpoint_output.c calls ep_proxy_at_due, sends PROXY_OPEN and CLOSE).
 */
#include "endpoint_int.h"

#include <stdio.h>
#include <string.h>

int ep_proxy_at(struct ep *ep, const char *url)
{
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (!url) {
        ep->proxy_url[0] = '\0';
        ep->proxy_at_due = 0;
        return AL_OK;
    }
    size_t n = strlen(url);
    if (n <= 7 || n > AL_MAX_PROXY_URL || strncmp(url, "http://", 7) != 0)
        return AL_E_INVAL;
    memcpy(ep->proxy_url, url, n + 1);
    ep->proxy_at_due = ep->up;
    return AL_OK;
}

int ep_proxy_at_due(struct ep *ep, struct fr_frame *f)
{
    if (!ep->proxy_at_due || !ep->proxy_url[0])
        return 0;
    ep->proxy_at_due = 0;
    f->type = FR_PROXY_AT;
    f->u.proxy_at.p = ep->proxy_url;
    f->u.proxy_at.len = (uint16_t)strlen(ep->proxy_url);
    return 1;
}

long ep_proxy_open(struct ep *ep)
{
    if (!ep_is_host(ep))
        return AL_E_INVAL;
    if (!ep_ready(ep) || ep->closing)
        return AL_E_STATE;
    if (ep_proxy_count(ep) >= AL_MAX_PROXY_CHANNELS)
        return AL_E_LIMIT;
    /* the next id of the host's space not in use (there are 2^31 - 1, and
     * at most AL_MAX_PROXY_CHANNELS in use) */
    uint32_t low = ep->next_proxy_id;
    uint32_t id;
    do {
        low = (low & ~FR_PROXY_CHANNEL_BIT) ? low & ~FR_PROXY_CHANNEL_BIT : 1;
        id = FR_PROXY_CHANNEL_BIT | low;
        low++;
    } while (ep_chan_find(ep, id));
    ep->next_proxy_id = low;
    struct chan *c = ep_chan_new(ep, id, FR_MODE_PROXY);
    if (!c)
        return AL_E_NOMEM;
    (void)ep_chan_set_state(ep, c, CH_LINKED, "proxy channel opened by the application");
    /* stdin (the answer) gets credit with the first ACK after PROXY_OPEN */
    ep_stream_grant(ep, &c->rx[FR_STDIN]);
    c->rx[FR_STDIN].limit_sent = 0;
    c->pending |= P_PROXY_OPEN;
    return (long)id;
}

int ep_proxy_on_open(struct ep *ep, const struct fr_frame *f)
{
    if (ep_chan_find(ep, f->channel))
        return ep_fail_proto(ep, "PROXY_OPEN of a channel in use", f);
    if (!ep->cfg.serves_proxy) {
        ep_queue_error(ep, f->channel, FR_ERR_FORBIDDEN,
                       "this controller does not serve the credential proxy");
        return AL_OK;
    }
    struct chan *c = ep_chan_new(ep, f->channel, FR_MODE_PROXY);
    if (!c) {
        /* the host forgets the channel on this ERROR; its late frames are
         * dropped here as those of any closed channel */
        ep_queue_error(ep, f->channel, FR_ERR_LIMIT, "too many proxy channels");
        return AL_OK;
    }
    (void)ep_chan_set_state(ep, c, CH_LINKED, "PROXY_OPEN received");
    /* stdout (the agent's bytes) gets credit with our first ACK */
    struct ep_event ev = {.type = EP_EV_PROXY_OPEN, .channel = c->id};
    ep_emit(ep, &ev);
    return AL_OK;
}

int ep_proxy_refuse(struct ep *ep, uint32_t ch, uint16_t code, const char *msg)
{
    struct chan *c = ep_chan_find(ep, ch);
    if (ep_is_host(ep) || code == 0 || ep_close_code_of(code))
        return AL_E_INVAL;
    if (!c || c->mode != FR_MODE_PROXY)
        return AL_E_NOCHAN;
    ep_queue_error(ep, ch, code, msg ? msg : "refused");
    ep_chan_kill(ep, c, "proxy channel refused");
    return AL_OK;
}

int ep_proxy_on_close(struct ep *ep, struct chan *c)
{
    struct ep_event ev = {.type = EP_EV_CLOSED, .channel = c->id};
    if (c->state == CH_CLOSING && !c->close_answer) {
        /* the answer to our CLOSE (or both sides closed at once) */
        ep_chan_kill(ep, c, "CLOSE received (the answer)");
        return AL_OK;
    }
    ep_emit(ep, &ev);
    (void)ep_chan_set_state(ep, c, CH_CLOSING, "CLOSE received");
    c->pending = P_CLOSE;
    c->close_answer = 1;
    return AL_OK;
}

int ep_proxy_on_error(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    struct ep_event ev = {.type = EP_EV_ERROR,
                          .channel = c->id,
                          .code = f->u.error.code,
                          .data = (const uint8_t *)f->u.error.msg.p,
                          .len = f->u.error.msg.len};
    ep_emit(ep, &ev);
    if (!ep_is_host(ep))
        return AL_OK; /* a host's ERROR about a channel ends nothing */
    /* the controller refused the channel (or no longer has it): it is gone */
    int was_closing = c->state == CH_CLOSING;
    ep_chan_kill(ep, c, "proxy channel refused by the controller");
    if (!was_closing) {
        struct ep_event cl = {.type = EP_EV_CLOSED, .channel = ev.channel};
        ep_emit(ep, &cl);
    }
    return AL_OK;
}

void ep_proxy_drop_all(struct ep *ep)
{
    uint32_t ids[AL_MAX_PROXY_CHANNELS];
    unsigned n = 0;
    for (unsigned i = 0; i < ep->nch; i++) {
        struct chan *c = ep->ch[i];
        if (c->mode != FR_MODE_PROXY || c->state == CH_DEAD)
            continue;
        /* CLOSING: closed by the application, or CLOSED given already */
        int told = c->state == CH_CLOSING;
        (void)ep_chan_set_state(ep, c, CH_DEAD, "link down: proxy channels are not resumed");
        if (!told && n < AL_MAX_PROXY_CHANNELS)
            ids[n++] = c->id;
    }
    for (unsigned i = 0; i < n; i++) {
        struct ep_event ev = {.type = EP_EV_CLOSED, .channel = ids[i]};
        ep_emit(ep, &ev);
    }
}
