#ifndef OSCAR_CLIBUV_SHIM_H
#define OSCAR_CLIBUV_SHIM_H

#include <uv.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

/// Swift 6 treats C globals such as `stdout` as unsafe shared state, so the few
/// calls that need one live here as inline C.
static inline void oscar_stdout_line_buffered(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

/// Names the calling thread (visible in top, perf and gdb); at most 15 bytes are kept.
static inline void oscar_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

/// Has the kernel send `sig` to the caller when the thread that started it ends.
static inline void oscar_set_parent_death_signal(int sig) { prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0); }

/// Writing to a socket the peer has closed raises SIGPIPE, which by default
/// kills the process; libuv leaves it to the application. A node must take
/// that as an ordinary write error (EPIPE) instead.
#include <signal.h>
static inline void oscar_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

/// Keeps the calling thread on CPU `cpu` (a loop pinned by
/// `ActorSystem.Settings.loopCPUs`). 0, or an errno (EINVAL: no such CPU
/// in this process's set). The raw call, because glibc's cpu_set_t macros
/// need _GNU_SOURCE.
#include <errno.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef struct { unsigned long bits[1024 / (8 * sizeof(unsigned long))]; } oscar_cpu_mask;
static inline int oscar_set_own_cpus(const oscar_cpu_mask *mask) {
    return syscall(SYS_sched_setaffinity, 0, sizeof *mask, mask) == 0 ? 0 : errno;
}
static inline int oscar_pin_thread_to_cpu(int cpu) {
    oscar_cpu_mask mask = {{0}};
    if (cpu < 0 || cpu >= 1024) return EINVAL;
    mask.bits[cpu / (8 * sizeof(unsigned long))] = 1UL << (cpu % (8 * sizeof(unsigned long)));
    return oscar_set_own_cpus(&mask);
}

/// The calling thread's id, as /proc/self/task names it.
static inline int oscar_thread_id(void) { return (int)syscall(SYS_gettid); }

/// Lets the calling thread run on every CPU the process may use (its main
/// thread's set). A thread starts with its creator's CPUs, so one started
/// from a pinned loop would otherwise stay on that loop's CPU. 0, or an
/// errno.
static inline int oscar_thread_use_process_cpus(void) {
    oscar_cpu_mask mask = {{0}};
    if (syscall(SYS_sched_getaffinity, getpid(), sizeof mask, &mask) < 0) return errno;
    return oscar_set_own_cpus(&mask);
}

/// Moves the calling thread to SCHED_IDLE: it runs only on a core nothing
/// else wants (the bulk lane's copiers; see docs/ARCHITECTURE.md). On Linux
/// the policy is the thread's own. 0, or -1 with errno.
#ifndef SCHED_IDLE
#define SCHED_IDLE 5
#endif
static inline int oscar_lower_thread_to_idle(void) {
    struct sched_param param = {0};
    return sched_setscheduler(0, SCHED_IDLE, &param);
}

/* glibc 2.34+; declared here because it is only visible with _GNU_SOURCE.
   A spawned child then inherits no descriptor it was not given. */
#include <spawn.h>
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);

#endif
