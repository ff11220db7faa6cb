/*
 * Unit tests for proxyup: libcurl's multi interface on a libuv loop,
 * against a small HTTP server on 127.0.0.1 run by the same loop. A
 * streamed response reaches the caller event by event (the first long
 * before the end); request bodies of known and unknown length go up
 * byte-exact, through pauses; a refused connection ends quickly as
 * REFUSED, a silent upstream as TIMEOUT, a response cut short as BROKEN;
 * a cancelled call runs no callback again and its connection closes; a
 * paused download resumes whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxyup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the upstream: one scripted answer per path ---- */

struct conn {
    uv_tcp_t tcp;
    uv_timer_t t;
    char in[65536];
    size_t len;
    int answered, closed, step, open;
    char path[64];
    struct srv *s;
    struct conn *next;
};

struct srv {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    int eof_seen; /* a connection the client closed */
    char body[65536];
    size_t body_len;
    struct conn *conns;
};

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    struct conn *c = h->data;
    (void)sz;
    b->base = c->in + c->len;
    b->len = sizeof c->in - c->len - 1;
}

static void write_done(uv_write_t *w, int st)
{
    (void)st;
    free(w);
}

static void send_text(struct conn *c, const char *text)
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
    struct conn *c = h->data;
    if (--c->open > 0)
        return;
    struct conn **pp = &c->s->conns;
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    free(c);
}

static void close_conn(struct conn *c)
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
    struct conn *c = t->data;
    char ev[128];
    c->step++;
    if (strcmp(c->path, "/stream") == 0) {
        snprintf(ev, sizeof ev, "event: delta\ndata: {\"n\":%d}\n\n", c->step);
        send_text(c, ev);
        if (c->step == 3) {
            send_text(c, "event: stop\ndata: {}\n\n");
            close_conn(c); /* Connection: close ends the body */
        }
    } else if (strcmp(c->path, "/forever") == 0) {
        send_text(c, "data: tick\n\n");
    }
}

