/*
 * httpsrv: a small HTTP/1.1 upstream for the proxy's unit tests, run by
 * the test's own libuv loop on 127.0.0.1 (an ephemeral port). Each path
 * has one scripted answer, chosen by the word the path holds:
 *   /stream   SSE: three events 400 ms apart, then a stop event, close
 *   /forever  SSE: a tick every 50 ms until the client goes
 *   /echo     201 with the request body as the response body (keep-alive)
 *   /broken   Content-Length 100, 10 bytes, close
 *   /big      40000 bytes with a Content-Length
 *   /both     Content-Length 3 and a chunked body of 5 bytes, close
 *   /fold     a header line folded onto the next (obs-fold), close
 *   /early    403 with a Content-Length as soon as the head is in, before
 *             any body (as a server refusing an upload does)
 *   /hang     no answer at all
 * It keeps every request head it was sent (heads) and the last body.
 */
#ifndef TEST_HTTPSRV_H
#define TEST_HTTPSRV_H

#include <stddef.h>
#include <uv.h>

struct httpsrv;

struct httpsrv_conn {
    uv_tcp_t tcp;
    uv_timer_t t;
    char in[65536];
    size_t len;
    int answered, closed, step, open;
    char path[64];
    struct httpsrv *s;
    struct httpsrv_conn *next;
};

struct httpsrv {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    int eof_seen;      /* connections the client closed */
    int requests;      /* request heads received */
    char heads[65536]; /* every request head, one after the other */
    size_t heads_len;
    char body[65536]; /* the last /echo body, as received (framing kept) */
    size_t body_len;
    struct httpsrv_conn *conns;
};

void httpsrv_start(struct httpsrv *s, uv_loop_t *loop);

/* Run the loop until *flag is set or ms have passed; a timer wakes the
 * loop at the deadline, so an idle loop never blocks for good. */
void httpsrv_run_until(uv_loop_t *loop, const int *flag, unsigned ms);

/* Close every handle left on the loop, run their closes, close the loop;
 * 0 when the loop closed (nothing was left running). */
int httpsrv_loop_end(uv_loop_t *loop);
/* Close every connection and the listener (the loop runs the closes). */
void httpsrv_stop(struct httpsrv *s);

#endif
