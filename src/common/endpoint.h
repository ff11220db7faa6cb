/*
 * endpoint: one side of an airlock.v1 session, as a pure state machine.
 *
 * No I/O and no clock: the caller feeds whole received frames with
 * ep_input(), pulls frames to send with ep_output(), calls ep_tick() for
 * timers, and passes the time (microseconds, any monotonic origin) to each.
 * Events come back through one callback. The same code serves either role
 * (host = owns the processes, controller = asks for them) whichever side
 * dialed.
 *
 * An endpoint outlives links: ep_link_up()/ep_link_down() bracket each
 * connection, and channels, offsets and resend buffers carry over, so a new
 * link resumes every channel where the last one stopped (docs/protocol.md,
 * "Resume").
 *
 * Callbacks may call any ep_* function except ep_free(); a channel closed
 * from a callback is released only after the callback returns.
 */
#ifndef AL_ENDPOINT_H
#define AL_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "al_close.h"
#include "frame.h"

struct ep;

/* The close codes (ep_closing) are al_close.h's AL_CLOSE_*. */

/* The close that follows a fatal ERROR code (docs/protocol.md §10), or 0
 * when the code is not fatal. */
int ep_close_code_of(uint16_t error_code);

enum ep_ev_type {
    EP_EV_READY = 1,    /* HELLOs exchanged; ev->version */
    EP_EV_OPEN,         /* host: open request; ev->open (valid during callback) */
    EP_EV_OPENED,       /* controller: channel started; ev->pid */
    EP_EV_ATTACHED,     /* controller: channel resumed; ev->state */
    EP_EV_LOST,         /* controller: the host does not know the channel */
    EP_EV_DATA,         /* ev->stream, ev->offset, ev->data, ev->len */
    EP_EV_EOF,          /* ev->stream ended at ev->offset */
    EP_EV_GAP,          /* ev->stream: bytes [ev->offset, ev->to) are gone */
    EP_EV_RESIZE,       /* host: ev->cols, ev->rows */
    EP_EV_SIGNAL,       /* host: ev->signo, ev->scope */
    EP_EV_EXIT,         /* controller: ev->exit_code, ev->signo, ev->core */
    EP_EV_CLOSED,       /* the channel is gone (host: stop its processes) */
    EP_EV_SNAPSHOT_REQ, /* host: please call ep_snapshot() */
    EP_EV_SNAPSHOT,     /* controller: ev->data/len, ev->offset, cols, rows */
    EP_EV_LIST,         /* controller: ev->list */
    EP_EV_TOKEN,        /* host: ev->data/len hold a fresh token to verify */
    EP_EV_PONG,         /* ev->rtt_us */
    EP_EV_ERROR,        /* peer sent ERROR: ev->code, ev->data/len message */
    EP_EV_WRITABLE,     /* room freed in an outgoing stream (ev->stream) */
    /* relay sessions (docs/protocol.md, "Relay sessions") */
    EP_EV_ATTACH,   /* host: ATTACH of a channel it does not hold; ev->offset =
                     * out_next, ev->to = err_next, ev->cols/rows (0,0: none),
                     * ev->resume: the controller holds what comes before.
                     * Call ep_host_adopt() in the callback to serve it. */
    EP_EV_TAKEOVER, /* host: the controller asks to become the writer */
    EP_EV_ROLE,     /* controller: ev->state = enum fr_relay_role; stdin goes
                     * on at ev->offset with credit up to ev->to */
    EP_EV_VIEWERS,  /* controller: ev->list is the VIEWERS frame */
    /* the credential proxy's channels (docs/protocol.md §5a) */
    EP_EV_PROXY_AT,   /* controller: the host's proxy listener, ev->data/len ("http://...") */
    EP_EV_PROXY_OPEN, /* controller: the host opened proxy channel ev->channel: serve it
                       * (its stdout is the agent's bytes, its stdin the answer) or
                       * refuse it with ep_proxy_refuse() */
};

struct ep_event {
    enum ep_ev_type type;
    uint32_t channel; /* 0 for connection events */
    unsigned stream;  /* enum fr_stream */
    uint64_t offset, to;
    const uint8_t *data;
    size_t len;
    const struct fr_open *open;
    const struct fr_frame *list; /* the LIST_REPLY or VIEWERS frame */
    uint32_t pid;
    uint16_t cols, rows, code, version;
    uint8_t state, signo, scope, core, resume;
    int32_t exit_code;
    uint64_t rtt_us;
};

