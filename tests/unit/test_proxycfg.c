/*
 * Unit tests for proxycfg: every field parsed and its bad values refused
 * with the key in the reason, a field given twice, incomplete upstreams,
 * the defaults filled by finish (the secret file's rules: test_secret.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxycfg.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int set(struct proxycfg *c, const char *k, const char *v, char *why)
{
    return proxycfg_set(c, k, v, why, 256);
}

static void test_fields_and_defaults(void **state)
{
    (void)state;
    struct proxycfg *c = malloc(sizeof *c);
    assert_non_null(c);
    proxycfg_init(c);
    char why[256];
    assert_false(proxycfg_is_key("listen"));
    assert_true(proxycfg_is_key("upstream.a.url"));
    assert_int_equal(set(c, "upstream.a.url", "https://api.example.com/", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.kind", "anthropic", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.secret-file", "/etc/airlock/a.key", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.paths", "/v1/, /v2", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.methods", "POST, GET", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.requests-per-minute", "60", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.max-body", "1048576", why), AL_OK);
    assert_int_equal(set(c, "upstream.g.url", "http://127.0.0.1:8080", why), AL_OK);
    assert_int_equal(set(c, "upstream.g.kind", "git", why), AL_OK);
    assert_int_equal(set(c, "upstream.g.header", "basic", why), AL_OK);
    assert_int_equal(set(c, "upstream.g.secret-command", "gh auth token", why), AL_OK);
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_OK);
    const struct proxy_upstream *a = proxycfg_find(c, "a");
    assert_non_null(a);
    assert_string_equal(a->url, "https://api.example.com");
    assert_int_equal(a->kind, PROXY_KIND_ANTHROPIC);
    assert_int_equal(a->header, PROXY_HEADER_BEARER);
    assert_int_equal(a->nprefixes, 2);
    assert_string_equal(a->prefixes[0], "/v1/");
    assert_string_equal(a->prefixes[1], "/v2/");
    assert_int_equal(a->methods, PROXY_M_POST | PROXY_M_GET);
    assert_int_equal(a->rpm, 60);
    assert_int_equal(a->max_body, 1048576);
    assert_int_equal(a->concurrent, PROXY_DEFAULT_CONCURRENT);
    assert_false(a->insecure_http);
    const struct proxy_upstream *g = proxycfg_find(c, "g");
    assert_non_null(g);
    assert_true(g->insecure_http);
    assert_string_equal(g->basic_user, "x-access-token");
    assert_string_equal(g->prefixes[0], "/");
    assert_int_equal(g->methods, PROXY_M_GET | PROXY_M_POST);
    assert_int_equal(g->secret_ttl_s, PROXY_DEFAULT_SECRET_TTL_S);
    assert_null(proxycfg_find(c, "b"));
    assert_string_equal(proxycfg_kind_name(PROXY_KIND_GIT), "git");
    assert_int_equal(proxycfg_method_bit("CONNECT"), 0);
    assert_int_equal(proxycfg_method_bit("get"), 0);
    free(c);
}

static void check_bad(const char *key, const char *value, int want, const char *in_why)
{
    struct proxycfg *c = malloc(sizeof *c);
    assert_non_null(c);
    proxycfg_init(c);
    char why[256] = "";
    int rc = proxycfg_set(c, key, value, why, sizeof why);
    if (rc != want || !strstr(why, in_why))
        fprintf(stderr, "%s = %s: rc %d, why \"%s\"\n", key, value, rc, why);
    assert_int_equal(rc, want);
    assert_non_null(strstr(why, in_why));
    free(c);
}

static void test_bad_values(void **state)
{
    (void)state;
    check_bad("upstream.a.url", "ftp://x", AL_E_INVAL, "upstream.a.url: must start with https://");
    check_bad("upstream.a.url", "https://", AL_E_INVAL, "no host");
    check_bad("upstream.a.url", "https://u:p@host", AL_E_INVAL, "upstream.a.url");
    check_bad("upstream.a.url", "https://host/a?b", AL_E_INVAL, "upstream.a.url");
    check_bad("upstream.a.kind", "ssh", AL_E_INVAL, "anthropic, openai, git or http");
    check_bad("upstream.a.header", "cookie", AL_E_INVAL, "bearer, x-api-key or basic");
    check_bad("upstream.a.paths", "v1/", AL_E_INVAL, "start with '/'");
    check_bad("upstream.a.paths", "/v1/../admin/", AL_E_INVAL, "'..'");
    check_bad("upstream.a.paths", "/v1/%2e/", AL_E_INVAL, "'%'");
    check_bad("upstream.a.methods", "CONNECT", AL_E_INVAL, "methods are");
    check_bad("upstream.a.methods", "post", AL_E_INVAL, "methods are");
    check_bad("upstream.a.concurrent", "0", AL_E_INVAL, "1..1024");
    check_bad("upstream.a.concurrent", "5000", AL_E_INVAL, "1..1024");
    check_bad("upstream.a.requests-per-minute", "-1", AL_E_INVAL, "integer");
    check_bad("upstream.a.requests-per-minute", "10x", AL_E_INVAL, "integer");
    check_bad("upstream.a.secret-file", "relative/path", AL_E_INVAL, "absolute path");
    check_bad("upstream.a.user", "a:b", AL_E_INVAL, "without ':'");
    check_bad("upstream.a.colour", "blue", AL_E_INVAL, "unknown field \"colour\"");
    check_bad("upstream.A.url", "https://x", AL_E_INVAL, "upstream.NAME.FIELD");
    check_bad("upstream..url", "https://x", AL_E_INVAL, "upstream.NAME.FIELD");
    check_bad("upstream.a", "https://x", AL_E_INVAL, "upstream.NAME.FIELD");
    check_bad("listen", "x", AL_E_INVAL, "not an upstream key");
}

static void test_twice_incomplete_and_too_many(void **state)
{
    (void)state;
    struct proxycfg *c = malloc(sizeof *c);
    assert_non_null(c);
    char why[256];
    proxycfg_init(c);
    assert_int_equal(set(c, "upstream.a.url", "https://x", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.url", "https://y", why), AL_E_EXISTS);
    assert_non_null(strstr(why, "given twice"));
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "upstream a needs exactly one of secret-file and secret-command"));
    assert_int_equal(set(c, "upstream.a.secret-file", "/k", why), AL_OK);
    assert_int_equal(set(c, "upstream.a.secret-command", "echo k", why), AL_OK);
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_E_INVAL);

    proxycfg_init(c);
    assert_int_equal(set(c, "upstream.b.secret-file", "/k", why), AL_OK);
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "upstream b has no url"));

    proxycfg_init(c);
    for (int i = 0; i < PROXY_MAX_UPSTREAMS; i++) {
        char k[64];
        snprintf(k, sizeof k, "upstream.u%d.url", i);
        assert_int_equal(set(c, k, "https://x", why), AL_OK);
    }
    assert_int_equal(set(c, "upstream.more.url", "https://x", why), AL_E_LIMIT);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_and_defaults),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_twice_incomplete_and_too_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
