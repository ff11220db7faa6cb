/*
 * wslog: lws's log lines through al_vlog, at most one per level per
 * WSLOG_INTERVAL_MS with a count (see wslog.h). The state is the module's
 * one static: lws's log hook is process-wide and passes no context.
 */
#include "wslog.h"

#include <libwebsockets.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "al_log.h"

#define WSLOG_LEVELS 3     /* rate limits: errors, warnings, the rest */
#define WSLOG_LINE_MAX 512 /* bytes of one lws line kept */
#define WSLOG_NS_PER_MS 1000000ULL

static struct {
    const char *prog, *inst;
    int verbatim;
    int format; /* enum al_log_format */
    struct al_lograte rate[WSLOG_LEVELS];
} wslog = {"airlock", "lws", 0, AL_LOG_TEXT, {{0, 0}}};

static int slot_of(int level)
{
    return level & LLL_ERR ? 0 : level & LLL_WARN ? 1 : 2;
}

unsigned long wslog_filter(int level, const char *line, unsigned long long now_ms, char *out,
                           unsigned long cap)
{
    unsigned long n =
        wslog.verbatim ? 1 : al_lograte_hit(&wslog.rate[slot_of(level)], now_ms, WSLOG_INTERVAL_MS);
    if (!n || cap == 0)
        return n;
    size_t len = strcspn(line, "\n");
    if (len >= cap)
        len = cap - 1;
    memcpy(out, line, len);
    out[len] = 0;
    return n;
}

static void emit_line(const char *prog, const char *inst, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void emit_line(const char *prog, const char *inst, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    al_vlog(wslog.format, prog, inst, level, fmt, ap);
    va_end(ap);
}

static void wslog_emit(int level, const char *line)
{
    char text[WSLOG_LINE_MAX];
    unsigned long n = wslog_filter(level, line, uv_hrtime() / WSLOG_NS_PER_MS, text, sizeof text);
    if (!n)
        return;
    const int al_level = level & LLL_ERR ? 0 : 1;
    if (n > 1)
        emit_line(wslog.prog, wslog.inst, al_level,
                  "%s (%lu lws lines at this level since the last)", text, n);
    else
        emit_line(wslog.prog, wslog.inst, al_level, "%s", text);
}

void wslog_init(int levels, int format, const char *prog, const char *inst, int verbatim)
{
    wslog.format = format;
    wslog.prog = prog;
    wslog.inst = inst;
    wslog.verbatim = verbatim;
    memset(wslog.rate, 0, sizeof wslog.rate);
    lws_set_log_level(levels, wslog_emit);
}