typedef void ep_event_fn(void *ud, const struct ep_event *ev);
/* One log line (al_log's levels: 0 error, 1 info, 2 debug): each change of
 * a channel's state at level 2, a change the endpoint refused (a bug of its
 * own) at level 0. msg is valid during the call. */
typedef void ep_log_fn(void *ud, int level, const char *msg);

struct ep_config {
    enum fr_role role;
    const char *name;          /* sent in HELLO; copied */
    size_t tx_ring;            /* resend ring per outgoing stream, bytes */
    uint32_t window;           /* credit granted per incoming stream, bytes */
    uint64_t ping_interval_us; /* 0: never ping */
    uint64_t idle_timeout_us;  /* 0: never drop a silent peer */
    ep_event_fn *on_event;
    void *ud;
    ep_log_fn *on_log; /* NULL: no log lines */
    /* controller: serves the credential proxy's channels (EP_EV_PROXY_OPEN);
     * 0: the endpoint refuses every PROXY_OPEN itself (FORBIDDEN) */
    int serves_proxy;
};

#define EP_DEFAULT_TX_RING (4u << 20) /* 4 MiB */
/* An outgoing stream's ring whose bytes are all acknowledged and that got
 * none for this long is freed at the next ep_tick (so at most a ping
 * interval later): an idle terminal holds no output ring. */
#define EP_RING_IDLE_US 2000000ull
/* A receiver acknowledges what it consumed of a stream once no DATA came
 * for this long, however little (else only a quarter window at a time). */
#define EP_ACK_SETTLE_US 250000ull
#define EP_DEFAULT_WINDOW (512u << 10) /* 512 KiB */
#define EP_MIN_WINDOW 1024u
/* A proxy channel's ring per stream and the credit it grants per stream,
 * at most (both sides: the window is never above the ring, so that the
 * receiver's acknowledgements, a quarter window apart, keep it moving). */
#define EP_PROXY_RING (256u << 10)
#define EP_PROXY_WINDOW (256u << 10)
#define EP_DEFAULT_PING_US 15000000ull /* 15 s */
#define EP_DEFAULT_IDLE_US 45000000ull /* 45 s */

void ep_config_default(struct ep_config *c, enum fr_role role);

/* 0 or AL_E_*; *out owns the endpoint until ep_free(). */
int ep_new(const struct ep_config *c, struct ep **out);
/* The common case of both: the defaults of role, with this name, resend
 * ring and credit window (0: the default) and event callback. */
int ep_new_with(enum fr_role role, const char *name, size_t tx_ring, uint32_t window,
                ep_event_fn *on_event, void *ud, struct ep **out);
void ep_free(struct ep *ep);

/* ---- the link ------------------------------------------------------------ */

/* A connection is up: HELLO is queued. */
void ep_link_up(struct ep *ep, uint64_t now_us);
/* The connection is gone; any half-received state of it is dropped. */
void ep_link_down(struct ep *ep);
/* Whether the peer's HELLO came on the current link: what is queued from
 * then on goes out (after our own HELLO, which always goes first). */
int ep_ready(const struct ep *ep);

/*
 * One received frame (one WebSocket message). 0, or a negative AL_E_* when
 * the peer broke the protocol: an ERROR frame is then queued and
 * ep_closing() says how to close once the output is drained.
 */
int ep_input(struct ep *ep, const uint8_t *msg, size_t len, uint64_t now_us);

/*
 * The next frame to send, encoded into buf (cap >= AL_MAX_FRAME is always
 * enough). Returns its length, 0 when there is nothing to send now.
 */
long ep_output(struct ep *ep, uint8_t *buf, size_t cap, uint64_t now_us);

/* Timers: pings, the idle timeout, the token deadline. */
void ep_tick(struct ep *ep, uint64_t now_us);
/* Change the ping interval and the idle timeout (0: never) of ep_config,
 * for the next tick on. */
void ep_set_timers(struct ep *ep, uint64_t ping_interval_us, uint64_t idle_timeout_us);
/* Send a PING with the next output (the link's round trip, EP_EV_PONG, is
 * known at once instead of after the first interval). AL_E_STATE when the
 * link is not ready. */
int ep_ping(struct ep *ep);
/* The next time ep_tick() has work, or UINT64_MAX. */
uint64_t ep_next_deadline(const struct ep *ep);

/* Non-zero once the link must be closed (after draining ep_output()). */
int ep_closing(const struct ep *ep, int *code, const char **reason);

/* ---- streams (both roles) ------------------------------------------------- */

