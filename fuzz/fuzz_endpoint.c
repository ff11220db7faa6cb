/*
 * Fuzz target: the airlock.v1 endpoint state machine (src/common/endpoint*.c)
 * driven by arbitrary sequences of frames and application calls.
 *
 * Input: byte 0 picks the role; then records [kind u8][len u8][len bytes].
 * Kinds: raw frame; frame with a header built here (so the fuzzer reaches
 * payload logic); application calls (write, consume, eof, close, open,
 * exit, snapshot, resize, signal, token, list, adopt, ping) and the relay
 * session calls (host adopt on ATTACH, resync, role, viewers, take-over);
 * the credential proxy's channels (PROXY_AT, a host's PROXY_OPEN, a
 * controller's refusal; ids with the top bit set); link down/up; clock.
 * Oracle: no crash, no leak, no hang, every frame the endpoint emits
 * decodes (an endpoint never sends what a peer must reject), and no
 * channel state change is refused (a move missing from the endpoint's
 * tables: it asserts in a debug build and logs an error, level 0, in the
 * others, which aborts here).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_limits.h"
#include "endpoint.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_event(void *ud, const struct ep_event *ev)
{
    struct ep *ep = *(struct ep **)ud;
    /* a cooperative application: answer opens, deliver data */
    if (ev->type == EP_EV_OPEN)
        (void)(ev->channel % 3 ? ep_opened(ep, ev->channel, 42)
                               : ep_open_failed(ep, ev->channel, "no"));
    else if (ev->type == EP_EV_DATA && ev->len % 2 == 0)
        (void)ep_consume(ep, ev->channel, ev->stream, ev->len);
    else if (ev->type == EP_EV_SNAPSHOT_REQ)
        (void)ep_snapshot(ep, ev->channel, 0, 80, 24, (const uint8_t *)"snap", 4);
    else if (ev->type == EP_EV_ATTACH && ev->channel % 2) /* a relay adopts what it knows */
        (void)ep_host_adopt(ep, ev->channel, (uint8_t)(ev->channel % 4 == 3), ev->offset, ev->to,
                            ev->channel);
    else if (ev->type == EP_EV_PROXY_OPEN && ev->channel % 3 == 0) /* some are refused */
        (void)ep_proxy_refuse(ep, ev->channel, FR_ERR_LIMIT, "no");
}

static void on_log(void *ud, int level, const char *msg)
{
    (void)ud;
    (void)msg;
    if (level == 0)
        abort(); /* a channel state change the endpoint's tables lack */
}

