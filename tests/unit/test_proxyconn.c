/*
 * Unit tests for proxyconn: an agent's connection through the whole
 * proxy path (parse, route, gate, allow, upstream call, answer framing)
 * against the scripted upstream on 127.0.0.1, with a transport that keeps
 * what it is sent. The upstream gets the real key and never the agent's
 * credential; a stream is relayed as it comes, chunked; every refusal
 * answers its status with a JSON body, closes, and sends nothing
 * upstream; two requests on one connection are answered in order; a full
 * transport pauses the upstream without losing a byte; an agent that goes
 * away cancels its call; Expect: 100-continue is answered 100 once the
 * call is under way (a refusal from the head comes instead); an answer
 * that comes before the request body's end closes the connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "httpsrv.h"
#include "proxyconn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    uv_loop_t loop;
    struct httpsrv srv;
    struct proxyup *up;
    struct proxycfg cfg;
    /* the transport */
    char out[262144];
    size_t out_len;
    size_t full_at; /* 0: never full */
    int full, closed, input_ready;
    uint64_t first_body_ms;
    /* the gate */
    int begun, ended, records, records_two, last_status;
    char last_terminal[64];
    uint64_t last_bytes_down;
    uint64_t budget, spent; /* the terminal's byte budget (0: none), spent as bytes move */
};

static int t_send(void *ud, const uint8_t *p, size_t n)
{
    struct fixture *f = ud;
    assert_false(f->closed);
    assert_true(f->out_len + n < sizeof f->out);
    memcpy(f->out + f->out_len, p, n);
    f->out_len += n;
    f->out[f->out_len] = '\0';
    if (!f->first_body_ms && strstr(f->out, "data: "))
        f->first_body_ms = uv_now(&f->loop);
    if (f->full_at && f->out_len >= f->full_at) {
        f->full = 1;
        return 1;
    }
    return 0;
}

static void t_close(void *ud)
{
    ((struct fixture *)ud)->closed = 1;
}

static void t_ready(void *ud)
{
    ((struct fixture *)ud)->input_ready++;
}

static const struct proxyconn_ops ops = {t_send, t_close, t_ready};

static int g_begin(void *ud, const struct proxy_upstream *up, const char *cred, char *terminal,
                   size_t tcap, char *secret, size_t scap, unsigned *retry, char *why, size_t wcap)
{
    struct fixture *f = ud;
    (void)up;
    if (strcmp(cred, "alp_limit") == 0) {
        *retry = 7;
        snprintf(why, wcap, "terminal t-busy: 60 requests a minute");
        return 429;
    }
    if (strcmp(cred, "alp_good") != 0) {
        snprintf(why, wcap, "unknown, revoked or foreign credential");
        return 401;
    }
    f->begun++;
    snprintf(terminal, tcap, "t-one");
    snprintf(secret, scap, "sk-real-key");
    return 0;
}

static void g_end(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    struct fixture *f = ud;
    (void)bytes;
    assert_true(strcmp(upstream, "up") == 0 || strcmp(upstream, "dead") == 0);
    assert_string_equal(terminal, "t-one");
    f->ended++;
}

static void g_record(void *ud, const struct proxyconn_record *r)
{
    struct fixture *f = ud;
    f->records++;
    f->records_two = f->records >= 2;
    f->last_status = r->status;
    snprintf(f->last_terminal, sizeof f->last_terminal, "%s", r->terminal);
    f->last_bytes_down = r->bytes_down;
}

static int g_spend(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    struct fixture *f = ud;
    assert_string_equal(terminal, "t-one");
    assert_string_equal(upstream, "up");
    f->spent += bytes;
    return f->budget && f->spent > f->budget;
}

