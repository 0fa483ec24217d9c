/*
 * html_schedule.c — `ptdp schedule --html FILE`: the schedule as a page.
 *
 * What the page shows, top to bottom, every number from the --report JSON
 * it embeds (html_pages.h):
 *
 *     the parameters     schedule, p, m, v, the cost of each action as timed
 *     the answer         makespan; bubble measured = idle / makespan (mean over
 *                        stages) beside the schedule's formula, e.g. (p-1)/(m+p-1)
 *     the drawing        `ptdp schedule --svg`'s figure, each box in <g data-mb="k">
 *     a slider           micro-batch k: its boxes stay, the others fade — one
 *                        micro-batch's diagonal through the stages
 *
 *        stage 0 |F0 F1 F2 F3 .......... B0 F4 B1 ...|      slider at 1:
 *        stage 1 |   F0 F1 F2 F3 ..... B0 F4 B1 ...  |  ──►  only F1 … B1 stay bright
 *
 *     each stage         busy, idle, idle share, peak micro-batches kept (and W owed)
 */
#include <stdio.h>

#include "html_pages.h"
#include "ptdp/error.h"
#include "ptdp/html.h"

/* The slider: boxes of other micro-batches get class "dim"; "all" shows every box.
 * A link can open the page at one micro-batch: page.html#mb=3. */
static const char slider_js[] =
    "(function () {\n"
    "  var slider = document.getElementById('mb'), all = document.getElementById('mb-all');\n"
    "  var shown = document.getElementById('mb-shown');\n"
    "  function show() {\n"
    "    var k = slider.value, every = all.checked;\n"
    "    shown.textContent = every ? 'all' : k;\n"
    "    var boxes = document.querySelectorAll('g[data-mb]');\n"
    "    for (var i = 0; i < boxes.length; i++)\n"
    "      boxes[i].classList.toggle('dim', !every && boxes[i].getAttribute('data-mb') !== k);\n"
    "  }\n"
    "  slider.addEventListener('input', function () { all.checked = false; show(); });\n"
    "  all.addEventListener('change', show);\n"
    "  var asked = /(?:^#|&)mb=([0-9]+)/.exec(location.hash);   // page.html#mb=3: micro-batch 3\n"
    "  if (asked && +asked[1] <= +slider.max) { slider.value = asked[1]; all.checked = false; }\n"
    "  show();\n"
    "})();";

static void parameters(ptdp_html *h, const ptdp_schedule_result *r)
{
    const ptdp_schedule *s = r->s;
    const int split = s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD);
    ptdp_html_raw(h, "<h2>The schedule</h2>\n<table>\n<tr><th class=\"l\">schedule</th><td>");
    ptdp_html_string(h, "schedule", s->name);
    ptdp_html_raw(h, "</td></tr>\n");
    ptdp_html_row_number(h, "stages p", "pp", s->pp, 0);
    ptdp_html_row_number(h, "micro-batches m", "micro_batches", s->micro_batches, 0);
    ptdp_html_row_number(h, "model chunks per stage v", "virtual_stages", s->virtual_stages, 0);
    ptdp_html_row_number(h, "forward F (one action)", "costs.forward", r->c->forward, 0);
    if (split) {
        ptdp_html_row_number(h, "input gradient B", "costs.backward_input", r->c->backward_input, 0);
        ptdp_html_row_number(h, "weight gradient W", "costs.backward_weight", r->c->backward_weight, 0);
    } else {
        ptdp_html_row_number(h, "backward B", "costs.backward", r->c->backward, 0);
    }
    ptdp_html_row_number(h, "message", "costs.send", r->c->send, 0);
    ptdp_html_row_number(h, "all-to-alls per F or B", "costs.alltoall", r->c->alltoall, 0);
    ptdp_html_raw(h, "</table>\n<p class=\"note\">Times in the flags' units; with v chunks an action is "
                     "one chunk's, 1/v of a stage's.</p>\n");
}

