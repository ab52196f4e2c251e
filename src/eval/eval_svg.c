/* eval_svg: the two evaluation pictures as standalone SVG text (no dependencies): perplexity vs context
 * length, and the passkey accuracy heat map. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/eval.h"
#include "src/core/fileio.h"
#include "src/core/strbuf.h"

/* Text content with &, <, >, " escaped. */
static void out_text(lcx_strbuf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': lcx_strbuf_printf(b, "&amp;"); break;
        case '<': lcx_strbuf_printf(b, "&lt;"); break;
        case '>': lcx_strbuf_printf(b, "&gt;"); break;
        case '"': lcx_strbuf_printf(b, "&quot;"); break;
        default: lcx_strbuf_printf(b, "%c", *s);
        }
    }
}

static lcx_status finish(lcx_strbuf *b, char **svg) {
    lcx_strbuf_printf(b, "</svg>\n");
    if (b->oom) {
        lcx_strbuf_free(b);
        return lcx_fail(LCX_ERR_OOM, "svg: out of memory");
    }
    *svg = b->s;
    return LCX_OK;
}

static void header(lcx_strbuf *b, int w, int h, const char *title) {
    lcx_strbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    lcx_strbuf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
           "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"14\">\n", w, h, w, h);
    lcx_strbuf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
    if (title) {
        lcx_strbuf_printf(b, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">", w / 2);
        out_text(b, title);
        lcx_strbuf_printf(b, "</text>\n");
    }
}

/* "512", "4k", "128k", "1M", "1.5k" */
static void length_label(double v, char *buf, size_t n) {
    if (v >= 1048576.0 && fmod(v, 1048576.0) == 0.0)
        snprintf(buf, n, "%.0fM", v / 1048576.0);
    else if (v >= 1024.0 && fmod(v, 1024.0) == 0.0)
        snprintf(buf, n, "%.0fk", v / 1024.0);
    else if (v >= 1024.0)
        snprintf(buf, n, "%.1fk", v / 1024.0);
    else
        snprintf(buf, n, "%.0f", v);
}

static void value_label(double v, char *buf, size_t n) {
    if (fabs(v) >= 1e6 || (fabs(v) < 0.01 && v != 0.0))
        snprintf(buf, n, "%.0e", v);
    else
        snprintf(buf, n, "%g", round(v * 1000.0) / 1000.0);
}

/* log10 of the nearest 1, 2, 5 x 10^k at or below (down) / at or above (up) v > 0. */
static double log125(double v, int up) {
    double e = floor(log10(v)), m = v / pow(10.0, e);
    static const double steps[4] = {1.0, 2.0, 5.0, 10.0};
    if (up) {
        for (int i = 0; i < 4; i++)
            if (m <= steps[i] * (1.0 + 1e-12)) return e + log10(steps[i]);
    } else {
        for (int i = 3; i >= 0; i--)
            if (m >= steps[i] * (1.0 - 1e-12)) return e + log10(steps[i]);
    }
    return e;
}

/* Step of about (hi - lo) / 5 from 1, 2, 5 x 10^k. */
static double nice_step(double span) {
    double raw = span / 5.0, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * p;
}

/* circle, square, diamond: overlapping series stay distinguishable */
static void marker(lcx_strbuf *b, int shape, double x, double y, const char *col) {
    if (shape == 0)
        lcx_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>\n", x, y, col);
    else if (shape == 1)
        lcx_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"/>\n", x - 4, y - 4, col);
    else
        lcx_strbuf_printf(b, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\"/>\n", x, y - 6, x + 6, y, x,
            y + 6, x - 6, y, col);
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

