/*
 * Unit tests for proxyenv: the variables of each kind of upstream, git's
 * numbered configuration over several git upstreams, the AIRLOCK_PROXY_*
 * pair, unknown upstreams, two upstreams setting one variable, a clash
 * with the terminal's own environment, the limits, and the wipe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxyenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE "http://127.0.0.1:8090/v1/proxy"
#define CRED "alp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

static struct proxycfg *cfg_new(void)
{
    struct proxycfg *c = malloc(sizeof *c);
    assert_non_null(c);
    proxycfg_init(c);
    static const char *const kv[][2] = {
        {"upstream.anthropic.url", "https://api.anthropic.com"},
        {"upstream.anthropic.kind", "anthropic"},
        {"upstream.anthropic.secret-file", "/k/a"},
        {"upstream.claude2.url", "https://other.example"},
        {"upstream.claude2.kind", "anthropic"},
        {"upstream.claude2.secret-file", "/k/c"},
        {"upstream.openai.url", "https://api.openai.com/v1"},
        {"upstream.openai.kind", "openai"},
        {"upstream.openai.secret-file", "/k/o"},
        {"upstream.github.url", "https://github.com"},
        {"upstream.github.kind", "git"},
        {"upstream.github.secret-file", "/k/g"},
        {"upstream.gitlab.url", "https://gitlab.example/group"},
        {"upstream.gitlab.kind", "git"},
        {"upstream.gitlab.secret-file", "/k/l"},
        {"upstream.plain.url", "http://127.0.0.1:9"},
        {"upstream.plain.secret-file", "/k/p"},
    };
    char why[256];
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        assert_int_equal(proxycfg_set(c, kv[i][0], kv[i][1], why, sizeof why), AL_OK);
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_OK);
    return c;
}

static struct proxyenv *env_new(void)
{
    struct proxyenv *pe = malloc(sizeof *pe);
    assert_non_null(pe);
    return pe;
}

/* Every variable, in order, as one string "A=1\nB=2\n". */
static void joined(const struct proxyenv *pe, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < pe->n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s\n", pe->vars[i]);
}

static void test_kinds(void **state)
{
    (void)state;
    struct proxycfg *c = cfg_new();
    struct proxyenv *pe = env_new();
    char why[256], all[8192];
    const char *const names[] = {"anthropic", "openai", "plain"};
    assert_int_equal(proxyenv_build(c, names, 3, BASE, CRED, pe, why, sizeof why), AL_OK);
    assert_string_equal(why, "");
    joined(pe, all, sizeof all);
    assert_string_equal(all, "AIRLOCK_PROXY_URL=" BASE "\n"
                             "AIRLOCK_PROXY_TOKEN=" CRED "\n"
                             "ANTHROPIC_BASE_URL=" BASE "/anthropic\n"
                             "ANTHROPIC_AUTH_TOKEN=" CRED "\n"
                             "OPENAI_BASE_URL=" BASE "/openai\n"
                             "OPENAI_API_KEY=" CRED "\n"
                             "CODEX_API_KEY=" CRED "\n");
    /* http alone: the pair only */
    const char *const plain[] = {"plain"};
    assert_int_equal(proxyenv_build(c, plain, 1, BASE, CRED, pe, why, sizeof why), AL_OK);
    assert_int_equal(pe->n, 2);
    /* none: nothing at all */
    assert_int_equal(proxyenv_build(c, NULL, 0, BASE, CRED, pe, why, sizeof why), AL_OK);
    assert_int_equal(pe->n, 0);
    free(pe);
    free(c);
}

