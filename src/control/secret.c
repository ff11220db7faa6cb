/*
 * secret: see secret.h. Both readers keep what they read only in the
 * caller's buffer and wipe it on every failure.
 */
#include "secret.h"

#include "al_err.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int secret_read_file(const char *path, char *out, size_t cap, char *why, size_t whycap)
{
    if (!path || !out || cap == 0)
        return AL_E_INVAL;
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        al_errf(why, whycap, "cannot open secret file %s: %s", path, strerror(e));
        return al_err_from_errno(e);
    }
    struct stat st;
    int rc = AL_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        al_errf(why, whycap, "secret file %s is not a regular file", path);
        rc = AL_E_IO;
    } else if ((st.st_mode & 077) != 0) {
        al_errf(why, whycap,
                "secret file %s has mode %04o: group or others may read it; refusing to use "
                "it (chmod 600 it, and replace the secret if it may have leaked)",
                path, (unsigned)(st.st_mode & 07777));
        rc = AL_E_PERM;
    }
    size_t len = 0;
    while (rc == AL_OK) {
        if (len + 1 >= cap) {
            al_errf(why, whycap, "secret file %s is larger than %zu bytes", path, cap - 1);
            rc = AL_E_TOOBIG;
            break;
        }
        ssize_t r = read(fd, out + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            al_errf(why, whycap, "cannot read secret file %s: %s", path, strerror(errno));
            rc = AL_E_IO;
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (rc == AL_OK) {
        if (len > 0 && out[len - 1] == '\n')
            len--;
        if (len > 0 && out[len - 1] == '\r')
            len--;
        out[len] = '\0';
        if (len == 0 || memchr(out, '\0', len) || memchr(out, '\n', len) ||
            memchr(out, '\r', len)) {
            al_errf(why, whycap, "secret file %s must hold one non-empty line", path);
            rc = AL_E_FORMAT;
        }
    }
    if (rc != AL_OK)
        memset(out, 0, cap);
    return rc;
}

int secret_run_command(const char *cmd, char *out, size_t cap, const char *who, const char *what,
                       char *why, size_t wcap)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        al_errf(why, wcap, "%s: cannot run its %s: %s", who, what, strerror(errno));
        return AL_E_IO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* its own process group, so that a timeout ends all it started */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    pid_t pid;
    int e = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        al_errf(why, wcap, "%s: cannot run its %s: %s", who, what, strerror(e));
        return AL_E_IO;
    }
    size_t len = 0;
    int rc = AL_OK;
    uint64_t end = now_ms() + SECRET_COMMAND_TIMEOUT_MS;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= end) {
            rc = AL_E_TIMEOUT;
            break;
        }
        struct pollfd pf = {fds[0], POLLIN, 0};
        int k = poll(&pf, 1, (int)(end - now));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            rc = k == 0 ? AL_E_TIMEOUT : AL_E_IO;
            break;
        }
        if (len + 1 >= cap) {
            rc = AL_E_TOOBIG;
            break;
        }
        ssize_t r = read(fds[0], out + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? AL_E_IO : AL_OK;
            break;
        }
        len += (size_t)r;
    }
    close(fds[0]);
    /* its exit, within what is left of the time (it may have closed its
     * output and gone on running) */
    int st = 0;
    for (;;) {
        pid_t w = rc == AL_OK ? waitpid(pid, &st, WNOHANG) : 0;
        if (w == pid || (w < 0 && errno != EINTR)) {
            kill(-pid, SIGKILL); /* what it left running in its group */
            break;
        }
        if (rc != AL_OK || now_ms() >= end) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            if (rc == AL_OK)
                rc = AL_E_TIMEOUT;
            break;
        }
        usleep(1000);
    }
    if (rc == AL_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = AL_E_IO;
    out[len] = '\0';
    size_t line = strcspn(out, "\r\n");
    if (rc == AL_OK && line == 0)
        rc = AL_E_FORMAT;
    out[line] = '\0';
    if (rc != AL_OK) {
        OPENSSL_cleanse(out, cap);
        static const struct {
            int rc;
            const char *what;
        } whats[] = {
            {AL_E_TIMEOUT, "did not finish in time"},
            {AL_E_TOOBIG, "printed too much"},
            {AL_E_FORMAT, "printed nothing"},
            {AL_E_IO, "failed"},
        };
        const char *how = "failed";
        for (size_t i = 0; i < sizeof whats / sizeof whats[0]; i++)
            if (whats[i].rc == rc)
                how = whats[i].what;
        al_errf(why, wcap, "%s: its %s %s", who, what, how);
    }
    return rc;
}
