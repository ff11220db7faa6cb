/*
 * vtscreen: see vtscreen.h for what it is and why.
 *
 * Data model. struct vts holds two buffers (primary and alternate), each
 * an array of `rows` pointers to struct vts_row; `cur` is the one shown.
 * A row is
 *   cells[0, len)   cells as written (a glyph, a right half, an erase)
 *   [len, cols)     cells of character `fill_ch` with the pen `fill`: a
 *                   blank (fill_ch 0), or DECALN's E (vts_fill_row), so
 *                   that filling a whole row costs no cell
 *   cells, cap      the cells' storage, at least len; NULL until the row is
 *                   first written (cap 0)
 *   more            the code points after the first of a glyph with
 *                   combining marks, one entry per cell (read where the
 *                   cell's `more` is set); NULL until a glyph of the row
 *                   has marks
 * A cell is 16 bytes (its first code point, the flag, its pen): the text
 * fast path writes one 16-byte store and the code point per glyph.
 * so "erase to the end of the row" is len = start, fill = pen. A scroll of
 * full-width rows (the only kind libvterm does on a newline) rotates the
 * row pointers and blanks the rows that come in, keeping their storage.
 * Anything narrower (side margins, ICH/DCH) is done cell by cell through
 * libvterm's moverect + erase fallback.
 *
 * The pen (struct vts_pen) is libvterm 0.1.4's ScreenPen: an erase, a
 * scroll or a resize leaves blank cells with the whole current pen, as
 * libvterm 0.1.4 does (bold, reverse and all; checked by test_vtscreen
 * against the library's own screen). Units: rows and columns of the
 * screen, 0-based; cols is libvterm's width (a double-width line uses the
 * first cols/2 of its cells).
 *
 * Ownership: struct vts owns its two row arrays, each row and each row's
 * cells. Allocation happens when a row is first written (and on resize);
 * when it fails the write is dropped and vts_take_error says so.
 */
#include "vtscreen.h"

#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "vtfilter.h"

#define VTS_WIDE_RIGHT ((uint32_t)-1) /* chars[0] of a wide glyph's right half */

enum vts_pen_bit {
    PEN_BOLD = 1u << 0,
    PEN_UL_SHIFT = 1, /* two bits: 0..3 */
    PEN_ITALIC = 1u << 3,
    PEN_BLINK = 1u << 4,
    PEN_REVERSE = 1u << 5,
    PEN_STRIKE = 1u << 6,
    PEN_FONT_SHIFT = 7, /* four bits: 0..9 */
    PEN_PROTECTED = 1u << 11,
};

struct vts_pen {
    VTermColor fg, bg;
    uint16_t bits; /* enum vts_pen_bit */
};

#define VTS_MORE (VTERM_MAX_CHARS_PER_CELL - 1) /* code points after a cell's first */

/* 16 bytes: a glyph's first code point and its pen; the rare glyph with
 * combining marks keeps the rest in its row's `more` (see below). */
struct vts_cell {
    uint32_t ch;   /* 0 blank, VTS_WIDE_RIGHT, or the first code point */
    uint16_t more; /* 1: the row's more[col] holds the code points after ch */
    struct vts_pen pen;
};
_Static_assert(sizeof(struct vts_cell) == 16, "a cell is 16 bytes");

struct vts_row {
    struct vts_cell *cells;
    uint32_t (*more)[VTS_MORE]; /* cap entries once a cell of the row has marks, else NULL */
    uint16_t len, cap;
    struct vts_pen fill; /* the pen of the cells [len, cols) */
    uint16_t fill_ch;    /* their character: 0 (blank) or a code point below 0x10000 */
};
_Static_assert(sizeof(struct vts_row) <= 32, "a row is 32 bytes: a scroll moves rows");

struct vts {
    VTermState *state;
    vts_glyph_fn *on_glyph;
    vts_prop_fn *on_prop;
    void *ud;
    int rows, cols;
    struct vts_row *buf[2]; /* primary, alternate: rows each */
    struct vts_row *cur;
    struct vts_pen pen; /* the pen new glyphs and blanks get */
    int global_reverse; /* DECSCNM */
    int err;
};

