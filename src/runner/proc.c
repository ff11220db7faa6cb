/*
 * proc: agents' processes in a PTY or with pipes (see proc.h for the API).
 *
 * Data model. proc_spawn first builds a struct plan, everything the child
 * needs, in memory the plan owns (two allocations: the pointer arrays,
 * and the exec candidates "dir/argv0" derived from the child's PATH). The
 * strings the arrays point to are borrowed from the spec, the parent's
 * environment or the plan itself; they stay valid in the child, which has
 * a copy of the parent's memory. Then it opens the descriptors (all
 * O_CLOEXEC; the child-bound ones moved above 2 so that dup2 onto 0..2
 * cannot clobber one another), blocks every signal and forks. Between fork
 * and exec the child calls only async-signal-safe functions (raw system
 * calls) and reports a failure as a struct child_report {step, errno} on
 * the close-on-exec error pipe; end of file on that pipe means exec
 * succeeded. The parent frees the plan before returning.
 *
 * The keeper (proc.h) is forked first; it forks the child, which runs
 * the steps above. The keeper writes the child's pid and later its
 * waitpid status (one int each, atomic) on the status pipe.
 *
 * Tree walks (proc_signal with whole_tree, proc_kill_tree) read
 * /proc/<pid>/stat of every process into an array of struct pinfo (pid,
 * ppid, process group, session), owned by the walk and freed at its end.
 * The members of a tree are the keeper's descendants: the keeper is a
 * child subreaper, so a process whose parent exits is re-parented to the
 * nearest subreaper among its ancestors, never leaving the tree, whatever
 * session or group it moved to. The keeper itself is never signalled. A
 * full scan is used rather than /proc/<pid>/task/<tid>/children, which
 * many kernels do not build (CONFIG_PROC_CHILDREN) and which the kernel
 * documents as reliable only for stopped processes. Signals go by pid: a
 * pid could in theory be reused between the scan and the kill
 * (microseconds apart); the walk's root cannot, being our unreaped child.
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"

#define PROC_DEFAULT_PATH "/bin:/usr/bin" /* glibc's execvp default */
#define PROC_SHELL "/bin/sh"              /* runs scripts without #! (as execvp) */
#define PROC_SHOWN_MAX 256                /* bytes of a name quoted in a message */
#define PROC_STAT_MAX 512                 /* bytes of /proc/<pid>/stat read */
#define PROC_CHILD_EXIT 127               /* exit status of a child that failed */
#define PROC_DIRENT_BUF 4096              /* getdents64 buffer in the child */
#define PROC_EOF_CHAR 4                   /* ^D, when VEOF is disabled */
/* Without close_range (Linux < 5.9) and without /proc, the child closes
 * fds 3..min(RLIMIT_NOFILE, this) one by one. Higher ones could only be
 * left if the runner opened them without O_CLOEXEC, which it never does. */
#define PROC_CLOSE_LOOP_MAX (1L << 20)

/* ---- errors -------------------------------------------------------------- */

static int errno_to_al(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
    case ECHILD:
        return AL_E_NOENT;
    case EACCES:
    case EPERM:
        return AL_E_PERM;
    case ENOMEM:
        return AL_E_NOMEM;
    case E2BIG:
    case ENAMETOOLONG:
        return AL_E_TOOBIG;
    case EAGAIN:
        return AL_E_AGAIN;
    default:
        return AL_E_IO;
    }
}

/* Copy s for a message: bounded, control bytes shown as '?'. */
static void shown(char *dst, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[i] = 0;
    if (s[i] && cap > 4)
        memcpy(dst + cap - 4, "...", 4);
}

/* ---- validation ---------------------------------------------------------- */

/* Entries in a NULL-terminated array, counting at most max + 1. */
static size_t count_upto(const char *const *a, size_t max)
{
    size_t n = 0;
    while (a && a[n] && n <= max)
        n++;
    return n;
}

/* Length of the name of "NAME=value", or 0 if it is not of that form. */
static size_t env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : 0;
}

static int env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int env_same_name(const char *a, const char *b)
{
    size_t n = env_name_len(a);
    return n > 0 && strncmp(a, b, n + 1) == 0;
}

static int validate(const struct proc_spec *s, char *err, size_t errcap)
{
    if (s->wrap && (!s->wrap[0] || s->wrap[0][0] != '/' || s->wrap_fd < -1 ||
                    (s->wrap_fd >= 0 && s->wrap_fd < 3) ||
                    count_upto(s->wrap, PROC_MAX_WRAP + 1) > PROC_MAX_WRAP)) {
        al_errf(err, errcap, "bad wrapper: an absolute path, at most %d entries, fd >= 3",
                PROC_MAX_WRAP);
        return AL_E_INVAL;
    }
    if (s->mode != PROC_PTY && s->mode != PROC_PIPES) {
        al_errf(err, errcap, "unknown process mode %d", (int)s->mode);
        return AL_E_INVAL;
    }
    size_t argc = count_upto(s->argv, AL_MAX_ARGV);
    if (argc == 0) {
        al_errf(err, errcap, "no command given (argv is empty)");
        return AL_E_INVAL;
    }
    if (argc > AL_MAX_ARGV) {
        al_errf(err, errcap, "argv has more than %d entries", AL_MAX_ARGV);
        return AL_E_INVAL;
    }
    if (s->argv[0][0] == 0) {
        al_errf(err, errcap, "argv[0] is empty");
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < argc; i++) {
        if (strnlen(s->argv[i], AL_MAX_STR + 1) > AL_MAX_STR) {
            al_errf(err, errcap, "argv[%zu] is longer than %d bytes", i, AL_MAX_STR);
            return AL_E_INVAL;
        }
    }
    size_t nenv = count_upto(s->env, AL_MAX_ENV);
    if (nenv > AL_MAX_ENV) {
        al_errf(err, errcap, "env has more than %d entries", AL_MAX_ENV);
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < nenv; i++) {
        if (strnlen(s->env[i], AL_MAX_STR + 1) > AL_MAX_STR) {
            al_errf(err, errcap, "env[%zu] is longer than %d bytes", i, AL_MAX_STR);
            return AL_E_INVAL;
        }
        if (env_name_len(s->env[i]) == 0) {
            char name[PROC_SHOWN_MAX];
            shown(name, sizeof name, s->env[i]);
            al_errf(err, errcap, "env[%zu] '%s' is not of the form NAME=value", i, name);
            return AL_E_INVAL;
        }
    }
    size_t nallow = count_upto(s->env_allow, PROC_MAX_ENV_ALLOW);
    if (nallow > PROC_MAX_ENV_ALLOW) {
        al_errf(err, errcap, "env_allow has more than %d names", PROC_MAX_ENV_ALLOW);
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < nallow; i++) {
        const char *a = s->env_allow[i];
        size_t n = strnlen(a, AL_MAX_STR + 1);
        const char *star = strchr(a, '*');
        /* a bare "*" would inherit everything: refused */
        if (n == 0 || n > AL_MAX_STR || strchr(a, '=') || (star && (star != a + n - 1 || n == 1))) {
            al_errf(err, errcap, "env_allow[%zu] is not a variable name or NAME* prefix", i);
            return AL_E_INVAL;
        }
    }
    if (s->cwd && strnlen(s->cwd, AL_MAX_STR + 1) > AL_MAX_STR) {
        al_errf(err, errcap, "cwd is longer than %d bytes", AL_MAX_STR);
        return AL_E_INVAL;
    }
    if (s->term && s->term[0]) {
        size_t n = strnlen(s->term, AL_MAX_TERM + 1);
        if (n > AL_MAX_TERM) {
            al_errf(err, errcap, "TERM is longer than %d bytes", AL_MAX_TERM);
            return AL_E_INVAL;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s->term[i];
            if (c <= 0x20 || c >= 0x7f) {
                al_errf(err, errcap, "TERM holds a byte that is not printable ASCII");
                return AL_E_INVAL;
            }
        }
    }
    if (s->mode == PROC_PTY &&
        (s->cols < 1 || s->cols > AL_MAX_COLS || s->rows < 1 || s->rows > AL_MAX_ROWS)) {
        al_errf(err, errcap, "terminal size %ux%u is out of bounds (1..%d x 1..%d)",
                (unsigned)s->cols, (unsigned)s->rows, AL_MAX_COLS, AL_MAX_ROWS);
        return AL_E_INVAL;
    }
    return AL_OK;
}

