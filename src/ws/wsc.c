/*
 * wsc: one client WebSocket link over wslay's event API (see wsc.h).
 *
 * Receiving: wslay pulls bytes through recv_cb from the slice wsc_receive
 * was given, and hands a data frame's payload over in chunks (buffering
 * off: we reassemble into our own AL_MAX_FRAME buffer, as wsg.c does, so
 * a message costs one copy and no allocation). A frame's declared length
 * is checked at its start, so a message too big is refused before its
 * payload arrives. Control frames wslay buffers itself (125 bytes at
 * most), answers pings, and answers a close.
 *
 * Sending: wsc_send queues a message in wslay; wsc_output lets wslay
 * encode (mask) into the caller's buffer through send_cb until it is full.
 * The upgrade request goes first, before any frame.
 */
#include "wsc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "al_err.h"
#include "al_limits.h"
#include "frame.h"

struct wsc {
    wslay_event_context_ptr ws;
    const struct wsc_events *ev;
    void *ud;
    struct wscu *up; /* the upgrade's answer being read; NULL once open */
    int open;        /* upgraded */
    int failed;      /* the upgrade failed */
    char *req;       /* the request's bytes not yet output, and its length */
    size_t req_len, req_off;
    /* input being handed to wslay (recv_cb) */
    const uint8_t *in;
    size_t in_len;
    /* the message being reassembled */
    uint8_t *msg;
    size_t len;
    int frame_ctrl; /* the frame being read is a control frame */
    int refused;    /* input refused: data dropped from here on */
    /* output: the caller's buffer during wsc_output */
    uint8_t *out;
    size_t out_cap, out_len;
    /* masking keys: random bytes, WSC_MASK_POOL fetched at once */
    uint8_t pool[WSC_MASK_POOL];
    size_t pool_left;
};

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    (void)flags;
    struct wsc *c = ud;
    if (!c->in_len) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < c->in_len ? len : c->in_len;
    memcpy(buf, c->in, n);
    c->in += n;
    c->in_len -= n;
    return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
    (void)flags;
    struct wsc *c = ud;
    size_t room = c->out_cap - c->out_len;
    if (!room || !c->out) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < room ? len : room;
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
    return (ssize_t)n;
}

/* RFC 6455 §5.3: a fresh, unpredictable key per frame, from the kernel. */
static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
    struct wsc *c = ud;
    if (len > sizeof c->pool)
        return -1;
    if (c->pool_left < len) {
        if (getrandom(c->pool, sizeof c->pool, 0) != (ssize_t)sizeof c->pool) {
            wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
        c->pool_left = sizeof c->pool;
    }
    memcpy(buf, c->pool + sizeof c->pool - c->pool_left, len);
    memset(c->pool + sizeof c->pool - c->pool_left, 0, len);
    c->pool_left -= len;
    return 0;
}

static void refuse(struct wsc *c, uint16_t error, const char *why)
{
    c->refused = 1;
    c->len = 0;
    c->ev->refused(c->ud, error, why);
}

static void frame_start_cb(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_start_arg *arg, void *ud)
{
    (void)ctx;
    struct wsc *c = ud;
    c->frame_ctrl = (arg->opcode & 0x8) != 0;
    if (c->frame_ctrl || c->refused)
        return;
    if (arg->opcode != WSLAY_CONTINUATION_FRAME) {
        c->len = 0;
        if (arg->opcode != WSLAY_BINARY_FRAME) {
            refuse(c, FR_ERR_PROTOCOL, "text messages are not allowed");
            return;
        }
    }
    if (arg->payload_length > (uint64_t)(AL_MAX_FRAME - c->len))
        refuse(c, FR_ERR_TOO_BIG, "message larger than the frame limit");
}

static void frame_chunk_cb(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_chunk_arg *arg, void *ud)
{
    (void)ctx;
    struct wsc *c = ud;
    if (c->frame_ctrl || c->refused || !arg->data_length)
        return;
    if (arg->data_length > AL_MAX_FRAME - c->len) { /* checked at the start; kept */
        refuse(c, FR_ERR_TOO_BIG, "message larger than the frame limit");
        return;
    }
    if (!c->msg) {
        c->msg = malloc(AL_MAX_FRAME);
        if (!c->msg) {
            wslay_event_set_error(ctx, WSLAY_ERR_NOMEM);
            refuse(c, FR_ERR_TOO_BIG, "out of memory");
            return;
        }
    }
    memcpy(c->msg + c->len, arg->data, arg->data_length);
    c->len += arg->data_length;
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *ud)
{
    (void)ctx;
    struct wsc *c = ud;
    if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        char why[WSC_CLOSE_WHY_MAX + 1] = "";
        size_t n = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
        if (n > WSC_CLOSE_WHY_MAX)
            n = WSC_CLOSE_WHY_MAX;
        if (n)
            memcpy(why, arg->msg + 2, n);
        why[n] = 0;
        c->ev->closed(c->ud, arg->status_code ? arg->status_code : WSLAY_CODE_NO_STATUS_RCVD, why);
        return;
    }
    if (arg->opcode != WSLAY_BINARY_FRAME || c->refused)
        return;
    size_t n = c->len;
    c->len = 0;
    static const uint8_t none[1];
    c->ev->message(c->ud, n ? c->msg : none, n);
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb,
    .send_callback = send_cb,
    .genmask_callback = genmask_cb,
    .on_frame_recv_start_callback = frame_start_cb,
    .on_frame_recv_chunk_callback = frame_chunk_cb,
    .on_msg_recv_callback = msg_cb,
};

