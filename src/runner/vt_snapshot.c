/*
 * vt_snapshot: the snapshot serializer (see vt.h; docs/snapshots.md
 * describes the format and what it reproduces). It reads the screen model
 * (struct vt, vt_internal.h) and writes the bytes that redraw it on a
 * fresh terminal: a reset, the saved cursor and the alternate screen, the
 * rows cell by cell, libvterm's previous glyph and pending wrap, the
 * modes, the cursor, the pen, the charsets and the title. vt_snapshot
 * walks the degrade ladder (enum vt_snap_level): exact, plain (attributes
 * dropped), blank (a notice), the first step within AL_MAX_SNAPSHOT.
 *
 * Data model: struct snap, below, is one step being built, owned by
 * snapshot_step: a byte buffer bounded by AL_MAX_SNAPSHOT (handed to the
 * caller on success, freed otherwise), one row of cells and what the
 * receiving terminal's cursor, pen and previous glyph are known to be.
 *
 * Not here: the model and its feed path (vt.c), the queries and
 * accessors (vt_query.c). The snapshot changes nothing the screen shows,
 * but it writes the held glyph to libvterm first (vt_sync) and asks
 * libvterm its modes.
 */
#include "vt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vterm.h>

#include "al_err.h"
#include "al_limits.h"
#include "vt_internal.h"

#define VT_SNAP_INITIAL 16384  /* first allocation of a snapshot buffer */
#define VT_PLACEHOLDER 0x4e00u /* a wide character, to make orphan right halves */

#define VT_TAB_STOP_BYTES (sizeof "\033[4096G\033H")
#define VT_TAB_STOPS_MAX (AL_MAX_COLS * VT_TAB_STOP_BYTES) /* the reset's tab stops, at most */
#define VT_SNAP_BLANK_OTHER 4096u /* the blank step's modes, pens, cursor: far less */
_Static_assert(VT_SNAP_BLANK_MAX < AL_MAX_SNAPSHOT, "the ladder's last step always fits");
_Static_assert(VT_TAB_STOPS_MAX + (size_t)2 * VT_MAX_TITLE + sizeof VT_SNAP_NOTICE +
                       VT_SNAP_BLANK_OTHER + VTF_PENDING_MAX <
                   VT_SNAP_BLANK_MAX,
               "a blank-step snapshot stays within VT_SNAP_BLANK_MAX");

static int attrs_default(const struct vt_attrs *a)
{
    return !a->bold && !a->italic && !a->blink && !a->reverse && !a->strike && !a->underline &&
           !a->font && a->fg.kind == VT_COLOR_DEFAULT && a->bg.kind == VT_COLOR_DEFAULT;
}

/* The snapshot being built: a bounded byte buffer plus what the receiving
 * terminal's cursor and pen are known to be at this point of the stream.
 * level is the ladder's step (enum vt_snap_level): from VT_SNAP_PLAIN on,
 * every cell is read with default attributes; at VT_SNAP_BLANK no cell is
 * drawn. */
struct snap {
    struct vt *vt;
    enum vt_snap_level level;
    uint8_t *buf;
    size_t len, cap;
    int err;
    int row, col;  /* receiver's cursor, -1 if unknown */
    int pen_known; /* receiver's pen is `pen` */
    struct vt_attrs pen;
    int screen_reverse;       /* DECSCNM: libvterm reports every cell's reverse flipped */
    int lg_row, lg_col, lg_w; /* receiver's previous glyph (see vt->comb) */
    unsigned gaps;            /* enum vt_gap: what was not reproduced */
    struct vt_cell *cells;    /* one row, vt->cols cells */
    uint8_t *dirty;           /* cells the drawing itself may have changed */
};

static void sb_put(struct snap *s, const void *p, size_t n)
{
    if (s->err || n == 0)
        return;
    if (n > AL_MAX_SNAPSHOT - s->len) {
        s->err = AL_E_TOOBIG;
        return;
    }
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : VT_SNAP_INITIAL;
        while (cap < s->len + n)
            cap *= 2;
        if (cap > AL_MAX_SNAPSHOT)
            cap = AL_MAX_SNAPSHOT;
        uint8_t *nb = realloc(s->buf, cap);
        if (!nb) {
            s->err = AL_E_NOMEM;
            return;
        }
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void sb_puts(struct snap *s, const char *str)
{
    sb_put(s, str, strlen(str));
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct snap *s, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        s->err = AL_E_INVAL;
        return;
    }
    sb_put(s, tmp, (size_t)n);
}

