/*
 * Unit tests for proxypol: routing to the configured upstream, the order
 * of the answers (400/404/401/403), every traversal and encoding trick
 * refused, the agent's credential taken from each header form and never
 * forwarded, hop-by-hop headers dropped, and the upstream's real
 * credential header built in each of its three forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxypol.h"

#include <stdio.h>
#include <string.h>

static struct proxycfg cfg;

static int setup(void **state)
{
    (void)state;
    proxycfg_init(&cfg);
    const char *lines[][2] = {
        {"upstream.anthropic.url", "http://127.0.0.1:9/"},
        {"upstream.anthropic.kind", "anthropic"},
        {"upstream.anthropic.header", "x-api-key"},
        {"upstream.anthropic.secret-file", "/nonexistent"},
        {"upstream.anthropic.paths", "/v1/"},
        {"upstream.github.url", "https://github.example/base"},
        {"upstream.github.kind", "git"},
        {"upstream.github.header", "basic"},
        {"upstream.github.secret-command", "echo x"},
        {"upstream.openai.url", "https://api.example"},
        {"upstream.openai.header", "bearer"},
        {"upstream.openai.secret-file", "/nonexistent"},
        {"upstream.openai.methods", "POST"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_int_equal(proxycfg_set(&cfg, lines[i][0], lines[i][1], NULL, 0), AL_OK);
    assert_int_equal(proxycfg_finish(&cfg, NULL, 0), AL_OK);
    return 0;
}

static struct proxyreq_head head(const char *method, const char *target, const char *const *hdrs)
{
    struct proxyreq_head h;
    memset(&h, 0, sizeof h);
    snprintf(h.method, sizeof h.method, "%s", method);
    h.target = target;
    for (unsigned i = 0; hdrs && hdrs[2 * i]; i++) {
        h.hdr[i].name = hdrs[2 * i];
        h.hdr[i].value = hdrs[2 * i + 1];
        h.nhdr = i + 1;
    }
    h.content_length = -1;
    return h;
}

static const char *const with_key[] = {"x-api-key", "alp_cred1", NULL};

static int route(const char *method, const char *target, const char *const *hdrs,
                 struct proxypol_call *c)
{
    struct proxyreq_head h = head(method, target, hdrs);
    char why[256];
    int st = proxypol_route(&cfg, &h, c, why, sizeof why);
    if (st == 0)
        st = proxypol_allowed(c, &h, why, sizeof why);
    /* a reason never quotes the credential */
    if (st != 0)
        assert_null(strstr(why, "alp_cred"));
    return st;
}

static void test_routes_to_upstream(void **state)
{
    (void)state;
    struct proxypol_call c;
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages?beta=true", with_key, &c), 0);
    assert_string_equal(c.up->name, "anthropic");
    assert_string_equal(c.path, "/v1/messages?beta=true");
    assert_string_equal(c.url, "http://127.0.0.1:9/v1/messages?beta=true");
    assert_string_equal(c.credential, "alp_cred1");
    const char *const bearer[] = {"authorization", "Bearer alp_cred2", NULL};
    assert_int_equal(route("POST", "/v1/proxy/openai/v1/responses", bearer, &c), 0);
    assert_string_equal(c.url, "https://api.example/v1/responses");
    assert_string_equal(c.credential, "alp_cred2");
    /* git: Basic with any user, the credential as the password */
    const char *const basic[] = {"authorization", "Basic eC1hY2Nlc3MtdG9rZW46YWxwX2NyZWQz", NULL};
    assert_int_equal(
        route("GET", "/v1/proxy/github/org/repo.git/info/refs?service=git-upload-pack", basic, &c),
        0);
    assert_string_equal(c.credential, "alp_cred3");
    assert_string_equal(
        c.url, "https://github.example/base/org/repo.git/info/refs?service=git-upload-pack");
}

