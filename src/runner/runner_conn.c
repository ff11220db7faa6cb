/*
 * runner_conn: see runner_conn.h. The thin libwebsockets glue around
 * runner.c: whole binary messages in (wsg.c reassembles them), the
 * runner's frames out until the socket is choked, the close frame.
 * Everything about the protocol happens in src/common/endpoint*.c. The
 * upgrade and plain HTTP are runner_listen.c's; the dial's own events
 * runner_dial.c's.
 *
 * Data model: struct runner_conn is lws's per-connection data: the message
 * being reassembled and why the connection is to close. One connection at
 * a time is current (runner_app.current); a newer one replaces it, and the
 * older one is closed with 4005.
 */
#include "runner_conn.h"

#include <string.h>
#include <uv.h>

#include "al_close.h"
#include "al_err.h"
#include "endpoint.h"
#include "runner_dial.h"
#include "runner_listen.h"
#include "rprobe.h"
#include "wsc.h"
#include "wscraw.h"
#include "wsg.h"
#include "wslisten.h"

struct runner_conn {
    struct wsg ws;      /* the message being reassembled, the close */
    struct wsc *wsc;    /* a dial's link (wslay), on an lws RAW socket */
    struct wsctls *tls; /* a wss:// dial's TLS under the link (wsctls.h) */
    struct runner_app *app;
    struct lws *wsi;
    uint64_t dialed_ms;   /* when the RAW socket connected (uv_now) */
    int dial_done;        /* the dial's outcome was reported (success or failure) */
    int replaced;         /* a newer connection took over */
    int max_aged;         /* --connect: time to reconnect */
    struct rprobe *probe; /* a probe session's (§13): never the current link */
    int rx_paused;        /* a probe's replies wait: its input is not read */
    int broken;           /* a frame could not be written or encoded: drop */
};

static long pull_output(void *runner, struct lws *wsi, uint8_t *buf, size_t cap);

/* The runner has frames to send: called once per loop turn from its idle
 * handle (runner.c), outside libwebsockets' service. A WebSocket link
 * writes them there and then, while the socket takes them: asking lws for
 * a WRITEABLE costs, each turn, a wake-up of the loop and four epoll_ctl
 * (lws arms POLLOUT with uv_poll_start, which libuv does as a DEL and an
 * ADD, and the same again to disarm it). lws 4.1 allows lws_write outside
 * the callback: what the socket does not take it keeps (buflist_out) and
 * asks for the WRITEABLE itself, and wsg_write asks for one when the
 * socket is choked. The dial's wslay link does the same (raw_drain). A
 * close to send, a replaced or aged link and a probe go the usual way,
 * through the WRITEABLE. */
static int raw_drain(struct runner_app *a, struct runner_conn *c);

static void want_write(void *link)
{
    struct lws *wsi = link;
    struct lws_context *ctx = lws_get_context(wsi);
    struct runner_app *a = ctx ? lws_context_user(ctx) : NULL;
    struct runner_conn *c = lws_wsi_user(wsi);
    if (a && c && a->current == wsi && !c->wsc && !c->probe && !c->replaced && !c->max_aged &&
        !c->ws.close_code && !c->broken) {
        int wrote;
        long err = 0;
        enum wsg_tx tx = wsg_drain(wsi, pull_output, a->runner, &wrote, &err);
        if (tx == WSG_TX_CHOKED)
            return; /* a WRITEABLE is asked for */
        if (tx == WSG_TX_IDLE && !runner_closing(a->runner, NULL, NULL))
            return; /* all out (or WSG_WRITES_PER_CALLBACK went: one is asked for) */
        if (tx == WSG_TX_PULL)
            runner_log(a->runner, 0, "cannot encode a frame: %s", al_strerror((int)err));
        if (tx != WSG_TX_IDLE)
            c->broken = 1; /* the WRITEABLE drops the connection */
    }
    if (a && c && a->current == wsi && c->wsc && !c->probe && !c->broken) {
        int rc = raw_drain(a, c);
        if (rc == 0)
            return;
        if (rc < 0)
            c->broken = 1;
    }
    lws_callback_on_writable(wsi);
}