/*
 * Queue bytes on an outgoing stream (host: FR_STDOUT/FR_STDERR; controller:
 * FR_STDIN). Returns how many were taken (maybe 0: no room until the peer
 * acknowledges; EP_EV_WRITABLE tells when) or AL_E_*.
 */
long ep_write(struct ep *ep, uint32_t ch, unsigned stream, const uint8_t *p, size_t n);
/* Bytes ep_write() would take now. */
size_t ep_writable(const struct ep *ep, uint32_t ch, unsigned stream);
/* The outgoing stream ends after what was written. */
int ep_eof(struct ep *ep, uint32_t ch, unsigned stream);
/* n received bytes were delivered (to the PTY, disk, screen): grants credit. */
int ep_consume(struct ep *ep, uint32_t ch, unsigned stream, size_t n);
/* Close a channel (host: announce its end; controller: ask for it). */
int ep_close(struct ep *ep, uint32_t ch);
/*
 * A fatal error the endpoint could not see itself: the WebSocket layer
 * refused a message (a text message, one over AL_MAX_FRAME). Queues ERROR
 * code with msg, as ep_input() does for a bad frame; ep_closing() then
 * gives the close (when the link was closing already, that close stands).
 * AL_E_INVAL when code is not fatal, AL_E_CLOSED when the link is down.
 */
int ep_fail(struct ep *ep, uint16_t code, const char *msg);
/* Send an ERROR frame (channel 0: about the connection). Not fatal. */
int ep_send_error(struct ep *ep, uint32_t ch, uint16_t code, const char *msg);

struct ep_stream_info {
    uint64_t end;      /* outgoing: bytes written; incoming: bytes received */
    uint64_t acked;    /* outgoing: acknowledged by the peer */
    uint64_t base;     /* outgoing: oldest byte still held for resend */
    uint64_t consumed; /* incoming: delivered by the application */
    int eof;
};
int ep_stream_info(const struct ep *ep, uint32_t ch, unsigned stream, struct ep_stream_info *out);
/* Number of channels the endpoint holds. */
unsigned ep_channel_count(const struct ep *ep);

/* ---- host side ----------------------------------------------------------- */

/* Answer an EP_EV_OPEN: the process runs (pid), or it could not start. */
int ep_opened(struct ep *ep, uint32_t ch, uint32_t pid);
int ep_open_failed(struct ep *ep, uint32_t ch, const char *why);
/* The process ended; output streams end where they are. */
int ep_exit(struct ep *ep, uint32_t ch, int32_t code, uint8_t signo, uint8_t core);
/*
 * Answer EP_EV_SNAPSHOT_REQ: bytes that redraw the screen as of stdout
 * offset (<= what was written: AL_E_INVAL otherwise; normally the end).
 * Stdout before offset goes first, then the snapshot, then the rest.
 */
int ep_snapshot(struct ep *ep, uint32_t ch, uint64_t offset, uint16_t cols, uint16_t rows,
                const uint8_t *p, size_t n);
/* A fresh token was accepted: the link may live until deadline_us. */
void ep_set_token_deadline(struct ep *ep, uint64_t deadline_us);

/*
 * Relay sessions: the host serves terminals that live elsewhere (airlockd
 * relaying a runner's terminal to its clients). docs/protocol.md, "Relay
 * sessions".
 *
 * ep_host_adopt: declare channel ch, open, with empty stdout/stderr rings
 * starting at out_base/err_base and stdin next = consumed = in_next. Called
 * from the EP_EV_ATTACH callback for that channel, the channel is linked at
 * once and the ATTACH is then processed against it (out_next < out_base:
 * GAP [out_next, out_base); out_next beyond what the ring holds: protocol
 * error), so adopt with out_base = out_next to serve from there. Elsewhere
 * the channel just exists until a controller ATTACHes it. An adopted channel
 * starts as a viewer (no stdin credit) until ep_set_role(FR_WRITER). Its
 * size is unknown, so an ATTACH carrying one also gives EP_EV_RESIZE.
 * AL_E_EXISTS (id in use), AL_E_LIMIT, AL_E_NOMEM, AL_E_INVAL.
 */
int ep_host_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_base, uint64_t err_base,
                  uint64_t in_next);
