/*
 * endpoint_chan: the endpoint's table of channels and the states of a
 * channel: creation, lookup, release (a channel closed from a callback is
 * DEAD until the callback returns, then freed), ep_close(), and the one
 * place a channel's state changes.
 *
 * Not here: what each frame does to a channel (endpoint_input.c), what is
 * sent for it (endpoint_output.c), its streams (endpoint_stream.c).
 *
 * Channel states
 * --------------
 * A channel is in one state (enum chstate) and its process in one exit
 * state (enum exstate). Both change only through ep_chan_set_state() and
 * ep_chan_set_exit(), which check the move against a table per role
 * (chstate_moves, exstate_moves) and log it through the config's on_log
 * (level 2). A move the table lacks is a bug here, never a peer's doing
 * (input that does not fit the state is refused before any move): it
 * asserts in a debug build, and is logged (level 0) and refused otherwise.
 * The tables are the rule; the diagrams draw them.
 *
 *   controller
 *                     OPEN sent            OPENED, ATTACHED
 *     ep_open() --> NEW ------> OPENING -----------------------> LINKED
 *                    | \                                         ^ |  ^
 *                    |  `-- OPENED, ATTACHED (before our OPEN) --' |  |
 *                    |                                   link down |  | ATTACHED
 *                    |                                             v  |
 *                    |                       ep_adopt() -------> DETACHED
 *                    |
 *                    |   OPENING, DETACHED, LINKED --ep_close()--> CLOSING
 *                    v                                                |
 *                   DEAD <------ CLOSE, NO_CHANNEL (the answer) ------'
 *
 *     NEW -> DEAD: ep_close() before the OPEN went out. NEW, OPENING ->
 *     DEAD: ERROR OPEN_FAILED, LIMIT or CHANNEL_EXISTS; CLOSE from the
 *     host. DETACHED, LINKED -> DEAD: CLOSE from the host; NO_CHANNEL
 *     (EP_EV_LOST). NO_CHANNEL for NEW or OPENING resends the OPEN (no
 *     move); a link down leaves NEW, OPENING and CLOSING as they are.
 *
 *   host
 *                    OPEN received         ep_opened()
 *                  ----------------> OPENING --------> LINKED
 *                                       |              ^    |
 *                                       |       ATTACH |    | link down
 *                                       |              |    v
 *       ep_host_adopt() (LINKED during  |           DETACHED
 *       its ATTACH) ------------------- | -------------^
 *                                       |
 *                                       |  OPENING, DETACHED, LINKED
 *                                       |  --CLOSE received--> CLOSING
 *                                       v                         |
 *                                      DEAD <--CLOSE sent, link down--'
 *
 *     OPENING -> DEAD: ep_open_failed(); a link down (never confirmed:
 *     the controller re-OPENs). OPENING, LINKED -> CLOSING: ep_close()
 *     too. DETACHED -> DEAD: ep_close() (nobody to tell: the next ATTACH
 *     learns it).
 *
 *   exit (both; REPORTED: host only)
 *     RUNNING --ep_exit(), EXIT received--> EXITED --EXIT sent--> REPORTED
 *                                             ^                      |
 *                                             `----- link down ------'
 *
 *   proxy channels (both roles; docs/protocol.md §5a)
 *     host: ep_proxy_open() --> LINKED (PROXY_OPEN to send)
 *     controller: PROXY_OPEN received --> LINKED
 *     LINKED --ep_close()--> CLOSING --CLOSE received (the answer)--> DEAD
 *     LINKED --CLOSE received--> CLOSING --CLOSE sent (the answer)--> DEAD
 *     LINKED, CLOSING --link down, ERROR (host: refused)--> DEAD
 *
 * "Linked" (the frames marked FR_T_LINKED may flow) is LINKED, or a host's
 * OPENING: its OPEN came on this link. A CLOSING channel takes no frame
 * but CLOSE, so whether it was linked does not matter. CH_NONE is a
 * channel being created; CH_DEAD one that ep_chan_find() no longer sees, freed by
 * ep_chan_reap() outside callbacks.
 *
 * Not states: `viewer` is a role, which the application changes in any
 * open state (ep_set_role); `in_stale` says that stdin numbered before our
 * last ROLE may still arrive on this link, a condition of one stream on
 * one link (cleared at link down) as txs.eof_sent is; `pending` holds
 * frames to send. A controller's adopted channel (ep_adopt) is simply one
 * that starts DETACHED.
 */