/* ---- the plan: what the child needs, built before fork -------------------- */

struct plan {
    char **argv;   /* the spec's argv, NULL-terminated */
    char **shargv; /* PROC_SHELL, <candidate>, argv[1..], NULL (ENOEXEC) */
    char **envp;   /* the child's whole environment, NULL-terminated */
    char **cands;  /* paths to try for argv[0], NULL-terminated */
    char **wargv;  /* wrap[...], <candidate>, argv[1..], NULL (a wrapper) */
    size_t nwrap;  /* entries of wrap (0: none) */
    int wrap_fd;   /* kept open for the wrapper, or -1 */
    void *ptrs;    /* owns argv, shargv, envp, cands, wargv */
    char *cmem;    /* owns the candidate strings */
    char term_env[sizeof "TERM=" + AL_MAX_TERM];
    const char *cwd; /* NULL: unchanged */
    int set_user;
    uid_t uid;
    gid_t gid;
    long maxfd; /* fds below it are closed one by one as a last resort */
};

static void plan_free(struct plan *pl)
{
    free(pl->ptrs);
    free(pl->cmem);
    pl->ptrs = NULL;
    pl->cmem = NULL;
}

static int allow_match(const char *const *allow, const char *entry, size_t nlen)
{
    for (size_t i = 0; allow && allow[i]; i++) {
        size_t plen = strlen(allow[i]);
        if (allow[i][plen - 1] == '*') {
            if (nlen >= plen - 1 && memcmp(entry, allow[i], plen - 1) == 0)
                return 1;
        } else if (nlen == plen && memcmp(entry, allow[i], plen) == 0) {
            return 1;
        }
    }
    return 0;
}

static int has_name(const char *const *arr, size_t n, const char *entry)
{
    for (size_t i = 0; i < n; i++)
        if (env_same_name(arr[i], entry))
            return 1;
    return 0;
}

/* Fill pl->envp (room for nenv + PROC_MAX_INHERIT + 2 pointers). */
static int build_env(const struct proc_spec *s, struct plan *pl, char *err, size_t errcap)
{
    const char *const *penv = s->parent_env ? s->parent_env : (const char *const *)environ;
    const char *const *senv = s->env;
    size_t nenv = count_upto(senv, AL_MAX_ENV);
    int spec_term = s->term && s->term[0];
    int env_term = 0;
    for (size_t i = 0; i < nenv; i++)
        if (env_is(senv[i], "TERM"))
            env_term = 1;
    /* our TERM= entry replaces every other TERM */
    int add_term = spec_term || (s->mode == PROC_PTY && !env_term);
    if (add_term)
        (void)snprintf(pl->term_env, sizeof pl->term_env, "TERM=%s",
                       spec_term ? s->term : PROC_DEFAULT_TERM);

    const char **envp = (const char **)pl->envp;
    size_t k = 0;
    for (size_t i = 0; penv && penv[i]; i++) {
        const char *e = penv[i];
        size_t nlen = env_name_len(e);
        if (nlen == 0 || !allow_match(s->env_allow, e, nlen))
            continue;
        if ((add_term || env_term) && env_is(e, "TERM"))
            continue;
        if (has_name(senv, nenv, e) || has_name(envp, k, e))
            continue; /* the spec wins; the first of duplicates wins (getenv) */
        if (k == PROC_MAX_INHERIT) {
            al_errf(err, errcap,
                    "more than %d variables of the runner's environment match env_allow",
                    PROC_MAX_INHERIT);
            return AL_E_LIMIT;
        }
        envp[k++] = e;
    }
    for (size_t i = 0; i < nenv; i++) {
        if (spec_term && env_is(senv[i], "TERM"))
            continue;
        if (has_name(senv + i + 1, nenv - i - 1, senv[i]))
            continue; /* a later duplicate wins */
        envp[k++] = senv[i];
    }
    if (add_term)
        envp[k++] = pl->term_env;
    envp[k] = NULL;
    return AL_OK;
}

/* The candidates for argv[0]: itself if it holds a '/', else each PATH
 * entry joined with it (an empty entry is the working directory). */
