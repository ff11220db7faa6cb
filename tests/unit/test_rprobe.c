/*
 * rprobe: the runner's probe sessions (docs/protocol.md §13), frames in and
 * out: HELLO first, PING, each PROBE op, the redaction of headers, the
 * queue's bound, what ends a session and how.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "al_close.h"
#include "al_err.h"
#include "frame.h"
#include "rprobe.h"

static uint8_t buf[AL_MAX_FRAME];
static struct fr_frame got;

/* Encode f and feed it. */
static int feed(struct rprobe *p, const struct fr_frame *f)
{
    uint8_t m[AL_MAX_FRAME];
    long n = fr_encode(f, m, sizeof m);
    assert_true(n > 0);
    return rprobe_input(p, m, (size_t)n);
}

/* The next frame out, decoded; its type, or 0 when none is due. */
static int next(struct rprobe *p, uint64_t now)
{
    long n = rprobe_output(p, buf, sizeof buf, now);
    assert_true(n >= 0);
    if (n == 0)
        return 0;
    assert_int_equal(fr_decode(buf, (size_t)n, &got), 0);
    return got.type;
}

static void hello(struct rprobe *p, uint32_t max_frame)
{
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_HELLO;
    f.u.hello.version_min = f.u.hello.version_max = 1;
    f.u.hello.role = FR_ROLE_CONTROLLER;
    f.u.hello.max_frame = max_frame;
    f.u.hello.name = (struct fr_str){"probe", 5};
    assert_int_equal(feed(p, &f), AL_OK);
}

static struct rprobe *session(uint64_t deadline)
{
    struct rprobe_header h[2];
    assert_int_equal(rprobe_redact("Host", "127.0.0.1:8", 11, NULL, &h[0]), 1);
    assert_int_equal(rprobe_redact("Authorization", "Bearer abcdefghi", 16, NULL, &h[1]), 1);
    struct rprobe *p;
    assert_int_equal(rprobe_new(h, 2, "runner", deadline, &p), AL_OK);
    assert_int_equal(next(p, 0), FR_HELLO); /* ours, first, before the peer's */
    assert_int_equal(got.u.hello.role, FR_ROLE_HOST);
    assert_int_equal(next(p, 0), 0);
    return p;
}

static void probe(struct rprobe *p, uint8_t op, const void *bytes, size_t n, uint32_t count)
{
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE;
    f.u.probe.op = op;
    f.u.probe.bytes = (struct fr_bytes){bytes, n};
    f.u.probe.count = count;
    assert_int_equal(feed(p, &f), AL_OK);
}

static void test_ops(void **state)
{
    (void)state;
    struct rprobe *p = session(0);
    hello(p, AL_MAX_FRAME);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PING;
    f.u.ping.ts_us = 77;
    assert_int_equal(feed(p, &f), AL_OK);
    assert_int_equal(next(p, 0), FR_PONG);
    assert_int_equal(got.u.ping.ts_us, 77);
    /* HEADERS: as taken at the upgrade, the credential redacted */
    probe(p, FR_PROBE_HEADERS, NULL, 0, 0);
    assert_int_equal(next(p, 0), FR_PROBE_REPLY);
    assert_int_equal(got.u.probe.op, FR_PROBE_HEADERS);
    assert_int_equal(got.u.probe.nheaders, 2);
    assert_memory_equal(got.u.probe.h[0].name.p, "host", 4);
    assert_memory_equal(got.u.probe.h[0].value.p, "127.0.0.1:8", 11);
    assert_memory_equal(got.u.probe.h[1].name.p, "authorization", 13);
    assert_int_equal(got.u.probe.h[1].value.len, 10);
    assert_memory_equal(got.u.probe.h[1].value.p, "Bearer (9)", 10);
    /* ECHO after SINK: in order, the sink answered by nothing */
    probe(p, FR_PROBE_SINK, "dropped", 7, 0);
    probe(p, FR_PROBE_ECHO, "ping", 4, 0);
    assert_int_equal(next(p, 0), FR_PROBE_REPLY);
    assert_int_equal(got.u.probe.op, FR_PROBE_ECHO);
    assert_int_equal(got.u.probe.bytes.len, 4);
    assert_memory_equal(got.u.probe.bytes.p, "ping", 4);
    assert_int_equal(next(p, 0), 0);
    /* SOURCE: exactly that many bytes, in frames as large as allowed */
    probe(p, FR_PROBE_SOURCE, NULL, 0, 200000);
    size_t total = 0, frames = 0;
    while (next(p, 0)) {
        assert_int_equal(got.type, FR_PROBE_REPLY);
        assert_int_equal(got.u.probe.op, FR_PROBE_SOURCE);
        total += got.u.probe.bytes.len;
        frames++;
    }
    assert_int_equal(total, 200000);
    assert_int_equal(frames, 4); /* 3 × 65535 + 3395 */
    /* replies go before what is left of a SOURCE */
    probe(p, FR_PROBE_SOURCE, NULL, 0, 100000);
    probe(p, FR_PROBE_ECHO, "x", 1, 0);
    assert_int_equal(next(p, 0), FR_PROBE_REPLY);
    assert_int_equal(got.u.probe.op, FR_PROBE_ECHO);
    /* SOURCEs add up to AL_PROBE_SOURCE_MAX; past it: LIMIT, not fatal */
    probe(p, FR_PROBE_SOURCE, NULL, 0, AL_PROBE_SOURCE_MAX);
    assert_int_equal(next(p, 0), FR_ERROR);
    assert_int_equal(got.u.error.code, FR_ERR_LIMIT);
    int code;
    const char *why;
    assert_false(rprobe_closing(p, &code, &why));
    rprobe_free(p); /* with a SOURCE under way: no leak */
}