static const struct proxyconn_gate gate = {g_begin, g_end, g_record, g_spend};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    httpsrv_start(&f->srv, &f->loop);
    assert_int_equal(proxyup_new(&f->loop, &f->up), AL_OK);
    proxycfg_init(&f->cfg);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->srv.port);
    const char *lines[][2] = {
        {"upstream.up.url", url},
        {"upstream.up.kind", "anthropic"},
        {"upstream.up.header", "x-api-key"},
        {"upstream.up.secret-file", "/unused"},
        {"upstream.up.paths", "/ok/"},
        {"upstream.up.methods", "GET,POST"},
        {"upstream.up.response-timeout", "1"},
        {"upstream.up.max-body", "100000"},
        {"upstream.dead.url", "http://127.0.0.1:1"},
        {"upstream.dead.secret-file", "/unused"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_int_equal(proxycfg_set(&f->cfg, lines[i][0], lines[i][1], NULL, 0), AL_OK);
    assert_int_equal(proxycfg_finish(&f->cfg, NULL, 0), AL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    proxyup_free(f->up);
    httpsrv_stop(&f->srv);
    assert_int_equal(httpsrv_loop_end(&f->loop), 0);
    free(f);
    return 0;
}

static struct proxyconn *conn(struct fixture *f)
{
    struct proxyconn *c;
    assert_int_equal(proxyconn_new(&f->cfg, f->up, &gate, f, &ops, f, &c), AL_OK);
    return c;
}

static void run_until(struct fixture *f, const int *flag, unsigned ms)
{
    httpsrv_run_until(&f->loop, flag, ms);
}

static void feed(struct proxyconn *c, const char *text)
{
    size_t n = strlen(text);
    assert_int_equal(proxyconn_input(c, (const uint8_t *)text, n), n);
}

static void test_stream_relayed_with_real_key(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    uint64_t t0 = uv_now(&f->loop);
    feed(c, "GET /v1/proxy/up/ok/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            "alp_good\r\n"
            "anthropic-version: 2023-06-01\r\nConnection: close\r\n\r\n");
    run_until(f, &f->closed, 5000);
    assert_true(f->closed);
    /* the upstream got the real key, the agent's headers, never the credential */
    assert_non_null(strstr(f->srv.heads, "x-api-key: sk-real-key\r\n"));
    assert_non_null(strstr(f->srv.heads, "anthropic-version: 2023-06-01\r\n"));
    assert_null(strstr(f->srv.heads, "alp_good"));
    assert_null(strstr(f->srv.heads, "Authorization"));
    assert_non_null(strstr(f->srv.heads, "GET /ok/stream HTTP/1.1\r\n"));
    /* the agent got a chunked stream, first event long before the end */
    assert_non_null(strstr(f->out, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(f->out, "Content-Type: text/event-stream\r\n"));
    assert_non_null(strstr(f->out, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(f->out, "data: {\"n\":3}"));
    assert_non_null(strstr(f->out, "\r\n0\r\n\r\n"));
    assert_true(f->first_body_ms - t0 < 800);
    assert_true(uv_now(&f->loop) - f->first_body_ms >= 600);
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 200);
    assert_string_equal(f->last_terminal, "t-one");
    assert_int_equal(f->begun, 1);
    assert_int_equal(f->ended, 1);
    proxyconn_free(c);
}

static void check_refusal(struct fixture *f, const char *req, int status, const char *in_body)
{
    f->out_len = 0;
    f->out[0] = '\0';
    f->closed = 0;
    int before = f->srv.requests;
    struct proxyconn *c = conn(f);
    feed(c, req);
    run_until(f, &f->closed, 3000);
    char line[64];
    snprintf(line, sizeof line, "HTTP/1.1 %d ", status);
    if (strncmp(f->out, line, strlen(line)) != 0 || !strstr(f->out, in_body))
        fprintf(stderr, "for %s\ngot: %s\n", req, f->out);
    assert_true(strncmp(f->out, line, strlen(line)) == 0);
    assert_true(f->closed);
    assert_non_null(strstr(f->out, "Connection: close\r\n"));
    assert_non_null(strstr(f->out, "Content-Type: application/json\r\n"));
    char js[64];
    snprintf(js, sizeof js, "{\"error\":{\"type\":\"airlock_proxy\",\"status\":%d,", status);
    assert_non_null(strstr(f->out, js));
    assert_non_null(strstr(f->out, in_body));
    assert_null(strstr(f->out, "sk-real-key"));
    if (status != 502 && status != 504)
        assert_int_equal(f->srv.requests, before); /* nothing went upstream */
    proxyconn_free(c);
}

static void test_refusals(void **state)
{
    struct fixture *f = *state;
    check_refusal(f, "GET /v1/proxy/nope/x HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 404,
                  "no such upstream");
    check_refusal(f, "GET /v1/proxy/up/ok/stream HTTP/1.1\r\n\r\n", 401, "no credential");
    check_refusal(f, "GET /v1/proxy/up/ok/stream HTTP/1.1\r\nx-api-key: alp_revoked\r\n\r\n", 401,
                  "unknown, revoked or foreign credential");
    check_refusal(f, "GET /v1/proxy/up/admin HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 403,
                  "does not allow this path");
    check_refusal(
        f, "PUT /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: 1\r\n\r\nx",
        403, "does not allow PUT");
    check_refusal(f, "GET /v1/proxy/up/ok/stream HTTP/1.1\r\nx-api-key: alp_limit\r\n\r\n", 429,
                  "60 requests a minute");
    assert_non_null(strstr(f->out, "Retry-After: 7\r\n"));
    check_refusal(f, "GET /v1/proxy/up/ok/../admin HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 400,
                  "'..'");
    check_refusal(f, "CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n", 400, "never proxied");
    check_refusal(
        f,
        "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: 5\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
        400, "conflicting");
    check_refusal(f,
                  "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: "
                  "100001\r\n\r\n",
                  413, "max-body");
    /* a HEAD with a body: libcurl would frame it upstream and send none,
     * so the next call on that shared connection would be its body */
    check_refusal(f,
                  "HEAD /v1/proxy/up/ok/stream HTTP/1.1\r\nx-api-key: alp_good\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                  400, "HEAD request has no body");
    /* a name that is not a token would pass the exact-name drop list */
    check_refusal(f,
                  "GET /v1/proxy/up/ok/stream HTTP/1.1\r\nx-api-key: alp_good\r\nHost : evil\r\n"
                  "\r\n",
                  400, "not a token");
    check_refusal(f, "GET /v1/proxy/dead/x HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 502,
                  "unreachable");
    check_refusal(f, "GET /v1/proxy/up/ok/hang HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 504,
                  "in time");
}

static void test_keep_alive_in_order(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    feed(c, "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: "
            "5\r\n\r\nfirst"
            "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nTransfer-Encoding: "
            "chunked\r\n\r\n"
            "6\r\nsecond\r\n0\r\n\r\n");
    for (int i = 0; i < 50 && f->records < 2; i++)
        run_until(f, &f->records_two, 100);
    assert_int_equal(f->records, 2);
    assert_false(f->closed);
    const char *a = strstr(f->out, "first");
    const char *b = strstr(f->out, "second");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_non_null(strstr(f->out, "HTTP/1.1 201 Created\r\n"));
    assert_non_null(strstr(f->out, "Content-Length: 5\r\n"));
    proxyconn_free(c);
}

static void test_full_transport_pauses_upstream(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    f->full_at = 1000;
    feed(c, "GET /v1/proxy/up/ok/big HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n");
    for (int round = 0; round < 200 && f->records == 0; round++) {
        run_until(f, &f->full, 100);
        if (f->full) {
            f->full = 0;
            f->full_at = f->out_len + 1000;
            proxyconn_writable(c);
        }
    }
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_bytes_down, 40000);
    const char *body = strstr(f->out, "\r\n\r\n");
    assert_non_null(body);
    assert_int_equal(strlen(body + 4), 40000);
    proxyconn_free(c);
}

/* The byte budget holds within a call, not only between calls: an
 * answer that would take it past is cut short (the agent never gets more
 * than the budget), an upload past it is refused with 429. */
static void test_budget_cuts_the_call(void **state)
{
    struct fixture *f = *state;
    f->budget = 10000;
    struct proxyconn *c = conn(f);
    feed(c, "GET /v1/proxy/up/ok/big HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n");
    run_until(f, &f->closed, 3000);
    assert_true(f->closed);
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 0); /* cut: the audit says so */
    const char *body = strstr(f->out, "\r\n\r\n");
    assert_non_null(body);
    assert_true(strlen(body + 4) <= 10000);
    assert_true(f->last_bytes_down <= 10000);
    assert_true(f->spent > 10000);
    assert_int_equal(f->ended, 1);
    proxyconn_free(c);

    f->out_len = 0;
    f->out[0] = '\0';
    f->closed = 0;
    f->spent = 0;
    f->budget = 100;
    static char req[6000];
    int n = snprintf(req, sizeof req,
                     "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\n"
                     "Content-Length: 5000\r\n\r\n");
    memset(req + n, 'b', 5000);
    req[n + 5000] = '\0';
    c = conn(f);
    feed(c, req);
    run_until(f, &f->closed, 3000);
    assert_true(f->closed);
    assert_true(strncmp(f->out, "HTTP/1.1 429 ", 13) == 0);
    assert_non_null(strstr(f->out, "max-bytes"));
    assert_non_null(strstr(f->out, "Retry-After: 3600\r\n"));
    assert_null(strstr(f->out, "bbbb")); /* no echo reached the agent */
    proxyconn_free(c);
}

static void reset_out(struct fixture *f)
{
    f->out_len = 0;
    f->out[0] = '\0';
    f->closed = 0;
}

/* What the upstream says goes to the agent framed as the proxy frames it,
 * and what the agent sends reaches the upstream as it was sent: a
 * Content-Length beside a chunked body is dropped (the agent would read
 * the wrong length and take the rest as its next answer), a folded line
 * is refused (502), a body gets no type the agent did not give it, and a
 * header with an empty value is sent, not left out. */
static void test_framing_kept_both_ways(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    feed(c, "GET /v1/proxy/up/ok/both HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n");
    run_until(f, &f->records, 3000);
    assert_int_equal(f->records, 1);
    assert_true(strncmp(f->out, "HTTP/1.1 200 ", 13) == 0);
    assert_null(strcasestr(f->out, "Content-Length"));
    assert_non_null(strstr(f->out, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    proxyconn_free(c);

    reset_out(f);
    check_refusal(f, "GET /v1/proxy/up/ok/fold HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n", 502,
                  "folded line");

    reset_out(f);
    f->records = 0;
    f->srv.heads_len = 0;
    f->srv.heads[0] = '\0';
    c = conn(f);
    feed(c, "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nX-Empty:\r\n"
            "Content-Length: 2\r\n\r\nhi");
    run_until(f, &f->records, 3000);
    assert_non_null(strstr(f->out, "HTTP/1.1 201 Created\r\n"));
    assert_null(strcasestr(f->srv.heads, "Content-Type"));
    assert_non_null(strcasestr(f->srv.heads, "\r\nx-empty:"));
    proxyconn_free(c);
}

static void test_agent_gone_cancels(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    feed(c, "GET /v1/proxy/up/ok/forever HTTP/1.1\r\nx-api-key: alp_good\r\n\r\n");
    for (int i = 0; i < 30 && !f->first_body_ms; i++)
        run_until(f, &f->closed, 100);
    assert_true(f->first_body_ms != 0);
    proxyconn_input_end(c);
    assert_true(f->closed);
    run_until(f, &f->srv.eof_seen, 2000);
    assert_int_equal(f->srv.eof_seen, 1);
    assert_int_equal(f->ended, 1);
    proxyconn_free(c);
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* An agent that sends Expect: 100-continue gets the 100 as soon as its
 * request is under way (the upstream is sent no Expect: no 100 comes from
 * there), then the final answer; an HTTP/1.0 agent gets none. */
static void test_expect_continue(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    feed(c, "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: "
            "5\r\nExpect: 100-Continue\r\n\r\n");
    assert_string_equal(f->out, "HTTP/1.1 100 Continue\r\n\r\n");
    feed(c, "hello");
    run_until(f, &f->records, 3000);
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 201);
    assert_true(starts(f->out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\nhello"));
    assert_null(strstr(f->srv.heads, "Expect"));
    assert_null(strstr(f->srv.heads, "100-"));
    assert_false(f->closed);
    proxyconn_free(c);

    f->out_len = 0;
    f->out[0] = '\0';
    f->records = 0;
    c = conn(f);
    feed(c, "POST /v1/proxy/up/ok/echo HTTP/1.0\r\nx-api-key: alp_good\r\nContent-Length: "
            "5\r\nExpect: 100-continue\r\n\r\n");
    assert_int_equal(f->out_len, 0);
    feed(c, "hello");
    run_until(f, &f->records, 3000);
    assert_true(starts(f->out, "HTTP/1.1 201 Created\r\n"));
    proxyconn_free(c);
}

/* A refusal the proxy can tell from the head comes instead of the 100. */
static void test_expect_refused_first(void **state)
{
    struct fixture *f = *state;
    check_refusal(f,
                  "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_good\r\nContent-Length: "
                  "100001\r\nExpect: 100-continue\r\n\r\n",
                  413, "max-body");
    assert_null(strstr(f->out, "100 Continue"));
    check_refusal(f,
                  "POST /v1/proxy/up/ok/echo HTTP/1.1\r\nx-api-key: alp_nope\r\nContent-Length: "
                  "5\r\nExpect: 100-continue\r\n\r\n",
                  401, "unknown");
    assert_null(strstr(f->out, "100 Continue"));
}

/* An upstream that answers before the agent's body is all in (a server
 * refusing an upload): the answer says Connection: close and the
 * connection ends with it, rather than reading the rest of that body as
 * the next request; what the agent still sends is dropped. */
static void test_early_answer_closes(void **state)
{
    struct fixture *f = *state;
    struct proxyconn *c = conn(f);
    feed(c, "POST /v1/proxy/up/ok/early HTTP/1.1\r\nx-api-key: alp_good\r\nTransfer-Encoding: "
            "chunked\r\n\r\n5\r\nfirst\r\n");
    run_until(f, &f->closed, 3000);
    assert_true(f->closed);
    assert_true(starts(f->out, "HTTP/1.1 403 Forbidden\r\n"));
    assert_non_null(strstr(f->out, "Connection: close\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\nnope"));
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 403);
    assert_int_equal(f->ended, 1);
    static char more[3 * PROXYCONN_INPUT_MAX];
    memset(more, 'x', sizeof more);
    assert_int_equal(proxyconn_input(c, (const uint8_t *)more, sizeof more), sizeof more);
    assert_int_equal(f->records, 1);
    proxyconn_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_relayed_with_real_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_transport_pauses_upstream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_cuts_the_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_framing_kept_both_ways, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_gone_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_continue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_refused_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_answer_closes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
