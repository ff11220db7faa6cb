/*
 * al_err: the one project-wide error enumeration.
 *
 * Every function that can fail returns 0 (AL_OK) on success or one of the
 * negative AL_E* codes below; al_strerror() gives a short English phrase,
 * al_err_name() the code's name. Human detail, where useful, goes to a
 * caller-supplied buffer (al_errf). A failed system call's errno becomes a
 * code in one place, al_err_from_errno(); al_errf_errno() also keeps the
 * errno's text in the detail.
 *
 * AL_ERR_MAP is the one list (as libuv's UV_ERRNO_MAP): each entry is
 * XX(NAME, value, message), and the enum, the names and the messages are
 * all generated from it. Values are fixed (they never change meaning);
 * the messages are what users read, keep them as they are.
 */
#ifndef AL_ERR_H
#define AL_ERR_H

#include <stddef.h>

#define AL_ERR_MAP(XX)                                                                             \
    XX(NOMEM, -1, "out of memory")                    /* allocation failed */                      \
    XX(INVAL, -2, "invalid argument")                 /* bad argument from the caller */           \
    XX(AGAIN, -3, "try again")                        /* need more input / no room now */          \
    XX(TOOBIG, -4, "size limit exceeded")             /* a size or count exceeds its limit */      \
    XX(PROTO, -5, "protocol violation")               /* peer violated the protocol */             \
    XX(VERSION, -6, "no common protocol version")     /* no common protocol version */             \
    XX(TYPE, -7, "unknown frame type")                /* unknown frame type */                     \
    XX(STATE, -8, "not valid in this state")          /* frame or call not valid now */            \
    XX(NOCHAN, -9, "unknown channel")                 /* unknown channel */                        \
    XX(EXISTS, -10, "already exists")                 /* channel (or object) already exists */     \
    XX(LIMIT, -11, "count limit reached")             /* a count limit (channels, queue) */        \
    XX(FORMAT, -12, "malformed encoding")             /* base64url, JSON, JWS */                   \
    XX(ALG, -13, "algorithm not accepted")            /* token algorithm not accepted */           \
    XX(KID, -14, "unknown key id")                    /* token key id unknown */                   \
    XX(SIG, -15, "bad signature")                     /* token signature invalid */                \
    XX(EXPIRED, -16, "token expired")                 /* token expired */                          \
    XX(NOTYET, -17, "token not yet valid")            /* token not yet valid */                    \
    XX(AUD, -18, "wrong audience")                    /* token audience mismatch */                \
    XX(SCOPE, -19, "scope does not cover the action") /* token scope too narrow */                 \
    XX(CLAIM, -20, "missing or malformed claim")      /* token claim missing or mistyped */        \
    XX(IO, -21, "I/O error")                          /* file or system I/O failed */              \
    XX(CRYPTO, -22, "crypto failure")                 /* crypto library failure */                 \
    XX(PERM, -23, "permission denied or unsafe permissions") /* unsafe mode or access denied */    \
    XX(NOENT, -24, "not found")                              /* file or object not found */        \
    XX(TIMEOUT, -25, "timed out")                            /* a deadline passed */               \
    XX(CLOSED, -26, "closed")                                /* the link or channel is closed */

enum al_err {
    AL_OK = 0,
#define AL_ERR_ENUM(name, value, msg) AL_E_##name = (value),
    AL_ERR_MAP(AL_ERR_ENUM)
#undef AL_ERR_ENUM
};

/* Short, static, never NULL. Unknown codes give "unknown error". */
const char *al_strerror(int err);
/* The code's name ("AL_E_NOENT", "AL_OK"); unknown codes give "AL_E_UNKNOWN". */
const char *al_err_name(int err);

/* Write a human reason into a caller buffer (NULL or cap 0: nothing). */
void al_errf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * The code for the errno of a failed system call, the one errno mapping
 * of the project (AL_ERRNO_MAP in al_err.c):
 *   missing (ENOENT, ENOTDIR; ESRCH, ECHILD: no such process)  AL_E_NOENT
 *   refused (EACCES, EPERM, EROFS, ELOOP as O_NOFOLLOW meets a symlink)
 *                                                               AL_E_PERM
 *   EEXIST AL_E_EXISTS, ENOMEM AL_E_NOMEM, E2BIG and ENAMETOOLONG
 *   AL_E_TOOBIG, EAGAIN (EWOULDBLOCK) AL_E_AGAIN, anything else AL_E_IO.
 */
int al_err_from_errno(int e);

/* al_err_from_errno(e), after writing "<fmt ...>: <strerror(e)>" into buf
 * (as al_errf), so the reason keeps what the system said. */
int al_errf_errno(char *buf, size_t cap, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
