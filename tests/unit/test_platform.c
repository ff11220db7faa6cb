/*
 * Unit tests for platform: the keys and their bad values, a platform with
 * no or two token sources, the token read from a file and from a command,
 * kept until token-ttl or shortly before a JWT's exp (whichever comes
 * first), a JWT already expired refused, and reasons that never hold it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "b64url.h"
#include "platform.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct platforms *fresh(void)
{
    struct platforms *p = malloc(sizeof *p);
    assert_non_null(p);
    platforms_init(p);
    return p;
}

static void test_keys(void **state)
{
    (void)state;
    struct platforms *p = fresh();
    char why[512];
    assert_true(platform_is_key("platform.aca.token-file"));
    assert_false(platform_is_key("upstream.aca.url"));
    assert_int_equal(platform_set(p, "platform.aca.token-command", "echo t", why, sizeof why),
                     AL_OK);
    assert_int_equal(platform_set(p, "platform.aca.ping-interval", "10", why, sizeof why), AL_OK);
    assert_int_equal(platform_set(p, "platform.aca.ping-interval", "11", why, sizeof why),
                     AL_E_EXISTS);
    assert_non_null(strstr(why, "given twice"));
    static const struct {
        const char *key, *value, *in_why;
    } bad[] = {
        {"platform.ACA.token-file", "/k", "NAME 1..32"},
        {"platform.aca", "/k", "platform.NAME.FIELD"},
        {"platform.aca.token", "/k", "unknown field"},
        {"platform.b.token-file", "relative", "absolute path"},
        {"platform.b.token-ttl", "0", "1..86400"},
        {"platform.b.token-ttl", "12x", "1..86400"},
        {"platform.b.ping-interval", "-1", "1..30"},
        {"platform.b.token-command", "", "1..1024"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        assert_int_equal(platform_set(p, bad[i].key, bad[i].value, why, sizeof why), AL_E_INVAL);
        assert_non_null(strstr(why, bad[i].in_why));
    }
    assert_int_equal(platform_finish(p, why, sizeof why), AL_OK);
    const struct platform_def *d = platform_find(p, "aca");
    assert_non_null(d);
    assert_int_equal(d->ping_s, 10);
    assert_int_equal(d->token_ttl_s, PLATFORM_DEFAULT_TTL_S);
    assert_null(platform_find(p, "other"));
    assert_int_equal(platform_set(p, "platform.two.token-command", "echo t", why, sizeof why),
                     AL_OK);
    assert_int_equal(platform_set(p, "platform.two.token-file", "/k", why, sizeof why), AL_OK);
    assert_int_equal(platform_finish(p, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "platform two needs exactly one"));
    free(p);
}

/* A JWT-shaped token whose payload has exp (unsigned: only its exp matters). */
static void jwt_with_exp(char *out, size_t cap, long long exp)
{
    char payload[128], enc[256];
    size_t n = 0;
    (void)snprintf(payload, sizeof payload, "{\"aud\":\"https://dynamicsessions.io\",\"exp\":%lld}",
                   exp);
    assert_int_equal(b64u_encode((const uint8_t *)payload, strlen(payload), enc, sizeof enc, &n),
                     AL_OK);
    (void)snprintf(out, cap, "eyJhbGciOiJSUzI1NiJ9.%s.c2ln", enc);
}

static void test_token_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/airlock-platform-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], out[PLATFORM_TOKEN_MAX + 1], why[512], tok[512], cmd[600];
    (void)snprintf(path, sizeof path, "%s/tok", dir);
    struct platforms *p = fresh();
    (void)snprintf(cmd, sizeof cmd, "cat %s", path);
    assert_int_equal(platform_set(p, "platform.cmd.token-command", cmd, why, sizeof why), AL_OK);
    assert_int_equal(platform_set(p, "platform.cmd.token-ttl", "60", why, sizeof why), AL_OK);
    char key[300];
    (void)snprintf(key, sizeof key, "%s", path);
    assert_int_equal(platform_set(p, "platform.file.token-file", key, why, sizeof why), AL_OK);
    assert_int_equal(platform_finish(p, why, sizeof why), AL_OK);

    const int64_t unix0 = 1900000000;
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    jwt_with_exp(tok, sizeof tok, unix0 + 3600);
    fprintf(f, "%s\n", tok);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(platform_token_exp(tok), unix0 + 3600);
    assert_int_equal(platform_token_exp("opaque-token"), 0);

    /* the command's token: kept for token-ttl (60 s), its exp is later */
    assert_int_equal(platform_token(p, "cmd", 1000, unix0, out, sizeof out, why, sizeof why),
                     AL_OK);
    assert_string_equal(out, tok);
    f = fopen(path, "w");
    fprintf(f, "second-token\n");
    fclose(f);
    assert_int_equal(platform_token(p, "cmd", 60999, unix0, out, sizeof out, why, sizeof why),
                     AL_OK);
    assert_string_equal(out, tok);
    assert_int_equal(platform_token(p, "cmd", 61000, unix0, out, sizeof out, why, sizeof why),
                     AL_OK);
    assert_string_equal(out, "second-token");

    /* the file's JWT: kept until PLATFORM_EXP_MARGIN_S before its exp,
     * when that comes before token-ttl (default 3000 s) */
    jwt_with_exp(tok, sizeof tok, unix0 + 600);
    f = fopen(path, "w");
    fprintf(f, "%s\n", tok);
    fclose(f);
    assert_int_equal(platform_token(p, "file", 0, unix0, out, sizeof out, why, sizeof why), AL_OK);
    assert_string_equal(out, tok);
    f = fopen(path, "w");
    fprintf(f, "third-token\n");
    fclose(f);
    int64_t due = (600 - PLATFORM_EXP_MARGIN_S) * 1000;
    assert_int_equal(platform_token(p, "file", due - 1, unix0, out, sizeof out, why, sizeof why),
                     AL_OK);
    assert_string_equal(out, tok);
    assert_int_equal(platform_token(p, "file", due, unix0, out, sizeof out, why, sizeof why),
                     AL_OK);
    assert_string_equal(out, "third-token");

    /* an expired JWT is refused and not kept; the reason holds no token */
    jwt_with_exp(tok, sizeof tok, unix0 - 5);
    f = fopen(path, "w");
    fprintf(f, "%s\n", tok);
    fclose(f);
    assert_int_equal(platform_token(p, "cmd", 200000, unix0, out, sizeof out, why, sizeof why),
                     AL_E_EXPIRED);
    assert_non_null(strstr(why, "platform cmd: its token expired 5 s ago"));
    assert_null(strstr(why, "eyJ"));

    /* a file others may read is refused, naming the platform */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(platform_token(p, "file", 10000000, unix0, out, sizeof out, why, sizeof why),
                     AL_E_PERM);
    assert_non_null(strstr(why, "platform file: "));
    assert_non_null(strstr(why, "mode 0644"));
    assert_int_equal(platform_token(p, "nope", 0, unix0, out, sizeof out, why, sizeof why),
                     AL_E_NOENT);
    platforms_clear(p);
    free(p);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_token_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
