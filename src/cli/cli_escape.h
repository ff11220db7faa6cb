/*
 * cli_escape: the detach sequence of an interactive attach, as ssh's:
 * at the start of a line (after Enter, or first thing), the escape
 * character (default '~') followed by
 *   .   detach (the terminal keeps running)
 *   t   ask to become the writer (take over)
 *   ?   show this list
 *   ~   send one escape character
 * Anything else sends the escape character and that byte.
 *
 * Pure: bytes typed in, bytes to send and actions out. State is one
 * struct the caller owns.
 */
#ifndef CLI_ESCAPE_H
#define CLI_ESCAPE_H

#include <stddef.h>
#include <stdint.h>

enum cli_esc_action {
    CLI_ESC_NONE = 0,
    CLI_ESC_DETACH,
    CLI_ESC_TAKEOVER,
    CLI_ESC_HELP,
};

struct cli_escape {
    int ch;         /* the escape character, or -1: none */
    int line_start; /* the last byte ended a line (or nothing was typed yet) */
    int pending;    /* the escape character was seen at a line start */
};

void cli_escape_init(struct cli_escape *e, int ch);

/*
 * Filter in[0..n) into out (cap >= n + 1 is always enough). Stops after
 * the first byte that triggers an action: *used tells how much of in was
 * consumed, the return value is the bytes written to out, *action what to
 * do (after sending out).
 */
size_t cli_escape_feed(struct cli_escape *e, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                       size_t *used, enum cli_esc_action *action);

#endif