static void test_git(void **state)
{
    (void)state;
    struct proxycfg *c = cfg_new();
    struct proxyenv *pe = env_new();
    char why[256], all[8192];
    const char *const names[] = {"github", "anthropic", "gitlab"};
    assert_int_equal(proxyenv_build(c, names, 3, BASE, CRED, pe, why, sizeof why), AL_OK);
    joined(pe, all, sizeof all);
    assert_string_equal(all, "AIRLOCK_PROXY_URL=" BASE "\n"
                             "AIRLOCK_PROXY_TOKEN=" CRED "\n"
                             "GIT_CONFIG_KEY_0=url." BASE "/github/.insteadOf\n"
                             "GIT_CONFIG_VALUE_0=https://github.com/\n"
                             "GIT_CONFIG_KEY_1=http." BASE "/github/.extraHeader\n"
                             "GIT_CONFIG_VALUE_1=Authorization: Bearer " CRED "\n"
                             "ANTHROPIC_BASE_URL=" BASE "/anthropic\n"
                             "ANTHROPIC_AUTH_TOKEN=" CRED "\n"
                             "GIT_CONFIG_KEY_2=url." BASE "/gitlab/.insteadOf\n"
                             "GIT_CONFIG_VALUE_2=https://gitlab.example/group/\n"
                             "GIT_CONFIG_KEY_3=http." BASE "/gitlab/.extraHeader\n"
                             "GIT_CONFIG_VALUE_3=Authorization: Bearer " CRED "\n"
                             "GIT_CONFIG_COUNT=4\n");
    proxyenv_clear(pe);
    assert_int_equal(pe->n, 0);
    assert_null(memmem(pe->buf, sizeof pe->buf, CRED, strlen(CRED))); /* wiped */
    free(pe);
    free(c);
}

static void test_refused(void **state)
{
    (void)state;
    struct proxycfg *c = cfg_new();
    struct proxyenv *pe = env_new();
    char why[256];
    const char *const unknown[] = {"anthropic", "nope"};
    assert_int_equal(proxyenv_build(c, unknown, 2, BASE, CRED, pe, why, sizeof why), AL_E_NOENT);
    assert_string_equal(why, "no upstream \"nope\" in airlockd's configuration");
    assert_int_equal(pe->n, 0);
    assert_null(memmem(pe->buf, sizeof pe->buf, CRED, strlen(CRED)));
    const char *const two[] = {"anthropic", "claude2"};
    assert_int_equal(proxyenv_build(c, two, 2, BASE, CRED, pe, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "upstream claude2: another upstream of kind anthropic sets "
                                "ANTHROPIC_BASE_URL already"));
    assert_null(strstr(why, CRED));
    const char *const one[] = {"anthropic"};
    static const char *const bad_bases[] = {
        NULL, "", "ftp://h", "http://h/", "http://h x", "127.0.0.1:8090", "http://h\n",
    };
    for (size_t i = 0; i < sizeof bad_bases / sizeof bad_bases[0]; i++) {
        assert_int_equal(proxyenv_build(c, one, 1, bad_bases[i], CRED, pe, why, sizeof why),
                         AL_E_INVAL);
        assert_non_null(strstr(why, "the proxy's URL"));
    }
    char base[PROXYENV_BASE_MAX + 2];
    memcpy(base, "http://", 7);
    memset(base + 7, 'h', sizeof base - 8);
    base[sizeof base - 1] = '\0';
    assert_int_equal(proxyenv_build(c, one, 1, base, CRED, pe, why, sizeof why), AL_E_INVAL);
    base[sizeof base - 2] = '\0'; /* PROXYENV_BASE_MAX bytes: fine */
    assert_int_equal(proxyenv_build(c, one, 1, base, CRED, pe, why, sizeof why), AL_OK);
    assert_int_equal(proxyenv_build(c, one, 1, BASE, NULL, pe, why, sizeof why), AL_E_INVAL);
    assert_int_equal(proxyenv_build(c, NULL, 1, BASE, CRED, pe, why, sizeof why), AL_E_INVAL);
    assert_int_equal(
        proxyenv_build(c, one, PROXY_MAX_UPSTREAMS + 1, BASE, CRED, pe, why, sizeof why),
        AL_E_INVAL);
    assert_int_equal(proxyenv_build(c, one, 1, BASE, CRED, NULL, why, sizeof why), AL_E_INVAL);
    free(pe);
    free(c);
}

