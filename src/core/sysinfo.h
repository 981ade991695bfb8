// sysinfo.h: what the host and the driver say about this process and machine: RAM, cores, resident
// memory, CPU time, and NVML (the driver's libnvidia-ml.so.1, opened at run time with dlopen, so a
// CPU build and a machine without a driver need nothing), plus a background sampler that records
// the peaks and means of one benchmark row.
// provides: sys_host, sys_host_info, sys_rss_bytes, sys_cpu_seconds, sys_nvml_gpu, sys_nvml_open,
//           sys_nvml_driver, sys_nvml_find, sys_nvml_gpu_info, sys_sampler, sys_sampler_start, sys_sampler_stop
#ifndef DS_SYSINFO_H
#define DS_SYSINFO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct sys_host {
    int64_t ram_total, ram_available;  // bytes (/proc/meminfo), 0 when unknown
    int cores;                         // online
} sys_host;

void sys_host_info(sys_host *h);
int64_t sys_rss_bytes(void);   // resident set of this process now, 0 when unknown
double sys_cpu_seconds(void);  // user + system CPU time of this process (all threads)

// An NVML device handle, or NULL where NVML or the device is not there.
typedef void *sys_nvml_gpu;

// Loads and initialises NVML once per process; 0 when there is no usable driver library.
int sys_nvml_open(void);
// The driver version ("580.65.06"), or "" without NVML.
void sys_nvml_driver(char *buf, int len);
// The device with this PCI bus id ("0000:3B:00.0"), or the index-th device when bus_id is NULL.
sys_nvml_gpu sys_nvml_find(const char *bus_id, int index);
// Name, memory and compute capability from NVML; 0 when not available.
int sys_nvml_gpu_info(sys_nvml_gpu g, char *name, int name_len, int64_t *total, int64_t *free_b, int *cc_major,
                      int *cc_minor);

// Samples every period_ms between start and stop: peak resident memory, peak device memory in use
// (NVML: the whole device, all processes), mean GPU utilisation; and the mean CPU use over the row
// from the process's CPU time (cores busy × 100 %).
typedef struct sys_sampler {
    pthread_t thread;
    int running;
    atomic_int stop;
    sys_nvml_gpu gpu;
    int period_ms;
    int64_t rss_peak, gpu_mem_peak;  // bytes; gpu_mem_peak −1 without NVML
    double gpu_util_sum;
    int64_t gpu_util_n;
    double wall0, cpu0;
    // results, valid after stop
    double wall_s, cpu_use_pct, gpu_use_pct;  // gpu_use_pct NaN without NVML or without samples
} sys_sampler;

// gpu: the NVML device to watch, or NULL. Returns 0 when the thread could not start (the row then
// reports the end-point figures only).
int sys_sampler_start(sys_sampler *s, sys_nvml_gpu gpu, int period_ms);
void sys_sampler_stop(sys_sampler *s);

#endif
