/*
 * moe_cli.h — a mixture of experts on the command line, the same for every
 * model that has one (moe.h): its flags, their cross-checks, its keys in
 * --report's model, EP's uniform estimate, and what `ptdp train` writes of
 * the experts per run from the counters the model published (moe_cli.c).
 * A model's own side (model_flags.h) passes its settings in.
 */
#ifndef PTDP_CLI_MOE_CLI_H
#define PTDP_CLI_MOE_CLI_H

#include <stdio.h>

#include "../model_flags.h"
#include "ptdp/moe.h"
#include "ptdp/safetensors.h"
#include "ptdp/train.h"

/* The six flags' rows of a model's table (model_flags.h), each at the
 * offset of its field in ptdp_model_config (the model's OWN macro):
 *
 *     flag                     smallest   largest (train, bench)
 *     --moe-experts            0          2^12, 256   (0: dense)
 *     --moe-every              1          2^20, 2^10
 *     --moe-ffn                1          2^24, 2^16  (default --ffn)
 *     --moe-top-k              1          2^12, 256   (at most E)
 *     --moe-capacity-factor, --moe-aux-loss   reals: above 0 (omitted:
 *                              dropless), 0 or more                       */
#define PTDP_MOE_FLAG_ROWS(experts, every, ffn, top_k, capacity, aux_loss)                              \
    { "--moe-experts", (experts), 0, { 1 << 12, 256 }, false },                                           \
    { "--moe-every", (every), 1, { 1 << 20, 1 << 10 }, false },                                           \
    { "--moe-ffn", (ffn), 1, { 1 << 24, 1 << 16 }, false },                                               \
    { "--moe-top-k", (top_k), 1, { 1 << 12, 256 }, false },                                               \
    { "--moe-capacity-factor", (capacity), -1000000, { 1000000, 1000000 }, .real = true },                \
    { "--moe-aux-loss", (aux_loss), -1000000, { 1000000, 1000000 }, .real = true }

/* DeepSeek-V3's router, `ptdp train`'s alone (moe.h; the planner prices
 * Mixtral's):
 *
 *     --moe-score              softmax | sigmoid
 *     --moe-route-scale        a real above 0 (sigmoid; default 1)
 *     --moe-bias-update        a real, 0 or more (sigmoid; default 0: the
 *                              bias stays 0): u of the loss-free balance
 *     --moe-groups G           1 .. 2^12 (default 1): group-limited routing
 *     --moe-group-top-k M      1 .. 2^12 (default 1), at most G  */
#define PTDP_MOE_GROUP_FLAG_ROWS(groups, group_top_k)                                                     \
    { "--moe-groups", (groups), 1, { 1 << 12, 256 }, false },                                             \
    { "--moe-group-top-k", (group_top_k), 1, { 1 << 12, 256 }, false }
/* ST-MoE's router z-loss, either router: --moe-z-loss beta, a real, 0 or
 * more (default 0: none). */
/* DeepSeek's first dense blocks: --moe-dense-first K, 0 .. 2^20 (default
 * 0), blocks 0..K-1 dense and --moe-every counted from block K. */
#define PTDP_MOE_DENSE_FIRST_FLAG_ROW(dense_first)                                                       \
    { "--moe-dense-first", (dense_first), 0, { 1 << 20, 1 << 10 }, false }
/* DeepSeek's shared experts: --moe-shared-experts S, 0 .. 4096 (default
 * 0), one FFN of S F_e every token takes. */
#define PTDP_MOE_SHARED_FLAG_ROW(shared)                                                                 \
    { "--moe-shared-experts", (shared), 0, { 1 << 12, 1 << 6 }, false }
#define PTDP_MOE_Z_LOSS_FLAG_ROW(z_loss)                                                                 \
    { "--moe-z-loss", (z_loss), -1000000, { 1000000, 1000000 }, .real = true }
#define PTDP_MOE_DEEPSEEK_FLAG_ROWS(score, route_scale, bias_update)                                      \
    { "--moe-score", (score), PTDP_FLAG_WORDS, { 1, 1 }, false },                                         \
    { "--moe-route-scale", (route_scale), -1000000, { 1000000, 1000000 }, .real = true },                 \
    { "--moe-bias-update", (bias_update), -1000000, { 1000000, 1000000 }, .real = true }

/* The flags' values, and none of them without experts (`dense`: what the
 * model has instead, "the dense MLP"); a typed --moe-capacity-factor above
 * 0 (omitted: dropless).  _typed for a command with the names typed
 * (`ptdp plan`'s), _finish with a model's flags.  0, or the usage error's
 * exit. */
int ptdp_moe_cli_typed(const char *cmd, const char *const *given, int ngiven, const ptdp_moe_settings *s,
                       const char *dense);
int ptdp_moe_cli_finish(const char *cmd, const ptdp_model_flags *f, const ptdp_moe_settings *s, const char *dense);

/* How a model's checkpoints tell a mixture from a dense FFN: its word
 * ("GPT"), the ending of its router's name (".mlp.router.weight") and
 * what a dense file has instead ("no transformer.h.*.mlp.router.weight,
 * one c_fc per block"). */
typedef struct {
    const char *model, *router, *dense;
} ptdp_moe_cli_names;

/* --load's file f against the run: a dense checkpoint into a run with
 * experts, or the other way round, is a usage error naming the flag and
 * the tensor that tell them apart.  0, or the usage error's exit. */
int ptdp_moe_cli_load_matches(const char *load, ptdp_st_file *f, const ptdp_moe_settings *s,
                              const ptdp_moe_cli_names *names);

/* --report's model keys of a mixture (none for a dense model):
 * , "moe_experts": E, "moe_every": n, "moe_ffn": F_e, "moe_top_k": k,
 * "moe_capacity_factor": c or null, "moe_aux_loss": a. */
void ptdp_moe_cli_report_keys(FILE *f, const ptdp_moe_settings *s, int ffn);

/* Expert parallelism's uniform estimate per device and step (ep.h) for
 * sequences of seq_len positions (under --fp8-comm the forward dispatch's
 * rows at their codes and scales, ep.h's ptdp_ep_fp8_row_bytes). */
double ptdp_moe_cli_ep_uniform_bytes(const ptdp_train_config *c, const ptdp_moe_settings *s, int seq_len);

/* The run's experts from the counters (the hooks report_stats and
 * print_stats of model_flags.h): --report's "moe_choices_per_step" and
 * "moe_blocks", and one line per MoE block after the run. */
void ptdp_moe_cli_report_stats(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res,
                               const ptdp_moe_settings *s, int seq_len);
void ptdp_moe_cli_print_stats(const ptdp_train_config *c, const ptdp_train_result *res, const ptdp_moe_settings *s,
                              int seq_len);

#endif
