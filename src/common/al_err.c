#include "al_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

const char *al_strerror(int err)
{
    switch (err) {
    case AL_OK:
        return "success";
    case AL_E_NOMEM:
        return "out of memory";
    case AL_E_INVAL:
        return "invalid argument";
    case AL_E_AGAIN:
        return "try again";
    case AL_E_TOOBIG:
        return "size limit exceeded";
    case AL_E_PROTO:
        return "protocol violation";
    case AL_E_VERSION:
        return "no common protocol version";
    case AL_E_TYPE:
        return "unknown frame type";
    case AL_E_STATE:
        return "not valid in this state";
    case AL_E_NOCHAN:
        return "unknown channel";
    case AL_E_EXISTS:
        return "already exists";
    case AL_E_LIMIT:
        return "count limit reached";
    case AL_E_FORMAT:
        return "malformed encoding";
    case AL_E_ALG:
        return "algorithm not accepted";
    case AL_E_KID:
        return "unknown key id";
    case AL_E_SIG:
        return "bad signature";
    case AL_E_EXPIRED:
        return "token expired";
    case AL_E_NOTYET:
        return "token not yet valid";
    case AL_E_AUD:
        return "wrong audience";
    case AL_E_SCOPE:
        return "scope does not cover the action";
    case AL_E_CLAIM:
        return "missing or malformed claim";
    case AL_E_IO:
        return "I/O error";
    case AL_E_CRYPTO:
        return "crypto failure";
    case AL_E_PERM:
        return "permission denied or unsafe permissions";
    case AL_E_NOENT:
        return "not found";
    case AL_E_TIMEOUT:
        return "timed out";
    case AL_E_CLOSED:
        return "closed";
    }
    return "unknown error";
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

static const struct {
    int sys, code;
} al_errno_table[] = {
    {ENOENT, AL_E_NOENT}, {ENOTDIR, AL_E_NOENT}, {EACCES, AL_E_PERM},   {EPERM, AL_E_PERM},
    {EROFS, AL_E_PERM},   {ELOOP, AL_E_PERM},    {EEXIST, AL_E_EXISTS}, {ENOMEM, AL_E_NOMEM},
};

int al_err_from_errno(int e)
{
    for (size_t i = 0; i < sizeof al_errno_table / sizeof al_errno_table[0]; i++)
        if (al_errno_table[i].sys == e)
            return al_errno_table[i].code;
    return AL_E_IO;
}