lcx_status lcx_svg_ppl_plot(const lcx_plot_series *series, int n_series, const char *title, char **svg) {
    LCX_FAIL_IF(!svg || n_series < 0 || (n_series > 0 && !series), LCX_ERR_INVALID, "svg: bad plot arguments");
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int s = 0; s < n_series; s++) {
        LCX_FAIL_IF(series[s].n < 0 || (series[s].n > 0 && (!series[s].x || !series[s].y)), LCX_ERR_INVALID,
                    "svg: series %d has no points array", s);
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            LCX_FAIL_IF(!(x > 0.0) || !isfinite(x), LCX_ERR_INVALID, "svg: series %d point %d: length %g <= 0", s,
                        i, x);
            if (!(y > 0.0) || !isfinite(y)) continue;
            xmin = fmin(xmin, x);
            xmax = fmax(xmax, x);
            ymin = fmin(ymin, y);
            ymax = fmax(ymax, y);
        }
    }
    if (!(xmin <= xmax)) { /* nothing to draw: a valid empty frame */
        xmin = 1024.0;
        xmax = 8192.0;
        ymin = 1.0;
        ymax = 10.0;
    }
    /* legend width from the longest name (about 8.5 px per character at 14 px) */
    size_t longest = 0;
    for (int s = 0; s < n_series; s++)
        if (series[s].name && strlen(series[s].name) > longest) longest = strlen(series[s].name);
    if (longest > 60) longest = 60;
    const int R = 70 + (int)(longest * 17 / 2) < 150 ? 150 : 70 + (int)(longest * 17 / 2);
    const int H = 500, L = 80, T = 50, B = 70, W = L + 530 + R;
    const double pw = W - L - R, ph = H - T - B;
    /* x: log2, whole powers of two at both ends. */
    double x0 = floor(log2(xmin)), x1 = ceil(log2(xmax));
    if (x1 - x0 < 1.0) {
        x0 -= 0.5;
        x1 += 0.5;
    }
    /* y: log10 when the range is wide (exploding perplexity), else linear with nice ticks. */
    const int ylog = ymax / ymin > 8.0;
    double y0, y1, ystep = 0.0;
    if (ylog) {
        y0 = log125(ymin, 0);
        y1 = log125(ymax, 1);
        if (y1 <= y0) y1 = y0 + 1.0;
    } else {
        double span = ymax - ymin > 1e-9 * ymax ? ymax - ymin : fmax(ymax * 0.1, 1e-6);
        ystep = nice_step(span * 1.2);
        y0 = floor((ymin - 0.05 * span) / ystep) * ystep;
        y1 = ceil((ymax + 0.05 * span) / ystep) * ystep;
        if (y0 < 0.0 && ymin >= 0.0) y0 = 0.0;
        if (y1 <= y0) y1 = y0 + ystep;
    }