#include "endpoint_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TO(s) (1u << (s))
#define ROLE_IX(role) ((role) == FR_ROLE_HOST ? 0 : 1)

static const char *const chstate_names[CH_NSTATES] = {
    "NONE", "NEW", "OPENING", "DETACHED", "LINKED", "CLOSING", "DEAD",
};

/* The allowed moves, per role (host, controller): chstate_moves[r][from]
 * has bit `to` set. Staying in a state is not a move. */
static const uint16_t chstate_moves[2][CH_NSTATES] = {
    {
        /* host */
        [CH_NONE] = TO(CH_OPENING) | TO(CH_DETACHED) | TO(CH_LINKED),
        [CH_OPENING] = TO(CH_LINKED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_DETACHED] = TO(CH_LINKED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_LINKED] = TO(CH_DETACHED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_CLOSING] = TO(CH_DEAD),
    },
    {
        /* controller */
        [CH_NONE] = TO(CH_NEW) | TO(CH_DETACHED) | TO(CH_LINKED),
        [CH_NEW] = TO(CH_OPENING) | TO(CH_LINKED) | TO(CH_DEAD),
        [CH_OPENING] = TO(CH_LINKED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_DETACHED] = TO(CH_LINKED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_LINKED] = TO(CH_DETACHED) | TO(CH_CLOSING) | TO(CH_DEAD),
        [CH_CLOSING] = TO(CH_DEAD),
    },
};

static const char *const exstate_names[EX_NSTATES] = {"RUNNING", "EXITED", "REPORTED"};

static const uint16_t exstate_moves[2][EX_NSTATES] = {
    {
        /* host */
        [EX_RUNNING] = TO(EX_EXITED),
        [EX_EXITED] = TO(EX_REPORTED),
        [EX_REPORTED] = TO(EX_EXITED), /* the link went down: report it again */
    },
    {
        /* controller */
        [EX_RUNNING] = TO(EX_EXITED),
    },
};

/* Check a move against its table and log it. A move the table lacks is a
 * bug of the endpoint (no input can cause one): assert in a debug build, else
 * log an error and refuse it (AL_E_STATE). */
static int move_ok(const struct ep *ep, const struct chan *c, const char *what,
                   const char *const *names, const uint16_t *moves, unsigned from, unsigned to,
                   const char *why)
{
    const char *role = ep_is_host(ep) ? "host" : "controller";
    if (!(moves[from] & TO(to))) {
        ep_log(ep, 0, "%s channel %u: %s %s -> %s refused (%s): not a move of the %s", role,
               (unsigned)c->id, what, names[from], names[to], why, role);
        assert(0 && "channel state move missing from its table");
        return 0;
    }
    ep_log(ep, 2, "%s channel %u: %s %s -> %s (%s)", role, (unsigned)c->id, what, names[from],
           names[to], why);
    return 1;
}

int ep_chan_set_state(struct ep *ep, struct chan *c, enum chstate to, const char *why)
{
    if (c->state == to)
        return AL_OK;
    if (!move_ok(ep, c, "state", chstate_names, chstate_moves[ROLE_IX(ep->cfg.role)], c->state, to,
                 why))
        return AL_E_STATE;
    c->state = to;
    return AL_OK;
}

int ep_chan_set_exit(struct ep *ep, struct chan *c, enum exstate to, const char *why)
{
    if (c->exit == to)
        return AL_OK;
    if (!move_ok(ep, c, "exit", exstate_names, exstate_moves[ROLE_IX(ep->cfg.role)], c->exit, to,
                 why))
        return AL_E_STATE;
    c->exit = to;
    return AL_OK;
}

#undef TO
#undef ROLE_IX

/* Opened (or adopted) and not closing: DATA flows once it is linked. */
int ep_chan_is_open(const struct chan *c)
{
    return c->state == CH_DETACHED || c->state == CH_LINKED;
}

/* OPEN not answered yet (controller: sent or not). */
int ep_chan_is_opening(const struct chan *c)
{
    return c->state == CH_NEW || c->state == CH_OPENING;
}

/* Opened or attached on this link: the frames FR_T_LINKED may come and go.
 * A host's OPENING channel is: its OPEN came on this link. */
