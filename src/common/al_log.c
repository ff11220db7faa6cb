/* al_log: see al_log.h. One fprintf per line, so lines do not interleave. */
#include "al_log.h"

#include <stdio.h>
#include <time.h>

#define AL_LOG_LINE_MAX 1024

void al_vlog(const char *prog, const char *instance, int level, const char *fmt, va_list ap)
{
    char line[AL_LOG_LINE_MAX];
    if (vsnprintf(line, sizeof line, fmt, ap) < 0)
        line[0] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static const char *const names[] = {"error", "info", "debug"};
    fprintf(stderr, "%lld.%03ld %s[%s] %s %s\n", (long long)ts.tv_sec, ts.tv_nsec / 1000000, prog,
            instance ? instance : "-",
            names[level < 0   ? 0
                  : level > 2 ? 2
                              : level],
            line);
}
