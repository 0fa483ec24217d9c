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
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptdp/error.h"
#include "ptdp/schedule.h"

static ptdp_schedule *make(const char *name, int pp, int m)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_create(name, pp, m, &s), PTDP_OK);
    return s;
}

static char *read_all(FILE *f)
{
    long n = ftell(f);
    char *buf = malloc((size_t)n + 1);
    rewind(f);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    return buf;
}

START_TEST(ascii_has_one_row_per_stage_and_the_bubble)
{
    for (int pp = 1; pp <= 8; pp += 3) {
        ptdp_schedule *s = make("1f1b", pp, 8);
        ptdp_schedule_costs k = { .forward = 1, .backward = 2 };
        ptdp_schedule_timeline *t = NULL;
        ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
        FILE *f = tmpfile();
        ck_assert_int_eq(ptdp_schedule_ascii(s, t, f), PTDP_OK);
        char *text = read_all(f);
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
        fclose(f);
        ptdp_schedule_timeline_destroy(t);
        ptdp_schedule_destroy(s);
    }

    ptdp_schedule *s = make("1f1b", 4, 8);
    ptdp_schedule_costs k = { .forward = 1, .backward = 2 };
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
    FILE *f = tmpfile();
    ck_assert_int_eq(ptdp_schedule_ascii(s, t, f), PTDP_OK);
    char *text = read_all(f);
    ck_assert_msg(strstr(text, "stage 3 |......F0B0<<F1B1<<") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "stage 0 |F0F1F2F3............B0<<F4B1<<") != NULL, "%s", text);
    ck_assert(strstr(text, "measured 0.272727") && strstr(text, "= 3/11 = 0.272727"));
    free(text);
    fclose(f);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
}
END_TEST

/* A tiny XML well-formedness check: every <tag> closed by </tag> in order,
 * <.../> self-closing; returns the number of elements, or -1. */
static int balanced_tags(const char *x)
{
    char stack[64][32];
    int depth = 0, elements = 0;
    for (const char *p = strchr(x, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        if (end == NULL)
            return -1;
        int closing = p[1] == '/', selfclosing = end[-1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " \t\n/>");
        if (len == 0 || len >= 32)
            return -1;
        if (closing) {
            if (depth == 0 || strlen(stack[depth - 1]) != len ||
                strncmp(stack[depth - 1], name, len) != 0)
                return -1;
            depth--;
        } else {
            elements++;
            if (!selfclosing) {
                if (depth == 64)
                    return -1;
                memcpy(stack[depth], name, len);
                stack[depth++][len] = '\0';
            }
        }
        /* quotes must pair inside a tag */
        int quotes = 0;
        for (const char *q = p; q < end; q++)
            quotes += *q == '"';
        if (quotes % 2)
            return -1;
    }
    return depth == 0 ? elements : -1;
}

START_TEST(the_tag_checker_can_fail)
{
    ck_assert_int_eq(balanced_tags("<svg><g><rect/></g></svg>"), 3);
    ck_assert_int_eq(balanced_tags("<svg><g></svg>"), -1);
    ck_assert_int_eq(balanced_tags("<svg><rect x=\"1></svg>"), -1);
    ck_assert_int_eq(balanced_tags("<svg>"), -1);
}
END_TEST

static int leftover_temp_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

START_TEST(svg_is_well_formed_and_written_atomically)
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

    FILE *f = fopen(path, "r");
    fseek(f, 0, SEEK_END);
    char *svg = read_all(f);
    fclose(f);
    ck_assert_msg(strncmp(svg, "<svg", 4) == 0, "%.40s", svg);
    ck_assert_ptr_nonnull(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_int_gt(balanced_tags(svg), 2 * 4 * 8);
    int blue = 0, green = 0;
    for (const char *p = svg; (p = strstr(p, "fill=\"#3b73c4\" stroke")); p++) blue++;
    for (const char *p = svg; (p = strstr(p, "fill=\"#3f9e4d\" stroke")); p++) green++;
    ck_assert_int_eq(blue, 4 * 8);      /* one box per forward, per stage */
    ck_assert_int_eq(green, 4 * 8);
    ck_assert_ptr_nonnull(strstr(svg, "bubble 27.3%"));
    free(svg);
    ck_assert_int_eq(leftover_temp_files(dir), 0);

    /* A target that cannot be replaced (a directory): an error, no debris. */
    char sub[160];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(ptdp_schedule_svg(s, t, sub, msg, sizeof msg), PTDP_EIO);
    ck_assert_ptr_nonnull(strstr(msg, sub));
    ck_assert_int_eq(leftover_temp_files(dir), 0);
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
    Suite *s = suite_create("schedule-draw");
    TCase *draw = tcase_create("draw");
    tcase_add_test(draw, ascii_has_one_row_per_stage_and_the_bubble);
    tcase_add_test(draw, the_tag_checker_can_fail);
    tcase_add_test(draw, svg_is_well_formed_and_written_atomically);
    suite_add_tcase(s, draw);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
