/*
 * airlock-runner: the sandbox side. main() only: the steps of a start, in
 * order, with their exit codes (0 stopped by a signal, 1 failure, 2 usage
 * error). The process's context and the glue around runner.c are the
 * library al_runner (runner_app.h lists its files).
 */
#include <signal.h>
#include <sys/prctl.h>

#include "runner_app.h"
#include "runner_dial.h"
#include "runner_opts.h"

int main(int argc, char **argv)
{
    static struct runner_app app;
    struct runner_app *a = &app;
    int rc = runner_opts_parse(a, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2; /* > 0: --help, printed */
    if (a->connect_url && runner_dial_load_key(a) != 0)
        return 1;
    if (runner_app_confine(a) != 0)
        return 1;
    /* Nothing of ours is readable through /proc by a same-user agent. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Orphans of agents come back to us to be reaped, not to init. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = runner_app_load(a)) != 0)
        return rc;
    if (a->connect_url && runner_dial_setup(a) != 0)
        return 2;
    if ((rc = runner_app_start(a)) != 0)
        return rc;
    runner_app_run(a);
    return 0;
}
