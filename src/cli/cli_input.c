/*
 * cli_input: see cli_input.h. Both buffers are flat arrays moved with
 * memmove: they hold keystrokes or one credit's worth of piped stdin, so
 * the copies are small next to the network's.
 */
#include "cli_input.h"

#include <stdlib.h>
#include <string.h>

#include "al_err.h"

int cli_input_init(struct cli_input *in, size_t held_max, size_t copy_max)
{
    memset(in, 0, sizeof *in);
    if (held_max == 0 || copy_max == 0)
        return AL_E_INVAL;
    in->held_max = held_max;
    in->held_cap = held_max + copy_max;
    in->copy_max = copy_max;
    in->held = malloc(in->held_cap);
    in->copy = malloc(copy_max);
    if (!in->held || !in->copy) {
        cli_input_free(in);
        return AL_E_NOMEM;
    }
    return AL_OK;
}

void cli_input_free(struct cli_input *in)
{
    free(in->held);
    free(in->copy);
    in->held = in->copy = NULL;
    in->held_len = in->copy_len = 0;
}

size_t cli_input_hold(struct cli_input *in, const uint8_t *p, size_t n)
{
    size_t room = in->held_len < in->held_max ? in->held_max - in->held_len : 0;
    if (n > room)
        n = room;
    memcpy(in->held + in->held_len, p, n);
    in->held_len += n;
    return n;
}

size_t cli_input_peek(const struct cli_input *in, const uint8_t **p)
{
    size_t n = in->held_len, room = in->copy_max - in->copy_len;
    *p = in->held;
    return n < room ? n : room;
}

void cli_input_sent(struct cli_input *in, uint64_t off, size_t n)
{
    const uint8_t *p;
    size_t max = cli_input_peek(in, &p);
    if (n > max)
        n = max;
    if (n == 0)
        return;
    if (in->copy_len == 0 || in->copy_off + in->copy_len != off) {
        in->copy_len = 0;
        in->copy_off = off;
    }
    memcpy(in->copy + in->copy_len, in->held, n);
    in->copy_len += n;
    memmove(in->held, in->held + n, in->held_len - n);
    in->held_len -= n;
}

void cli_input_acked(struct cli_input *in, uint64_t ack)
{
    if (ack <= in->copy_off)
        return;
    uint64_t k = ack - in->copy_off;
    if (k >= in->copy_len) {
        in->copy_len = 0;
        in->copy_off = ack;
        return;
    }
    memmove(in->copy, in->copy + k, in->copy_len - (size_t)k);
    in->copy_len -= (size_t)k;
    in->copy_off = ack;
}

size_t cli_input_role(struct cli_input *in, uint64_t in_next, uint64_t ep_end, int writer)
{
    cli_input_acked(in, in_next); /* below in_next: the host has them */
    if (!writer) {
        size_t dropped = in->held_len + in->copy_len;
        in->held_len = in->copy_len = 0;
        in->copy_off = in_next;
        return dropped;
    }
    /* what the endpoint kept stays in the copy; a host behind the copy's
     * start (it lost state) gets all the endpoint no longer has */
    size_t keep = 0;
    if (ep_end > in->copy_off)
        keep =
            ep_end - in->copy_off < in->copy_len ? (size_t)(ep_end - in->copy_off) : in->copy_len;
    size_t back = in->copy_len - keep;
    /* held_len + copy_len <= held_max + copy_max = held_cap always (hold
     * stops at held_max, the other moves keep the sum), so it fits */
    if (back > in->held_cap - in->held_len)
        back = in->held_cap - in->held_len;
    memmove(in->held + back, in->held, in->held_len);
    memcpy(in->held, in->copy + keep, back);
    in->held_len += back;
    in->copy_len = keep;
    if (keep == 0)
        in->copy_off = ep_end > in_next ? ep_end : in_next;
    return back;
}

size_t cli_input_held(const struct cli_input *in)
{
    return in->held_len;
}

size_t cli_input_unacked(const struct cli_input *in)
{
    return in->copy_len;
}
