/*
 * vt: see vt.h; docs/snapshots.md describes the snapshot format.
 *
 * Data model. struct vt owns one VTerm (libvterm keeps the cells of the
 * primary and alternate screens, the cursor, the pen and most modes) and
 * one vtf filter that every PTY byte passes first. Beside them it keeps
 * what libvterm 0.1.4 will not tell:
 *   title, icon        from settermprop, copied (libvterm's string is
 *                      transient), at most VT_MAX_TITLE bytes
 *   altscreen, cursor_visible   from settermprop
 *   insert, newline    IRM and LNM, tracked from CSI units (libvterm has no
 *                      DECRQM for ANSI modes)
 *   gset[4], gl        charset designations of G0..G3 (0: as after a reset)
 *                      and the locking shift
 *   tabs               tab stops, one bit per column (HTS, TBC, RIS, resize)
 *   saved              what DECSC last saved (ESC 7, ?1048h, ?1049h)
 *   held               the last glyph of the text so far when it ends in the
 *                      last column: not yet written to libvterm, so that a
 *                      combining mark arriving in the next read still joins
 *                      it (see glyph_ends_row); written before anything else
 *                      and before any look at the screen (vt_sync)
 *   comb               libvterm's hidden "previous glyph": a combining mark
 *                      joins it (rewriting its cell, even after the cell was
 *                      erased or the screen reset) whenever the cursor stands
 *                      right after it; from the last glyph damage of a write
 *   pending_wrap       libvterm's hidden "phantom column" flag: the last
 *                      glyph went into the last column with autowrap on, so
 *                      the next one wraps. Worked out from the damage of the
 *                      last glyph of each text unit (see text_done).
 * The rest (DECCKM, DECOM, DECAWM, mouse, margins, cursor style...) is
 * asked of libvterm when needed, by writing DECRQM/DECRQSS queries between
 * filter units (the filter guarantees libvterm's parser is then idle) and
 * catching the answers in cap[] through the output callback. Outside a
 * query the output (answers to the program's own DA/DSR queries) is
 * dropped: the viewers' terminals answer those.
 *
 * Rows are 0-based and columns logical (on a double-width line column c is
 * the c-th double-width cell), as in libvterm. Every allocation here has
 * one owner: struct vt owns term, filter; vt_snapshot owns its buffers
 * until it hands the result to the caller.
 */
#include "vt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vterm.h>

#include "al_err.h"
#include "al_limits.h"

#define VT_CAP_MAX 256         /* bytes of one query answer kept */
#define VT_SNAP_INITIAL 16384  /* first allocation of a snapshot buffer */
#define VT_PLACEHOLDER 0x4e00u /* a wide character, to make orphan right halves */
#define VT_DEFAULT_STYLE 1     /* DECSCUSR Ps of a reset terminal: blinking block */
#define VT_HELD_MAX (4 * (1 + VTF_MAX_COMBINING)) /* bytes of one glyph held back */

_Static_assert(VT_MAX_CHARS == VTERM_MAX_CHARS_PER_CELL, "cell size follows libvterm");
_Static_assert(AL_MAX_COLS % 8 == 0, "tab bitmap");
#define VT_TAB_STOP_BYTES (sizeof "\033[4096G\033H")
#define VT_TAB_STOPS_MAX (AL_MAX_COLS * VT_TAB_STOP_BYTES) /* the reset's tab stops, at most */
#define VT_SNAP_BLANK_OTHER 4096u /* the blank step's modes, pens, cursor: far less */
_Static_assert(VT_SNAP_BLANK_MAX < AL_MAX_SNAPSHOT, "the ladder's last step always fits");
_Static_assert(VT_TAB_STOPS_MAX + (size_t)2 * VT_MAX_TITLE + sizeof VT_SNAP_NOTICE +
                       VT_SNAP_BLANK_OTHER <
                   VT_SNAP_BLANK_MAX,
               "a blank-step snapshot stays within VT_SNAP_BLANK_MAX");

struct vt_saved {
    int valid;
    VTermPos pos;
    struct vt_attrs pen;
    int visible;
    int style;
};

struct vt {
    VTerm *term;
    VTermScreen *screen;
    VTermState *state;
    struct vtf *filter;
    uint16_t cols, rows;

    int altscreen, cursor_visible;
    char title[VT_MAX_TITLE + 1];
    char icon[VT_MAX_TITLE + 1];

    int insert, newline;
    uint8_t gset[4];
    uint8_t gl;
    uint8_t tabs[AL_MAX_COLS / 8];
    struct vt_saved saved;
    int pending_wrap;

