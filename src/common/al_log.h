/*
 * al_log: one structured line per event on stderr,
 *   "<unix seconds>.<ms> <program>[<instance>] <level> <message>"
 * Levels: 0 error, 1 info, 2 debug. The caller filters by level.
 */
#ifndef AL_LOG_H
#define AL_LOG_H

#include <stdarg.h>

void al_vlog(const char *prog, const char *instance, int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