static int pen_equal(const struct vts_pen *a, const struct vts_pen *b)
{
    return a->bits == b->bits && vterm_color_is_equal(&a->fg, &b->fg) &&
           vterm_color_is_equal(&a->bg, &b->bg);
}

/* What the cells [len, cols) of a row are. */
static struct vts_cell fill_cell(const struct vts_row *r)
{
    const struct vts_cell c = {.ch = r->fill_ch, .more = 0, .pen = r->fill};
    return c;
}

/* Whether a row's tail is blank with this pen (what an erase leaves). */
static int fill_is_blank(const struct vts_row *r, const struct vts_pen *pen)
{
    return r->fill_ch == 0 && pen_equal(&r->fill, pen);
}

static void set_blank_fill(struct vts_row *r, const struct vts_pen *pen)
{
    r->fill = *pen;
    r->fill_ch = 0;
}

static void blank_cells(struct vts_cell *c, int n, const struct vts_pen *pen)
{
    const struct vts_cell b = {.ch = 0, .more = 0, .pen = *pen};
    for (int i = 0; i < n; i++)
        c[i] = b;
}

/* A selective erase of n cells: each one not protected (DECSCA) blank
 * with the pen. */
static void blank_unprotected(struct vts_cell *c, int n, const struct vts_pen *pen)
{
    const struct vts_cell b = {.ch = 0, .more = 0, .pen = *pen};
    for (int i = 0; i < n; i++)
        if (!(c[i].pen.bits & PEN_PROTECTED))
            c[i] = b;
}

/* A row's storage to cap cells (and as many entries of more, if it has
 * them). 0, or AL_E_NOMEM with the row as it was. */
static int row_grow(struct vts_row *r, int cap)
{
    if (r->more) {
        uint32_t(*m)[VTS_MORE] = realloc(r->more, (size_t)cap * sizeof *m);
        if (!m)
            return AL_E_NOMEM;
        if (cap > r->cap)
            memset(m + r->cap, 0, (size_t)(cap - r->cap) * sizeof *m);
        r->more = m;
    }
    struct vts_cell *c = realloc(r->cells, (size_t)cap * sizeof *c);
    if (!c)
        return AL_E_NOMEM; /* more may be larger than cap: harmless */
    r->cells = c;
    r->cap = (uint16_t)cap;
    return 0;
}

/* A row's storage cut to cap cells (cap < the row's), once the screen is
 * narrower: a resize gives the memory back. A realloc that fails keeps
 * the larger storage, which is harmless (more may stay larger than cap). */
static void row_shrink(struct vts_row *r, int cap)
{
    struct vts_cell *c = realloc(r->cells, (size_t)cap * sizeof *c);
    if (!c)
        return;
    r->cells = c;
    r->cap = (uint16_t)cap;
    if (r->more) {
        uint32_t(*m)[VTS_MORE] = realloc(r->more, (size_t)cap * sizeof *m);
        if (m)
            r->more = m;
    }
}

/* The row's room for code points after a cell's first (cap entries). 0 or
 * AL_E_NOMEM. */
static int row_more(struct vts *s, struct vts_row *r)
{
    if (r->more)
        return 0;
    r->more = calloc(r->cap, sizeof *r->more);
    if (!r->more) {
        s->err = AL_E_NOMEM;
        return AL_E_NOMEM;
    }
    return 0;
}

static void row_free(struct vts_row *r)
{
    free(r->cells);
    free(r->more);
    r->cells = NULL;
    r->more = NULL;
    r->cap = r->len = 0;
}

/* Makes room for cells [0, upto) of a row (upto <= cols), not filling
 * them. 0 or AL_E_NOMEM. */
static int row_reserve(struct vts *s, struct vts_row *r, int upto)
{
    if (upto > r->cap && row_grow(r, s->cols) != 0) {
        s->err = AL_E_NOMEM;
        return AL_E_NOMEM;
    }
    return 0;
}