    size_t held_len; /* a glyph held back, see glyph_ends_row */
    uint8_t held[VT_HELD_MAX];
    uint8_t tbuf[VT_HELD_MAX + VTF_TEXT_CHUNK];

    struct { /* libvterm's "previous glyph" for combining marks */
        int valid;
        VTermPos pos; /* where it was printed */
        int width;    /* its width; a mark joins it iff the cursor is at pos + width */
        uint8_t n;    /* its code points as printed (at most VT_MAX_CHARS) */
        uint32_t chars[VT_MAX_CHARS];
    } comb;

    int dmg_seen; /* damage seen while writing one text unit, and the last */
    VTermRect dmg_last;

    unsigned snap_gaps;            /* what the last snapshot could not reproduce */
    enum vt_snap_level snap_level; /* the ladder's step the last snapshot made */

    int capturing;
    size_t cap_len;
    char cap[VT_CAP_MAX + 1];
};

/* --- libvterm callbacks ------------------------------------------------ */

static void copy_title(char *dst, const char *src)
{
    size_t n = 0;
    if (src) {
        for (; n < VT_MAX_TITLE && src[n]; n++) {
            unsigned char c = (unsigned char)src[n];
            dst[n] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
        }
    }
    dst[n] = 0;
}

static int cb_settermprop(VTermProp prop, VTermValue *val, void *user)
{
    struct vt *vt = user;
    switch (prop) {
    case VTERM_PROP_CURSORVISIBLE:
        vt->cursor_visible = val->boolean != 0;
        break;
    case VTERM_PROP_ALTSCREEN:
        vt->altscreen = val->boolean != 0;
        break;
    case VTERM_PROP_TITLE:
        copy_title(vt->title, val->string);
        break;
    case VTERM_PROP_ICONNAME:
        copy_title(vt->icon, val->string);
        break;
    default:
        break;
    }
    return 1;
}

static int cb_damage(VTermRect rect, void *user)
{
    struct vt *vt = user;
    vt->dmg_seen = 1;
    vt->dmg_last = rect;
    return 1;
}

static const VTermScreenCallbacks vt_screen_cbs = {
    .damage = cb_damage,
    .settermprop = cb_settermprop,
};

static void cb_output(const char *s, size_t len, void *user)
{
    struct vt *vt = user;
    if (!vt->capturing)
        return;
    size_t room = VT_CAP_MAX - vt->cap_len;
    if (len > room)
        len = room;
    memcpy(vt->cap + vt->cap_len, s, len);
    vt->cap_len += len;
}

/* --- queries ----------------------------------------------------------- */

/* Writes a query straight to libvterm (never through the filter) and keeps
 * the answer in vt->cap, NUL-terminated. */
static void vt_query(struct vt *vt, const char *q)
{
    vt->cap_len = 0;
    vt->capturing = 1;
    vterm_input_write(vt->term, q, strlen(q));
    vt->capturing = 0;
    vt->cap[vt->cap_len] = 0;
}

