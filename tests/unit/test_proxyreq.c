/*
 * Unit tests for proxyreq: heads parsed into bounded memory, bodies
 * (plain and chunked) delivered in order and byte-exact whatever the
 * split of the input, one request at a time on a keep-alive connection,
 * and every refusal with its status: smuggling shapes (Content-Length
 * with Transfer-Encoding, two lengths, codings other than chunked), a
 * body over the limit, a head over the arena, too many headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxyreq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
    int heads, ends;
    char method[32], target[256], body[4096];
    size_t body_len;
    char hdrs[2048];
    int chunked, keep_alive, upgrade;
    int64_t cl;
    int pause_body;
};

static int cb(void *ud, enum proxyreq_ev ev, const struct proxyreq_head *h, const uint8_t *p,
              size_t n)
{
    struct seen *s = ud;
    if (ev == PROXYREQ_HEAD) {
        s->heads++;
        snprintf(s->method, sizeof s->method, "%s", h->method);
        snprintf(s->target, sizeof s->target, "%s", h->target);
        s->hdrs[0] = '\0';
        for (unsigned i = 0; i < h->nhdr; i++) {
            size_t l = strlen(s->hdrs);
            snprintf(s->hdrs + l, sizeof s->hdrs - l, "%s=%s;", h->hdr[i].name, h->hdr[i].value);
        }
        s->chunked = h->chunked;
        s->keep_alive = h->keep_alive;
        s->upgrade = h->upgrade;
        s->cl = h->content_length;
    } else if (ev == PROXYREQ_BODY) {
        assert_true(s->body_len + n < sizeof s->body);
        memcpy(s->body + s->body_len, p, n);
        s->body_len += n;
        return s->pause_body;
    } else {
        s->ends++;
    }
    return 0;
}

/* Feed all of `in` in pieces of `step` bytes, resuming after every pause;
 * returns the last status (0 when nothing was refused). */
static int feed_all(struct proxyreq *r, const char *in, size_t step, int *rc_out)
{
    size_t len = strlen(in), at = 0;
    int status = 0, rc = AL_OK;
    for (int guard = 0; at < len && guard < 100000; guard++) {
        size_t n = len - at < step ? len - at : step, used = 0;
        char why[128];
        rc = proxyreq_feed(r, (const uint8_t *)in + at, n, &used, &status, why, sizeof why);
        at += used;
        if (rc == AL_E_AGAIN)
            proxyreq_next(r);
        else if (rc != AL_OK)
            break;
    }
    *rc_out = rc;
    return status;
}

static void test_head_and_body_any_split(void **state)
{
    (void)state;
    const char *req =
        "POST /v1/proxy/anthropic/v1/messages?beta=true HTTP/1.1\r\n"
        "Host: 127.0.0.1:9\r\nX-API-Key: alp_abc\r\nContent-Type:  application/json \r\n"
        "X-Empty:\r\nContent-Length: 11\r\n\r\n{\"a\":\"b c\"}";
    for (size_t step = 1; step <= strlen(req); step++) {
        struct seen s = {0};
        struct proxyreq *r;
        assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
        int rc;
        assert_int_equal(feed_all(r, req, step, &rc), 0);
        assert_int_equal(s.heads, 1);
        assert_int_equal(s.ends, 1);
        assert_string_equal(s.method, "POST");
        assert_string_equal(s.target, "/v1/proxy/anthropic/v1/messages?beta=true");
        assert_string_equal(s.hdrs,
                            "host=127.0.0.1:9;x-api-key=alp_abc;content-type=application/json;"
                            "x-empty=;content-length=11;");
        assert_int_equal(s.cl, 11);
        assert_int_equal(s.body_len, 11);
        assert_memory_equal(s.body, "{\"a\":\"b c\"}", 11);
        assert_true(s.keep_alive);
        proxyreq_free(r);
    }
}

static void test_chunked_body_decoded(void **state)
{
    (void)state;
    const char *req = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n";
    for (size_t step = 1; step <= 7; step++) {
        struct seen s = {0};
        struct proxyreq *r;
        assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
        int rc;
        assert_int_equal(feed_all(r, req, step, &rc), 0);
        assert_int_equal(s.ends, 1);
        assert_true(s.chunked);
        assert_int_equal(s.body_len, 11);
        assert_memory_equal(s.body, "hello world", 11);
        proxyreq_free(r);
    }
}

