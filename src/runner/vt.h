/*
 * vt: the runner's model of one terminal screen, for late-joiner snapshots.
 *
 * PTY output goes through vtfilter (see vtfilter.h) into libvterm 0.1.4;
 * vt_snapshot() turns the current state into bytes that, written to a
 * fresh terminal of the same size (or any terminal: the bytes begin with a
 * reset), redraw it. docs/snapshots.md lists what is and is not reproduced.
 * Runner side only: untrusted bytes are parsed here and nowhere else.
 */
#ifndef VT_H
#define VT_H

#include <stddef.h>
#include <stdint.h>

#include "vtfilter.h"

#define VT_MAX_CELLS (1u << 20) /* cols * rows of one screen (the model keeps two) */
#define VT_MAX_TITLE 1023       /* bytes of the title and of the icon name kept */
#define VT_MAX_CHARS 6          /* code points in one cell (libvterm's limit) */
/* Heap one screen model holds at most, for the runner's memory budget: two
 * screens of 16-byte cells once every row of both was written, and 20
 * bytes a cell more in each row that holds a combining mark (vtscreen.c
 * takes cells as rows are first written; 72 bytes a cell with marks in
 * every row, measured, see test_vt's test_mem_estimate), rounded up; plus
 * a fixed part (the filter, libvterm's state, line infos, the row
 * headers). */
#define VT_BYTES_PER_CELL 80u
#define VT_BYTES_FIXED (32u << 10)

struct vt;

/* 0, AL_E_INVAL (size 0, or above AL_MAX_COLS/AL_MAX_ROWS), AL_E_TOOBIG
 * (cols * rows above VT_MAX_CELLS) or AL_E_NOMEM. */
int vt_new(uint16_t cols, uint16_t rows, struct vt **out);
void vt_free(struct vt *vt);

/* Whether vt_new/vt_resize accept this size: 0, AL_E_INVAL or AL_E_TOOBIG,
 * without allocating anything. */
int vt_size_check(uint16_t cols, uint16_t rows);
/* Bytes a model of this size holds (an upper estimate; see VT_BYTES_PER_CELL). */
size_t vt_mem_estimate(uint16_t cols, uint16_t rows);

/* PTY output bytes, through the filter. A sequence may be split anywhere.
 * 0, AL_E_INVAL for bad arguments, or AL_E_NOMEM when a row of the screen
 * could not get its cells (they are taken as rows are first written, see
 * vtscreen.h; that write was dropped, the model goes on). */
int vt_feed(struct vt *vt, const uint8_t *p, size_t n);
/* What vt_feed has cost so far: its time (CLOCK_MONOTONIC ns) and the bytes
 * it was given. Safe to call from another thread than the one feeding;
 * the two may be a feed apart. */
void vt_cost(const struct vt *vt, uint64_t *ns, uint64_t *bytes);

/* Same limits as vt_new; on error the size is unchanged (but AL_E_NOMEM:
 * the new size holds, some cells were blanked). */
int vt_resize(struct vt *vt, uint16_t cols, uint16_t rows);

/*
 * The steps of the snapshot ladder (docs/snapshots.md, "When a snapshot
 * would be too big"): vt_snapshot tries each in this order and returns the
 * first within AL_MAX_SNAPSHOT bytes. Every step keeps the reset, the
 * alternate screen, the saved cursor, the modes, the cursor (with its
 * pending wrap), the pen, the charsets and the title.
 */
enum vt_snap_level {
    VT_SNAP_EXACT = 0, /* everything docs/snapshots.md lists */
    VT_SNAP_PLAIN = 1, /* the cells' attributes dropped: every character kept, drawn plain */
    VT_SNAP_BLANK = 2, /* no cells: VT_SNAP_NOTICE on the first row, output goes on live */
};
#define VT_SNAP_LEVELS 3
/* What a blank-step snapshot shows on its first row (in reverse video, cut
 * to the width): the receiver sees why the screen is empty. "4 MiB" is
 * AL_MAX_SNAPSHOT. */
#define VT_SNAP_NOTICE                                                                             \
    "[airlock: this screen is too large for a snapshot (over 4 MiB); new output appears here "     \
    "live]"
/* Upper bound of a blank-step snapshot: the reset with a tab stop in each
 * of AL_MAX_COLS columns (9 bytes each), the notice, two titles of
 * VT_MAX_TITLE bytes, and the few sequences of modes, pens and cursor. */
#define VT_SNAP_BLANK_MAX (64u << 10)

/* Bytes that redraw the current screen on a fresh terminal of the same
 * size; *out is malloc'd, the caller frees it. The first step of the
 * ladder that fits AL_MAX_SNAPSHOT; vt_snapshot_level tells which. 0 or
 * AL_E_NOMEM (or AL_E_INVAL for bad arguments): never AL_E_TOOBIG. */