/* Parses a decimal number at *p (at most 5 digits); -1 if none. */
static long parse_num(const char **p)
{
    long v = 0;
    int digits = 0;
    while (**p >= '0' && **p <= '9' && digits < 5) {
        v = v * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    return digits ? v : -1;
}

/* DECRQM for a DEC private mode: 1 set, 0 reset, -1 unknown to libvterm. */
static int query_mode(struct vt *vt, int mode)
{
    char q[32];
    int n = snprintf(q, sizeof q, "\033[?%d$p", mode);
    if (n < 0 || (size_t)n >= sizeof q)
        return -1;
    vt_query(vt, q);
    /* ESC [ ? mode ; Ps $ y */
    const char *p = strchr(vt->cap, ';');
    if (!p)
        return -1;
    p++;
    long ps = parse_num(&p);
    if (ps == 1 || ps == 3)
        return 1;
    if (ps == 2 || ps == 4)
        return 0;
    return -1;
}

/* DECRQSS: up to two numbers of the answer to "ESC P $ q <what> ST". */
static int query_status(struct vt *vt, const char *what, long *a, long *b)
{
    char q[16];
    int n = snprintf(q, sizeof q, "\033P$q%s\033\\", what);
    if (n < 0 || (size_t)n >= sizeof q)
        return -1;
    vt_query(vt, q);
    /* ESC P 1 $ r <a> [; <b>] <what> ST */
    const char *p = strstr(vt->cap, "1$r");
    if (!p)
        return -1;
    p += 3;
    *a = parse_num(&p);
    *b = -1;
    if (*p == ';') {
        p++;
        *b = parse_num(&p);
    }
    return *a < 0 ? -1 : 0;
}

/* DECKPAM has no DECRQM in libvterm; the keypad's encoding tells. */
static int query_keypad(struct vt *vt)
{
    vt->cap_len = 0;
    vt->capturing = 1;
    vterm_keyboard_key(vt->term, VTERM_KEY_KP_0, VTERM_MOD_NONE);
    vt->capturing = 0;
    vt->cap[vt->cap_len] = 0;
    return vt->cap[0] == 0x1b;
}

static int query_style(struct vt *vt)
{
    long a, b;
    if (query_status(vt, " q", &a, &b) != 0 || a < 1 || a > 6)
        return VT_DEFAULT_STYLE;
    return (int)a;
}

/* --- conversions ------------------------------------------------------- */

static void conv_color(const VTermColor *c, struct vt_color *out)
{
    memset(out, 0, sizeof *out);
    if (c->type & VTERM_COLOR_DEFAULT_MASK) {
        out->kind = VT_COLOR_DEFAULT;
    } else if (VTERM_COLOR_IS_INDEXED(c)) {
        out->kind = VT_COLOR_INDEX;
        out->index = c->indexed.idx;
    } else {
        out->kind = VT_COLOR_RGB;
        out->r = c->rgb.red;
        out->g = c->rgb.green;
        out->b = c->rgb.blue;
    }
}

static void read_pen(const struct vt *vt, struct vt_attrs *a)
{
    VTermValue v;
    memset(a, 0, sizeof *a);
    memset(&v, 0, sizeof v);
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_BOLD, &v))
        a->bold = v.boolean != 0;
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_UNDERLINE, &v))
        a->underline = (uint8_t)(v.number & 3);
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_ITALIC, &v))
        a->italic = v.boolean != 0;
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_BLINK, &v))
        a->blink = v.boolean != 0;
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_REVERSE, &v))
        a->reverse = v.boolean != 0;
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_STRIKE, &v))
        a->strike = v.boolean != 0;
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_FONT, &v))
        a->font = (uint8_t)(v.number >= 0 && v.number <= 9 ? v.number : 0);
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_FOREGROUND, &v))
        conv_color(&v.color, &a->fg);
    if (vterm_state_get_penattr(vt->state, VTERM_ATTR_BACKGROUND, &v))
        conv_color(&v.color, &a->bg);
}

static int color_equal(const struct vt_color *a, const struct vt_color *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == VT_COLOR_INDEX)
        return a->index == b->index;
    if (a->kind == VT_COLOR_RGB)
        return a->r == b->r && a->g == b->g && a->b == b->b;
    return 1;
}

static int attrs_equal(const struct vt_attrs *a, const struct vt_attrs *b)
{
    return a->bold == b->bold && a->italic == b->italic && a->blink == b->blink &&
           a->reverse == b->reverse && a->strike == b->strike && a->underline == b->underline &&
           a->font == b->font && color_equal(&a->fg, &b->fg) && color_equal(&a->bg, &b->bg);
}

static int attrs_default(const struct vt_attrs *a)
{
    return !a->bold && !a->italic && !a->blink && !a->reverse && !a->strike && !a->underline &&
           !a->font && a->fg.kind == VT_COLOR_DEFAULT && a->bg.kind == VT_COLOR_DEFAULT;
}

int vt_cell_equal(const struct vt_cell *a, const struct vt_cell *b)
{
    if (!a || !b)
        return 0;
    if (a->width == 0 || b->width == 0)
        return a->width == b->width;
    if (a->width != b->width || a->nchars != b->nchars)
        return 0;
    for (uint8_t i = 0; i < a->nchars && i < VT_MAX_CHARS; i++)
        if (a->chars[i] != b->chars[i])
            return 0;
    return attrs_equal(&a->attrs, &b->attrs);
}

static void read_cell(const struct vt *vt, int row, int col, struct vt_cell *out)
{
    VTermScreenCell c;
    memset(&c, 0, sizeof c); /* get_cell leaves parts of it alone */
    memset(out, 0, sizeof *out);
    VTermPos pos = {row, col};
    if (!vterm_screen_get_cell(vt->screen, pos, &c))
        return;
    if (c.chars[0] == (uint32_t)-1) {
        out->width = 0;
    } else {
        uint8_t n = 0;
        while (n < VT_MAX_CHARS && c.chars[n]) {
            out->chars[n] = c.chars[n];
            n++;
        }
        out->nchars = n;
        out->width = (uint8_t)(c.width == 2 ? 2 : 1);
    }
    out->attrs.bold = c.attrs.bold;
    out->attrs.underline = c.attrs.underline;
    out->attrs.italic = c.attrs.italic;
    out->attrs.blink = c.attrs.blink;
    out->attrs.reverse = c.attrs.reverse;
    out->attrs.strike = c.attrs.strike;
    out->attrs.font = c.attrs.font;
    conv_color(&c.fg, &out->attrs.fg);
    conv_color(&c.bg, &out->attrs.bg);
}