static void sb_cp(struct snap *s, uint32_t cp)
{
    uint8_t u[4];
    size_t n = vtf_utf8_encode(cp, u);
    if (n == 0)
        n = vtf_utf8_encode(0xfffd, u);
    sb_put(s, u, n);
}

/* SGR parameters of a colour: basic ones inline, extended ones (38/48 with
 * 5 or 2) in a sequence of their own so that no SGR comes near the
 * filter's separator limit. */
static void put_color(struct snap *s, char *buf, size_t cap, size_t *n, const struct vt_color *c,
                      int base)
{
    int k = 0;
    if (c->kind == VT_COLOR_INDEX && c->index < 8)
        k = snprintf(buf + *n, cap - *n, ";%d", base + c->index);
    else if (c->kind == VT_COLOR_INDEX && c->index < 16)
        k = snprintf(buf + *n, cap - *n, ";%d", base + 60 + c->index - 8);
    else if (c->kind == VT_COLOR_INDEX)
        sb_printf(s, "\033[%d;5;%dm", base + 8, c->index);
    else if (c->kind == VT_COLOR_RGB)
        sb_printf(s, "\033[%d;2;%d;%d;%dm", base + 8, c->r, c->g, c->b);
    if (k > 0 && (size_t)k < cap - *n)
        *n += (size_t)k;
}

/* SGR that sets exactly these attributes, from a reset. */
static void set_pen(struct snap *s, const struct vt_attrs *a)
{
    if (s->pen_known && vt_attrs_equal(&s->pen, a))
        return;
    static const char *const ul[] = {"", ";4", ";4:2", ";4:3"};
    char buf[64];
    size_t n = 0;
    buf[n++] = 0x1b;
    buf[n++] = '[';
    buf[n++] = '0';
    const char *parts[] = {a->bold ? ";1" : "",  a->italic ? ";3" : "",  ul[a->underline & 3],
                           a->blink ? ";5" : "", a->reverse ? ";7" : "", a->strike ? ";9" : ""};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t k = strlen(parts[i]);
        memcpy(buf + n, parts[i], k);
        n += k;
    }
    if (a->font >= 1 && a->font <= 9) {
        buf[n++] = ';';
        buf[n++] = '1';
        buf[n++] = (char)('0' + a->font);
    }
    char fgbg[32];
    size_t m = 0;
    int ext_fg = a->fg.kind == VT_COLOR_RGB || (a->fg.kind == VT_COLOR_INDEX && a->fg.index >= 16);
    int ext_bg = a->bg.kind == VT_COLOR_RGB || (a->bg.kind == VT_COLOR_INDEX && a->bg.index >= 16);
    if (!ext_fg)
        put_color(s, fgbg, sizeof fgbg, &m, &a->fg, 30);
    if (!ext_bg)
        put_color(s, fgbg, sizeof fgbg, &m, &a->bg, 40);
    memcpy(buf + n, fgbg, m);
    n += m;
    buf[n++] = 'm';
    sb_put(s, buf, n);
    if (ext_fg)
        put_color(s, fgbg, sizeof fgbg, &m, &a->fg, 30);
    if (ext_bg)
        put_color(s, fgbg, sizeof fgbg, &m, &a->bg, 40);
    s->pen = *a;
    s->pen_known = 1;
}

static void go(struct snap *s, int row, int col)
{
    if (s->row == row && s->col == col)
        return;
    sb_printf(s, "\033[%d;%dH", row + 1, col + 1);
    s->row = row;
    s->col = col;
}

/* Where libvterm leaves the cursor after a glyph of width w at col, with
 * autowrap off (as while drawing). */
static int advance(int col, int w, int width)
{
    return col + w < width ? col + w : col;
}

static int cell_width(const struct vt_cell *x)
{
    if (x->nchars == 0)
        return 1;
    int w = vtf_cp_width(x->chars[0]);
    return w < 0 ? 1 : w;
}

