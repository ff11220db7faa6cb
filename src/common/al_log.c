/* al_log: see al_log.h. One fputs per line, so lines do not interleave. */
#include "al_log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define AL_LOG_LINE_MAX 1024
/* an escaped byte takes at most 4 ("\xHH") */
#define AL_LOG_ESC_MAX (4 * AL_LOG_LINE_MAX + 1)
/* a JSON-escaped byte of that takes at most 6 ("\u00HH", "\ufffd") */
#define AL_LOG_JSON_MAX (6 * AL_LOG_ESC_MAX + 256)

static const char *const level_names[] = {"error", "info", "debug"};

static const char *level_name(int level)
{
    return level_names[level < 0 ? 0 : level > 2 ? 2 : level];
}

int al_log_format_of(const char *name)
{
    if (!name)
        return -1;
    if (!strcmp(name, "text"))
        return AL_LOG_TEXT;
    if (!strcmp(name, "json"))
        return AL_LOG_JSON;
    return -1;
}

/* The length of the valid UTF-8 sequence at in[0..len), or 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *in, size_t len)
{
    unsigned char c = in[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (len < n || in[1] < lo || in[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (in[i] < 0x80 || in[i] > 0xbf)
            return 0;
    return n;
}

size_t al_log_json_escape(const char *in, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len;) {
        char rep[8];
        size_t n = 0, used = 1;
        unsigned char ch = u[i];
        if (ch == '"' || ch == '\\') {
            rep[n++] = '\\';
            rep[n++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            const char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            memcpy(rep, esc, sizeof esc);
            n = sizeof esc;
        } else if (ch < 0x80) {
            rep[n++] = (char)ch;
        } else if ((used = utf8_len(u + i, len - i)) != 0) {
            memcpy(rep, u + i, used);
            n = used;
        } else {
            static const char replacement[6] = {'\\', 'u', 'f', 'f', 'f', 'd'}; /* U+FFFD */
            memcpy(rep, replacement, sizeof replacement);
            n = sizeof replacement;
            used = 1;
        }
        if (o + n >= cap)
            break;
        memcpy(out + o, rep, n);
        o += n;
        i += used;
    }
    out[o] = 0;
    return o;
}

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

size_t al_log_format_line(int format, int64_t unix_ms, const char *prog, const char *instance,
                          int level, const char *msg, char *out, size_t cap)
{
    if (cap < 2)
        return 0;
    instance = instance ? instance : "-";
    long long sec = (long long)(unix_ms / 1000);
    int ms = (int)(unix_ms % 1000);
    int n;
    if (format == AL_LOG_JSON) {
        char m[AL_LOG_JSON_MAX], in[AL_LOG_LINE_MAX], pr[AL_LOG_LINE_MAX / 4], when[32];
        (void)al_log_json_escape(msg, strlen(msg), m, sizeof m);
        (void)al_log_json_escape(instance, strlen(instance), in, sizeof in);
        (void)al_log_json_escape(prog, strlen(prog), pr, sizeof pr);
        time_t t = (time_t)sec;
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
            when[0] = 0;
        n = snprintf(out, cap,
                     "{\"time\":\"%s.%03dZ\",\"ts\":%lld.%03d,\"prog\":\"%s\",\"instance\":\"%s\","
                     "\"level\":\"%s\",\"msg\":\"%s\"}\n",
                     when, ms, sec, ms, pr, in, level_name(level), m);
    } else {
        char esc[AL_LOG_ESC_MAX], inst[2 * AL_LOG_LINE_MAX / 4];
        (void)al_log_escape(msg, strlen(msg), esc, sizeof esc);
        (void)al_log_escape(instance, strlen(instance), inst, sizeof inst);
        n = snprintf(out, cap, "%lld.%03d %s[%s] %s %s\n", sec, ms, prog, inst, level_name(level),
                     esc);
    }
    if (n < 0) {
        out[0] = 0;
        return 0;
    }
    if ((size_t)n < cap)
        return (size_t)n;
    /* cut: still one whole line (a JSON line cut is no longer an object,
     * but it is one line; the message bound makes this unreachable) */
    out[cap - 2] = '\n';
    out[cap - 1] = 0;
    return cap - 1;
}

void al_vlog(int format, const char *prog, const char *instance, int level, const char *fmt,
             va_list ap)
{
    char line[AL_LOG_LINE_MAX], out[AL_LOG_JSON_MAX + AL_LOG_LINE_MAX];
    if (vsnprintf(line, sizeof line, fmt, ap) < 0)
        line[0] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    (void)al_log_format_line(format, ms, prog, instance, level, line, out, sizeof out);
    fprintf(stderr, "%s", out);
}
