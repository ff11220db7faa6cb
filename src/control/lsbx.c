/*
 * lsbx: local sandboxes' runners under bubblewrap (lsbx.h).
 *
 * The bubblewrap command is built from tables: the namespaces and
 * settings (bwrap_head), the system directories and links shown
 * read-only, then the sandbox's own directories. The runner's output
 * arrives on a pipe and is logged line by line (al_vlog escapes it).
 */
#include "lsbx.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "fsutil.h"

#define LSBX_PATH_MAX 4096
#define LSBX_CHECK_MS 10000 /* the start-up check of bubblewrap */
#define LSBX_WHY_MAX 512
#define LSBX_FD_CGROUP 3        /* and up: cgroup.procs, one per hierarchy, for the runner */
#define LSBX_TRAVERSE_MODE 0711 /* as root: the data directory, sandboxes/ and runner/ */
#define LSBX_SBX_DIR "sandboxes"
#define LSBX_RUNNER_DIR "runner" /* as root: a copy of the runner the sandbox user can run */
#define LSBX_STR2(x) #x
#define LSBX_STR(x) LSBX_STR2(x)

struct lsbx {
    struct lsbx_config cfg;
    char runner_bin[LSBX_PATH_MAX];
    char runner_copy[LSBX_PATH_MAX]; /* as root: DATA/runner/airlock-runner */
    char fwd_bin[LSBX_PATH_MAX];     /* airlock-proxy-fwd next to the runner ("": none) */
    char fwd_copy[LSBX_PATH_MAX];    /* as root: DATA/runner/airlock-proxy-fwd */
    char data_dir[LSBX_PATH_MAX];
    char user[64];
    char why_not[LSBX_WHY_MAX]; /* empty: sandboxes can start */
    uid_t uid;                  /* the sandbox's host uid and gid */
    gid_t gid;
    int as_root;             /* airlockd is root: drop to uid/gid for the sandbox */
    char tag[17];            /* cgroup names: a hash of the data directory */
    struct lsbx_proc *procs; /* started and not yet gone */
};

struct lsbx_proc {
    struct lsbx *l;
    struct lsbx_proc *next;
    uv_process_t proc;
    uv_pipe_t out;
    int open_handles; /* freed when both are closed */
    int pipe_open;
    lsbx_exit_fn *exit_cb;
    void *data;
    char id[CG_NAME_MAX + 1];
    char line[LSBX_LINE_MAX + 1];
    char rbuf[LSBX_LINE_MAX]; /* what one read brings */
    size_t nline;
    int cut; /* the current line went past LSBX_LINE_MAX */
};

/* ---- logging the runner's lines ----------------------------------------- */