static void snap_cell(const struct snap *s, int row, int col, struct vt_cell *out)
{
    vt_read_cell(s->vt, row, col, out);
    if (s->screen_reverse)
        out->attrs.reverse ^= 1;
    if (s->level >= VT_SNAP_PLAIN)
        memset(&out->attrs, 0, sizeof out->attrs);
}

static void put_chars(struct snap *s, const struct vt_cell *x)
{
    for (uint8_t i = 0; i < x->nchars; i++)
        sb_cp(s, x->chars[i]);
}

/* Prints one cell's glyph at row, col and notes it as the receiver's
 * previous glyph. An erased cell is printed as a space then erased again
 * (only to move the previous glyph there). */
static void print_cell(struct snap *s, int row, int col, const struct vt_cell *c, int width)
{
    int w = cell_width(c);
    go(s, row, col);
    set_pen(s, &c->attrs);
    if (c->nchars == 0) {
        sb_put(s, " ", 1);
        s->col = -1;
        go(s, row, col);
        sb_puts(s, "\033[X");
        w = 1;
    } else if (w == 0) {
        /* A lone zero-width glyph: printed after a space, libvterm would
         * join it to the space; a cursor movement in between prevents it. */
        sb_put(s, " ", 1);
        s->col = -1;
        go(s, row, col);
        put_chars(s, c);
    } else {
        put_chars(s, c);
        s->col = advance(col, w, width);
        if (w == 2 && col + 1 < width)
            s->dirty[col + 1] = 1;
    }
    s->lg_row = row;
    s->lg_col = col;
    s->lg_w = w;
}

static int is_wide_glyph(const struct vt_cell *x)
{
    return x->width != 0 && x->nchars > 0 && cell_width(x) == 2;
}

/* A wide glyph in the last column, its right half cut off (by a shrink or
 * an ICH): print it one column to the left and push it right with ICH.
 * Not when the column to its left holds a wide glyph (which would cover
 * it again), nor on a one-column row. */
static void draw_cut_wide(struct snap *s, int row, int width)
{
    const struct vt_cell *last = &s->cells[width - 1];
    if (width < 2 || !is_wide_glyph(last) || is_wide_glyph(&s->cells[width - 2]))
        return;
    go(s, row, width - 2);
    set_pen(s, &last->attrs);
    put_chars(s, last);
    sb_puts(s, "\033[@");
    s->col = width - 2;
    s->dirty[width - 2] = 1;
    s->lg_row = row;
    s->lg_col = width - 2;
    s->lg_w = 2;
}

/* Pass A: right halves whose left half is no longer a wide glyph (a narrow
 * glyph overwrote it) exist only as history; make them the same way, with
 * a wide placeholder that pass B then overwrites. */
static void draw_orphans(struct snap *s, int row, int width)
{
    const struct vt_cell *c = s->cells;
    if (c[0].width == 0)
        s->gaps |= VT_GAP_WIDE_EDGE; /* a right half in column 0 (shifted there by DCH) */
    for (int x = width - 1; x >= 1; x--) {
        if (c[x].width != 0)
            continue;
        if (is_wide_glyph(&c[x - 1]))
            continue; /* pass B's wide glyph at x-1 makes it */
        go(s, row, x - 1);
        sb_cp(s, VT_PLACEHOLDER);
        s->col = advance(x - 1, 2, width);
        s->dirty[x - 1] = 1;
        s->lg_row = row;
        s->lg_col = x - 1;
        s->lg_w = 2;
    }
}