/* Makes cells [0, upto) of a row real (upto <= cols). 0 or AL_E_NOMEM. */
static int row_fill_to(struct vts *s, struct vts_row *r, int upto)
{
    if (upto <= r->len)
        return 0;
    if (row_reserve(s, r, upto) != 0)
        return AL_E_NOMEM;
    const struct vts_cell f = fill_cell(r);
    for (int i = r->len; i < upto; i++)
        r->cells[i] = f;
    r->len = (uint16_t)upto;
    return 0;
}

static void row_blank(struct vts_row *r, const struct vts_pen *pen)
{
    r->len = 0;
    set_blank_fill(r, pen);
}

static struct vts_row *row_at(const struct vts *s, int row)
{
    return row >= 0 && row < s->rows ? &s->cur[row] : NULL;
}

/* --- libvterm state callbacks --------------------------------------------- */

static int cb_putglyph(VTermGlyphInfo *info, VTermPos pos, void *user)
{
    struct vts *s = user;
    struct vts_row *r = row_at(s, pos.row);
    if (!r || pos.col < 0 || pos.col >= s->cols)
        return 0;
    int w = info->width > 0 ? info->width : 1;
    int end = pos.col + w <= s->cols ? pos.col + w : s->cols;
    if (row_fill_to(s, r, end) != 0)
        return 1;
    struct vts_cell *c = &r->cells[pos.col];
    int i = 0;
    while (i < VTERM_MAX_CHARS_PER_CELL && info->chars[i])
        i++;
    if (i > 1 && row_more(s, r) != 0)
        return 1;
    c->ch = info->chars[0];
    c->more = i > 1;
    if (i > 1) {
        memset(r->more[pos.col], 0, sizeof r->more[pos.col]);
        memcpy(r->more[pos.col], info->chars + 1, (size_t)(i - 1) * sizeof info->chars[0]);
    }
    if (i > 0)
        c->pen = s->pen;
    for (int k = pos.col + 1; k < end; k++) {
        r->cells[k].ch = VTS_WIDE_RIGHT;
        r->cells[k].more = 0;
    }
    c->pen.bits =
        (uint16_t)((c->pen.bits & ~PEN_PROTECTED) | (info->protected_cell ? PEN_PROTECTED : 0));
    if (s->on_glyph) {
        VTermRect rect = {pos.row, pos.row + 1, pos.col, pos.col + w};
        s->on_glyph(rect, info->chars, i, s->ud);
    }
    return 1;
}

/* Whether no cell of a row from col on is protected (DECSCA). */
static int unprotected_from(const struct vts *s, const struct vts_row *r, int col)
{
    if (r->len < s->cols && (r->fill.bits & PEN_PROTECTED))
        return 0;
    for (int c = col; c < r->len; c++)
        if (r->cells[c].pen.bits & PEN_PROTECTED)
            return 0;
    return 1;
}

static int cb_erase(VTermRect rect, int selective, void *user)
{
    struct vts *s = user;
    int c0 = rect.start_col < 0 ? 0 : rect.start_col;
    int c1 = rect.end_col > s->cols ? s->cols : rect.end_col;
    if (c0 >= c1)
        return 1;
    for (int row = rect.start_row < 0 ? 0 : rect.start_row; row < rect.end_row && row < s->rows;
         row++) {
        struct vts_row *r = &s->cur[row];
        /* a selective erase to the row's end where nothing is protected is
         * a plain one: the row's tail grows, no cell is touched (else a
         * screen of them cost 30,000 cells a DECSED at 300x100) */
        if (selective && c1 == s->cols && !unprotected_from(s, r, c0)) {
            /* the cells as written one by one; the tail as a whole: kept
             * if protected, else blank with the pen */
            if (c0 < r->len)
                blank_unprotected(r->cells + c0, r->len - c0, &s->pen);
            if (r->len < s->cols && !(r->fill.bits & PEN_PROTECTED))
                set_blank_fill(r, &s->pen); /* c0 <= len: past len only the fill protects */
        } else if (selective && c1 < s->cols) {
            if (row_fill_to(s, r, c1) != 0)
                continue;
            blank_unprotected(r->cells + c0, c1 - c0, &s->pen);
        } else if (c1 == s->cols) {
            /* to the end of the row: the blank tail grows */
            if (c0 > r->len && !fill_is_blank(r, &s->pen) && row_fill_to(s, r, c0) != 0)
                continue;
            if (c0 < r->len)
                r->len = (uint16_t)c0;
            set_blank_fill(r, &s->pen);
        } else {
            if (row_fill_to(s, r, c1) != 0)
                continue;
            blank_cells(r->cells + c0, c1 - c0, &s->pen);
        }
    }
    return 1;
}

