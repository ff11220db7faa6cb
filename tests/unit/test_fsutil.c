/*
 * Unit tests for fsutil_replace_prefix: the file under the name holds the
 * prefix and nothing else, a writer of the old file no longer reaches the
 * name, and what cannot be replaced (shorter, not a regular file, a
 * symlink, missing) is refused with the file left as it was and no
 * temporary file left behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "fsutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_all(int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void read_back(const char *path, char *buf, size_t cap)
{
    ssize_t n = fsutil_read(path, buf, cap);
    assert_true(n >= 0);
    if (n <= 0)
        buf[0] = 0;
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_replace_prefix(void **state)
{
    (void)state;
    char dir[] = "/tmp/airlock-fsutil-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], buf[256], err[256];
    (void)snprintf(path, sizeof path, "%s/rec.cast", dir);
    int old = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(old >= 0);
    write_all(old, "header\nline 1\nline 2 (not durable)");
    assert_int_equal(fsutil_replace_prefix(path, 14, err, sizeof err), AL_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "header\nline 1\n");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* the old writer goes on: none of it reaches the name */
    write_all(old, "stale owner's flush\n");
    close(old);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "header\nline 1\n");
    assert_int_equal(entries(dir), 1);
    /* the whole file, and nothing */
    assert_int_equal(fsutil_replace_prefix(path, 14, err, sizeof err), AL_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "header\nline 1\n");
    assert_int_equal(fsutil_replace_prefix(path, 0, err, sizeof err), AL_OK);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 0);
    unlink(path);
    rmdir(dir);
}

static void test_replace_prefix_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/airlock-fsutil-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], link[256], sub[256], buf[256], err[256] = "";
    (void)snprintf(path, sizeof path, "%s/rec.cast", dir);
    (void)snprintf(link, sizeof link, "%s/link.cast", dir);
    (void)snprintf(sub, sizeof sub, "%s/dir.cast", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    write_all(fd, "short\n");
    close(fd);
    /* shorter than the size to keep: refused, the file as it was */
    assert_int_equal(fsutil_replace_prefix(path, 100, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "shorter"));
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "short\n");
    /* a symlink is not followed; a directory is not a regular file */
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(fsutil_replace_prefix(link, 1, err, sizeof err), AL_E_IO);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(fsutil_replace_prefix(sub, 0, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "not a regular file"));
    /* missing */
    unlink(path);
    assert_int_equal(fsutil_replace_prefix(path, 0, err, sizeof err), AL_E_IO);
    /* nothing but the link and the directory: no temporary file left */
    assert_int_equal(entries(dir), 2);
    unlink(link);
    rmdir(sub);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_prefix),
        cmocka_unit_test(test_replace_prefix_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
