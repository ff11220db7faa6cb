/*
 * api_ws: airlockd's WebSocket connections, a client's or a runner's
 * (accepted; a dial, ws:// or wss://, is api_wsc.c's, which shares the
 * struct conn, the wake and the free here): whole messages in
 * to the relay, the relay's frames
 * out at each WRITEABLE (wsg_drain), the close when the relay's endpoint
 * asks for it, and the relay told when the connection is gone.
 *
 * Data model: struct conn (api_local.h) is the connection's lws "opaque
 * user data", made by the upgrade (api_route.c) or the dialer
 * (api_runner.c), freed here when the connection closes: what it is
 * linked to in the relay (a client, or a sandbox for a runner link), the
 * message being reassembled and the close state (struct wsg).
 *
 * Not here: who may connect (api_route.c, api_terminal.c, api_runner.c),
 * the close of a web session's connection when the session ends
 * (api_wsess.c), the protocol (the relay's endpoints, relay.h).
 */
#include <openssl/crypto.h>
#include <libwebsockets.h>
#include <stdlib.h>

#include "al_err.h"
#include "api_local.h"
#include "platform.h"
#include "endpoint.h"
#include "relay.h"
#include "wsc.h"
#include "wscraw.h"
#include "wsctls.h"
#include "wsg.h"

static int write_now(struct api *a, struct lws *wsi, struct conn *c);

/* The writes due, once per loop turn: there and then where the socket
 * takes them (write_now), else a writable callback. */
static void on_wake_idle(uv_idle_t *h)
{
    struct api *a = h->data;
    (void)uv_idle_stop(h);
    while (a->wake_list) {
        struct conn *c = a->wake_list;
        a->wake_list = c->wake_next;
        if (a->wake_list)
            a->wake_list->wake_prev = NULL;
        struct lws *wsi = c->wake_wsi;
        c->wake_wsi = NULL;
        c->wake_next = c->wake_prev = NULL;
        if (!write_now(a, wsi, c))
            lws_callback_on_writable(wsi);
    }
}

static void wake_unlink(struct api *a, struct conn *c)
{
    if (!c->wake_wsi)
        return;
    if (c->wake_prev)
        c->wake_prev->wake_next = c->wake_next;
    else
        a->wake_list = c->wake_next;
    if (c->wake_next)
        c->wake_next->wake_prev = c->wake_prev;
    c->wake_wsi = NULL;
    c->wake_next = c->wake_prev = NULL;
}

/*
 * The relay's wake function: its endpoint of this connection has output.
 * The writable callback is asked for from an idle handle (run before the
 * loop's next poll), once per connection and turn, not here: the relay
 * wakes a connection from inside the poll phase (a proxy answer's bytes,
 * an ACK), and each request makes libwebsockets restart the socket's
 * uv_poll, on which libuv drops that socket's event already pending in the
 * same batch (the runner's link then waited for the next event; the
 * runner does the same, runner.c's want_write). There, when the socket is
 * not choked, the frames are written at once (write_now): a writable
 * request costs a loop wake-up and four epoll_ctl (lws arms and disarms
 * POLLOUT with uv_poll_start, which libuv does as a DEL and an ADD), per
 * message of a proxy answer or an ACK.
 */
void api_ws_wake(void *conn)
{
    struct lws *wsi = conn;
    struct lws_context *ctx = lws_get_context(wsi);
    struct api *a = ctx ? lws_context_user(ctx) : NULL;
    struct conn *c = api_ws_conn(wsi);
    if (!a || !c || a->wake_idle_on < 0) {
        lws_callback_on_writable(wsi); /* not ours, or the loop is ending */
        return;
    }
    if (c->wake_wsi)
        return; /* due already */
    if (!a->wake_idle_on) {
        if (uv_idle_init(a->loop, &a->wake_idle) != 0) {
            lws_callback_on_writable(wsi);
            return;
        }
        a->wake_idle.data = a;
        a->wake_idle_on = 1;
    }
    c->wake_wsi = wsi;
    c->wake_prev = NULL;
    c->wake_next = a->wake_list;
    if (a->wake_list)
        a->wake_list->wake_prev = c;
    a->wake_list = c;
    (void)uv_idle_start(&a->wake_idle, on_wake_idle);
}

void api_ws_wake_close(struct api *a)
{
    int was = a->wake_idle_on;
    a->wake_idle_on = -1;
    while (a->wake_list)
        wake_unlink(a, a->wake_list);
    if (was > 0)
        uv_close((uv_handle_t *)&a->wake_idle, NULL);
}

/* The connection's struct conn, or NULL (an HTTP request, or freed). */
struct conn *api_ws_conn(struct lws *wsi)
{
    return lws_get_opaque_user_data(wsi);
}

void api_conn_wipe(struct conn *c)
{
    OPENSSL_cleanse(c->token, sizeof c->token);
    if (c->platform_token) {
        OPENSSL_cleanse(c->platform_token, PLATFORM_TOKEN_MAX + 1);
        free(c->platform_token);
        c->platform_token = NULL;
    }
}

void api_ws_free(struct lws *wsi, struct conn *c)
{
    if (!c)
        return;
    struct lws_context *ctx = lws_get_context(wsi);
    struct api *a = ctx ? lws_context_user(ctx) : NULL;
    if (a)
        wake_unlink(a, c);
    wsg_release(&c->ws);
    wsc_free(c->wsc); /* a dial's link (api_wsc.c), if any */
    wsctls_free(c->tls);
    api_hop_queue_free(&c->q); /* a relayed client's messages not sent */
    api_conn_wipe(c);
    free(c);
    lws_set_opaque_user_data(wsi, NULL);
}