int ep_chan_linked(const struct ep *ep, const struct chan *c)
{
    return c->state == CH_LINKED || (ep_is_host(ep) && c->state == CH_OPENING);
}

struct chan *ep_chan_find(const struct ep *ep, uint32_t id)
{
    for (unsigned i = 0; i < ep->nch; i++)
        if (ep->ch[i]->id == id && ep->ch[i]->state != CH_DEAD)
            return ep->ch[i];
    return NULL;
}

struct chan *ep_chan_find_live(const struct ep *ep, uint32_t id)
{
    struct chan *c = ep_chan_find(ep, id);
    return c && c->state != CH_CLOSING ? c : NULL;
}

void ep_chan_snap_clear(struct snap *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

void ep_chan_free(struct chan *c)
{
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_free(&c->tx[s].ring);
    free(c->open_frame);
    ep_chan_snap_clear(&c->snap);
    ep_chan_snap_clear(&c->snap_next);
    free(c->viewers);
    free(c);
}

/* Channels of one kind (proxy or terminal) in the table, dead ones too
 * (they go at the next reap). */
static unsigned count_kind(const struct ep *ep, int proxy)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ep->nch; i++)
        n += (ep->ch[i]->mode == FR_MODE_PROXY) == (proxy != 0);
    return n;
}

struct chan *ep_chan_new(struct ep *ep, uint32_t id, uint8_t mode)
{
    /* at most this many of each kind: terminals, proxy channels */
    static const unsigned max_of[2] = {AL_MAX_CHANNELS, AL_MAX_PROXY_CHANNELS};
    int proxy = mode == FR_MODE_PROXY;
    if (count_kind(ep, proxy) >= max_of[proxy])
        return NULL;
    struct chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->id = id;
    c->mode = mode;
    /* a proxy channel's ring is smaller: an agent's request or answer
     * streams through, it is never kept for a resume */
    size_t ring = proxy && ep->cfg.tx_ring > EP_PROXY_RING ? EP_PROXY_RING : ep->cfg.tx_ring;
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_init(&c->tx[s].ring, ring, 0);
    ep->ch[ep->nch++] = c;
    return c;
}

/* Release dead channels; only outside callbacks. */
void ep_chan_reap(struct ep *ep)
{
    if (ep->in_callback)
        return;
    unsigned j = 0;
    for (unsigned i = 0; i < ep->nch; i++) {
        if (ep->ch[i]->state == CH_DEAD)
            ep_chan_free(ep->ch[i]);
        else
            ep->ch[j++] = ep->ch[i];
    }
    ep->nch = j;
    if (ep->rr >= ep->nch)
        ep->rr = 0;
}

void ep_chan_kill(struct ep *ep, struct chan *c, const char *why)
{
    (void)ep_chan_set_state(ep, c, CH_DEAD, why);
    ep_chan_reap(ep);
}

int ep_close(struct ep *ep, uint32_t ch)
{
    struct chan *c = ep_chan_find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (c->state == CH_CLOSING)
        return AL_OK;
    if (c->pending & P_PROXY_OPEN) {
        ep_chan_kill(ep, c, "closed before its PROXY_OPEN went out"); /* the peer never knew */
        return AL_OK;
    }
    if (ep_is_host(ep) && !ep_chan_linked(ep, c)) {
        ep_chan_kill(ep, c, "closed off link"); /* nobody to tell now; ATTACH will learn it */
        return AL_OK;
    }
    if (c->state == CH_NEW) {
        struct ep_event ev = {.type = EP_EV_CLOSED, .channel = c->id};
        ep_emit(ep, &ev);
        ep_chan_kill(ep, c, "closed before the OPEN went out");
        return AL_OK;
    }
    (void)ep_chan_set_state(ep, c, CH_CLOSING, "closed by the application");
    c->pending = P_CLOSE;
    return AL_OK;
}

unsigned ep_channel_count(const struct ep *ep)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ep->nch; i++)
        n += ep->ch[i]->state != CH_DEAD && ep->ch[i]->mode != FR_MODE_PROXY;
    return n;
}

unsigned ep_proxy_count(const struct ep *ep)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ep->nch; i++)
        n += ep->ch[i]->state != CH_DEAD && ep->ch[i]->mode == FR_MODE_PROXY;
    return n;
}