struct wsc *wsc_new(const struct wscu_request *r, const struct wsc_events *ev, void *ud)
{
    struct wsc *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ev = ev;
    c->ud = ud;
    c->req = malloc(WSC_REQUEST_MAX);
    char key[WSCU_KEY_LEN + 1];
    if (!c->req || wscu_request(r, c->req, WSC_REQUEST_MAX, &c->req_len, key) != AL_OK ||
        !(c->up = wscu_new(key, r->subprotocol, r->mark)) ||
        wslay_event_context_client_init(&c->ws, &callbacks, c) != 0) {
        wsc_free(c);
        return NULL;
    }
    wslay_event_config_set_no_buffering(c->ws, 1);
    /* lengths are ours to check (frame_start_cb), so that the peer hears
     * why in an ERROR first; this only stops what is absurd */
    wslay_event_config_set_max_recv_msg_length(c->ws, (uint64_t)INT64_MAX);
    return c;
}

void wsc_free(struct wsc *c)
{
    if (!c)
        return;
    if (c->ws)
        wslay_event_context_free(c->ws);
    wscu_free(c->up);
    if (c->req)
        explicit_bzero(c->req, WSC_REQUEST_MAX); /* it carries the token */
    free(c->req);
    free(c->msg);
    free(c);
}

static int read_frames(struct wsc *c, const uint8_t *in, size_t len)
{
    c->in = in;
    c->in_len = len;
    int rc = wslay_event_recv(c->ws);
    c->in = NULL;
    c->in_len = 0;
    if (rc == WSLAY_ERR_NOMEM)
        return AL_E_NOMEM;
    return AL_OK; /* a broken frame: wslay queued close 1002 */
}

int wsc_receive(struct wsc *c, const uint8_t *in, size_t len)
{
    if (c->failed)
        return AL_E_PROTO;
    if (!c->open) {
        size_t used = 0;
        enum wscu_state st = wscu_feed(c->up, in, len, &used);
        if (st == WSCU_MORE)
            return AL_OK;
        if (st == WSCU_FAILED) {
            c->failed = 1;
            c->ev->failed(c->ud, wscu_status(c->up), wscu_why(c->up), wscu_marked(c->up));
            return AL_E_PROTO;
        }
        c->open = 1;
        wscu_free(c->up);
        c->up = NULL;
        c->ev->upgraded(c->ud);
        in += used;
        len -= used;
    }
    if (!wslay_event_want_read(c->ws))
        return len ? AL_E_CLOSED : AL_OK;
    return len ? read_frames(c, in, len) : AL_OK;
}

int wsc_send(struct wsc *c, const uint8_t *msg, size_t len)
{
    if (!c->open || wslay_event_get_close_sent(c->ws))
        return AL_E_STATE;
    if (len > AL_MAX_FRAME)
        return AL_E_TOOBIG;
    struct wslay_event_msg m = {WSLAY_BINARY_FRAME, msg, len};
    int rc = wslay_event_queue_msg(c->ws, &m);
    if (rc == WSLAY_ERR_NOMEM)
        return AL_E_NOMEM;
    return rc ? AL_E_STATE : AL_OK;
}

int wsc_close(struct wsc *c, int code, const char *why)
{
    if (!c->open)
        return AL_E_STATE;
    size_t n = why ? strlen(why) : 0;
    if (n > WSC_CLOSE_WHY_MAX - 1)
        n = WSC_CLOSE_WHY_MAX - 1;
    return wslay_event_queue_close(c->ws, (uint16_t)code, (const uint8_t *)why, n) ? AL_E_STATE
                                                                                   : AL_OK;
}

size_t wsc_output(struct wsc *c, uint8_t *buf, size_t cap)
{
    size_t n = 0;
    if (c->req) {
        n = c->req_len - c->req_off < cap ? c->req_len - c->req_off : cap;
        memcpy(buf, c->req + c->req_off, n);
        c->req_off += n;
        if (c->req_off == c->req_len) {
            explicit_bzero(c->req, WSC_REQUEST_MAX);
            free(c->req);
            c->req = NULL;
        }
        return n;
    }
    if (!c->open)
        return 0;
    c->out = buf;
    c->out_cap = cap;
    c->out_len = 0;
    (void)wslay_event_send(c->ws); /* a failure stops writing: what came is sent */
    n = c->out_len;
    c->out = NULL;
    c->out_cap = c->out_len = 0;
    return n;
}

int wsc_pending(const struct wsc *c)
{
    return c->req || (c->open && wslay_event_want_write(c->ws));
}

int wsc_close_sent(const struct wsc *c)
{
    return c->open && wslay_event_get_close_sent(c->ws);
}

int wsc_is_open(const struct wsc *c)
{
    return c->open;
}
