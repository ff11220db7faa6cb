/*
 * wsg: whole messages in and out, close frames and query arguments
 * over libwebsockets 4.1 (see wsg.h for why each is needed).
 */
#include "wsg.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "al_limits.h"
#include "frame.h"

/* lws 4.1's private value for a close frame (the public enum skips 4). */
#define WSG_LWS_WRITE_CLOSE 4

/* Refuse the connection's input from here on; the caller says why in band. */
static enum wsg_rx refuse(struct wsg *g, uint16_t error, const char *why)
{
    g->refused = error;
    (void)snprintf(g->refused_why, sizeof g->refused_why, "%s", why);
    g->len = 0;
    return WSG_REFUSED;
}

enum wsg_rx wsg_receive(struct wsg *g, struct lws *wsi, const void *in, size_t len, size_t *msg_len)
{
    if (g->close_code || g->refused)
        return WSG_IGNORED;
    if (lws_is_first_fragment(wsi)) {
        g->len = 0;
        if (!lws_frame_is_binary(wsi))
            return refuse(g, FR_ERR_PROTOCOL, "text messages are not allowed");
    }
    if (len > AL_MAX_FRAME - g->len)
        return refuse(g, FR_ERR_TOO_BIG, "message larger than the frame limit");
    if (!g->msg) {
        g->msg = malloc(AL_MAX_FRAME);
        if (!g->msg)
            return WSG_NOMEM;
    }
    if (len)
        memcpy(g->msg + g->len, in, len);
    g->len += len;
    if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
        return WSG_MORE;
    *msg_len = g->len;
    g->len = 0;
    return WSG_MESSAGE;
}

void wsg_close_later(struct wsg *g, struct lws *wsi, int code, const char *why)
{
    if (g->close_code)
        return;
    g->close_code = code;
    (void)snprintf(g->close_why, sizeof g->close_why, "%s", why ? why : "");
    lws_callback_on_writable(wsi);
}

int wsg_close_now(struct wsg *g, struct lws *wsi)
{
    if (g->close_sent)
        return -1;
    uint8_t buf[LWS_PRE + 2 + sizeof g->close_why];
    size_t n = strlen(g->close_why);
    buf[LWS_PRE] = (uint8_t)(g->close_code >> 8);
    buf[LWS_PRE + 1] = (uint8_t)g->close_code;
    memcpy(buf + LWS_PRE + 2, g->close_why, n); // NOLINT(bugprone-not-null-terminated-result)
    g->close_sent = 1;
    if (lws_write(wsi, buf + LWS_PRE, n + 2, (enum lws_write_protocol)WSG_LWS_WRITE_CLOSE) < 0)
        return -1;
    lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, WSG_CLOSE_SEND_S);
    lws_callback_on_writable(wsi);
    return 0;
}

int wsg_write(struct lws *wsi, uint8_t *msg, size_t len)
{
    if (lws_write(wsi, msg, len, LWS_WRITE_BINARY) < (int)len)
        return -1;
    if (lws_send_pipe_choked(wsi)) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    return 1;
}

static int lws_message(void *wud, struct lws *wsi, uint8_t *msg, size_t len)
{
    (void)wud;
    return wsg_write(wsi, msg, len);
}

enum wsg_tx wsg_drain(struct lws *wsi, wsg_pull_fn pull, void *ud, int *wrote, long *err)
{
    return wsg_drain_to(wsi, pull, ud, lws_message, NULL, wrote, err);
}

enum wsg_tx wsg_drain_to(struct lws *wsi, wsg_pull_fn pull, void *ud, wsg_write_fn write, void *wud,
                         int *wrote, long *err)
{
    static uint8_t buf[LWS_PRE + AL_MAX_FRAME];
    *wrote = 0;
    for (int i = 0; i < WSG_WRITES_PER_CALLBACK; i++) {
        long n = pull(ud, wsi, buf + LWS_PRE, AL_MAX_FRAME);
        if (n < 0) {
            *err = n;
            return WSG_TX_PULL;
        }
        if (n == 0)
            break;
        int rc = write(wud, wsi, buf + LWS_PRE, (size_t)n);
        if (rc < 0)
            return WSG_TX_FAILED;
        *wrote = 1;
        if (rc == 0)
            return WSG_TX_CHOKED;
        if (i == WSG_WRITES_PER_CALLBACK - 1)
            lws_callback_on_writable(wsi);
    }
    return WSG_TX_IDLE;
}

const char *wsg_urlarg(struct lws *wsi, const char *name, char *buf, int cap)
{
    char key[64];
    (void)snprintf(key, sizeof key, "%s=", name);
    if (!lws_get_urlarg_by_name(wsi, key, buf, cap))
        return NULL;
    size_t kl = strlen(key);
    return !strncmp(buf, key, kl) ? buf + kl : buf;
}

void wsg_release(struct wsg *g)
{
    free(g->msg);
    g->msg = NULL;
    g->len = 0;
}

void wsg_nodelay(struct lws *wsi)
{
    int one = 1;
    int fd = lws_get_socket_fd(wsi);
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
