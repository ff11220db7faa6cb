/*
 * cli_err: the exit codes of `airlock` (listed in `airlock --help`) and
 * how HTTP answers map to them and to messages a person understands.
 * A command run with `run` or `attach` exits with the terminal's own
 * status instead (128 + signal when it was killed).
 */
#ifndef CLI_ERR_H
#define CLI_ERR_H

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 64,     /* bad command line or configuration */
    CLI_EXIT_REFUSED = 65,   /* the server refused the request (400, 409, 429) */
    CLI_EXIT_NOTFOUND = 66,  /* no such terminal, sandbox or file (404) */
    CLI_EXIT_DOWN = 69,      /* the server cannot be reached (refused, timeout, lost) */
    CLI_EXIT_OTHER = 70,     /* the server failed (5xx) or something unexpected */
    CLI_EXIT_PROTO = 76,     /* the server broke the protocol or answered nonsense */
    CLI_EXIT_AUTH = 77,      /* the API key is missing or wrong (401) */
    CLI_EXIT_FORBIDDEN = 78, /* the key's role may not do this (403) */
};

#define CLI_EXIT_SIGNAL_BASE 128 /* 128 + signal number, as shells do */

/* The exit code for an HTTP status that is not a success. */
int cli_exit_of_status(unsigned status);
/* A sentence for an HTTP status (what it means for the user). */
const char *cli_status_hint(unsigned status);

/* A usage error: "airlock: " fmt (with arg, "" when NULL) " (see airlock
 * --help)" on stderr; returns CLI_EXIT_USAGE. */
int cli_err_usage(const char *fmt, const char *arg);

#endif
