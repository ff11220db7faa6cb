/*
 * cli_outq: see cli_outq.h.
 *
 * A piece is one allocation: its header then its bytes. Pieces are never
 * merged or split, so a tag always covers whole pieces and dropping the
 * pieces not begun never cuts one in the middle.
 */
#include "cli_outq.h"

#include <stdlib.h>
#include <string.h>

#include "al_err.h"

struct cli_outq_seg {
    struct cli_outq_seg *next;
    int tag;
    size_t len, pos; /* bytes held, bytes of them written */
    uint8_t data[];
};

void cli_outq_init(struct cli_outq *q, size_t max)
{
    q->head = q->tail = NULL;
    q->len = 0;
    q->max = max;
}

static void credit_add(size_t credit[CLI_OUTQ_TAGS], int tag, size_t n)
{
    if (credit && tag >= 0 && tag < CLI_OUTQ_TAGS)
        credit[tag] += n;
}

size_t cli_outq_clear(struct cli_outq *q, size_t credit[CLI_OUTQ_TAGS])
{
    size_t dropped = q->len;
    struct cli_outq_seg *s = q->head;
    while (s) {
        struct cli_outq_seg *next = s->next;
        credit_add(credit, s->tag, s->len - s->pos);
        free(s);
        s = next;
    }
    q->head = q->tail = NULL;
    q->len = 0;
    return dropped;
}

void cli_outq_free(struct cli_outq *q)
{
    (void)cli_outq_clear(q, NULL);
}

int cli_outq_push(struct cli_outq *q, const uint8_t *p, size_t n, int tag)
{
    if (tag != CLI_OUTQ_NOCREDIT && (tag < 0 || tag >= CLI_OUTQ_TAGS))
        return AL_E_INVAL;
    if (n == 0)
        return AL_OK;
    if (n > q->max - q->len)
        return AL_E_TOOBIG;
    struct cli_outq_seg *s = malloc(sizeof *s + n);
    if (!s)
        return AL_E_NOMEM;
    s->next = NULL;
    s->tag = tag;
    s->len = n;
    s->pos = 0;
    memcpy(s->data, p, n);
    if (q->tail)
        q->tail->next = s;
    else
        q->head = s;
    q->tail = s;
    q->len += n;
    return AL_OK;
}

size_t cli_outq_len(const struct cli_outq *q)
{
    return q->len;
}

size_t cli_outq_room(const struct cli_outq *q)
{
    return q->max - q->len;
}

int cli_outq_iov(const struct cli_outq *q, struct iovec *iov, int cap)
{
    int n = 0;
    for (const struct cli_outq_seg *s = q->head; s && n < cap; s = s->next) {
        iov[n].iov_base = (void *)(s->data + s->pos);
        iov[n].iov_len = s->len - s->pos;
        n++;
    }
    return n;
}

void cli_outq_advance(struct cli_outq *q, size_t n, size_t credit[CLI_OUTQ_TAGS])
{
    while (n > 0 && q->head) {
        struct cli_outq_seg *s = q->head;
        size_t k = s->len - s->pos;
        if (k > n)
            k = n;
        s->pos += k;
        q->len -= k;
        n -= k;
        credit_add(credit, s->tag, k);
        if (s->pos == s->len) {
            q->head = s->next;
            if (!q->head)
                q->tail = NULL;
            free(s);
        }
    }
}

size_t cli_outq_drop_unstarted(struct cli_outq *q, size_t credit[CLI_OUTQ_TAGS])
{
    struct cli_outq_seg *keep = q->head && q->head->pos > 0 ? q->head : NULL;
    struct cli_outq_seg *s = keep ? keep->next : q->head;
    size_t dropped = 0;
    while (s) {
        struct cli_outq_seg *next = s->next;
        credit_add(credit, s->tag, s->len);
        dropped += s->len;
        free(s);
        s = next;
    }
    if (keep)
        keep->next = NULL;
    q->head = q->tail = keep;
    q->len -= dropped;
    return dropped;
}