int vt_snapshot(struct vt *vt, uint8_t **out, size_t *len);
/* One step of the ladder only: AL_E_TOOBIG above AL_MAX_SNAPSHOT bytes. */
int vt_snapshot_at(struct vt *vt, enum vt_snap_level level, uint8_t **out, size_t *len);
/* The step the last vt_snapshot or vt_snapshot_at made. */
enum vt_snap_level vt_snapshot_level(const struct vt *vt);
/* Its name, for logs: "exact", "plain" or "blank". */
const char *vt_snap_level_name(enum vt_snap_level level);

/* What the last vt_snapshot could not reproduce exactly: rare states,
 * see docs/snapshots.md. 0: the snapshot is exact. */
enum vt_gap {
    VT_GAP_PENDING_WRAP = 1, /* a pending wrap whose glyph was since moved or overwritten */
    VT_GAP_WIDE_EDGE = 2,    /* half a wide character at the left or right edge */
    VT_GAP_PREV_GLYPH = 4,   /* libvterm's previous glyph (for combining) was overwritten */
};
unsigned vt_snapshot_gaps(const struct vt *vt); /* enum vt_gap bits */

/* --- accessors (tests, logs): they change nothing the screen shows ---- */

enum vt_color_kind { VT_COLOR_DEFAULT = 0, VT_COLOR_INDEX, VT_COLOR_RGB };

struct vt_color {
    uint8_t kind;  /* enum vt_color_kind */
    uint8_t index; /* VT_COLOR_INDEX: 0..255 */
    uint8_t r, g, b;
};

struct vt_attrs {
    uint8_t bold, italic, blink, reverse, strike;
    uint8_t underline; /* 0 none, 1 single, 2 double, 3 curly */
    uint8_t font;      /* 0..9 (SGR 10..19) */
    struct vt_color fg, bg;
};

struct vt_cell {
    uint32_t chars[VT_MAX_CHARS]; /* base character then combining marks */
    uint8_t nchars;               /* 0: an erased cell (it still has attrs) */
    uint8_t width;                /* 0: right half of a wide character; 1; 2 */
    struct vt_attrs attrs;
};

struct vt_cursor {
    uint16_t row, col; /* 0-based */
    uint8_t visible;
    uint8_t pending_wrap; /* printed into the last column; the next glyph wraps */
};

/* Modes a snapshot reproduces; queried from libvterm or tracked. */
struct vt_modes {
    uint8_t altscreen;                 /* ?1047 / ?1049 */
    uint8_t app_cursor;                /* DECCKM ?1 */
    uint8_t app_keypad;                /* DECKPAM ESC = */
    uint8_t reverse;                   /* DECSCNM ?5 */
    uint8_t origin;                    /* DECOM ?6 */
    uint8_t autowrap;                  /* DECAWM ?7 */
    uint8_t lr_margins;                /* DECLRMM ?69 */
    uint16_t mouse;                    /* 0, 1000 (click), 1002 (drag) or 1003 (any motion) */
    uint16_t mouse_proto;              /* 0 (X10), 1005 (UTF-8), 1006 (SGR) or 1015 (urxvt) */
    uint8_t focus;                     /* ?1004 */
    uint8_t bracketed;                 /* ?2004 */
    uint8_t insert;                    /* IRM 4 */
    uint8_t newline;                   /* LNM 20 */
    uint16_t top, bottom, left, right; /* scroll region, 0-based inclusive */
    uint8_t cursor_style;              /* DECSCUSR Ps, 1..6 (1: blinking block, the default) */
    uint8_t protect;                   /* DECSCA: the pen writes protected cells */
    uint8_t charset[4];                /* G0..G3: 0 as reset, 'B' ASCII, '0' DEC graphics, 'A' UK */
    uint8_t gl;                        /* the set invoked into GL (SI/SO/LS2/LS3): 0..3 */
};

void vt_size(const struct vt *vt, uint16_t *cols, uint16_t *rows);
/* A cell as displayed (DECSCNM flips reverse). AL_E_INVAL outside the
 * screen. This and vt_get_cursor first hand libvterm the glyph vt may hold
 * back (the last one of a row, until it knows whether a combining mark
 * follows), hence not const. */
int vt_get_cell(struct vt *vt, uint16_t row, uint16_t col, struct vt_cell *out);
/* Line attributes of a row: double width (DECDWL), double height 0/1 top/2 bottom. */
int vt_line_attrs(const struct vt *vt, uint16_t row, uint8_t *dwl, uint8_t *dhl);
void vt_get_cursor(struct vt *vt, struct vt_cursor *out);
/* Not const: the modes are asked of libvterm with DECRQM/DECRQSS. */
void vt_get_modes(struct vt *vt, struct vt_modes *out);
void vt_get_pen(const struct vt *vt, struct vt_attrs *out);
const char *vt_title(const struct vt *vt);     /* never NULL */
const char *vt_icon_name(const struct vt *vt); /* never NULL */
/* 1 if col is a tab stop. */
int vt_tab_stop(const struct vt *vt, uint16_t col);
void vt_filter_stats(const struct vt *vt, struct vtf_stats *out);

/* Field-by-field comparison (never memcmp libvterm's attrs): 1 if equal.
 * Right halves of wide characters compare by position only. */
int vt_cell_equal(const struct vt_cell *a, const struct vt_cell *b);

#endif