static int row_width(const struct vt *vt, int row)
{
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
    int w = li && li->doublewidth ? vt->cols / 2 : vt->cols;
    return w > 0 ? w : 1;
}

/* --- tracked state ----------------------------------------------------- */

static void tab_set(struct vt *vt, int col, int on)
{
    if (col < 0 || col >= AL_MAX_COLS)
        return;
    if (on)
        vt->tabs[col / 8] = (uint8_t)(vt->tabs[col / 8] | (1u << (col % 8)));
    else
        vt->tabs[col / 8] = (uint8_t)(vt->tabs[col / 8] & ~(1u << (col % 8)));
}

int vt_tab_stop(const struct vt *vt, uint16_t col)
{
    if (!vt || col >= vt->cols)
        return 0;
    return (vt->tabs[col / 8] >> (col % 8)) & 1;
}

/* Default tab stops (every 8 columns) from column `from` on. */
static void tabs_default(struct vt *vt, int from)
{
    for (int c = from; c < AL_MAX_COLS; c++)
        tab_set(vt, c, c % 8 == 0);
}

static void reset_tracked(struct vt *vt)
{
    vt->insert = 0;
    vt->newline = 0;
    memset(vt->gset, 0, sizeof vt->gset);
    vt->gl = 0;
    tabs_default(vt, 0);
    vt->pending_wrap = 0;
}

static void save_cursor(struct vt *vt)
{
    vt->saved.valid = 1;
    vterm_state_get_cursorpos(vt->state, &vt->saved.pos);
    read_pen(vt, &vt->saved.pen);
    vt->saved.visible = vt->cursor_visible;
    vt->saved.style = query_style(vt);
}

static void track_esc(struct vt *vt, const struct vtf_seq *s, VTermPos at)
{
    if (s->ninter == 0) {
        switch (s->final) {
        case 'c': /* RIS */
            reset_tracked(vt);
            break;
        case 'H': /* HTS */
            tab_set(vt, at.col, 1);
            break;
        case '7': /* DECSC */
            save_cursor(vt);
            break;
        case 'n': /* LS2 */
            vt->gl = 2;
            break;
        case 'o': /* LS3 */
            vt->gl = 3;
            break;
        default:
            break;
        }
        return;
    }
    /* SCS. libvterm ignores sets it does not know. Its initial G0..G3 are
     * not quite ASCII as designated by ESC ( B: after that designation an
     * ASCII glyph and a combining mark written together are decoded apart
     * (and in the last column no longer join), so "never designated" (0)
     * is kept apart from 'B'. */
    if (s->ninter == 1 && s->inter[0] >= '(' && s->inter[0] <= '+' &&
        (s->final == '0' || s->final == 'A' || s->final == 'B'))
        vt->gset[s->inter[0] - '('] = s->final;
}

static void track_csi(struct vt *vt, const struct vtf_seq *s, VTermPos at)
{
    if (s->ninter != 0)
        return;
    if (s->leader == 0) {
        switch (s->final) {
        case 'h': /* SM/RM: libvterm 0.1.4 acts on the first parameter only */
        case 'l':
            if (s->params[0] == 4)
                vt->insert = s->final == 'h';
            else if (s->params[0] == 20)
                vt->newline = s->final == 'h';
            break;
        case 'g': /* TBC */
            if (s->params[0] == VTF_PARAM_MISSING || s->params[0] == 0)
                tab_set(vt, at.col, 0);
            else if (s->params[0] == 3)
                memset(vt->tabs, 0, sizeof vt->tabs);
            break;
        case 'C': /* CUF and HPR end a pending wrap even where they cannot move */
        case 'a':
            vt->pending_wrap = 0;
            break;
        default:
            break;
        }
        return;
    }
    if (s->leader == '?' && s->final == 'h' && (s->params[0] == 1048 || s->params[0] == 1049))
        save_cursor(vt);
}

/* After a text unit: the last glyph damaged [start_col, end_col) of the
 * cursor's row; if it reached the end of the row while the cursor stayed
 * at its start, libvterm set its phantom flag iff autowrap was on. */
static void text_done(struct vt *vt, int moved)
{
    if (!vt->dmg_seen) {
        if (moved)
            vt->pending_wrap = 0;
        return;
    }
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    VTermRect r = vt->dmg_last;
    if (r.start_row == cur.row && r.end_row == cur.row + 1 && r.start_col == cur.col &&
        r.end_col > r.start_col && r.end_col >= row_width(vt, cur.row))
        vt->pending_wrap = query_mode(vt, 7) == 1;
    else
        vt->pending_wrap = 0;
}