static void draw_row(struct snap *s, int row)
{
    struct vt *vt = s->vt;
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
    int width = vt_row_width(vt, row);
    for (int x = 0; x < width; x++)
        snap_cell(s, row, x, &s->cells[x]);
    memset(s->dirty, 0, (size_t)width);
    if (li && li->doublewidth) {
        go(s, row, 0);
        sb_puts(s, li->doubleheight == 1 ? "\033#3" : li->doubleheight == 2 ? "\033#4" : "\033#6");
    }
    draw_cut_wide(s, row, width);
    draw_orphans(s, row, width);
    for (int x = 0; x < width;) {
        const struct vt_cell *c = &s->cells[x];
        if (c->width == 0) {
            x++;
            continue;
        }
        if (c->nchars == 0) {
            if (attrs_default(&c->attrs) && !s->dirty[x]) {
                x++; /* the initial clear made it already */
                continue;
            }
            int end = x + 1;
            while (end < width && s->cells[end].width != 0 && s->cells[end].nchars == 0 &&
                   vt_attrs_equal(&s->cells[end].attrs, &c->attrs))
                end++;
            go(s, row, x);
            set_pen(s, &c->attrs);
            if (end == width)
                sb_puts(s, "\033[K");
            else
                sb_printf(s, "\033[%dX", end - x);
            x = end;
            continue;
        }
        if (cell_width(c) == 2 && x + 2 > width) {
            if (!(x == width - 1 && width >= 2 && !is_wide_glyph(&s->cells[width - 2])))
                s->gaps |= VT_GAP_WIDE_EDGE; /* draw_cut_wide could not do it */
            x++;
            continue;
        }
        print_cell(s, row, x, c, width);
        x++;
    }
}

static void emit_reset(struct snap *s)
{
    struct vt *vt = s->vt;
    /* DECSTR for real terminals (a no-op in libvterm 0.1.4), then every
     * mode and state this snapshot may set, explicitly back to default. */
    sb_puts(s, "\033[!p\033[?1049l\033[0m\033[?69l\033[r\033[4l\033[20l");
    /* One mode per sequence: libvterm 0.1.4 reads only the first. */
    static const int modes[] = {1, 5, 6, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 2004};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        sb_printf(s, "\033[?%dl", modes[i]);
    /* Charsets: DECSTR resets them in real terminals; an explicit ESC ( B
     * here would differ from libvterm's initial state (see track_esc). */
    sb_puts(s, "\033>\033[?25h\033[0 q\033[0\"q\017\033[3g");
    for (int c = 0; c < vt->cols; c++)
        if (vt_tab_stop(vt, (uint16_t)c))
            sb_printf(s, "\033[%dG\033H", c + 1);
    sb_puts(s, "\033[?7l\033[H\033[2J");
    s->row = 0;
    s->col = 0;
    s->pen_known = 1;
    memset(&s->pen, 0, sizeof s->pen);
}

/* What DECSC saved: cursor, pen, visibility, style; saved by `save`
 * (ESC 7, or ?1049h which also enters the alternate screen). The
 * visibility and style are put back afterwards (emit_final sets them). */
static void emit_saved(struct snap *s, const char *save)
{
    const struct vt_saved *sv = &s->vt->saved;
    int row = sv->pos.row < s->vt->rows ? sv->pos.row : s->vt->rows - 1;
    int col = sv->pos.col < s->vt->cols ? sv->pos.col : s->vt->cols - 1;
    go(s, row < 0 ? 0 : row, col < 0 ? 0 : col);
    set_pen(s, &sv->pen);
    if (!sv->visible)
        sb_puts(s, "\033[?25l");
    if (sv->style != VT_DEFAULT_STYLE)
        sb_printf(s, "\033[%d q", sv->style);
    sb_puts(s, save);
    if (!sv->visible)
        sb_puts(s, "\033[?25h");
    if (sv->style != VT_DEFAULT_STYLE)
        sb_puts(s, "\033[0 q");
}

/* The previous glyph g (width wg, at p) was since replaced by other text
 * (rows or characters moved under it). Make the same history: redraw the
 * rest of the row wg columns to the right, print g at p, and delete it
 * with DCH, which pulls the rest back and blanks the row's last wg
 * columns. Possible when those are blank with one pen and the moved cells
 * are plain glyphs or erased. Returns 1 if done. */
