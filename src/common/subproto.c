/* subproto: see subproto.h. */
#include "subproto.h"

#include <string.h>

#include "al_limits.h"

bool subproto_acceptable(const char *offer)
{
    if (!offer)
        return true;
    static const char sep[] = " \t,";
    if (offer[strspn(offer, sep)] == 0)
        return true; /* an empty value offers nothing */
    const size_t want = strlen(AL_SUBPROTOCOL);
    for (const char *p = offer; *p;) {
        p += strspn(p, sep);
        size_t len = strcspn(p, sep);
        if (len == want && !strncmp(p, AL_SUBPROTOCOL, want))
            return true;
        p += len;
    }
    return false;
}
