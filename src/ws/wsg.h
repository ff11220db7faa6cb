/*
 * wsg: what every airlock.v1 WebSocket needs from libwebsockets 4.1,
 * written once for airlockd (api_ws.c), the runner (runner_conn.c) and the
 * CLI (cli_net.c): whole binary messages out of lws's fragments, whole
 * messages written until the socket is choked, a close frame with a code
 * and reason, and a request's query arguments. The lws context itself is
 * wsctx.h's.
 *
 * Why: lws delivers a message in pieces (fragments and partial reads);
 * airlock.v1 carries exactly one frame per binary message, at most
 * AL_MAX_FRAME bytes, and refuses text messages: a refusal is reported to
 * the caller, whose endpoint says why in an ERROR frame before it closes
 * (protocol.md §10), and the rest of the connection's input is dropped. And lws 4.1.6 on libuv
 * drops the connection without the close frame lws_close_reason()
 * prepares, so the frame is written here, at the next WRITEABLE, and the
 * socket dropped at the one after.
 *
 * Data model: struct wsg, embedded in each side's per-connection data
 * (zeroed before use): the message being reassembled (a buffer of
 * AL_MAX_FRAME bytes, allocated at the first message, freed by
 * wsg_release) and the close state. Not linked by al_common, so that code
 * which never speaks WebSocket does not link lws.
 *
 * Writing: at a WRITEABLE, wsg_drain() pulls encoded frames from the
 * caller's endpoint and writes one binary message each, until the endpoint
 * has nothing more, the socket is choked (lws_send_pipe_choked: a
 * WRITEABLE is asked for and the rest waits for it), or
 * WSG_WRITES_PER_CALLBACK messages went (then too: the loop gets a turn).
 * The frames go through one buffer of LWS_PRE + AL_MAX_FRAME bytes per
 * process (the programs are single-threaded).
 */
#ifndef AL_WSG_H
#define AL_WSG_H

#include <libwebsockets.h>
#include <stddef.h>
#include <stdint.h>

#define WSG_CLOSE_WHY_MAX 123      /* a close reason fits one control frame */
#define WSG_WRITES_PER_CALLBACK 64 /* messages one WRITEABLE writes at most */
#define WSG_CLOSE_SEND_S 2         /* seconds to write a close frame before dropping */

struct wsg {
    uint8_t *msg;
    size_t len;
    uint16_t refused; /* 0, or the ERROR code input was refused with */
    char refused_why[WSG_CLOSE_WHY_MAX + 1];
    int close_code; /* 0, or the close to send at the next WRITEABLE */
    char close_why[WSG_CLOSE_WHY_MAX + 1];
    int close_sent; /* the close frame went out: drop the socket next */
};

enum wsg_rx {
    WSG_MORE = 0,    /* a fragment was kept: wait for the rest */
    WSG_MESSAGE = 1, /* g->msg[0..*len) is one whole binary message */
    WSG_REFUSED = 2, /* text or too big: fail the link with ERROR g->refused
                      * (FR_ERR_PROTOCOL, FR_ERR_TOO_BIG) and g->refused_why,
                      * so that the ERROR precedes the close (ep_fail) */
    WSG_IGNORED = 3, /* refused or closing already: the data is dropped */
    WSG_NOMEM = -1,  /* no buffer: drop the connection */
};

/* Take one LWS_CALLBACK_*_RECEIVE's data. With WSG_MESSAGE the message is
 * valid until the next call; the caller hands it on, then writes. */
enum wsg_rx wsg_receive(struct wsg *g, struct lws *wsi, const void *in, size_t len,
                        size_t *msg_len);
/* Schedule a close (the first one wins) and ask for a WRITEABLE. */
void wsg_close_later(struct wsg *g, struct lws *wsi, int code, const char *why);
/* At a WRITEABLE with g->close_code set: write the close frame; returns 0,
 * or -1 once it was sent (or could not be): the caller returns -1 to lws to
 * drop the socket. */
int wsg_close_now(struct wsg *g, struct lws *wsi);
/* Write one whole binary message; msg has LWS_PRE bytes of room before it.
 * 1: the socket may take more now; 0: it is choked (a WRITEABLE is asked
 * for); -1: lws_write failed (drop the connection). */
int wsg_write(struct lws *wsi, uint8_t *msg, size_t len);

/* The next encoded frame into buf (at most cap bytes): its length, 0 when
 * there is none, or an AL_E_* (it cannot be encoded). */
typedef long (*wsg_pull_fn)(void *ud, struct lws *wsi, uint8_t *buf, size_t cap);

enum wsg_tx {
    WSG_TX_IDLE = 0,    /* pull has nothing more, or WSG_WRITES_PER_CALLBACK
                         * messages went (a WRITEABLE is asked for) */
    WSG_TX_CHOKED = 1,  /* the socket is full: a WRITEABLE is asked for */
    WSG_TX_FAILED = -1, /* lws_write failed: drop the connection */
    WSG_TX_PULL = -2,   /* pull failed: its AL_E_* is in *err */
};

/* At a WRITEABLE: write what pull gives (see above). *wrote: whether a
 * message went (a close frame then waits for a WRITEABLE of its own). */
enum wsg_tx wsg_drain(struct lws *wsi, wsg_pull_fn pull, void *ud, int *wrote, long *err);
/* How wsg_drain_to writes one message (LWS_PRE bytes of room before it):
 * 1 the socket may take more, 0 it is choked (a WRITEABLE is asked for),
 * -1 the write failed. */
typedef int (*wsg_write_fn)(void *wud, struct lws *wsi, uint8_t *msg, size_t len);
/* wsg_drain with another way of writing a message (a wslay link's:
 * wscraw_drain). */
enum wsg_tx wsg_drain_to(struct lws *wsi, wsg_pull_fn pull, void *ud, wsg_write_fn write, void *wud,
                         int *wrote, long *err);
/* A query argument's value (lws 4.1 hands back "name=value"): a pointer
 * into buf, or NULL when the request has none. */
const char *wsg_urlarg(struct lws *wsi, const char *name, char *buf, int cap);
/* Free the message buffer (the struct itself is the caller's). */
void wsg_release(struct wsg *g);
/* Disable Nagle on the connection's socket: frames are small and latency
 * matters (keystrokes). */
void wsg_nodelay(struct lws *wsi);

#endif