void vts_erase(struct vts *s, VTermRect rect)
{
    (void)cb_erase(rect, 0, s);
}

static void rows_reverse(struct vts_row *a, int n)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        struct vts_row t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Full-width rows [start, end) move up by `down` (down < 0: down), the
 * rows that come in blank with the pen. The row pointers rotate (three
 * reversals: no temporary, O(end - start)); no cell moves. */
static void scroll_rows(struct vts *s, int start, int end, int down)
{
    int height = end - start;
    int n = down > 0 ? down : -down;
    if (n >= height) {
        for (int row = start; row < end; row++)
            row_blank(&s->cur[row], &s->pen);
        return;
    }
    struct vts_row *a = s->cur + start;
    if (n == 1) { /* a newline: the common case, one row round */
        struct vts_row t = down > 0 ? a[0] : a[height - 1];
        if (down > 0)
            memmove(a, a + 1, (size_t)(height - 1) * sizeof *a);
        else
            memmove(a + 1, a, (size_t)(height - 1) * sizeof *a);
        a[down > 0 ? height - 1 : 0] = t;
    } else {
        int left = down > 0 ? n : height - n; /* rotate left by this much */
        rows_reverse(a, left);
        rows_reverse(a + left, height - left);
        rows_reverse(a, height);
    }
    int b0 = down > 0 ? end - n : start;
    for (int row = b0; row < b0 + n; row++)
        row_blank(&s->cur[row], &s->pen);
}

void vts_scroll_up(struct vts *s, int top, int bottom)
{
    if (top >= 0 && bottom <= s->rows && top < bottom)
        scroll_rows(s, top, bottom, 1);
}

static int cb_scrollrect(VTermRect rect, int downward, int rightward, void *user)
{
    struct vts *s = user;
    if (rightward != 0 || rect.start_col != 0 || rect.end_col != s->cols || rect.start_row < 0 ||
        rect.end_row > s->rows || rect.start_row >= rect.end_row)
        return 0; /* libvterm then calls moverect and erase */
    if (downward != 0)
        scroll_rows(s, rect.start_row, rect.end_row, downward);
    return 1;
}

static int cb_moverect(VTermRect dest, VTermRect src, void *user)
{
    struct vts *s = user;
    int cols = src.end_col - src.start_col;
    int down = src.start_row - dest.start_row;
    if (cols <= 0 || dest.start_col < 0 || src.start_col < 0 || dest.start_col + cols > s->cols ||
        src.start_col + cols > s->cols)
        return 1;
    int init = down < 0 ? dest.end_row - 1 : dest.start_row;
    int test = down < 0 ? dest.start_row - 1 : dest.end_row;
    int inc = down < 0 ? -1 : 1;
    for (int row = init; row != test; row += inc) {
        struct vts_row *d = row_at(s, row), *f = row_at(s, row + down);
        if (!d || !f || row_fill_to(s, d, dest.start_col + cols) != 0 ||
            row_fill_to(s, f, src.start_col + cols) != 0)
            continue;
        if (f->more && row_more(s, d) != 0)
            continue;
        memmove(d->cells + dest.start_col, f->cells + src.start_col,
                (size_t)cols * sizeof *d->cells);
        if (f->more)
            memmove(d->more + dest.start_col, f->more + src.start_col,
                    (size_t)cols * sizeof *d->more);
    }
    return 1;
}