/*
 * Jump stdout forward to offset (>= every byte written: AL_E_INVAL
 * otherwise). Unsent bytes are dropped, the ring restarts empty at offset, a
 * GAP [sent, offset) goes out if anything was skipped, and, with snap !=
 * NULL, a SNAPSHOT at offset (cols x rows, n bytes, n may be 0; copied)
 * follows the GAP, before any later DATA. snap == NULL: only the GAP (pipe
 * mode). On a channel not linked now, only the jump happens: the next
 * ATTACH learns of it as a GAP. AL_E_STATE after ep_exit()/ep_eof().
 */
int ep_resync(struct ep *ep, uint32_t ch, uint64_t offset, uint16_t cols, uint16_t rows,
              const uint8_t *snap, size_t n);
/*
 * Queue a ROLE frame (sent after ATTACHED, on this link only). FR_WRITER:
 * stdin next = consumed = in_next, credit granted from there. FR_VIEWER:
 * stdin next = consumed = in_next, no credit ever (its DATA is a protocol
 * error, its EOF is refused with FORBIDDEN). Stdin a demoted writer had in
 * flight when the ROLE went out is dropped, not treated as an error.
 */
int ep_set_role(struct ep *ep, uint32_t ch, uint8_t role, uint64_t in_next);
/* Queue a VIEWERS frame (copied; replaces an unsent one; this link only).
 * AL_E_TOOBIG: count > AL_MAX_VIEWERS or a name > AL_MAX_VIEWER_NAME bytes;
 * AL_E_INVAL: an empty name or a bad role. */
int ep_viewers(struct ep *ep, uint32_t ch, unsigned count, const char *const *names,
               const uint8_t *roles);

/*
 * The credential proxy's channels (docs/protocol.md §5a): byte streams the
 * HOST opens, one per agent connection to its local proxy listener. Stream
 * FR_STDOUT carries the agent's bytes (host -> controller), FR_STDIN the
 * answer (controller -> host), with the credit and rings of any stream; EOF
 * is a half close, ep_close() ends the channel (the peer confirms). They
 * are not resumed: a link that goes down ends every one of them on both
 * sides (EP_EV_CLOSED for each), and they are not in LIST_REPLY. At most
 * AL_MAX_PROXY_CHANNELS at once, counted apart from terminal channels.
 *
 * ep_proxy_at: host: the listener's base URL ("http://127.0.0.1:PORT",
 * copied; NULL: none), sent as PROXY_AT after HELLO on every link.
 * AL_E_INVAL for a URL PROXY_AT cannot carry.
 * ep_proxy_open: host: a new proxy channel on the current, ready link; its
 * id (with FR_PROXY_CHANNEL_BIT) or AL_E_STATE (no ready link), AL_E_LIMIT.
 * ep_proxy_refuse: controller: answer EP_EV_PROXY_OPEN with ERROR code on
 * the channel (the host then ends it) and forget it.
 */
int ep_proxy_at(struct ep *ep, const char *url);
long ep_proxy_open(struct ep *ep);
int ep_proxy_refuse(struct ep *ep, uint32_t ch, uint16_t code, const char *msg);
/* Proxy channels held now. */
unsigned ep_proxy_count(const struct ep *ep);

/* ---- controller side ----------------------------------------------------- */

/* Open a channel; returns its id (> 0) or AL_E_*. o is copied. */
long ep_open(struct ep *ep, const struct fr_open *o);
/*
 * Re-adopt a channel known from before a restart: the next output bytes
 * wanted are out_next/err_next (its ATTACHes say RESUME). The host's
 * offsets decide where stdin goes on.
 */
int ep_adopt(struct ep *ep, uint32_t ch, uint8_t mode, uint64_t out_next, uint64_t err_next);
/*
 * Attach a channel this controller never held (a relay client's first
 * attach): its ATTACH asks from 0 without RESUME, so a host with a screen
 * may start it with a snapshot; once ATTACHED came, later ATTACHes resume.
 */
int ep_attach_new(struct ep *ep, uint32_t ch, uint8_t mode);
int ep_resize(struct ep *ep, uint32_t ch, uint16_t cols, uint16_t rows);
int ep_signal(struct ep *ep, uint32_t ch, uint8_t signo, uint8_t scope);
int ep_request_snapshot(struct ep *ep, uint32_t ch);
int ep_list(struct ep *ep);
int ep_send_token(struct ep *ep, const char *token, size_t len);
/* Relay session: ask the host to become the channel's writer (TAKEOVER),
 * on the current link (AL_E_STATE when there is none; sent after ATTACHED).
 * The host answers with ROLE (EP_EV_ROLE) or ERROR FORBIDDEN (EP_EV_ERROR). */
int ep_takeover(struct ep *ep, uint32_t ch);

#endif
