/*
 * al_err: see al_err.h. The messages and names come from AL_ERR_MAP, the
 * errno mapping from AL_ERRNO_MAP below: each is written once.
 */
#include "al_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *al_strerror(int err)
{
    switch (err) {
    case AL_OK:
        return "success";
#define AL_ERR_MSG(name, value, msg)                                                               \
    case AL_E_##name:                                                                              \
        return msg;
        AL_ERR_MAP(AL_ERR_MSG)
#undef AL_ERR_MSG
    }
    return "unknown error";
}

const char *al_err_name(int err)
{
    switch (err) {
    case AL_OK:
        return "AL_OK";
#define AL_ERR_NAME(name, value, msg)                                                              \
    case AL_E_##name:                                                                              \
        return "AL_E_" #name;
        AL_ERR_MAP(AL_ERR_NAME)
#undef AL_ERR_NAME
    }
    return "AL_E_UNKNOWN";
}

void al_errf(char *buf, size_t cap, const char *fmt, ...)
{
    if (!buf || cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(buf, cap, fmt, ap) < 0)
        buf[0] = '\0';
    va_end(ap);
}

/* errno -> code: XX(errno, AL_E_* suffix). Anything else is AL_E_IO. */
#define AL_ERRNO_MAP(XX)                                                                           \
    XX(ENOENT, NOENT)                                                                              \
    XX(ENOTDIR, NOENT)                                                                             \
    XX(ESRCH, NOENT)                                                                               \
    XX(ECHILD, NOENT)                                                                              \
    XX(EACCES, PERM)                                                                               \
    XX(EPERM, PERM)                                                                                \
    XX(EROFS, PERM)                                                                                \
    XX(ELOOP, PERM)                                                                                \
    XX(EEXIST, EXISTS)                                                                             \
    XX(ENOMEM, NOMEM)                                                                              \
    XX(E2BIG, TOOBIG)                                                                              \
    XX(ENAMETOOLONG, TOOBIG)                                                                       \
    XX(EAGAIN, AGAIN)

static const struct {
    int sys, code;
} al_errno_table[] = {
#define AL_ERRNO_ROW(sys, name) {sys, AL_E_##name},
    AL_ERRNO_MAP(AL_ERRNO_ROW)
#undef AL_ERRNO_ROW
};

int al_err_from_errno(int e)
{
    if (e == EWOULDBLOCK)
        e = EAGAIN; /* the same value on Linux; not everywhere */
    for (size_t i = 0; i < sizeof al_errno_table / sizeof al_errno_table[0]; i++)
        if (al_errno_table[i].sys == e)
            return al_errno_table[i].code;
    return AL_E_IO;
}

int al_errf_errno(char *buf, size_t cap, int e, const char *fmt, ...)
{
    if (buf && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, cap, fmt, ap);
        va_end(ap);
        if (n < 0)
            buf[0] = '\0';
        else if ((size_t)n < cap)
            (void)snprintf(buf + n, cap - (size_t)n, ": %s", strerror(e));
    }
    return al_err_from_errno(e);
}
