/*
 * fsutil: small file-system helpers (fsutil.h).
 */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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

/* fsync the directory that holds path. */
static int sync_dir_of(const char *path)
{
    char dir[FSUTIL_PATH_MAX];
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path)
                  : snprintf(dir, sizeof dir, ".");
    if (n < 0 || (size_t)n >= sizeof dir)
        return AL_E_TOOBIG;
    if (!dir[0])
        (void)snprintf(dir, sizeof dir, "/");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return AL_E_IO;
    int rc = fsync(dfd) == 0 ? AL_OK : AL_E_IO;
    if (close(dfd) != 0)
        rc = AL_E_IO;
    return rc;
}

/* Copy the first size bytes of in to out (in the kernel where it can). */
static int copy_prefix(int in, int out, off_t size)
{
    off_t done = 0;
    while (done < size) {
        off_t from = done;
        ssize_t n = copy_file_range(in, &from, out, NULL, (size_t)(size - done), 0);
        if (n > 0) {
            done += n;
            continue;
        }
        if (n == 0 || (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP))
            return n == 0 ? AL_E_FORMAT : AL_E_IO; /* shrank under us, or failed */
        /* no in-kernel copy between these files: read and write */
        char buf[65536];
        size_t want = size - done < (off_t)sizeof buf ? (size_t)(size - done) : sizeof buf;
        ssize_t r = pread(in, buf, want, done);
        if (r <= 0)
            return r == 0 ? AL_E_FORMAT : AL_E_IO;
        for (ssize_t w = 0; w < r;) {
            ssize_t m = write(out, buf + w, (size_t)(r - w));
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return AL_E_IO;
            w += m;
        }
        done += r;
    }
    return AL_OK;
}

int fsutil_replace_prefix(const char *path, off_t size, char *err, size_t cap)
{
    char tmp[FSUTIL_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.new", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        (void)snprintf(err, cap, "%s: path too long", path);
        return AL_E_TOOBIG;
    }
    int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0) {
        (void)snprintf(err, cap, "%s: %s", path, strerror(errno));
        return AL_E_IO;
    }
    struct stat sb;
    int rc = AL_OK;
    if (fstat(in, &sb) != 0) {
        (void)snprintf(err, cap, "%s: %s", path, strerror(errno));
        rc = AL_E_IO;
    } else if (!S_ISREG(sb.st_mode) || sb.st_size < size) {
        (void)snprintf(err, cap, "%s: %s", path,
                       S_ISREG(sb.st_mode) ? "shorter than the size to keep"
                                           : "not a regular file");
        rc = AL_E_FORMAT;
    }
    int out = -1;
    if (rc == AL_OK) {
        (void)unlink(tmp); /* one left by an earlier run of this pid */
        out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0) {
            (void)snprintf(err, cap, "%s: %s", tmp, strerror(errno));
            rc = AL_E_IO;
        }
    }
    if (rc == AL_OK && (rc = copy_prefix(in, out, size)) != AL_OK)
        (void)snprintf(err, cap, "copying %s: %s", path,
                       rc == AL_E_FORMAT ? "it shrank while being copied" : strerror(errno));
    if (rc == AL_OK && fsync(out) != 0) {
        (void)snprintf(err, cap, "%s: fsync: %s", tmp, strerror(errno));
        rc = AL_E_IO;
    }
    if (out >= 0 && close(out) != 0 && rc == AL_OK) {
        (void)snprintf(err, cap, "%s: %s", tmp, strerror(errno));
        rc = AL_E_IO;
    }
    (void)close(in); /* read only */
    if (rc == AL_OK && rename(tmp, path) != 0) {
        (void)snprintf(err, cap, "renaming %s: %s", tmp, strerror(errno));
        rc = AL_E_IO;
    }
    if (rc != AL_OK) {
        if (out >= 0)
            (void)unlink(tmp); /* best effort: the error is rc */
        return rc;
    }
    if (sync_dir_of(path) != AL_OK) {
        (void)snprintf(err, cap, "%s: syncing its directory failed", path);
        return AL_E_IO;
    }
    return AL_OK;
}
