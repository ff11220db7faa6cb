/*
 * proc_exit: the command's end (see proc.h, proc_reap). The keeper sends
 * the command's waitpid status on fd_status; proc_status_poll takes it
 * (once: proc->reaped, proc->status), proc_keeper_poll notes the keeper's
 * own end (the tree is then empty), proc_decode reads a status as an exit
 * code or a signal, a wrapper's 128 + N included.
 *
 * Not here: starting the process (proc.c), signalling it (proc_signal.c).
 */
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "al_err.h"
#include "proc_internal.h"

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
void proc_keeper_poll(struct proc *p)
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
int proc_status_poll(struct proc *p)
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
    proc_close_fd(&p->fd_status); /* one status per command */
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
    int rc = proc_status_poll(p);
    if (rc != AL_OK)
        return rc;
    proc_keeper_poll(p);
    proc_decode(p, p->status, exit_code, signo, core);
    return AL_OK;
}

void proc_child_reaped(struct proc *p, pid_t pid)
{
    if (p && pid > 1 && pid == p->keeper)
        p->keeper_gone = 1;
}