static void test_keep_alive_one_at_a_time(void **state)
{
    (void)state;
    struct seen s = {0};
    struct proxyreq *r;
    assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
    const char *two = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t used;
    int status;
    /* the first request ends and the parser waits for the answer */
    assert_int_equal(proxyreq_feed(r, (const uint8_t *)two, strlen(two), &used, &status, NULL, 0),
                     AL_E_AGAIN);
    assert_int_equal(s.ends, 1);
    assert_string_equal(s.target, "/a");
    assert_true(used < strlen(two));
    /* still paused: nothing more is read before proxyreq_next */
    size_t u2;
    assert_int_equal(
        proxyreq_feed(r, (const uint8_t *)two + used, strlen(two) - used, &u2, &status, NULL, 0),
        AL_E_AGAIN);
    assert_int_equal(u2, 0);
    proxyreq_next(r);
    assert_int_equal(
        proxyreq_feed(r, (const uint8_t *)two + used, strlen(two) - used, &u2, &status, NULL, 0),
        AL_E_AGAIN);
    assert_int_equal(s.ends, 2);
    assert_string_equal(s.target, "/b");
    assert_int_equal(used + u2, strlen(two));
    proxyreq_free(r);
}

static void test_body_pause_flow_control(void **state)
{
    (void)state;
    struct seen s = {0};
    s.pause_body = 1;
    struct proxyreq *r;
    assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
    const char *req = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabcdef";
    size_t used;
    int status;
    assert_int_equal(proxyreq_feed(r, (const uint8_t *)req, strlen(req), &used, &status, NULL, 0),
                     AL_E_AGAIN);
    assert_int_equal(s.body_len, 6);
    assert_int_equal(s.ends, 0); /* paused after the body bytes, before END */
    proxyreq_resume(r);
    size_t u2;
    (void)proxyreq_feed(r, (const uint8_t *)req + used, strlen(req) - used, &u2, &status, NULL, 0);
    assert_int_equal(s.ends, 1);
    proxyreq_free(r);
}

/* Append text at the end of the string in buf (of cap bytes). */
static void put(char *buf, size_t cap, const char *text)
{
    size_t l = strlen(buf), n = strlen(text);
    assert_true(l + n < cap);
    memcpy(buf + l, text, n + 1);
}

static void check_refused(const char *req, uint64_t max_body, int want)
{
    struct seen s = {0};
    struct proxyreq *r;
    assert_int_equal(proxyreq_new(max_body, cb, &s, &r), AL_OK);
    int rc;
    int status = feed_all(r, req, strlen(req), &rc);
    if (status != want)
        fprintf(stderr, "request %.40s...: status %d, want %d\n", req, status, want);
    assert_int_equal(status, want);
    assert_int_equal(rc, AL_E_PROTO);
    assert_int_equal(s.ends, 0);
    /* refused for good: feeding again says the same */
    size_t used;
    int st2;
    assert_int_equal(proxyreq_feed(r, (const uint8_t *)"x", 1, &used, &st2, NULL, 0), AL_E_PROTO);
    assert_int_equal(st2, want);
    proxyreq_free(r);
}

