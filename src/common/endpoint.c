/*
 * endpoint: the airlock.v1 state machine (see endpoint.h, docs/protocol.md).
 *
 * Data model
 * ----------
 * struct ep holds the link state (HELLO sent/received, peer limits, timers,
 * fatal error) and up to AL_MAX_CHANNELS channels. A channel has three
 * streams (stdin, stdout, stderr); per role each stream is either outgoing
 * (a struct txs) or incoming (a struct rxs). Offsets are absolute byte
 * counts since the channel opened, 64-bit, never reset.
 *
 *   outgoing (txs):  ring [base .. end)   bytes written by the application
 *                    acked <= sent <= end  peer acknowledged / sent this link
 *                    limit                 peer's credit: send below this
 *   incoming (rxs):  consumed <= next      delivered by the app / received
 *                    ack_sent, limit_sent  what our last ACK told the peer
 *
 * Nothing is queued as encoded frames except ERRORs: what must be sent is
 * kept as state (pending bits, offsets) and ep_output() derives the next
 * frame from it. Memory is therefore bounded by the rings, the snapshot
 * buffers and fixed arrays; a retransmission after a new link is just a
 * rewind of `sent`.
 *
 * Snapshots (host): a snapshot at stdout offset X goes out once stdout has
 * been sent up to X (and any GAP before it), and no stdout beyond X goes
 * before its last chunk; so the receiver's next is X when it arrives. A
 * snapshot queued while another is half sent waits in snap_next.
 *
 * Input: which frame types the peer's role may send, which of them need a
 * channel linked on this link (with the words of the error when it is not),
 * and the answer to a frame for an unknown channel (NO_CHANNEL from a host,
 * dropped when it may race a CLOSE, else a protocol error) come from
 * frame.c's table of types (fr_type_info); the handlers check the rest.
 *
 * Relay sessions (host): a channel may be a viewer, whose stdin gets no
 * credit; the application moves stdin offsets with ep_set_role() because it
 * merges several writers into one stream. The controller follows ROLE.
 *
 * Ownership: the endpoint owns its channels; a channel owns its rings, its
 * saved OPEN frame, its snapshot buffers and its VIEWERS list.
 *
 * Channel states
 * --------------
 * A channel is in one state (enum chstate) and its process in one exit
 * state (enum exstate). Both change only through chan_set_state() and
 * chan_set_exit(), which check the move against a table per role
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
 * "Linked" (the frames marked FR_T_LINKED may flow) is LINKED, or a host's
 * OPENING: its OPEN came on this link. A CLOSING channel takes no frame
 * but CLOSE, so whether it was linked does not matter. CH_NONE is a
 * channel being created; CH_DEAD one that find() no longer sees, freed by
 * reap() outside callbacks.
 *
 * Not states: `viewer` is a role, which the application changes in any
 * open state (ep_set_role); `in_stale` says that stdin numbered before our
 * last ROLE may still arrive on this link, a condition of one stream on
 * one link (cleared at link down) as txs.eof_sent is; `pending` holds
 * frames to send. A controller's adopted channel (ep_adopt) is simply one
 * that starts DETACHED.
 */
#include "endpoint.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "ring.h"

/* A channel's state (the diagram above); every change goes through
 * chan_set_state(). */
enum chstate {
    CH_NONE = 0, /* being created: chan_new() hands it out so */
    CH_NEW,      /* controller: OPEN queued, not sent on any link yet */
    CH_OPENING,  /* controller: OPEN sent, not answered; host: OPEN came on
                  * this link (so it counts as linked), the app has not answered */
    CH_DETACHED, /* open, not opened or attached on this link: no data flows */
    CH_LINKED,   /* open, opened or attached on this link: data flows */
    CH_CLOSING,  /* CLOSE to send (and, controller, to be answered) */
    CH_DEAD,     /* gone: invisible to find(), freed by reap() */
    CH_NSTATES
};

/* The process's exit, a state of its own (chan_set_exit()): it ends while
 * the channel is in any open state, and the host reports it once per link. */
enum exstate {
    EX_RUNNING = 0,
    EX_EXITED,   /* host: ep_exit(); controller: EXIT received */
    EX_REPORTED, /* host: EXIT sent on this link */
    EX_NSTATES
};

/* Per-channel pending frames (bits of chan.pending). */
enum {
    P_OPEN = 1 << 0,     /* controller */
    P_ATTACH = 1 << 1,   /* controller */
    P_CLOSE = 1 << 2,    /* both */
    P_RESIZE = 1 << 3,   /* controller */
    P_SNAPREQ = 1 << 4,  /* controller */
    P_OPENED = 1 << 5,   /* host */
    P_ATTACHED = 1 << 6, /* host */
    P_ROLE = 1 << 7,     /* host */
    P_VIEWERS = 1 << 8,  /* host */
    P_TAKEOVER = 1 << 9, /* controller */
};

struct txs {
    struct ring ring;
    uint64_t sent, acked, limit;
    uint64_t gap_from, gap_to; /* GAP to send when gap_to > gap_from */
    uint64_t role_sent;        /* controller stdin: sent before a ROLE moved `sent`
                                * back; the host may still acknowledge up to here */
    int eof, eof_sent;
};

/* A whole snapshot: the host's outgoing one, or the controller's partial
 * incoming one. */
struct snap {
    int active;
    uint8_t *p; /* owned */
    size_t len, pos;
    uint64_t off; /* stdout offset the screen corresponds to */
    uint16_t cols, rows;
};

/* A VIEWERS frame to send (host). */
struct vlist {
    unsigned count;
    uint8_t role[AL_MAX_VIEWERS];
    uint8_t len[AL_MAX_VIEWERS];
    char name[AL_MAX_VIEWERS][AL_MAX_VIEWER_NAME];
};

struct rxs {
    uint64_t next, consumed, ack_sent, limit_sent;
    int eof;
};

struct chan {
    uint32_t id;
    enum chstate state; /* changed by chan_set_state() only */
    enum exstate exit;  /* changed by chan_set_exit() only */
    uint8_t mode;
    int viewer;   /* host: a relay viewer, its stdin never gets credit (a role) */
    int in_stale; /* host: stdin sent before our last ROLE may still come (this link) */
    uint32_t pending;
    uint32_t pid;
    uint16_t cols, rows;
    struct txs tx[FR_NSTREAMS];
    struct rxs rx[FR_NSTREAMS];
    uint8_t *open_frame; /* controller: encoded OPEN, for resending */
    size_t open_len;
    uint8_t sigs[AL_MAX_PENDING_SIGNALS][2];
    unsigned nsigs;
    /* exit status (exit != EX_RUNNING): host sends it, controller records it */
    int32_t exit_code;
    uint8_t exit_sig, exit_core;
    /* snapshot: host's outgoing one, or controller's partial incoming one;
     * host: the next one, queued while snap is half sent */
    struct snap snap, snap_next;
    struct vlist *viewers; /* host: VIEWERS to send (P_VIEWERS) */
};