static void test_order_of_answers(void **state)
{
    (void)state;
    struct proxypol_call c;
    /* unknown upstream, with or without a credential: 404 */
    assert_int_equal(route("POST", "/v1/proxy/nope/v1/messages", with_key, &c), 404);
    assert_int_equal(route("POST", "/v1/proxy/nope/v1/messages", NULL, &c), 404);
    assert_int_equal(route("POST", "/v1/other", with_key, &c), 404);
    /* no credential: 401 even on a forbidden path */
    assert_int_equal(route("POST", "/v1/proxy/anthropic/admin", NULL, &c), 401);
    const char *const foreign[] = {"authorization", "Bearer sk-ant-real-key!", NULL};
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages", foreign, &c), 401);
    const char *const two[] = {"x-api-key", "alp_a", "authorization", "Bearer alp_b", NULL};
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages", two, &c), 401);
    const char *const cookie[] = {"authorization", "Digest x", NULL};
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages", cookie, &c), 401);
    /* Basic with padding that is not base64's (found by fuzz_proxyreq: more
     * '=' than the decoded bytes once wrote below the decode buffer), '='
     * inside, or three of them: 401, nothing read or written out of place */
    static const char *const bad_basic[] = {
        "Basic eD======================",
        "Basic ====",
        "Basic eD=A",
        "Basic eA===",
        "Basic ========================================================================",
    };
    for (size_t i = 0; i < sizeof bad_basic / sizeof bad_basic[0]; i++) {
        const char *const h[] = {"authorization", bad_basic[i], NULL};
        assert_int_equal(route("GET", "/v1/proxy/github/org/repo.git/info/refs", h, &c), 401);
    }
    /* path or method not allowed: 403 */
    assert_int_equal(route("POST", "/v1/proxy/anthropic/admin/keys", with_key, &c), 403);
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1", with_key, &c), 403);
    assert_int_equal(route("GET", "/v1/proxy/openai/v1/models", with_key, &c), 403);
    assert_int_equal(route("DELETE", "/v1/proxy/anthropic/v1/x", with_key, &c), 403);
}

static void test_traversal_and_forms_refused(void **state)
{
    (void)state;
    struct proxypol_call c;
    const char *bad[] = {
        "/v1/proxy/anthropic/v1/../admin",
        "/v1/proxy/anthropic/v1/./messages",
        "/v1/proxy/anthropic/v1/%2e%2e/admin",
        "/v1/proxy/anthropic/v1/%2E%2e/admin",
        "/v1/proxy/anthropic/v1/.%2e/admin",
        "/v1/proxy/anthropic/v1%2fadmin",
        "/v1/proxy/anthropic/v1/%5c..%5cadmin",
        "/v1/proxy/anthropic/v1/a%00b",
        "/v1/proxy/anthropic/v1/%252e%252e/admin",
        "/v1/proxy/anthropic//v1/messages",
        "/v1/proxy/anthropic/v1//messages",
        "/v1/proxy/anthropic/v1/\\..\\admin",
        "/v1/proxy/anthropic/v1/m\x7f",
        "/v1/proxy/anthropic/v1/m#frag",
        "/v1/proxy/anthropic/v1/\xc3\xa9",
        "/v1/proxy/anthropic/v1/..",
        /* overlong UTF-8 forms of '.' and '/', which a lax decoder takes */
        "/v1/proxy/anthropic/v1/%c0%ae%c0%ae/admin",
        "/v1/proxy/anthropic/v1/%C0%AE./admin",
        "/v1/proxy/anthropic/v1%c0%afadmin",
        "/v1/proxy/anthropic/v1/%e0%80%ae%e0%80%ae/admin",
        "/v1/proxy/anthropic/v1/%f0%80%80%ae/admin",
        /* dot segments with parameters: "..;" is ".." to some servers */
        "/v1/proxy/anthropic/v1/..;/admin",
        "/v1/proxy/anthropic/v1/..;x=1/admin",
        "/v1/proxy/anthropic/v1/.;/messages",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = route("POST", bad[i], with_key, &c);
        if (st != 400)
            fprintf(stderr, "%s: %d\n", bad[i], st);
        assert_int_equal(st, 400);
    }
    /* near them, and fine: a parameter on a name, an escaped é, ".;" inside a name */
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages;v=1", with_key, &c), 0);
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/caf%c3%a9", with_key, &c), 0);
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/a..;b", with_key, &c), 0);
    assert_int_equal(route("GET", "http://evil.example/v1/proxy/anthropic/v1/m", with_key, &c),
                     400);
    assert_int_equal(route("CONNECT", "evil.example:443", with_key, &c), 400);
    assert_int_equal(route("TRACE", "/v1/proxy/anthropic/v1/m", with_key, &c), 501);
    struct proxyreq_head h = head("GET", "/v1/proxy/anthropic/v1/responses", with_key);
    h.upgrade = 1;
    assert_int_equal(proxypol_route(&cfg, &h, &c, NULL, 0), 426);
    const char *const ctl[] = {"x-api-key", "alp_cred1", "x-note", "a\001b", NULL};
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages", ctl, &c), 400);
    /* a query may hold what a path may not */
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages?q=%2e%2e/x", with_key, &c), 0);
    /* a path longer than the limit */
    static char longp[PROXYPOL_PATH_MAX + 64];
    const char *pre = "/v1/proxy/anthropic/v1/";
    memcpy(longp, pre, strlen(pre));
    memset(longp + strlen(pre), 'a', PROXYPOL_PATH_MAX);
    longp[strlen(pre) + PROXYPOL_PATH_MAX] = '\0';
    assert_int_equal(route("POST", longp, with_key, &c), 414);
}

