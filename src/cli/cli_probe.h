/*
 * cli_probe: `airlock probe`, the check to run first. In order, each step
 * only if the one before it passed:
 *   1. the server: GET /healthz (no key) answers 200;
 *   2. the key: GET /v1/session accepts it (who and which role);
 *   3. the API: GET /v1/sandboxes (each sandbox's link and its RTT) and
 *      GET /v1/terminals (how many, how many running).
 * Each step's round-trip time is measured (one connection per request,
 * so connecting, and TLS for https, are included). The report goes to out
 * as text or as one JSON object (the same on failure, with "error").
 * cli_probe_cmd is the command, on the run's context (cli_app).
 */
#ifndef CLI_PROBE_H
#define CLI_PROBE_H

#include <jansson.h>
#include <stdio.h>

#include "cli_config.h"
#include "cli_net.h"

/* Returns the exit code: 0 all passed; CLI_EXIT_DOWN the server cannot
 * be reached; CLI_EXIT_AUTH the key was refused or none was given;
 * CLI_EXIT_FORBIDDEN, CLI_EXIT_OTHER (it answered, but not healthy),
 * CLI_EXIT_PROTO (an answer this client does not understand). */
int cli_probe(struct cli_net *net, const struct cli_config *cfg, int json, FILE *out);

/* The end of either probe: exit and error (null when 0) into the report,
 * then the report as one JSON object (json) or as text(ctx, out), and the
 * reason on stderr when it failed. */
void cli_probe_finish(json_t *report, int exit, const char *why, int json, FILE *out,
                      void (*text)(const void *ctx, FILE *out), const void *ctx);

struct cli_app;

/* `airlock probe [--json]` (argv after "probe"): cli_probe's exit code. */
int cli_probe_cmd(struct cli_app *a, int argc, char **argv);

#endif
