/*
 * cli_sandbox: `airlock sandbox add|rm|ls|enroll`. add and rm are the
 * admin's POST and DELETE /v1/sandboxes; ls is cli_ls's table; enroll asks
 * for a reverse sandbox's runner token and prints the airlock-runner
 * command line, or writes DIR/jwks.json (0644) and DIR/token (0600) with
 * --out.
 */
#ifndef CLI_SANDBOX_H
#define CLI_SANDBOX_H

struct cli_app;

/* The command (argv after "sandbox"): its exit code. */
int cli_sandbox_cmd(struct cli_app *a, int argc, char **argv);

#endif
