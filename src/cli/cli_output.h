/*
 * cli_output: the attach session's local output (cli_output.c). Private to
 * the session's files (cli_session.h).
 */
#ifndef CLI_OUTPUT_H
#define CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cli_outq.h"

struct cli_session;
struct cli_outfd;

/* One status line on stderr (or the screen), whatever mode the terminal
 * is in. Once the end is decided, lines wait for the screen to drain. */
void cli_output_status(struct cli_session *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Credit back for bytes written (or dropped on purpose). */
void cli_output_grant(struct cli_session *a, const size_t credit[CLI_OUTQ_TAGS]);
/* Queue bytes for fd 1 or 2 (o is a->out[0] or [1]) with their credit tag
 * (the stream, or CLI_OUTQ_NOCREDIT) and write what can go now. */
void cli_output_push(struct cli_session *a, struct cli_outfd *o, const uint8_t *p, size_t n,
                     int tag);
/* Stop waiting for the local side: what it did not take is dropped (and
 * said so, with why, when why is not NULL). */
void cli_output_give_up(struct cli_session *a, const char *why);
/* After the end: restore the modes once the screen has what came before,
 * show the lines of the end, and stop the loop when all is out. Does
 * nothing before the end. */
void cli_output_after_end(struct cli_session *a);
/* The drain timer (interactive, after the end): the screen took nothing
 * for CLI_DRAIN_STALL_S. */
void cli_output_on_drain_stall(uv_timer_t *h);

#endif
