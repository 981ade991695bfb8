// sysinfo.c: host figures from /proc and getrusage, NVML through dlopen, and the row sampler (sysinfo.h).
#include "core/sysinfo.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

void sys_host_info(sys_host *h)
{
    memset(h, 0, sizeof *h);
    h->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            h->ram_total = kb * 1024;
        else if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            h->ram_available = kb * 1024;
    }
    fclose(f);
}

int64_t sys_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    int got = f ? fscanf(f, "%lld %lld", &size, &resident) : 0;
    if (f)
        fclose(f);
    return got == 2 ? (int64_t)resident * sysconf(_SC_PAGESIZE) : 0;
}

double sys_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static double sys_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------------------
// NVML, resolved by name at run time. The structs are NVML's (nvml.h), declared here so that building
// needs no driver headers.

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;

static struct {
    int tried, ok;
    int (*init)(void);
    int (*driver)(char *, unsigned int);
    int (*by_bus)(const char *, sys_nvml_gpu *);
    int (*by_index)(unsigned int, sys_nvml_gpu *);
    int (*memory)(sys_nvml_gpu, nvml_memory *);
    int (*util)(sys_nvml_gpu, nvml_utilization *);
    int (*name)(sys_nvml_gpu, char *, unsigned int);
    int (*cc)(sys_nvml_gpu, int *, int *);
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_load(void)
{
    nvml.tried = 1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    // POSIX allows converting dlsym's void * to a function pointer; memcpy keeps -Wpedantic quiet.
#define NVML_SYM(field, sym)                         \
    do {                                             \
        void *p_ = dlsym(lib, sym);                  \
        memcpy(&nvml.field, &p_, sizeof nvml.field); \
    } while (0)
    NVML_SYM(init, "nvmlInit_v2");
    NVML_SYM(driver, "nvmlSystemGetDriverVersion");
    NVML_SYM(by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
    NVML_SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
    NVML_SYM(memory, "nvmlDeviceGetMemoryInfo");
    NVML_SYM(util, "nvmlDeviceGetUtilizationRates");
    NVML_SYM(name, "nvmlDeviceGetName");
    NVML_SYM(cc, "nvmlDeviceGetCudaComputeCapability");
#undef NVML_SYM
    if (!nvml.init || !nvml.by_index || !nvml.memory || !nvml.util || nvml.init() != 0) {
        dlclose(lib);
        return;
    }
    nvml.ok = 1;  // the library stays loaded for the life of the process
}

int sys_nvml_open(void)
{
    pthread_once(&nvml_once, nvml_load);
    return nvml.ok;
}

void sys_nvml_driver(char *buf, int len)
{
    buf[0] = '\0';
    if (sys_nvml_open() && nvml.driver && nvml.driver(buf, (unsigned int)len) != 0)
        buf[0] = '\0';
}

sys_nvml_gpu sys_nvml_find(const char *bus_id, int index)
{
    sys_nvml_gpu g = NULL;
    if (!sys_nvml_open())
        return NULL;
    if (bus_id && nvml.by_bus) {
        if (nvml.by_bus(bus_id, &g) != 0)
            g = NULL;
    } else if (!bus_id && index >= 0 && nvml.by_index((unsigned int)index, &g) != 0) {
        g = NULL;
    }
    return g;
}

int sys_nvml_gpu_info(sys_nvml_gpu g, char *name, int name_len, int64_t *total, int64_t *free_b, int *cc_major,
                      int *cc_minor)
{
    nvml_memory m;
    if (!g || !sys_nvml_open() || nvml.memory(g, &m) != 0)
        return 0;
    *total = (int64_t)m.total;
    *free_b = (int64_t)m.free;
    if (!nvml.name || nvml.name(g, name, (unsigned int)name_len) != 0)
        snprintf(name, (size_t)name_len, "unknown");
    if (!nvml.cc || nvml.cc(g, cc_major, cc_minor) != 0)
        *cc_major = *cc_minor = 0;
    return 1;
}

// ---------------------------------------------------------------------------------------------------
// The sampler

static void sampler_take(sys_sampler *s)
{
    int64_t rss = sys_rss_bytes();
    if (rss > s->rss_peak)
        s->rss_peak = rss;
    if (!s->gpu)
        return;
    nvml_memory m;
    nvml_utilization u;
    if (nvml.memory(s->gpu, &m) == 0 && (int64_t)m.used > s->gpu_mem_peak)
        s->gpu_mem_peak = (int64_t)m.used;
    if (nvml.util(s->gpu, &u) == 0) {
        s->gpu_util_sum += u.gpu;
        s->gpu_util_n++;
    }
}

static void *sampler_run(void *arg)
{
    sys_sampler *s = arg;
    struct timespec pause = {0, (long)s->period_ms * 1000000L};
    while (!s->stop) {
        sampler_take(s);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int sys_sampler_start(sys_sampler *s, sys_nvml_gpu gpu, int period_ms)
{
    memset(s, 0, sizeof *s);
    s->gpu = gpu && sys_nvml_open() ? gpu : NULL;
    s->gpu_mem_peak = s->gpu ? 0 : -1;
    s->period_ms = period_ms > 0 ? period_ms : 10;
    s->wall0 = sys_now();
    s->cpu0 = sys_cpu_seconds();
    sampler_take(s);
    s->running = pthread_create(&s->thread, NULL, sampler_run, s) == 0;
    return s->running;
}

void sys_sampler_stop(sys_sampler *s)
{
    s->stop = 1;
    if (s->running)
        pthread_join(s->thread, NULL);
    s->running = 0;
    sampler_take(s);
    s->wall_s = sys_now() - s->wall0;
    s->cpu_use_pct = s->wall_s > 0 ? 100.0 * (sys_cpu_seconds() - s->cpu0) / s->wall_s : NAN;
    s->gpu_use_pct = s->gpu_util_n > 0 ? s->gpu_util_sum / (double)s->gpu_util_n : NAN;
}
