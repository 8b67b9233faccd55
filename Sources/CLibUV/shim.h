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

/// Starts `path` detached from the caller: in a new session (so closing
/// the terminal or ending the launching command does not stop it), stdin
/// from /dev/null, stdout and stderr appended to `log_path`, and the usual
/// dispositions for SIGINT, SIGTERM, SIGHUP and SIGPIPE, and no other file
/// descriptor. Returns the pid, or
/// a negative errno. posix_spawn, not fork: the caller has threads.
#include <spawn.h>
#include <fcntl.h>
#ifndef POSIX_SPAWN_SETSID
#define POSIX_SPAWN_SETSID 0x80
#endif
/* glibc 2.34+; declared here because it is only visible with _GNU_SOURCE. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int oscar_spawn_detached(const char *path, char *const argv[], char *const envp[], const char *log_path) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    /* Nothing else is inherited: a pipe the caller's caller reads must not
       stay open in a node that outlives it. */
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_init(&attr);
    sigset_t mask, defaults;
    sigemptyset(&mask);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &mask);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path, &actions, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0 ? (int)pid : -rc;
}

#endif
