/*
 * fsutil: the few file-system chores several control-plane files share:
 * reading a small file (a pid file, a /proc or /sys entry) into a buffer,
 * making a directory and its parents, copying a file, replacing a file by
 * a copy of its prefix. Control plane only.
 *
 * Not here: anything that knows what the files mean (the data directory's
 * layout is relay's and keys', cgroup files are cgroup.c's), nor files
 * that must be written atomically or with an owner (their callers do it:
 * the runner's token file, rkey's pins).
 */
#ifndef AL_FSUTIL_H
#define AL_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#define FSUTIL_PATH_MAX 4096

/* Read at most cap - 1 bytes of path into buf, NUL-terminated. The number
 * of bytes read, or 0 or -1 when the file is empty, cannot be opened or
 * read (buf is then untouched or not terminated: check for > 0). */
ssize_t fsutil_read(const char *path, char *buf, size_t cap);
/* mkdir -p: path and its missing parents, each with mode. AL_OK,
 * AL_E_TOOBIG (path longer than FSUTIL_PATH_MAX) or AL_E_IO. */
int fsutil_mkdir_p(const char *path, mode_t mode);
/* Copy the file src to dst (created or truncated). AL_OK or AL_E_IO. */
int fsutil_copy(const char *src, const char *dst);
/* Replace the regular file at path by a new file (mode 0600) holding its
 * first size bytes: written beside it under a temporary name, synced,
 * renamed over path, the directory synced. A process that still has the
 * old file open goes on writing to the old file, which no name reaches
 * any more (how a new owner of a recording fences off a stale one).
 * AL_OK; AL_E_FORMAT (not a regular file, or shorter than size),
 * AL_E_TOOBIG (path too long) or AL_E_IO, with a reason in err. */
int fsutil_replace_prefix(const char *path, off_t size, char *err, size_t cap);

#endif
