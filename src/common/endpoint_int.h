/*
 * endpoint_int: what the endpoint's files share, and nothing else includes
 * (the API is endpoint.h). The endpoint is one state machine written in
 * several files, one concept each:
 *
 *   endpoint.c         the endpoint and its link: config, HELLO state,
 *                      timers (ping, idle, token deadline), fatal errors
 *                      and the close that follows, the ERROR queue, the log
 *   endpoint_chan.c    the channel table and the channel states (the
 *                      diagram and the table of moves)
 *   endpoint_stream.c  streams: offsets, credit, ACK, DATA/EOF/GAP in,
 *                      resume of a stream, the application's stream calls
 *   endpoint_input.c   ep_input: decoding, the per-type checks, dispatch
 *   endpoint_output.c  ep_output: the next frame, derived from state
 *   endpoint_host.c    the host application's calls (and relay sessions)
 *   endpoint_ctl.c     the controller application's calls
 *   endpoint_proxy.c   the credential proxy's channels: PROXY_AT, PROXY_OPEN,
 *                      their close both ways and their end with the link
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
 * Ownership: the endpoint owns its channels; a channel owns its rings, its
 * saved OPEN frame, its snapshot buffers and its VIEWERS list.
 */
#ifndef AL_ENDPOINT_INT_H
#define AL_ENDPOINT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "al_err.h"
#include "endpoint.h"
#include "ring.h"

/* A channel's state (the diagram in endpoint_chan.c); every change goes
 * through ep_chan_set_state(). */
enum chstate {
    CH_NONE = 0, /* being created: ep_chan_new() hands it out so */
    CH_NEW,      /* controller: OPEN queued, not sent on any link yet */
    CH_OPENING,  /* controller: OPEN sent, not answered; host: OPEN came on
                  * this link (so it counts as linked), the app has not answered */
    CH_DETACHED, /* open, not opened or attached on this link: no data flows */
    CH_LINKED,   /* open, opened or attached on this link: data flows */
    CH_CLOSING,  /* CLOSE to send (and, controller, to be answered) */
    CH_DEAD,     /* gone: invisible to ep_chan_find(), freed by ep_chan_reap() */
    CH_NSTATES
};

/* The process's exit, a state of its own (ep_chan_set_exit()): it ends while
 * the channel is in any open state, and the host reports it once per link. */
enum exstate {
    EX_RUNNING = 0,
    EX_EXITED,   /* host: ep_exit(); controller: EXIT received */
    EX_REPORTED, /* host: EXIT sent on this link */
    EX_NSTATES
};

/* Per-channel pending frames (bits of chan.pending). */
enum {
    P_OPEN = 1 << 0,        /* controller */
    P_ATTACH = 1 << 1,      /* controller */
    P_CLOSE = 1 << 2,       /* both */
    P_RESIZE = 1 << 3,      /* controller */
    P_SNAPREQ = 1 << 4,     /* controller */
    P_OPENED = 1 << 5,      /* host */
    P_ATTACHED = 1 << 6,    /* host */
    P_ROLE = 1 << 7,        /* host */
    P_VIEWERS = 1 << 8,     /* host */
    P_TAKEOVER = 1 << 9,    /* controller */
    P_PROXY_OPEN = 1 << 10, /* host: a proxy channel's PROXY_OPEN */
};

struct txs {
    struct ring ring;
    uint64_t sent, acked, limit;
    uint64_t gap_from, gap_to; /* GAP to send when gap_to > gap_from */
    uint64_t role_sent;        /* controller stdin: sent before a ROLE moved `sent`
                                * back; the host may still acknowledge up to here */
    int eof, eof_sent;
    int appended;      /* bytes came in since the last tick looked */
    uint64_t quiet_us; /* since when none has (ep_tick's clock) */
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
    int got;           /* DATA came in since the last tick looked */
    int settle;        /* quiet: acknowledge all consumed, however little */
    uint64_t quiet_us; /* since when no DATA has (ep_tick's clock) */
};

struct chan {
    uint32_t id;
    enum chstate state; /* changed by ep_chan_set_state() only */
    enum exstate exit;  /* changed by ep_chan_set_exit() only */
    uint8_t mode;
    int viewer;       /* host: a relay viewer, its stdin never gets credit (a role) */
    int close_answer; /* proxy channel: our CLOSE answers the peer's: forget it once sent */
    int in_stale;     /* host: stdin sent before our last ROLE may still come (this link) */
    int held;         /* controller: held before (OPENED, ATTACHED, adopted): ATTACH says RESUME */
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
    uint64_t last_tick_us; /* the last ep_tick (settle_streams) */
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
    /* channels: terminals (at most AL_MAX_CHANNELS) and proxy channels (at
     * most AL_MAX_PROXY_CHANNELS) */
    struct chan *ch[AL_MAX_CHANNELS + AL_MAX_PROXY_CHANNELS];
    unsigned nch;
    uint32_t next_proxy_id;               /* host: the next proxy channel id's low bits */
    char proxy_url[AL_MAX_PROXY_URL + 1]; /* host: PROXY_AT's url ("": none) */
    int proxy_at_due;                     /* host: PROXY_AT to send on this link */
    unsigned rr;                          /* round-robin start for fair output */
    uint32_t next_id;
    int in_callback;
    uint32_t attach_ch;       /* host: channel of the ATTACH in EP_EV_ATTACH */
    struct fr_frame *scratch; /* decoded input frame; owned */
};

