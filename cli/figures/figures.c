/*
 * figures.c — `ptdp figures`: the course's pictures, drawn by ptdp itself.
 *
 *     ptdp figures --out figures            (also: meson compile -C build figures)
 *     figures/ring_allreduce.svg
 *     figures/tp_splits.svg
 *     …
 *
 * No plotting library and nothing drawn by hand: every figure is computed
 * by the code it explains — a real ring all-reduce, a real tensor-parallel
 * model's parameter shards, the pipeline schedule simulator, real training
 * runs — and written by the small SVG writer of svg.h.  Rerun the command
 * after changing the code and the figures change with it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../args.h"
#include "../commands.h"
#include "../model_flags.h"
#include "figures.h"
#include "ptdp/error.h"

typedef ptdp_model_figure figure;   /* name (NAME.svg; --only NAME), summary, draw */

/* The figures in the order they are drawn; the row with no name is where
 * the models' own figures go (their CLI tables, in the registry's order). */
static const figure shared[] = {
    { "ring_allreduce",     "the ring all-reduce step by step (checked on 4 devices)", fig_ring_allreduce },
    { "dp_allreduce",       "lesson 02: each rank's 1/B-scaled gradient, the all-reduce (sum), its bytes",
      fig_dp_allreduce },
    { "tp_splits",          "how tp = 4 cuts fc1, fc2 and the output layer, and where f and g talk",
      fig_tp_splits },
    { "pipeline_schedules", "GPipe above 1F1B, p = 4, m = 8: the bubble measured and by formula",
      fig_pipeline_schedules },
    { "filling_the_bubble", "GPipe, 1F1B, interleaved (v = 2) and ZB-H1, p = 4, m = 8: each bubble and its formula",
      fig_filling_the_bubble },
    { "dualpipev",          "DualPipeV: 8 stages as a V on 4 devices beside ZB-H1 on 8, m = 10: bubble, F&B pairs, memory",
      fig_dualpipev },
    { "dualpipe",           "DualPipe: two copies on 4 devices beside ZB-H1, m = 10, with and without all-to-alls",
      fig_dualpipe },
    { "mesh_groups",        "lesson 05: dp 2 x tp 2 x pp 2, each device's rank, coordinates and groups",
      fig_mesh_groups },
    { "expert_groups",      "expert parallelism on dp 4, ep 2: EP groups, who holds which expert, the expert-DP groups",
      fig_expert_groups },
    { "moe_folding",        "MoE parallel folding on tp 2 x dp 2, ep 4, etp 1: attention's groups and the experts' over the "
                            "same ranks", fig_moe_fold },
    { "zero_ownership",     "lesson 06: ZeRO 0/1/2 on dp 4, who holds which chunk, formula and measured bytes",
      fig_zero_ownership },
    { "zero_memory",        "ZeRO 0/1/2/3 on dp 4: bytes per device by the paper's formula (f32, bf16) and the arena",
      fig_zero_memory },
    { "zero_overlap",       "one ZeRO-3 step on 2 devices (dgx-a100), --overlap against blocking: gathers prefetched",
      fig_zero_overlap },
    { "hsdp",               "ZeRO-3 against HSDP on 2 nodes of 4: each collective on its link, its measured bytes",
      fig_hsdp },
    { NULL, NULL, NULL },   /* each model's own figures */
    { "ring_attention",     "context parallelism: ring attention's steps on cp = 4, zigzag beside contiguous chunks",
      fig_ring_attention },
    { "ulysses",            "context parallelism the other way: Ulysses' two all-to-alls on cp = 4 (checked on 4 devices)",
      fig_ulysses },
    { "memory_per_device",  "peak memory per device by category, eight configurations (ZeRO too)",
      fig_memory_per_device },
    { "loss_curves",        "loss per step: one device against dp 2 x tp 2 x pp 2", fig_loss_curves },
    { "fp8_loss_curves",    "one model trained in float, bf16 and each FP8 recipe: the loss curves and their gaps",
      fig_fp8_loss_curves },
    { "plan_layouts",       "lesson 12: every layout of a 7.5B transformer on 32 GPUs, memory against step time, the best "
                            "marked", fig_plan_layouts },
};
enum { NSHARED = sizeof shared / sizeof shared[0], MAX_FIGURES = 64 };

/* All the figures: the shared ones with the models' own in their place.
 * Returns how many (at most MAX_FIGURES). */
static int list_figures(figure *out)
{
    int n = 0;
    for (int i = 0; i < NSHARED; i++) {
        if (shared[i].name != NULL) {
            if (n < MAX_FIGURES)
                out[n++] = shared[i];
            continue;
        }
        for (int m = 0; m < ptdp_model_count(); m++) {
            const ptdp_model_cli *cli = ptdp_model_cli_for(ptdp_model_at(m));
            for (int f = 0; f < cli->nfigures && n < MAX_FIGURES; f++)
                out[n++] = cli->figures[f];
        }
    }
    return n;
}

