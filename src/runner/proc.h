/*
 * proc: start an agent's process in a PTY or with three pipes, and act on
 * it afterwards (resize, signals, stdin EOF, reaping). Sandbox side only.
 *
 * Data model: a struct proc is a plain value owned by the caller. It names
 * the command (pid, which is also its process-group and session id, since
 * it calls setsid()), its keeper (our child, the command's parent) and the
 * parent's ends of its stdio:
 *   PTY mode:   fd_in == fd_out == the PTY master, fd_err == -1;
 *   pipe mode:  fd_in writes the child's stdin, fd_out / fd_err read its
 *               stdout / stderr.
 * plus fd_status, on which the keeper reports the command's exit.
 * Every parent-side fd is O_NONBLOCK and O_CLOEXEC; nothing else stays
 * open after proc_spawn returns. proc_close closes the fds, never the
 * process: end the process first with proc_signal / proc_kill_tree.
 * There is no event loop here: the caller polls the fds.
 *
 * The process tree of a command (docs/protocol.md, section 5) is every
 * process started from it, directly or not, whatever session or group it
 * moved to and whether or not its parent still runs, until it exits; it
 * outlives the command. The keeper holds it: a child subreaper (prctl
 * PR_SET_CHILD_SUBREAPER) in a session of its own, so every orphan of the
 * tree is re-parented to it and the tree is exactly the keeper's
 * descendants, read from /proc. It reaps them, sends the command's waitpid
 * status on fd_status (then a SIGCHLD to its parent), and exits when it
 * has no child left, the tree being empty; it dies with its parent
 * (PR_SET_PDEATHSIG). Its pid is ours until we reap it, so a walk from it
 * never reaches an unrelated process through a reused pid. Signals never
 * reach it (it blocks them all); the caller reaps it (waitpid(-1) is fine:
 * then tell proc_child_reaped).
 *
 * What the child receives (the runner holds no secret; DESIGN.md, Trust):
 * stdio only (every fd >= 3 closed), default signal dispositions and an
 * empty signal mask, its own session (and, in PTY mode, the slave as its
 * controlling tty, already sized), optionally another uid/gid with no
 * supplementary group but gid, and an environment built from nothing:
 *   names in env_allow taken from the runner's environment ("LC_*" ends
 *   in '*': every name with that prefix), then spec->env (which wins over
 *   inherited names; a later duplicate wins over an earlier one), then
 *   TERM (see struct proc_spec).
 *
 * Exec errors are reported synchronously: the child writes the failing
 * step and errno to a close-on-exec pipe, the parent reaps the keeper
 * (which reaped the child) and returns the error, so a bad command is an
 * error, not a zombie.
 *
 * Writing to fd_in in pipe mode after the child closed its stdin raises
 * SIGPIPE in the caller: the runner ignores SIGPIPE and sees EPIPE.
 */
#ifndef AL_PROC_H
#define AL_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_DEFAULT_TERM "xterm-256color"
#define PROC_MAX_ENV_ALLOW 128            /* names (or prefixes) in env_allow */
#define PROC_MAX_INHERIT 256              /* variables taken from the runner's env */
#define PROC_MAX_PATH_DIRS 128            /* PATH entries searched for argv[0] */
#define PROC_EXEC_TIMEOUT_MS 10000        /* the child must exec (or fail) within */
#define PROC_MAX_TREE 4096                /* processes one tree signal reaches */
#define PROC_MAX_SCAN 65536               /* /proc entries read per tree walk */
#define PROC_TREE_ROUNDS 16               /* freeze-and-rescan rounds in a tree kill */
#define PROC_MAX_WRAP 128                 /* entries of a wrapper's argv prefix */
#define PROC_WRAP_SIGNAL_BASE 128         /* a wrapper's exit code 128 + N: signal N ended it */
#define PROC_KEEPER_NAME "airlock-keeper" /* the keeper's name (comm, 15 bytes at most) */

enum proc_mode { PROC_PTY = 0, PROC_PIPES = 1 };

struct proc_spec {
    enum proc_mode mode;
    /* argv[0] is looked up in the PATH of the child's environment (or
     * "/bin:/usr/bin" when it has none) unless it contains a '/'. At most
     * AL_MAX_ARGV entries of at most AL_MAX_STR bytes each. */
    const char *const *argv;
    /* "NAME=value" entries the caller adds (from the OPEN frame); at most
     * AL_MAX_ENV, each at most AL_MAX_STR bytes; may be NULL. */
    const char *const *env;
    /* Names copied from the runner's environment; "PFX*" copies every
     * name starting with PFX. NULL: nothing is inherited. */
    const char *const *env_allow;
    /* The environment env_allow reads; NULL: the process's environ. */
    const char *const *parent_env;
    /* Working directory of the child (entered after dropping privileges);
     * NULL or "": unchanged. A failing chdir fails the spawn. */
    const char *cwd;
    /* TERM. PTY mode: term, else a TERM= in env, else PROC_DEFAULT_TERM.
     * Pipe mode: term, else a TERM= in env, else an allowlisted TERM,
     * else none. At most AL_MAX_TERM printable bytes. */
    const char *term;
    /* PTY size in cells, 1..AL_MAX_COLS x 1..AL_MAX_ROWS (PTY mode only;
     * ignored in pipe mode). */
    uint16_t cols, rows;
    /* --agent-user: when set_user, the child calls setgroups(1, &gid),
     * setgid(gid), setuid(uid) before chdir and exec (and checks it cannot
     * regain root). */
    uid_t uid;
    gid_t gid;
    int set_user;
    /* A wrapper (the agent's jail): when set, the resolved command (the
     * first executable candidate for argv[0]) is appended to wrap, then
     * argv[1..], and wrap[0] (an absolute path) is executed instead. At
     * most PROC_MAX_WRAP entries. wrap_fd (>= 3, or -1) stays open in the
     * child under the same number, for the wrapper to read. */
    const char *const *wrap;
    int wrap_fd;
    /* RLIMIT_DATA of the command (and what it starts), set in the child
     * just before exec, so that it never bounds the runner itself (nor its
     * sanitizer's shadow memory); 0: unchanged. */
    uint64_t max_data;
};

