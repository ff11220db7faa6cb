/*
 * runner_opts: airlock-runner's command line, into struct runner_app.
 */
#ifndef AL_RUNNER_OPTS_H
#define AL_RUNNER_OPTS_H

#include <stdint.h>

#include "runner_app.h"

/* Fill a from argv and check the options together. 0; 1 after printing
 * --help on stdout; -1 after one line on stderr (a usage error). */
int runner_opts_parse(struct runner_app *a, int argc, char **argv);

/* A whole decimal number in 0..max; 0, or -1. */
int runner_opts_u64(const char *s, uint64_t max, uint64_t *out);

#endif
