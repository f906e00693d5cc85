/* The OpenCL side of the runtime glue: the program of every kernels/opencl/*.cl source,
 * compiled once per runtime for each OpenCL device, and the launch of one of its kernels
 * from a codelet. Host functions (kernels/opencl/<family>.c) include this too. */
#pragma once
#define NL_WITH_STARPU
#include "../core.h"

#include <stdint.h>
#include <starpu.h>

/* Compile the program (the generated nl_ocl_source) for every OpenCL device: 0 or a
 * negative errno, with the build log said through nl_error. */
int nl_ocl_load(const char *source);
void nl_ocl_unload(void);

/* Release what CLBlast compiled and cached for this runtime's OpenCL contexts (gemm.c):
 * called before StarPU destroys them, as nl_ocl_unload does. Its cache is keyed by
 * context, so a new runtime never reuses an entry: kept, each start/stop cycle left ~3 MiB
 * of programs behind (issue 33: RSS grew 132 -> 200 MiB over 30 cycles). */
void nl_ocl_gemm_forget(void);

/* OpenCL devices present (all platforms): GPUs and accelerators only, or every kind
 * (PoCL's device on the CPU too); 0 without an ICD */
int nl_ocl_devices(int accelerators_only);

/* Run kernel `name` of the program over n work items on the calling worker's device,
 * with `nargs` arguments (sizes[i] bytes at values[i]), and wait for it. */
void nl_ocl_launch(const char *name, int64_t n, int nargs, const size_t *sizes,
                   const void *const *values);

/* A host function's kernel arguments for nl_ocl_launch: ARGS(&a, &b, ...) and their
 * SIZES(sizeof a, ...), NARGS of them */
#define ARGS(...) const void *const values[] = {__VA_ARGS__}
#define SIZES(...) const size_t sizes[] = {__VA_ARGS__}
#define NARGS (int)(sizeof values / sizeof *values)

/* An axis launch (kernels/opencl/axis.clh): kernel `name` over the m·n independent
 * reductions of length k of an (m, k, n) tile, in work-groups of neighbouring slice
 * entries × items along the axis, and wait for it. Every kernel of the program may hold
 * NL_OCL_WG values of local memory per group (the program's NL_WG); a group takes at most
 * NL_OCL_LANES neighbouring entries. */
enum { NL_OCL_WG = 256, NL_OCL_LANES = 32 };
void nl_ocl_launch_axis(const char *name, int64_t m, int64_t k, int64_t n, int nargs,
                        const size_t *sizes, const void *const *values);

/* The tiles' init codelet on an OpenCL worker: a fresh tile first read there is zeros
 * (kernels/runtime/tiles.c) */
void nl_ocl_zero_tile(void *buffers[], void *cl_arg);

/* GEMM through CLBlast (gemm.c) */
void nl_ocl_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, float beta, cl_mem a, cl_mem b, cl_mem c);

/* 1 if the n ids (int64, on the device) are all in [0, vocab); else 0, the CPU kernels'
 * error said (op, what: "token id", "label") */
int nl_ocl_ids_in_range(const char *op, const char *what, int64_t n, int64_t vocab,
                        cl_mem ids);

/* Embedding (embedding.c) and cross-entropy's stats (loss.c): the ids' range check on the
 * host, then the kernel */
void nl_ocl_embedding(int64_t n, int64_t e, int64_t voff, int64_t vrows, int64_t vocab,
                      int32_t check, cl_mem ids, cl_mem table, cl_mem out);
void nl_ocl_embedding_backward(int64_t n, int64_t e, int64_t voff, int64_t vrows,
                               int64_t vocab, int32_t check, cl_mem ids, cl_mem dout,
                               cl_mem dtable);
void nl_ocl_cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, int64_t vocab,
                                cl_mem x, cl_mem labels, cl_mem stats);