static int print_under(struct snap *s, VTermPos p, int wg, const struct vt_cell *g)
{
    struct vt *vt = s->vt;
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, p.row);
    int width = vt_row_width(vt, p.row);
    if (wg < 1 || g->nchars == 0 || (li && li->doublewidth) || p.col + 2 * wg > width)
        return 0;
    struct vt_cell *row = s->cells;
    for (int x = 0; x < width; x++)
        snap_cell(s, p.row, x, &row[x]);
    for (int x = width - wg; x < width; x++)
        if (row[x].width == 0 || row[x].nchars != 0 ||
            !vt_attrs_equal(&row[x].attrs, &row[width - wg].attrs))
            return 0;
    for (int x = p.col; x < width - wg; x++) {
        if (row[x].width == 0 && (x == p.col || !is_wide_glyph(&row[x - 1])))
            return 0; /* a right half without its left */
        if (row[x].width != 0 && row[x].nchars > 0 && cell_width(&row[x]) == 0)
            return 0; /* a lone mark */
        if (is_wide_glyph(&row[x]) && x + 1 >= width - wg)
            return 0;
    }
    for (int x = p.col; x < width - wg; x++) {
        if (row[x].width == 0)
            continue;
        if (row[x].nchars == 0) {
            go(s, p.row, x + wg);
            set_pen(s, &row[x].attrs);
            sb_puts(s, "\033[X");
            continue;
        }
        print_cell(s, p.row, x + wg, &row[x], width);
    }
    print_cell(s, p.row, p.col, g, width);
    s->col = -1;
    go(s, p.row, p.col);
    set_pen(s, &row[width - wg].attrs);
    sb_printf(s, "\033[%dP", wg);
    s->lg_row = p.row;
    s->lg_col = p.col;
    s->lg_w = wg;
    return 1;
}

/* libvterm's previous glyph matters when the cursor stands right after it
 * (a combining mark arriving next joins it). Reprint it last where it is
 * (or, if its cell has been erased since, print it and erase the cell
 * again), so that the receiver joins the next mark the same way; and where
 * the original would not join, make sure the receiver's own previous glyph
 * is not right before the cursor either. Done before the margins and
 * origin mode are set, which a later CUP to the same place does not undo. */
static void emit_combine(struct snap *s)
{
    struct vt *vt = s->vt;
    if (vt->pending_wrap)
        return; /* emit_cursor reprints the glyph under the cursor */
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    const VTermPos p = vt->comb.pos;
    if (vt->comb.valid && p.row == cur.row && p.col + vt->comb.width == cur.col &&
        p.row < vt->rows && p.col < vt->cols) {
        int width = vt_row_width(vt, p.row);
        struct vt_cell c, g;
        snap_cell(s, p.row, p.col, &c);
        memset(&g, 0, sizeof g);
        g.width = c.width ? c.width : 1;
        g.nchars = vt->comb.n;
        memcpy(g.chars, vt->comb.chars, sizeof g.chars);
        g.attrs = c.attrs;
        if (c.width != 0 && c.nchars > 0 && vt_cell_equal(&c, &g)) {
            print_cell(s, p.row, p.col, &c, width);
        } else if (c.width != 0 && c.nchars == 0 && g.nchars > 0 && vt->comb.width == 1) {
            print_cell(s, p.row, p.col, &g, width);
            s->col = -1;
            go(s, p.row, p.col);
            set_pen(s, &c.attrs);
            sb_puts(s, "\033[X");
        } else if (!print_under(s, p, vt->comb.width, &g)) {
            s->gaps |= VT_GAP_PREV_GLYPH; /* its cell holds other text now */
        }
        return;
    }
    if (s->lg_row != cur.row || s->lg_col + s->lg_w != cur.col)
        return;
    for (int r = 0; r < vt->rows; r++) {
        int width = vt_row_width(vt, r);
        for (int x = 0; x < width; x++) {
            struct vt_cell c;
            snap_cell(s, r, x, &c);
            int w = c.nchars ? cell_width(&c) : 1;
            if (c.width == 0 || x + w > width || (r == cur.row && x + w == cur.col))
                continue;
            print_cell(s, r, x, &c, width);
            return;
        }
    }
}

static void emit_modes(struct snap *s, const struct vt_modes *m)
{
    struct vt *vt = s->vt;
    if (m->top != 0 || m->bottom != vt->rows - 1)
        sb_printf(s, "\033[%d;%dr", m->top + 1, m->bottom + 1);
    if (m->left != 0 || m->right != vt->cols - 1) /* margins are kept even with ?69 off */
        sb_printf(s, "\033[?69h\033[%d;%ds%s", m->left + 1, m->right + 1,
                  m->lr_margins ? "" : "\033[?69l");
    else if (m->lr_margins)
        sb_puts(s, "\033[?69h");
    s->row = s->col = -1; /* DECSTBM and DECSLRM home the cursor */
    const uint16_t on[] = {m->app_cursor ? 1 : 0, m->reverse ? 5 : 0, m->mouse,
                           m->focus ? 1004 : 0,   m->mouse_proto,     m->bracketed ? 2004 : 0};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
        if (on[i])
            sb_printf(s, "\033[?%uh", (unsigned)on[i]);
    if (m->app_keypad)
        sb_puts(s, "\033=");
}