int fig_default_model(ptdp_model_config *cfg, unsigned char **data, const char **noun, char *msg, size_t msglen)
{
    *data = NULL;
    for (int m = 0; m < ptdp_model_count(); m++) {
        const ptdp_model_cli *cli = ptdp_model_cli_for(ptdp_model_at(m));
        if (cli->figure_model != NULL) {
            *noun = ptdp_model_cli_noun(cli->ops);
            return cli->figure_model(cfg, data, msg, msglen);
        }
    }
    snprintf(msg, msglen, "no registered model offers a model for the figures (ptdp_model_cli.figure_model)");
    return PTDP_EINVAL;
}

/* ---- what the figures share ---------------------------------------------------- */

const char *fig_rank_color(int rank)
{
    static const char *const colors[] = { "#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                          "#76b7b2", "#edc948", "#b07aa1", "#9c755f" };
    return colors[((rank % 8) + 8) % 8];
}

int fig_ask_devices(int world, ptdp_device_fn fn, void *arg, const char *what, char *msg, size_t msglen)
{
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(world, fn, arg, &o);
    if (err != 0)
        snprintf(msg, msglen, "building %s failed: %s", what, lr.message);
    ptdp_launch_result_free(&lr);
    return err;
}

int fig_finish(ptdp_svg *s, const char *path, char *msg, size_t msglen)
{
    int err = ptdp_svg_end(s);
    if (err != 0)
        snprintf(msg, msglen, "%s: drawing failed (%s)", path, ptdp_strerror(err));
    else
        err = ptdp_svg_save(s, path, msg, msglen);
    ptdp_svg_free(s);
    return err;
}

/* ---- the command ---------------------------------------------------------------- */

static void usage(void)
{
    figure figures[MAX_FIGURES];
    const int nfigures = list_figures(figures);
    printf("usage: ptdp figures [--out DIR] [--only NAME]\n"
           "\n"
           "Draw the course's figures as SVG files, each computed by ptdp from real runs.\n"
           "\n"
           "  --out DIR     where to write them, created if missing (default: figures)\n"
           "  --only NAME   draw one figure only, one of:\n");
    for (int i = 0; i < nfigures; i++)
        printf("                  %-19s %s\n", figures[i].name, figures[i].summary);
}

/* mkdir -p: create every missing directory on the way to `dir`. */
static int make_dirs(const char *dir, char *msg, size_t msglen)
{
    char *p = strdup(dir);
    if (p == NULL) {
        snprintf(msg, msglen, "out of host memory");
        return PTDP_ENOMEM;
    }
    int rc = 0;
    for (char *slash = p + 1; rc == 0; slash++) {
        char c = *slash;
        if (c != '/' && c != '\0')
            continue;
        *slash = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))) {
            snprintf(msg, msglen, "cannot create directory %s: %s", p,
                     errno == EEXIST ? "a file of that name is in the way" : strerror(errno));
            rc = PTDP_EIO;
        }
        *slash = c;
        if (c == '\0')
            break;
    }
    free(p);
    if (rc == 0 && access(dir, W_OK) != 0) {
        snprintf(msg, msglen, "cannot write into directory %s: %s", dir, strerror(errno));
        rc = PTDP_EIO;
    }
    return rc;
}

int ptdp_cmd_figures(int argc, char **argv)
{
    const char *out = "figures";
    figure figures[MAX_FIGURES];
    const int nfigures = list_figures(figures);
    const char *names[MAX_FIGURES];
    for (int i = 0; i < nfigures; i++)
        names[i] = figures[i].name;
    int only = -1;

    ptdp_args a;
    ptdp_args_init(&a, "figures", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return PTDP_EXIT_OK; }
        else if (ptdp_args_is(&a, "--out"))  rc = ptdp_args_string(&a, &out);
        else if (ptdp_args_is(&a, "--only")) rc = ptdp_args_enum(&a, names, nfigures, &only);
        else                                 rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if (out[0] == '\0')
        return ptdp_usage_error("figures", "--out: expected a directory name");

    char msg[PTDP_MSG_MAX];
    int made = make_dirs(out, msg, sizeof msg);
    if (made == PTDP_ENOMEM) {
        fprintf(stderr, "ptdp figures: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    if (made != 0)   /* a path that cannot hold the figures: bad input, found before any work (as train's outputs) */
        return ptdp_usage_error("figures", "--out %s: %s (give a directory that exists or can be created)", out,
                                msg);
    int status = PTDP_EXIT_OK;
    for (int i = 0; i < nfigures; i++) {
        if (only >= 0 && i != only)
            continue;
        size_t n = strlen(out) + strlen(figures[i].name) + 8;
        char *path = malloc(n);
        if (path == NULL) {
            fprintf(stderr, "ptdp figures: out of host memory\n");
            return PTDP_EXIT_FAIL;
        }
        snprintf(path, n, "%s%s%s.svg", out, out[strlen(out) - 1] == '/' ? "" : "/", figures[i].name);
        if (figures[i].draw(path, msg, sizeof msg) == 0) {
            printf("%s\n", path);
            fflush(stdout);
        } else {
            fprintf(stderr, "ptdp figures: %s: %s\n", figures[i].name, msg);
            status = PTDP_EXIT_FAIL;
        }
        free(path);
    }
    return status;
}
