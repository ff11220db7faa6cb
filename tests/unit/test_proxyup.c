/*
 * Unit tests for proxyup: libcurl's multi interface on a libuv loop,
 * against a small HTTP server on 127.0.0.1 run by the same loop. A
 * streamed response reaches the caller event by event (the first long
 * before the end); request bodies of known and unknown length go up
 * byte-exact, through pauses; a refused connection ends quickly as
 * REFUSED, a silent upstream as TIMEOUT, a response cut short as BROKEN;
 * a cancelled call runs no callback again and its connection closes; a
 * paused download resumes whole; an upload the upstream refuses before its
 * end ends the call, even paused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "httpsrv.h"
#include "proxyup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    size_t hold_at; /* 0, or: pause the body here for good (an agent gone quiet) */
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
    if (c->hold_at && c->up_at >= c->hold_at)
        return PROXYUP_PAUSE;
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
    httpsrv_run_until(loop, &c->done, max_ms);
}

struct fixture {
    uv_loop_t loop;
    struct httpsrv srv;
    struct proxyup *u;
    struct call calls[4];
    int ncalls;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    httpsrv_start(&f->srv, &f->loop);
    assert_int_equal(proxyup_new(&f->loop, &f->u), AL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    proxyup_free(f->u);
    httpsrv_stop(&f->srv);
    for (int i = 0; i < f->ncalls; i++)
        uv_close((uv_handle_t *)&f->calls[i].resume, NULL);
    assert_int_equal(httpsrv_loop_end(&f->loop), 0);
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
    struct call waiter = {0};
    for (int i = 0; i < 20 && !f->srv.eof_seen; i++)
        run_until_done(&f->loop, &waiter, 100);
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

/* An upstream that refuses an upload before its end (a 403 as soon as
 * the head is in) while the body is paused, waiting for bytes that may
 * never come: the call still ends, with the answer whole, at once. */
static void test_refusal_before_body_end(void **state)
{
    struct fixture *f = *state;
    struct call *c;
    assert_int_equal(start(f, &c, "POST", "/early", f->srv.port, "first bytes of a push", -1, 5),
                     AL_OK);
    c->hold_at = 5;
    run_until_done(&f->loop, c, 3000);
    assert_true(c->done);
    assert_int_equal(c->result, PROXYUP_OK);
    assert_int_equal(c->status, 403);
    assert_int_equal(c->body_len, 4);
    assert_memory_equal(c->body, "nope", 4);
    assert_true(c->t_done - c->t_start < 1000);
    assert_int_equal(proxyup_active(f->u), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_arrives_as_it_comes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bodies_go_up_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_and_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_closes_upstream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paused_download_resumes_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_before_body_end, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
