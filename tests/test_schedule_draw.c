/*
 * test_schedule_draw.c — the timeline drawn as text and as an SVG picture.
 *
 * The ASCII timeline has one row per stage, exactly makespan wide, and the
 * bubble measured next to the formula; the SVG is standalone, well formed
 * (checked by a tiny tag matcher that is itself shown able to fail), has one
 * blue box per forward and one green per backward, and is written
 * atomically: the old file is replaced whole and no temporary is left, even
 * when the rename fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/schedule.h"

static const harness_tcase draw_tests = { .name = "draw" };

static ptdp_schedule *make(const char *name, int pp, int m)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_create(name, pp, m, &s), PTDP_OK);
    return s;
}

/* The ASCII drawing of 1F1B on pp stages with 8 micro-batches, F = 1 and
 * B = 2 (the caller frees it). */
static char *ascii_1f1b(int pp)
{
    ptdp_schedule *s = make("1f1b", pp, 8);
    ptdp_schedule_costs k = { .forward = 1, .backward = 2 };
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
    FILE *f = tmpfile();
    ck_assert_int_eq(ptdp_schedule_ascii(s, t, f), PTDP_OK);
    char *text = harness_read_stream(f);
    fclose(f);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    return text;
}

TEST(draw_tests, ascii_has_one_row_per_stage_and_the_bubble)
{
    for (int pp = 1; pp <= 8; pp += 3) {
        char *text = ascii_1f1b(pp);
        int rows = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            if (strncmp(line, "stage ", 6) == 0) {
                rows++;
                /* (m + p - 1) * 3 time units at 2 columns each, between bars */
                char *bar = strchr(line, '|');
                ck_assert_ptr_nonnull(strchr(bar + 1, '|'));
                ck_assert_int_eq((int)(strchr(bar + 1, '|') - bar - 1), (8 + pp - 1) * 3 * 2);
            }
        ck_assert_int_eq(rows, pp);
        free(text);
    }

    char *text = ascii_1f1b(4);
    ck_assert_msg(strstr(text, "stage 3 |......F0B0<<F1B1<<") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "stage 0 |F0F1F2F3............B0<<F4B1<<") != NULL, "%s", text);
    ck_assert(strstr(text, "measured 0.272727") && strstr(text, "= 3/11 = 0.272727"));
    free(text);
}
END_TEST

/* harness_xml_elements must be able to say no, or the SVG test proves nothing. */
TEST(draw_tests, the_tag_checker_can_fail)
{
    ck_assert_int_eq(harness_xml_elements("<svg><g><rect/></g></svg>"), 3);
    ck_assert_int_eq(harness_xml_elements("<svg><g></svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg><rect x=\"1></svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg>"), -1);
}
END_TEST

TEST(draw_tests, svg_is_well_formed_and_written_atomically)
{
    char dir[] = "/tmp/ptdp_schedule_XXXXXX", path[128], msg[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pipe.svg", dir);
    FILE *old = fopen(path, "w");
    fputs("old picture", old);
    fclose(old);

    ptdp_schedule *s = make("gpipe", 4, 8);
    ptdp_schedule_costs k = { .forward = 1, .backward = 2 };
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
    ck_assert_int_eq(ptdp_schedule_svg(s, t, path, msg, sizeof msg), PTDP_OK);

    char *svg = harness_read_file(path, NULL);
    ck_assert_msg(strncmp(svg, "<svg", 4) == 0, "%.40s", svg);
    ck_assert_ptr_nonnull(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_int_gt(harness_xml_elements(svg), 2 * 4 * 8);
    int blue = 0, green = 0;
    for (const char *p = svg; (p = strstr(p, "fill=\"#3b73c4\" stroke")); p++) blue++;
    for (const char *p = svg; (p = strstr(p, "fill=\"#3f9e4d\" stroke")); p++) green++;
    ck_assert_int_eq(blue, 4 * 8);      /* one box per forward, per stage */
    ck_assert_int_eq(green, 4 * 8);
    ck_assert_ptr_nonnull(strstr(svg, "bubble 27.3%"));
    free(svg);
    ck_assert_int_eq(harness_count_entries(dir, true), 0);

    /* A target that cannot be replaced (a directory): an error, no debris. */
    char sub[160];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(ptdp_schedule_svg(s, t, sub, msg, sizeof msg), PTDP_EIO);
    ck_assert_ptr_nonnull(strstr(msg, sub));
    ck_assert_int_eq(harness_count_entries(dir, true), 0);
    snprintf(sub, sizeof sub, "%s/missing/pipe.svg", dir);
    ck_assert_int_eq(ptdp_schedule_svg(s, t, sub, msg, sizeof msg), PTDP_EIO);

    rmdir(strcat(strcpy(sub, dir), "/adir"));
    unlink(path);
    rmdir(dir);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("schedule-draw");
}