static void link_established(struct runner_app *a, struct lws *wsi, int64_t exp)
{
    wsg_nodelay(wsi);
    if (a->current) {
        struct runner_conn *old = lws_wsi_user(a->current);
        if (old)
            old->replaced = 1;
        runner_link_down(a->runner, a->current);
        lws_callback_on_writable(a->current);
        runner_log(a->runner, 1, "a newer connection replaces the current one");
    }
    a->current = wsi;
    runner_link_up(a->runner, wsi, want_write, exp);
}

static void link_closed(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    if (c)
        wsg_release(&c->ws);
    if (a->current == wsi) {
        a->current = NULL;
        runner_link_down(a->runner, wsi);
        runner_log(a->runner, 1, "connection closed");
    }
}

static int link_receive(struct runner_app *a, struct lws *wsi, struct runner_conn *c,
                        const void *in, size_t len)
{
    if (!c || a->current != wsi || c->replaced)
        return 0; /* an old connection: ignore */
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&c->ws, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    if (rx == WSG_REFUSED) {
        /* the endpoint says why in an ERROR, then asks for the close */
        runner_log(a->runner, 1, "peer's message refused: %s: closing", c->ws.refused_why);
        if (runner_refuse(a->runner, c->ws.refused, c->ws.refused_why) != AL_OK)
            wsg_close_later(&c->ws, wsi, ep_close_code_of(c->ws.refused), c->ws.refused_why);
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (rx != WSG_MESSAGE)
        return 0;
    /* runner_input asks for the writable callback itself, from its idle
     * handle: asking here, inside the poll phase, would make libuv drop the
     * socket's pending event (see runner.c's want_write) */
    int rc = runner_input(a->runner, c->ws.msg, n);
    if (rc != AL_OK)
        runner_log(a->runner, 1, "peer broke the protocol: %s", al_strerror(rc));
    return 0;
}

/* What wsg_drain() writes: the runner's frames. */
static long pull_output(void *runner, struct lws *wsi, uint8_t *buf, size_t cap)
{
    (void)wsi;
    return runner_output(runner, buf, cap);
}

static int link_writeable(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    if (c && c->broken)
        return -1; /* see want_write */
    if (c && c->replaced)
        wsg_close_later(&c->ws, wsi, AL_CLOSE_REPLACED, "replaced by a newer connection");
    if (c && c->max_aged)
        wsg_close_later(&c->ws, wsi, AL_CLOSE_NORMAL, "max age");
    if (c && c->ws.close_code)
        return wsg_close_now(&c->ws, wsi);
    if (a->current != wsi)
        return 0;
    int wrote;
    long err = 0;
    enum wsg_tx tx = wsg_drain(wsi, pull_output, a->runner, &wrote, &err);
    if (tx == WSG_TX_PULL) {
        runner_log(a->runner, 0, "cannot encode a frame: %s", al_strerror((int)err));
        return -1;
    }
    if (tx != WSG_TX_IDLE)
        return tx == WSG_TX_CHOKED ? 0 : -1;
    int code;
    const char *reason;
    if (runner_closing(a->runner, &code, &reason)) {
        if (wrote) { /* the close frame goes in a callback of its own */
            lws_callback_on_writable(wsi);
            return 0;
        }
        runner_log(a->runner, 1, "closing the connection (%d): %s", code, reason);
        if (c)
            wsg_close_later(&c->ws, wsi, code, reason);
        return 0;
    }
    return 0;
}

/* ---- a dial's link: wslay framing (wsc.h) on an lws RAW socket, under
 * TLS for wss:// (wsctls.h) ---- */

static void raw_upgraded(void *ud)
{
    struct runner_conn *c = ud;
    struct runner_app *a = c->app;
    lws_set_timeout(c->wsi, NO_PENDING_TIMEOUT, 0);
    c->dial_done = 1;
    runner_dial_connected(a);
    link_established(a, c->wsi, a->token_exp);
}

static void raw_failed(void *ud, unsigned status, const char *why, int marked)
{
    (void)marked;
    struct runner_conn *c = ud;
    c->dial_done = 1;
    runner_dial_refused(c->app, status, why);
}

static void raw_message(void *ud, const uint8_t *msg, size_t len)
{
    struct runner_conn *c = ud;
    struct runner_app *a = c->app;
    if (a->current != c->wsi || c->replaced)
        return; /* an old connection: ignore */
    int rc = runner_input(a->runner, msg, len);
    if (rc != AL_OK)
        runner_log(a->runner, 1, "peer broke the protocol: %s", al_strerror(rc));
}

static void raw_refused(void *ud, uint16_t error, const char *why)
{
    struct runner_conn *c = ud;
    struct runner_app *a = c->app;
    if (a->current != c->wsi || c->replaced)
        return;
    runner_log(a->runner, 1, "peer's message refused: %s: closing", why);
    if (runner_refuse(a->runner, error, why) != AL_OK)
        (void)wsc_close(c->wsc, ep_close_code_of(error), why);
    lws_callback_on_writable(c->wsi);
}

static void raw_closed(void *ud, int code, const char *reason)
{
    struct runner_conn *c = ud;
    runner_log(c->app->runner, 1, "peer closed the connection (%d): %s", code, reason);
}

static const struct wsc_events raw_events = {
    raw_upgraded, raw_failed, raw_message, raw_refused, raw_closed,
};

static void raw_connected(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    memset(c, 0, sizeof *c);
    c->app = a;
    c->wsi = wsi;
    c->dialed_ms = uv_now(a->loop);
    c->wsc = runner_dial_link(a, &raw_events, c);
    if (c->wsc && a->d_tls && !(c->tls = wsctls_new(a->d_tls_ctx, a->d_addr))) {
        wsc_free(c->wsc);
        c->wsc = NULL;
    }
    if (!c->wsc) {
        c->dial_done = 1;
        runner_dial_refused(a, 0, "cannot make the upgrade request");
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return;
    }
    /* TLS's handshake and the whole upgrade, answer included, within the
     * handshake's time */
    lws_set_timeout(wsi, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE, RUNNER_APP_HANDSHAKE_S);
    lws_callback_on_writable(wsi);
}

/* See wscraw_flush. */
static int raw_flush(struct runner_conn *c)
{
    return wscraw_flush(c->wsc, c->tls, c->wsi);
}

/* wscraw_drain outside lws' service (want_write): 0 done (all out, or the
 * socket is choked and the flush asked for the WRITEABLE); 1 the WRITEABLE
 * must go on (a close to send, the link not ready); -1 broken. */
static int raw_drain(struct runner_app *a, struct runner_conn *c)
{
    if (c->replaced || c->max_aged || !wscraw_ready(c->wsc, c->tls, c->wsi))
        return 1;
    int wrote;
    long err = 0;
    enum wsg_tx tx = wscraw_drain(c->wsc, c->tls, c->wsi, pull_output, a->runner, &wrote, &err);
    if (tx == WSG_TX_PULL)
        runner_log(a->runner, 0, "cannot encode a frame: %s", al_strerror((int)err));
    if (tx < 0)
        return -1;
    return tx == WSG_TX_IDLE && runner_closing(a->runner, NULL, NULL) ? 1 : 0;
}

static int raw_writeable(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    if (!c->wsc || c->broken) /* broken: see want_write */
        return -1;
    if (wsc_close_sent(c->wsc)) /* the close (and TLS's close_notify) out: drop */
        return raw_flush(c) == 0 ? 0 : -1;
    int rc = raw_flush(c);
    if (rc <= 0 || !wsc_is_open(c->wsc))
        return rc < 0 ? -1 : 0;
    if (wsc_close_sent(c->wsc)) { /* the answer to the peer's close went out */
        lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, WSG_CLOSE_SEND_S);
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (c->replaced)
        (void)wsc_close(c->wsc, AL_CLOSE_REPLACED, "replaced by a newer connection");
    if (c->max_aged)
        (void)wsc_close(c->wsc, AL_CLOSE_NORMAL, "max age");
    if (a->current == wsi && !c->replaced && !c->max_aged) {
        int wrote;
        long err = 0;
        enum wsg_tx tx = wscraw_drain(c->wsc, c->tls, wsi, pull_output, a->runner, &wrote, &err);
        if (tx == WSG_TX_PULL)
            runner_log(a->runner, 0, "cannot encode a frame: %s", al_strerror((int)err));
        if (tx != WSG_TX_IDLE)
            return tx == WSG_TX_CHOKED ? 0 : -1;
        int code;
        const char *reason;
        if (runner_closing(a->runner, &code, &reason)) {
            if (wrote) { /* the close frame goes in a callback of its own */
                lws_callback_on_writable(wsi);
                return 0;
            }
            runner_log(a->runner, 1, "closing the connection (%d): %s", code, reason);
            (void)wsc_close(c->wsc, code, reason);
        }
    }
    rc = raw_flush(c);
    if (rc < 0)
        return -1;
    if (wsc_close_sent(c->wsc)) {
        lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, WSG_CLOSE_SEND_S);
        lws_callback_on_writable(wsi);
    }
    return 0;
}