/* The cursor, and libvterm's pending wrap: reprint the glyph under the
 * cursor with autowrap on, which leaves the cursor where it is and the
 * next glyph wrapping. */
static void emit_cursor(struct snap *s, const struct vt_modes *m)
{
    struct vt *vt = s->vt;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    sb_puts(s, "\033[?7h");
    if (m->origin)
        sb_puts(s, "\033[?6h");
    int row = cur.row, col = cur.col;
    if (m->origin) {
        row -= m->top;
        if (m->lr_margins)
            col -= m->left;
    }
    sb_printf(s, "\033[%d;%dH", (row < 0 ? 0 : row) + 1, (col < 0 ? 0 : col) + 1);
    if (vt->pending_wrap) {
        struct vt_cell c;
        snap_cell(s, cur.row, cur.col, &c);
        s->pen_known = 0;
        set_pen(s, &c.attrs);
        int width = vt_row_width(vt, cur.row);
        struct vt_cell next;
        memset(&next, 0, sizeof next);
        next.width = 1;
        if (cur.col + 1 < vt->cols)
            snap_cell(s, cur.row, cur.col + 1, &next);
        int w = 0;
        if (c.width != 0 && c.nchars == 0 && cur.col + 1 == width) {
            sb_puts(s, " \033[X");
            w = 1;
        } else if (c.width != 0 && c.nchars == 0 && cur.col + 2 == width &&
                   (next.width == 0 ||
                    (next.nchars == 0 && vt_attrs_equal(&next.attrs, &c.attrs)))) {
            /* an erased wide glyph: its right half may still be there */
            sb_cp(s, VT_PLACEHOLDER);
            sb_puts(s, next.width == 0 ? "\033[X" : "\033[2X");
            w = 2;
        } else if (c.width != 0 && c.nchars > 0 && cell_width(&c) > 0 &&
                   cur.col + cell_width(&c) == width) {
            put_chars(s, &c);
            w = cell_width(&c);
        } else {
            s->gaps |= VT_GAP_PENDING_WRAP; /* the cell is not the glyph that wrapped */
        }
        if (w) {
            s->lg_row = cur.row;
            s->lg_col = cur.col;
            s->lg_w = w;
        }
    }
    if (!m->autowrap)
        sb_puts(s, "\033[?7l");
}

static void emit_title(struct snap *s)
{
    struct vt *vt = s->vt;
    if (strcmp(vt->title, vt->icon) == 0) {
        sb_puts(s, "\033]0;");
        sb_puts(s, vt->title);
        sb_puts(s, "\033\\");
        return;
    }
    sb_puts(s, "\033]1;");
    sb_puts(s, vt->icon);
    sb_puts(s, "\033\\\033]2;");
    sb_puts(s, vt->title);
    sb_puts(s, "\033\\");
}

static void emit_final(struct snap *s, const struct vt_modes *m)
{
    struct vt *vt = s->vt;
    struct vt_attrs pen;
    vt_read_pen(vt, &pen);
    s->pen_known = 0;
    set_pen(s, &pen);
    if (m->protect)
        sb_puts(s, "\033[1\"q");
    static const char g_intro[] = "()*+";
    for (int i = 0; i < 4; i++)
        if (vt->gset[i] != 0)
            sb_printf(s, "\033%c%c", g_intro[i], vt->gset[i]);
    if (vt->gl == 1)
        sb_puts(s, "\016");
    else if (vt->gl == 2)
        sb_puts(s, "\033n");
    else if (vt->gl == 3)
        sb_puts(s, "\033o");
    if (vt->insert)
        sb_puts(s, "\033[4h");
    if (vt->newline)
        sb_puts(s, "\033[20h");
    emit_title(s);
    if (m->cursor_style != VT_DEFAULT_STYLE)
        sb_printf(s, "\033[%d q", m->cursor_style);
    if (!vt->cursor_visible)
        sb_puts(s, "\033[?25l");
}