struct errq {
    uint32_t channel;
    uint16_t code;
    char msg[128];
};

struct ep {
    struct ep_config cfg;
    char name[AL_MAX_NAME + 1];
    /* link */
    int up, hello_sent, peer_hello;
    uint16_t version;
    uint32_t peer_max_frame;
    uint64_t last_rx_us, last_ping_us;
    int ping_due, pong_due;
    uint64_t pong_ts;
    int list_due, list_reply_due;
    uint8_t token[AL_MAX_TOKEN];
    size_t token_len;
    uint64_t token_deadline_us; /* 0: none */
    /* fatal state */
    int closing, close_code;
    char close_reason[128];
    struct errq errs[AL_MAX_PENDING_ERRORS];
    unsigned nerrs;
    /* channels */
    struct chan *ch[AL_MAX_CHANNELS];
    unsigned nch;
    unsigned rr; /* round-robin start for fair output */
    uint32_t next_id;
    int in_callback;
    uint32_t attach_ch;       /* host: channel of the ATTACH in EP_EV_ATTACH */
    struct fr_frame *scratch; /* decoded input frame; owned */
};

/* ---- helpers -------------------------------------------------------------- */

static int is_host(const struct ep *ep)
{
    return ep->cfg.role == FR_ROLE_HOST;
}

/* Whether this side sends on the stream. */
static int is_tx(const struct ep *ep, unsigned s)
{
    return is_host(ep) ? s != FR_STDIN : s == FR_STDIN;
}

/* Whether the stream exists in this channel's mode (stderr: pipes only). */
static int stream_used(const struct chan *c, unsigned s)
{
    return s != FR_STDERR || c->mode == FR_MODE_PIPES;
}

static void emit(struct ep *ep, struct ep_event *ev)
{
    if (!ep->cfg.on_event)
        return;
    ep->in_callback++;
    ep->cfg.on_event(ep->cfg.ud, ev);
    ep->in_callback--;
}