static inline int ep_is_host(const struct ep *ep)
{
    return ep->cfg.role == FR_ROLE_HOST;
}

/* Whether this side sends on the stream. */
static inline int ep_is_tx(const struct ep *ep, unsigned s)
{
    return ep_is_host(ep) ? s != FR_STDIN : s == FR_STDIN;
}

/* Whether the stream exists in this channel's mode (stderr: pipes only). */
static inline int ep_stream_used(const struct chan *c, unsigned s)
{
    return s != FR_STDERR || c->mode == FR_MODE_PIPES;
}

/* ---- endpoint.c: the link, errors, the log ---------------------------------- */

/* Hand an event to the application (ep->in_callback counts the nesting). */
void ep_emit(struct ep *ep, struct ep_event *ev);
/* A line for the application's log (al_log's levels), if it wants one. */
void ep_log(const struct ep *ep, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Queue a non-fatal ERROR (dropped when AL_MAX_PENDING_ERRORS wait). */
void ep_queue_error(struct ep *ep, uint32_t channel, uint16_t code, const char *msg);
/* A fatal error (code has a close, ep_close_code_of): say why, then close.
 * Returns err, for the caller to return. */
int ep_failf(struct ep *ep, int err, uint16_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A protocol error about frame f; its words name what was wrong. */
int ep_fail_proto(struct ep *ep, const char *what, const struct fr_frame *f);
/* DATA, EOF or GAP on a stream we do not receive, ACK on one we do not send. */
int ep_fail_stream(struct ep *ep, const struct fr_frame *f);

/* ---- endpoint_chan.c: the channel table and its states ---------------------- */

/* Move a channel to another state, or its process to another exit state:
 * AL_E_STATE (logged, and an assert in a debug build) when the role's
 * table lacks the move. Staying put is always allowed and not logged. */
int ep_chan_set_state(struct ep *ep, struct chan *c, enum chstate to, const char *why);
int ep_chan_set_exit(struct ep *ep, struct chan *c, enum exstate to, const char *why);
int ep_chan_is_open(const struct chan *c);
int ep_chan_is_opening(const struct chan *c);
int ep_chan_linked(const struct ep *ep, const struct chan *c);
/* The channel with that id, not DEAD; _live: nor CLOSING. Or NULL. */
struct chan *ep_chan_find(const struct ep *ep, uint32_t id);
struct chan *ep_chan_find_live(const struct ep *ep, uint32_t id);
/* A new channel in CH_NONE, or NULL (AL_MAX_CHANNELS held, or no memory). */
struct chan *ep_chan_new(struct ep *ep, uint32_t id, uint8_t mode);
void ep_chan_free(struct chan *c);
void ep_chan_snap_clear(struct snap *s);
/* Free DEAD channels; only outside callbacks (then it does nothing). */
void ep_chan_reap(struct ep *ep);
/* Move a channel to DEAD and reap. */
void ep_chan_kill(struct ep *ep, struct chan *c, const char *why);

/* ---- endpoint_proxy.c: the credential proxy's channels ---------------------- */

/* Controller: PROXY_OPEN received. */
int ep_proxy_on_open(struct ep *ep, const struct fr_frame *f);
/* CLOSE received on a proxy channel: the peer's, or the answer to ours. */
int ep_proxy_on_close(struct ep *ep, struct chan *c);
/* ERROR received on a proxy channel (host: the controller refused it). */
int ep_proxy_on_error(struct ep *ep, struct chan *c, const struct fr_frame *f);
/* The link is gone: every proxy channel ends (EP_EV_CLOSED each). */
void ep_proxy_drop_all(struct ep *ep);
/* The next PROXY_AT to send on this link, into f; 0 when none. */
int ep_proxy_at_due(struct ep *ep, struct fr_frame *f);

/* ---- endpoint_stream.c: offsets, credit, acknowledgements ------------------- */

void ep_stream_grant(struct ep *ep, struct rxs *r);
void ep_stream_grant_stdin(struct ep *ep, struct chan *c);
void ep_stream_restart(struct txs *t, uint64_t off);
int ep_stream_resume(struct txs *t, uint64_t next, uint64_t limit, int may_skip);
/* The stream frames a linked channel receives: 0 or a negative AL_E_*. */
int ep_stream_on_data(struct ep *ep, struct chan *c, const struct fr_frame *f);
int ep_stream_on_ack(struct ep *ep, struct chan *c, const struct fr_frame *f);
int ep_stream_on_eof(struct ep *ep, struct chan *c, const struct fr_frame *f);
int ep_stream_on_gap(struct ep *ep, struct chan *c, const struct fr_frame *f);

#endif
