/* What the history-based performance models learned: one entry per (op, arch,
 * footprint) of the live models, read through StarPU's per-arch API. The dm* and
 * heteroprio-style decisions on unlike workers rest on these means; the Python side
 * (nntile_lab/perfmodels.py) tabulates them. Read while no task runs (after a wait):
 * StarPU updates the lists when tasks end. */
#include "internal.h"

#include <string.h>

/* a worker archtype as its `where` bit (STARPU_CPU, STARPU_OPENCL, ...), 0 if other */
static int kind_of(enum starpu_worker_archtype type)
{
    switch (type) {
    case STARPU_CPU_WORKER: return STARPU_CPU;
    case STARPU_CUDA_WORKER: return STARPU_CUDA;
    case STARPU_OPENCL_WORKER: return STARPU_OPENCL;
    default: return 0;
    }
}

int64_t nl_perfmodel_entries(struct nl_model_entry *out, int64_t max)
{
    int64_t n = 0;
    int ncombs = starpu_perfmodel_get_narch_combs();
    for (int op = 0; op < nl_op_count(); op++) {
        struct starpu_perfmodel *model = nl_op_model(op);
        if (!model->is_loaded || !model->state) continue;   /* never ran in this process */
        for (int comb = 0; comb < ncombs; comb++) {
            struct starpu_perfmodel_arch *arch = starpu_perfmodel_arch_comb_fetch(comb);
            if (!arch || arch->ndevices < 1) continue;
            struct starpu_perfmodel_per_arch *per = starpu_perfmodel_get_model_per_arch(model, arch, 0);
            if (!per) continue;
            for (struct starpu_perfmodel_history_list *l = per->list; l; l = l->next) {
                struct starpu_perfmodel_history_entry *e = l->entry;
                if (!e || !e->nsample) continue;
                if (n < max) {
                    struct nl_model_entry *o = &out[n];
                    memset(o, 0, sizeof *o);
                    o->op = op;
                    o->arch = kind_of(arch->devices[0].type);
                    o->devid = arch->devices[0].devid;
                    o->ncores = arch->devices[0].ncores;
                    o->footprint = e->footprint;
                    o->size = (int64_t)e->size;
                    o->mean_us = e->mean;
                    o->nsample = (int)e->nsample;
                    /* deviation holds n·variance (StarPU's own note in the header) */
                    double var = e->nsample > 1 ? e->deviation / e->nsample : 0.0;
                    o->std_us = var > 0 ? __builtin_sqrt(var) : 0.0;
                }
                n++;
            }
        }
    }
    return n;
}
