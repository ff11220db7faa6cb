/*
 * wscraw: a wsc link (wsc.h: bytes in, events and bytes out) carried on a
 * libwebsockets RAW socket, as the runner's dial (runner_conn.c) and
 * airlockd's (api_wsc.c) carry it: what the socket read goes into the
 * link, and what the link encoded goes out until the socket is choked. A
 * wss:// dial puts TLS between the two (wsctls.h): the socket's bytes are
 * ciphertext, the link sees plaintext, and the link's first bytes (the
 * upgrade request) wait for the handshake.
 *
 * Data model: none of its own. The encoded bytes pass through one buffer
 * of LWS_PRE + WSCRAW_OUT_MAX bytes per process (the programs are
 * single-threaded), as wsg.c's frames do.
 */
#ifndef AL_WSCRAW_H
#define AL_WSCRAW_H

#include <libwebsockets.h>
#include <stddef.h>

#include "al_limits.h"
#include "wsc.h"
#include "wsctls.h"
#include "wsg.h"

#define WSCRAW_OUT_MAX (AL_MAX_FRAME + 64) /* one write: a whole frame and its header */

/* Bytes the socket read, into the link (its events follow); t: the TLS
 * layer of a wss:// dial, or NULL. 0, or -1: drop the connection (out of
 * memory, the upgrade failed: the failed event came, or TLS failed or was
 * closed: wsctls_why says why). A pong, a close answer or TLS's own bytes
 * to write ask for a WRITEABLE. */
int wscraw_receive(struct wsc *c, struct wsctls *t, struct lws *wsi, const void *in, size_t len);
/* At a WRITEABLE: write what the link encoded (through t, if any) until it
 * has nothing or the socket is choked; once the link's close frame is out,
 * TLS's close_notify follows it. 1: all out; 0: choked (a WRITEABLE is
 * asked for); -1: the write failed (drop the connection). */
int wscraw_flush(struct wsc *c, struct wsctls *t, struct lws *wsi);
/* Frames pull gives, into the link and out (wscraw_flush after each), as
 * wsg_drain does on a WebSocket of lws': the same results (a close is not
 * pulled). Also outside a WRITEABLE (the loop's idle handle) when the link
 * is open, its TLS established and the socket not choked (wscraw_ready):
 * writing there and then spares a WRITEABLE per message, which costs a
 * loop wake-up and four epoll_ctl. */
enum wsg_tx wscraw_drain(struct wsc *c, struct wsctls *t, struct lws *wsi, wsg_pull_fn pull,
                         void *ud, int *wrote, long *err);
/* Whether wscraw_drain may run outside a WRITEABLE: the link is open and
 * sent no close, TLS (if any) is established and the socket not choked. */
int wscraw_ready(struct wsc *c, const struct wsctls *t, struct lws *wsi);
/* Why a dial that never came up failed, into why (at most cap): TLS's
 * reason if its handshake did not finish (timed_out: the deadline
 * passed), else the upgrade's (deadline_s its deadline). */
void wscraw_dial_why(const struct wsctls *t, int timed_out, int deadline_s, char *why, size_t cap);

#endif