static void say(struct lsbx *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct lsbx *l, int level, const char *fmt, ...)
{
    if (!l->cfg.log)
        return;
    char buf[LSBX_LINE_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    l->cfg.log(l->cfg.log_ud, level, buf);
}

/* One line of the runner's output: al_vlog escapes what it writes, so the
 * line cannot forge another; a NUL ends what is shown of it. */
static void flush_line(struct lsbx_proc *p)
{
    size_t n = strnlen(p->line, p->nline);
    say(p->l, 1, "sandbox %s: runner: %.*s%s%s", p->id, (int)n, p->line,
        n < p->nline ? " [NUL]" : "", p->cut ? " [cut]" : "");
    p->nline = 0;
    p->cut = 0;
}

static void proc_release(struct lsbx_proc *p)
{
    if (--p->open_handles > 0)
        return;
    free(p);
}

static void on_handle_closed(uv_handle_t *h)
{
    proc_release(h->data);
}

static void unlink_proc(struct lsbx_proc *p)
{
    if (!p->l)
        return;
    for (struct lsbx_proc **pp = &p->l->procs; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
}

static void close_pipe(struct lsbx_proc *p)
{
    if (!p->pipe_open)
        return;
    p->pipe_open = 0;
    if (p->nline && p->l)
        flush_line(p);
    uv_close((uv_handle_t *)&p->out, on_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    (void)want;
    struct lsbx_proc *p = h->data;
    buf->base = p->rbuf;
    buf->len = sizeof p->rbuf;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct lsbx_proc *p = s->data;
    if (n < 0) {
        close_pipe(p);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = buf->base[i];
        if (c == '\n') {
            if (p->l)
                flush_line(p);
            p->nline = 0;
            p->cut = 0;
        } else if (p->nline < LSBX_LINE_MAX) {
            p->line[p->nline++] = c;
        } else {
            p->cut = 1;
        }
    }
}

static void on_exit_(uv_process_t *h, int64_t status, int signo)
{
    struct lsbx_proc *p = h->data;
    char cg[CG_NAME_MAX + 1];
    /* its agents died with it (each jail dies with its wrapper): empty groups go */
    if (p->l && !p->l->cfg.unsafe && lsbx_cgroup_name(p->l, p->id, cg, sizeof cg) == AL_OK)
        cg_remove(cg);
    unlink_proc(p);
    if (p->exit_cb)
        p->exit_cb(p->data, status, signo);
    p->exit_cb = NULL;
    uv_close((uv_handle_t *)&p->proc, on_handle_closed);
}

void lsbx_proc_forget(struct lsbx_proc *p)
{
    if (!p)
        return;
    unlink_proc(p);
    p->exit_cb = NULL;
    p->l = NULL;
    close_pipe(p);
    if (!uv_is_closing((uv_handle_t *)&p->proc))
        uv_close((uv_handle_t *)&p->proc, on_handle_closed);
}

/* ---- the host check --------------------------------------------------------- */

static long read_long(const char *path, long dflt)
{
    char buf[32];
    if (fsutil_read(path, buf, sizeof buf) <= 0)
        return dflt;
    return strtol(buf, NULL, 10);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run a user namespace the way lsbx_start will (as the sandbox user);
 * 0, or -1 with why (what bubblewrap said). */
static int try_bwrap(struct lsbx *l, char *why, size_t cap)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        al_errf(why, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        (void)dup2(ep[1], 2);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            (void)dup2(devnull, 0);
            (void)dup2(devnull, 1);
        }
        if (l->as_root && (setgroups(0, NULL) != 0 || setgid(l->gid) != 0 || setuid(l->uid) != 0))
            _exit(126);
        execl(LSBX_BWRAP, "bwrap", "--unshare-user", "--uid", LSBX_STR(LSBX_RUNNER_UID),
              "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "true", (char *)NULL);
        _exit(127);
    }
    (void)close(ep[1]);
    if (pid < 0) {
        (void)close(ep[0]);
        al_errf(why, cap, "fork: %s", strerror(errno));
        return -1;
    }
    char msg[256] = "";
    size_t n = 0;
    int64_t deadline = now_ms() + LSBX_CHECK_MS;
    int status = 0;
    for (;;) {
        struct pollfd pfd = {.fd = ep[0], .events = POLLIN};
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            break;
        if (poll(&pfd, 1, left) > 0) {
            ssize_t m = read(ep[0], msg + n, sizeof msg - 1 - n);
            if (m <= 0)
                break;
            n += (size_t)m;
            if (n >= sizeof msg - 1)
                break;
        }
    }
    msg[n] = 0;
    (void)close(ep[0]);
    for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++)
        (void)poll(NULL, 0, 10);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
        al_errf(why, cap, "bubblewrap did not answer in time");
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    msg[strcspn(msg, "\n")] = 0;
    al_errf(why, cap, "bubblewrap cannot make a user namespace as %s: %s", l->user,
            msg[0]                                            ? msg
            : WIFEXITED(status) && WEXITSTATUS(status) == 126 ? "cannot switch user"
                                                              : "it failed");
    return -1;
}

/* The directories every sandbox sees read-only: the data directory must
 * not be inside one of them. */
static const char *const sys_dirs[] = {"/usr", "/etc", "/opt", NULL};
static const char *const sys_links[] = {"/bin",   "/sbin",   "/lib", "/lib32",
                                        "/lib64", "/libx32", NULL};

/* Whether the sandbox user may search (traverse) every directory from /
 * down to dir; the first one it may not goes to bad. */
static int reachable(const struct lsbx *l, const char *dir, char *bad, size_t cap)
{
    char p[LSBX_PATH_MAX];
    (void)snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1;; c++) {
        int end = !*c;
        if (*c == '/' || end) {
            char keep = *c;
            *c = 0;
            struct stat st;
            int ok = stat(p, &st) == 0 &&
                     ((st.st_mode & S_IXOTH) || (st.st_uid == l->uid && (st.st_mode & S_IXUSR)) ||
                      (st.st_gid == l->gid && (st.st_mode & S_IXGRP)));
            if (!ok) {
                (void)snprintf(bad, cap, "%s", p);
                return 0;
            }
            *c = keep;
        }
        if (end)
            return 1;
    }
}

/* The runner where the sandbox user can run it: a hard link when the
 * binary is on the same file system and everyone may run it (nothing is
 * written), else a copy. Running runners keep the file they started
 * from: rename never changes an open file. 0 or an errno. */
static int place_runner(const char *bin, const char *dst)
{
    char tmp[LSBX_PATH_MAX + 8];
    (void)snprintf(tmp, sizeof tmp, "%s.new", dst);
    (void)unlink(tmp);
    struct stat st;
    if (stat(bin, &st) == 0 && (st.st_mode & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH) &&
        link(bin, tmp) == 0)
        return rename(tmp, dst) == 0 ? 0 : errno;
    int in = open(bin, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return errno;
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
    int e = out < 0 ? errno : 0;
    char buf[65536];
    ssize_t n;
    while (!e && (n = read(in, buf, sizeof buf)) != 0) {
        ssize_t w = n > 0 ? write(out, buf, (size_t)n) : -1;
        if (n < 0 || w != n)
            e = n < 0 || w < 0 ? errno : EIO;
    }
    (void)close(in);
    if (out >= 0 && close(out) != 0 && !e)
        e = errno;
    if (!e && fchmodat(AT_FDCWD, tmp, 0755, 0) != 0)
        e = errno;
    if (!e && rename(tmp, dst) != 0)
        e = errno;
    if (e)
        (void)unlink(tmp);
    return e;
}

/* As root: the directories leading to the sandboxes become searchable
 * (never listable, nor readable: every file of the data directory is
 * 0600 and its other directories 0700), and the runner is copied where
 * the sandbox user can run it. */
static int prepare_root(struct lsbx *l, const char *real, char *w, size_t cap)
{
    char d[LSBX_PATH_MAX], bad[LSBX_PATH_MAX];
    static const char *const dirs[] = {"", "/" LSBX_SBX_DIR, "/" LSBX_RUNNER_DIR, NULL};
    for (int i = 0; dirs[i]; i++) {
        (void)snprintf(d, sizeof d, "%s%s", real, dirs[i]);
        if ((mkdir(d, LSBX_TRAVERSE_MODE) != 0 && errno != EEXIST) ||
            chmod(d, LSBX_TRAVERSE_MODE) != 0) {
            al_errf(w, cap, "cannot prepare %s for sandboxes: %s", d, strerror(errno));
            return -1;
        }
    }
    if (!reachable(l, real, bad, sizeof bad)) {
        al_errf(w, cap,
                "the sandbox user '%s' cannot reach the data directory %s: %s is not "
                "searchable by it (chmod o+x it, or choose a data directory under a path every "
                "user can traverse)",
                l->user, real, bad);
        return -1;
    }
    (void)snprintf(l->runner_copy, sizeof l->runner_copy, "%.3900s/%s/airlock-runner", real,
                   LSBX_RUNNER_DIR);
    int e = place_runner(l->runner_bin, l->runner_copy);
    if (e != 0) {
        al_errf(w, cap, "cannot place the runner %s at %s: %s", l->runner_bin, l->runner_copy,
                strerror(e));
        l->runner_copy[0] = 0;
        return -1;
    }
    if (l->fwd_bin[0]) {
        (void)snprintf(l->fwd_copy, sizeof l->fwd_copy, "%.3900s/%s/%s", real, LSBX_RUNNER_DIR,
                       LSBX_FWD_NAME);
        e = place_runner(l->fwd_bin, l->fwd_copy);
        if (e != 0) { /* sandboxes run; their agents with no network get no proxy */
            say(l, 0, "cannot place the proxy's forwarder %s at %s: %s", l->fwd_bin, l->fwd_copy,
                strerror(e));
            l->fwd_copy[0] = l->fwd_bin[0] = 0;
        }
    }
    return 0;
}

static void check_host(struct lsbx *l)
{
    char *w = l->why_not;
    size_t cap = sizeof l->why_not;
    if (access(LSBX_BWRAP, X_OK) != 0) {
        al_errf(w, cap, "bubblewrap (%s) is not installed (apt-get install bubblewrap)",
                LSBX_BWRAP);
        return;
    }
    if (read_long("/proc/sys/user/max_user_namespaces", 1) <= 0 ||
        read_long("/proc/sys/kernel/unprivileged_userns_clone", 1) <= 0) {
        al_errf(w, cap,
                "this kernel gives no user namespaces to unprivileged users "
                "(sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)");
        return;
    }
    if (l->as_root) {
        struct passwd *pw = getpwnam(l->user);
        if (!pw) {
            al_errf(w, cap,
                    "airlockd runs as root and there is no user '%s' to run sandboxes as "
                    "(useradd --system --no-create-home --shell /usr/sbin/nologin %s)",
                    l->user, l->user);
            return;
        }
        if (pw->pw_uid == 0 || pw->pw_gid == 0) {
            al_errf(w, cap, "the sandbox user '%s' must not be root", l->user);
            return;
        }
        l->uid = pw->pw_uid;
        l->gid = pw->pw_gid;
    }
    char real[LSBX_PATH_MAX];
    if (!realpath(l->data_dir, real)) {
        al_errf(w, cap, "data directory %s: %s", l->data_dir, strerror(errno));
        return;
    }
    for (int i = 0; sys_dirs[i]; i++) {
        size_t n = strlen(sys_dirs[i]);
        if (!strncmp(real, sys_dirs[i], n) && (real[n] == '/' || !real[n])) {
            al_errf(w, cap, "the data directory %s is inside %s, which every sandbox sees", real,
                    sys_dirs[i]);
            return;
        }
    }
    if (l->as_root && prepare_root(l, real, w, cap) != 0)
        return;
    char why[LSBX_WHY_MAX - 64];
    if (try_bwrap(l, why, sizeof why) != 0)
        al_errf(w, cap, "%s", why);
}

int lsbx_new(const struct lsbx_config *cfg, struct lsbx **out)
{
    struct lsbx *l = calloc(1, sizeof *l);
    if (!l)
        return AL_E_NOMEM;
    l->cfg = *cfg;
    (void)snprintf(l->runner_bin, sizeof l->runner_bin, "%s", cfg->runner_bin);
    (void)snprintf(l->data_dir, sizeof l->data_dir, "%s", cfg->data_dir);
    (void)snprintf(l->user, sizeof l->user, "%s", cfg->user ? cfg->user : LSBX_DEFAULT_USER);
    l->cfg.runner_bin = l->runner_bin;
    const char *slash = strrchr(l->runner_bin, '/');
    if (slash && slash > l->runner_bin) {
        int m = snprintf(l->fwd_bin, sizeof l->fwd_bin, "%.*s/%s", (int)(slash - l->runner_bin),
                         l->runner_bin, LSBX_FWD_NAME);
        if (m < 0 || (size_t)m >= sizeof l->fwd_bin || access(l->fwd_bin, X_OK) != 0)
            l->fwd_bin[0] = 0;
    }
    l->cfg.data_dir = l->data_dir;
    l->cfg.user = l->user;
    l->as_root = geteuid() == 0;
    l->uid = getuid();
    l->gid = getgid();
    /* FNV-1a of the data directory: two airlockds never share a group */
    char real[LSBX_PATH_MAX];
    if (realpath(l->data_dir, real))
        (void)snprintf(l->data_dir, sizeof l->data_dir, "%s", real);
    const char *d = l->data_dir;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64: offset basis, then the prime */
    for (const char *c = d; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    (void)snprintf(l->tag, sizeof l->tag, "%016llx", (unsigned long long)h);
    if (!cfg->unsafe)
        check_host(l);
    *out = l;
    return AL_OK;
}

void lsbx_free(struct lsbx *l)
{
    if (!l)
        return;
    while (l->procs)
        lsbx_proc_forget(l->procs);
    free(l);
}

int lsbx_can_forward(const struct lsbx *l)
{
    return !l->cfg.unsafe && l->fwd_bin[0];
}

const char *lsbx_unusable(const struct lsbx *l)
{
    return l->why_not[0] ? l->why_not : NULL;
}

void lsbx_owner(const struct lsbx *l, uid_t *uid, gid_t *gid)
{
    *uid = l->uid;
    *gid = l->gid;
}

int lsbx_cgroup_name(const struct lsbx *l, const char *id, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%.8s-%s", l->tag, id);
    return n > 0 && (size_t)n < cap && (size_t)n <= CG_NAME_MAX ? AL_OK : AL_E_TOOBIG;
}

/* ---- starting a runner ------------------------------------------------------ */

/* The sandbox's directories belong to the sandbox user. */
static int own(const struct lsbx *l, const char *path, char *why, size_t cap)
{
    if (!l->as_root)
        return AL_OK;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, l->uid, l->gid) != 0) {
        al_errf(why, cap, "cannot give %s to the sandbox user: %s", path, strerror(errno));
        if (fd >= 0)
            (void)close(fd);
        return AL_E_IO;
    }
    (void)close(fd);
    return AL_OK;
}

/* Namespaces and settings of the runner's sandbox. */
static const char *const bwrap_head[] = {LSBX_BWRAP,      "--unshare-user",
                                         "--uid",         LSBX_STR(LSBX_RUNNER_UID),
                                         "--gid",         LSBX_STR(LSBX_RUNNER_UID),
                                         "--unshare-pid", "--unshare-ipc",
                                         "--unshare-uts", "--unshare-cgroup-try",
                                         "--cap-drop",    "ALL",
                                         "--dev",         "/dev",
                                         "--proc",        "/proc",
                                         "--tmpfs",       "/tmp",
                                         "--dir",         "/airlock",
                                         "--setenv",      "HOME",
                                         "/workspace",    NULL};

struct argv_buf {
    const char *a[LSBX_MAX_ARGS];
    unsigned n;
    char links[8][128];
    char fdtxt[CG_MAX_FDS][24];
    char procs[32], data[32], nice[8];
};

static void push(struct argv_buf *b, const char *s)
{
    if (b->n + 1 < LSBX_MAX_ARGS)
        b->a[b->n++] = s;
}

static void build_argv(struct lsbx *l, const struct lsbx_spawn *s, struct argv_buf *b, size_t ncg,
                       char *run_jwks, char *run_tok, size_t path_cap)
{
    const char *bin = l->runner_bin;
    /* agents with no network: the proxy through the forwarder, or none */
    int fwd = s->proxy_listen && s->no_network && lsbx_can_forward(l);
    int proxy = s->proxy_listen && (!s->no_network || fwd);
    if (!l->cfg.unsafe) {
        for (unsigned i = 0; bwrap_head[i]; i++)
            push(b, bwrap_head[i]);
        push(b, "--hostname");
        push(b, s->id);
        for (unsigned i = 0; sys_dirs[i]; i++) {
            push(b, "--ro-bind-try");
            push(b, sys_dirs[i]);
            push(b, sys_dirs[i]);
        }
        _Static_assert(sizeof sys_links / sizeof sys_links[0] <=
                           sizeof b->links / sizeof b->links[0],
                       "a target for each link");
        for (unsigned i = 0; sys_links[i]; i++) {
            ssize_t m = readlink(sys_links[i], b->links[i], sizeof b->links[i] - 1);
            if (m > 0) {
                b->links[i][m] = 0;
                push(b, "--symlink");
                push(b, b->links[i]);
                push(b, sys_links[i]);
            } else {
                push(b, "--ro-bind-try");
                push(b, sys_links[i]);
                push(b, sys_links[i]);
            }
        }
        push(b, "--ro-bind");
        push(b, s->run_dir);
        push(b, "/airlock/run");
        push(b, "--ro-bind");
        push(b, l->runner_copy[0] ? l->runner_copy : l->runner_bin);
        push(b, "/airlock/airlock-runner");
        if (fwd) {
            push(b, "--ro-bind");
            push(b, l->fwd_copy[0] ? l->fwd_copy : l->fwd_bin);
            push(b, LSBX_FWD_PATH);
        }
        push(b, "--bind");
        push(b, s->work_dir);
        push(b, "/workspace");
        push(b, "--chdir");
        push(b, "/workspace");
        push(b, "--");
        bin = "/airlock/airlock-runner";
        (void)snprintf(run_jwks, path_cap, "/airlock/run/jwks.json");
        (void)snprintf(run_tok, path_cap, "/airlock/run/token");
    } else {
        (void)snprintf(run_jwks, path_cap, "%s/jwks.json", s->run_dir);
        (void)snprintf(run_tok, path_cap, "%s/token", s->run_dir);
    }
    push(b, bin);
    push(b, "--connect");
    push(b, s->url);
    push(b, "--identifier");
    push(b, s->id);
    push(b, "--jwks");
    push(b, run_jwks);
    push(b, "--token-file");
    push(b, run_tok);
    push(b, "--link-key-fd");
    push(b, "0");
    if (proxy) {
        push(b, "--proxy-listen");
        push(b, LSBX_PROXY_LISTEN);
    }
    if (fwd) {
        push(b, "--proxy-socket");
        push(b, LSBX_PROXY_SOCKET);
        push(b, LSBX_FWD_OPT);
        push(b, LSBX_FWD_PATH);
    }
    if (l->cfg.unsafe)
        return;
    push(b, "--agent-sandbox");
    push(b, "bwrap");
    push(b, "--workspace");
    push(b, "/workspace");
    if (s->no_network) {
        push(b, LSBX_NET_OPT);
        push(b, LSBX_NET_NONE);
    }
    for (size_t i = 0; i < ncg; i++) {
        (void)snprintf(b->fdtxt[i], sizeof b->fdtxt[i], "%u", (unsigned)(LSBX_FD_CGROUP + i));
        push(b, "--cgroup-fd");
        push(b, b->fdtxt[i]);
    }
    /* no control group: rlimits instead, which bound each process (memory)
     * or each sandbox's user namespace (processes), and a lower priority
     * for the CPU (docs/security.md, "Resource bounds") */
    if (!ncg && l->cfg.limits.pids) {
        (void)snprintf(b->procs, sizeof b->procs, "%llu", (unsigned long long)l->cfg.limits.pids);
        push(b, "--max-procs");
        push(b, b->procs);
    }
    if (!ncg && l->cfg.limits.memory_bytes) {
        (void)snprintf(b->data, sizeof b->data, "%llu",
                       (unsigned long long)l->cfg.limits.memory_bytes);
        push(b, "--max-data");
        push(b, b->data);
    }
    if (!ncg && l->cfg.limits.cpu_percent) {
        (void)snprintf(b->nice, sizeof b->nice, "%d", LSBX_FALLBACK_NICE);
        push(b, "--nice");
        push(b, b->nice);
    }
    b->a[b->n] = NULL;
}

int lsbx_start(struct lsbx *l, const struct lsbx_spawn *s, struct lsbx_proc **out, int *pid,
               char *why, size_t cap)
{
    *out = NULL;
    *pid = 0;
    if (l->why_not[0]) {
        al_errf(why, cap, "local sandboxes cannot run here: %s", l->why_not);
        return AL_E_PERM;
    }
    if (l->cfg.unsafe && s->no_network) {
        al_errf(why, cap, "its agents are to have no network, but --no-bwrap gives them no jail");
        return AL_E_PERM;
    }
    char sbdir[LSBX_PATH_MAX + CG_NAME_MAX + 16];
    (void)snprintf(sbdir, sizeof sbdir, "%s/%s/%.128s", l->data_dir, LSBX_SBX_DIR, s->id);
    int rc = own(l, sbdir, why, cap);
    if (rc == AL_OK)
        rc = own(l, s->run_dir, why, cap);
    if (rc == AL_OK)
        rc = own(l, s->work_dir, why, cap);
    char jwks[LSBX_PATH_MAX], tok[LSBX_PATH_MAX];
    (void)snprintf(jwks, sizeof jwks, "%s/jwks.json", s->run_dir);
    (void)snprintf(tok, sizeof tok, "%s/token", s->run_dir);
    if (rc == AL_OK)
        rc = own(l, jwks, why, cap);
    if (rc == AL_OK)
        rc = own(l, tok, why, cap);
    if (rc != AL_OK)
        return rc;

    int fds[CG_MAX_FDS], pipefd[2] = {-1, -1}, keyfd[2] = {-1, -1};
    size_t ncg = 0;
    char cgname[CG_NAME_MAX + 1], cgwhy[256] = "";
    if (!l->cfg.unsafe && lsbx_cgroup_name(l, s->id, cgname, sizeof cgname) == AL_OK &&
        cg_open(cgname, &l->cfg.limits, fds, &ncg, cgwhy, sizeof cgwhy) != AL_OK)
        say(l, 1,
            "sandbox %s: %s; bounding it with rlimits instead (processes, memory per process) "
            "and nice %d",
            s->id, cgwhy, LSBX_FALLBACK_NICE);
    struct lsbx_proc *p = NULL;
    if (uv_pipe(pipefd, UV_NONBLOCK_PIPE, 0) != 0 || uv_pipe(keyfd, 0, 0) != 0) {
        al_errf(why, cap, "cannot make the runner's pipes");
        rc = AL_E_IO;
        goto out;
    }
    /* the key goes through a pipe (never a file); it fits in the pipe's buffer */
    size_t klen = s->link_key ? strlen(s->link_key) : 0;
    int kok = write(keyfd[1], s->link_key ? s->link_key : "", klen) == (ssize_t)klen &&
              write(keyfd[1], "\n", 1) == 1;
    kok = close(keyfd[1]) == 0 && kok;
    keyfd[1] = -1;
    if (!kok) {
        al_errf(why, cap, "cannot hand the runner its key");
        rc = AL_E_IO;
        goto out;
    }
    p = calloc(1, sizeof *p);
    if (!p) {
        rc = AL_E_NOMEM;
        goto out;
    }
    p->l = l;
    p->exit_cb = s->exit_cb;
    p->data = s->data;
    (void)snprintf(p->id, sizeof p->id, "%s", s->id);

    struct argv_buf b;
    memset(&b, 0, sizeof b);
    char run_jwks[LSBX_PATH_MAX], run_tok[LSBX_PATH_MAX];
    build_argv(l, s, &b, ncg, run_jwks, run_tok, sizeof run_jwks);
    if (s->proxy_listen && s->no_network && !lsbx_can_forward(l))
        say(l, 1,
            "sandbox %s: its agents have no network and there is no proxy forwarder (%s next to "
            "the runner): they get no credential proxy",
            s->id, LSBX_FWD_NAME);
    const char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                         "LANG=C.UTF-8",
                         "HOME=/workspace",
                         "SHELL=/bin/bash",
                         s->insecure_tls ? "AIRLOCK_INSECURE_TLS=1" : NULL,
                         NULL};
    uv_stdio_container_t stdio[3 + CG_MAX_FDS];
    unsigned nstdio = l->cfg.unsafe ? 3 : (unsigned)(3 + ncg);
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = keyfd[0];
    stdio[1].flags = stdio[2].flags = UV_INHERIT_FD;
    stdio[1].data.fd = stdio[2].data.fd = pipefd[1];
    for (unsigned i = 3; i < nstdio; i++) {
        stdio[i].flags = UV_INHERIT_FD;
        stdio[i].data.fd = fds[i - 3];
    }
    uv_process_options_t o;
    memset(&o, 0, sizeof o);
    o.file = b.a[0];
    o.args = (char **)b.a;
    o.env = (char **)env;
    o.cwd = l->cfg.unsafe ? s->work_dir : "/";
    o.flags = UV_PROCESS_DETACHED;
    if (l->as_root && !l->cfg.unsafe) {
        o.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
        o.uid = l->uid;
        o.gid = l->gid;
    }
    o.exit_cb = on_exit_;
    o.stdio = stdio;
    o.stdio_count = (int)nstdio;
    p->proc.data = p;
    int e = uv_spawn(l->cfg.loop, &p->proc, &o);
    if (e != 0) {
        al_errf(why, cap, "cannot start %s: %s", b.a[0], uv_strerror(e));
        p->open_handles = 1;
        uv_close((uv_handle_t *)&p->proc, on_handle_closed);
        p = NULL;
        rc = AL_E_IO;
        goto out;
    }
    p->open_handles = 1;
    if (uv_pipe_init(l->cfg.loop, &p->out, 0) == 0 && uv_pipe_open(&p->out, pipefd[0]) == 0) {
        pipefd[0] = -1;
        p->out.data = p;
        p->pipe_open = 1;
        p->open_handles++;
        (void)uv_read_start((uv_stream_t *)&p->out, on_alloc, on_read);
    }
    p->next = l->procs;
    l->procs = p;
    *out = p;
    *pid = p->proc.pid;
    rc = AL_OK;
    say(l, 1, "sandbox %s: started runner pid %d%s%s%s", s->id, *pid,
        l->cfg.unsafe ? " WITHOUT A SANDBOX (--no-bwrap)"
        : l->as_root  ? " under bubblewrap as the sandbox user"
                      : " under bubblewrap",
        ncg ? ", cgroup " CG_PARENT "/" : "", ncg ? cgname : "");
    p = NULL;
out:
    free(p);
    for (size_t i = 0; i < ncg; i++)
        (void)close(fds[i]);
    if (pipefd[0] >= 0)
        (void)close(pipefd[0]);
    if (pipefd[1] >= 0)
        (void)close(pipefd[1]);
    for (int i = 0; i < 2; i++)
        if (keyfd[i] >= 0)
            (void)close(keyfd[i]);
    return rc;
}
