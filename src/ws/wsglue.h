/*
 * wsglue: what every airlock.v1 WebSocket needs from libwebsockets 4.1,
 * written once for airlockd (api.c), the runner (runner_main.c) and the
 * CLI (cli_net.c): whole binary messages out of lws's fragments, and a
 * close frame with a code and reason.
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
 */
#ifndef AL_WSGLUE_H
#define AL_WSGLUE_H

#include <libwebsockets.h>
#include <stddef.h>
#include <stdint.h>

#define WSG_CLOSE_WHY_MAX 123 /* a close reason fits one control frame */

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
/* Free the message buffer (the struct itself is the caller's). */
void wsg_release(struct wsg *g);
/* Disable Nagle on the connection's socket: frames are small and latency
 * matters (keystrokes). */
void wsg_nodelay(struct lws *wsi);

#endif
