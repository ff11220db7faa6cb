/*
 * cli_session: the state of one attach session (struct cli_session) and
 * what the session's files call of each other. Private to those files:
 *
 *   cli_attach.c   set-up, the loop and the teardown (cli_attach())
 *   cli_session.c  the endpoint's events, the end, signals
 *   cli_link.c     the connection to airlockd: frames out, reconnecting
 *   cli_stdin.c    local input: stdin, the escapes, held input
 *   cli_output.c   local output: fds 1 and 2, status lines, the end shown
 *
 * The rest of the CLI knows only cli_attach.h.
 *
 * Data model: struct cli_session is one session (no globals). It owns the
 * endpoint (channel 1 = the terminal, adopted at offset 0 so the first
 * ATTACH asks for everything; the endpoint then resumes exactly after a
 * drop), the current WebSocket (NULL between connections), the local
 * terminal's saved modes, and the two local directions:
 *
 *   stdin --read--> escape filter --> cli_input (held, then a copy until
 *         acknowledged) --ep_write--> ep
 *   ep --DATA/SNAPSHOT--> cli_outq of fd 1 or 2 --writev (non-blocking)-->
 *         the descriptor; ep_consume() only for bytes written
 *
 * Units: times in microseconds from uv_hrtime(); sizes in bytes.
 */
#ifndef CLI_SESSION_H
#define CLI_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "al_limits.h"
#include "backoff.h"
#include "cli_attach.h"
#include "cli_escape.h"
#include "cli_input.h"
#include "cli_net.h"
#include "cli_outq.h"
#include "cli_tty.h"
#include "endpoint.h"

#define CH 1
#define READ_CHUNK CLI_HELD_INPUT_MAX /* one read() of stdin */
/* stdin given to the endpoint but not acknowledged: as much as its ring */
#define INPUT_COPY_MAX EP_DEFAULT_TX_RING
/* one output queue: a window of data, a snapshot being written and a
 * fresh one behind it, and room for status lines */
#define OUT_MAX (2 * AL_MAX_SNAPSHOT + EP_DEFAULT_WINDOW + (64u << 10))
#define TAIL_MAX 2048 /* status lines waiting for the screen to drain */
#define STATUS_MAX 512
#define PATH_MAX_LEN 512

struct cli_session;

/* One local output descriptor (fd 1 or 2) and what waits for it. */
struct cli_outfd {
    struct cli_session *a;
    int fd;       /* where writes go: our own open of the terminal, or the fd */
    int reopened; /* fd is ours: close it at the end */
    int polled;   /* non-blocking with a uv_poll_t; otherwise blocking writes */
    int poll_on, failed;
    uv_poll_t poll;
    struct cli_outq q;
};

struct cli_session {
    uv_loop_t *loop;
    struct cli_net *net;
    struct cli_attach_opts o;
    char path[PATH_MAX_LEN];
    struct ep *ep;
    struct cli_ws *ws;
    int linked;      /* ep_link_up() for the current ws */
    int ever_linked; /* a connection was established at least once */
    /* local side */
    int saved_fl[3], saved_ok[3]; /* fds 0-2's flags at the start */
    int interactive;              /* stdin is a terminal in raw mode */
    struct cli_tty tty;
    int size_known;
    uint16_t cols, rows;
    struct cli_escape esc;
    int in_fd, in_reopened;
    uv_poll_t in_poll;
    int in_poll_ok, in_poll_on, in_direct; /* direct: a file, read without polling */
    int in_eof, eof_sent;
    struct cli_input in;
    int in_full_reported;
    int writer, role_known; /* role_known: a ROLE came on this connection */
    int ever_role;
    uint8_t *txbuf;
    struct cli_outfd out[2]; /* stdout, stderr */
    struct cli_outfd *status_out;
    char tail[TAIL_MAX]; /* lines of the end, '\n'-separated */
    size_t tail_len;
    int restored; /* the local modes are back and the tail was shown */
    /* timers and signals */
    uv_timer_t tick, retry, close_wait, notice, drain;
    char notice_text[STATUS_MAX]; /* a role notice, shown after the screen redraw */
    uv_signal_t sig_winch, sig_term, sig_int, sig_hup;
    int signalled;
    /* reconnecting */
    struct backoff retry_delay; /* between reconnections */
    uint64_t down_since_us;
    int down_reported;
    /* the end */
    int done, stopping, ws_over, gave_up_output;
    int exit_status, detached;
    int exited;
};

/* Decide the end (once): exit_status is what the CLI exits with. The loop
 * stops when the close went out and the local side has what was for it. */
void cli_session_finish(struct cli_session *a, int exit_status);
/* The endpoint's events (ep_config.on_event; ud is the session). */
void cli_session_on_event(void *ud, const struct ep_event *ev);
/* SIGWINCH, SIGTERM, SIGINT, SIGHUP (uv_signal_t.data is the session). */
void cli_session_on_signal(uv_signal_t *h, int signo);
/* The local terminal's size into cols, rows and size_known (unchanged
 * when neither stdout nor stdin is a terminal). */
void cli_session_local_size(struct cli_session *a);

#endif