static int raw_receive(struct runner_conn *c, const void *in, size_t len)
{
    return wscraw_receive(c->wsc, c->tls, c->wsi, in, len);
}

static void raw_closed_socket(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    if (!c->wsc)
        return;
    if (wsc_is_open(c->wsc)) {
        int aged = c->max_aged;
        int was_current = a->current == wsi;
        link_closed(a, wsi, c);
        runner_dial_closed(a, was_current, aged);
    } else if (!c->dial_done) {
        c->dial_done = 1;
        char why[WSCTLS_WHY_MAX + 32];
        wscraw_dial_why(c->tls,
                        uv_now(a->loop) - c->dialed_ms >= (uint64_t)RUNNER_APP_HANDSHAKE_S * 1000u,
                        RUNNER_APP_HANDSHAKE_S, why, sizeof why);
        runner_dial_refused(a, 0, why);
    }
    wsc_free(c->wsc);
    c->wsc = NULL;
    wsctls_free(c->tls);
    c->tls = NULL;
}

/* ---- probe sessions (docs/protocol.md §13, rprobe.c) ---- */

static uint64_t now_us(void)
{
    return uv_hrtime() / 1000u;
}

static long pull_probe(void *probe, struct lws *wsi, uint8_t *buf, size_t cap)
{
    (void)wsi;
    return rprobe_output(probe, buf, cap, now_us());
}

