/*
 * cli_escape: see cli_escape.h. Enter is CR or LF (raw mode sends CR).
 */
#include "cli_escape.h"

void cli_escape_init(struct cli_escape *e, int ch)
{
    e->ch = ch;
    e->line_start = 1;
    e->pending = 0;
}

size_t cli_escape_feed(struct cli_escape *e, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                       size_t *used, enum cli_esc_action *action)
{
    size_t o = 0, i = 0;
    *action = CLI_ESC_NONE;
    while (i < n && o + 2 <= cap) {
        uint8_t b = in[i++];
        if (e->pending) {
            e->pending = 0;
            if (b == '.') {
                *action = CLI_ESC_DETACH;
                break;
            }
            if (b == 't') {
                *action = CLI_ESC_TAKEOVER;
                e->line_start = 1;
                break;
            }
            if (b == '?') {
                *action = CLI_ESC_HELP;
                e->line_start = 1;
                break;
            }
            out[o++] = (uint8_t)e->ch;
            if (b == (uint8_t)e->ch) {
                e->line_start = 0;
                continue;
            }
        } else if (e->ch >= 0 && e->line_start && b == (uint8_t)e->ch) {
            e->pending = 1;
            continue;
        }
        out[o++] = b;
        e->line_start = b == '\r' || b == '\n';
    }
    *used = i;
    return o;
}