#define PX(x) (L + (log2(x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((ylog ? log10(y) : (y)) - y0) / (y1 - y0) * ph)
    lcx_strbuf b = {0};
    header(&b, W, H, title);
    char lab[32];
    /* grid and ticks */
    lcx_strbuf_printf(&b, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    int xstep = (int)ceil((x1 - x0) / 12.0);
    if (xstep < 1) xstep = 1;
    for (double e = ceil(x0); e <= x1; e += xstep) {
        double px = L + (e - x0) / (x1 - x0) * pw;
        lcx_strbuf_printf(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px, T, px, T + ph);
    }
    if (ylog) {
        for (double e = floor(y0); e <= y1; e += 1.0)
            for (int m = 1; m <= 9; m++) {
                double ly = e + log10((double)m);
                if (ly > y1 + 1e-9) break;
                if (ly < y0 - 1e-9) continue;
                double py = T + ph - (ly - y0) / (y1 - y0) * ph;
                lcx_strbuf_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"%s/>\n", L, py, L + pw, py,
                    m == 1 ? " stroke=\"#aaaaaa\"" : m == 2 || m == 5 ? "" : " stroke=\"#f0f0f0\"");
            }
    } else {
        for (double v = y0; v <= y1 + 1e-9 * ystep; v += ystep)
            lcx_strbuf_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", L, PY(v), L + pw, PY(v));
    }
    lcx_strbuf_printf(&b, "</g>\n");
    lcx_strbuf_printf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw,
        ph);
    lcx_strbuf_printf(&b, "<g text-anchor=\"middle\">\n");
    for (double e = ceil(x0); e <= x1; e += xstep) {
        double px = L + (e - x0) / (x1 - x0) * pw;
        length_label(exp2(e), lab, sizeof(lab));
        lcx_strbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", px, T + ph + 20, lab);
    }
    /* data lengths that are not powers of two get their own label when there is room (e.g. 96k) */
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++) {
            double lx = log2(series[s].x[i]), px = L + (lx - x0) / (x1 - x0) * pw;
            double nearest = round(lx);
            if (lx == nearest || fabs(lx - nearest) * pw / (x1 - x0) < 36.0 * xstep) continue;
            int dup = 0; /* same length in an earlier series or point */
            for (int s2 = 0; s2 <= s && !dup; s2++)
                for (int i2 = 0; i2 < (s2 == s ? i : series[s2].n) && !dup; i2++)
                    dup = series[s2].x[i2] == series[s].x[i];
            if (dup) continue;
            length_label(series[s].x[i], lab, sizeof(lab));
            lcx_strbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\">%s</text>\n", px,
                T + ph + 20, lab);
        }
    lcx_strbuf_printf(&b, "</g>\n<g text-anchor=\"end\">\n");
    if (ylog) {
        for (double e = floor(y0); e <= y1; e += 1.0)
            for (int m = 1; m <= 9; m++) {
                double ly = e + log10((double)m);
                if (ly > y1 + 1e-9) break;
                if (ly < y0 - 1e-9) continue;
                if (m != 1 && m != 2 && m != 5) continue;
                /* over many decades label the decades and the ends only */
                if (m != 1 && y1 - y0 > 3.0 && fabs(ly - y0) > 1e-9 && fabs(ly - y1) > 1e-9) continue;
                double py = T + ph - (ly - y0) / (y1 - y0) * ph;
                value_label(pow(10.0, ly), lab, sizeof(lab));
                lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\">%s</text>\n", L - 8, py + 5, lab);
            }
    } else {
        for (double v = y0; v <= y1 + 1e-9 * ystep; v += ystep) {
            int dec = ystep >= 1.0 ? 0 : (int)ceil(-log10(ystep) - 1e-9);
            snprintf(lab, sizeof(lab), "%.*f", dec > 6 ? 6 : dec, v);
            lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\">%s</text>\n", L - 8, PY(v) + 5, lab);
        }
    }
    lcx_strbuf_printf(&b, "</g>\n");
    lcx_strbuf_printf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\">context length (tokens, log2 "
            "scale)</text>\n", L + pw / 2, H - 22);
    lcx_strbuf_printf(&b, "<text x=\"22\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 22 %.1f)\">"
            "perplexity%s</text>\n", T + ph / 2, T + ph / 2, ylog ? " (log scale)" : "");
    /* series: one polyline per run of drawable points, a dot per point */
    for (int s = 0; s < n_series; s++) {
        const char *col = palette[s % 8];
        const char *dash = s >= 8 ? " stroke-dasharray=\"6 3\"" : "";
        int open = 0;
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!(y > 0.0) || !isfinite(y)) {
                if (open) lcx_strbuf_printf(&b, "\"/>\n");
                open = 0;
                continue;
            }
            if (!open)
                lcx_strbuf_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"%s points=\"", col, dash);
            lcx_strbuf_printf(&b, "%s%.1f,%.1f", open ? " " : "", PX(x), PY(y));
            open = 1;
        }
        if (open) lcx_strbuf_printf(&b, "\"/>\n");
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!(y > 0.0) || !isfinite(y)) continue;
            marker(&b, s % 3, PX(x), PY(y), col);
        }
    }
#undef PX
#undef PY
    /* legend */
    for (int s = 0; s < n_series; s++) {
        double ly = T + 12 + s * 24;
        lcx_strbuf_printf(&b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s/>\n",
            L + pw + 16, ly, L + pw + 44, ly, palette[s % 8], s >= 8 ? " stroke-dasharray=\"6 3\"" : "");
        marker(&b, s % 3, L + pw + 30, ly, palette[s % 8]);
        lcx_strbuf_printf(&b, "<text x=\"%.0f\" y=\"%.1f\">", L + pw + 52, ly + 5);
        out_text(&b, series[s].name ? series[s].name : "");
        lcx_strbuf_printf(&b, "</text>\n");
    }
    return finish(&b, svg);
}