static void probe_flow(struct lws *wsi, struct runner_conn *c)
{
    int want = rprobe_wants_input(c->probe);
    if (want == !c->rx_paused)
        return;
    c->rx_paused = !want;
    (void)lws_rx_flow_control(wsi, want);
}

static int probe_receive(struct runner_app *a, struct lws *wsi, struct runner_conn *c,
                         const void *in, size_t len)
{
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&c->ws, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    if (rx == WSG_REFUSED)
        rprobe_fail(c->probe, (uint16_t)c->ws.refused, c->ws.refused_why);
    else if (rx == WSG_MESSAGE && rprobe_input(c->probe, c->ws.msg, n) != AL_OK)
        runner_log(a->runner, 1, "probe session: peer broke the protocol: closing");
    probe_flow(wsi, c);
    lws_callback_on_writable(wsi);
    return 0;
}

static int probe_writeable(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    if (c->ws.close_code)
        return wsg_close_now(&c->ws, wsi);
    int wrote;
    long err = 0;
    enum wsg_tx tx = wsg_drain(wsi, pull_probe, c->probe, &wrote, &err);
    if (tx == WSG_TX_PULL || tx == WSG_TX_FAILED)
        return -1;
    probe_flow(wsi, c);
    int code;
    const char *reason;
    if (tx == WSG_TX_IDLE && rprobe_closing(c->probe, &code, &reason)) {
        if (wrote) { /* the close frame goes in a callback of its own */
            lws_callback_on_writable(wsi);
            return 0;
        }
        runner_log(a->runner, 1, "probe session closing (%d): %s", code, reason);
        wsg_close_later(&c->ws, wsi, code, reason);
        lws_callback_on_writable(wsi);
    }
    return 0;
}

