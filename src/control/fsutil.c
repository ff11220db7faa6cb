/*
 * fsutil: small file-system helpers (fsutil.h).
 */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"

ssize_t fsutil_read(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    (void)close(fd);
    if (n <= 0)
        return n;
    buf[n] = 0;
    return n;
}

int fsutil_mkdir_p(const char *path, mode_t mode)
{
    char tmp[FSUTIL_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s", path);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return AL_E_TOOBIG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return AL_E_IO;
        *p = '/';
    }
    return mkdir(tmp, mode) != 0 && errno != EEXIST ? AL_E_IO : AL_OK;
}

int fsutil_copy(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rbe");
    FILE *o = in ? fopen(dst, "wbe") : NULL;
    char buf[8192];
    size_t n;
    int ok = in && o;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, o) == n;
    if (in)
        (void)fclose(in);
    if (o && fclose(o) != 0)
        ok = 0;
    return ok ? AL_OK : AL_E_IO;
}