struct proc {
    pid_t pid;       /* the command; also its process-group and session id */
    pid_t keeper;    /* our child, the command's parent, the tree's subreaper */
    int fd_status;   /* the keeper's report of the command's exit; -1 once read */
    int keeper_gone; /* the keeper was reaped: the tree is empty */
    int fd_in;       /* write end for stdin (PTY: the master); -1 once closed */
    int fd_out;      /* read end of stdout (PTY: the same master fd) */
    int fd_err;      /* read end of stderr (pipes); -1 in PTY mode */
    enum proc_mode mode;
    int reaped;  /* proc_reap saw the exit: status below is final */
    int status;  /* the waitpid status once reaped */
    int wrapped; /* started through spec->wrap (signals skip the wrapper) */
};

/* Start the process. 0, or AL_E_INVAL (bad spec), AL_E_LIMIT (more than
 * PROC_MAX_INHERIT allowlisted variables, more than PROC_MAX_PATH_DIRS
 * PATH entries), AL_E_NOENT (program or cwd not found), AL_E_PERM (not
 * executable, not allowed, user switch refused), AL_E_TOOBIG (E2BIG),
 * AL_E_NOMEM, AL_E_TIMEOUT (the child did not exec in time) or AL_E_IO;
 * err (if errcap > 0) then says why, e.g. "cannot run 'foo': No such file
 * or directory". On error *out has pid -1, no fd (-1) and no child left
 * (a child that failed was reaped). */
int proc_spawn(const struct proc_spec *spec, struct proc *out, char *err, size_t errcap);

/* Set the PTY size (TIOCSWINSZ; the foreground group gets SIGWINCH).
 * AL_E_STATE in pipe mode, AL_E_INVAL for sizes out of bounds. */
int proc_resize(struct proc *p, uint16_t cols, uint16_t rows);

/* Send signo (1..NSIG-1) to the command's process group; with whole_tree,
 * also to every process of the tree (the keeper's descendants, found by
 * reading /proc), so processes that left the group (setsid, setpgid) or
 * lost their parent are reached, also after the command has exited. The
 * group is signalled while the command runs, and after it exited while a
 * process of the tree is still in it. AL_E_NOENT when nothing was left
 * to signal, AL_E_PERM when nothing could be signalled. A walk that
 * failed (no /proc: AL_E_NOENT; AL_E_NOMEM) or stopped at PROC_MAX_TREE /
 * PROC_MAX_SCAN (AL_E_LIMIT) is reported after signalling the group and
 * whatever was found. */
int proc_signal(struct proc *p, int signo, int whole_tree);

/* SIGKILL to the group and every process of the tree, also after the
 * command has exited. The tree is frozen first (SIGSTOP, rescanned until
 * no new process appears, at most PROC_TREE_ROUNDS times) so that nothing
 * forks away during the walk. The keeper is spared: it reports the
 * command's status and exits once it has reaped the tree. Errors as
 * proc_signal with whole_tree; a running command's group is killed in any
 * case. */
int proc_kill_tree(struct proc *p);

/* End the child's stdin. Pipes: close fd_in (it becomes -1). PTY: write
 * the line discipline's VEOF character (normally ^D) to the master; fd_in
 * stays open, as it is also fd_out. A canonical-mode reader at the start
 * of a line then reads EOF; after a partial line the first VEOF only
 * delivers that line (call again), and a program in raw mode just reads
 * the byte. AL_E_AGAIN when the PTY has no room right now. */
int proc_close_stdin(struct proc *p);

/* The command's exit, as its keeper reported it on fd_status (poll it, or
 * call this on SIGCHLD; never blocks). 0 once the command has exited:
 * *exit_code is its exit status (0..255), or -1 when a signal killed it,
 * then *signo is the signal (else 0) and *core is 1 if it dumped core.
 * AL_E_AGAIN while it runs; AL_E_NOENT if the keeper ended without
 * reporting (something SIGKILLed it). Reaps the keeper if it has exited.
 * Any out pointer may be NULL.
 * Wrapped (the jail), an exit code 128 + N (N a signal) reads as signal N,
 * as shells report it.
 * Once reaped, further calls return the same status. */
int proc_reap(struct proc *p, int *exit_code, int *signo, int *core);

/* Decode a waitpid status of p's command as proc_reap does. */
void proc_decode(const struct proc *p, int status, int *exit_code, int *signo, int *core);

/* The caller reaped pid itself (waitpid(-1)): if it was p's keeper, p's
 * tree is empty and its pid no longer p's to signal. */
void proc_child_reaped(struct proc *p, pid_t pid);

/* Close the parent's fds (not the process). Safe to call twice. */
void proc_close(struct proc *p);

#endif
