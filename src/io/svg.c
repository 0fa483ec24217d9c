/*
 * svg.c — a tiny SVG writer: shapes appended to a growable text buffer.
 *
 * An SVG file is XML text; a figure is a flat list of elements inside one
 * <svg> root, drawn in order:
 *
 *   <svg xmlns="http://www.w3.org/2000/svg" width="400" height="120" viewBox="0 0 400 120">
 *   <rect x="10" y="10" width="80" height="30" fill="#3b73c4"/>
 *   <text x="50" y="30" font-size="12" text-anchor="middle">F3</text>
 *   </svg>
 *
 * Two things make the output always well-formed: every string is escaped
 * (& < > " ' become entities) and the writer counts open <g> groups, so
 * ptdp_svg_end refuses a document whose tags do not balance.  Numbers are
 * printed with at most two decimals, which keeps files small and diffable.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/svg.h"
#include "io/svg_impl.h"

/* ---- the buffer ---------------------------------------------------------- */

/* Make room for `more` bytes plus the terminating NUL, doubling the buffer. */
static int reserve(ptdp_svg *s, size_t more)
{
    if (s->status)
        return s->status;
    if (s->len + more + 1 <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + more + 1)
        cap *= 2;
    char *p = realloc(s->buf, cap);
    if (p == NULL)
        return s->status = PTDP_ENOMEM;
    s->buf = p;
    s->cap = cap;
    return 0;
}

static void append(ptdp_svg *s, const char *text, size_t n)
{
    if (reserve(s, n) != 0)
        return;
    memcpy(s->buf + s->len, text, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

static void puts_raw(ptdp_svg *s, const char *text)
{
    append(s, text, strlen(text));
}

/* printf into the buffer: measure, grow, print. */
static void vprint_raw(ptdp_svg *s, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && reserve(s, (size_t)n) == 0) {
        vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, again);
        s->len += (size_t)n;
    }
    va_end(again);
}

static void print_raw(ptdp_svg *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_raw(s, fmt, ap);
    va_end(ap);
}

void ptdp_svg_escape(ptdp_svg *s, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&':  puts_raw(s, "&amp;");  break;
        case '<':  puts_raw(s, "&lt;");   break;
        case '>':  puts_raw(s, "&gt;");   break;
        case '"':  puts_raw(s, "&quot;"); break;
        case '\'': puts_raw(s, "&apos;"); break;
        default:   append(s, p, 1);       break;
        }
    }
}

/* A coordinate with at most two decimals and no trailing zeros: 12, 12.5,
 * 12.25.  Non-finite values (a bug upstream) become 0 rather than "nan",
 * which no SVG reader accepts. */
static void num(ptdp_svg *s, double v)
{
    char b[64];
    if (!isfinite(v))
        v = 0;
    snprintf(b, sizeof b, "%.2f", v);
    char *end = b + strlen(b);
    while (end[-1] == '0')
        *--end = '\0';
    if (end[-1] == '.')
        *--end = '\0';
    puts_raw(s, strcmp(b, "-0") == 0 ? "0" : b);
}

/* name="value" with the value escaped; nothing if value is NULL. */
static void attr(ptdp_svg *s, const char *name, const char *value)
{
    if (value == NULL)
        return;
    print_raw(s, " %s=\"", name);
    ptdp_svg_escape(s, value);
    puts_raw(s, "\"");
}

static void attr_num(ptdp_svg *s, const char *name, double v)
{
    print_raw(s, " %s=\"", name);
    num(s, v);
    puts_raw(s, "\"");
}

/* False once the picture is closed or has failed: nothing more is drawn. */
static int drawable(ptdp_svg *s)
{
    if (s->status == 0 && s->closed)
        s->status = PTDP_EINVAL;
    return s->status == 0;
}

/* ---- the document ------------------------------------------------------------ */

