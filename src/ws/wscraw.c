/*
 * wscraw: see wscraw.h.
 */
#include "wscraw.h"

#include <stdint.h>
#include <stdio.h>

#include "al_err.h"

/* Plaintext from TLS, into the link. */
static int deliver(void *ud, const uint8_t *plain, size_t len)
{
    int rc = wsc_receive(ud, plain, len);
    return rc == AL_E_NOMEM || rc == AL_E_PROTO ? rc : 0;
}

int wscraw_receive(struct wsc *c, struct wsctls *t, struct lws *wsi, const void *in, size_t len)
{
    if (!c)
        return -1;
    int rc = t ? wsctls_receive(t, in, len, deliver, c) : wsc_receive(c, in, len);
    if (rc == AL_E_NOMEM || rc == AL_E_PROTO || (t && rc != AL_OK))
        return -1;
    /* a pong, a close answer, the upgrade request after the handshake,
     * TLS's own answers */
    if (wsc_pending(c) || (t && wsctls_pending(t)))
        lws_callback_on_writable(wsi);
    return 0;
}

/* The next bytes for the socket into buf: the link's, or (with TLS) its
 * encryption; 0 when none wait. -1: TLS refused them. */
static long next_bytes(struct wsc *c, struct wsctls *t, uint8_t *buf)
{
    if (!t)
        return wsc_pending(c) ? (long)wsc_output(c, buf, WSCRAW_OUT_MAX) : 0;
    if (!wsctls_pending(t) && wsctls_established(t)) {
        if (wsc_pending(c)) {
            size_t n = wsc_output(c, buf, WSCRAW_OUT_MAX);
            if (n && wsctls_write(t, buf, n) != AL_OK)
                return -1;
        } else if (wsc_close_sent(c)) {
            wsctls_shutdown(t); /* once, after the close frame */
        }
    }
    return (long)wsctls_output(t, buf, WSCRAW_OUT_MAX);
}

int wscraw_flush(struct wsc *c, struct wsctls *t, struct lws *wsi)
{
    static uint8_t buf[LWS_PRE + WSCRAW_OUT_MAX];
    for (;;) {
        long n = next_bytes(c, t, buf + LWS_PRE);
        if (n < 0)
            return -1;
        if (!n)
            break;
        if (lws_write(wsi, buf + LWS_PRE, (size_t)n, LWS_WRITE_RAW) < (int)n)
            return -1;
        if (lws_send_pipe_choked(wsi)) {
            lws_callback_on_writable(wsi);
            return 0;
        }
    }
    return 1;
}

/* A wslay link's message write, for wsg_drain_to. */
struct raw_link {
    struct wsc *c;
    struct wsctls *t;
};

static int raw_message(void *wud, struct lws *wsi, uint8_t *msg, size_t len)
{
    const struct raw_link *l = wud;
    if (wsc_send(l->c, msg, len) != AL_OK)
        return -1;
    return wscraw_flush(l->c, l->t, wsi);
}

enum wsg_tx wscraw_drain(struct wsc *c, struct wsctls *t, struct lws *wsi, wsg_pull_fn pull,
                         void *ud, int *wrote, long *err)
{
    struct raw_link l = {c, t};
    return wsg_drain_to(wsi, pull, ud, raw_message, &l, wrote, err);
}

int wscraw_ready(struct wsc *c, const struct wsctls *t, struct lws *wsi)
{
    return c && wsc_is_open(c) && !wsc_close_sent(c) && (!t || wsctls_established(t)) &&
           !lws_send_pipe_choked(wsi);
}

void wscraw_dial_why(const struct wsctls *t, int timed_out, int deadline_s, char *why, size_t cap)
{
    if (t && wsctls_why(t)[0])
        (void)snprintf(why, cap, "%s", wsctls_why(t));
    else if (t && !wsctls_established(t) && timed_out)
        (void)snprintf(why, cap, "TLS handshake not done within %d s", deadline_s);
    else if (t && !wsctls_established(t))
        (void)snprintf(why, cap, "connection closed during the TLS handshake");
    else if (timed_out)
        (void)snprintf(why, cap, "no upgrade answer within %d s", deadline_s);
    else
        (void)snprintf(why, cap, "connection closed before the upgrade answer");
}
