/*
 * Unit tests for secret: the secret file's rules (mode 0600 or stricter,
 * no symlink, one non-empty line, a size limit) and a command's (its first
 * line, a failure, nothing printed, too much), with reasons that name the
 * holder and never hold the secret.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "secret.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_TEST_MAX 4096

static void write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static void test_secret_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/airlock-secret-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], link[256], out[SECRET_TEST_MAX + 1], why[512];
    snprintf(path, sizeof path, "%s/key", dir);
    snprintf(link, sizeof link, "%s/link", dir);

    write_file(path, "sk-ant-secret-1\n", 0600);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_OK);
    assert_string_equal(out, "sk-ant-secret-1");

    write_file(path, "sk-ant-secret-2", 0400);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_OK);
    assert_string_equal(out, "sk-ant-secret-2");

    write_file(path, "sk-ant-secret-3\n", 0640);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_E_PERM);
    assert_non_null(strstr(why, "mode 0640"));
    assert_null(strstr(why, "sk-ant"));
    assert_string_equal(out, "");

    write_file(path, "line1\nline2\n", 0600);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_E_FORMAT);
    assert_null(strstr(why, "line1"));
    write_file(path, "\n", 0600);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_E_FORMAT);

    write_file(path, "k", 0600);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(secret_read_file(link, out, sizeof out, why, sizeof why), AL_E_PERM);

    char *big = malloc(SECRET_TEST_MAX + 10);
    assert_non_null(big);
    memset(big, 'a', SECRET_TEST_MAX + 9);
    big[SECRET_TEST_MAX + 9] = '\0';
    write_file(path, big, 0600);
    free(big);
    assert_int_equal(secret_read_file(path, out, sizeof out, why, sizeof why), AL_E_TOOBIG);

    assert_int_equal(secret_read_file("/nonexistent/k", out, sizeof out, why, sizeof why),
                     AL_E_NOENT);
    unlink(link);
    unlink(path);
    rmdir(dir);
}

static void test_command(void **state)
{
    (void)state;
    char out[64], why[256];
    assert_int_equal(secret_run_command("printf 'tok-1\\nsecond\\n'", out, sizeof out,
                                        "platform aca", "token-command", why, sizeof why),
                     AL_OK);
    assert_string_equal(out, "tok-1");
    assert_int_equal(secret_run_command("echo tok-2; exit 3", out, sizeof out, "platform aca",
                                        "token-command", why, sizeof why),
                     AL_E_IO);
    assert_string_equal(out, "");
    assert_string_equal(why, "platform aca: its token-command failed");
    assert_int_equal(secret_run_command("true", out, sizeof out, "upstream gh", "secret-command",
                                        why, sizeof why),
                     AL_E_FORMAT);
    assert_string_equal(why, "upstream gh: its secret-command printed nothing");
    assert_int_equal(secret_run_command("head -c 200 /dev/zero | tr '\\0' a", out, sizeof out,
                                        "upstream gh", "secret-command", why, sizeof why),
                     AL_E_TOOBIG);
    assert_null(strstr(why, "aaa"));
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secret_file),
        cmocka_unit_test(test_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