/* A client whose max_frame is small gets SOURCE chunks that fit it, and
 * an ECHO that would not fit ends the session. */
static void test_small_peer(void **state)
{
    (void)state;
    struct rprobe *p = session(0);
    hello(p, 1024);
    probe(p, FR_PROBE_SOURCE, NULL, 0, 5000);
    size_t total = 0;
    while (next(p, 0)) {
        assert_true(got.u.probe.bytes.len <= 1024 - AL_FRAME_HEADER - 1);
        total += got.u.probe.bytes.len;
    }
    assert_int_equal(total, 5000);
    static uint8_t big[2000];
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE;
    f.u.probe.op = FR_PROBE_ECHO;
    f.u.probe.bytes = (struct fr_bytes){big, sizeof big};
    assert_int_equal(feed(p, &f), AL_E_TOOBIG);
    assert_int_equal(next(p, 0), FR_ERROR);
    assert_int_equal(got.u.error.code, FR_ERR_TOO_BIG);
    int code;
    const char *why;
    assert_true(rprobe_closing(p, &code, &why));
    assert_int_equal(code, AL_CLOSE_LIMIT);
    rprobe_free(p);
}

/* What a probe session refuses: anything before HELLO, a controller's
 * frames, a HELLO from a host; each ends it with ERROR then its close. */
static void test_refusals(void **state)
{
    (void)state;
    struct fr_frame f;
    int code;
    const char *why;
    /* a PROBE before HELLO */
    struct rprobe *p = session(0);
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE;
    f.u.probe.op = FR_PROBE_HEADERS;
    assert_int_equal(feed(p, &f), AL_E_PROTO);
    assert_int_equal(next(p, 0), FR_ERROR);
    assert_int_equal(got.u.error.code, FR_ERR_PROTOCOL);
    assert_true(rprobe_closing(p, &code, &why));
    assert_int_equal(code, AL_CLOSE_PROTOCOL);
    assert_false(rprobe_wants_input(p));
    rprobe_free(p);
    /* an OPEN, a LIST: a probe session runs nothing, lists nothing */
    static const uint8_t types[] = {FR_LIST, FR_TOKEN};
    for (size_t i = 0; i < sizeof types; i++) {
        p = session(0);
        hello(p, AL_MAX_FRAME);
        memset(&f, 0, sizeof f);
        f.type = types[i];
        f.u.token = (struct fr_bytes){(const uint8_t *)"t", 1};
        assert_int_equal(feed(p, &f), AL_E_PROTO);
        assert_int_equal(next(p, 0), FR_ERROR);
        assert_true(rprobe_closing(p, &code, &why));
        rprobe_free(p);
    }
    p = session(0);
    hello(p, AL_MAX_FRAME);
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.channel = 1;
    f.u.open.cols = 80;
    f.u.open.rows = 24;
    f.u.open.argc = 1;
    f.u.open.argv[0] = (struct fr_str){"sh", 2};
    assert_int_equal(feed(p, &f), AL_E_PROTO);
    assert_int_equal(next(p, 0), FR_ERROR);
    rprobe_free(p);
    /* a host's HELLO; garbage */
    p = session(0);
    memset(&f, 0, sizeof f);
    f.type = FR_HELLO;
    f.u.hello.version_min = f.u.hello.version_max = 1;
    f.u.hello.role = FR_ROLE_HOST;
    f.u.hello.max_frame = AL_MAX_FRAME;
    assert_int_equal(feed(p, &f), AL_E_PROTO);
    rprobe_free(p);
    p = session(0);
    assert_true(rprobe_input(p, (const uint8_t *)"\x7f\0\0\0\0\0\0\0\0\0", 10) < 0);
    assert_int_equal(next(p, 0), FR_ERROR);
    assert_int_equal(got.u.error.code, FR_ERR_UNKNOWN_TYPE);
    rprobe_free(p);
}

