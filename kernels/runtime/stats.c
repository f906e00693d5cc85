#include "internal.h"

/* ---- worker and bus counters (both reset when read) --------------------- */
int nl_worker_stats(int worker, struct nl_worker_stats *out)
{
    struct starpu_profiling_worker_info info;
    int ret = starpu_profiling_worker_get_info(worker, &info);
    if (ret || !out) return ret;
    out->total_us = nl_us(info.total_time);
    out->executing_us = nl_us(info.executing_time);
    out->sleeping_us = nl_us(info.sleeping_time);
    out->flops = info.flops;
    out->tasks = info.executed_tasks;
    return 0;
}

int nl_bus_stats(int bus, struct nl_bus_stats *out)
{
    struct starpu_profiling_bus_info info;
    int ret = starpu_bus_get_profiling_info(bus, &info);
    if (ret || !out) return ret;
    out->src = starpu_bus_get_src(bus);
    out->dst = starpu_bus_get_dst(bus);
    out->bytes = info.transferred_bytes;
    out->count = info.transfer_count;
    out->total_us = nl_us(info.total_time);
    return 0;
}
