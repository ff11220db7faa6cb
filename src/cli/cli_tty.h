/*
 * cli_tty: the local terminal's modes and size, and its device opened
 * again for this process (cli_tty_reopen).
 *
 * struct cli_tty remembers the modes a terminal had before cli_tty_raw()
 * so that cli_tty_restore() puts back exactly those (idempotent: a second
 * restore does nothing). The caller owns it; there is no global copy, so
 * every exit path must reach cli_tty_restore().
 */
#ifndef CLI_TTY_H
#define CLI_TTY_H

#include <stdint.h>
#include <termios.h>

struct cli_tty {
    int fd;
    int raw; /* modes changed, to be restored */
    struct termios saved;
};

/* Put fd (a terminal) in raw mode, as ssh does. 0, or AL_E_IO (not a
 * terminal, or tcsetattr failed: nothing changed). */
int cli_tty_raw(struct cli_tty *t, int fd);
/* Put the saved modes back (waits for output to drain). */
void cli_tty_restore(struct cli_tty *t);
/* The size of terminal fd. 0 or AL_E_IO (not a terminal, or 0x0). */
int cli_tty_size(int fd, uint16_t *cols, uint16_t *rows);
/* fd's terminal opened again (mode O_RDONLY or O_WRONLY, made
 * O_NONBLOCK, O_CLOEXEC), so that flags set on it do not reach the other
 * processes sharing fd. The new descriptor, or -1 when fd is not a
 * terminal or cannot be opened. */
int cli_tty_reopen(int fd, int mode);

#endif
