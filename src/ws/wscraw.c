/*
 * wscraw: see wscraw.h.
 */
#include "wscraw.h"

#include <stdint.h>

#include "al_err.h"

int wscraw_receive(struct wsc *c, struct lws *wsi, const void *in, size_t len)
{
    if (!c)
        return -1;
    int rc = wsc_receive(c, in, len);
    if (rc == AL_E_NOMEM || rc == AL_E_PROTO)
        return -1;
    if (wsc_pending(c)) /* a pong or a close answer to write */
        lws_callback_on_writable(wsi);
    return 0;
}

int wscraw_flush(struct wsc *c, struct lws *wsi)
{
    static uint8_t buf[LWS_PRE + WSCRAW_OUT_MAX];
    while (wsc_pending(c)) {
        size_t n = wsc_output(c, buf + LWS_PRE, WSCRAW_OUT_MAX);
        if (!n)
            break;
        if (lws_write(wsi, buf + LWS_PRE, n, LWS_WRITE_RAW) < (int)n)
            return -1;
        if (lws_send_pipe_choked(wsi)) {
            lws_callback_on_writable(wsi);
            return 0;
        }
    }
    return 1;
}
