/*
 * cli_attach: one terminal attached to the local one (or to local stdio in
 * pipe mode), over airlock.v1 relay sessions with airlockd, until the
 * terminal exits, the user detaches, a signal arrives or the server stays
 * out of reach. The protocol itself is src/common/endpoint.c's: this is the
 * glue between it, the WebSocket (cli_net) and the local descriptors.
 * Also the attach command, and the options and start that run shares.
 */
#ifndef CLI_ATTACH_H
#define CLI_ATTACH_H

#include <stdint.h>
#include <uv.h>

#include "cli_net.h"

enum {
    CLI_ESCAPE_DEFAULT = '~',
    CLI_RETRY_FOR_DEFAULT_S = 300, /* how long to keep reconnecting */
    /* keystrokes kept while the connection is down (or before the server
     * says this client writes); more are dropped, and a status line says so */
    CLI_HELD_INPUT_MAX = 16 << 10,
    /* interactive only: after the end, how long the local terminal may take
     * no output at all before what is left is dropped */
    CLI_DRAIN_STALL_S = 10,
};

struct cli_attach_opts {
    const char *term_id;
    int pipe_mode; /* the terminal has pipes: stdout/stderr separate */
    int read_only; /* ?mode=read: observe only */
    int escape;    /* the escape character, -1 for none */
    uint64_t retry_for_ms;
    uint64_t ping_ms;    /* a PING after this long (0: EP_DEFAULT_PING_US) */
    int quiet;           /* no status lines but errors (pipe mode runs) */
    int forward_signals; /* SIGINT/SIGTERM/SIGHUP go to the terminal once */
};

/*
 * Run the session on loop until it ends. *exit_status is what the CLI
 * should exit with: the terminal's exit code (128 + signal if killed), 0
 * after a detach, 128 + signal when the CLI was signalled, or a
 * CLI_EXIT_* code (cli_err.h) on failure. *detached is set when the
 * terminal was left running. Returns AL_OK or AL_E_NOMEM.
 */
int cli_attach(uv_loop_t *loop, struct cli_net *net, const struct cli_attach_opts *o,
               int *exit_status, int *detached);

/* ---- the attach command (and what run shares of it) ---------------------- */

struct cli_app;

/* Options of attach and run. */
struct cli_attach_args {
    int read_only, escape, pipe;
    uint64_t retry_for_ms;
    uint64_t ping_ms; /* --ping-interval; 0: the default */
};

/* `airlock attach [SANDBOX/]TERMINAL ...` (argv after "attach"): the
 * terminal's exit status, 0 after a detach, or a CLI_EXIT_* code. */
int cli_attach_cmd(struct cli_app *a, int argc, char **argv);
/* Options shared by attach and run; 1 when argv[*i] was one of them
 * (*i then at its value), with *err set to the exit code of a bad value. */
int cli_attach_opt(struct cli_attach_args *o, int argc, char **argv, int *i, int *err);
/* Attach to terminal id (a pipes terminal when pipe) with aa's options;
 * quiet: errors only. What the command exits with; *detached when the
 * terminal was left running. */
int cli_attach_start(struct cli_app *a, const char *id, int pipe, const struct cli_attach_args *aa,
                     int quiet, int *detached);

#endif
