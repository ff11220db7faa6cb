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
 *   gset[4], gl        charset designations of G0..G3 and the locking shift
 *   tabs               tab stops, one bit per column (HTS, TBC, RIS, resize)
 *   saved              what DECSC last saved (ESC 7, ?1048h, ?1049h)
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

_Static_assert(VT_MAX_CHARS == VTERM_MAX_CHARS_PER_CELL, "cell size follows libvterm");
_Static_assert(AL_MAX_COLS % 8 == 0, "tab bitmap");

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

    int dmg_seen; /* damage seen while writing one text unit, and the last */
    VTermRect dmg_last;

    int capturing;
    size_t cap_len;
    char cap[VT_CAP_MAX + 1];
};

/* --- libvterm callbacks ------------------------------------------------ */

static void copy_title(char *dst, const char *src)
{
    size_t n = 0;
    if (src) {
        for (; src[n] && n < VT_MAX_TITLE; n++) {
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
    for (int i = 0; i < 4; i++)
        vt->gset[i] = 'B';
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
        case 'h':
        case 'l':
            for (uint8_t i = 0; i < s->nparams; i++) {
                if (s->params[i] == 4)
                    vt->insert = s->final == 'h';
                else if (s->params[i] == 20)
                    vt->newline = s->final == 'h';
            }
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
    if (s->leader == '?' && s->final == 'h')
        for (uint8_t i = 0; i < s->nparams; i++)
            if (s->params[i] == 1048 || s->params[i] == 1049)
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

static int on_unit(void *ud, const struct vtf_unit *u)
{
    struct vt *vt = ud;
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    vt->dmg_seen = 0;
    vterm_input_write(vt->term, (const char *)u->bytes, u->len);
    vterm_state_get_cursorpos(vt->state, &after);
    int moved = before.row != after.row || before.col != after.col;
    if (u->kind == VTF_TEXT) {
        text_done(vt, moved);
        return 0;
    }
    if (moved)
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
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    vterm_set_size(vt->term, rows, cols);
    vterm_state_get_cursorpos(vt->state, &after);
    if (before.row != after.row || before.col != after.col)
        vt->pending_wrap = 0;
    if (cols > vt->cols)
        tabs_default(vt, vt->cols);
    vt->cols = cols;
    vt->rows = rows;
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

int vt_get_cell(const struct vt *vt, uint16_t row, uint16_t col, struct vt_cell *out)
{
    if (!vt || !out || row >= vt->rows || col >= vt->cols)
        return AL_E_INVAL;
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

void vt_get_cursor(const struct vt *vt, struct vt_cursor *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!vt)
        return;
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
 * terminal's cursor and pen are known to be at this point of the stream. */
struct snap {
    struct vt *vt;
    uint8_t *buf;
    size_t len, cap;
    int err;
    int row, col;  /* receiver's cursor, -1 if unknown */
    int pen_known; /* receiver's pen is `pen` */
    struct vt_attrs pen;
    struct vt_cell *cells; /* one row, vt->cols cells */
    uint8_t *dirty;        /* cells the drawing itself may have changed */
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

static void put_color(char *buf, size_t cap, size_t *n, const struct vt_color *c, int base)
{
    int k = 0;
    if (c->kind == VT_COLOR_INDEX && c->index < 8)
        k = snprintf(buf + *n, cap - *n, ";%d", base + c->index);
    else if (c->kind == VT_COLOR_INDEX && c->index < 16)
        k = snprintf(buf + *n, cap - *n, ";%d", base + 60 + c->index - 8);
    else if (c->kind == VT_COLOR_INDEX)
        k = snprintf(buf + *n, cap - *n, ";%d;5;%d", base + 8, c->index);
    else if (c->kind == VT_COLOR_RGB)
        k = snprintf(buf + *n, cap - *n, ";%d;2;%d;%d;%d", base + 8, c->r, c->g, c->b);
    if (k > 0 && (size_t)k < cap - *n)
        *n += (size_t)k;
}

/* SGR that sets exactly these attributes, from a reset. */
static void set_pen(struct snap *s, const struct vt_attrs *a)
{
    if (s->pen_known && attrs_equal(&s->pen, a))
        return;
    static const char *const ul[] = {"", ";4", ";4:2", ";4:3"};
    char buf[96];
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
    put_color(buf, sizeof buf - 1, &n, &a->fg, 30);
    put_color(buf, sizeof buf - 1, &n, &a->bg, 40);
    buf[n++] = 'm';
    sb_put(s, buf, n);
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

static void put_chars(struct snap *s, const struct vt_cell *x)
{
    for (uint8_t i = 0; i < x->nchars; i++)
        sb_cp(s, x->chars[i]);
}

/* Pass A: right halves whose left half is no longer a wide glyph (a narrow
 * glyph overwrote it) exist only as history; make them the same way, with
 * a wide placeholder that pass B then overwrites. */
static void draw_orphans(struct snap *s, int row, int width)
{
    const struct vt_cell *c = s->cells;
    for (int x = width - 1; x >= 1; x--) {
        if (c[x].width != 0)
            continue;
        if (c[x - 1].width != 0 && c[x - 1].nchars > 0 && cell_width(&c[x - 1]) == 2)
            continue; /* pass B's wide glyph at x-1 makes it */
        go(s, row, x - 1);
        sb_cp(s, VT_PLACEHOLDER);
        s->col = advance(x - 1, 2, width);
        s->dirty[x - 1] = 1;
    }
}

static void draw_row(struct snap *s, int row)
{
    struct vt *vt = s->vt;
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
    int width = row_width(vt, row);
    for (int x = 0; x < width; x++)
        read_cell(vt, row, x, &s->cells[x]);
    memset(s->dirty, 0, (size_t)width);
    if (li && li->doublewidth) {
        go(s, row, 0);
        sb_puts(s, li->doubleheight == 1 ? "\033#3" : li->doubleheight == 2 ? "\033#4" : "\033#6");
    }
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
        int w = cell_width(c);
        if (w == 2 && x + 2 > width) {
            x++; /* a wide glyph cut by the row's end: cannot be printed */
            continue;
        }
        go(s, row, x);
        set_pen(s, &c->attrs);
        if (w == 0) {
            /* A lone zero-width glyph: libvterm would combine it with the
             * glyph to its left unless the cursor came back from the right. */
            sb_put(s, " ", 1);
            s->col = advance(x, 1, width);
            go(s, row, x);
            put_chars(s, c);
        } else {
            put_chars(s, c);
            s->col = advance(x, w, width);
            if (w == 2)
                s->dirty[x + 1] = 1;
        }
        x++;
    }
}

static void emit_reset(struct snap *s)
{
    struct vt *vt = s->vt;
    /* DECSTR for real terminals (a no-op in libvterm 0.1.4), then every
     * mode and state this snapshot may set, explicitly back to default. */
    sb_puts(s, "\033[!p\033[?1049l\033[0m\033[?69l\033[r\033[4;20l"
               "\033[?1;5;6;1000;1002;1003;1004;1005;1006;1015;2004l"
               "\033>\033[?25h\033[0 q\033[0\"q\033(B\033)B\033*B\033+B\017\033[3g");
    for (int c = 0; c < vt->cols; c++)
        if (vt_tab_stop(vt, (uint16_t)c))
            sb_printf(s, "\033[%dG\033H", c + 1);
    sb_puts(s, "\033[?7l\033[H\033[2J");
    s->row = 0;
    s->col = 0;
    s->pen_known = 1;
    memset(&s->pen, 0, sizeof s->pen);
}

static void emit_saved(struct snap *s)
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
    sb_puts(s, "\0337");
    if (!sv->visible)
        sb_puts(s, "\033[?25h");
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
    char list[80];
    size_t n = 0;
    const uint16_t on[] = {m->app_cursor ? 1 : 0, m->reverse ? 5 : 0, m->mouse,
                           m->focus ? 1004 : 0,   m->mouse_proto,     m->bracketed ? 2004 : 0};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        if (!on[i])
            continue;
        int k = snprintf(list + n, sizeof list - n, "%s%u", n ? ";" : "", (unsigned)on[i]);
        if (k > 0 && (size_t)k < sizeof list - n)
            n += (size_t)k;
    }
    if (n)
        sb_printf(s, "\033[?%.*sh", (int)n, list);
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
        read_cell(vt, cur.row, cur.col, &c);
        s->pen_known = 0;
        set_pen(s, &c.attrs);
        if (c.width != 0 && c.nchars == 0) {
            sb_puts(s, " \033[X");
        } else if (c.width != 0 && cell_width(&c) > 0) {
            put_chars(s, &c);
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
        if (vt->gset[i] != 'B')
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

int vt_snapshot(struct vt *vt, uint8_t **out, size_t *len)
{
    if (!vt || !out || !len)
        return AL_E_INVAL;
    *out = NULL;
    *len = 0;
    struct snap s;
    memset(&s, 0, sizeof s);
    s.vt = vt;
    s.cells = calloc(vt->cols, sizeof *s.cells);
    s.dirty = calloc(vt->cols, 1);
    if (!s.cells || !s.dirty) {
        free(s.cells);
        free(s.dirty);
        return AL_E_NOMEM;
    }
    struct vt_modes m;
    vt_get_modes(vt, &m);

    emit_reset(&s);
    if (vt->altscreen) {
        if (vt->saved.valid)
            emit_saved(&s);
        sb_puts(&s, vt->saved.valid ? "\033[?1049h" : "\033[?1047h");
        sb_puts(&s, "\033[0m\033[H\033[2J");
        s.row = s.col = 0;
        s.pen_known = 1;
        memset(&s.pen, 0, sizeof s.pen);
    } else if (vt->saved.valid) {
        emit_saved(&s);
    }
    for (int row = 0; row < vt->rows && !s.err; row++)
        draw_row(&s, row);
    emit_modes(&s, &m);
    emit_cursor(&s, &m);
    emit_final(&s, &m);

    free(s.cells);
    free(s.dirty);
    if (s.err) {
        free(s.buf);
        return s.err;
    }
    *out = s.buf;
    *len = s.len;
    return AL_OK;
}
