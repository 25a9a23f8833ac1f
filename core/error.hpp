#pragma once
// One exception hierarchy for the whole runtime. Each error carries what failed and where;
// RECMIX_CHECK adds a short trail of frames as an error travels up.
#include <stdexcept>
#include <string>
#include <utility>

namespace recmix {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string what) : std::runtime_error(std::move(what)) {}
  // Kind of error for the one-line report in main ("config error: ...").
  virtual const char* kind() const noexcept { return "error"; }
};

// A job spec or command-line value is wrong; the message names the key.
class ConfigError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "config error"; }
};

// A dataset or checkpoint holds something it must not; the message names file, dataset, row.
class DataError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "data error"; }
};

// A file cannot be opened, read or written.
class IoError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "I/O error"; }
};

// Training produced values that are not finite (loss, parameters, optimizer state).
class DivergedError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "numerical error"; }
};

// A device call failed, or a backend is not available in this build.
class DeviceError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "device error"; }
};

// An allocation would exceed a memory pool's configured capacity.
class OutOfMemoryError : public DeviceError {
 public:
  using DeviceError::DeviceError;
  const char* kind() const noexcept override { return "out of memory"; }
};

// A backend (CUDA, NCCL) was not compiled into this build.
class NotCompiledError : public DeviceError {
 public:
  using DeviceError::DeviceError;
  const char* kind() const noexcept override { return "not compiled"; }
};

// A collective failed, or another rank failed and the job was aborted.
class CommError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "communication error"; }
};

// Another rank of the same job failed (its own error names the cause); this rank stops with it.
class PeerFailedError : public CommError {
 public:
  using CommError::CommError;
  const char* kind() const noexcept override { return "peer failed"; }
};

}  // namespace recmix

// Throws ErrorType(message) when cond is false. Message may use std::string concatenation.
#define RECMIX_REQUIRE(cond, ErrorType, message) \
  do {                                           \
    if (!(cond)) throw ErrorType(message);       \
  } while (0)
