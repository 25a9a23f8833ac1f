#pragma once
// A run directory found on disk. recmix run and recmix train continue the run in it only when
// asked (--resume) and start over in it only when asked (--force, which moves the old one aside,
// never deleting it), so that two runs never mix their events, metrics and checkpoints.
#include <filesystem>
#include <string>
#include <vector>

namespace recmix::comm {
class Communicator;
}

namespace recmix::cli {

// True when `dir` holds a run: one of `markers` (file or folder names) exists in it.
bool holds_run(const std::filesystem::path& dir, const std::vector<std::string>& markers);

// Moves `dir` to `<dir>.<UTC time, YYYYMMDD-HHMMSS>`, or `<that>-2`, `-3`... when that name is
// taken: never onto an existing path (renameat2 RENAME_NOREPLACE). Returns the new path.
std::filesystem::path move_aside(const std::filesystem::path& dir);

// Rank 0 checks `dir` for `command` ("run", "train"): a run in it without resume needs force,
// which moves it aside (said on stdout). Returns the error every rank agrees on ("" to go on).
std::string claim_run_directory(comm::Communicator& world, const std::filesystem::path& dir,
                                const std::vector<std::string>& markers, bool resume, bool force,
                                const std::string& command);

// Rank 0's text (an error, a verdict), the same on every rank: a decision rank 0 made alone that
// every rank must follow.
std::string from_rank0(comm::Communicator& world, std::string text);

}  // namespace recmix::cli
