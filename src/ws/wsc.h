/*
 * wsc: the client's side of one airlock.v1 WebSocket, framed by wslay
 * (Debian libwslay-dev) instead of libwebsockets' client parser, which
 * reads a received frame one byte per call (docs/performance.md). Bytes in,
 * events and bytes out: no socket and no clock of its own, so the same
 * link runs over whatever carries it (the runner's dial carries it on an
 * lws RAW connection, runner_conn.c; the unit test on a plain socket).
 *
 * What it does: the upgrade request and the checks of its answer
 * (wsc_upgrade.h); then whole binary messages of at most AL_MAX_FRAME
 * bytes, reassembled from any fragments; text messages and messages too
 * big refused as wsg.c refuses them (the refused event: the caller's
 * endpoint sends an ERROR, then closes; the rest of the input is
 * dropped); pings answered; a close frame's code and reason reported, and
 * answered; frames we send masked with a fresh key each (RFC 6455 §5.3,
 * from getrandom through a small buffer); a masked or otherwise broken
 * frame from the server answered with close 1002 (wslay's checks).
 *
 * Data model: struct wsc (opaque, wsc_new/wsc_free) owns the wslay
 * context, the upgrade state (freed once upgraded), the message being
 * reassembled (AL_MAX_FRAME bytes, allocated at the first message) and
 * the bytes encoded for the wire but not yet taken by wsc_output(). What
 * the caller queues with wsc_send() is copied by wslay until it is
 * encoded; the caller bounds it by sending only while it can write.
 */
#ifndef AL_WSC_H
#define AL_WSC_H

#include <stddef.h>
#include <stdint.h>

#include "wsc_upgrade.h"

#define WSC_CLOSE_WHY_MAX 123 /* a close reason fits one control frame */
#define WSC_MASK_POOL 256     /* random bytes fetched at once for masking keys */
#define WSC_REQUEST_MAX 32768 /* bytes of the upgrade request (tokens of 8 KB, a path) */

struct wsc;

struct wsc_events {
    /* the upgrade succeeded: messages may be sent */
    void (*upgraded)(void *ud);
    /* the upgrade failed: status (0: no HTTP status came), why, and
     * whether the answer carried the request's mark header */
    void (*failed)(void *ud, unsigned status, const char *why, int marked);
    /* one whole binary message, valid during the call */
    void (*message)(void *ud, const uint8_t *msg, size_t len);
    /* text or too big: error is FR_ERR_PROTOCOL or FR_ERR_TOO_BIG; the
     * caller says why in band and closes; later input is dropped */
    void (*refused)(void *ud, uint16_t error, const char *why);
    /* the peer's close frame (code 1005 when it had none); the answer is
     * queued: write wsc_output(), then drop the connection */
    void (*closed)(void *ud, int code, const char *reason);
};

/* A link for one upgrade request r; NULL when out of memory or r cannot
 * be encoded. The request's bytes are the first of wsc_output(). */
struct wsc *wsc_new(const struct wscu_request *r, const struct wsc_events *ev, void *ud);
void wsc_free(struct wsc *c);

/* Bytes read from the connection: events follow, in order. 0, or AL_E_NOMEM
 * (drop the connection), AL_E_PROTO (the upgrade failed: the failed event
 * came) or AL_E_CLOSED (the link is closing and the input is dropped). */
int wsc_receive(struct wsc *c, const uint8_t *in, size_t len);
/* Queue one binary message (copied); 0, AL_E_STATE (not upgraded, or
 * closing), AL_E_TOOBIG or AL_E_NOMEM. */
int wsc_send(struct wsc *c, const uint8_t *msg, size_t len);
/* Queue the close frame (the first close wins); 0 or AL_E_STATE. */
int wsc_close(struct wsc *c, int code, const char *why);
/* Encoded bytes to write, into buf (at most cap): their count, 0 when none
 * wait. */
size_t wsc_output(struct wsc *c, uint8_t *buf, size_t cap);
/* Whether bytes wait for wsc_output(). */
int wsc_pending(const struct wsc *c);
/* Non-zero once our close frame was encoded (written out by wsc_output):
 * after writing it, drop the connection. */
int wsc_close_sent(const struct wsc *c);
/* Whether the upgrade succeeded. */
int wsc_is_open(const struct wsc *c);

#endif