static void write_text(struct vt *vt, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    vt->dmg_seen = 0;
    vterm_input_write(vt->term, (const char *)p, n);
    vterm_state_get_cursorpos(vt->state, &after);
    if (vt->dmg_seen) {
        /* The last damage of a text write is its last glyph. */
        VTermRect r = vt->dmg_last;
        struct vt_cell c;
        read_cell(vt, r.start_row, r.start_col, &c);
        vt->comb.valid = 1;
        vt->comb.pos.row = r.start_row;
        vt->comb.pos.col = r.start_col;
        vt->comb.width = r.end_col - r.start_col;
        vt->comb.n = c.nchars;
        memcpy(vt->comb.chars, c.chars, sizeof c.chars);
    }
    text_done(vt, before.row != after.row || before.col != after.col);
}

/* Start of the last glyph (a base character and the zero-width code points
 * after it) of whole UTF-8 text; 0 if it is all zero-width. */
static size_t last_glyph_start(const uint8_t *p, size_t n)
{
    size_t i = n;
    while (i > 0) {
        size_t start = i - 1;
        while (start > 0 && (p[start] & 0xc0) == 0x80)
            start--;
        uint32_t cp = p[start];
        if (cp >= 0xf0)
            cp &= 0x07;
        else if (cp >= 0xe0)
            cp &= 0x0f;
        else if (cp >= 0xc0)
            cp &= 0x1f;
        for (size_t k = start + 1; k < i; k++)
            cp = (cp << 6) | (p[k] & 0x3fu);
        if (vtf_cp_width(cp) != 0)
            return start;
        i = start;
    }
    return 0;
}

/* libvterm 0.1.4 joins a combining mark to the glyph before it within one
 * write, but across two writes only if the cursor moved on after that
 * glyph, which it does not in the last column. So a glyph that will end in
 * the last column is held back until we know what follows it (held[]), and
 * PTY read boundaries cannot change the screen. */
static int glyph_ends_row(struct vt *vt, const uint8_t *g, size_t n)
{
    uint32_t cp = 0;
    size_t k = 0;
    while (k < n && k < 4 && (k == 0 || (g[k] & 0xc0) == 0x80))
        k++;
    if (k == 0)
        return 0;
    cp = g[0] >= 0xf0   ? g[0] & 0x07u
         : g[0] >= 0xe0 ? g[0] & 0x0fu
         : g[0] >= 0xc0 ? g[0] & 0x1fu
                        : g[0];
    for (size_t i = 1; i < k; i++)
        cp = (cp << 6) | (g[i] & 0x3fu);
    int w = vtf_cp_width(cp);
    if (w <= 0)
        return 0;
    VTermPos pos;
    vterm_state_get_cursorpos(vt->state, &pos);
    int col = pos.col, row = pos.row;
    if (vt->pending_wrap) {
        col = 0;
        if (row + 1 < vt->rows)
            row++;
    }
    return col + w >= row_width(vt, row);
}

static void vt_sync(struct vt *vt)
{
    if (vt->held_len == 0)
        return;
    size_t n = vt->held_len;
    vt->held_len = 0;
    write_text(vt, vt->held, n);
}

static void on_text(struct vt *vt, const uint8_t *p, size_t n)
{
    if (vt->held_len) {
        memcpy(vt->tbuf, vt->held, vt->held_len);
        memcpy(vt->tbuf + vt->held_len, p, n);
        n += vt->held_len;
        p = vt->tbuf;
        vt->held_len = 0;
    }
    size_t cut = last_glyph_start(p, n);
    write_text(vt, p, cut);
    if (n - cut <= sizeof vt->held && glyph_ends_row(vt, p + cut, n - cut)) {
        memcpy(vt->held, p + cut, n - cut);
        vt->held_len = n - cut;
        return;
    }
    write_text(vt, p + cut, n - cut);
}

/* ESC # 3, 4, 6: double-height or double-width line. On a one-column
 * screen such a line is zero columns wide and libvterm writes through a
 * NULL cell pointer (ESC # 3, a glyph, ECH). */
static int is_line_attr(const struct vtf_seq *s)
{
    return s->ninter == 1 && s->inter[0] == '#' &&
           (s->final == '3' || s->final == '4' || s->final == '6');
}

/* Before shrinking to one column: make every line single width again
 * (ESC # 5 on each), putting the cursor back where it was. */