/* Red (0) -> yellow (0.5) -> green (1), ColorBrewer RdYlGn ends. */
static void accuracy_colour(double a, int rgb[3]) {
    static const int stops[3][3] = {{215, 48, 39}, {254, 224, 139}, {26, 152, 80}};
    if (!(a >= 0.0)) a = 0.0;
    if (a > 1.0) a = 1.0;
    int k = a < 0.5 ? 0 : 1;
    double t = a < 0.5 ? a / 0.5 : (a - 0.5) / 0.5;
    for (int c = 0; c < 3; c++) rgb[c] = (int)lround(stops[k][c] + t * (stops[k + 1][c] - stops[k][c]));
}

lcx_status lcx_svg_passkey_heatmap(const lcx_passkey_result *r, int mode, const char *title, char **svg) {
    LCX_FAIL_IF(!r || !svg || r->n_lengths < 1 || r->n_depths < 1, LCX_ERR_INVALID, "svg: empty passkey result");
    LCX_FAIL_IF((mode != LCX_PASSKEY_LOGLIK && mode != LCX_PASSKEY_GREEDY) || !(r->modes & mode), LCX_ERR_INVALID,
                "svg: the passkey result has no mode %d", mode);
    const int nl = r->n_lengths, nd = r->n_depths;
    const int cw = nl > 12 ? 56 : 72, ch = nd > 12 ? 28 : 40;
    const int L = 90, T = 60, B = 70, R = 130;
    const int W = L + nl * cw + R < 520 ? 520 : L + nl * cw + R, H = T + nd * ch + B;
    lcx_strbuf b = {0};
    header(&b, W, H, title);
    char lab[32];
    for (int d = 0; d < nd; d++) {
        for (int l = 0; l < nl; l++) {
            double a = lcx_passkey_accuracy(r, mode, l, d);
            int rgb[3];
            accuracy_colour(a, rgb);
            int x = L + l * cw, y = T + d * ch;
            lcx_strbuf_printf(&b, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\" "
                    "stroke=\"white\"/>\n", x, y, cw, ch, rgb[0], rgb[1], rgb[2]);
            double lum = (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]) / 255.0;
            lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%.0f%%</text>\n", x + cw / 2,
                y + ch / 2 + 5, lum < 0.5 ? "white" : "black", 100.0 * a);
        }
        lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f%%</text>\n", L - 8, T + d * ch + ch / 2 + 5,
            100.0 * r->depths[d]);
    }
    for (int l = 0; l < nl; l++) {
        length_label((double)r->lengths[l], lab, sizeof(lab));
        lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + l * cw + cw / 2,
            T + nd * ch + 20, lab);
    }
    lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\">context length (tokens)</text>\n",
        L + nl * cw / 2, H - 22);
    lcx_strbuf_printf(&b, "<text x=\"24\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 24 %d)\">"
            "key depth</text>\n", T + nd * ch / 2, T + nd * ch / 2);
    /* colour bar: accuracy 100% on top */
    const int bx = L + nl * cw + 30, bh = nd * ch < 120 ? 120 : nd * ch;
    lcx_strbuf_printf(&b, "<defs><linearGradient id=\"acc\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (int i = 0; i <= 4; i++) {
        int rgb[3];
        accuracy_colour(i / 4.0, rgb);
        lcx_strbuf_printf(&b, "<stop offset=\"%.2f\" stop-color=\"#%02x%02x%02x\"/>", i / 4.0, rgb[0], rgb[1], rgb[2]);
    }
    lcx_strbuf_printf(&b, "</linearGradient></defs>\n");
    lcx_strbuf_printf(&b, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"%d\" fill=\"url(#acc)\" stroke=\"black\"/>\n", bx, T, bh);
    for (int i = 0; i <= 2; i++)
        lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\">%d%%</text>\n", bx + 24, T + bh - i * bh / 2 + 5, i * 50);
    lcx_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s, %d trials</text>\n", L, T - 10,
        mode == LCX_PASSKEY_LOGLIK ? "log-likelihood rank" : "greedy decode", r->trials);
    return finish(&b, svg);
}

lcx_status lcx_svg_write(const char *path, const char *svg) {
    LCX_FAIL_IF(!path || !svg, LCX_ERR_INVALID, "svg: no path or no picture to write");
    return lcx_write_file_atomic(path, svg, strlen(svg));
}
