/*
 * wscraw: a wsc link (wsc.h: bytes in, events and bytes out) carried on a
 * libwebsockets RAW socket, as the runner's ws:// dial (runner_conn.c) and
 * airlockd's (api_wsc.c) carry it: what the socket read goes into the
 * link, and what the link encoded goes out until the socket is choked.
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

#define WSCRAW_OUT_MAX (AL_MAX_FRAME + 64) /* one write: a whole frame and its header */

/* Bytes the socket read, into the link (its events follow). 0, or -1: drop
 * the connection (out of memory, or the upgrade failed: the failed event
 * came). A pong or a close answer to write asks for a WRITEABLE. */
int wscraw_receive(struct wsc *c, struct lws *wsi, const void *in, size_t len);
/* At a WRITEABLE: write what the link encoded until it has nothing or the
 * socket is choked. 1: all out; 0: choked (a WRITEABLE is asked for); -1:
 * the write failed (drop the connection). */
int wscraw_flush(struct wsc *c, struct lws *wsi);

#endif
