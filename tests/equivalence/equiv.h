/*
 * equiv.h — the equivalence lesson as helpers: train a configuration,
 * train its single-device baseline, and compare them the way --check does.
 *
 *   cfg ──► ptdp_train ──► losses, gradient norms, final state ─┐
 *                                                              ├─► agree to PTDP_TOLERANCE
 *   baseline (dp = tp = pp = 1, one micro-batch) ──► the same ─┘   (1e-10 double, 1e-4 float)
 *
 * and checkpoints as a round trip: train, save, load (into any mesh),
 * train on — which must equal never stopping.
 *
 * Every helper fails the running Check test, with the configuration in
 * the message, when something does not hold.  Used by the equivalence
 * suites and by the unit tests that train (test_zero.c, test_report.c,
 * test_pp.c, test_tp.c).
 */
#ifndef PTDP_TESTS_EQUIV_H
#define PTDP_TESTS_EQUIV_H

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/train.h"

/* A small model (12 -> 16 -> 8 classes, d_ff 32, 4 blocks) so that a whole
 * matrix of meshes runs in seconds; AdamW, 4 steps, a global batch of 48. */
ptdp_train_config equiv_config(int dp, int tp, int pp, int m);
/* The same MLP made wide (hidden 64, F 256) on a batch of 1024, 2 steps:
 * enough compute on an A100's clock for --overlap to hide something. */
ptdp_train_config equiv_overlap_config(int dp, int pp, int m, bool overlap);
/* The grid of meshes the 3D suites sweep: pp 1..4, tp 1, 2, 4, 8, every dp
 * with dp tp pp <= 8, micro-batches ms[0] and ms[1], both 1F1B and GPipe
 * when pp > 1, ZeRO 0..2 when dp > 1 — in that order.  Fills out (at most
 * max) and returns how many. */
typedef struct { int dp, tp, pp, m, zero; const char *schedule; } equiv_mesh;
int equiv_mesh_grid(const int ms[2], equiv_mesh *out, int max);
/* The GPT every equivalence suite uses: small (C 32, 8 heads, F 64, 4
 * layers, T 8), on the built-in sums' 62 tokens, its vocabulary padded
 * for tp ranks. */
ptdp_model_config equiv_small_gpt(int tp);
/* Its MLPs made a mixture: 4 experts of 24 a block, top 2, balance 0.05. */
void equiv_gpt_experts(ptdp_train_config *c);
/* equiv_config with that GPT (its vocabulary padded for model_tp ranks) in
 * place of the MLP: 16 sequences a step, 2 steps. */
ptdp_train_config equiv_gpt_config(int dp, int tp, int pp, int m, int model_tp);

/* Train cfg; the test fails (naming the mesh and the error) if it does.
 * opts: NULL, or launch options (a profile, a trace, a launch result);
 * the harness watchdog applies unless they set one.  final, res: NULL, or
 * they receive the final state and the steps' log (free them with
 * ptdp_state_free and ptdp_train_result_free). */
void equiv_train(const ptdp_train_config *cfg, const ptdp_launch_opts *opts, ptdp_state *final,
                 ptdp_train_result *res);

/* cfg's baseline: the same model, data, optimizer and steps on one device. */
ptdp_train_config equiv_baseline(const ptdp_train_config *cfg);

/* cfg against its baseline, by --check's rule: every step's loss and
 * gradient norm, and every final parameter.  The baseline must really
 * train (its loss moves, its gradients are not zero) and, when cfg clips,
 * clip at every step — or the comparison would prove little. */
void equiv_check(const ptdp_train_config *cfg);

/* Steps a[0..n) against b[0..n): losses within tol (--check's rule), or
 * bit for bit when tol is 0. */
void equiv_losses_agree(const ptdp_step_log *a, const ptdp_step_log *b, int n, double tol, const char *what);

/* Every tensor of a against b, the optimizer state included (which --check
 * skips): within tol of each tensor's own largest value, or bit for bit
 * when tol is 0.  Adam's exp_avg_sq must have no zeros in either: every
 * element saw a gradient, so a zero is a slice that was never written. */
void equiv_states_agree(const ptdp_state *a, const ptdp_state *b, double tol, const char *what);
/* Every tensor of two final states, parameters and optimizer state, bit
 * for bit.  (Not equiv_states_agree: its rule that Adam's second moment
 * has no zeros fails on an honest GPT run, where attention's key bias has
 * an exactly zero gradient in exact arithmetic.) */
void equiv_states_same_bits(const ptdp_state *a, const ptdp_state *b, const char *what);

/* One case of the pipeline schedules' tests (DualPipe's, DualPipeV's): a
 * model and the layout around the schedule. */
typedef struct {
    int model;   /* 0 MLP, 1 GPT, 2 GPT with a mixture of 4 experts in every block */
    int dp, tp, pp, m, zero, ep;
    bool sp, recompute;
    double dropout;
} equiv_pipe_case;

/* k's run under `schedule` on dp x pp devices with m micro-batches: the
 * MLP of equiv_config, or the small GPT (16 sequences, 2 steps; its
 * experts top-2 of 4 with a balance loss large enough to move the
 * router), with at least min_layers layers. */
ptdp_train_config equiv_pipe_config(const equiv_pipe_case *k, const char *schedule, int dp, int pp, int m,
                                    int min_layers);
const char *equiv_pipe_model_name(const equiv_pipe_case *k);

/* Train a and b (both from scratch) and check that they give the same
 * bits: every step's loss and every tensor of the final states.  For two
 * ways of doing the same arithmetic (an overlapped and a plain gradient
 * path, two schedules that order the same sums alike). */
/* cfg is refused before any work (ptdp_train_validate: PTDP_EINVAL) with a
 * message holding `says`; returns the message (valid until the next call
 * on this thread) for further words. */
const char *equiv_refused(const ptdp_train_config *cfg, const char *says);

void equiv_runs_same_bits(const ptdp_train_config *a, const ptdp_train_config *b, const char *what);

/* The checkpoint round trip: train `first` from scratch, save its final
 * state to a file, load it for `second`'s model and train `second` from
 * it.  *end is where that ends and *log its steps (numbered on from
 * first's).  Free both. */
void equiv_resume(const ptdp_train_config *first, const ptdp_train_config *second, ptdp_state *end,
                  ptdp_train_result *log);
/* equiv_resume beside `whole`, trained from scratch without stopping (for
 * first's steps and second's): *whole_end and *whole_log its end and log
 * (whole_log may be NULL), *end and *log the resumed run's.  Free them. */
void equiv_resume_beside(const ptdp_train_config *whole, const ptdp_train_config *first,
                         const ptdp_train_config *second, ptdp_state *whole_end, ptdp_train_result *whole_log,
                         ptdp_state *end, ptdp_train_result *log);

#endif