static int build_cands(struct plan *pl, char *err, size_t errcap)
{
    const char *name = pl->argv[0];
    size_t nlen = strlen(name);
    if (strchr(name, '/')) {
        pl->cands[0] = pl->argv[0];
        pl->cands[1] = NULL;
        return AL_OK;
    }
    const char *path = PROC_DEFAULT_PATH;
    for (size_t i = 0; pl->envp[i]; i++)
        if (env_is(pl->envp[i], "PATH"))
            path = pl->envp[i] + sizeof "PATH=" - 1;
    size_t ndirs = 1;
    for (const char *c = path; *c; c++)
        if (*c == ':')
            ndirs++;
    if (ndirs > PROC_MAX_PATH_DIRS) {
        al_errf(err, errcap, "PATH has more than %d entries", PROC_MAX_PATH_DIRS);
        return AL_E_LIMIT;
    }
    size_t bytes = strlen(path) + ndirs * (nlen + 2);
    pl->cmem = malloc(bytes);
    if (!pl->cmem) {
        al_errf(err, errcap, "out of memory");
        return AL_E_NOMEM;
    }
    size_t used = 0, k = 0;
    const char *dir = path;
    for (;;) {
        const char *end = strchr(dir, ':');
        size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
        /* entries too long for a path are skipped, as execvp does */
        if (dlen + 1 + nlen < PATH_MAX) {
            char *w = pl->cmem + used;
            /* bytes holds every entry: nothing is truncated */
            (void)snprintf(w, bytes - used, "%.*s%s%s", (int)dlen, dir, dlen ? "/" : "", name);
            pl->cands[k++] = w;
            used += strlen(w) + 1;
        }
        if (!end)
            break;
        dir = end + 1;
    }
    pl->cands[k] = NULL;
    return AL_OK;
}

static int plan_build(const struct proc_spec *s, struct plan *pl, char *err, size_t errcap)
{
    memset(pl, 0, sizeof *pl);
    size_t argc = count_upto(s->argv, AL_MAX_ARGV);
    size_t nenv = count_upto(s->env, AL_MAX_ENV);
    size_t n_argv = argc + 1, n_sh = argc + 2, n_envp = nenv + PROC_MAX_INHERIT + 2;
    size_t n_cands = PROC_MAX_PATH_DIRS + 1;
    size_t nwrap = s->wrap ? count_upto(s->wrap, PROC_MAX_WRAP) : 0;
    size_t n_w = nwrap ? nwrap + argc + 1 : 0;
    pl->ptrs = calloc(n_argv + n_sh + n_envp + n_cands + n_w, sizeof(char *));
    if (!pl->ptrs) {
        al_errf(err, errcap, "out of memory");
        return AL_E_NOMEM;
    }
    char **p = pl->ptrs;
    pl->argv = p;
    pl->shargv = p + n_argv;
    pl->envp = p + n_argv + n_sh;
    pl->cands = p + n_argv + n_sh + n_envp;
    pl->nwrap = nwrap;
    pl->wrap_fd = nwrap ? s->wrap_fd : -1;
    if (nwrap) {
        pl->wargv = pl->cands + n_cands;
        for (size_t i = 0; i < nwrap; i++)
            pl->wargv[i] = (char *)s->wrap[i];
        for (size_t i = 1; i < argc; i++)
            pl->wargv[nwrap + i] = (char *)s->argv[i]; /* [nwrap]: the candidate */
    }
    /* exec*() take char *const[] but do not write through it */
    for (size_t i = 0; i < argc; i++)
        pl->argv[i] = (char *)s->argv[i];
    pl->shargv[0] = (char *)PROC_SHELL;
    for (size_t i = 0; i < argc; i++)
        pl->shargv[i + 1] = pl->argv[i]; /* [1] becomes the candidate */
    int rc = build_env(s, pl, err, errcap);
    if (rc == AL_OK)
        rc = build_cands(pl, err, errcap);
    if (rc != AL_OK) {
        plan_free(pl);
        return rc;
    }
    pl->cwd = s->cwd && s->cwd[0] ? s->cwd : NULL;
    pl->set_user = s->set_user;
    pl->uid = s->uid;
    pl->gid = s->gid;
    pl->maxfd = sysconf(_SC_OPEN_MAX);
    if (pl->maxfd < 0 || pl->maxfd > PROC_CLOSE_LOOP_MAX)
        pl->maxfd = PROC_CLOSE_LOOP_MAX;
    return AL_OK;
}

/* ---- the child: async-signal-safe only ------------------------------------- */

enum child_step {
    STEP_SETSID = 1,
    STEP_CTTY,
    STEP_STDIO,
    STEP_SIGNALS,
    STEP_USER,
    STEP_CHDIR,
    STEP_EXEC,
    STEP_KEEPER,
};

struct child_report {
    int step; /* enum child_step */
    int err;  /* errno */
};

static _Noreturn void child_fail(int fd, int step, int e)
{
    struct child_report r = {step, e};
    ssize_t n = write(fd, &r, sizeof r); /* atomic: smaller than PIPE_BUF */
    (void)n;                             /* nothing more to do if it fails */
    _exit(PROC_CHILD_EXIT);
}

/* Parse a decimal fd name; -1 if it is not one. */
static int fd_from_name(const char *s)
{
    int v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* Close every fd >= 3 but keep and keep2 (either may be -1). */
static void close_fds_except(int keep, int keep2, long maxfd)
{
    if (keep2 >= 0 && keep2 < keep) { /* in order: keep < keep2, or keep2 < 0 */
        int t = keep;
        keep = keep2;
        keep2 = t;
    }
    if (keep < 0 || keep2 == keep) {
        keep = keep2 == keep ? keep : keep2;
        keep2 = -1;
    }
#ifdef SYS_close_range
    {
        int ok = 1;
        unsigned from = 3;
        const int ks[2] = {keep, keep2};
        for (int i = 0; i < 2 && ok; i++) {
            if (ks[i] < 3)
                continue;
            if ((unsigned)ks[i] > from &&
                syscall(SYS_close_range, from, (unsigned)ks[i] - 1, 0u) != 0)
                ok = 0;
            from = (unsigned)ks[i] + 1;
        }
        if (ok && syscall(SYS_close_range, from, ~0u, 0u) == 0)
            return;
    }
#endif
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        _Alignas(struct dirent64) char buf[PROC_DIRENT_BUF];
        ssize_t n = getdents64(dfd, buf, sizeof buf);
        int listed = n >= 0;
        while (n > 0) { /* closing while listing is safe: the offset is the fd */
            for (ssize_t off = 0; off < n;) {
                const struct dirent64 *d = (const struct dirent64 *)(void *)(buf + off);
                int fd = fd_from_name(d->d_name);
                if (fd >= 3 && fd != keep && fd != keep2 && fd != dfd)
                    (void)close(fd); /* EBADF is harmless here */
                off += d->d_reclen;
            }
            n = getdents64(dfd, buf, sizeof buf);
        }
        (void)close(dfd);
        if (listed)
            return;
    }
    for (long fd = 3; fd < maxfd; fd++)
        if (fd != keep && fd != keep2)
            (void)close((int)fd);
}

