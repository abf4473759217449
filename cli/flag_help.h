// Help text that several subcommands give for the same flag.
#ifndef SACPLAN_CLI_FLAG_HELP_H_
#define SACPLAN_CLI_FLAG_HELP_H_

namespace sacplan::cli {

// What --host-budget says, the same for plan, compare, frontier and report.
inline constexpr const char* kHostBudgetHelp =
    "Offload: pinned host memory the plan may fill with activations sent "
    "there between forward and backward, a third choice beside keeping and "
    "recomputing (needs the profile's device.host_link: roofline profiles "
    "have one). Host bytes are pinned bytes (each tensor rounded up to a "
    "power of two, as PyTorch's pinned allocator does). A size (64GB), auto "
    "(half the profile's host_memory_bytes, the host memory available per "
    "GPU; the rest is the process's and the OS's) or 0 (no offload). "
    "Default: auto when the profile has a host link, no offload when it has "
    "none (a CPU profile)";

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_FLAG_HELP_H_