static int cb_setpenattr(VTermAttr attr, VTermValue *val, void *user)
{
    struct vts *s = user;
    uint16_t b = s->pen.bits;
    switch (attr) {
    case VTERM_ATTR_BOLD:
        b = (uint16_t)(val->boolean ? b | PEN_BOLD : b & ~PEN_BOLD);
        break;
    case VTERM_ATTR_UNDERLINE:
        b = (uint16_t)((b & ~(3u << PEN_UL_SHIFT)) | ((unsigned)val->number & 3u) << PEN_UL_SHIFT);
        break;
    case VTERM_ATTR_ITALIC:
        b = (uint16_t)(val->boolean ? b | PEN_ITALIC : b & ~PEN_ITALIC);
        break;
    case VTERM_ATTR_BLINK:
        b = (uint16_t)(val->boolean ? b | PEN_BLINK : b & ~PEN_BLINK);
        break;
    case VTERM_ATTR_REVERSE:
        b = (uint16_t)(val->boolean ? b | PEN_REVERSE : b & ~PEN_REVERSE);
        break;
    case VTERM_ATTR_STRIKE:
        b = (uint16_t)(val->boolean ? b | PEN_STRIKE : b & ~PEN_STRIKE);
        break;
    case VTERM_ATTR_FONT:
        b = (uint16_t)((b & ~(15u << PEN_FONT_SHIFT)) | ((unsigned)val->number & 15u)
                                                            << PEN_FONT_SHIFT);
        break;
    case VTERM_ATTR_FOREGROUND:
        s->pen.fg = val->color;
        return 1;
    case VTERM_ATTR_BACKGROUND:
        s->pen.bg = val->color;
        return 1;
    default:
        return 0;
    }
    s->pen.bits = b;
    return 1;
}

static int cb_settermprop(VTermProp prop, VTermValue *val, void *user)
{
    struct vts *s = user;
    if (prop == VTERM_PROP_ALTSCREEN)
        s->cur = s->buf[val->boolean ? 1 : 0];
    else if (prop == VTERM_PROP_REVERSE)
        s->global_reverse = val->boolean != 0;
    return s->on_prop ? s->on_prop(prop, val, s->ud) : 1;
}

/* A line made double width loses its right half (libvterm 0.1.4 erases it). */
static int cb_setlineinfo(int row, const VTermLineInfo *newinfo, const VTermLineInfo *oldinfo,
                          void *user)
{
    struct vts *s = user;
    if (newinfo->doublewidth != oldinfo->doublewidth ||
        newinfo->doubleheight != oldinfo->doubleheight) {
        if (newinfo->doublewidth) {
            VTermRect rect = {row, row + 1, s->cols / 2, s->cols};
            cb_erase(rect, 0, s);
        }
    }
    return 1;
}

static int row_is_blank(const struct vts_row *r, int cols)
{
    if (r->len < cols && r->fill_ch != 0)
        return 0;
    for (int c = 0; c < r->len; c++)
        if (r->cells[c].ch != 0)
            return 0;
    return 1;
}

/* One buffer to the new size, as libvterm 0.1.4's realloc_buffer: cells
 * kept where both sizes have them, the rest blank with the whole pen. */
static int resize_buf(struct vts *s, int which, int rows, int cols)
{
    struct vts_row *old = s->buf[which];
    struct vts_row *nb = calloc((size_t)rows, sizeof *nb);
    if (!nb)
        return AL_E_NOMEM;
    for (int row = rows; row < s->rows; row++)
        row_free(&old[row]);
    int keep = rows < s->rows ? rows : s->rows;
    for (int row = 0; row < keep; row++) {
        struct vts_row r = old[row];
        if (cols > s->cols && !fill_is_blank(&r, &s->pen)) {
            if (row_fill_to(s, &r, s->cols) != 0) {
                /* cannot keep the tail's pen exactly: blank it */
                r.len = 0;
            }
        }
        if (cols < s->cols) {
            if (r.len > cols)
                r.len = (uint16_t)cols;
            if (r.cells && r.cap > cols)
                row_shrink(&r, cols);
        } else if (cols > s->cols) {
            set_blank_fill(&r, &s->pen);
            if (r.cells && r.cap < cols && row_grow(&r, cols) != 0 && r.len > 0)
                s->err = AL_E_NOMEM;
        }
        nb[row] = r;
    }
    for (int row = keep; row < rows; row++)
        set_blank_fill(&nb[row], &s->pen);
    free(old);
    s->buf[which] = nb;
    return 0;
}