/* stdio[0..2]: the fds to become 0, 1, 2 (all >= 3); pty: stdio[0] is the
 * slave. errfd: the write end of the error pipe (>= 3, O_CLOEXEC). */
static _Noreturn void child_run(struct plan *pl, const int stdio[3], int pty, int errfd)
{
    if (setsid() < 0)
        child_fail(errfd, STEP_SETSID, errno);
    /* a wrapper's command takes the terminal itself, in its namespace */
    if (pty && !pl->nwrap && ioctl(stdio[0], TIOCSCTTY, 0) < 0)
        child_fail(errfd, STEP_CTTY, errno);
    for (int i = 0; i < 3; i++)
        if (dup2(stdio[i], i) < 0)
            child_fail(errfd, STEP_STDIO, errno);
    close_fds_except(errfd, pl->wrap_fd, pl->maxfd);
    if (pl->wrap_fd >= 0 && fcntl(pl->wrap_fd, F_SETFD, 0) < 0)
        child_fail(errfd, STEP_STDIO, errno);

    /* default dispositions (SIGKILL/SIGSTOP and the C library's reserved
     * signals refuse the change, harmlessly); the mask is cleared last */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    if (sigemptyset(&sa.sa_mask) < 0)
        child_fail(errfd, STEP_SIGNALS, errno);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)sigaction(sig, &sa, NULL);
    /* glibc's sigaction() refuses the realtime signals it reserves (32, 33),
     * yet an ignored disposition survives exec: GNU make 4.3, for one,
     * starts its children with them ignored. Reset them with the raw
     * system call (the kernel's struct sigaction: handler, flags,
     * restorer, mask). */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } kdfl = {SIG_DFL, 0, NULL, 0};
    for (int sig = 32; sig < SIGRTMIN; sig++)
        (void)syscall(SYS_rt_sigaction, sig, &kdfl, NULL, sizeof kdfl.mask);

    if (pl->set_user) {
        if (setgroups(1, &pl->gid) < 0 || setresgid(pl->gid, pl->gid, pl->gid) < 0 ||
            setresuid(pl->uid, pl->uid, pl->uid) < 0)
            child_fail(errfd, STEP_USER, errno);
        if (pl->uid != 0 && setuid(0) == 0)
            child_fail(errfd, STEP_USER, EPERM);
    }
    if (pl->cwd && chdir(pl->cwd) < 0)
        child_fail(errfd, STEP_CHDIR, errno);

    /* An empty mask, including the realtime signals glibc reserves and its
     * sigprocmask() refuses to touch (the mask survives exec too). */
    uint64_t none = 0;
    if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none) < 0)
        child_fail(errfd, STEP_SIGNALS, errno);

    int e = ENOENT, eacces = 0;
    if (pl->nwrap) { /* the first executable file, started by the wrapper */
        for (size_t i = 0; pl->cands[i]; i++) {
            struct stat st;
            if (stat(pl->cands[i], &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            if (access(pl->cands[i], X_OK) != 0) {
                eacces = 1;
                continue;
            }
            pl->wargv[pl->nwrap] = pl->cands[i];
            execve(pl->wargv[0], pl->wargv, pl->envp);
            child_fail(errfd, STEP_EXEC, errno);
        }
        child_fail(errfd, STEP_EXEC, eacces ? EACCES : ENOENT);
    }
    for (size_t i = 0; pl->cands[i]; i++) {
        execve(pl->cands[i], pl->argv, pl->envp);
        e = errno;
        if (e == ENOEXEC) { /* a script without #!: as execvp, through sh */
            pl->shargv[1] = pl->cands[i];
            execve(PROC_SHELL, pl->shargv, pl->envp);
            child_fail(errfd, STEP_EXEC, ENOEXEC);
        }
        if (e == EACCES)
            eacces = 1;
        else if (e != ENOENT && e != ENOTDIR && e != ESTALE && e != ENODEV && e != ETIMEDOUT)
            break;
    }
    child_fail(errfd, STEP_EXEC, eacces && (e == ENOENT || e == ENOTDIR) ? EACCES : e);
}

/* The keeper (see the top of the file): a subreaper in a session of its
 * own, parent of the command, that reports the command's pid and then its
 * waitpid status on statfd, and reaps whatever else comes back to it until
 * it has no child left. Signals stay blocked (as at fork): it only waits,
 * and only SIGKILL ends it early (as its parent's death does). */
static _Noreturn void keeper_run(struct plan *pl, const int stdio[3], int pty, int errfd,
                                 int statfd, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
        _exit(PROC_CHILD_EXIT); /* the parent is already gone */
    if (setsid() < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        child_fail(errfd, STEP_KEEPER, errno);
    (void)prctl(PR_SET_NAME, PROC_KEEPER_NAME, 0, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL; /* children become zombies for us to reap */
    if (sigemptyset(&sa.sa_mask) < 0 || sigaction(SIGCHLD, &sa, NULL) < 0)
        child_fail(errfd, STEP_KEEPER, errno);
    pid_t cmd = fork();
    if (cmd == 0)
        child_run(pl, stdio, pty, errfd);
    if (cmd < 0)
        child_fail(errfd, STEP_KEEPER, errno);
    /* hold nothing of the command's (its PTY, its pipes) nor our parent's */
    close_fds_except(statfd, -1, pl->maxfd);
    for (int fd = 0; fd < 3; fd++)
        (void)close(fd);
    ssize_t n = write(statfd, &cmd, sizeof cmd); /* atomic: smaller than PIPE_BUF */
    for (;;) {
        int st = 0;
        pid_t w = waitpid(-1, &st, 0);
        if (w == cmd && n == (ssize_t)sizeof cmd) {
            n = write(statfd, &st, sizeof st);
            (void)close(statfd);
            (void)kill(parent, SIGCHLD); /* a child's state changed: read it */
        } else if (w < 0 && errno == ECHILD) {
            _exit(0);
        }
    }
}

/* ---- the parent ------------------------------------------------------------ */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        (void)close(*fd); /* nothing useful to do on error: the fd is gone */
    *fd = -1;
}

/* Keep an fd away from 0..2 (the runner may have closed its own stdio):
 * a child-bound fd there could be clobbered by the dup2 of another, and a
 * parent-side one would receive whatever the runner writes to "stderr".
 * The copy is close-on-exec too (file status flags are shared). */
static int above_stdio(int *fd)
{
    if (*fd > 2)
        return AL_OK;
    int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0)
        return errno_to_al(errno);
    close_fd(fd);
    *fd = nfd;
    return AL_OK;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return errno_to_al(errno);
    return AL_OK;
}

/* A PTY pair: master non-blocking, both close-on-exec, sized, IUTF8. */
static int pty_open(uint16_t cols, uint16_t rows, int *master, int *slave, char *err, size_t errcap)
{
    int e = 0, s = -1;
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0) {
        e = errno;
        al_errf(err, errcap, "cannot open a PTY: %s", strerror(e));
        return errno_to_al(e);
    }
    if (grantpt(m) < 0 || unlockpt(m) < 0)
        goto fail;
#ifdef TIOCGPTPEER
    s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
#endif
    if (s < 0) {
        char name[64];
        if (ptsname_r(m, name, sizeof name) != 0)
            goto fail;
        s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
            goto fail;
    }
    struct termios t;
    if (tcgetattr(s, &t) < 0)
        goto fail;
    t.c_iflag |= IUTF8;
    if (tcsetattr(s, TCSANOW, &t) < 0)
        goto fail;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(m, TIOCSWINSZ, &ws) < 0 || set_nonblock(m) != AL_OK)
        goto fail;
    *master = m;
    *slave = s;
    return AL_OK;
