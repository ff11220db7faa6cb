/* al_version: see al_version.h. The string is the generated header's. */
#include "al_version.h"

#include "al_version_gen.h"

const char *al_version(void)
{
    return AL_VERSION_STRING;
}

const char *al_version_name(const char *prog, char *buf, size_t cap)
{
    if (cap)
        (void)snprintf(buf, cap, "%s/%s", prog, AL_VERSION_STRING);
    return buf;
}

int al_version_print(FILE *to, const char *prog)
{
    if (fprintf(to, "%s %s\n", prog, AL_VERSION_STRING) < 0 || fflush(to) != 0)
        return -1;
    return 0;
}