struct out {
    char text[4096];
};

static int collect(void *ud, const char *name, const char *value)
{
    struct out *o = ud;
    size_t l = strlen(o->text);
    snprintf(o->text + l, sizeof o->text - l, "%s: %s\n", name, value);
    return 0;
}

static void test_headers_forwarded(void **state)
{
    (void)state;
    const char *const hdrs[] = {"host",
                                "127.0.0.1:4242",
                                "x-api-key",
                                "alp_cred1",
                                "authorization",
                                "Bearer alp_cred1",
                                "content-type",
                                "application/json",
                                "content-length",
                                "12",
                                "connection",
                                "keep-alive, x-hop",
                                "x-hop",
                                "1",
                                "keep-alive",
                                "timeout=5",
                                "te",
                                "trailers",
                                "transfer-encoding",
                                "chunked",
                                "anthropic-version",
                                "2023-06-01",
                                "proxy-authorization",
                                "Basic abc",
                                "upgrade",
                                "h2c",
                                "expect",
                                "100-continue",
                                "x-forwarded-for",
                                "10.0.0.1",
                                "anthropic-beta",
                                "a,b",
                                NULL};
    struct proxypol_call c;
    assert_int_equal(route("POST", "/v1/proxy/anthropic/v1/messages", hdrs, &c), 0);
    struct proxyreq_head h = head("POST", "/v1/proxy/anthropic/v1/messages", hdrs);
    struct out o = {""};
    assert_int_equal(proxypol_headers(&c, &h, "sk-real", collect, &o), 0);
    assert_string_equal(o.text, "content-type: application/json\n"
                                "anthropic-version: 2023-06-01\n"
                                "anthropic-beta: a,b\n"
                                "x-api-key: sk-real\n");
    /* bearer and basic forms */
    const char *const bearer[] = {"authorization", "Bearer alp_cred2", NULL};
    assert_int_equal(route("POST", "/v1/proxy/openai/v1/responses", bearer, &c), 0);
    h = head("POST", "/v1/proxy/openai/v1/responses", bearer);
    memset(&o, 0, sizeof o);
    assert_int_equal(proxypol_headers(&c, &h, "sk-openai", collect, &o), 0);
    assert_string_equal(o.text, "authorization: Bearer sk-openai\n");
    assert_int_equal(route("GET", "/v1/proxy/github/o/r.git/info/refs", bearer, &c), 0);
    h = head("GET", "/v1/proxy/github/o/r.git/info/refs", bearer);
    memset(&o, 0, sizeof o);
    assert_int_equal(proxypol_headers(&c, &h, "ghp_secret", collect, &o), 0);
    /* base64("x-access-token:ghp_secret") */
    assert_string_equal(o.text, "authorization: Basic eC1hY2Nlc3MtdG9rZW46Z2hwX3NlY3JldA==\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_routes_to_upstream, setup),
        cmocka_unit_test_setup(test_order_of_answers, setup),
        cmocka_unit_test_setup(test_traversal_and_forms_refused, setup),
        cmocka_unit_test_setup(test_headers_forwarded, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
