/*
 * Fuzz target: the runner's screen model, src/runner/vt*.c and vtfilter.c
 * with libvterm 0.1.4 behind them (PTY output is untrusted input).
 *
 * Input layout: byte 0 picks the width (1..100 columns), byte 1 the height
 * (1..40 rows), byte 2 where the rest is split in two feeds, byte 3 flags
 * (bit 0: resize between the two feeds to the size in bytes 4 and 5; bit 1:
 * feed the first part one byte at a time). Then: snapshot, feed the
 * snapshot into a fresh vt of the same size, snapshot that too, free all.
 * Oracle: no crash, hang or leak. With FUZZ_VT_STRICT=1 in the
 * environment, a snapshot that reports no gaps must also round-trip
 * exactly: the copy's snapshot is the same bytes (a way to hunt fidelity
 * bugs, not part of CI).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "vt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { HEADER = 6, MAX_COLS = 100, MAX_ROWS = 40 };

static void feed_bytes(struct vt *vt, const uint8_t *p, size_t n, int one_by_one)
{
    if (!one_by_one) {
        (void)vt_feed(vt, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        (void)vt_feed(vt, p + i, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    uint16_t cols = (uint16_t)(1 + data[0] % MAX_COLS);
    uint16_t rows = (uint16_t)(1 + data[1] % MAX_ROWS);
    const uint8_t *p = data + HEADER;
    size_t n = size - HEADER;
    size_t cut = n * data[2] / 256;
    int resize = data[3] & 1, one_by_one = (data[3] >> 1) & 1;

    struct vt *vt = NULL;
    if (vt_new(cols, rows, &vt) != AL_OK)
        return 0;
    feed_bytes(vt, p, cut, one_by_one);
    if (resize) {
        cols = (uint16_t)(1 + data[4] % MAX_COLS);
        rows = (uint16_t)(1 + data[5] % MAX_ROWS);
        (void)vt_resize(vt, cols, rows);
    }
    feed_bytes(vt, p + cut, n - cut, 0);

    uint8_t *snap = NULL, *snap2 = NULL;
    size_t len = 0, len2 = 0;
    if (vt_snapshot(vt, &snap, &len) == AL_OK) {
        struct vt *copy = NULL;
        if (vt_new(cols, rows, &copy) == AL_OK) {
            (void)vt_feed(copy, snap, len);
            if (vt_snapshot(copy, &snap2, &len2) == AL_OK) {
                const char *strict = getenv("FUZZ_VT_STRICT");
                if (strict && strict[0] == '1' && vt_snapshot_gaps(vt) == 0 &&
                    (len != len2 || memcmp(snap, snap2, len) != 0))
                    abort(); /* the round trip was not exact */
                free(snap2);
            }
            vt_free(copy);
        }
        free(snap);
    }
    vt_free(vt);
    return 0;
}
