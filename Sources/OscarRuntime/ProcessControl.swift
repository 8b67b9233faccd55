import CLibUV
import Glibc

/// The process and thread settings that C offers only through a C global
/// (which Swift 6 will not touch), a variadic function (which Swift cannot
/// call) or a GNU extension (which the Glibc module does not declare), so a
/// program built on Oscar needs no C module of its own.
package enum ProcessControl {
    /// Flushes standard output at every newline even into a pipe or a file,
    /// so whoever reads a node's output (a supervisor, a test, a log) sees
    /// each line when it is printed.
    package static func lineBufferStandardOutput() { oscar_stdout_line_buffered() }

    /// Has the kernel send `signal` to this process when the thread that
    /// started it ends (`PR_SET_PDEATHSIG`).
    package static func setParentDeathSignal(_ signal: Int32) { oscar_set_parent_death_signal(signal) }

    /// Has a `posix_spawn` with `actions` close every descriptor from
    /// `lowest` up in the child, so it inherits only what it was given.
    package static func closeDescriptors(from lowest: Int32, in actions: inout posix_spawn_file_actions_t) {
        posix_spawn_file_actions_addclosefrom_np(&actions, lowest)
    }
}
