/*
 * proc_keeper: what runs between fork and exec (see proc.h for the keeper
 * and what the child receives). The parent forks the keeper
 * (proc_keeper_run): a child subreaper in a session of its own that forks
 * the command, reports its pid and then its waitpid status on the status
 * pipe, and reaps the tree until it has no child left. The command's
 * child sets up its session, controlling tty, stdio, signals, user and
 * directory, and execs (through the wrapper, or through /bin/sh for a
 * script without #!). Async-signal-safe calls only: a failure goes to the
 * error pipe as a struct child_report {step, errno} (proc_internal.h).
 *
 * Not here: the plan they run from (proc_plan.c), the parent's side of
 * the start (proc.c).
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc_internal.h"

#define PROC_CHILD_EXIT 127  /* exit status of a child that failed */
#define PROC_DIRENT_BUF 4096 /* getdents64 buffer in the child */

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

    /* last before exec: nothing is allocated from here on */
    struct rlimit data = {(rlim_t)pl->max_data, (rlim_t)pl->max_data};
    if (pl->max_data && setrlimit(RLIMIT_DATA, &data) < 0)
        child_fail(errfd, STEP_LIMITS, errno);

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
_Noreturn void proc_keeper_run(struct plan *pl, const int stdio[3], int pty, int errfd, int statfd,
                               pid_t parent)
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
        /* A wrapper (the agent's jail) that ends leaves nothing alive inside:
         * its namespace's init ends with it, and the namespace with that
         * init. But a wrapper killed while it was still setting the jail up
         * (a signal the moment the terminal opened) can leave that init
         * waiting forever for the wrapper it needed, out of reach of the
         * signal (a namespace's init ignores what it has no handler for).
         * It is still in the wrapper's group: the group is killed once the
         * wrapper has ended, seen before it is reaped (WNOWAIT), so that its
         * pid, the group's id, cannot have been reused. */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (pl->nwrap > 0 && waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) == 0 && si.si_pid == cmd)
            (void)kill(-cmd, SIGKILL);
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
