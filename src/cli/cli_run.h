/*
 * cli_run: `airlock run SANDBOX [--pipe] [--cwd DIR] [--env NAME=VALUE]...
 * [--proxy NAME]... -- CMD ARGS...`: a terminal started with POST
 * /v1/terminals (pipes with --pipe or when this side is not a terminal;
 * else a PTY of the local size and TERM; "proxy": the credential proxy's
 * upstreams NAME..., docs/proxy.md, checked by the server), attached to at
 * once (cli_attach), and closed when its command is over (its row and
 * recording stay). A refusal (an upstream airlockd does not have: 400) is
 * the server's one line.
 */
#ifndef CLI_RUN_H
#define CLI_RUN_H

struct cli_app;

/* The command (argv after "run"): the command's exit status (128 + N if
 * killed by signal N), 0 after a detach, or a CLI_EXIT_* code. */
int cli_run_cmd(struct cli_app *a, int argc, char **argv);

#endif
