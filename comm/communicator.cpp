#include "comm/communicator.hpp"

namespace recmix::comm {

std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::f32: return 4;
    case DataType::f64: return 8;
    case DataType::i32: return 4;
    case DataType::i64: return 8;
    case DataType::u8: return 1;
  }
  return 0;
}

}  // namespace recmix::comm