static int cb_resize(int rows, int cols, VTermPos *delta, void *user)
{
    struct vts *s = user;
    int alt = s->cur == s->buf[1];
    if (!alt && rows < s->rows) {
        /* as libvterm 0.1.4: rows below the cursor that hold something
         * push the screen up instead of being cut */
        VTermPos cursor;
        vterm_state_get_cursorpos(s->state, &cursor);
        int row;
        for (row = s->rows - 1; row >= rows; row--)
            if (!row_is_blank(&s->cur[row], s->cols) || cursor.row == row)
                break;
        int first_blank = row + 1;
        if (first_blank > rows) {
            scroll_rows(s, 0, s->rows, first_blank - rows);
            delta->row -= first_blank - rows;
        }
    }
    /* Rows that do not fit (or cells a row can no longer keep) are let go
     * in resize_buf; on an allocation failure the old size stays, which
     * libvterm's state would not know: the caller checks vts_take_error. */
    int rc0 = resize_buf(s, 0, rows, cols);
    int rc1 = rc0 == 0 ? resize_buf(s, 1, rows, cols) : rc0;
    if (rc0 != 0 || rc1 != 0) {
        s->err = AL_E_NOMEM;
        return 1;
    }
    s->rows = rows;
    s->cols = cols;
    s->cur = s->buf[alt ? 1 : 0];
    return 1;
}

static const VTermStateCallbacks vts_state_cbs = {
    .putglyph = cb_putglyph,
    .scrollrect = cb_scrollrect,
    .moverect = cb_moverect,
    .erase = cb_erase,
    .setpenattr = cb_setpenattr,
    .settermprop = cb_settermprop,
    .resize = cb_resize,
    .setlineinfo = cb_setlineinfo,
};

/* --- life cycle, reading -------------------------------------------------- */

int vts_new(VTermState *state, int rows, int cols, vts_glyph_fn *on_glyph, vts_prop_fn *on_prop,
            void *ud, struct vts **out)
{
    *out = NULL;
    struct vts *s = calloc(1, sizeof *s);
    if (!s)
        return AL_E_NOMEM;
    s->buf[0] = calloc((size_t)rows, sizeof *s->buf[0]);
    s->buf[1] = calloc((size_t)rows, sizeof *s->buf[1]);
    if (!s->buf[0] || !s->buf[1]) {
        free(s->buf[0]);
        free(s->buf[1]);
        free(s);
        return AL_E_NOMEM;
    }
    s->state = state;
    s->on_glyph = on_glyph;
    s->on_prop = on_prop;
    s->ud = ud;
    s->rows = rows;
    s->cols = cols;
    s->cur = s->buf[0];
    vterm_state_set_callbacks(state, &vts_state_cbs, s);
    *out = s;
    return 0;
}

void vts_free(struct vts *s)
{
    if (!s)
        return;
    for (int b = 0; b < 2; b++) {
        for (int row = 0; row < s->rows; row++)
            row_free(&s->buf[b][row]);
        free(s->buf[b]);
    }
    free(s);
}

int vts_put_text(struct vts *s, int row, int col, const uint8_t *p, size_t len, size_t glyphs)
{
    struct vts_row *r = row_at(s, row);
    if (!r || col < 0 || glyphs > (size_t)s->cols || (size_t)col + glyphs > (size_t)s->cols)
        return AL_E_INVAL;
    /* only the cells before col are blanked: those from col on are written
     * here, so a row of text written at its end is written once */
    if (row_fill_to(s, r, col) != 0 || row_reserve(s, r, col + (int)glyphs) != 0)
        return AL_E_NOMEM;
    struct vts_cell *c = r->cells + col;
    size_t g = 0;
    for (size_t i = 0; i < len && g < glyphs; g++) {
        uint32_t cp = p[i];
        size_t k = cp >= 0xf0 ? 4 : cp >= 0xe0 ? 3 : cp >= 0xc0 ? 2 : 1;
        if (k > 1) {
            cp &= 0x7fu >> k;
            for (size_t j = 1; j < k && i + j < len; j++)
                cp = (cp << 6) | (p[i + j] & 0x3fu);
        }
        i += k;
        c[g].ch = cp;
        c[g].more = 0;
        c[g].pen = s->pen;
    }
    if (col + (int)g > r->len)
        r->len = (uint16_t)(col + (int)g);
    return 0;
}