static void drain(struct ep *ep, uint8_t *out, uint64_t now)
{
    static struct fr_frame f;
    for (int i = 0; i < 10000; i++) {
        long n = ep_output(ep, out, AL_MAX_FRAME, now);
        if (n <= 0)
            return;
        if (fr_decode(out, (size_t)n, &f) != 0)
            abort(); /* we emitted an invalid frame */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t out[AL_MAX_FRAME];
    static uint8_t frame[AL_FRAME_HEADER + 256];
    if (size < 1)
        return 0;
    struct ep_config c;
    ep_config_default(&c, data[0] & 1 ? FR_ROLE_HOST : FR_ROLE_CONTROLLER);
    c.window = 1024;
    c.tx_ring = 4096;
    c.ping_interval_us = 1000;
    c.idle_timeout_us = 100000;
    struct ep *ep = NULL;
    c.on_event = on_event;
    c.on_log = on_log;
    c.serves_proxy = (data[0] & 4) != 0;
    c.ud = &ep;
    if (ep_new(&c, &ep) != 0)
        return 0;
    uint64_t now = 0;
    ep_link_up(ep, now);
    if (data[0] & 2) { /* start past HELLO */
        struct fr_frame h;
        memset(&h, 0, sizeof h);
        h.type = FR_HELLO;
        h.u.hello.version_min = h.u.hello.version_max = 1;
        h.u.hello.role = data[0] & 1 ? FR_ROLE_CONTROLLER : FR_ROLE_HOST;
        h.u.hello.max_frame = AL_MAX_FRAME;
        long n = fr_encode(&h, frame, sizeof frame);
        if (n > 0)
            (void)ep_input(ep, frame, (size_t)n, now);
    }
    size_t pos = 1;
    while (pos + 2 <= size) {
        uint8_t kind = data[pos], len = data[pos + 1];
        pos += 2;
        if (len > size - pos)
            len = (uint8_t)(size - pos);
        const uint8_t *p = data + pos;
        pos += len;
        /* ids 0..3, of the controller's space or (top bit of p[0]) the host's */
        uint32_t ch = len ? (p[0] % 4) | (p[0] & 0x80 ? FR_PROXY_CHANNEL_BIT : 0) : 1;
        unsigned st = len > 1 ? p[1] % 3 : 1;
        switch (kind % 22) {
        case 0: /* raw bytes as one message */
            (void)ep_input(ep, p, len, now);
            break;
        case 1: /* header built here: type, flags, channel, then payload */
            if (len >= 3) {
                frame[0] = p[0];
                frame[1] = p[1] % 4;
                frame[2] = p[2] & 0x80; /* a proxy channel's id */
                frame[3] = frame[4] = 0;
                frame[5] = p[2] % 4;
                uint32_t plen = (uint32_t)len - 3;
                frame[6] = frame[7] = frame[8] = 0;
                frame[9] = (uint8_t)plen;
                memcpy(frame + AL_FRAME_HEADER, p + 3, plen);
                (void)ep_input(ep, frame, AL_FRAME_HEADER + plen, now);
            }
            break;
        case 2:
            (void)ep_write(ep, ch, st, p, len);
            break;
        case 3:
            (void)ep_consume(ep, ch, st, len);
            break;
        case 4:
            (void)ep_eof(ep, ch, st);
            break;
        case 5:
            (void)ep_close(ep, ch);
            break;
        case 6: {
            struct fr_open o;
            memset(&o, 0, sizeof o);
            o.mode = len & 1;
            o.cols = 80;
            o.rows = 24;
            o.argc = 1;
            o.argv[0] = (struct fr_str){"sh", 2};
            (void)ep_open(ep, &o);
            break;
        }
        case 7:
            (void)ep_exit(ep, ch, len > 1 ? p[1] : 0, 0, 0);
            break;
        case 8:
            (void)ep_snapshot(ep, ch, len, 80, 24, p, len);
            break;
        case 9:
            (void)ep_resize(ep, ch, (uint16_t)(len + 1), 24);
            (void)ep_signal(ep, ch, len > 1 ? p[1] : 2, 0);
            (void)ep_request_snapshot(ep, ch);
            break;
        case 10:
            (void)ep_send_token(ep, (const char *)p, len);
            (void)ep_list(ep);
            break;
        case 11:
            (void)ep_adopt(ep, ch, len & 1, len, 0);
            break;
        case 12:
            ep_link_down(ep);
            ep_link_up(ep, now);
            break;
        case 13:
            now += (uint64_t)len * 1000;
            ep_tick(ep, now);
            (void)ep_next_deadline(ep);
            break;
        case 14:
            ep_set_token_deadline(ep, now + len);
            break;
        case 15:
            (void)ep_host_adopt(ep, ch, len & 1, len > 1 ? p[1] : 0, len > 2 ? p[2] : 0, len);
            (void)ep_ping(ep);
            break;
        case 16:
            (void)ep_resync(ep, ch, len > 1 ? (uint64_t)p[1] * 7 : 0, 80, 24, p, len);
            break;
        case 17:
            (void)ep_set_role(ep, ch, len > 1 ? p[1] % 4 : FR_WRITER, len);
            break;
        case 18: {
            const char *names[3] = {"ada", "", "otto"};
            uint8_t roles[3] = {FR_WRITER, FR_VIEWER, len > 1 ? p[1] : FR_VIEWER};
            unsigned off = len % 2 ? 0 : 1; /* with or without an empty name */
            (void)ep_viewers(ep, ch, len % (4 - off), names + off, roles + off);
            break;
        }
        case 19:
            (void)ep_takeover(ep, ch);
            break;
        case 20: /* the host's proxy listener and a connection to it */
            (void)ep_proxy_at(ep, len % 2 ? "http://127.0.0.1:8091" : NULL);
            (void)ep_proxy_open(ep);
            (void)ep_proxy_count(ep);
            break;
        case 21:
            (void)ep_proxy_refuse(ep, ch, len > 1 ? p[1] : FR_ERR_FORBIDDEN, "refused");
            break;
        default: {
            struct ep_stream_info si;
            (void)ep_stream_info(ep, ch, st, &si);
            (void)ep_writable(ep, ch, st);
            (void)ep_closing(ep, NULL, NULL);
            break;
        }
        }
        drain(ep, out, now);
    }
    ep_free(ep);
    return 0;
}