int ptdp_svg_begin(ptdp_svg *s, double width, double height)
{
    memset(s, 0, sizeof *s);
    puts_raw(s, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
    attr_num(s, "width", width);
    attr_num(s, "height", height);
    puts_raw(s, " viewBox=\"0 0 ");
    num(s, width);
    puts_raw(s, " ");
    num(s, height);
    puts_raw(s, "\" font-family=\"Helvetica, Arial, sans-serif\">\n");
    ptdp_svg_rect(s, 0, 0, width, height, "white", NULL);
    return s->status;
}

int ptdp_svg_end(ptdp_svg *s)
{
    if (!drawable(s))
        return s->status;
    if (s->open_groups != 0)
        return s->status = PTDP_EINVAL;
    puts_raw(s, "</svg>\n");
    s->closed = 1;
    return s->status;
}

void ptdp_svg_free(ptdp_svg *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* ---- shapes ----------------------------------------------------------------- */

void ptdp_svg_rect(ptdp_svg *s, double x, double y, double w, double h,
                   const char *fill, const char *stroke)
{
    if (!drawable(s))
        return;
    puts_raw(s, "<rect");
    attr_num(s, "x", x);
    attr_num(s, "y", y);
    attr_num(s, "width", w < 0 ? 0 : w);
    attr_num(s, "height", h < 0 ? 0 : h);
    attr(s, "fill", fill);
    attr(s, "stroke", stroke);
    puts_raw(s, "/>\n");
}

static void stroke_attrs(ptdp_svg *s, const char *stroke, double width, const char *dash)
{
    attr(s, "stroke", stroke ? stroke : "black");
    attr_num(s, "stroke-width", width);
    attr(s, "stroke-dasharray", dash);
}

void ptdp_svg_line(ptdp_svg *s, double x1, double y1, double x2, double y2,
                   const char *stroke, double width, const char *dash)
{
    if (!drawable(s))
        return;
    puts_raw(s, "<line");
    attr_num(s, "x1", x1);
    attr_num(s, "y1", y1);
    attr_num(s, "x2", x2);
    attr_num(s, "y2", y2);
    stroke_attrs(s, stroke, width, dash);
    puts_raw(s, "/>\n");
}

static void points(ptdp_svg *s, const double *xs, const double *ys, int n)
{
    puts_raw(s, " points=\"");
    for (int i = 0; i < n; i++) {
        if (i)
            puts_raw(s, " ");
        num(s, xs[i]);
        puts_raw(s, ",");
        num(s, ys[i]);
    }
    puts_raw(s, "\"");
}

void ptdp_svg_polyline(ptdp_svg *s, const double *xs, const double *ys, int n,
                       const char *stroke, double width, const char *dash)
{
    if (!drawable(s) || n < 1)
        return;
    puts_raw(s, "<polyline fill=\"none\"");
    stroke_attrs(s, stroke, width, dash);
    puts_raw(s, " stroke-linejoin=\"round\"");
    points(s, xs, ys, n);
    puts_raw(s, "/>\n");
}

void ptdp_svg_polygon(ptdp_svg *s, const double *xs, const double *ys, int n, const char *fill)
{
    if (!drawable(s) || n < 1)
        return;
    puts_raw(s, "<polygon");
    attr(s, "fill", fill);
    points(s, xs, ys, n);
    puts_raw(s, "/>\n");
}

/* The head is a triangle on the last segment's direction (ux, uy): its tip
 * at the end point, its base `head` behind it and head/2 to either side.
 * The line stops at the base so its square end does not poke through. */
void ptdp_svg_arrow(ptdp_svg *s, const double *xs, const double *ys, int n,
                    const char *color, double width, double head)
{
    if (!drawable(s) || n < 2)
        return;
    double dx = xs[n - 1] - xs[n - 2], dy = ys[n - 1] - ys[n - 2];
    double len = sqrt(dx * dx + dy * dy);
    double ux = len > 0 ? dx / len : 1, uy = len > 0 ? dy / len : 0;
    double bx = xs[n - 1] - ux * head, by = ys[n - 1] - uy * head;

    double *lx = malloc(sizeof(double) * 2 * (size_t)n);
    if (lx == NULL) {
        s->status = PTDP_ENOMEM;
        return;
    }
    double *ly = lx + n;
    memcpy(lx, xs, sizeof(double) * (size_t)n);
    memcpy(ly, ys, sizeof(double) * (size_t)n);
    lx[n - 1] = bx;
    ly[n - 1] = by;
    ptdp_svg_polyline(s, lx, ly, n, color, width, NULL);
    free(lx);

    double hx[3] = { xs[n - 1], bx - uy * head / 2, bx + uy * head / 2 };
    double hy[3] = { ys[n - 1], by + ux * head / 2, by - ux * head / 2 };
    ptdp_svg_polygon(s, hx, hy, 3, color);
}

void ptdp_svg_text(ptdp_svg *s, double x, double y, double size, int how,
                   const char *fill, const char *fmt, ...)
{
    if (!drawable(s))
        return;
    static const char *const anchors[] = { "start", "middle", "end" };
    int anchor = how & 3;
    puts_raw(s, "<text");
    attr_num(s, "x", x);
    attr_num(s, "y", y);
    attr_num(s, "font-size", size);
    if (anchor != PTDP_SVG_START)
        attr(s, "text-anchor", anchors[anchor < 3 ? anchor : 0]);
    if (how & PTDP_SVG_BOLD)
        attr(s, "font-weight", "bold");
    attr(s, "fill", fill);
    puts_raw(s, ">");

    /* Format into a scratch string first: the result must be escaped. */
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) {
        vsnprintf(text, (size_t)n + 1, fmt, again);
        ptdp_svg_escape(s, text);
        free(text);
    } else if (s->status == 0) {
        s->status = PTDP_ENOMEM;
    }
    va_end(again);
    va_end(ap);
    puts_raw(s, "</text>\n");
}

/* ---- groups ----------------------------------------------------------------- */

void ptdp_svg_group_begin(ptdp_svg *s, const char *id, double dx, double dy)
{
    if (!drawable(s))
        return;
    puts_raw(s, "<g");
    attr(s, "id", id);
    if (dx != 0 || dy != 0) {
        puts_raw(s, " transform=\"translate(");
        num(s, dx);
        puts_raw(s, " ");
        num(s, dy);
        puts_raw(s, ")\"");
    }
    puts_raw(s, ">\n");
    s->open_groups++;
}

void ptdp_svg_group_begin_data(ptdp_svg *s, const char *name, long value)
{
    if (!drawable(s))
        return;
    puts_raw(s, "<g data-");
    ptdp_svg_escape(s, name);
    print_raw(s, "=\"%ld\">\n", value);
    s->open_groups++;
}

void ptdp_svg_title(ptdp_svg *s, const char *fmt, ...)
{
    if (!drawable(s))
        return;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) {
        vsnprintf(text, (size_t)n + 1, fmt, again);
        puts_raw(s, "<title>");
        ptdp_svg_escape(s, text);
        puts_raw(s, "</title>\n");
        free(text);
    } else if (s->status == 0) {
        s->status = PTDP_ENOMEM;
    }
    va_end(again);
    va_end(ap);
}

