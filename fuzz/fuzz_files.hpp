#pragma once
// A scratch file for fuzz targets that read files: one per process, in a folder of its own
// under /dev/shm (else the system's temporary folder), rewritten for each input and removed at exit.
#include <cstddef>
#include <cstdint>
#include <string>

namespace recmix::fuzz {

// Writes the bytes to the process's scratch file (named `name` in its folder) and returns its path.
std::string write_scratch_file(const std::string& name, const std::uint8_t* data, std::size_t size);
// The process's scratch folder (made on first use).
std::string scratch_dir();

}  // namespace recmix::fuzz
