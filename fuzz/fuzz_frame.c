/*
 * Fuzz target: the airlock.v1 frame decoder (src/common/frame.c).
 * Oracle: whatever decodes must re-encode to exactly the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_limits.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fr_frame f;
    static uint8_t out[AL_MAX_FRAME];
    (void)fr_frame_len(data, size);
    if (fr_decode(data, size, &f) != 0)
        return 0;
    long n = fr_encode(&f, out, sizeof out);
    if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
        abort(); /* decode/encode must round-trip */
    (void)fr_type_name(f.type);
    return 0;
}
