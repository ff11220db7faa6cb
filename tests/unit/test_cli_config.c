/*
 * Tests of the CLI's configuration (src/cli/cli_config.c): URL parsing
 * (schemes, ports, prefixes, what is refused), and where the URL and key
 * come from (flag, then environment, then the config file), the file's
 * syntax and its limits. The environment is set per test; the file lives
 * in a temporary XDG_CONFIG_HOME.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"
#include "cli_config.h"
#include "testutil.h"

static char home[256];

static void write_config(const char *text)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/airlock", home);
    (void)mkdir(path, 0700);
    (void)snprintf(path, sizeof path, "%s/airlock/config", home);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void remove_config(void)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/airlock/config", home);
    (void)unlink(path);
    (void)rmdir(path); /* when a test made it a directory */
}

static int setup(void **state)
{
    (void)state;
    (void)snprintf(home, sizeof home, "/tmp/airlock-test-cli-config-XXXXXX");
    if (!mkdtemp(home))
        return -1;
    setenv("XDG_CONFIG_HOME", home, 1);
    unsetenv("AIRLOCK_URL");
    unsetenv("AIRLOCK_API_KEY");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove_config();
    char path[512];
    (void)snprintf(path, sizeof path, "%s/airlock", home);
    (void)rmdir(path);
    (void)rmdir(home);
    return 0;
}

static void test_url_forms(void **state)
{
    (void)state;
    struct cli_config c;
    char why[256];
    memset(&c, 0, sizeof c);
    assert_int_equal(cli_config_parse_url(&c, "http://example.org", why, sizeof why), AL_OK);
    assert_string_equal(c.host, "example.org");
    assert_int_equal(c.port, 80);
    assert_int_equal(c.tls, 0);
    assert_string_equal(c.prefix, "");
    assert_int_equal(cli_config_parse_url(&c, "https://h:8443/air/lock//", why, sizeof why), AL_OK);
    assert_string_equal(c.host, "h");
    assert_int_equal(c.port, 8443);
    assert_int_equal(c.tls, 1);
    assert_string_equal(c.prefix, "/air/lock");
    assert_string_equal(c.url, "https://h:8443/air/lock//");
    assert_int_equal(cli_config_parse_url(&c, "https://127.0.0.1", why, sizeof why), AL_OK);
    assert_int_equal(c.port, 443);
    assert_int_equal(cli_config_parse_url(&c, "http://h:1/", why, sizeof why), AL_OK);
    assert_int_equal(c.port, 1);
    assert_string_equal(c.prefix, "");
    assert_int_equal(cli_config_parse_url(&c, "http://h:65535", why, sizeof why), AL_OK);
    assert_int_equal(c.port, 65535);
}

static void test_url_refused(void **state)
{
    (void)state;
    struct cli_config c;
    char why[256];
    static const char *const bad[] = {
        "ftp://h",        "h:80",        "http://",      "http://:80", "http://h:0", "http://h:",
        "http://h:65536", "http://h:8x", "http://h?x=1", "http://h#f", "",           "HTTP://h",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&c, 0, sizeof c);
        why[0] = 0;
        assert_int_equal(cli_config_parse_url(&c, bad[i], why, sizeof why), AL_E_INVAL);
        assert_true(why[0] != 0);
    }
    char longurl[CLI_URL_MAX + 16];
    memcpy(longurl, "http://h/", 9);
    memset(longurl + 9, 'a', sizeof longurl - 10);
    longurl[sizeof longurl - 1] = 0;
    assert_int_equal(cli_config_parse_url(&c, longurl, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "too long"));
    char longhost[CLI_HOST_MAX + 16];
    memcpy(longhost, "http://", 7);
    memset(longhost + 7, 'h', sizeof longhost - 8);
    longhost[sizeof longhost - 1] = 0;
    assert_int_equal(cli_config_parse_url(&c, longhost, why, sizeof why), AL_E_INVAL);
}

static void test_sources_order(void **state)
{
    (void)state;
    struct cli_config c;
    char why[256];
    write_config("# a comment\n\n  url = http://file:1/p  \r\nkey=file-key\n");
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_OK);
    assert_string_equal(c.host, "file");
    assert_string_equal(c.prefix, "/p");
    assert_string_equal(c.key, "file-key");
    setenv("AIRLOCK_URL", "http://env:2", 1);
    setenv("AIRLOCK_API_KEY", "env-key", 1);
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_OK);
    assert_string_equal(c.host, "env");
    assert_string_equal(c.key, "env-key");
    assert_int_equal(cli_config_load(&c, "http://flag:3", "flag-key", why, sizeof why), AL_OK);
    assert_string_equal(c.host, "flag");
    assert_int_equal(c.port, 3);
    assert_string_equal(c.key, "flag-key");
    /* an empty environment value does not count */
    setenv("AIRLOCK_URL", "", 1);
    setenv("AIRLOCK_API_KEY", "", 1);
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_OK);
    assert_string_equal(c.host, "file");
    assert_string_equal(c.key, "file-key");
    unsetenv("AIRLOCK_URL");
    unsetenv("AIRLOCK_API_KEY");
    remove_config();
}

