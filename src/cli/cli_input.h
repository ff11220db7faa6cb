/*
 * cli_input: what the user types (or a file piped to stdin) on its way
 * to the terminal, so that each byte reaches it exactly once across
 * dropped connections.
 *
 * Two buffers, both bounded:
 *   typed --cli_input_hold--> held --cli_input_sent--> copy --acked--> gone
 * - held: bytes not given to the endpoint yet: typed while disconnected,
 *   before this connection's ROLE, or waiting for credit. At most
 *   held_max bytes are accepted from the user (cli_input_hold() says how
 *   many it took: fewer means the buffer is full).
 * - copy: the bytes given to the endpoint that the host has not
 *   acknowledged, with the stdin offset of the first. The endpoint drops
 *   unsent input when a ROLE arrives (docs/protocol.md §9) and a cut loses
 *   what was in flight; on the next ROLE the copy tells which bytes the
 *   host lacks and the endpoint no longer has, and they go back in front
 *   of held, to be sent again.
 *
 * Pure: no I/O, no clock. Offsets are the stream's byte offsets (64-bit).
 */
#ifndef CLI_INPUT_H
#define CLI_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct cli_input {
    uint8_t *held;
    size_t held_len, held_max, held_cap; /* cap = held_max + copy_max */
    uint8_t *copy;
    size_t copy_len, copy_max;
    uint64_t copy_off; /* stdin offset of copy[0] */
};

/* AL_OK or AL_E_NOMEM / AL_E_INVAL (a zero size). */
int cli_input_init(struct cli_input *in, size_t held_max, size_t copy_max);
void cli_input_free(struct cli_input *in);

/* Take typed bytes into held; returns how many fit (the rest is the
 * caller's to report as dropped). */
size_t cli_input_hold(struct cli_input *in, const uint8_t *p, size_t n);

/* The held bytes that may go to the endpoint now: all of held, limited by
 * the room in the copy. Returns their count, *p points at them. */
size_t cli_input_peek(const struct cli_input *in, const uint8_t **p);

/* The first n held bytes were written to the endpoint at stdin offset
 * off: they move to the copy. n is capped at what cli_input_peek()
 * allowed. If off does not follow the copy (the stream moved on), the
 * copy restarts at off. */
void cli_input_sent(struct cli_input *in, uint64_t off, size_t n);

/* The host holds every byte below ack: drop them from the copy. */
void cli_input_acked(struct cli_input *in, uint64_t ack);

/*
 * A ROLE for this connection: stdin goes on at in_next, and the endpoint
 * still holds (and will send again) what it has from in_next up to
 * ep_end (its stream end after the ROLE: it keeps what it had sent, drops
 * what it had not).
 * writer: copied bytes below in_next reached the host; those in
 * [in_next, ep_end) stay in the copy (the endpoint resends them); the
 * rest, which the endpoint dropped, go back to the front of held, before
 * anything typed since. Returns how many went back.
 * viewer: held and the copy's bytes from in_next on are dropped (a
 * viewer's keystrokes never leave this side); returns how many.
 */
size_t cli_input_role(struct cli_input *in, uint64_t in_next, uint64_t ep_end, int writer);

size_t cli_input_held(const struct cli_input *in);
size_t cli_input_unacked(const struct cli_input *in);

#endif