static void single_width_lines(struct vt *vt)
{
    int any = 0;
    for (int r = 0; r < vt->rows && !any; r++) {
        const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, r);
        any = li && li->doublewidth;
    }
    if (!any)
        return;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    int origin = query_mode(vt, 6) == 1;
    if (origin)
        vt_query(vt, "\033[?6l");
    char q[32];
    for (int r = 0; r < vt->rows; r++) {
        const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, r);
        if (!li || !li->doublewidth)
            continue;
        if (snprintf(q, sizeof q, "\033[%d;1H\033#5", r + 1) < (int)sizeof q)
            vt_query(vt, q);
    }
    if (origin) {
        /* DECOM homes the cursor to the margins; CUP is then relative. */
        vt_query(vt, "\033[?6h");
        VTermPos home;
        vterm_state_get_cursorpos(vt->state, &home);
        cur.row -= home.row;
        cur.col -= home.col;
    }
    if (snprintf(q, sizeof q, "\033[%d;%dH", cur.row + 1, cur.col + 1) < (int)sizeof q)
        vt_query(vt, q);
    vt->pending_wrap = 0;
}

/* Moves libvterm's cursor to an absolute position whatever DECOM says:
 * CUP is relative to where CUP 1;1 lands. */
static void goto_abs(struct vt *vt, VTermPos pos)
{
    vt_query(vt, "\033[H");
    VTermPos home;
    vterm_state_get_cursorpos(vt->state, &home);
    char q[32];
    int n = snprintf(q, sizeof q, "\033[%d;%dH", pos.row - home.row + 1, pos.col - home.col + 1);
    if (n > 0 && (size_t)n < sizeof q)
        vt_query(vt, q);
}

/* libvterm 0.1.4 keeps a scroll region and side margins set for a larger
 * screen across a resize; the next scroll then memmoves a negative size.
 * Margins that no longer fit go back to the whole screen, as in xterm. */
static void fix_margins(struct vt *vt)
{
    long a, b;
    int bad_rows = query_status(vt, "r", &a, &b) == 0 && (b > vt->rows || a > b);
    int bad_cols = query_status(vt, "s", &a, &b) == 0 && (b > vt->cols || a > b);
    if (!bad_rows && !bad_cols)
        return;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    if (bad_rows)
        vt_query(vt, "\033[r");
    if (bad_cols) {
        int lrmm = query_mode(vt, 69) == 1;
        vt_query(vt, lrmm ? "\033[s" : "\033[?69h\033[s\033[?69l");
    }
    if (cur.row >= vt->rows)
        cur.row = vt->rows - 1;
    if (cur.col >= vt->cols)
        cur.col = vt->cols - 1;
    goto_abs(vt, cur);
    vt->pending_wrap = 0;
}

/* libvterm 0.1.4 can leave its cursor outside the screen: a resize that
 * drops rows moves it up past row 0, and DECRC after a shrink restores a
 * position that no longer exists; the next glyph then reads out of bounds.
 * A CUU/CUD/CUB/CUF by one ends in libvterm's own clamping. */
static void fix_cursor(struct vt *vt)
{
    VTermPos p;
    vterm_state_get_cursorpos(vt->state, &p);
    if (p.row >= 0 && p.row < vt->rows && p.col >= 0 && p.col < vt->cols)
        return;
    if (p.row < 0)
        vt_query(vt, "\033[A");
    else if (p.row >= vt->rows)
        vt_query(vt, "\033[B");
    if (p.col < 0)
        vt_query(vt, "\033[D");
    else if (p.col >= vt->cols)
        vt_query(vt, "\033[C");
    vterm_state_get_cursorpos(vt->state, &p);
    if (p.row < 0 || p.row >= vt->rows || p.col < 0 || p.col >= vt->cols)
        vt_query(vt, "\033[H");
    vt->pending_wrap = 0;
}

static int on_unit(void *ud, const struct vtf_unit *u)
{
    struct vt *vt = ud;
    if (u->kind == VTF_TEXT) {
        on_text(vt, u->bytes, u->len);
        return 0;
    }
    vt_sync(vt);
    if (u->kind == VTF_ESC && vt->cols < 2 && is_line_attr(u->seq))
        return 0; /* a double-width line one column wide has no room at all */
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    vterm_input_write(vt->term, (const char *)u->bytes, u->len);
    fix_cursor(vt);
    vterm_state_get_cursorpos(vt->state, &after);
    if (before.row != after.row || before.col != after.col)
        vt->pending_wrap = 0;
    switch (u->kind) {
    case VTF_CTRL:
        if (u->bytes[0] == 0x0e) /* SO */
            vt->gl = 1;
        else if (u->bytes[0] == 0x0f) /* SI */
            vt->gl = 0;
        break;
    case VTF_ESC:
        track_esc(vt, u->seq, before);
        break;
    case VTF_CSI:
        track_csi(vt, u->seq, before);
        break;
    default:
        break;
    }
    return 0;
}

