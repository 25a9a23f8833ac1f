#pragma once
// Stop signals of recmix train and recmix run: SIGTERM (Slurm at preemption and at the time
// limit), SIGINT (Ctrl-C) and SIGUSR1 (what Open MPI's mpirun forwards, and what
// launch/recmix-mpirun sends on SIGTERM; `sbatch --signal=B:USR1@<s>`) ask the command to stop at
// the next step its ranks agree on, with a checkpoint. A second SIGINT ends the process at once
// (the default action), as users of Ctrl-C expect.
#include <atomic>
#include <string>

namespace recmix::cli {

// Installs the handlers (once); returns the flag they set.
const std::atomic<bool>& install_stop_signals();

// The name of the first stop signal this process received ("SIGTERM", "SIGINT", "SIGUSR1"), or
// "" when none did (another rank's signal stopped it).
const char* stop_signal_name();

// How to start this command again on as many ranks, for the "continue with" hint of a stopped
// run: the launcher (launch/recmix-mpirun, which names itself in RECMIX_LAUNCHER; mpirun; srun)
// with the rank count, then this program's path; the program alone when no launcher started it.
std::string relaunch_prefix(int ranks);

// Exit status of a command stopped early by a signal after its checkpoint: 3, as recmix run's
// interrupted runs (docs/reliability.md says why: not 0, the work is not done; not 128+signal,
// which says the process died of it).
constexpr int kStoppedBySignal = 3;

}  // namespace recmix::cli