/* LWS_CALLBACK_*RECEIVE: a piece of a message; a whole one to the relay. */
int api_ws_receive(struct api *a, struct lws *wsi, struct conn *c, const void *in, size_t len)
{
    if (!c)
        return 0;
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&c->ws, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    int rc = AL_OK;
    if (rx == WSG_REFUSED) {
        /* the endpoint says why in an ERROR, then asks for the close */
        api_log(a, 1, "peer's message refused: %s", c->ws.refused_why);
        if (c->kind == CONN_HOP_IN)
            rc = AL_E_STATE; /* no endpoint here: the owner's is behind the hop */
        else if (c->cl)
            rc = relay_client_refuse(c->cl, c->ws.refused, c->ws.refused_why);
        else if (c->sb)
            rc = relay_runner_refuse(c->sb, wsi, c->ws.refused, c->ws.refused_why);
        if (rc != AL_OK) /* no endpoint to say it: close at once */
            wsg_close_later(&c->ws, wsi, ep_close_code_of(c->ws.refused), c->ws.refused_why);
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (rx != WSG_MESSAGE)
        return 0;
    if (c->kind == CONN_HOP_IN)
        return api_hop_in_message(c, c->ws.msg, n) == AL_OK ? 0 : -1;
    if (c->cl)
        rc = relay_client_input(c->cl, c->ws.msg, n);
    else if (c->sb)
        rc = relay_runner_input(c->sb, wsi, c->ws.msg, n);
    if (rc != AL_OK)
        api_log(a, 1, "peer broke the protocol: %s", al_strerror(rc));
    lws_callback_on_writable(wsi);
    return 0;
}

/* What wsg_drain() writes: the frames of the client's or the runner's endpoint. */
static long pull_output(void *conn, struct lws *wsi, uint8_t *buf, size_t cap)
{
    struct conn *c = conn;
    if (c->kind == CONN_HOP_IN)
        return api_hop_in_pull(c, buf, cap);
    return c->cl   ? relay_client_output(c->cl, buf, cap)
           : c->sb ? relay_runner_output(c->sb, wsi, buf, cap)
                   : 0;
}

/* Whether the connection's side asks for the close (its code and reason). */
static int conn_closing(struct conn *c, struct lws *wsi, int *code, const char **reason)
{
    return c->kind == CONN_HOP_IN ? api_hop_in_closing(c, code, reason)
           : c->cl                ? relay_client_closing(c->cl, code, reason)
           : c->sb                ? relay_runner_closing(c->sb, wsi, code, reason)
                                  : 1;
}

/* The relay's frames for the connection, written from the wake's idle
 * handle, outside lws' service: a WebSocket of lws' (wsg_drain) or a
 * dial's link (wscraw_drain) whose socket is not choked (lws 4.1 keeps
 * what the socket does not take and asks for the WRITEABLE itself; a
 * write while output is pending would be refused, hence the check). TLS
 * sockets of lws' and relayed clients' dials wait for their WRITEABLE. 1:
 * done; 0: the WRITEABLE must do it (a close is due, or it could not be
 * tried; a failure marks the connection broken, for the WRITEABLE to
 * drop). */
static int write_now(struct api *a, struct lws *wsi, struct conn *c)
{
    if (c->broken || c->ws.close_code || c->kind == CONN_HOP_OUT)
        return 0;
    int wrote;
    long err = 0;
    enum wsg_tx tx;
    if (c->wsc) {
        if (!c->sb || !wscraw_ready(c->wsc, c->tls, wsi))
            return 0;
        tx = wscraw_drain(c->wsc, c->tls, wsi, api_wsc_pull, c, &wrote, &err);
    } else {
        if (lws_is_ssl(wsi) || lws_send_pipe_choked(wsi))
            return 0;
        tx = wsg_drain(wsi, pull_output, c, &wrote, &err);
    }
    if (tx == WSG_TX_PULL)
        api_log(a, 0, "cannot encode a frame: %s", al_strerror((int)err));
    if (tx < 0) {
        c->broken = 1;
        return 0;
    }
    int code = 0;
    const char *reason = NULL;
    return tx == WSG_TX_CHOKED || !conn_closing(c, wsi, &code, &reason);
}

/* LWS_CALLBACK_*_WRITEABLE: the close if one is due, else the relay's
 * frames, then the close its endpoint asks for. */
int api_ws_writeable(struct api *a, struct lws *wsi, struct conn *c)
{
    if (!c || c->broken)
        return -1;
    if (c->ws.close_code)
        return wsg_close_now(&c->ws, wsi);
    int wrote;
    long err = 0;
    enum wsg_tx tx = wsg_drain(wsi, pull_output, c, &wrote, &err);
    if (tx == WSG_TX_PULL) {
        api_log(a, 0, "cannot encode a frame: %s", al_strerror((int)err));
        return -1;
    }
    if (tx != WSG_TX_IDLE)
        return tx == WSG_TX_CHOKED ? 0 : -1;
    int code = 0;
    const char *reason = NULL;
    if (conn_closing(c, wsi, &code, &reason)) {
        if (wrote) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        wsg_close_later(&c->ws, wsi, code ? code : AL_CLOSE_NORMAL, reason ? reason : "closing");
    }
    return 0;
}

/* The connection is gone: the relay is told, the struct conn freed. */
void api_ws_closed(struct api *a, struct lws *wsi, struct conn *c)
{
    if (!c)
        return;
    api_wsess_forget(a, wsi, c);
    if (c->kind == CONN_HOP_IN)
        api_hop_in_closed(c);
    else if (c->kind == CONN_HOP_OUT)
        api_hop_out_closed(c);
    else if (c->cl)
        relay_client_gone(c->cl);
    else if (c->sb)
        relay_runner_down(c->sb, wsi);
    api_ws_free(wsi, c);
}