/* --- life cycle -------------------------------------------------------- */

static int size_ok(uint16_t cols, uint16_t rows)
{
    if (cols == 0 || rows == 0 || cols > AL_MAX_COLS || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if ((uint32_t)cols * rows > VT_MAX_CELLS)
        return AL_E_TOOBIG;
    return AL_OK;
}

int vt_size_check(uint16_t cols, uint16_t rows)
{
    return size_ok(cols, rows);
}

size_t vt_mem_estimate(uint16_t cols, uint16_t rows)
{
    return VT_BYTES_FIXED + (size_t)cols * rows * VT_BYTES_PER_CELL;
}

int vt_new(uint16_t cols, uint16_t rows, struct vt **out)
{
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    int rc = size_ok(cols, rows);
    if (rc != AL_OK)
        return rc;
    struct vt *vt = calloc(1, sizeof *vt);
    if (!vt)
        return AL_E_NOMEM;
    rc = vtf_new(on_unit, vt, &vt->filter);
    if (rc != AL_OK) {
        free(vt);
        return rc;
    }
    vt->term = vterm_new(rows, cols);
    if (!vt->term) {
        vtf_free(vt->filter);
        free(vt);
        return AL_E_NOMEM;
    }
    vt->cols = cols;
    vt->rows = rows;
    vt->cursor_visible = 1;
    reset_tracked(vt);
    /* A one-column libvterm dereferences NULL on a wide glyph. */
    vtf_set_narrow(vt->filter, cols < 2);

    vterm_set_utf8(vt->term, 1);
    vterm_output_set_callback(vt->term, cb_output, vt);
    vt->state = vterm_obtain_state(vt->term);
    vt->screen = vterm_obtain_screen(vt->term);
    vterm_screen_set_callbacks(vt->screen, &vt_screen_cbs, vt);
    vterm_screen_enable_altscreen(vt->screen, 1);
    vterm_screen_reset(vt->screen, 1);
    /* Prime: give libvterm a previous glyph so that its combining and
     * repeat logic never starts from an empty one (docs/snapshots.md). */
    static const char prime[] = " \033[H\033[2J";
    vterm_input_write(vt->term, prime, sizeof prime - 1);
    vt->pending_wrap = 0;
    vt->comb.valid = 1; /* the prime's space at 0,0 */
    vt->comb.width = 1;
    vt->comb.n = 1;
    vt->comb.chars[0] = ' ';
    *out = vt;
    return AL_OK;
}

void vt_free(struct vt *vt)
{
    if (!vt)
        return;
    if (vt->term)
        vterm_free(vt->term);
    vtf_free(vt->filter);
    free(vt);
}

int vt_feed(struct vt *vt, const uint8_t *p, size_t n)
{
    if (!vt || (!p && n))
        return AL_E_INVAL;
    return vtf_feed(vt->filter, p, n);
}

int vt_resize(struct vt *vt, uint16_t cols, uint16_t rows)
{
    if (!vt)
        return AL_E_INVAL;
    int rc = size_ok(cols, rows);
    if (rc != AL_OK)
        return rc;
    if (cols == vt->cols && rows == vt->rows)
        return AL_OK;
    vt_sync(vt);
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    uint16_t old_cols = vt->cols;
    if (cols < 2)
        single_width_lines(vt);
    vterm_set_size(vt->term, rows, cols);
    vt->cols = cols;
    vt->rows = rows;
    fix_cursor(vt);
    fix_margins(vt);
    vterm_state_get_cursorpos(vt->state, &after);
    if (before.row != after.row || before.col != after.col)
        vt->pending_wrap = 0;
    if (cols > old_cols)
        tabs_default(vt, old_cols);
    vtf_set_narrow(vt->filter, cols < 2);
    return AL_OK;
}

/* --- accessors --------------------------------------------------------- */

void vt_size(const struct vt *vt, uint16_t *cols, uint16_t *rows)
{
    if (cols)
        *cols = vt ? vt->cols : 0;
    if (rows)
        *rows = vt ? vt->rows : 0;
}

int vt_get_cell(struct vt *vt, uint16_t row, uint16_t col, struct vt_cell *out)
{
    if (!vt || !out || row >= vt->rows || col >= vt->cols)
        return AL_E_INVAL;
    vt_sync(vt);
    read_cell(vt, row, col, out);
    return AL_OK;
}

int vt_line_attrs(const struct vt *vt, uint16_t row, uint8_t *dwl, uint8_t *dhl)
{
    if (!vt || row >= vt->rows)
        return AL_E_INVAL;
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
    if (dwl)
        *dwl = li ? li->doublewidth : 0;
    if (dhl)
        *dhl = li ? li->doubleheight : 0;
    return AL_OK;
}

void vt_get_cursor(struct vt *vt, struct vt_cursor *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!vt)
        return;
    vt_sync(vt);
    VTermPos pos;
    vterm_state_get_cursorpos(vt->state, &pos);
    out->row = (uint16_t)pos.row;
    out->col = (uint16_t)pos.col;
    out->visible = (uint8_t)vt->cursor_visible;
    out->pending_wrap = (uint8_t)vt->pending_wrap;
}