static void test_no_url_and_home(void **state)
{
    (void)state;
    struct cli_config c;
    char why[512];
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "no server address"));
    assert_non_null(strstr(why, home));
    /* no XDG_CONFIG_HOME: ~/.config/airlock/config */
    setenv("XDG_CONFIG_HOME", "", 1);
    setenv("HOME", "/nonexistent-home", 1);
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "/nonexistent-home/.config/airlock/config"));
    assert_int_equal(cli_config_load(&c, "http://h", NULL, why, sizeof why), AL_OK);
    assert_string_equal(c.key, "");
    setenv("XDG_CONFIG_HOME", home, 1);
}

static void test_file_errors(void **state)
{
    (void)state;
    struct cli_config c;
    char why[512];
    write_config("url=http://h\nbogus=1\n");
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "line 2"));
    write_config("url http://h\n");
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "line 1"));
    /* the file is parsed even when a flag gives the value: a broken file is
     * reported rather than silently ignored */
    assert_int_equal(cli_config_load(&c, "http://h", "k", why, sizeof why), AL_E_INVAL);
    write_config("url=ftp://h\n");
    assert_int_equal(cli_config_load(&c, NULL, NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "http://"));
    /* a value longer than its buffer */
    char *big = malloc(CLI_KEY_MAX + 32);
    assert_non_null(big);
    memcpy(big, "key=", 4);
    memset(big + 4, 'k', CLI_KEY_MAX + 10);
    memcpy(big + 4 + CLI_KEY_MAX + 10, "\n", 2);
    write_config(big);
    free(big);
    assert_int_equal(cli_config_load(&c, "http://h", NULL, why, sizeof why), AL_E_INVAL);
    remove_config();
}

static void test_file_limit(void **state)
{
    (void)state;
    struct cli_config c;
    char why[512];
    /* exactly CLI_CONFIG_FILE_MAX - 1 bytes of comment: read; one more: too big */
    char *text = malloc(CLI_CONFIG_FILE_MAX + 1);
    assert_non_null(text);
    memset(text, ' ', CLI_CONFIG_FILE_MAX);
    text[0] = '#';
    text[CLI_CONFIG_FILE_MAX - 2] = '\n';
    text[CLI_CONFIG_FILE_MAX - 1] = 0;
    write_config(text);
    assert_int_equal(cli_config_load(&c, "http://h", NULL, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "larger than"));
    text[CLI_CONFIG_FILE_MAX - 2] = 0;
    write_config(text);
    assert_int_equal(cli_config_load(&c, "http://h", NULL, why, sizeof why), AL_OK);
    free(text);
    remove_config();
}

static void test_unreadable_file(void **state)
{
    (void)state;
    struct cli_config c;
    char why[512];
    char path[512];
    (void)snprintf(path, sizeof path, "%s/airlock", home);
    (void)mkdir(path, 0700);
    (void)snprintf(path, sizeof path, "%s/airlock/config", home);
    assert_int_equal(mkdir(path, 0700), 0); /* opens, but cannot be read */
    assert_int_equal(cli_config_load(&c, "http://h", NULL, why, sizeof why), AL_E_IO);
    assert_non_null(strstr(why, "cannot read"));
    remove_config();
}

static void test_bad_keys(void **state)
{
    (void)state;
    struct cli_config c;
    char why[512];
    assert_int_equal(cli_config_load(&c, "http://h", "a b", why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "space or control"));
    assert_int_equal(cli_config_load(&c, "http://h", "a\x7f", why, sizeof why), AL_E_INVAL);
    char key[CLI_KEY_MAX + 1];
    memset(key, 'k', CLI_KEY_MAX);
    key[CLI_KEY_MAX] = 0;
    assert_int_equal(cli_config_load(&c, "http://h", key, why, sizeof why), AL_E_INVAL);
    key[CLI_KEY_MAX - 1] = 0; /* the longest that fits */
    assert_int_equal(cli_config_load(&c, "http://h", key, why, sizeof why), AL_OK);
    assert_int_equal(strlen(c.key), CLI_KEY_MAX - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_forms),       cmocka_unit_test(test_url_refused),
        cmocka_unit_test(test_sources_order),   cmocka_unit_test(test_no_url_and_home),
        cmocka_unit_test(test_file_errors),     cmocka_unit_test(test_file_limit),
        cmocka_unit_test(test_unreadable_file), cmocka_unit_test(test_bad_keys),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