int vts_put_ascii(struct vts *s, int row, int col, const uint8_t *p, size_t n)
{
    struct vts_row *r = row_at(s, row);
    if (!r || col < 0 || n > (size_t)s->cols || (size_t)col + n > (size_t)s->cols)
        return AL_E_INVAL;
    if (row_fill_to(s, r, col) != 0 || row_reserve(s, r, col + (int)n) != 0)
        return AL_E_NOMEM;
    struct vts_cell *c = r->cells + col;
    const struct vts_cell g = {.ch = 0, .more = 0, .pen = s->pen};
    for (size_t i = 0; i < n; i++) { /* two stores a glyph: the whole cell, then ch */
        memcpy(&c[i], &g, sizeof g);
        c[i].ch = p[i];
    }
    if (col + (int)n > r->len)
        r->len = (uint16_t)(col + (int)n);
    return 0;
}

void vts_put_glyph(struct vts *s, VTermPos pos, const uint32_t *chars, int n, int width,
                   int protected_cell)
{
    uint32_t c[VTERM_MAX_CHARS_PER_CELL + 1];
    if (n > VTERM_MAX_CHARS_PER_CELL)
        n = VTERM_MAX_CHARS_PER_CELL;
    memcpy(c, chars, (size_t)n * sizeof *c);
    c[n] = 0;
    VTermGlyphInfo info;
    memset(&info, 0, sizeof info);
    info.chars = c;
    info.width = width;
    info.protected_cell = protected_cell != 0;
    (void)cb_putglyph(&info, pos, s);
}

int vts_fill_row(struct vts *s, int row, int n, uint32_t ch, int protected_cell)
{
    struct vts_row *r = row_at(s, row);
    if (!r || n <= 0)
        return 0;
    struct vts_cell g = {.ch = ch, .more = 0, .pen = s->pen};
    g.pen.bits = (uint16_t)((g.pen.bits & ~PEN_PROTECTED) | (protected_cell ? PEN_PROTECTED : 0));
    if (n >= s->cols && ch < 0x10000) { /* the whole row: no cell, the tail is the glyph */
        n = s->cols;
        r->len = 0;
        r->fill = g.pen;
        r->fill_ch = (uint16_t)ch;
    } else {
        if (n > s->cols)
            n = s->cols;
        if (row_fill_to(s, r, n) != 0)
            return AL_E_NOMEM;
        for (int k = 0; k < n; k++)
            r->cells[k] = g;
    }
    if (s->on_glyph) {
        VTermRect rect = {row, row + 1, n - 1, n};
        s->on_glyph(rect, &ch, 1, s->ud);
    }
    return 0;
}

void vts_insert_blank(struct vts *s, int row, int col, int end)
{
    VTermRect rect = {row, row + 1, col, end};
    if (col < 0 || end > s->cols || col >= end)
        return;
    vterm_scroll_rect(rect, 0, -1, cb_moverect, cb_erase, s);
}

void vts_set_pen(struct vts *s, VTermAttr attr, const VTermValue *val)
{
    VTermValue v = *val;
    (void)cb_setpenattr(attr, &v, s);
}

static void pen_attrs(const struct vts_pen *p, VTermScreenCell *cell)
{
    uint16_t b = p->bits;
    cell->attrs.bold = (b & PEN_BOLD) != 0;
    cell->attrs.underline = (b >> PEN_UL_SHIFT) & 3u;
    cell->attrs.italic = (b & PEN_ITALIC) != 0;
    cell->attrs.blink = (b & PEN_BLINK) != 0;
    cell->attrs.reverse = (b & PEN_REVERSE) != 0;
    cell->attrs.strike = (b & PEN_STRIKE) != 0;
    cell->attrs.font = (b >> PEN_FONT_SHIFT) & 15u;
    cell->fg = p->fg;
    cell->bg = p->bg;
}

void vts_get_pen(const struct vts *s, VTermScreenCell *out)
{
    pen_attrs(&s->pen, out);
}

static size_t put_str(char *o, const char *str)
{
    size_t n = 0;
    for (; str[n]; n++)
        o[n] = str[n];
    return n;
}