/* A line for the application's log (al_log's levels), if it wants one. */
static void ep_log(const struct ep *ep, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ep_log(const struct ep *ep, int level, const char *fmt, ...)
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

/* ---- channel states --------------------------------------------------------- */

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
        [CH_LINKED] = TO(CH_DETACHED) | TO(CH_CLOSING),
        [CH_CLOSING] = TO(CH_DEAD),
    },
    {
        /* controller */
        [CH_NONE] = TO(CH_NEW) | TO(CH_DETACHED),
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
 * bug of this file (no input can cause one): assert in a debug build, else
 * log an error and refuse it (AL_E_STATE). */
static int move_ok(const struct ep *ep, const struct chan *c, const char *what,
                   const char *const *names, const uint16_t *moves, unsigned from, unsigned to,
                   const char *why)
{
    const char *role = is_host(ep) ? "host" : "controller";
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

static int chan_set_state(struct ep *ep, struct chan *c, enum chstate to, const char *why)
{
    if (c->state == to)
        return AL_OK;
    if (!move_ok(ep, c, "state", chstate_names, chstate_moves[ROLE_IX(ep->cfg.role)], c->state, to,
                 why))
        return AL_E_STATE;
    c->state = to;
    return AL_OK;
}

static int chan_set_exit(struct ep *ep, struct chan *c, enum exstate to, const char *why)
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

/* Open: DATA may flow once linked (what CH_OPEN was before the states). */
static int chan_is_open(const struct chan *c)
{
    return c->state == CH_DETACHED || c->state == CH_LINKED;
}

/* OPEN not answered yet (controller: sent or not). */
static int chan_is_opening(const struct chan *c)
{
    return c->state == CH_NEW || c->state == CH_OPENING;
}

/* Opened or attached on this link: the frames FR_T_LINKED may come and go.
 * A host's OPENING channel is: its OPEN came on this link. */
static int chan_linked(const struct ep *ep, const struct chan *c)
{
    return c->state == CH_LINKED || (is_host(ep) && c->state == CH_OPENING);
}

static struct chan *find(const struct ep *ep, uint32_t id)
{
    for (unsigned i = 0; i < ep->nch; i++)
        if (ep->ch[i]->id == id && ep->ch[i]->state != CH_DEAD)
            return ep->ch[i];
    return NULL;
}

static void snap_clear(struct snap *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

static void chan_free(struct chan *c)
{
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_free(&c->tx[s].ring);
    free(c->open_frame);
    snap_clear(&c->snap);
    snap_clear(&c->snap_next);
    free(c->viewers);
    free(c);
}

static struct chan *chan_new(struct ep *ep, uint32_t id, uint8_t mode)
{
    if (ep->nch >= AL_MAX_CHANNELS)
        return NULL;
    struct chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->id = id;
    c->mode = mode;
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_init(&c->tx[s].ring, ep->cfg.tx_ring, 0);
    ep->ch[ep->nch++] = c;
    return c;
}

/* Release dead channels; only outside callbacks. */
static void reap(struct ep *ep)
{
    if (ep->in_callback)
        return;
    unsigned j = 0;
    for (unsigned i = 0; i < ep->nch; i++) {
        if (ep->ch[i]->state == CH_DEAD)
            chan_free(ep->ch[i]);
        else
            ep->ch[j++] = ep->ch[i];
    }
    ep->nch = j;
    if (ep->rr >= ep->nch)
        ep->rr = 0;
}

static void kill_chan(struct ep *ep, struct chan *c, const char *why)
{
    (void)chan_set_state(ep, c, CH_DEAD, why);
    reap(ep);
}

static void queue_error(struct ep *ep, uint32_t channel, uint16_t code, const char *msg)
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
static int fail(struct ep *ep, int err, uint16_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct ep *ep, int err, uint16_t code, const char *fmt, ...)
{
    if (ep->closing)
        return err;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(ep->close_reason, sizeof ep->close_reason, fmt, ap);
    va_end(ap);
    queue_error(ep, 0, code, ep->close_reason);
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
    fail(ep, AL_OK, code, "%s", msg ? msg : ""); /* closing already: that close stands */
    return AL_OK;
}

static int fail_proto(struct ep *ep, const char *what, const struct fr_frame *f)
{
    return fail(ep, AL_E_PROTO, FR_ERR_PROTOCOL, "%s (%s on channel %u)", what,
                fr_type_name(f->type), (unsigned)f->channel);
}

/* DATA, EOF or GAP on a stream we do not receive, ACK on one we do not send. */
static int fail_stream(struct ep *ep, const struct fr_frame *f)
{
    char what[48];
    (void)snprintf(what, sizeof what, "%s on a stream we do not %s", fr_type_name(f->type),
                   f->type == FR_ACK ? "send" : "receive");
    return fail_proto(ep, what, f);
}

static void rx_grant(struct ep *ep, struct rxs *r)
{
    r->ack_sent = r->consumed;
    r->limit_sent = r->consumed + ep->cfg.window;
}

/* Host: grant stdin credit afresh, none to a viewer. */
static void stdin_grant(struct ep *ep, struct chan *c)
{
    struct rxs *r = &c->rx[FR_STDIN];
    if (!c->viewer) {
        rx_grant(ep, r);
        return;
    }
    r->ack_sent = r->consumed;
    r->limit_sent = r->next;
}

/* An outgoing stream restarts, empty, at offset off. */
static void tx_restart(struct txs *t, uint64_t off)
{
    ring_reset(&t->ring, off);
    t->sent = t->acked = off;
    t->gap_from = t->gap_to = 0;
    t->role_sent = 0;
}

/*
 * Host: queue a snapshot whose bytes `p` (owned from now on) redraw the
 * screen at stdout offset off. One already half sent finishes first.
 */
static void snap_put(struct chan *c, uint64_t off, uint16_t cols, uint16_t rows, uint8_t *p,
                     size_t n)
{
    struct snap *s = c->snap.active && c->snap.pos > 0 ? &c->snap_next : &c->snap;
    snap_clear(s);
    s->active = 1;
    s->p = p;
    s->len = n; /* an empty screen is one empty final chunk */
    s->off = off;
    s->cols = cols;
    s->rows = rows;
}

/*
 * The peer says it has received up to `next` of an outgoing stream and lets
 * us send below `limit`: rewind to there, or past a gap if the ring no
 * longer holds it. Returns 0 or AL_E_PROTO.
 */
static int tx_resume(struct txs *t, uint64_t next, uint64_t limit, int may_skip)
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

/* ---- lifecycle ------------------------------------------------------------ */

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

void ep_free(struct ep *ep)
{
    if (!ep)
        return;
    for (unsigned i = 0; i < ep->nch; i++)
        chan_free(ep->ch[i]);
    free(ep->scratch);
    free(ep);
}

void ep_link_up(struct ep *ep, uint64_t now_us)
{
    ep_link_down(ep);
    ep->up = 1;
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
    for (unsigned i = 0; i < ep->nch; i++) {
        struct chan *c = ep->ch[i];
        if (c->state == CH_LINKED)
            (void)chan_set_state(ep, c, CH_DETACHED, "link down");
        if (c->exit == EX_REPORTED)
            (void)chan_set_exit(ep, c, EX_EXITED, "link down");
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
        snap_clear(&c->snap);
        snap_clear(&c->snap_next);
        if (is_host(ep) && c->state == CH_CLOSING) /* the next controller learns it from ATTACH */
            (void)chan_set_state(ep, c, CH_DEAD, "link down while closing");
        if (is_host(ep) &&
            c->state == CH_OPENING) /* never confirmed: the controller will re-OPEN */
            (void)chan_set_state(ep, c, CH_DEAD, "link down before OPENED");
    }
    reap(ep);
}

int ep_ready(const struct ep *ep)
{
    return ep->up && ep->hello_sent && ep->peer_hello;
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

/* ---- input ---------------------------------------------------------------- */

static int on_hello(struct ep *ep, const struct fr_frame *f)
{
    if (ep->peer_hello)
        return fail_proto(ep, "second HELLO", f);
    uint16_t lo = f->u.hello.version_min, hi = f->u.hello.version_max;
    if (lo > AL_PROTO_VERSION || hi < AL_PROTO_VERSION)
        return fail(ep, AL_E_VERSION, FR_ERR_VERSION,
                    "no common version: peer speaks %u..%u, we speak %u", lo, hi, AL_PROTO_VERSION);
    if (f->u.hello.role == ep->cfg.role)
        return fail(ep, AL_E_PROTO, FR_ERR_PROTOCOL, "both sides claim the %s role",
                    is_host(ep) ? "host" : "controller");
    ep->peer_hello = 1;
    ep->version = AL_PROTO_VERSION;
    ep->peer_max_frame = f->u.hello.max_frame;
    if (!is_host(ep)) {
        /* resume every channel the controller knows */
        for (unsigned i = 0; i < ep->nch; i++) {
            struct chan *c = ep->ch[i];
            if (c->state == CH_CLOSING)
                c->pending |= P_CLOSE;
            else if (c->state == CH_NEW)
                c->pending |= P_OPEN;
            else
                c->pending |= P_ATTACH;
        }
    }
    struct ep_event ev = {.type = EP_EV_READY, .version = ep->version};
    emit(ep, &ev);
    return AL_OK;
}

static int on_open(struct ep *ep, const struct fr_frame *f)
{
    if (find(ep, f->channel)) {
        queue_error(ep, f->channel, FR_ERR_CHANNEL_EXISTS, "channel already open");
        return AL_OK;
    }
    struct chan *c = chan_new(ep, f->channel, f->u.open.mode);
    if (!c) {
        queue_error(ep, f->channel, FR_ERR_LIMIT, "too many channels");
        return AL_OK;
    }
    (void)chan_set_state(ep, c, CH_OPENING, "OPEN received");
    c->cols = f->u.open.cols;
    c->rows = f->u.open.rows;
    struct ep_event ev = {.type = EP_EV_OPEN, .channel = f->channel, .open = &f->u.open};
    emit(ep, &ev);
    return AL_OK;
}

static int on_attach(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (c->state == CH_OPENING) /* the app has not answered the OPEN yet */
        return fail_proto(ep, "ATTACH before OPENED", f);
    if (tx_resume(&c->tx[FR_STDOUT], f->u.attach.out_next, f->u.attach.out_limit, 0) ||
        tx_resume(&c->tx[FR_STDERR], f->u.attach.err_next, f->u.attach.err_limit, 0))
        return fail_proto(ep, "ATTACH beyond the end of the stream", f);
    (void)chan_set_state(ep, c, CH_LINKED, "ATTACH received");
    stdin_grant(ep, c);
    c->pending |= P_ATTACHED;
    if (f->u.attach.cols && (f->u.attach.cols != c->cols || f->u.attach.rows != c->rows)) {
        c->cols = f->u.attach.cols;
        c->rows = f->u.attach.rows;
        struct ep_event ev = {
            .type = EP_EV_RESIZE, .channel = c->id, .cols = c->cols, .rows = c->rows};
        emit(ep, &ev);
    }
    return AL_OK;
}

static int on_attached(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (c->state == CH_LINKED || c->state == CH_CLOSING)
        return fail_proto(ep, "unexpected ATTACHED", f);
    /* in_next beyond what we wrote: we restarted, or (relay session) another
     * writer typed in between; either way stdin goes on there */
    (void)tx_resume(&c->tx[FR_STDIN], f->u.attached.in_next, f->u.attached.in_limit, 1);
    (void)chan_set_state(ep, c, CH_LINKED, "ATTACHED received");
    struct ep_event ev = {.type = EP_EV_ATTACHED, .channel = c->id, .state = f->u.attached.state};
    emit(ep, &ev);
    return AL_OK;
}

static int on_data(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    uint64_t off = f->u.data.offset, n = f->u.data.bytes.len;
    if (is_tx(ep, s) || !stream_used(c, s))
        return fail_stream(ep, f);
    if (c->in_stale && s == FR_STDIN && (r->eof || off > r->next || off + n > r->limit_sent))
        return AL_OK; /* sent before our ROLE reached the controller */
    if (r->eof)
        return fail_proto(ep, "DATA after EOF", f);
    if (off > r->next)
        return fail_proto(ep, "DATA leaves a hole", f);
    if (off + n > r->limit_sent)
        return fail_proto(ep, "DATA beyond the granted credit", f);
    if (off + n <= r->next)
        return AL_OK; /* already have it all */
    uint64_t skip = r->next - off;
    r->next = off + n;
    struct ep_event ev = {.type = EP_EV_DATA,
                          .channel = c->id,
                          .stream = s,
                          .offset = off + skip,
                          .data = f->u.data.bytes.p + skip,
                          .len = (size_t)(n - skip)};
    emit(ep, &ev);
    return AL_OK;
}

static int on_ack(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct txs *t = &c->tx[s];
    if (!is_tx(ep, s))
        return fail_stream(ep, f);
    if (!stream_used(c, s)) {
        /* a PTY's stderr: never carries a byte, so credit on it is
         * harmless and ignored; acknowledging a byte of it is not */
        if (f->u.ack.ack != 0)
            return fail_proto(ep, "ACK of bytes never sent", f);
        return AL_OK;
    }
    if (f->u.ack.ack > t->sent && f->u.ack.ack > t->role_sent)
        return fail_proto(ep, "ACK of bytes never sent", f);
    size_t before = ep_writable(ep, c->id, s);
    if (f->u.ack.ack > t->sent)
        t->sent = f->u.ack.ack; /* sent before a ROLE: no need to send them again */
    if (f->u.ack.ack > t->acked)
        t->acked = f->u.ack.ack;
    if (f->u.ack.limit > t->limit)
        t->limit = f->u.ack.limit;
    if (ep_writable(ep, c->id, s) > before) {
        struct ep_event ev = {.type = EP_EV_WRITABLE, .channel = c->id, .stream = s};
        emit(ep, &ev);
    }
    return AL_OK;
}

static int on_eof(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    if (is_tx(ep, s) || !stream_used(c, s))
        return fail_stream(ep, f);
    if (s == FR_STDIN && c->in_stale && (c->viewer || f->u.eof.offset != r->next))
        return AL_OK; /* sent before our ROLE reached the controller */
    if (s == FR_STDIN && c->viewer) {
        queue_error(ep, c->id, FR_ERR_FORBIDDEN, "a viewer may not end the input");
        return AL_OK;
    }
    if (f->u.eof.offset != r->next)
        return fail_proto(ep, "EOF not at the end of the received data", f);
    if (r->eof)
        return AL_OK; /* resent after a resume */
    r->eof = 1;
    struct ep_event ev = {.type = EP_EV_EOF, .channel = c->id, .stream = s, .offset = r->next};
    emit(ep, &ev);
    return AL_OK;
}

static int on_gap(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    unsigned s = f->flags;
    struct rxs *r = &c->rx[s];
    if (is_tx(ep, s) || !stream_used(c, s))
        return fail_stream(ep, f);
    if (f->u.gap.from != r->next || r->eof)
        return fail_proto(ep, "GAP does not start at the next byte", f);
    r->next = f->u.gap.to;
    r->consumed = r->next; /* nothing to deliver */
    struct ep_event ev = {.type = EP_EV_GAP,
                          .channel = c->id,
                          .stream = s,
                          .offset = f->u.gap.from,
                          .to = f->u.gap.to};
    emit(ep, &ev);
    return AL_OK;
}

static int on_exit_frame(struct ep *ep, struct chan *c, const struct fr_frame *f)
{
    if (f->u.exit.out_end != c->rx[FR_STDOUT].next || f->u.exit.err_end != c->rx[FR_STDERR].next)
        return fail_proto(ep, "EXIT before all output", f);
    if (c->exit != EX_RUNNING)
        return AL_OK; /* resent after a resume */
    (void)chan_set_exit(ep, c, EX_EXITED, "EXIT received");
    c->exit_code = f->u.exit.code;
    c->exit_sig = f->u.exit.signo;
    c->exit_core = f->u.exit.core;
    struct ep_event ev = {.type = EP_EV_EXIT,
                          .channel = c->id,
                          .exit_code = f->u.exit.code,
                          .signo = f->u.exit.signo,
                          .core = f->u.exit.core};
    emit(ep, &ev);
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
        return fail_proto(ep, "SNAPSHOT chunks disagree", f);
    }
    if (b->len > AL_MAX_SNAPSHOT - sn->len)
        return fail(ep, AL_E_TOOBIG, FR_ERR_TOO_BIG, "snapshot larger than %u bytes",
                    (unsigned)AL_MAX_SNAPSHOT);
    if (b->len) {
        uint8_t *p = realloc(sn->p, sn->len + b->len);
        if (!p)
            return fail(ep, AL_E_NOMEM, FR_ERR_INTERNAL, "out of memory");
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
    emit(ep, &ev);
    snap_clear(sn);
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
    emit(ep, &ev);
    if (ep_writable(ep, c->id, FR_STDIN) > before) {
        struct ep_event w = {.type = EP_EV_WRITABLE, .channel = c->id, .stream = FR_STDIN};
        emit(ep, &w);
    }
    return AL_OK;
}

static int on_error(struct ep *ep, const struct fr_frame *f)
{
    struct chan *c = f->channel ? find(ep, f->channel) : NULL;
    if (c && !is_host(ep) && f->u.error.code == FR_ERR_NO_CHANNEL) {
        if (chan_is_opening(c)) {
            c->pending |= P_OPEN; /* the OPEN was lost with the last link */
            return AL_OK;
        }
        struct ep_event ev = {.type = c->state == CH_CLOSING ? EP_EV_CLOSED : EP_EV_LOST,
                              .channel = c->id};
        emit(ep, &ev);
        kill_chan(ep, c, "NO_CHANNEL received");
        return AL_OK;
    }
    if (c && !is_host(ep) && chan_is_opening(c) &&
        (f->u.error.code == FR_ERR_OPEN_FAILED || f->u.error.code == FR_ERR_LIMIT ||
         f->u.error.code == FR_ERR_CHANNEL_EXISTS)) {
        struct ep_event ev = {.type = EP_EV_ERROR,
                              .channel = c->id,
                              .code = f->u.error.code,
                              .data = (const uint8_t *)f->u.error.msg.p,
                              .len = f->u.error.msg.len};
        emit(ep, &ev);
        struct ep_event cl = {.type = EP_EV_CLOSED, .channel = c->id};
        emit(ep, &cl);
        kill_chan(ep, c, "OPEN refused");
        return AL_OK;
    }
    struct ep_event ev = {.type = EP_EV_ERROR,
                          .channel = f->channel,
                          .code = f->u.error.code,
                          .data = (const uint8_t *)f->u.error.msg.p,
                          .len = f->u.error.msg.len};
    emit(ep, &ev);
    return AL_OK;
}

/* Whether the peer's role may send a frame type (frame.c's table). */
static int allowed(const struct ep *ep, const struct fr_typeinfo *t)
{
    return (t->senders & FR_BY(is_host(ep) ? FR_ROLE_CONTROLLER : FR_ROLE_HOST)) != 0;
}

/* A frame that needs a linked channel came for one not linked on this
 * link: say what should have come first (for a stream frame, that it is
 * about a stream we do not have). */
static int fail_unlinked(struct ep *ep, const struct fr_typeinfo *t, const struct fr_frame *f)
{
    if (t->props & FR_T_STREAM)
        return fail_stream(ep, f);
    char what[48];
    int relay = (t->props & FR_T_RELAY) != 0;
    (void)snprintf(what, sizeof what, "%s before %s", t->name,
                   is_host(ep) ? (relay ? "ATTACH" : "OPEN/ATTACH")
                               : (relay ? "ATTACHED" : "OPENED/ATTACHED"));
    return fail_proto(ep, what, f);
}

static int dispatch_chan(struct ep *ep, struct chan *c, const struct fr_typeinfo *t,
                         const struct fr_frame *f)
{
    if ((t->props & FR_T_LINKED) && !chan_linked(ep, c))
        return fail_unlinked(ep, t, f);
    switch (f->type) {
    case FR_OPENED:
        if (!chan_is_opening(c))
            return fail_proto(ep, "unexpected OPENED", f);
        (void)chan_set_state(ep, c, CH_LINKED, "OPENED received");
        c->pid = f->u.opened.pid;
        /* a new channel starts with no credit: grant it afresh, even if an
         * ATTACH refused by the host claimed to */
        for (unsigned st = FR_STDOUT; st <= FR_STDERR; st++) {
            c->rx[st].ack_sent = c->rx[st].consumed;
            c->rx[st].limit_sent = 0;
        }
        {
            struct ep_event ev = {.type = EP_EV_OPENED, .channel = c->id, .pid = c->pid};
            emit(ep, &ev);
        }
        return AL_OK;
    case FR_ATTACH:
        return on_attach(ep, c, f);
    case FR_ATTACHED:
        return on_attached(ep, c, f);
    case FR_DATA:
        return on_data(ep, c, f);
    case FR_ACK:
        return on_ack(ep, c, f);
    case FR_EOF:
        return on_eof(ep, c, f);
    case FR_GAP:
        return on_gap(ep, c, f);
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
            emit(ep, &ev);
        }
        return AL_OK;
    case FR_SIGNAL: {
        struct ep_event ev = {.type = EP_EV_SIGNAL,
                              .channel = c->id,
                              .signo = f->u.signal.signo,
                              .scope = f->u.signal.scope};
        emit(ep, &ev);
        return AL_OK;
    }
    case FR_SNAPSHOT_REQ: {
        struct ep_event ev = {.type = EP_EV_SNAPSHOT_REQ, .channel = c->id};
        emit(ep, &ev);
        return AL_OK;
    }
    case FR_TAKEOVER: {
        struct ep_event ev = {.type = EP_EV_TAKEOVER, .channel = c->id};
        emit(ep, &ev);
        return AL_OK;
    }
    case FR_ROLE:
        return on_role(ep, c, f);
    case FR_VIEWERS: {
        struct ep_event ev = {.type = EP_EV_VIEWERS, .channel = c->id, .list = f};
        emit(ep, &ev);
        return AL_OK;
    }
    case FR_CLOSE: {
        struct ep_event ev = {.type = EP_EV_CLOSED, .channel = c->id};
        if (is_host(ep)) {
            /* the controller asks: stop it, forget it, confirm */
            emit(ep, &ev);
            (void)chan_set_state(ep, c, CH_CLOSING, "CLOSE received");
            c->pending = P_CLOSE;
        } else {
            /* the host closed it, or confirms our CLOSE */
            emit(ep, &ev);
            kill_chan(ep, c, "CLOSE received");
        }
        return AL_OK;
    }
    default:
        return fail_proto(ep, "unexpected frame", f);
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
                          .rows = f->u.attach.rows};
    ep->attach_ch = f->channel;
    emit(ep, &ev);
    ep->attach_ch = 0;
    return find(ep, f->channel);
}

int ep_input(struct ep *ep, const uint8_t *msg, size_t len, uint64_t now_us)
{
    if (!ep->up || ep->closing)
        return AL_E_CLOSED;
    ep->last_rx_us = now_us;
    struct fr_frame *f = ep->scratch;
    int rc = fr_decode(msg, len, f);
    if (rc == AL_E_TYPE) {
        rc = fail(ep, rc, FR_ERR_UNKNOWN_TYPE, "unknown frame type 0x%02x", len ? msg[0] : 0);
    } else if (rc == AL_E_TOOBIG) {
        rc = fail(ep, rc, FR_ERR_TOO_BIG, "frame larger than %u bytes", (unsigned)AL_MAX_FRAME);
    } else if (rc < 0) {
        rc = fail(ep, rc, FR_ERR_PROTOCOL, "malformed %s frame", fr_type_name(len ? msg[0] : 0));
    } else if (!ep->peer_hello && f->type != FR_HELLO) {
        rc = fail_proto(ep, "frame before HELLO", f);
    } else if (!allowed(ep, fr_type_info(f->type))) {
        rc = fail_proto(
            ep, is_host(ep) ? "frame only a host may send" : "frame only a controller may send", f);
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
            emit(ep, &ev);
            break;
        }
        case FR_TOKEN: {
            struct ep_event ev = {.type = EP_EV_TOKEN, .data = f->u.token.p, .len = f->u.token.len};
            emit(ep, &ev);
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
            emit(ep, &ev);
            break;
        }
        case FR_OPEN:
            rc = on_open(ep, f);
            break;
        default: {
            const struct fr_typeinfo *t = fr_type_info(f->type);
            struct chan *c = find(ep, f->channel);
            if (!c && is_host(ep) && f->type == FR_ATTACH) {
                c = offer_attach(ep, f);
                if (!ep->up || ep->closing)
                    break; /* the application dropped the link */
            }
            if (!c) {
                if (is_host(ep) && (t->props & FR_T_NO_CHANNEL))
                    queue_error(ep, f->channel, FR_ERR_NO_CHANNEL, "no such channel");
                else if (!(t->props & FR_T_LATE))
                    rc = fail_proto(ep, "frame for an unknown channel", f);
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
    reap(ep);
    return rc;
}

/* ---- output --------------------------------------------------------------- */

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
        snap_clear(sn);
        *sn = c->snap_next; /* the one queued meanwhile, if any */
        memset(&c->snap_next, 0, sizeof c->snap_next);
    }
    return rc;
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
        if (is_host(ep))
            kill_chan(ep, c, "CLOSE sent");
        return n;
    }
    if (c->state == CH_CLOSING)
        return 0;
    if (c->pending & P_OPEN) {
        c->pending &= ~(uint32_t)(P_OPEN | P_ATTACH);
        if (c->state == CH_NEW)
            (void)chan_set_state(ep, c, CH_OPENING, "OPEN sent");
        if (c->open_len > cap)
            return AL_E_TOOBIG;
        memcpy(buf, c->open_frame, c->open_len);
        return (long)c->open_len;
    }
    if (c->pending & P_ATTACH) {
        c->pending &= ~(uint32_t)P_ATTACH;
        rx_grant(ep, &c->rx[FR_STDOUT]);
        rx_grant(ep, &c->rx[FR_STDERR]);
        f.type = FR_ATTACH;
        f.u.attach.out_next = c->rx[FR_STDOUT].next;
        f.u.attach.out_limit = c->rx[FR_STDOUT].limit_sent;
        f.u.attach.err_next = c->rx[FR_STDERR].next;
        f.u.attach.err_limit = c->rx[FR_STDERR].limit_sent;
        f.u.attach.cols = f.u.attach.rows = 0; /* only the header was zeroed */
        if (c->pending & P_RESIZE) {
            c->pending &= ~(uint32_t)P_RESIZE;
            f.u.attach.cols = c->cols;
            f.u.attach.rows = c->rows;
        }
        return put(&f, buf, cap);
    }
    if (c->pending & P_OPENED) {
        c->pending &= ~(uint32_t)P_OPENED;
        f.type = FR_OPENED;
        f.u.opened.pid = c->pid;
        return put(&f, buf, cap);
    }
    if (c->pending & P_ATTACHED) {
        c->pending &= ~(uint32_t)P_ATTACHED;
        f.type = FR_ATTACHED;
        f.u.attached.state = c->exit != EX_RUNNING ? FR_CH_EXITED : FR_CH_RUNNING;
        f.u.attached.in_next = c->rx[FR_STDIN].next;
        f.u.attached.in_limit = c->rx[FR_STDIN].limit_sent;
        return put(&f, buf, cap);
    }
    if (!chan_linked(ep, c))
        return 0;
    if (c->pending & P_RESIZE) {
        c->pending &= ~(uint32_t)P_RESIZE;
        f.type = FR_RESIZE;
        f.u.resize.cols = c->cols;
        f.u.resize.rows = c->rows;
        return put(&f, buf, cap);
    }
    if (c->nsigs) {
        f.type = FR_SIGNAL;
        f.u.signal.signo = c->sigs[0][0];
        f.u.signal.scope = c->sigs[0][1];
        memmove(c->sigs[0], c->sigs[1], (--c->nsigs) * sizeof c->sigs[0]);
        return put(&f, buf, cap);
    }
    if (c->pending & P_SNAPREQ) {
        c->pending &= ~(uint32_t)P_SNAPREQ;
        f.type = FR_SNAPSHOT_REQ;
        return put(&f, buf, cap);
    }
    if (c->pending & P_TAKEOVER) {
        c->pending &= ~(uint32_t)P_TAKEOVER;
        f.type = FR_TAKEOVER;
        return put(&f, buf, cap);
    }
    if ((c->pending & P_ROLE) && chan_is_open(c)) {
        const struct rxs *r = &c->rx[FR_STDIN];
        c->pending &= ~(uint32_t)P_ROLE;
        f.type = FR_ROLE;
        f.u.role.role = c->viewer ? FR_VIEWER : FR_WRITER;
        f.u.role.in_next = r->next;
        f.u.role.in_limit = r->limit_sent > r->next ? r->limit_sent : r->next;
        return put(&f, buf, cap);
    }
    if ((c->pending & P_VIEWERS) && chan_is_open(c)) {
        c->pending &= ~(uint32_t)P_VIEWERS;
        const struct vlist *v = c->viewers;
        if (!v)
            return AL_E_STATE; /* cannot happen: P_VIEWERS comes with a list */
        f.type = FR_VIEWERS;
        f.u.viewers.count = (uint16_t)v->count;
        for (unsigned i = 0; i < v->count; i++) {
            f.u.viewers.e[i].name.p = v->name[i];
            f.u.viewers.e[i].name.len = v->len[i];
            f.u.viewers.e[i].role = v->role[i];
        }
        long n = put(&f, buf, cap);
        free(c->viewers);
        c->viewers = NULL;
        return n;
    }
    /* acknowledgements: when a quarter window of credit can be returned */
    for (unsigned s = 0; s < FR_NSTREAMS; s++) {
        struct rxs *r = &c->rx[s];
        if (is_tx(ep, s) || !stream_used(c, s) || r->eof)
            continue;
        if (s == FR_STDIN && c->viewer)
            continue; /* a relay viewer never gets stdin credit */
        uint64_t limit = r->consumed + ep->cfg.window;
        if (limit - r->limit_sent >= ep->cfg.window / 4 && limit > r->limit_sent) {
            r->ack_sent = r->consumed;
            r->limit_sent = limit;
            f.type = FR_ACK;
            f.flags = (uint8_t)s;
            f.u.ack.ack = r->ack_sent;
            f.u.ack.limit = r->limit_sent;
            return put(&f, buf, cap);
        }
    }
    /* outgoing streams: gap, data, eof; the host's snapshot at X goes in
     * stdout's place once stdout is sent up to X, and nothing beyond X
     * goes before its last chunk */
    for (unsigned s = 0; s < FR_NSTREAMS; s++) {
        struct txs *t = &c->tx[s];
        if (!is_tx(ep, s) || !stream_used(c, s))
            continue;
        int snap = is_host(ep) && s == FR_STDOUT && c->snap.active;
        if (snap && c->snap.pos > 0)
            return out_snap(ep, c, &f, buf, cap); /* half sent: finish it first */
        if (t->gap_to > t->gap_from) {
            f.type = FR_GAP;
            f.flags = (uint8_t)s;
            f.u.gap.from = t->gap_from;
            f.u.gap.to = t->gap_to;
            t->gap_from = t->gap_to = 0;
            return put(&f, buf, cap);
        }
        uint64_t end = t->ring.end;
        if (snap && end > c->snap.off)
            end = c->snap.off > t->sent ? c->snap.off : t->sent; /* nothing beyond X */
        if (t->sent < end && t->sent < t->limit) {
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
            f.type = FR_DATA;
            f.flags = (uint8_t)s;
            f.u.data.offset = t->sent;
            f.u.data.bytes.p = p;
            f.u.data.bytes.len = n;
            t->sent += n;
            return put(&f, buf, cap);
        }
        if (snap) {
            if (t->sent >= c->snap.off)
                return out_snap(ep, c, &f, buf, cap);
            continue; /* stdout below X waits for credit */
        }
        if (t->eof && !t->eof_sent && t->sent == t->ring.end) {
            t->eof_sent = 1;
            f.type = FR_EOF;
            f.flags = (uint8_t)s;
            f.u.eof.offset = t->ring.end;
            return put(&f, buf, cap);
        }
    }
    if (is_host(ep) && c->exit == EX_EXITED && c->tx[FR_STDOUT].eof_sent &&
        (c->mode != FR_MODE_PIPES || c->tx[FR_STDERR].eof_sent)) {
        (void)chan_set_exit(ep, c, EX_REPORTED, "EXIT sent");
        f.type = FR_EXIT;
        f.u.exit.code = c->exit_code;
        f.u.exit.signo = c->exit_sig;
        f.u.exit.core = c->exit_core;
        f.u.exit.out_end = c->tx[FR_STDOUT].ring.end;
        f.u.exit.err_end = c->tx[FR_STDERR].ring.end;
        return put(&f, buf, cap);
    }
    return 0;
}

long ep_output(struct ep *ep, uint8_t *buf, size_t cap, uint64_t now_us)
{
    struct fr_frame f;
    memset(&f, 0, offsetof(struct fr_frame, u));
    (void)now_us;
    if (!ep->up)
        return 0;
    reap(ep);
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
            if (!chan_is_open(c))
                continue;
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

void ep_tick(struct ep *ep, uint64_t now_us)
{
    if (!ep->up || ep->closing)
        return;
    if (ep->token_deadline_us && now_us >= ep->token_deadline_us) {
        fail(ep, AL_E_EXPIRED, FR_ERR_TOKEN_EXPIRED, "token expired and no fresh one arrived");
        return;
    }
    if (ep->cfg.idle_timeout_us && now_us - ep->last_rx_us >= ep->cfg.idle_timeout_us) {
        fail(ep, AL_E_TIMEOUT, FR_ERR_TIMEOUT, "peer silent for %llu ms",
             (unsigned long long)((now_us - ep->last_rx_us) / 1000));
        return;
    }
    if (ep->cfg.ping_interval_us && ep_ready(ep) &&
        now_us - ep->last_ping_us >= ep->cfg.ping_interval_us) {
        ep->last_ping_us = now_us;
        ep->ping_due = 1;
    }
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
    return t;
}

/* ---- application calls ---------------------------------------------------- */

static struct chan *find_live(const struct ep *ep, uint32_t id)
{
    struct chan *c = find(ep, id);
    return c && c->state != CH_CLOSING ? c : NULL;
}

long ep_write(struct ep *ep, uint32_t ch, unsigned stream, const uint8_t *p, size_t n)
{
    struct chan *c = find_live(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || !is_tx(ep, stream) || !stream_used(c, stream))
        return AL_E_INVAL;
    struct txs *t = &c->tx[stream];
    if (t->eof)
        return AL_E_STATE;
    size_t room = ep_writable(ep, ch, stream);
    if (n > room)
        n = room;
    int rc = ring_append(&t->ring, p, n);
    return rc < 0 ? rc : (long)n;
}

size_t ep_writable(const struct ep *ep, uint32_t ch, unsigned stream)
{
    const struct chan *c = find_live(ep, ch);
    if (!c || stream >= FR_NSTREAMS || !is_tx(ep, stream) || c->tx[stream].eof)
        return 0;
    const struct txs *t = &c->tx[stream];
    uint64_t used = t->ring.end - t->acked;
    return used >= t->ring.cap ? 0 : (size_t)(t->ring.cap - used);
}

int ep_eof(struct ep *ep, uint32_t ch, unsigned stream)
{
    struct chan *c = find_live(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || !is_tx(ep, stream) || !stream_used(c, stream))
        return AL_E_INVAL;
    c->tx[stream].eof = 1;
    return AL_OK;
}

int ep_consume(struct ep *ep, uint32_t ch, unsigned stream, size_t n)
{
    struct chan *c = find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS || is_tx(ep, stream))
        return AL_E_INVAL;
    struct rxs *r = &c->rx[stream];
    if (n > r->next - r->consumed)
        return AL_E_INVAL;
    r->consumed += n;
    return AL_OK;
}

int ep_close(struct ep *ep, uint32_t ch)
{
    struct chan *c = find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (c->state == CH_CLOSING)
        return AL_OK;
    if (is_host(ep) && !chan_linked(ep, c)) {
        kill_chan(ep, c, "closed off link"); /* nobody to tell now; ATTACH will learn it */
        return AL_OK;
    }
    if (c->state == CH_NEW) {
        struct ep_event ev = {.type = EP_EV_CLOSED, .channel = c->id};
        emit(ep, &ev);
        kill_chan(ep, c, "closed before the OPEN went out");
        return AL_OK;
    }
    (void)chan_set_state(ep, c, CH_CLOSING, "closed by the application");
    c->pending = P_CLOSE;
    return AL_OK;
}

int ep_send_error(struct ep *ep, uint32_t ch, uint16_t code, const char *msg)
{
    if (code == 0 || !msg)
        return AL_E_INVAL;
    if (ep->nerrs >= AL_MAX_PENDING_ERRORS)
        return AL_E_LIMIT;
    queue_error(ep, ch, code, msg);
    return AL_OK;
}

int ep_stream_info(const struct ep *ep, uint32_t ch, unsigned stream, struct ep_stream_info *out)
{
    const struct chan *c = find(ep, ch);
    if (!c)
        return AL_E_NOCHAN;
    if (stream >= FR_NSTREAMS)
        return AL_E_INVAL;
    memset(out, 0, sizeof *out);
    if (is_tx(ep, stream)) {
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

unsigned ep_channel_count(const struct ep *ep)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ep->nch; i++)
        n += ep->ch[i]->state != CH_DEAD;
    return n;
}

/* host */

int ep_opened(struct ep *ep, uint32_t ch, uint32_t pid)
{
    struct chan *c = find(ep, ch);
    if (!is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->state != CH_OPENING)
        return AL_E_STATE;
    (void)chan_set_state(ep, c, CH_LINKED, "opened by the application");
    c->pid = pid;
    rx_grant(ep, &c->rx[FR_STDIN]);
    c->rx[FR_STDIN].limit_sent = 0; /* first ACK after OPENED grants it */
    c->pending |= P_OPENED;
    return AL_OK;
}

int ep_open_failed(struct ep *ep, uint32_t ch, const char *why)
{
    struct chan *c = find(ep, ch);
    if (!is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->state != CH_OPENING)
        return AL_E_STATE;
    queue_error(ep, ch, FR_ERR_OPEN_FAILED, why ? why : "could not start");
    kill_chan(ep, c, "OPEN failed");
    return AL_OK;
}

int ep_exit(struct ep *ep, uint32_t ch, int32_t code, uint8_t signo, uint8_t core)
{
    struct chan *c = find_live(ep, ch);
    if (!is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (c->exit != EX_RUNNING)
        return AL_E_STATE;
    if (signo ? code != -1 || signo >= 128 : code < 0 || code > 255)
        return AL_E_INVAL;
    (void)chan_set_exit(ep, c, EX_EXITED, "exit from the application");
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
    struct chan *c = find_live(ep, ch);
    if (!is_host(ep) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (n > AL_MAX_SNAPSHOT)
        return AL_E_TOOBIG;
    if (offset > c->tx[FR_STDOUT].ring.end)
        return AL_E_INVAL; /* a screen of bytes never written */
    if (!chan_linked(ep, c))
        return AL_E_STATE;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return AL_E_NOMEM;
    if (n)
        memcpy(copy, p, n);
    snap_put(c, offset, cols, rows, copy, n);
    return AL_OK;
}

void ep_set_token_deadline(struct ep *ep, uint64_t deadline_us)
{
    ep->token_deadline_us = deadline_us;
}

int ep_host_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_base, uint64_t err_base,
                  uint64_t in_next)
{
    if (!is_host(ep) || ch == 0 || mode > FR_MODE_PIPES)
        return AL_E_INVAL;
    if (find(ep, ch))
        return AL_E_EXISTS;
    struct chan *c = chan_new(ep, ch, mode);
    if (!c)
        return ep->nch >= AL_MAX_CHANNELS ? AL_E_LIMIT : AL_E_NOMEM;
    c->viewer = 1;                     /* until ep_set_role(FR_WRITER) */
    if (ep->up && ep->attach_ch == ch) /* its ATTACH is being processed */
        (void)chan_set_state(ep, c, CH_LINKED, "adopted during its ATTACH");
    else
        (void)chan_set_state(ep, c, CH_DETACHED, "adopted by the application");
    tx_restart(&c->tx[FR_STDOUT], out_base);
    tx_restart(&c->tx[FR_STDERR], err_base);
    struct rxs *r = &c->rx[FR_STDIN];
    r->next = r->consumed = r->ack_sent = r->limit_sent = in_next;
    return AL_OK;
}

int ep_resync(struct ep *ep, uint32_t ch, uint64_t offset, uint16_t cols, uint16_t rows,
              const uint8_t *snap, size_t n)
{
    struct chan *c = find_live(ep, ch);
    if (!is_host(ep))
        return AL_E_INVAL;
    if (snap && (cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    struct txs *t = &c->tx[FR_STDOUT];
    if (offset < t->ring.end)
        return AL_E_INVAL; /* only forward, past everything written */
    if (!chan_is_open(c) || t->eof)
        return AL_E_STATE;
    if (snap && n > AL_MAX_SNAPSHOT)
        return AL_E_TOOBIG;
    uint8_t *copy = NULL;
    int linked = chan_linked(ep, c);
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
        snap_clear(&c->snap);
    snap_clear(&c->snap_next);
    if (copy)
        snap_put(c, offset, cols, rows, copy, n);
    return AL_OK;
}

int ep_set_role(struct ep *ep, uint32_t ch, uint8_t role, uint64_t in_next)
{
    struct chan *c = find_live(ep, ch);
    if (!is_host(ep) || (role != FR_WRITER && role != FR_VIEWER))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!chan_is_open(c))
        return AL_E_STATE;
    if (chan_linked(ep, c) && !c->viewer)
        c->in_stale = 1; /* it may have stdin in flight, numbered the old way */
    c->viewer = role == FR_VIEWER;
    struct rxs *r = &c->rx[FR_STDIN];
    r->next = r->consumed = in_next;
    r->eof = 0;
    stdin_grant(ep, c);
    c->pending |= P_ROLE;
    return AL_OK;
}

int ep_viewers(struct ep *ep, uint32_t ch, unsigned count, const char *const *names,
               const uint8_t *roles)
{
    struct chan *c = find_live(ep, ch);
    if (!is_host(ep) || (count && (!names || !roles)))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!chan_is_open(c))
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

/* controller */

long ep_open(struct ep *ep, const struct fr_open *o)
{
    if (is_host(ep))
        return AL_E_INVAL;
    if (ep_channel_count(ep) >= AL_MAX_CHANNELS)
        return AL_E_LIMIT;
    uint32_t id = ep->next_id;
    while (find(ep, id) || id == 0)
        id++;
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
    struct chan *c = chan_new(ep, id, o->mode);
    if (!c) {
        free(buf);
        return AL_E_NOMEM;
    }
    uint8_t *shrunk = realloc(buf, (size_t)n);
    c->open_frame = shrunk ? shrunk : buf;
    c->open_len = (size_t)n;
    (void)chan_set_state(ep, c, CH_NEW, "opened by the application");
    c->cols = o->cols;
    c->rows = o->rows;
    if (ep_ready(ep))
        c->pending |= P_OPEN;
    ep->next_id = id + 1;
    return (long)id;
}

int ep_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_next, uint64_t err_next)
{
    if (is_host(ep) || ch == 0 || mode > FR_MODE_PIPES)
        return AL_E_INVAL;
    if (find(ep, ch))
        return AL_E_EXISTS;
    struct chan *c = chan_new(ep, ch, mode);
    if (!c)
        return ep->nch >= AL_MAX_CHANNELS ? AL_E_LIMIT : AL_E_NOMEM;
    (void)chan_set_state(ep, c, CH_DETACHED, "adopted by the application");
    c->rx[FR_STDOUT].next = c->rx[FR_STDOUT].consumed = out_next;
    c->rx[FR_STDERR].next = c->rx[FR_STDERR].consumed = err_next;
    if (ep_ready(ep))
        c->pending |= P_ATTACH;
    if (ch >= ep->next_id)
        ep->next_id = ch + 1;
    return AL_OK;
}

int ep_resize(struct ep *ep, uint32_t ch, uint16_t cols, uint16_t rows)
{
    struct chan *c = find_live(ep, ch);
    if (is_host(ep) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
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
    struct chan *c = find_live(ep, ch);
    if (is_host(ep) || !fr_signal_ok(signo) || scope > FR_SIG_TREE)
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!chan_linked(ep, c))
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
    struct chan *c = find_live(ep, ch);
    if (is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    c->pending |= P_SNAPREQ;
    return AL_OK;
}

int ep_list(struct ep *ep)
{
    if (is_host(ep))
        return AL_E_INVAL;
    ep->list_due = 1;
    return AL_OK;
}

int ep_send_token(struct ep *ep, const char *token, size_t len)
{
    if (is_host(ep) || len == 0 || len > AL_MAX_TOKEN)
        return AL_E_INVAL;
    memcpy(ep->token, token, len);
    ep->token_len = len;
    return AL_OK;
}

int ep_takeover(struct ep *ep, uint32_t ch)
{
    struct chan *c = find_live(ep, ch);
    if (is_host(ep))
        return AL_E_INVAL;
    if (!c)
        return AL_E_NOCHAN;
    if (!ep->up)
        return AL_E_STATE;    /* about a link: the next one would drop it */
    c->pending |= P_TAKEOVER; /* sent once the channel is linked */
    return AL_OK;
}
