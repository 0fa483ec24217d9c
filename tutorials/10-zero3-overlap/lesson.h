/*
 * lesson.h — lesson 10: the functions you write in exercise.c, which the
 * check calls, and the model's compute, which the check gives you.
 *
 * A toy model of a few units (unit u: y = tanh(x W_u^T + b_u), its
 * parameters [W_u | b_u] one flat stretch of numel elements) trained with
 * ZeRO-3 on the N ranks of z->dp.  Rank k keeps shard k of every unit —
 * ptdp_share(numel, N, k): elements [off, off + len) — and nothing else
 * between uses.  The structures mirror ptdp_zero_unit (zero.h).
 */
#ifndef LESSON_10_H
#define LESSON_10_H

#include <stdbool.h>
#include <stddef.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"

#define LESSON_MAX_UNITS 8

typedef struct {
    size_t numel;               /* |u|: the unit's elements                        */
    size_t off, len;            /* my shard of them: ptdp_share(numel, N, my rank)  */
    ptdp_real *w_shard;         /* my shard of its parameters, len ("params"): kept */
    ptdp_real *g_shard;         /* my shard of its gradient, len ("grads"): summed
                                   over the step's micro-batches                    */
    ptdp_real *w;               /* the gathered parameters, numel ("params"), or NULL */
    ptdp_real *g;               /* its gradient while its backward runs, numel
                                   ("grads"), or NULL                               */
    ptdp_request gather;        /* w's all-gather, when started (not yet waited)    */
    ptdp_request reduce;        /* g's reduce-scatter, when started                 */
} lesson_unit;

struct lesson_model;            /* the check's: activations, data, what it saw */

typedef struct {
    ptdp_comm *dp;              /* the data-parallel group: N ranks */
    int nunits;
    lesson_unit unit[LESSON_MAX_UNITS];
    struct lesson_model *model;
    /* HSDP (blank 8) only, NULL before: the dp ranks cut into dp/N shard
     * groups of N consecutive ranks.  The check makes both with
     * ptdp_comm_split of z->dp — shard: color rank / N; replica: color
     * rank % N — as the library's mesh makes its "shard" and "replica"
     * groups.  Then off, len are ptdp_share(numel, N, my rank in shard). */
    ptdp_comm *shard;           /* my shard group: N ranks, ZeRO inside it      */
    ptdp_comm *replica;         /* the R = dp/N ranks holding the same shard    */
} lesson_zero3;

/* ------------------------------------------------ what you write */

/* Unit u's parameters, whole, in a fresh buffer z->unit[u].w: blocking
 * (start false), or started into z->unit[u].gather (start true; the
 * caller waits).  Returns 0 or a PTDP_E… code. */
int lesson_gather(ptdp_device *dev, lesson_zero3 *z, int u, bool start);
/* The reduce-scatter of unit u's gradient z->unit[u].g: blocking, or
 * started into z->unit[u].reduce. */
int lesson_reduce_scatter(ptdp_device *dev, lesson_zero3 *z, int u, bool start);
/* After that reduce-scatter (and its wait): my shard of it into the
 * gradient shard; the buffer freed. */
int lesson_add_grad(ptdp_device *dev, lesson_zero3 *z, int u);
/* One micro-batch, forward and backward through every unit: the blocking
 * way, then with the communication overlapped. */
int lesson_micro_batch(ptdp_device *dev, lesson_zero3 *z);
int lesson_micro_batch_overlap(ptdp_device *dev, lesson_zero3 *z);

/* HSDP: unit u's gradient z->unit[u].g (numel, MY micro-batch's) summed
 * over all dp ranks in two stages — reduce-scattered in place inside
 * z->shard, then my shard [off, off + len) all-reduced across z->replica —
 * and added into z->unit[u].g_shard; g freed (as lesson_add_grad does). */
int lesson_hsdp_sum(ptdp_device *dev, lesson_zero3 *z, int u);

/* ------------------------------------- what the check gives you */

/* Unit u's forward on this micro-batch, with the parameters in
 * z->unit[u].w (checked: there, waited for, whole).  Keeps its output for
 * the backward; the last unit's adds the loss. */
int lesson_unit_forward(ptdp_device *dev, lesson_zero3 *z, int u);
/* Unit u's backward: ADDS the gradient of its parameters into
 * z->unit[u].g (numel, zeroed: lesson_grad_buffer) — already divided by
 * the whole batch B, as a loss averaged over B needs — and hands the
 * gradient of its input to unit u - 1.  Needs z->unit[u].w too. */
int lesson_unit_backward(ptdp_device *dev, lesson_zero3 *z, int u);

/* Given in exercise.c: free unit u's gathered parameters; allocate its
 * zeroed gradient buffer. */
void lesson_release(ptdp_device *dev, lesson_zero3 *z, int u);
int  lesson_grad_buffer(ptdp_device *dev, lesson_zero3 *z, int u);

#endif