void vt_get_pen(const struct vt *vt, struct vt_attrs *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (vt)
        read_pen(vt, out);
}

void vt_get_modes(struct vt *vt, struct vt_modes *m)
{
    if (!m)
        return;
    memset(m, 0, sizeof *m);
    if (!vt)
        return;
    m->altscreen = (uint8_t)vt->altscreen;
    m->app_cursor = query_mode(vt, 1) == 1;
    m->app_keypad = (uint8_t)query_keypad(vt);
    m->reverse = query_mode(vt, 5) == 1;
    m->origin = query_mode(vt, 6) == 1;
    m->autowrap = query_mode(vt, 7) == 1;
    m->lr_margins = query_mode(vt, 69) == 1;
    static const uint16_t mouse[] = {1000, 1002, 1003};
    for (size_t i = 0; i < sizeof mouse / sizeof mouse[0] && !m->mouse; i++)
        if (query_mode(vt, mouse[i]) == 1)
            m->mouse = mouse[i];
    static const uint16_t proto[] = {1005, 1006, 1015};
    for (size_t i = 0; i < sizeof proto / sizeof proto[0] && !m->mouse_proto; i++)
        if (query_mode(vt, proto[i]) == 1)
            m->mouse_proto = proto[i];
    m->focus = query_mode(vt, 1004) == 1;
    m->bracketed = query_mode(vt, 2004) == 1;
    m->insert = (uint8_t)vt->insert;
    m->newline = (uint8_t)vt->newline;
    long a, b;
    m->top = 0;
    m->bottom = (uint16_t)(vt->rows - 1);
    if (query_status(vt, "r", &a, &b) == 0 && a >= 1 && b >= a && b <= vt->rows) {
        m->top = (uint16_t)(a - 1);
        m->bottom = (uint16_t)(b - 1);
    }
    m->left = 0;
    m->right = (uint16_t)(vt->cols - 1);
    if (query_status(vt, "s", &a, &b) == 0 && a >= 1 && b >= a && b <= vt->cols) {
        m->left = (uint16_t)(a - 1);
        m->right = (uint16_t)(b - 1);
    }
    m->cursor_style = (uint8_t)query_style(vt);
    m->protect = query_status(vt, "\"q", &a, &b) == 0 && a == 1;
    memcpy(m->charset, vt->gset, sizeof m->charset);
    m->gl = vt->gl;
}

const char *vt_title(const struct vt *vt)
{
    return vt ? vt->title : "";
}

const char *vt_icon_name(const struct vt *vt)
{
    return vt ? vt->icon : "";
}

unsigned vt_snapshot_gaps(const struct vt *vt)
{
    return vt ? vt->snap_gaps : 0;
}

void vt_filter_stats(const struct vt *vt, struct vtf_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (vt)
        vtf_get_stats(vt->filter, out);
}

/* --- snapshot ---------------------------------------------------------- */

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
    if (s->pen_known && attrs_equal(&s->pen, a))
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
    read_cell(s->vt, row, col, out);
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
    int width = row_width(vt, row);
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
                   attrs_equal(&s->cells[end].attrs, &c->attrs))
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
    int width = row_width(vt, p.row);
    if (wg < 1 || g->nchars == 0 || (li && li->doublewidth) || p.col + 2 * wg > width)
        return 0;
    struct vt_cell *row = s->cells;
    for (int x = 0; x < width; x++)
        snap_cell(s, p.row, x, &row[x]);
    for (int x = width - wg; x < width; x++)
        if (row[x].width == 0 || row[x].nchars != 0 ||
            !attrs_equal(&row[x].attrs, &row[width - wg].attrs))
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
        int width = row_width(vt, p.row);
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
        int width = row_width(vt, r);
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
        int width = row_width(vt, cur.row);
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
                   (next.width == 0 || (next.nchars == 0 && attrs_equal(&next.attrs, &c.attrs)))) {
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
    read_pen(vt, &pen);
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
