/*
 * cli_tty: see cli_tty.h. Raw mode is cfmakeraw() minus nothing: no
 * signals from the keyboard (Ctrl-C goes to the remote terminal), no echo,
 * no output processing (the remote PTY already turned \n into \r\n).
 */
#include "cli_tty.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "al_err.h"

#define TTY_PATH_MAX 256

int cli_tty_raw(struct cli_tty *t, int fd)
{
    memset(t, 0, sizeof *t);
    t->fd = fd;
    if (!isatty(fd) || tcgetattr(fd, &t->saved) != 0)
        return AL_E_IO;
    struct termios raw = t->saved;
    cfmakeraw(&raw);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSADRAIN, &raw) != 0)
        return AL_E_IO;
    t->raw = 1;
    return AL_OK;
}

void cli_tty_restore(struct cli_tty *t)
{
    if (!t->raw)
        return;
    while (tcsetattr(t->fd, TCSADRAIN, &t->saved) != 0 && errno == EINTR)
        ;
    t->raw = 0;
}

int cli_tty_size(int fd, uint16_t *cols, uint16_t *rows)
{
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0)
        return AL_E_IO;
    *cols = ws.ws_col;
    *rows = ws.ws_row;
    return AL_OK;
}

/* A terminal opened again for this process: its own file description, so
 * that O_NONBLOCK (which libuv sets on what it polls) does not reach the
 * shell that shares fd 0-2. -1 when fd is not a terminal or cannot be. */
int cli_tty_reopen(int fd, int mode)
{
    char name[TTY_PATH_MAX];
    if (!isatty(fd) || ttyname_r(fd, name, sizeof name) != 0)
        return -1;
    return open(name, mode | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
}
