#pragma once
// The converter's input (internal to recmix_data): lines read in large blocks from a plain or gzip
// file, or from standard input.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace recmix::data::detail {

inline constexpr std::size_t kBlockBytes = 4u << 20;
inline constexpr std::size_t kMaxLineBytes = 16u << 20;

// Lines of one input (plain or gzip file, or stdin), read in large blocks. Gzip input (found by
// its magic bytes) is inflated member after member, as gzip does; anything after the last member
// that is not another member is an error (zlib's gzread drops such bytes without a word).
class LineSource {
 public:
  explicit LineSource(const std::string& name) : name_(name == "-" ? "<stdin>" : name) {
    if (name == "-") {
      fd_.fd = 0;
    } else {
      fd_.fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
      fd_.owned = fd_.fd >= 0;
      if (fd_.fd < 0 && errno == ENOENT) throw IoError(name + ": no such file");
      if (fd_.fd < 0) throw IoError(name + ": cannot open for reading (" + std::strerror(errno) + ")");
      struct stat st {};
      if (::fstat(fd_.fd, &st) == 0) {
        if (S_ISDIR(st.st_mode)) throw IoError(name + ": is a directory");
        if (S_ISREG(st.st_mode)) size_ = static_cast<std::int64_t>(st.st_size);
      }
    }
    raw_.resize(kRawBytes);
    while (raw_end_ < 2 && read_raw()) {
    }
    if (raw_end_ >= 2 && raw_[0] == 0x1f && raw_[1] == 0x8b) {
      if (inflateInit2(&inflater_.stream, 16 + MAX_WBITS) != Z_OK) throw IoError(name_ + ": cannot start zlib");
      inflater_.started = true;
      in_member_ = true;
    }
    buffer_.resize(kBlockBytes);
  }
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  // Next line without its '\n'; `terminated` says whether a '\n' ended it. False at the end.
  bool next(std::string_view& line, bool& terminated) {
    while (true) {
      const char* nl = static_cast<const char*>(std::memchr(buffer_.data() + begin_, '\n', end_ - begin_));
      if (nl) {
        line = std::string_view(buffer_.data() + begin_, static_cast<std::size_t>(nl - buffer_.data()) - begin_);
        begin_ = static_cast<std::size_t>(nl - buffer_.data()) + 1;
        terminated = true;
        return true;
      }
      if (eof_) {
        if (begin_ == end_) return false;
        line = std::string_view(buffer_.data() + begin_, end_ - begin_);
        begin_ = end_;
        terminated = false;
        return true;
      }
      fill();
    }
  }
  std::int64_t bytes() const { return bytes_; }
  std::int64_t size() const { return size_; }  // size on disk (compressed), -1 for stdin or a pipe
  std::int64_t position() const { return raw_read_ - static_cast<std::int64_t>(raw_end_ - raw_begin_); }

 private:
  static constexpr std::size_t kRawBytes = 1u << 20;

  struct Fd {
    int fd = -1;
    bool owned = false;
    ~Fd() {
      if (owned) ::close(fd);
    }
  };
  struct Inflater {
    z_stream stream{};
    bool started = false;
    ~Inflater() {
      if (started) inflateEnd(&stream);
    }
  };

  void fill() {
    if (begin_ > 0) {  // keep the partial line at the front
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buffer_.size()) {
      if (buffer_.size() >= kMaxLineBytes) throw DataError(name_ + ": a line is longer than 16 MiB");
      buffer_.resize(buffer_.size() * 2);
    }
    const std::size_t got = decode(buffer_.data() + end_, buffer_.size() - end_);
    if (got == 0) eof_ = true;
    end_ += got;
    bytes_ += static_cast<std::int64_t>(got);
  }

  // Appends the next bytes of the input to raw_ (moving the unread ones to the front); false at
  // the end of the input.
  bool read_raw() {
    if (raw_begin_ > 0) {
      std::memmove(raw_.data(), raw_.data() + raw_begin_, raw_end_ - raw_begin_);
      raw_end_ -= raw_begin_;
      raw_begin_ = 0;
    }
    const std::size_t got = read_fd(raw_.data() + raw_end_, raw_.size() - raw_end_);
    raw_end_ += got;
    return got > 0;
  }

  std::size_t read_fd(void* out, std::size_t room) {
    while (true) {
      const ssize_t got = ::read(fd_.fd, out, room);
      if (got >= 0) {
        raw_read_ += got;
        return static_cast<std::size_t>(got);
      }
      if (errno != EINTR) throw IoError(name_ + ": read failed (" + std::strerror(errno) + ")");
    }
  }

  // Up to `room` bytes of the uncompressed input; 0 at its end.
  std::size_t decode(char* out, std::size_t room) {
    if (!inflater_.started) {
      if (raw_begin_ == raw_end_) return read_fd(out, room);
      const std::size_t n = std::min(room, raw_end_ - raw_begin_);  // the bytes read to look for gzip
      std::memcpy(out, raw_.data() + raw_begin_, n);
      raw_begin_ += n;
      return n;
    }
    z_stream& z = inflater_.stream;
    std::size_t produced = 0;
    while (produced == 0) {
      if (!in_member_) {  // a member ended: another may follow (files joined with cat), nothing else
        while (raw_end_ - raw_begin_ < 2 && read_raw()) {
        }
        if (raw_begin_ == raw_end_) return 0;
        if (raw_end_ - raw_begin_ < 2 || raw_[raw_begin_] != 0x1f || raw_[raw_begin_ + 1] != 0x8b)
          throw DataError(fmt::format("{}: data after the end of the gzip stream, at byte {}{} (the file is "
                                      "damaged, or something was appended to it)",
                                      name_, position(), size_ >= 0 ? fmt::format(" of {}", size_) : ""));
        inflateReset(&z);
        in_member_ = true;
      }
      if (raw_begin_ == raw_end_ && !read_raw())
        throw IoError(name_ + ": compressed input is cut short (the gzip stream ends early)");
      z.next_in = raw_.data() + raw_begin_;
      z.avail_in = static_cast<uInt>(raw_end_ - raw_begin_);
      z.next_out = reinterpret_cast<Bytef*>(out);
      z.avail_out = static_cast<uInt>(room);
      const int code = inflate(&z, Z_NO_FLUSH);
      raw_begin_ = raw_end_ - z.avail_in;
      produced = room - z.avail_out;
      if (code == Z_STREAM_END)
        in_member_ = false;
      else if (code != Z_OK && code != Z_BUF_ERROR)
        throw IoError(name_ + ": compressed input is damaged (" + (z.msg ? z.msg : "zlib error") + ")");
    }
    return produced;
  }

  std::string name_;
  Fd fd_;
  Inflater inflater_;
  bool in_member_ = false;
  std::vector<unsigned char> raw_;  // input bytes as read (compressed for gzip)
  std::size_t raw_begin_ = 0, raw_end_ = 0;
  std::int64_t raw_read_ = 0;
  std::vector<char> buffer_;  // uncompressed bytes, whole lines
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t bytes_ = 0, size_ = -1;
};

}  // namespace recmix::data::detail