static void answer(ptdp_html *h, const ptdp_schedule_result *r)
{
    const char *words;
    const double formula = ptdp_schedule_bubble_formula(r->s, &words);
    ptdp_html_raw(h, "<h2>The answer</h2>\n<p>makespan ");
    ptdp_html_number(h, "makespan", r->t->makespan, 0);
    ptdp_html_raw(h, " time units; bubble measured ");
    ptdp_html_number(h, "bubble.measured", r->t->bubble, 4);
    ptdp_html_raw(h, " (idle / makespan, mean over stages), by the formula ");
    ptdp_html_string(h, "bubble.formula_words", words);
    ptdp_html_raw(h, " = ");
    ptdp_html_number(h, "bubble.formula", formula, 4);
    ptdp_html_raw(h, " (uniform stages, free links).</p>\n");
}

static void stages(ptdp_html *h, const ptdp_schedule_result *r)
{
    const ptdp_schedule *s = r->s;
    const int split = s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD);
    ptdp_html_raw(h, "<h2>Each stage</h2>\n<table>\n<tr><th>stage</th><th>busy</th><th>idle</th>"
                     "<th>idle share</th><th>peak micro-batches kept</th>");
    ptdp_html_raw(h, split ? "<th>peak W owed</th></tr>\n" : "</tr>\n");
    for (int st = 0; st < s->pp; st++) {
        char key[64];
        ptdp_html_raw(h, "<tr><td>");
        snprintf(key, sizeof key, "stages.%d.stage", st);
        ptdp_html_number(h, key, st, 0);
        ptdp_html_raw(h, "</td><td>");
        snprintf(key, sizeof key, "stages.%d.busy", st);
        ptdp_html_number(h, key, r->t->busy[st], 0);
        ptdp_html_raw(h, "</td><td>");
        snprintf(key, sizeof key, "stages.%d.idle", st);
        ptdp_html_number(h, key, r->t->idle[st], 0);
        ptdp_html_raw(h, "</td><td>");
        snprintf(key, sizeof key, "stages.%d.idle_fraction", st);
        ptdp_html_number(h, key, r->t->makespan > 0 ? r->t->idle[st] / r->t->makespan : 0, 4);
        ptdp_html_raw(h, "</td><td>");
        snprintf(key, sizeof key, "stages.%d.peak_in_flight", st);
        ptdp_html_number(h, key, ptdp_schedule_peak_in_flight(s, st), 0);
        if (split) {
            ptdp_html_raw(h, "</td><td>");
            snprintf(key, sizeof key, "stages.%d.peak_deferred", st);
            ptdp_html_number(h, key, ptdp_schedule_peak_deferred(s, st), 0);
        }
        ptdp_html_raw(h, "</td></tr>\n");
    }
    ptdp_html_raw(h, "</table>\n");
}

int ptdp_html_schedule(const char *path, const ptdp_schedule_result *r, const char *json, size_t len,
                       char *msg, size_t msglen)
{
    ptdp_html h;
    char title[160];
    snprintf(title, sizeof title, "ptdp schedule: %s, p = %d, m = %d", r->s->name, r->s->pp,
             r->s->micro_batches);
    ptdp_html_begin(&h, title);
    parameters(&h, r);
    answer(&h, r);

    ptdp_html_raw(&h, "<h2>The timeline</h2>\n<p>micro-batch <input type=\"range\" id=\"mb\" min=\"0\" ");
    char max[48];
    snprintf(max, sizeof max, "max=\"%d\" value=\"0\"", r->s->micro_batches - 1);
    ptdp_html_raw(&h, max);
    ptdp_html_raw(&h, "> <b id=\"mb-shown\">all</b> <label><input type=\"checkbox\" id=\"mb-all\" checked> "
                      "every micro-batch</label> <span class=\"note\">(rest the mouse on a box for its "
                      "times)</span></p>\n");
    ptdp_svg svg;
    int rc = ptdp_schedule_picture(r->s, r->t, 1, &svg);
    if (rc == PTDP_OK)
        ptdp_html_svg(&h, &svg);
    ptdp_svg_free(&svg);
    stages(&h, r);
    ptdp_html_data(&h, json, len);
    ptdp_html_script(&h, slider_js);
    return ptdp_html_finish(&h, rc, path, msg, msglen);
}