/* The token's deadline: ERROR TOKEN_EXPIRED, close 4002. */
static void test_deadline(void **state)
{
    (void)state;
    struct rprobe *p = session(1000);
    hello(p, AL_MAX_FRAME);
    assert_int_equal(next(p, 999), 0);
    assert_int_equal(next(p, 1000), FR_ERROR);
    assert_int_equal(got.u.error.code, FR_ERR_TOKEN_EXPIRED);
    int code;
    const char *why;
    assert_true(rprobe_closing(p, &code, &why));
    assert_int_equal(code, AL_CLOSE_TOKEN_EXPIRED);
    rprobe_free(p);
}

/* The queue is bounded: a client that never reads is no longer read. */
static void test_queue_bound(void **state)
{
    (void)state;
    struct rprobe *p = session(0);
    hello(p, AL_MAX_FRAME);
    static uint8_t chunk[60000];
    int n = 0;
    while (rprobe_wants_input(p) && n < 1000) {
        probe(p, FR_PROBE_ECHO, chunk, sizeof chunk, 0);
        n++;
    }
    assert_true(n < 1000);
    assert_true(n >= RPROBE_QUEUE_MAX / (int)sizeof chunk);
    while (next(p, 0))
        ;
    assert_true(rprobe_wants_input(p));
    rprobe_free(p);
}

static void test_redact(void **state)
{
    (void)state;
    struct rprobe_header h;
    static const struct {
        const char *name, *value, *want_name, *want_value;
    } cases[] = {
        {"Host", "a.example:443", "host", "a.example:443"},
        {"X-Forwarded-For", "10.0.0.1", "x-forwarded-for", "10.0.0.1"},
        {"Authorization", "Bearer eyJ0", "authorization", "Bearer (4)"},
        {"authorization", "basic dXNlcjpw", "authorization", "Basic (8)"},
        {"Cookie", "a=1; b=2", "cookie", "(8)"},
        {"X-Airlock-Token", "Bearer tok", "x-airlock-token", "Bearer (3)"},
        {"X-Api-Key", "sk-123", "x-api-key", "(6)"},
        {"X-Ms-Client-Principal", "abc", "x-ms-client-principal", "abc"},
        {"X-Amz-Signature", "f00", "x-amz-signature", "(3)"},
        {"X-My-Header", "Bearer secret", "x-my-header", "Bearer secret"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(
            rprobe_redact(cases[i].name, cases[i].value, strlen(cases[i].value), NULL, &h), 1);
        assert_string_equal(h.name, cases[i].want_name);
        assert_string_equal(h.value, cases[i].want_value);
    }
    /* the runner's own token header is a credential whatever its name */
    assert_int_equal(rprobe_redact("X-Tok", "Bearer a", 8, "x-tok", &h), 1);
    assert_string_equal(h.value, "Bearer (1)");
    /* names that cannot be reported; values cut */
    assert_int_equal(rprobe_redact("", "v", 1, NULL, &h), 0);
    assert_int_equal(rprobe_redact("a_b", "v", 1, NULL, &h), 0);
    static char longname[AL_PROBE_MAX_HEADER_NAME + 2];
    memset(longname, 'a', sizeof longname - 1);
    assert_int_equal(rprobe_redact(longname, "v", 1, NULL, &h), 0);
    static char longval[1000];
    memset(longval, 'v', sizeof longval);
    assert_int_equal(rprobe_redact("x-long", longval, sizeof longval, NULL, &h), 1);
    assert_int_equal(strlen(h.value), AL_PROBE_MAX_HEADER_VALUE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),         cmocka_unit_test(test_small_peer),
        cmocka_unit_test(test_refusals),    cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_queue_bound), cmocka_unit_test(test_redact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