/* "38;5;N", "38;2;R;G;B" or "39" (base 30), the same for 40; after a ';'
 * if sep. */
static size_t put_color(char *o, const VTermColor *c, unsigned base, int sep)
{
    size_t n = 0;
    if (sep)
        o[n++] = ';';
    if (c->type & VTERM_COLOR_DEFAULT_MASK) {
        n += vtf_put_uint(o + n, base + 9);
    } else if (VTERM_COLOR_IS_INDEXED(c)) {
        n += vtf_put_uint(o + n, base + 8);
        n += put_str(o + n, ";5;");
        n += vtf_put_uint(o + n, c->indexed.idx);
    } else {
        n += vtf_put_uint(o + n, base + 8);
        n += put_str(o + n, ";2;");
        n += vtf_put_uint(o + n, c->rgb.red);
        o[n++] = ';';
        n += vtf_put_uint(o + n, c->rgb.green);
        o[n++] = ';';
        n += vtf_put_uint(o + n, c->rgb.blue);
    }
    return n;
}

size_t vts_pen_sgr(const struct vts *s, char *out)
{
    static const char *const ul[] = {"", ";4", ";21", ";4:3"};
    uint16_t b = s->pen.bits;
    size_t n = put_str(out, "\033[0");
    const char *flags[] = {b & PEN_BOLD ? ";1" : "",    ul[(b >> PEN_UL_SHIFT) & 3u],
                           b & PEN_ITALIC ? ";3" : "",  b & PEN_BLINK ? ";5" : "",
                           b & PEN_REVERSE ? ";7" : "", b & PEN_STRIKE ? ";9" : ""};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        n += put_str(out + n, flags[i]);
    unsigned font = (b >> PEN_FONT_SHIFT) & 15u;
    if (font) {
        out[n++] = ';';
        n += vtf_put_uint(out + n, 10 + font);
    }
    /* the colours in an SGR of their own: libvterm 0.1.4 writes past its
     * argument array from the 17th parameter on (docs/snapshots.md) */
    n += put_str(out + n, "m\033[");
    n += put_color(out + n, &s->pen.fg, 30, 0);
    n += put_color(out + n, &s->pen.bg, 40, 1);
    out[n++] = 'm';
    return n; /* at most 3 + 2+4+2+2+2+2 + 3 + 3 + 2 * 17 + 1 */
}

int vts_get_cell(const struct vts *s, VTermPos pos, VTermScreenCell *cell)
{
    const struct vts_row *r = row_at(s, pos.row);
    if (!r || pos.col < 0 || pos.col >= s->cols)
        return 0;
    const struct vts_cell tail = fill_cell(r);
    const struct vts_cell *c = pos.col < r->len ? &r->cells[pos.col] : &tail;
    int i = 0;
    if (c->ch != 0)
        cell->chars[i++] = c->ch; /* a right half holds nothing after its mark */
    if (c->ch != 0 && c->ch != VTS_WIDE_RIGHT && c->more)
        for (int k = 0; k < VTS_MORE && r->more[pos.col][k]; k++)
            cell->chars[i++] = r->more[pos.col][k];
    if (i < VTERM_MAX_CHARS_PER_CELL)
        cell->chars[i] = 0;
    pen_attrs(&c->pen, cell);
    cell->attrs.reverse ^= s->global_reverse != 0;
    cell->width =
        pos.col + 1 < s->cols && pos.col + 1 < r->len && r->cells[pos.col + 1].ch == VTS_WIDE_RIGHT
            ? 2
            : 1;
    return 1;
}

int vts_take_error(struct vts *s)
{
    int rc = s->err;
    s->err = 0;
    return rc;
}

size_t vts_mem(const struct vts *s)
{
    size_t n = sizeof *s + 2 * (size_t)s->rows * sizeof(struct vts_row);
    for (int b = 0; b < 2; b++)
        for (int row = 0; row < s->rows; row++)
            n += (size_t)s->buf[b][row].cap *
                 (sizeof(struct vts_cell) + (s->buf[b][row].more ? sizeof(uint32_t[VTS_MORE]) : 0));
    return n;
}