void ptdp_svg_group_end(ptdp_svg *s)
{
    if (!drawable(s))
        return;
    if (s->open_groups == 0) {
        s->status = PTDP_EINVAL;
        return;
    }
    s->open_groups--;
    puts_raw(s, "</g>\n");
}

/* ---- saving ----------------------------------------------------------------- */

/* All or nothing (file.h): a reader never sees half a picture. */
int ptdp_svg_save(const ptdp_svg *s, const char *path, char *msg, size_t msglen)
{
    if (s == NULL || path == NULL || s->status != 0 || !s->closed) {
        snprintf(msg, msglen, "%s: the picture is not complete (%s)", path ? path : "(no path)",
                 s && s->status ? ptdp_strerror(s->status) : "ptdp_svg_end was not called");
        return PTDP_EINVAL;
    }
    return ptdp_write_file_atomic(path, s->buf, s->len, msg, msglen);
}

double ptdp_svg_tick_step(double span, int max_ticks)
{
    if (!(span > 0) || max_ticks < 1)
        return 1;
    double raw = span / max_ticks, decade = pow(10, floor(log10(raw)));
    for (int i = 0; i < 4; i++) {
        static const double f[] = { 1, 2, 5, 10 };
        if (f[i] * decade >= raw * (1 - 1e-9))
            return f[i] * decade;
    }
    return 10 * decade;
}
