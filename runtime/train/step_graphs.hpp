#pragma once
// device.graphs for a training step: pieces of the step (the stretches of device work between the
// host's own work: index handling, exchanges, collectives) each captured once per batch shape
// and replayed from then on (device/graph.hpp). A piece must read everything that changes from
// one step to the next through device memory; sizes and scalars it passes by value are frozen
// per shape.
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "device/backend.hpp"
#include "device/graph.hpp"

namespace recmix::runtime {

class StepGraphs {
 public:
  StepGraphs(device::Backend& backend, device::Stream& stream, bool on)
      : backend_(backend), stream_(stream), on_(on) {}
  bool on() const { return on_; }

  // Issues piece `piece` of a step of `batch` local and `global_batch` global samples: eagerly
  // while graphs are off and on the first step of each (piece, shape), so that buffers made on
  // first use are made outside a capture; captured and launched on the second; replayed after.
  // Returns what issue() returned when it last ran (a replay leaves its result in the same place).
  template <class Issue>
  const float* run(int piece, int batch, std::int64_t global_batch, const Issue& issue) {
    issued_ = true;
    if (!on_) return issue();
    Piece& p = pieces_[{piece, batch, global_batch}];
    issued_ = !p.graph;
    if (!p.graph && !p.warmed_up) {
      p.warmed_up = true;
      return p.result = issue();
    }
    if (!p.graph) {
      backend_.begin_capture(stream_);
      try {
        p.result = issue();
      } catch (...) {
        try {
          backend_.end_capture(stream_);
        } catch (...) {
        }
        throw;
      }
      p.graph = backend_.end_capture(stream_);
    }
    p.graph->launch(stream_);
    return p.result;
  }

  // Whether the last run() issued its work (eagerly, or into a capture and launched) rather than
  // replaying a graph: after a replay, the host side of what the graph holds is the caller's to
  // advance (ShardedEmbedding::forward_finish_replayed, backward_start_replayed).
  bool issued() const { return issued_; }

  // Drops every shape's graph of `piece` (and its warm-up): what it captured reads buffers that
  // have since been made anew. Its next run of each shape starts over, eagerly.
  void forget(int piece) {
    std::erase_if(pieces_, [piece](const auto& entry) { return std::get<0>(entry.first) == piece; });
  }

 private:
  struct Piece {
    std::unique_ptr<device::Graph> graph;
    const float* result = nullptr;
    bool warmed_up = false;
  };
  device::Backend& backend_;
  device::Stream& stream_;
  bool on_;
  bool issued_ = false;
  std::map<std::tuple<int, int, std::int64_t>, Piece> pieces_;
};

}  // namespace recmix::runtime
