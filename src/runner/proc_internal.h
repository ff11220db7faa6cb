/*
 * proc_internal: the insides of the process module (proc.h), shared by
 * proc.c (spawn, the parent's fds), proc_plan.c (the checks and the plan),
 * proc_keeper.c (after fork), proc_exit.c (the command's status),
 * proc_tree.c (/proc walks) and proc_signal.c. Nothing else includes it.
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
 * A tree walk (proc_tree) fills an array of struct pinfo that its caller
 * owns (PROC_MAX_TREE entries).
 */
#ifndef AL_PROC_INTERNAL_H
#define AL_PROC_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include "al_limits.h"
#include "proc.h"

#define PROC_SHELL "/bin/sh" /* runs scripts without #! (as execvp) */
#define PROC_SHOWN_MAX 256   /* bytes of a name quoted in a message */

/* ---- the plan (proc_plan.c) ----------------------------------------------- */

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
    uint64_t max_data; /* RLIMIT_DATA set just before exec (0: unchanged) */
    long maxfd;        /* fds below it are closed one by one as a last resort */
};

/* Copy s for a message: bounded, control bytes shown as '?'. */
void proc_shown(char *dst, size_t cap, const char *s);
/* Check the spec (AL_E_INVAL, err saying what is wrong), then fill *pl;
 * on error nothing is left to free. */
int proc_plan_build(const struct proc_spec *s, struct plan *pl, char *err, size_t errcap);
void proc_plan_free(struct plan *pl);

/* ---- after fork (proc_keeper.c) ------------------------------------------- */

enum child_step {
    STEP_SETSID = 1,
    STEP_CTTY,
    STEP_STDIO,
    STEP_SIGNALS,
    STEP_USER,
    STEP_CHDIR,
    STEP_LIMITS,
    STEP_EXEC,
    STEP_KEEPER,
};

struct child_report {
    int step; /* enum child_step */
    int err;  /* errno */
};

/* The keeper's body: never returns. stdio[0..2] become the command's
 * 0, 1, 2 (pty: stdio[0] is the slave); errfd is the error pipe, statfd
 * the status pipe, parent our pid. */
_Noreturn void proc_keeper_run(struct plan *pl, const int stdio[3], int pty, int errfd, int statfd,
                               pid_t parent);

/* ---- the parent (proc.c, proc_exit.c) -------------------------------------- */

static inline int proc_ok(const struct proc *p)
{
    return p && p->pid > 1;
}
/* Close *fd if open and set it to -1. */
void proc_close_fd(int *fd);
/* Take the command's status if the keeper has sent it (see proc_exit.c). */
int proc_status_poll(struct proc *p);
/* Note the keeper's end if it has exited. */
void proc_keeper_poll(struct proc *p);

/* ---- process trees (proc_tree.c) ------------------------------------------ */

struct pinfo {
    pid_t pid, ppid, pgrp, sid;
};

/* The tree of p into m[0..*n) (at most PROC_MAX_TREE; never the keeper
 * itself), after taking the command's status if it came: AL_E_NOENT when
 * the keeper is gone. */
int proc_tree(struct proc *p, struct pinfo *m, size_t *n);

#endif
