/*
 * vt_query: what the screen model tells (see vt.h, struct vt in
 * vt_internal.h). The DECRQM/DECRQSS queries written straight to libvterm
 * (the filter guarantees its parser is idle between units) whose answers
 * the output callback keeps in vt->cap; the pen and the colours read from
 * libvterm; the field-by-field comparisons of attributes and cells (never
 * memcmp libvterm's attrs); and the public accessors (vt_get_*, vt_size,
 * vt_title, vt_tab_stop...), which change nothing the screen shows.
 *
 * Not here: the feed path and the life cycle (vt.c), the snapshot
 * (vt_snapshot.c). Nothing here is on the per-byte path: the feed asks a
 * query only at DECSC, for the text fast path (DECRQSS) and on a resize.
 * A DECRQM is a CSI, which under DECOM ends in libvterm's clamp of the
 * cursor into the margins: vt_get_modes (the snapshot) can still move a
 * cursor that stands outside them.
 */
#include "vt.h"

#include <stdio.h>
#include <string.h>

#include <vterm.h>

#include "al_err.h"
#include "vt_internal.h"
#include "vtscreen.h"

/* --- queries ----------------------------------------------------------- */

/* Writes a query straight to libvterm (never through the filter) and keeps
 * the answer in vt->cap, NUL-terminated. */
void vt_query(struct vt *vt, const char *q)
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
int vt_query_mode(struct vt *vt, int mode)
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
int vt_query_status(struct vt *vt, const char *what, long *a, long *b)
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

int vt_query_style(struct vt *vt)
{
    long a, b;
    if (vt_query_status(vt, " q", &a, &b) != 0 || a < 1 || a > 6)
        return VT_DEFAULT_STYLE;
    return (int)a;
}

/* --- conversions ------------------------------------------------------- */

void vt_read_pen(const struct vt *vt, struct vt_attrs *a)
{
    /* the layer's pen, not libvterm's: vt.c's own SGR path (sgr_fast)
     * leaves libvterm's behind until something of libvterm's needs it */
    VTermScreenCell c;
    memset(&c, 0, sizeof c);
    memset(a, 0, sizeof *a);
    vts_get_pen(vt->cells, &c);
    a->bold = c.attrs.bold;
    a->underline = (uint8_t)c.attrs.underline;
    a->italic = c.attrs.italic;
    a->blink = c.attrs.blink;
    a->reverse = c.attrs.reverse;
    a->strike = c.attrs.strike;
    a->font = (uint8_t)(c.attrs.font <= 9 ? c.attrs.font : 0);
    vt_conv_color(&c.fg, &a->fg);
    vt_conv_color(&c.bg, &a->bg);
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

int vt_attrs_equal(const struct vt_attrs *a, const struct vt_attrs *b)
{
    return a->bold == b->bold && a->italic == b->italic && a->blink == b->blink &&
           a->reverse == b->reverse && a->strike == b->strike && a->underline == b->underline &&
           a->font == b->font && color_equal(&a->fg, &b->fg) && color_equal(&a->bg, &b->bg);
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
    return vt_attrs_equal(&a->attrs, &b->attrs);
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
    vt_read_cell(vt, row, col, out);
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
        vt_read_pen(vt, out);
}

void vt_get_modes(struct vt *vt, struct vt_modes *m)
{
    if (!m)
        return;
    memset(m, 0, sizeof *m);
    if (!vt)
        return;
    m->altscreen = (uint8_t)vt->altscreen;
    m->app_cursor = vt_query_mode(vt, 1) == 1;
    m->app_keypad = (uint8_t)query_keypad(vt);
    m->reverse = vt_query_mode(vt, 5) == 1;
    m->origin = (uint8_t)vt->origin; /* tracked: see struct vt */
    m->autowrap = (uint8_t)vt->awm;
    m->lr_margins = (uint8_t)vt->lrmm;
    static const uint16_t mouse[] = {1000, 1002, 1003};
    for (size_t i = 0; i < sizeof mouse / sizeof mouse[0] && !m->mouse; i++)
        if (vt_query_mode(vt, mouse[i]) == 1)
            m->mouse = mouse[i];
    static const uint16_t proto[] = {1005, 1006, 1015};
    for (size_t i = 0; i < sizeof proto / sizeof proto[0] && !m->mouse_proto; i++)
        if (vt_query_mode(vt, proto[i]) == 1)
            m->mouse_proto = proto[i];
    m->focus = vt_query_mode(vt, 1004) == 1;
    m->bracketed = vt_query_mode(vt, 2004) == 1;
    m->insert = (uint8_t)vt->insert;
    m->newline = (uint8_t)vt->newline;
    long a, b;
    m->top = 0;
    m->bottom = (uint16_t)(vt->rows - 1);
    if (vt_query_status(vt, "r", &a, &b) == 0 && a >= 1 && b >= a && b <= vt->rows) {
        m->top = (uint16_t)(a - 1);
        m->bottom = (uint16_t)(b - 1);
    }
    m->left = 0;
    m->right = (uint16_t)(vt->cols - 1);
    if (vt_query_status(vt, "s", &a, &b) == 0 && a >= 1 && b >= a && b <= vt->cols) {
        m->left = (uint16_t)(a - 1);
        m->right = (uint16_t)(b - 1);
    }
    m->cursor_style = (uint8_t)vt_query_style(vt);
    m->protect = vt_query_status(vt, "\"q", &a, &b) == 0 && a == 1;
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

int vt_tab_stop(const struct vt *vt, uint16_t col)
{
    if (!vt || col >= vt->cols)
        return 0;
    return (vt->tabs[col / 8] >> (col % 8)) & 1;
}

void vt_filter_stats(const struct vt *vt, struct vtf_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (vt)
        vtf_get_stats(vt->filter, out);
}
