/*
 * Fuzz target: the answer to a dialing client's upgrade request
 * (src/ws/wsc_upgrade.c), as whatever answers at a runner's --connect
 * address may send it. The first byte sets the size of the pieces the
 * rest is fed in, so that every split of an answer is reached; the key is
 * RFC 6455's example, so the Accept the answer must carry is known.
 * Oracle: no crash or leak; no more than WSCU_HEADER_MAX bytes are taken
 * as the answer; an answer is accepted only if it holds the right Accept
 * and a 101; once decided, the outcome stays; a failure has a reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_limits.h"
#include "wsc_upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static int contains(const uint8_t *d, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(d + i, s, k))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    data++;
    size--;
    struct wscu *u = wscu_new(KEY, AL_SUBPROTOCOL, AL_RUNNER_REPLY_HEADER);
    if (!u)
        abort();
    size_t off = 0, taken = 0;
    enum wscu_state st = WSCU_MORE;
    while (off < size && st == WSCU_MORE) {
        size_t n = size - off < piece ? size - off : piece;
        size_t used = 0;
        st = wscu_feed(u, data + off, n, &used);
        if (used > n)
            abort();
        taken += used;
        if (st == WSCU_MORE && used != n)
            abort();
        off += n;
    }
    if (taken > WSCU_HEADER_MAX)
        abort();
    if (st == WSCU_UPGRADED && (!contains(data, taken, ACCEPT) || wscu_status(u) != 101))
        abort();
    if (st == WSCU_FAILED && !wscu_why(u)[0])
        abort();
    size_t used = 0;
    if (st != WSCU_MORE && (wscu_feed(u, (const uint8_t *)"x", 1, &used) != st || used))
        abort();
    wscu_free(u);
    return 0;
}