static void test_smuggling_shapes_refused(void **state)
{
    (void)state;
    check_refused(
        "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n",
        1024, 400);
    check_refused(
        "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 1024,
        400);
    check_refused(
        "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 1024,
        501);
    check_refused("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 1024,
                  400);
    check_refused("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 1024, 400);
    check_refused("GET /x HTTP/2.7\r\nHost: h\r\n\r\n", 1024, 505);
    check_refused("G\001T /x HTTP/1.1\r\n\r\n", 1024, 501);
    /* a HEAD has no body: one framed upstream would swallow the next
     * request on the shared connection */
    check_refused("HEAD /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                  1024, 400);
    check_refused("HEAD /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab", 1024, 400);
    /* header names are tokens: a space before the colon would get a
     * "Host", a credential or a framing header past the exact-name checks */
    static const char *const spaced[] = {
        "GET /x HTTP/1.1\r\nHost : evil\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nx-api-key : k\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length : 5\r\n\r\nabcde",
        "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nX (y): z\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++)
        check_refused(spaced[i], 1024, 400);
}

/* What is refused above is not refused for being near it. */
static void test_near_refusals_taken(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "HEAD /x HTTP/1.1\r\nHost: h\r\n\r\n",
        "HEAD /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nX-A.b_c~d!#$%&'*+^`|: v\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct seen s;
        memset(&s, 0, sizeof s);
        struct proxyreq *r = NULL;
        assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
        int rc;
        assert_int_equal(feed_all(r, ok[i], 7, &rc), 0);
        assert_int_equal(s.heads, 1);
        assert_int_equal(s.ends, 1);
        proxyreq_free(r);
    }
}

static void test_limits_refused(void **state)
{
    (void)state;
    check_refused("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1025\r\n\r\n", 1024, 413);
    check_refused("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "400\r\n",
                  16, 413);
    /* a chunked body over the limit, in many small chunks */
    char *big = malloc(8192);
    assert_non_null(big);
    big[0] = '\0';
    put(big, 8192, "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 40; i++)
        put(big, 8192, "a\r\n0123456789\r\n");
    check_refused(big, 100, 413);
    /* too many header lines */
    big[0] = '\0';
    put(big, 8192, "GET /x HTTP/1.1\r\n");
    for (int i = 0; i < PROXYREQ_MAX_HEADERS + 1; i++)
        put(big, 8192, "a: b\r\n");
    put(big, 8192, "\r\n");
    check_refused(big, 100, 431);
    free(big);
    /* a head over the arena */
    size_t n = PROXYREQ_HEAD_MAX + 100;
    char *huge = malloc(n + 64);
    assert_non_null(huge);
    huge[0] = '\0';
    put(huge, n + 64, "GET /x HTTP/1.1\r\nx: ");
    size_t l = strlen(huge);
    memset(huge + l, 'v', n - l);
    memcpy(huge + n, "\r\n\r\n", 5);
    check_refused(huge, 100, 431);
    free(huge);
}

static void test_upgrade_and_connect_flagged(void **state)
{
    (void)state;
    struct seen s = {0};
    struct proxyreq *r;
    assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
    const char *req = "GET /v1/responses HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                      "Upgrade: websocket\r\n\r\n\x81\x05hello";
    size_t used;
    int status;
    assert_int_equal(proxyreq_feed(r, (const uint8_t *)req, strlen(req), &used, &status, NULL, 0),
                     AL_E_AGAIN);
    assert_int_equal(s.heads, 1);
    assert_true(s.upgrade);
    assert_true(used < strlen(req));
    proxyreq_free(r);

    memset(&s, 0, sizeof s);
    assert_int_equal(proxyreq_new(1024, cb, &s, &r), AL_OK);
    const char *conn = "CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n";
    (void)proxyreq_feed(r, (const uint8_t *)conn, strlen(conn), &used, &status, NULL, 0);
    assert_int_equal(s.heads, 1);
    assert_string_equal(s.method, "CONNECT");
    assert_true(s.upgrade); /* http-parser treats CONNECT as a switch: the policy refuses it */
    proxyreq_free(r);
}

static void test_header_lookup(void **state)
{
    (void)state;
    struct proxyreq_head h;
    memset(&h, 0, sizeof h);
    h.hdr[0].name = "a";
    h.hdr[0].value = "1";
    h.hdr[1].name = "b";
    h.hdr[1].value = "2";
    h.nhdr = 2;
    assert_string_equal(proxyreq_header(&h, "b"), "2");
    assert_null(proxyreq_header(&h, "c"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_and_body_any_split),
        cmocka_unit_test(test_chunked_body_decoded),
        cmocka_unit_test(test_keep_alive_one_at_a_time),
        cmocka_unit_test(test_body_pause_flow_control),
        cmocka_unit_test(test_smuggling_shapes_refused),
        cmocka_unit_test(test_near_refusals_taken),
        cmocka_unit_test(test_limits_refused),
        cmocka_unit_test(test_upgrade_and_connect_flagged),
        cmocka_unit_test(test_header_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