/* The most a configuration allows: 16 git upstreams with the longest
 * URLs, through the longest base, fit. */
static void test_limits(void **state)
{
    (void)state;
    struct proxycfg *c = malloc(sizeof *c);
    assert_non_null(c);
    proxycfg_init(c);
    char why[256], key[640], url[PROXY_URL_MAX + 1], name[PROXY_MAX_UPSTREAMS][PROXY_NAME_MAX + 1];
    const char *names[PROXY_MAX_UPSTREAMS];
    memcpy(url, "https://", 8);
    memset(url + 8, 'u', PROXY_URL_MAX - 8);
    url[PROXY_URL_MAX] = '\0';
    for (unsigned i = 0; i < PROXY_MAX_UPSTREAMS; i++) {
        memset(name[i], 'n', PROXY_NAME_MAX);
        name[i][PROXY_NAME_MAX] = '\0';
        name[i][0] = (char)('a' + i);
        names[i] = name[i];
        (void)snprintf(key, sizeof key, "upstream.%s.url", name[i]);
        assert_int_equal(proxycfg_set(c, key, url, why, sizeof why), AL_OK);
        (void)snprintf(key, sizeof key, "upstream.%s.kind", name[i]);
        assert_int_equal(proxycfg_set(c, key, "git", why, sizeof why), AL_OK);
        (void)snprintf(key, sizeof key, "upstream.%s.secret-file", name[i]);
        assert_int_equal(proxycfg_set(c, key, "/k", why, sizeof why), AL_OK);
    }
    assert_int_equal(proxycfg_finish(c, why, sizeof why), AL_OK);
    char base[PROXYENV_BASE_MAX + 1];
    memcpy(base, "http://", 7);
    memset(base + 7, 'h', PROXYENV_BASE_MAX - 7);
    base[PROXYENV_BASE_MAX] = '\0';
    struct proxyenv *pe = env_new();
    assert_int_equal(proxyenv_build(c, names, PROXY_MAX_UPSTREAMS, base, CRED, pe, why, sizeof why),
                     AL_OK);
    assert_int_equal(pe->n, PROXYENV_VARS_MAX);
    assert_string_equal(pe->vars[pe->n - 1], "GIT_CONFIG_COUNT=32");
    for (size_t i = 0; i < pe->n; i++)
        assert_true(strlen(pe->vars[i]) < 4096); /* AL_MAX_STR */
    free(pe);
    free(c);
}

static void test_clash(void **state)
{
    (void)state;
    struct proxycfg *c = cfg_new();
    struct proxyenv *pe = env_new();
    char why[256], name[64];
    const char *const names[] = {"anthropic", "github"};
    assert_int_equal(proxyenv_build(c, names, 2, BASE, CRED, pe, why, sizeof why), AL_OK);
    char *fine[] = {"LANG=C.UTF-8", "ANTHROPIC_BASE=x", "GIT_CONFIG=y", "PATH=/bin"};
    assert_int_equal(proxyenv_clash(pe, fine, 4, name, sizeof name), 0);
    char *clash1[] = {"LANG=C.UTF-8", "ANTHROPIC_BASE_URL=https://elsewhere"};
    assert_int_equal(proxyenv_clash(pe, clash1, 2, name, sizeof name), 1);
    assert_string_equal(name, "ANTHROPIC_BASE_URL");
    char *clash2[] = {"GIT_CONFIG_COUNT=1"};
    assert_int_equal(proxyenv_clash(pe, clash2, 1, name, sizeof name), 1);
    assert_string_equal(name, "GIT_CONFIG_COUNT");
    char *clash3[] = {"AIRLOCK_PROXY_TOKEN="};
    assert_int_equal(proxyenv_clash(pe, clash3, 1, name, sizeof name), 1);
    assert_int_equal(proxyenv_clash(pe, NULL, 0, name, sizeof name), 0);
    free(pe);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),  cmocka_unit_test(test_git),   cmocka_unit_test(test_refused),
        cmocka_unit_test(test_limits), cmocka_unit_test(test_clash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
