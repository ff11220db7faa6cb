/*
 * cli_ls: `airlock ls` (the sandboxes and the terminals, as tables or
 * --json) and the sandboxes' table that `airlock sandbox ls` prints too.
 */
#ifndef CLI_LS_H
#define CLI_LS_H

#include <jansson.h>

struct cli_app;

/* The command (argv after "ls"): its exit code. */
int cli_ls_cmd(struct cli_app *a, int argc, char **argv);
/* The table of a GET /v1/sandboxes answer, on stdout. */
void cli_ls_sandboxes(json_t *arr);

#endif
