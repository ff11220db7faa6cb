/*
 * cli_replay: play an asciicast recording (v2 or v3, read by castread,
 * src/common/castread.c) on stdout with its timing, scaled by a
 * speed factor and with long pauses cut to an idle limit; SIGINT, SIGTERM
 * or SIGHUP stop it cleanly (attributes reset, cursor shown). Also the
 * replay command, which finds the recording (a file, or the server's).
 */
#ifndef CLI_REPLAY_H
#define CLI_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct castread;

#define CLI_REPLAY_MAX_SPEED 1000.0

struct cli_replay_opts {
    double speed;          /* > 0; 1 = real time */
    int64_t idle_limit_us; /* > 0: pauses longer than this are cut to it; 0: the
                              recording's own idle_time_limit, if any */
};

/* 0 when played to the end, 128 + signal when interrupted, or a CLI_EXIT_*
 * code with the reason in why. The reader stays the caller's. */
int cli_replay(uv_loop_t *loop, struct castread *r, const struct cli_replay_opts *o, char *why,
               size_t cap);

struct cli_app;

/* `airlock replay FILE|TERMINAL [--speed X] [--idle-limit S]` (argv after
 * "replay"): a file, or a terminal's recording downloaded from the server,
 * played with cli_replay(). Its exit code. */
int cli_replay_cmd(struct cli_app *a, int argc, char **argv);

#endif
