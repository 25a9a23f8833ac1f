#pragma once
// A one-rank Communicator for tests that must run without MPI: every collective is a copy.
#include <cstring>
#include <stdexcept>

#include "comm/communicator.hpp"

namespace recmix::embedding::test {

class SelfCommunicator final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void all_reduce_sum(const void* s, void* r, std::size_t n, comm::DataType t, device::Stream*) override {
    copy(r, s, n * comm::size_of(t));
  }
  std::unique_ptr<comm::Request> iall_reduce_sum(const void* s, void* r, std::size_t n,
                                                 comm::DataType t, device::Stream* st) override {
    all_reduce_sum(s, r, n, t, st);
    return std::make_unique<Done>();
  }
  void broadcast(void*, std::size_t, comm::DataType, int, device::Stream*) override {}
  void all_gather(const void* s, void* r, std::size_t n, comm::DataType t, device::Stream*) override {
    copy(r, s, n * comm::size_of(t));
  }
  void all_to_all_v(const void* s, std::span<const std::size_t> sc, std::span<const std::size_t> sd,
                    void* r, std::span<const std::size_t> rc, std::span<const std::size_t> rd,
                    comm::DataType t, device::Stream*) override {
    if (sc[0] != rc[0]) throw std::logic_error("SelfCommunicator: send and receive counts differ");
    ++all_to_all_calls;
    const std::size_t e = comm::size_of(t);
    copy(static_cast<char*>(r) + rd[0] * e, static_cast<const char*>(s) + sd[0] * e, sc[0] * e);
  }
  std::unique_ptr<comm::Request> iall_to_all_v(const void* s, std::span<const std::size_t> sc,
                                               std::span<const std::size_t> sd, void* r,
                                               std::span<const std::size_t> rc,
                                               std::span<const std::size_t> rd, comm::DataType t,
                                               device::Stream* st) override {
    all_to_all_v(s, sc, sd, r, rc, rd, t, st);
    return std::make_unique<Done>();
  }
  std::unique_ptr<comm::Communicator> split(int, int) override {
    return std::make_unique<SelfCommunicator>();
  }
  [[noreturn]] void abort(int, const std::string& why) override { throw std::runtime_error(why); }

  int all_to_all_calls = 0;

 private:
  struct Done final : comm::Request {
    bool test() override { return true; }
    void wait() override {}
  };
  static void copy(void* d, const void* s, std::size_t n) {
    if (n && d != s) std::memmove(d, s, n);
  }
};

}  // namespace recmix::embedding::test
