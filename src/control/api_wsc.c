/*
 * api_wsc: airlockd's dial of a runner (a static or aca sandbox's) as a
 * wsc.c link on an lws RAW socket, under wsctls.c's TLS for wss://: the
 * TLS handshake and the upgrade written and checked by wsc (together
 * within API_WSC_UPGRADE_S, lws's timeout), then whole messages to the
 * relay, the relay's frames out until the socket is choked, the close.
 * libwebsockets 4.1.6's WebSocket client reads a received frame one byte
 * per call (docs/performance.md), and starts no RAW client with TLS: so
 * neither its WebSocket client nor its client TLS is used here.
 *
 * Data model: the struct conn of the dial (api_local.h, made by
 * api_runner_dial) owns the link (c->wsc) and its TLS (c->tls, or NULL)
 * from RAW_CONNECTED until the socket closes; c->dial_done says the dial's outcome went to the
 * relay (the link up, or relay_runner_dial_failed), so that a close reports a failure only once.
 */
#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "al_close.h"
#include "al_err.h"
#include "al_limits.h"
#include "api_local.h"
#include "endpoint.h"
#include "relay.h"
#include "wsc.h"
#include "wscraw.h"
#include "wsg.h"

#define API_WSC_UPGRADE_S 10 /* TLS's handshake and the upgrade, answer included */

static void ev_upgraded(void *ud)
{
    struct conn *c = ud;
    lws_set_timeout(c->dial_wsi, NO_PENDING_TIMEOUT, 0);
    c->dial_done = 1;
    wsg_nodelay(c->dial_wsi);
    api_log(c->api, 1, "dialed a runner");
    api_runner_up(c->api, c, c->dial_wsi);
}

static void ev_failed(void *ud, unsigned status, const char *why, int marked)
{
    struct conn *c = ud;
    c->dial_done = 1;
    api_runner_refused(c, status, marked, why);
}

static void ev_message(void *ud, const uint8_t *msg, size_t len)
{
    struct conn *c = ud;
    if (!c->sb)
        return;
    int rc = relay_runner_input(c->sb, c->dial_wsi, msg, len);
    if (rc != AL_OK)
        api_log(c->api, 1, "peer broke the protocol: %s", al_strerror(rc));
    api_ws_wake(c->dial_wsi);
}

static void ev_refused(void *ud, uint16_t error, const char *why)
{
    struct conn *c = ud;
    api_log(c->api, 1, "peer's message refused: %s", why);
    int rc = c->sb ? relay_runner_refuse(c->sb, c->dial_wsi, error, why) : AL_E_STATE;
    if (rc != AL_OK) /* no endpoint to say it: close at once */
        (void)wsc_close(c->wsc, ep_close_code_of(error), why);
    lws_callback_on_writable(c->dial_wsi);
}

static void ev_closed(void *ud, int code, const char *reason)
{
    struct conn *c = ud;
    api_log(c->api, 1, "runner link closed by the runner (%d): %s", code, reason);
}

static const struct wsc_events events = {ev_upgraded, ev_failed, ev_message, ev_refused, ev_closed};

const struct wsc_events *api_wsc_events(void)
{
    return &events;
}

void api_wsc_connected(struct api *a, struct lws *wsi, struct conn *c)
{
    c->api = a;
    c->dial_wsi = wsi;
    c->dialed_ms = uv_now(a->loop);
    lws_set_timeout(wsi, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE, API_WSC_UPGRADE_S);
    lws_callback_on_writable(wsi);
}

int api_wsc_receive(struct conn *c, const void *in, size_t len)
{
    return c ? wscraw_receive(c->wsc, c->tls, c->dial_wsi, in, len) : -1;
}

/* See wscraw_flush. */
static int flush(struct conn *c)
{
    return wscraw_flush(c->wsc, c->tls, c->dial_wsi);
}

/* After our close frame went out: drop the socket at the next WRITEABLE. */
static int closing(struct conn *c)
{
    lws_set_timeout(c->dial_wsi, PENDING_TIMEOUT_CLOSE_SEND, WSG_CLOSE_SEND_S);
    lws_callback_on_writable(c->dial_wsi);
    return 0;
}

long api_wsc_pull(void *conn, struct lws *wsi, uint8_t *buf, size_t cap)
{
    struct conn *c = conn;
    return c->sb ? relay_runner_output(c->sb, wsi, buf, cap) : 0;
}

int api_wsc_writeable(struct api *a, struct lws *wsi, struct conn *c)
{
    if (c && c->kind == CONN_HOP_OUT)
        return api_hop_out_writeable(a, wsi, c);
    if (!c || !c->wsc || c->broken)
        return -1;
    if (wsc_close_sent(c->wsc)) /* the close (and TLS's close_notify) out: drop */
        return flush(c) == 0 ? 0 : -1;
    int rc = flush(c);
    if (rc <= 0 || !wsc_is_open(c->wsc))
        return rc < 0 ? -1 : 0;
    if (wsc_close_sent(c->wsc))
        return closing(c);
    int wrote = 0;
    if (c->sb) {
        long err = 0;
        enum wsg_tx tx = wscraw_drain(c->wsc, c->tls, wsi, api_wsc_pull, c, &wrote, &err);
        if (tx == WSG_TX_PULL)
            api_log(a, 0, "cannot encode a frame: %s", al_strerror((int)err));
        if (tx != WSG_TX_IDLE)
            return tx == WSG_TX_CHOKED ? 0 : -1;
    }
    int code = 0;
    const char *reason = NULL;
    if (!c->sb || relay_runner_closing(c->sb, wsi, &code, &reason)) {
        if (wrote) { /* the close frame goes in a callback of its own */
            lws_callback_on_writable(wsi);
            return 0;
        }
        (void)wsc_close(c->wsc, code ? code : AL_CLOSE_NORMAL, reason ? reason : "closing");
    }
    if (flush(c) < 0)
        return -1;
    return wsc_close_sent(c->wsc) ? closing(c) : 0;
}

void api_wsc_close(struct conn *c, int code, const char *why)
{
    if (c->wsc && wsc_close(c->wsc, code, why) == AL_OK)
        lws_callback_on_writable(c->dial_wsi);
}

void api_wsc_closed(struct api *a, struct lws *wsi, struct conn *c)
{
    if (!c)
        return;
    if (c->kind == CONN_HOP_OUT) {
        api_hop_out_closed(c);
        api_ws_free(wsi, c);
        return;
    }
    if (!c->dial_done) {
        c->dial_done = 1;
        char why[WSCTLS_WHY_MAX + 32];
        wscraw_dial_why(c->tls,
                        uv_now(a->loop) - c->dialed_ms >= (uint64_t)API_WSC_UPGRADE_S * 1000u,
                        API_WSC_UPGRADE_S, why, sizeof why);
        relay_runner_dial_failed(c->sb, why);
    }
    api_ws_closed(a, wsi, c); /* frees the link too */
}
