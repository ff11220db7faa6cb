/*
 * cli_kill: `airlock kill TERMINAL [--signal NAME]`, a signal to a
 * terminal's processes (POST /v1/terminals/ID/kill; TERM by default, a
 * "SIG" prefix dropped).
 */
#ifndef CLI_KILL_H
#define CLI_KILL_H

struct cli_app;

/* The command (argv after "kill"): its exit code. */
int cli_kill_cmd(struct cli_app *a, int argc, char **argv);

#endif
