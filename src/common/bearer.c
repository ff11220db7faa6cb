/* bearer: see bearer.h. */
#include "bearer.h"

#include <stddef.h>
#include <strings.h>

const char *bearer_token(const char *value)
{
    if (!value || strncasecmp(value, "Bearer ", 7) != 0)
        return NULL;
    const char *t = value + 7;
    while (*t == ' ')
        t++;
    return *t ? t : NULL;
}