fail:
    e = errno;
    al_errf(err, errcap, "cannot set up a PTY: %s", strerror(e));
    close_fd(&s);
    close_fd(&m);
    return errno_to_al(e);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for the child to exec (0), report a failure (1, *rep filled),
 * or neither in time (AL_E_TIMEOUT). */
static int wait_exec(int fd, struct child_report *rep)
{
    int64_t deadline = now_ms() + PROC_EXEC_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return AL_E_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno_to_al(errno);
        if (n == 0)
            return AL_E_TIMEOUT;
        ssize_t r = read(fd, rep, sizeof *rep);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return 0;
        if (r == (ssize_t)sizeof *rep)
            return 1;
        rep->step = STEP_EXEC;
        rep->err = r < 0 ? errno : EIO;
        return 1;
    }
}

/* The command's pid, which the keeper writes first; -1 when the keeper
 * failed before it (end of file) or did not write it in time. */
static pid_t read_cmd_pid(int fd)
{
    int64_t deadline = now_ms() + PROC_EXEC_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        pid_t pid = -1;
        ssize_t r = read(fd, &pid, sizeof pid);
        if (r < 0 && errno == EINTR)
            continue;
        return r == (ssize_t)sizeof pid && pid > 1 ? pid : -1;
    }
}

/* End a command that will never run the program (cmd: -1 if unknown) and
 * reap its keeper, which reaps the command first. */
static void kill_and_reap(pid_t keeper, pid_t cmd)
{
    if (cmd > 1)
        (void)kill(cmd, SIGKILL); /* the keeper's child, unreaped: its pid is ours */
    else
        (void)kill(keeper, SIGKILL); /* never forked, or stuck before telling */
    for (;;) {
        pid_t r = waitpid(keeper, NULL, 0);
        if (r >= 0 || errno != EINTR)
            break;
    }
}

static int report_error(const struct plan *pl, const struct child_report *rep, char *err,
                        size_t errcap)
{
    char what[PROC_SHOWN_MAX];
    const char *msg = strerror(rep->err);
    switch (rep->step) {
    case STEP_EXEC:
        shown(what, sizeof what, pl->argv[0]);
        al_errf(err, errcap, "cannot run '%s': %s", what, msg);
        break;
    case STEP_CHDIR:
        shown(what, sizeof what, pl->cwd ? pl->cwd : "");
        al_errf(err, errcap, "cannot change directory to '%s': %s", what, msg);
        break;
    case STEP_USER:
        al_errf(err, errcap, "cannot switch to uid %lu gid %lu: %s", (unsigned long)pl->uid,
                (unsigned long)pl->gid, msg);
        break;
    case STEP_SETSID:
        al_errf(err, errcap, "cannot start a session: %s", msg);
        break;
    case STEP_CTTY:
        al_errf(err, errcap, "cannot make the PTY the controlling terminal: %s", msg);
        break;
    case STEP_STDIO:
        al_errf(err, errcap, "cannot set up stdin/stdout/stderr: %s", msg);
        break;
    case STEP_KEEPER:
        al_errf(err, errcap, "cannot start the process's keeper: %s", msg);
        break;
    default:
        al_errf(err, errcap, "cannot set up the child's signals: %s", msg);
        break;
    }
    return errno_to_al(rep->err);
}

static void proc_init(struct proc *p, enum proc_mode mode)
{
    memset(p, 0, sizeof *p);
    p->pid = p->keeper = -1;
    p->fd_in = p->fd_out = p->fd_err = p->fd_status = -1;
    p->mode = mode;
}

