/*
 * airlockd_cmd: what every airlockd subcommand shares: its shape (struct
 * airlockd_cmd, one row of a command table), its options (one small table
 * of struct airlockd_opt each), the one error line of a failure, and the
 * values several commands take.
 *
 * Exit codes: 0 success, AIRLOCKD_RC_FAIL a runtime failure,
 * AIRLOCKD_RC_USAGE a usage error; every failure is one line on stderr.
 */
#ifndef AL_AIRLOCKD_CMD_H
#define AL_AIRLOCKD_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum { AIRLOCKD_RC_FAIL = 1, AIRLOCKD_RC_USAGE = 2 };

#define AIRLOCKD_DATA_DEFAULT "./airlock-data"
#define AIRLOCKD_DATA_ENV "AIRLOCK_DATA"
#define AIRLOCKD_DATA_MODE 0700 /* a data directory airlockd creates */

struct airlockd_cmd {
    const char *name; /* "serve", "user add" */
    const char *synopsis;
    const char *summary;
    int (*run)(const struct airlockd_cmd *self, int argc, char **argv);
};

/* A flag and where its value goes: a string pointer, or a bool for a flag
 * without value; a NULL name is the one positional argument. */
struct airlockd_opt {
    const char *name;   /* "--aud"; NULL: the positional argument */
    const char **value; /* receives the argument; NULL for a bool flag */
    bool *flag;         /* set for a bool flag */
};

/* The one error line of a failure: "airlockd[ CMD]: message" on stderr. */
void airlockd_cmd_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "usage: airlockd NAME SYNOPSIS" and the summary. */
void airlockd_cmd_usage(const struct airlockd_cmd *c, FILE *to);

/* -h or --help. */
bool airlockd_cmd_is_help(const char *a);

/* Parse argv[1..argc) against opts. Accepts "--name value" and
 * "--name=value". Returns 0, 1 for --help (printed), or AIRLOCKD_RC_USAGE
 * after the error line. */
int airlockd_cmd_opts(const struct airlockd_cmd *c, int argc, char **argv,
                      const struct airlockd_opt *opts, size_t nopts);

/* --data's default: $AIRLOCK_DATA, else ./airlock-data. */
const char *airlockd_cmd_data_dir(void);

/* A whole decimal number in [lo, hi]; false otherwise. */
bool airlockd_cmd_int(const char *s, long long lo, long long hi, long long *out);

#endif
