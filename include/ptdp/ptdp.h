/*
 * ptdp.h — the parallelism API a learner reads, in the order of the layers.
 *
 * Devices and their memory, the communicator, the numerical ops and the
 * model interface, the parallelisms, the models, training.  The file, SVG,
 * trace and safetensors helpers are included separately, by the code that
 * writes files: ptdp/file.h, ptdp/svg.h, ptdp/trace.h, ptdp/safetensors.h.
 *
 * Conventions of every header: functions return 0 or a negative PTDP_E…
 * code (error.h) and a failing device says why (ptdp_fail); a struct the
 * caller owns is set up by ptdp_X_init and released by ptdp_X_free (a mesh,
 * a model, a state); one the library allocates comes from ptdp_X_create and
 * goes back through ptdp_X_destroy (an arena, a schedule, a trace).
 */
#ifndef PTDP_H
#define PTDP_H
#include "error.h"
#include "types.h"
#include "bf16.h"
#include "coll.h"
#include "arena.h"
#include "tensor.h"
#include "rng.h"
#include "clock.h"
#include "counters.h"
#include "device.h"
#include "comm.h"
#include "launch.h"
#include "ops.h"
#include "optim.h"
#include "fp8.h"
#include "fp8_quant.h"
#include "model.h"
#include "mesh.h"
#include "tp.h"
#include "parallel_linear.h"
#include "dp.h"
#include "zero.h"
#include "schedule.h"
#include "pp.h"
#include "models.h"
#include "mlp.h"
#include "gpt.h"
#include "state.h"
#include "train.h"
#include "plan.h"
#endif
