/*
 * proc_signal: signals to a command, its group and its tree (see proc.h,
 * proc_signal and proc_kill_tree). The group while it can still be
 * reached, the tree's members (proc_tree.c) by pid; a wrapped command's
 * wrapper and the namespace's init are skipped; a tree kill freezes the
 * tree first. The keeper itself is never signalled. Signals go by pid: a
 * pid could in theory be reused between the scan and the kill
 * (microseconds apart); the walk's root cannot, being our unreaped child.
 *
 * Not here: the walk (proc_tree.c), the command's status (proc_exit.c).
 */
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "al_err.h"
#include "proc_internal.h"

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
        return rc == AL_E_NOENT ? rc : al_err_from_errno(last);
    return rc;
}

int proc_signal(struct proc *p, int signo, int whole_tree)
{
    if (!proc_ok(p) || signo < 1 || signo >= NSIG)
        return AL_E_INVAL;
    if (p->wrapped)
        return signal_wrapped(p, signo, whole_tree);
    (void)proc_status_poll(p);
    if (!whole_tree && !p->reaped) /* the cheap case: no walk */
        return kill(-p->pid, signo) < 0 ? al_err_from_errno(errno) : AL_OK;
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
        return rc == AL_E_NOENT ? rc : al_err_from_errno(last);
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
        (void)proc_status_poll(p);
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
        rc = al_err_from_errno(last);
    return rc;
}