static void answer(struct conn *c, const char *head_end)
{
    c->answered = 1;
    char resp[70000];
    const char *body = head_end + 4;
    size_t blen = c->len - (size_t)(body - c->in);
    if (strcmp(c->path, "/stream") == 0 || strcmp(c->path, "/forever") == 0) {
        send_text(
            c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
        uv_timer_start(&c->t, on_tick, strcmp(c->path, "/stream") == 0 ? 400 : 50,
                       strcmp(c->path, "/stream") == 0 ? 400 : 50);
    } else if (strcmp(c->path, "/echo") == 0) {
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
    } else if (strcmp(c->path, "/broken") == 0) {
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        close_conn(c);
    } else if (strcmp(c->path, "/big") == 0) {
        static char big[40001];
        memset(big, 'b', 40000);
        send_text(c, "HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n");
        send_text(c, big);
    }
    /* /hang: never answers */
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = st->data;
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
    const char *cl = strstr(c->in, "Content-Length: ");
    if (cl && cl < e && c->len - (size_t)(e + 4 - c->in) < strtoul(cl + 16, NULL, 10))
        return; /* the body is not all in */
    if (strstr(c->in, "Transfer-Encoding: chunked") && !strstr(e, "\r\n0\r\n\r\n"))
        return;
    answer(c, e);
}

static void on_conn(uv_stream_t *l, int st)
{
    struct srv *s = l->data;
    assert_int_equal(st, 0);
    struct conn *c = calloc(1, sizeof *c);
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

static void srv_start(struct srv *s, uv_loop_t *loop)
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

/* ---- the caller ---- */

struct call {
    uv_loop_t *loop;
    int status, head_done, done, pause_first, paused_once, cancel_after_first;
    enum proxyup_result result;
    char headers[1024];
    char body[65536];
    size_t body_len;
    uint64_t t_start, t_first_body, t_done;
    const char *up; /* request body to send */
    size_t up_at, up_len;
    int up_paused;
    struct proxyup_call *pc;
    uv_timer_t resume;
};

static void c_status(void *ud, int st)
{
    ((struct call *)ud)->status = st;
}

static void c_header(void *ud, const char *n, size_t nl, const char *v, size_t vl)
{
    struct call *c = ud;
    size_t l = strlen(c->headers);
    snprintf(c->headers + l, sizeof c->headers - l, "%.*s=%.*s;", (int)nl, n, (int)vl, v);
}

static void c_head_done(void *ud)
{
    ((struct call *)ud)->head_done = 1;
}

static void resume_down(uv_timer_t *t)
{
    struct call *c = t->data;
    proxyup_resume_down(c->pc);
}

static void resume_up(uv_timer_t *t)
{
    struct call *c = t->data;
    proxyup_resume_up(c->pc);
}

static size_t c_body(void *ud, const char *p, size_t n)
{
    struct call *c = ud;
    assert_false(c->done);
    if (c->pause_first && !c->paused_once) {
        c->paused_once = 1;
        uv_timer_start(&c->resume, resume_down, 200, 0);
        return PROXYUP_PAUSE;
    }
    if (!c->t_first_body)
        c->t_first_body = uv_now(c->loop);
    assert_true(c->body_len + n < sizeof c->body);
    memcpy(c->body + c->body_len, p, n);
    c->body_len += n;
    if (c->cancel_after_first) {
        proxyup_cancel(c->pc);
        c->done = 1;
        c->t_done = uv_now(c->loop);
    }
    return n;
}

static size_t c_read(void *ud, char *buf, size_t cap)
{
    struct call *c = ud;
    if (c->up_at == 7 && !c->up_paused) { /* pause once in the middle */
        c->up_paused = 1;
        uv_timer_start(&c->resume, resume_up, 100, 0);
        return PROXYUP_PAUSE;
    }
    size_t n = c->up_len - c->up_at;
    if (n > cap)
        n = cap;
    if (n > 7 && c->up_at < 7)
        n = 7 - c->up_at;
    memcpy(buf, c->up + c->up_at, n);
    c->up_at += n;
    return n;
}

static void c_done(void *ud, enum proxyup_result r, const char *why)
{
    struct call *c = ud;
    (void)why;
    assert_false(c->done);
    c->done = 1;
    c->result = r;
    c->t_done = uv_now(c->loop);
}

static const struct proxyup_cb cbs = {c_status, c_header, c_head_done, c_body, c_read, c_done};

static void run_until_done(uv_loop_t *loop, struct call *c, unsigned max_ms)
{
    uint64_t end = uv_now(loop) + max_ms;
    while (!c->done && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
}

struct fixture {
    uv_loop_t loop;
    struct srv srv;
    struct proxyup *u;
    struct call calls[4];
    int ncalls;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    srv_start(&f->srv, &f->loop);
    assert_int_equal(proxyup_new(&f->loop, &f->u), AL_OK);
    *state = f;
    return 0;
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    proxyup_free(f->u);
    while (f->srv.conns && !f->srv.conns->closed)
        close_conn(f->srv.conns);
    for (struct conn *k = f->srv.conns; k; k = k->next)
        close_conn(k);
    for (int i = 0; i < f->ncalls; i++)
        uv_close((uv_handle_t *)&f->calls[i].resume, NULL);
    uv_close((uv_handle_t *)&f->srv.listener, NULL);
    uv_walk(&f->loop, walk_close, NULL);
    while (uv_run(&f->loop, UV_RUN_NOWAIT))
        ;
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

static int start(struct fixture *f, struct call **cp, const char *method, const char *path,
                 int port, const char *body, int64_t len, unsigned resp_timeout_s)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    assert_true(f->ncalls < 4);
    struct call *c = &f->calls[f->ncalls++];
    *cp = c;
    c->loop = &f->loop;
    uv_timer_init(&f->loop, &c->resume);
    c->resume.data = c;
    c->up = body;
    c->up_len = body ? strlen(body) : 0;
    const char *hdrs[] = {"x-api-key: sk-real", "content-type: application/json", NULL};
    struct proxyup_spec s = {method, url, hdrs, body != NULL, len, NULL, 2000, resp_timeout_s};
    c->t_start = uv_now(&f->loop);
    return proxyup_start(f->u, &s, &cbs, c, &c->pc, NULL, 0);
}

static void test_stream_arrives_as_it_comes(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    assert_int_equal(start(f, &c, "GET", "/stream", f->srv.port, NULL, 0, 5), AL_OK);
    run_until_done(&f->loop, c, 5000);
    assert_true(c->done);
    assert_int_equal(c->result, PROXYUP_OK);
    assert_int_equal(c->status, 200);
    assert_true(c->head_done);
    assert_non_null(strstr(c->headers, "Content-Type=text/event-stream;"));
    c->body[c->body_len] = '\0';
    assert_non_null(strstr(c->body, "data: {\"n\":1}"));
    assert_non_null(strstr(c->body, "event: stop"));
    /* the first event came ~400 ms in, the end ~1200 ms in */
    assert_true(c->t_done - c->t_first_body >= 600);
    assert_int_equal(proxyup_active(f->u), 0);
}

static void test_bodies_go_up_exact(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    const char *body = "{\"model\":\"x\",\"messages\":[]}";
    assert_int_equal(start(f, &c, "POST", "/echo", f->srv.port, body, (int64_t)strlen(body), 5),
                     AL_OK);
    run_until_done(&f->loop, c, 5000);
    assert_int_equal(c->result, PROXYUP_OK);
    assert_int_equal(c->status, 201);
    assert_true(c->up_paused);
    assert_int_equal(c->body_len, strlen(body));
    assert_memory_equal(c->body, body, strlen(body));
    assert_non_null(strstr(c->headers, "X-Seen=yes;"));
    /* unknown length: sent chunked, the bytes intact inside the framing */
    assert_int_equal(start(f, &c, "POST", "/echo", f->srv.port, body, -1, 5), AL_OK);
    run_until_done(&f->loop, c, 5000);
    assert_int_equal(c->result, PROXYUP_OK);
    f->srv.body[f->srv.body_len] = '\0';
    assert_non_null(strstr(f->srv.body, "7\r\n{\"model"));
    assert_non_null(strstr(f->srv.body, "\r\n0\r\n\r\n"));
}

static void test_refused_and_timeout(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    /* a port nobody listens on: a listener bound then closed */
    uv_tcp_t t;
    uv_tcp_init(&f->loop, &t);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    assert_int_equal(uv_tcp_bind(&t, (const struct sockaddr *)&a, 0), 0);
    struct sockaddr_in got;
    int len = sizeof got;
    uv_tcp_getsockname(&t, (struct sockaddr *)&got, &len);
    int dead = ntohs(got.sin_port);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(start(f, &c, "GET", "/x", dead, NULL, 0, 5), AL_OK);
    run_until_done(&f->loop, c, 3000);
    assert_true(c->done);
    assert_int_equal(c->result, PROXYUP_REFUSED);
    assert_true(c->t_done - c->t_start < 1000);
    /* an upstream that never answers: the response timeout, 1 s */
    assert_int_equal(start(f, &c, "GET", "/hang", f->srv.port, NULL, 0, 1), AL_OK);
    run_until_done(&f->loop, c, 4000);
    assert_true(c->done);
    assert_int_equal(c->result, PROXYUP_TIMEOUT);
    assert_true(c->t_done - c->t_start >= 1000 && c->t_done - c->t_start < 2000);
    assert_int_equal(c->status, 0);
    /* a response cut short */
    assert_int_equal(start(f, &c, "GET", "/broken", f->srv.port, NULL, 0, 5), AL_OK);
    run_until_done(&f->loop, c, 3000);
    assert_int_equal(c->result, PROXYUP_BROKEN);
    assert_int_equal(c->body_len, 10);
}

static void test_cancel_closes_upstream(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    assert_int_equal(start(f, &c, "GET", "/forever", f->srv.port, NULL, 0, 5), AL_OK);
    c->cancel_after_first = 1;
    run_until_done(&f->loop, c, 3000);
    assert_true(c->done);
    size_t got = c->body_len;
    /* the upstream sees its connection closed; no callback runs again */
    uint64_t end = uv_now(&f->loop) + 2000;
    while (!f->srv.eof_seen && uv_now(&f->loop) < end)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(f->srv.eof_seen, 1);
    assert_int_equal(c->body_len, got);
    assert_int_equal(proxyup_active(f->u), 0);
}

static void test_paused_download_resumes_whole(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    assert_int_equal(start(f, &c, "GET", "/big", f->srv.port, NULL, 0, 5), AL_OK);
    c->pause_first = 1;
    run_until_done(&f->loop, c, 5000);
    assert_int_equal(c->result, PROXYUP_OK);
    assert_true(c->paused_once);
    assert_int_equal(c->body_len, 40000);
    assert_true(c->t_done - c->t_start >= 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_arrives_as_it_comes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bodies_go_up_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_and_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_closes_upstream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paused_download_resumes_whole, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