int proc_spawn(const struct proc_spec *spec, struct proc *out, char *err, size_t errcap)
{
    al_errf(err, errcap, "%s", "");
    if (out)
        proc_init(out, spec ? spec->mode : PROC_PTY);
    if (!out || !spec) {
        al_errf(err, errcap, "no process spec or result given");
        return AL_E_INVAL;
    }
    int rc = validate(spec, err, errcap);
    if (rc != AL_OK)
        return rc;
    struct plan pl;
    rc = plan_build(spec, &pl, err, errcap);
    if (rc != AL_OK)
        return rc;

    /* parent ends: in, out, err; child ends: cin, cout, cerr; error pipe */
    int pin = -1, pout = -1, perr = -1, cio[3] = {-1, -1, -1}, ep[2] = {-1, -1};
    int sp[2] = {-1, -1}; /* the keeper's reports */
    if (spec->mode == PROC_PTY) {
        rc = pty_open(spec->cols, spec->rows, &pin, &cio[0], err, errcap);
        if (rc != AL_OK)
            goto out;
        rc = above_stdio(&pin);
        pout = pin;
        for (int i = 1; i < 3 && rc == AL_OK; i++) {
            cio[i] = fcntl(cio[0], F_DUPFD_CLOEXEC, 3);
            if (cio[i] < 0)
                rc = errno_to_al(errno);
        }
    } else {
        int a[2] = {-1, -1}, b[2] = {-1, -1}, c[2] = {-1, -1};
        if (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0 || pipe2(c, O_CLOEXEC) < 0)
            rc = errno_to_al(errno);
        cio[0] = a[0], pin = a[1];
        pout = b[0], cio[1] = b[1];
        perr = c[0], cio[2] = c[1];
        for (int i = 0; i < 3 && rc == AL_OK; i++)
            rc = above_stdio(i == 0 ? &pin : i == 1 ? &pout : &perr);
        if (rc == AL_OK)
            rc = set_nonblock(pin);
        if (rc == AL_OK)
            rc = set_nonblock(pout);
        if (rc == AL_OK)
            rc = set_nonblock(perr);
    }
    if (rc == AL_OK && (pipe2(ep, O_CLOEXEC) < 0 || pipe2(sp, O_CLOEXEC) < 0))
        rc = errno_to_al(errno);
    for (int i = 0; i < 3 && rc == AL_OK; i++)
        rc = above_stdio(&cio[i]);
    if (rc == AL_OK)
        rc = above_stdio(&ep[1]);
    if (rc == AL_OK)
        rc = above_stdio(&sp[1]);
    if (rc == AL_OK)
        rc = above_stdio(&sp[0]);
    if (rc == AL_OK)
        rc = set_nonblock(sp[0]);
    if (rc != AL_OK) {
        if (!err || !err[0])
            al_errf(err, errcap, "cannot create the process's descriptors: %s", strerror(errno));
        goto out;
    }

    /* No handler of ours may run in the child before it resets them. */
    sigset_t all, old;
    if (sigfillset(&all) < 0 || pthread_sigmask(SIG_SETMASK, &all, &old) != 0) {
        al_errf(err, errcap, "cannot block signals: %s", strerror(errno));
        rc = AL_E_IO;
        goto out;
    }
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid == 0)
        keeper_run(&pl, cio, spec->mode == PROC_PTY, ep[1], sp[1], self);
    int fork_errno = errno;
    int mrc = pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        al_errf(err, errcap, "cannot fork: %s", strerror(fork_errno));
        rc = errno_to_al(fork_errno);
        goto out;
    }
    for (int i = 0; i < 3; i++)
        close_fd(&cio[i]);
    close_fd(&ep[1]);
    close_fd(&sp[1]);

    struct child_report rep = {0, 0};
    int w = wait_exec(ep[0], &rep);
    pid_t cmd = w == 1 && rep.step == STEP_KEEPER ? -1 : read_cmd_pid(sp[0]);
    if (w == 0 && cmd < 0) {
        al_errf(err, errcap, "cannot start the process's keeper: it did not report");
        rc = AL_E_IO;
        kill_and_reap(pid, cmd);
        goto out;
    }
    if (w != 0) {
        kill_and_reap(pid, cmd);
        if (w == 1) {
            rc = report_error(&pl, &rep, err, errcap);
        } else {
            char what[PROC_SHOWN_MAX];
            shown(what, sizeof what, pl.argv[0]);
            al_errf(err, errcap, "cannot run '%s': %s", what,
                    w == AL_E_TIMEOUT ? "the child did not start in time" : al_strerror(w));
            rc = w;
        }
        goto out;
    }
    if (mrc != 0) { /* the child runs, but our own signal mask is wrong */
        kill_and_reap(pid, cmd);
        al_errf(err, errcap, "cannot restore the signal mask: %s", strerror(mrc));
        rc = AL_E_IO;
        goto out;
    }
    out->pid = cmd;
    out->keeper = pid;
    out->fd_status = sp[0];
    sp[0] = -1;
    out->wrapped = pl.nwrap > 0;
    out->fd_in = pin;
    out->fd_out = pout;
    out->fd_err = perr;
    pin = pout = perr = -1;
    rc = AL_OK;
out:
    if (pout != pin)
        close_fd(&pout);
    close_fd(&pin);
    close_fd(&perr);
    for (int i = 0; i < 3; i++)
        close_fd(&cio[i]);
    close_fd(&ep[0]);
    close_fd(&ep[1]);
    close_fd(&sp[0]);
    close_fd(&sp[1]);
    plan_free(&pl);
    return rc;
}

/* ---- acting on a running process ------------------------------------------- */

static int proc_ok(const struct proc *p)
{
    return p && p->pid > 1;
}

int proc_resize(struct proc *p, uint16_t cols, uint16_t rows)
{
    if (!proc_ok(p) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if (p->mode != PROC_PTY || p->fd_out < 0)
        return AL_E_STATE;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(p->fd_out, TIOCSWINSZ, &ws) < 0)
        return errno_to_al(errno);
    return AL_OK;
}

int proc_close_stdin(struct proc *p)
{
    if (!proc_ok(p))
        return AL_E_INVAL;
    if (p->mode == PROC_PIPES) {
        if (p->fd_in < 0)
            return AL_OK;
        int rc = close(p->fd_in) < 0 && errno != EINTR ? errno_to_al(errno) : AL_OK;
        p->fd_in = -1; /* closed even when close() reports an error */
        return rc;
    }
    if (p->fd_in < 0)
        return AL_E_STATE;
    struct termios t;
    if (tcgetattr(p->fd_in, &t) < 0)
        return errno_to_al(errno);
    unsigned char c = t.c_cc[VEOF];
    if (c == _POSIX_VDISABLE)
        c = PROC_EOF_CHAR;
    for (;;) {
        ssize_t n = write(p->fd_in, &c, 1);
        if (n == 1)
            return AL_OK;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return AL_E_AGAIN;
        return n < 0 ? errno_to_al(errno) : AL_E_IO;
    }
}

