/*
 * httpsrv: the scripted upstream of the proxy's unit tests (httpsrv.h).
 */
#include "httpsrv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    struct httpsrv_conn *c = h->data;
    (void)sz;
    b->base = c->in + c->len;
    b->len = sizeof c->in - c->len - 1;
}

static void write_done(uv_write_t *w, int st)
{
    (void)st;
    free(w);
}

static void send_text(struct httpsrv_conn *c, const char *text)
{
    if (c->closed)
        return;
    size_t n = strlen(text);
    uv_write_t *w = malloc(sizeof *w + n);
    assert_non_null(w);
    memcpy((char *)(w + 1), text, n);
    uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
    uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, write_done);
}

static void conn_closed(uv_handle_t *h)
{
    struct httpsrv_conn *c = h->data;
    if (--c->open > 0)
        return;
    struct httpsrv_conn **pp = &c->s->conns;
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    free(c);
}

static void close_conn(struct httpsrv_conn *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    uv_timer_stop(&c->t);
    uv_close((uv_handle_t *)&c->t, conn_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_tick(uv_timer_t *t)
{
    struct httpsrv_conn *c = t->data;
    char ev[128];
    c->step++;
    if (strstr(c->path, "/stream")) {
        snprintf(ev, sizeof ev, "event: delta\ndata: {\"n\":%d}\n\n", c->step);
        send_text(c, ev);
        if (c->step == 3) {
            send_text(c, "event: stop\ndata: {}\n\n");
            close_conn(c); /* Connection: close ends the body */
        }
    } else if (strstr(c->path, "/forever")) {
        send_text(c, "data: tick\n\n");
    }
}

static void answer(struct httpsrv_conn *c, const char *head_end)
{
    c->answered = 1;
    char resp[70000];
    const char *body = head_end + 4;
    size_t blen = c->len - (size_t)(body - c->in);
    if (strstr(c->path, "/stream") || strstr(c->path, "/forever")) {
        send_text(
            c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
        uv_timer_start(&c->t, on_tick, strstr(c->path, "/stream") ? 400 : 50,
                       strstr(c->path, "/stream") ? 400 : 50);
    } else if (strstr(c->path, "/echo")) {
        memcpy(c->s->body, body, blen);
        c->s->body_len = blen;
        snprintf(resp, sizeof resp,
                 "HTTP/1.1 201 Created\r\nContent-Length: %zu\r\nX-Seen: yes\r\n\r\n", blen);
        send_text(c, resp);
        memcpy(resp, body, blen);
        resp[blen] = '\0';
        send_text(c, resp);
        c->answered = 0; /* keep-alive: the next request may come on this connection */
        c->len = 0;
    } else if (strstr(c->path, "/broken")) {
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        close_conn(c);
    } else if (strstr(c->path, "/early")) {
        send_text(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 4\r\n\r\nnope");
    } else if (strstr(c->path, "/both")) {
        /* a length and a chunked body: the length means nothing */
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n0\r\n\r\n");
        close_conn(c);
    } else if (strstr(c->path, "/fold")) {
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: a\r\n b\r\n\r\nok");
        close_conn(c);
    } else if (strstr(c->path, "/big")) {
        static char big[40001];
        memset(big, 'b', 40000);
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n");
        send_text(c, big);
    }
    /* /hang: never answers */
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct httpsrv_conn *c = st->data;
    (void)b;
    if (n < 0) {
        c->s->eof_seen++;
        close_conn(c);
        return;
    }
    c->len += (size_t)n;
    c->in[c->len] = '\0';
    char *e = strstr(c->in, "\r\n\r\n");
    if (!e || c->answered)
        return;
    sscanf(c->in, "%*s %63s", c->path);
    size_t hl = (size_t)(e + 4 - c->in);
    if (c->s->heads_len + hl < sizeof c->s->heads) {
        memcpy(c->s->heads + c->s->heads_len, c->in, hl);
        c->s->heads_len += hl;
        c->s->heads[c->s->heads_len] = '\0';
    }
    c->s->requests++;
    if (strstr(c->path, "/early")) {
        answer(c, e); /* before the body, whatever it is */
        return;
    }
    const char *cl = strstr(c->in, "Content-Length: ");
    if (cl && cl < e && c->len - (size_t)(e + 4 - c->in) < strtoul(cl + 16, NULL, 10))
        return; /* the body is not all in */
    if (strstr(c->in, "Transfer-Encoding: chunked") && !strstr(e, "\r\n0\r\n\r\n"))
        return;
    answer(c, e);
}

static void on_conn(uv_stream_t *l, int st)
{
    struct httpsrv *s = l->data;
    assert_int_equal(st, 0);
    struct httpsrv_conn *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->s = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->t);
    c->tcp.data = c;
    c->t.data = c;
    c->open = 2;
    c->next = s->conns;
    s->conns = c;
    assert_int_equal(uv_accept(l, (uv_stream_t *)&c->tcp), 0);
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

void httpsrv_start(struct httpsrv *s, uv_loop_t *loop)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    assert_int_equal(uv_tcp_bind(&s->listener, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&s->listener, 16, on_conn), 0);
    struct sockaddr_in got;
    int len = sizeof got;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &len);
    s->port = ntohs(got.sin_port);
}

void httpsrv_stop(struct httpsrv *s)
{
    for (struct httpsrv_conn *k = s->conns; k; k = k->next)
        close_conn(k);
    uv_close((uv_handle_t *)&s->listener, NULL);
}

static void wake(uv_timer_t *t)
{
    (void)t;
}

void httpsrv_run_until(uv_loop_t *loop, const int *flag, unsigned ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, wake, ms, 0);
    uint64_t end = uv_now(loop) + ms;
    while (!*flag && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int httpsrv_loop_end(uv_loop_t *loop)
{
    uv_walk(loop, walk_close, NULL);
    while (uv_run(loop, UV_RUN_NOWAIT))
        ;
    return uv_loop_close(loop);
}