static void probe_established(struct runner_app *a, struct lws *wsi, struct runner_conn *c)
{
    c->probe = a->pending_probe;
    a->pending_probe = NULL;
    a->nprobes++;
    wsg_nodelay(wsi);
    runner_log(a->runner, 1, "probe session open (%u at once)", a->nprobes);
    /* the token's deadline: a timer, since nothing else may come */
    lws_set_timer_usecs(wsi, LWS_USEC_PER_SEC);
    lws_callback_on_writable(wsi);
}

static void probe_closed(struct runner_app *a, struct runner_conn *c)
{
    if (!c->probe)
        return;
    rprobe_free(c->probe);
    c->probe = NULL;
    a->nprobes--;
    wsg_release(&c->ws);
    if (!a->stopping) /* at the end, lws closes it after the runner is gone */
        runner_log(a->runner, 1, "probe session closed");
}

void runner_conn_max_age(struct runner_app *a)
{
    if (!a->current)
        return;
    struct runner_conn *c = lws_wsi_user(a->current);
    runner_log(a->runner, 1, "connection reached its maximum age: reconnecting");
    if (c)
        c->max_aged = 1;
    lws_callback_on_writable(a->current);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct runner_app *a = ctx ? lws_context_user(ctx) : NULL;
    struct runner_conn *c = user;
    if (!a)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return runner_listen_upgrade(a, wsi, in);
    case LWS_CALLBACK_HTTP:
        return runner_listen_http(a, wsi);
    case LWS_CALLBACK_ESTABLISHED: {
        int probe = a->pending_probe && a->pending_wsi == wsi;
        int64_t exp = runner_listen_accepted(a, wsi);
        if (c)
            memset(c, 0, sizeof *c);
        if (probe && c)
            probe_established(a, wsi, c);
        else
            link_established(a, wsi, exp);
        return 0;
    }
    case LWS_CALLBACK_TIMER:
        if (c && c->probe) { /* a probe's token deadline, checked each second */
            lws_callback_on_writable(wsi);
            lws_set_timer_usecs(wsi, LWS_USEC_PER_SEC);
        }
        return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        runner_dial_failed(a, wsi, in);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        if (c && c->probe)
            return probe_receive(a, wsi, c, in, len);
        return link_receive(a, wsi, c, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (c && c->probe)
            return probe_writeable(a, wsi, c);
        return link_writeable(a, wsi, c);
    case LWS_CALLBACK_CLOSED:
        if (c && c->probe) {
            probe_closed(a, c);
            return 0;
        }
        link_closed(a, wsi, c);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        wsl_gone(a->wsl, wsi);
        if (c && c->wsc) { /* a dial's link whose socket never reported its close */
            wsc_free(c->wsc);
            c->wsc = NULL;
            wsctls_free(c->tls);
            c->tls = NULL;
        }
        break;
    case LWS_CALLBACK_RAW_CONNECTED:
        if (c)
            raw_connected(a, wsi, c);
        return c ? 0 : -1;
    case LWS_CALLBACK_RAW_RX:
        return c ? raw_receive(c, in, len) : -1;
    case LWS_CALLBACK_RAW_WRITEABLE:
        return c ? raw_writeable(a, wsi, c) : -1;
    case LWS_CALLBACK_RAW_CLOSE:
        if (c)
            raw_closed_socket(a, wsi, c);
        return 0;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

const struct lws_protocols runner_conn_protocols[] = {
    {AL_SUBPROTOCOL, callback, sizeof(struct runner_conn), AL_MAX_FRAME, 0, NULL, AL_MAX_FRAME},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};