/* The blank step's notice: the first row, reverse video, cut to the width. */
static void emit_notice(struct snap *s)
{
    static const char notice[] = VT_SNAP_NOTICE;
    size_t n = sizeof notice - 1;
    if (n > s->vt->cols)
        n = s->vt->cols;
    struct vt_attrs rev;
    memset(&rev, 0, sizeof rev);
    rev.reverse = 1;
    go(s, 0, 0);
    set_pen(s, &rev);
    sb_put(s, notice, n);
    s->col = advance(0, (int)n, s->vt->cols);
    s->lg_row = 0;
    s->lg_col = (int)n - 1;
    s->lg_w = 1;
}

static int snapshot_step(struct vt *vt, enum vt_snap_level level, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    vt_sync(vt);
    struct snap s;
    memset(&s, 0, sizeof s);
    s.vt = vt;
    s.level = level;
    s.lg_w = 1; /* a fresh receiver's previous glyph: vt_new's prime at 0,0 */
    s.cells = calloc(vt->cols, sizeof *s.cells);
    s.dirty = calloc(vt->cols, 1);
    if (!s.cells || !s.dirty) {
        free(s.cells);
        free(s.dirty);
        return AL_E_NOMEM;
    }
    struct vt_modes m;
    vt_get_modes(vt, &m);
    s.screen_reverse = m.reverse;

    emit_reset(&s);
    if (vt->altscreen) {
        if (vt->saved.valid)
            emit_saved(&s, "\033[?1049h");
        else
            sb_puts(&s, "\033[?1047h");
        sb_puts(&s, "\033[0m\033[H\033[2J");
        s.row = s.col = 0;
        s.pen_known = 1;
        memset(&s.pen, 0, sizeof s.pen);
    } else if (vt->saved.valid) {
        emit_saved(&s, "\0337");
    }
    if (level < VT_SNAP_BLANK) {
        for (int row = 0; row < vt->rows && !s.err; row++)
            draw_row(&s, row);
        emit_combine(&s);
    } else {
        emit_notice(&s);
    }
    emit_modes(&s, &m);
    emit_cursor(&s, &m);
    emit_final(&s, &m);
    /* last, the sequence the stream is in the middle of, if any: stdout
     * from the snapshot's offset continues it */
    uint8_t pend[VTF_PENDING_MAX];
    sb_put(&s, pend, vtf_pending(vt->filter, pend, sizeof pend));

    free(s.cells);
    free(s.dirty);
    vt->snap_gaps = s.gaps;
    vt->snap_level = level;
    if (s.err) {
        free(s.buf);
        return s.err;
    }
    *out = s.buf;
    *len = s.len;
    return AL_OK;
}

int vt_snapshot_at(struct vt *vt, enum vt_snap_level level, uint8_t **out, size_t *len)
{
    if (!vt || !out || !len || (unsigned)level >= VT_SNAP_LEVELS)
        return AL_E_INVAL;
    return snapshot_step(vt, level, out, len);
}

/* The ladder: each step stops building at AL_MAX_SNAPSHOT bytes, so a
 * failed step costs at most that much work; the last one always fits. */
int vt_snapshot(struct vt *vt, uint8_t **out, size_t *len)
{
    if (!vt || !out || !len)
        return AL_E_INVAL;
    int rc = AL_E_TOOBIG;
    for (unsigned level = VT_SNAP_EXACT; level < VT_SNAP_LEVELS && rc == AL_E_TOOBIG; level++)
        rc = snapshot_step(vt, (enum vt_snap_level)level, out, len);
    return rc;
}

enum vt_snap_level vt_snapshot_level(const struct vt *vt)
{
    return vt ? vt->snap_level : VT_SNAP_EXACT;
}

const char *vt_snap_level_name(enum vt_snap_level level)
{
    static const char *const names[VT_SNAP_LEVELS] = {
        [VT_SNAP_EXACT] = "exact",
        [VT_SNAP_PLAIN] = "plain",
        [VT_SNAP_BLANK] = "blank",
    };
    return (unsigned)level < VT_SNAP_LEVELS ? names[level] : "unknown";
}

unsigned vt_snapshot_gaps(const struct vt *vt)
{
    return vt ? vt->snap_gaps : 0;
}
