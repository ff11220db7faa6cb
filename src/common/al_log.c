/* al_log: see al_log.h. One fprintf per line, so lines do not interleave. */
#include "al_log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define AL_LOG_LINE_MAX 1024
/* an escaped byte takes at most 4 ("\xHH") */
#define AL_LOG_ESC_MAX (4 * AL_LOG_LINE_MAX + 1)

size_t al_log_escape(const char *in, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)in[i];
        char rep[5];
        size_t n;
        if (ch == '\\' || ch == '\n' || ch == '\r' || ch == '\t') {
            rep[0] = '\\';
            rep[1] = ch == '\\' ? '\\' : ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
            n = 2;
        } else if (ch < 0x20 || ch == 0x7f) {
            rep[0] = '\\';
            rep[1] = 'x';
            rep[2] = hex[ch >> 4];
            rep[3] = hex[ch & 15];
            n = 4;
        } else {
            rep[0] = (char)ch;
            n = 1;
        }
        if (o + n >= cap)
            break;
        memcpy(out + o, rep, n);
        o += n;
    }
    out[o] = 0;
    return o;
}

unsigned long al_lograte_hit(struct al_lograte *r, uint64_t now_ms, uint64_t interval_ms)
{
    r->count++;
    if (now_ms < r->next_ms)
        return 0;
    unsigned long n = r->count;
    r->count = 0;
    r->next_ms = now_ms + interval_ms;
    return n;
}

void al_vlog(const char *prog, const char *instance, int level, const char *fmt, va_list ap)
{
    char line[AL_LOG_LINE_MAX], esc[AL_LOG_ESC_MAX], inst[2 * AL_LOG_LINE_MAX / 4];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n < 0) {
        line[0] = 0;
        n = 0;
    }
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    (void)al_log_escape(line, len, esc, sizeof esc);
    instance = instance ? instance : "-";
    (void)al_log_escape(instance, strlen(instance), inst, sizeof inst);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static const char *const names[] = {"error", "info", "debug"};
    fprintf(stderr, "%lld.%03ld %s[%s] %s %s\n", (long long)ts.tv_sec, ts.tv_nsec / 1000000, prog,
            inst,
            names[level < 0   ? 0
                  : level > 2 ? 2
                              : level],
            esc);
}
