/*
 * cli_outq: bytes on their way to a local descriptor (the screen, stdout,
 * stderr) that may not take them now. Pure: no I/O, no clock; the caller
 * writes what cli_outq_iov() shows and reports it with cli_outq_advance().
 *
 * Each queued piece carries a tag: the stream whose flow-control credit
 * its bytes hold (0 .. CLI_OUTQ_TAGS-1), or CLI_OUTQ_NOCREDIT (a snapshot,
 * a status line). Credit is reported back only for bytes actually written
 * (or dropped on purpose), so the caller grants the server credit for
 * bytes delivered, never for bytes merely received (docs/protocol.md §6).
 */
#ifndef CLI_OUTQ_H
#define CLI_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum {
    CLI_OUTQ_NOCREDIT = -1,
    CLI_OUTQ_TAGS = 4,    /* credit tags 0..3 (the protocol's streams) */
    CLI_OUTQ_IOV_MAX = 64 /* pieces handed to one writev() */
};

struct cli_outq_seg;

/* Data model: a FIFO of pieces, each a malloc'd copy of one event's bytes;
 * the head piece's first `pos` bytes are written already. len counts the
 * bytes not yet written, at most max. */
struct cli_outq {
    struct cli_outq_seg *head, *tail;
    size_t len, max;
};

void cli_outq_init(struct cli_outq *q, size_t max);
/* Drop everything (no credit reported). */
void cli_outq_free(struct cli_outq *q);

/* Queue a copy of p[0..n). AL_OK; AL_E_TOOBIG when it would take the queue
 * past max (nothing queued); AL_E_NOMEM; AL_E_INVAL for a bad tag. n == 0
 * queues nothing. */
int cli_outq_push(struct cli_outq *q, const uint8_t *p, size_t n, int tag);

/* Bytes not yet written. */
size_t cli_outq_len(const struct cli_outq *q);
/* Bytes that may still be pushed. */
size_t cli_outq_room(const struct cli_outq *q);

/* Fill iov (at most cap entries) with the unwritten bytes in order;
 * returns the number of entries (0: empty). */
int cli_outq_iov(const struct cli_outq *q, struct iovec *iov, int cap);

/* n bytes from the front were written: they leave the queue, and
 * credit[tag] grows by the bytes of each tag among them. n larger than
 * the queue is capped. credit may be NULL. */
void cli_outq_advance(struct cli_outq *q, size_t n, size_t credit[CLI_OUTQ_TAGS]);

/* Drop every piece nothing of which was written yet (what a fresh
 * snapshot supersedes); the rest of a piece begun stays, so that a
 * half-written escape sequence is completed. credit as for advance.
 * Returns the bytes dropped. */
size_t cli_outq_drop_unstarted(struct cli_outq *q, size_t credit[CLI_OUTQ_TAGS]);

/* Drop everything, begun or not (the descriptor is gone). Returns the
 * bytes dropped; credit as for advance. */
size_t cli_outq_clear(struct cli_outq *q, size_t credit[CLI_OUTQ_TAGS]);

#endif