void proc_decode(const struct proc *p, int status, int *exit_code, int *signo, int *core)
{
    int code = 0, sig = 0, dumped = 0;
    if (WIFSIGNALED(status)) {
        code = -1;
        sig = WTERMSIG(status);
        dumped = WCOREDUMP(status) ? 1 : 0;
    } else {
        code = WEXITSTATUS(status);
        /* the wrapper reports a command a signal ended as 128 + the signal,
         * the shells' convention (an exit code above 128 reads the same) */
        if (p->wrapped && code > PROC_WRAP_SIGNAL_BASE && code < PROC_WRAP_SIGNAL_BASE + NSIG) {
            sig = code - PROC_WRAP_SIGNAL_BASE;
            code = -1;
        }
    }
    if (exit_code)
        *exit_code = code;
    if (signo)
        *signo = sig;
    if (core)
        *core = dumped;
}

/* Note the keeper's end if it has exited (it is our child: until we reap
 * it, its pid is ours and the tree walk may start from it). */
static void keeper_poll(struct proc *p)
{
    if (p->keeper_gone || p->keeper <= 1)
        return;
    pid_t r;
    do {
        r = waitpid(p->keeper, NULL, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == p->keeper || (r < 0 && errno == ECHILD))
        p->keeper_gone = 1;
}

/* Take the command's status if the keeper has sent it. AL_OK once it has
 * (now or before), AL_E_AGAIN while the command runs, AL_E_NOENT when the
 * keeper ended without sending it (something killed the keeper). */
static int status_poll(struct proc *p)
{
    if (p->reaped)
        return AL_OK;
    if (p->fd_status < 0)
        return AL_E_NOENT;
    int st = 0;
    ssize_t n;
    do {
        n = read(p->fd_status, &st, sizeof st);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return AL_E_AGAIN;
    close_fd(&p->fd_status); /* one status per command */
    if (n != (ssize_t)sizeof st)
        return AL_E_NOENT;
    p->reaped = 1;
    p->status = st;
    return AL_OK;
}

int proc_reap(struct proc *p, int *exit_code, int *signo, int *core)
{
    if (!proc_ok(p))
        return AL_E_INVAL;
    int rc = status_poll(p);
    if (rc != AL_OK)
        return rc;
    keeper_poll(p);
    proc_decode(p, p->status, exit_code, signo, core);
    return AL_OK;
}

void proc_child_reaped(struct proc *p, pid_t pid)
{
    if (p && pid > 1 && pid == p->keeper)
        p->keeper_gone = 1;
}

void proc_close(struct proc *p)
{
    if (!p)
        return;
    if (p->fd_in == p->fd_out)
        p->fd_in = -1;
    close_fd(&p->fd_in);
    close_fd(&p->fd_out);
    close_fd(&p->fd_err);
    close_fd(&p->fd_status);
}

/* ---- process trees ----------------------------------------------------------- */

struct pinfo {
    pid_t pid, ppid, pgrp, sid;
};

static int parse_num(const char **s, pid_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(*s, &end, 10);
    if (end == *s || errno != 0 || v < 0 || v > INT_MAX)
        return -1;
    *out = (pid_t)v;
    *s = end;
    return 0;
}

/* One /proc/<pid>/stat: "pid (comm) state ppid pgrp session ...". */
static int read_stat(int procfd, const char *name, struct pinfo *pi)
{
    char path[64];
    (void)snprintf(path, sizeof path, "%s/stat", name);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[PROC_STAT_MAX];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    (void)close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *s = buf;
    if (parse_num(&s, &pi->pid) < 0)
        return -1;
    s = strrchr(buf, ')'); /* comm may hold ')' and spaces; no field after does */
    if (!s || s[1] != ' ' || !s[2] || s[3] != ' ')
        return -1;
    s += 4;
    if (parse_num(&s, &pi->ppid) < 0 || parse_num(&s, &pi->pgrp) < 0 || parse_num(&s, &pi->sid) < 0)
        return -1;
    return 0;
}

static int pinfo_cmp(const void *a, const void *b)
{
    pid_t x = ((const struct pinfo *)a)->pid, y = ((const struct pinfo *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process (up to PROC_MAX_SCAN) into *out, sorted by pid; the
 * caller frees *out. */
static int scan_all(struct pinfo **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    int pfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return errno_to_al(errno);
    DIR *d = fdopendir(pfd);
    if (!d) {
        int e = errno;
        (void)close(pfd);
        return errno_to_al(e);
    }
    size_t n = 0, cap = 0;
    struct pinfo *a = NULL;
    int rc = AL_OK;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        if (n == PROC_MAX_SCAN) {
            rc = AL_E_LIMIT; /* keep what we have */
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            if (ncap > PROC_MAX_SCAN)
                ncap = PROC_MAX_SCAN;
            struct pinfo *na = realloc(a, ncap * sizeof *a);
            if (!na) {
                rc = AL_E_NOMEM;
                break;
            }
            a = na;
            cap = ncap;
        }
        if (read_stat(pfd, de->d_name, &a[n]) == 0)
            n++; /* a process that vanished meanwhile is skipped */
    }
    (void)closedir(d); /* closes pfd */
    if (n > 1)
        qsort(a, n, sizeof *a, pinfo_cmp);
    *out = a;
    *count = n;
    return rc;
}

static int pid_marked(const struct pinfo *a, const unsigned char *mark, size_t n, pid_t pid)
{
    struct pinfo key = {.pid = pid};
    const struct pinfo *f = bsearch(&key, a, n, sizeof *a, pinfo_cmp);
    return f && mark[f - a];
}

/* The tree of root (see the top of the file) into out[0..*n), at most
 * PROC_MAX_TREE entries, never ourselves or init. */
static int tree_members(pid_t root, struct pinfo *out, size_t *nout)
{
    *nout = 0;
    struct pinfo *a;
    size_t n;
    int rc = scan_all(&a, &n);
    if (!a)
        return rc == AL_OK ? AL_OK : rc;
    unsigned char *mark = calloc(n ? n : 1, 1);
    if (!mark) {
        free(a);
        return AL_E_NOMEM;
    }
    pid_t self = getpid();
    for (size_t i = 0; i < n; i++)
        mark[i] = a[i].pid == root || a[i].pgrp == root || a[i].sid == root;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (!mark[i] && pid_marked(a, mark, n, a[i].ppid)) {
                mark[i] = 1;
                changed = 1;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!mark[i] || a[i].pid == self || a[i].pid <= 1)
            continue;
        if (*nout == PROC_MAX_TREE) {
            rc = AL_E_LIMIT;
            break;
        }
        out[(*nout)++] = a[i];
    }
    free(mark);
    free(a);
    return rc;
}

/* Fold one kill() result into the running outcome: any success wins. */
static void note_kill(int r, int *delivered, int *last_errno)
{
    if (r == 0)
        *delivered = 1;
    else if (*last_errno != EPERM)
        *last_errno = errno;
}

/* Signals whose default action is not to end the process. */
static int ignored_by_default(int signo)
{
    static const int ignored[] = {SIGCHLD, SIGCONT, SIGURG,  SIGWINCH,
                                  SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        if (ignored[i] == signo)
            return 1;
    return 0;
}

/* The tree of p into m[0..*n) (never the keeper itself), after taking
 * the command's status if it came: AL_E_NOENT when the keeper is gone
 * (the tree is empty and its pid may be another process's by now). */
static int proc_tree(struct proc *p, struct pinfo *m, size_t *n)
{
    *n = 0;
    (void)status_poll(p);
    keeper_poll(p);
    if (p->keeper_gone)
        return AL_E_NOENT;
    size_t all = 0;
    int rc = tree_members(p->keeper, m, &all);
    for (size_t i = 0; i < all; i++)
        if (m[i].pid != p->keeper)
            m[(*n)++] = m[i];
    return rc;
}

/* May kill(-p->pid) reach the command's group? While the command is not
 * reaped its pid is held; after, only while a member of the tree is still
 * in the group (the group id stays taken as long as it has a member). */
static int group_alive(const struct proc *p, const struct pinfo *m, size_t n)
{
    if (!p->reaped)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (m[i].pgrp == p->pid)
            return 1;
    return 0;
}

/* A wrapped process (the agent's jail): the wrapper (p->pid) and its
 * children (the namespace's init) never get the signal, as either would
 * end the whole sandbox; the group is that of the agent's command, the
 * first process below them (its own session and group leader). */
static int signal_wrapped(struct proc *p, int signo, int whole_tree)
{
    struct pinfo *m = malloc(PROC_MAX_TREE * sizeof *m);
    size_t n = 0;
    int rc = m ? proc_tree(p, m, &n) : AL_E_NOMEM;
    int delivered = 0, last = ESRCH;
    for (size_t i = 0; i < n; i++) {
        if (m[i].pid == p->pid || m[i].ppid == p->pid)
            continue; /* the wrapper, the namespace's init */
        int is_root = 0;
        for (size_t k = 0; k < n; k++)
            if (m[k].pid == m[i].ppid && m[k].ppid == p->pid)
                is_root = 1;
        if (is_root)
            note_kill(kill(-m[i].pid, signo), &delivered, &last);
        else if (whole_tree)
            note_kill(kill(m[i].pid, signo), &delivered, &last);
    }
    /* the command is not started yet (the jail is being set up): a signal
     * that would end it ends the wrapper's group, and with it the jail */
    if (!delivered && !ignored_by_default(signo))
        note_kill(kill(-p->pid, signo), &delivered, &last);
    free(m);
    if (!delivered)
        return rc == AL_E_NOENT ? rc : errno_to_al(last);
    return rc;
}

int proc_signal(struct proc *p, int signo, int whole_tree)
{
    if (!proc_ok(p) || signo < 1 || signo >= NSIG)
        return AL_E_INVAL;
    if (p->wrapped)
        return signal_wrapped(p, signo, whole_tree);
    (void)status_poll(p);
    if (!whole_tree && !p->reaped) /* the cheap case: no walk */
        return kill(-p->pid, signo) < 0 ? errno_to_al(errno) : AL_OK;
    struct pinfo *m = malloc(PROC_MAX_TREE * sizeof *m);
    size_t n = 0;
    int rc = m ? proc_tree(p, m, &n) : AL_E_NOMEM;
    int delivered = 0, last = ESRCH, group = m && rc != AL_E_NOENT && group_alive(p, m, n);
    if (group)
        note_kill(kill(-p->pid, signo), &delivered, &last);
    for (size_t i = 0; whole_tree && i < n; i++)
        if (!group || m[i].pgrp != p->pid) /* the group was signalled as a whole */
            note_kill(kill(m[i].pid, signo), &delivered, &last);
    free(m);
    if (!delivered)
        return rc == AL_E_NOENT ? rc : errno_to_al(last);
    return rc; /* a failed or partial walk, though something was signalled */
}

static int in_list(const pid_t *l, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (l[i] == pid)
            return 1;
    return 0;
}

int proc_kill_tree(struct proc *p)
{
    if (!proc_ok(p))
        return AL_E_INVAL;
    struct pinfo *m = malloc(PROC_MAX_TREE * sizeof *m);
    pid_t *stopped = malloc(PROC_MAX_TREE * sizeof *stopped);
    size_t nstopped = 0;
    int rc = AL_OK, group = 0;
    if (!m || !stopped) {
        rc = AL_E_NOMEM;
        (void)status_poll(p);
        group = !p->reaped; /* the group is killed in any case */
    } else {
        /* freeze: a stopped process cannot fork behind our back */
        size_t n = 0;
        rc = proc_tree(p, m, &n);
        group = rc != AL_E_NOENT && group_alive(p, m, n);
        if (group)
            (void)kill(-p->pid, SIGSTOP); /* ESRCH: the group is gone */
        for (int round = 0; round < PROC_TREE_ROUNDS && rc != AL_E_NOENT; round++) {
            if (round > 0) {
                int trc = proc_tree(p, m, &n);
                if (trc != AL_OK)
                    rc = trc;
            }
            size_t added = 0;
            for (size_t i = 0; i < n && nstopped < PROC_MAX_TREE; i++) {
                if (in_list(stopped, nstopped, m[i].pid))
                    continue;
                (void)kill(m[i].pid, SIGSTOP); /* ESRCH: it just ended */
                stopped[nstopped++] = m[i].pid;
                added++;
            }
            if (added == 0)
                break;
        }
    }
    /* the keeper is spared: it reaps the tree, reports the command's
     * status and exits once it has no child left */
    int delivered = 0, last = ESRCH;
    if (group)
        note_kill(kill(-p->pid, SIGKILL), &delivered, &last);
    for (size_t i = 0; i < nstopped; i++)
        note_kill(kill(stopped[i], SIGKILL), &delivered, &last);
    free(m);
    free(stopped);
    if (!delivered && rc == AL_OK)
        rc = errno_to_al(last);
    return rc;
}
