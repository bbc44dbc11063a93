// rlflow/detail/serialize.hpp: building blocks of rlflow's binary formats: CRC-32C (Castagnoli;
// SSE4.2 instruction on x86-64 host builds, slicing-by-8 tables elsewhere, identical results),
// a writer into a pre-sized buffer and a bounds-checked reader that throws format_error.
// Little-endian only (checked at compile time). Not a public API; DataProto uses it.
#pragma once
#include <array>
#include <bit>          // std::endian
#include <cstddef>
#include <cstdint>
#include <cstring>      // std::memcpy
#include <span>
#include <string>
#include <string_view>

#include <rlflow/core/error.hpp>  // format_error

namespace rlflow::detail {

static_assert(std::endian::native == std::endian::little,
              "rlflow serialization: the binary format is little-endian; big-endian hosts are not supported");

// ---------------------------------------------------------------------------------------------
// CRC-32C

inline constexpr std::uint32_t crc32c_poly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc32c_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1u) ? (c >> 1) ^ crc32c_poly : c >> 1;
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i)
    for (std::size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
  return t;
}
inline constexpr auto crc32c_tables = make_crc32c_tables();

//! Raw CRC-32C update (no pre/post inversion), portable slicing-by-8.
inline std::uint32_t crc32c_update_sw(std::uint32_t crc, unsigned char const* p, std::size_t n) {
  auto const& t = crc32c_tables;
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xffu];
  return crc;
}

#if (defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__))
#define RLFLOW_CRC32C_HW 1
//! Raw CRC-32C update with the SSE4.2 crc32 instruction, 8 bytes per step.
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_update_hw(std::uint32_t crc, unsigned char const* p,
                                                                        std::size_t n) {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
inline bool crc32c_hw_available() {
  static bool const ok = __builtin_cpu_supports("sse4.2");
  return ok;
}
#else
#define RLFLOW_CRC32C_HW 0
inline bool crc32c_hw_available() { return false; }
inline std::uint32_t crc32c_update_hw(std::uint32_t crc, unsigned char const* p, std::size_t n) {
  return crc32c_update_sw(crc, p, n);
}
#endif

//! Raw update dispatching to the hardware path when the CPU has it.
inline std::uint32_t crc32c_update(std::uint32_t crc, void const* data, std::size_t n) {
  auto const* p = static_cast<unsigned char const*>(data);
  return crc32c_hw_available() ? crc32c_update_hw(crc, p, n) : crc32c_update_sw(crc, p, n);
}
//! CRC-32C of a buffer (check value of "123456789" is 0xE3069283).
inline std::uint32_t crc32c(void const* data, std::size_t n) { return ~crc32c_update(~0u, data, n); }

// ---------------------------------------------------------------------------------------------
// Writer / reader

//! Appends little-endian fields into a buffer whose size was computed beforehand.
//! Keeps a running CRC-32C of everything written; large copies are checksummed block by block
//! right after each block lands (while it is still in cache), so serializing makes one pass over
//! memory instead of two.
class ByteWriter {
 public:
  static constexpr std::size_t fused_block = std::size_t{64} << 10;
  explicit ByteWriter(std::byte* p) : p_(p), crc_done_(p) {}
  void bytes(void const* src, std::size_t n) {
    if (n >= fused_block) {
      flush_crc();
      auto const* s = static_cast<std::byte const*>(src);
      for (std::size_t off = 0; off < n; off += fused_block) {
        std::size_t const len = n - off < fused_block ? n - off : fused_block;
        std::memcpy(p_, s + off, len);
        crc_ = crc32c_update(crc_, p_, len);
        p_ += len;
      }
      crc_done_ = p_;
      return;
    }
    if (n) std::memcpy(p_, src, n);
    p_ += n;
  }
  //! CRC-32C of every byte written so far.
  std::uint32_t crc() {
    flush_crc();
    return ~crc_;
  }
  template <class T>
  void pod(T v) { bytes(&v, sizeof(T)); }
  void u8(std::uint8_t v) { pod(v); }
  void u32(std::uint32_t v) { pod(v); }
  void u64(std::uint64_t v) { pod(v); }
  void i64(std::int64_t v) { pod(v); }
  //! u32 length + bytes (keys).
  void key(std::string_view s) { u32(static_cast<std::uint32_t>(s.size())); bytes(s.data(), s.size()); }
  //! u64 length + bytes (string values).
  void str(std::string_view s) { u64(s.size()); bytes(s.data(), s.size()); }
  std::byte* pos() const { return p_; }

 private:
  void flush_crc() {
    crc_ = crc32c_update(crc_, crc_done_, static_cast<std::size_t>(p_ - crc_done_));
    crc_done_ = p_;
  }
  std::byte* p_;
  std::byte* crc_done_;
  std::uint32_t crc_ = ~0u;
};

//! Reads fields from a byte span; every read is bounds-checked and a short read throws
//! format_error naming what was being read, the offset and the sizes.
class ByteReader {
 public:
  ByteReader(std::span<std::byte const> s, std::size_t base_offset = 0) : s_(s), base_(base_offset) {}
  std::size_t remaining() const { return s_.size() - pos_; }
  std::size_t offset() const { return base_ + pos_; }
  bool done() const { return pos_ == s_.size(); }

  //! Copies n bytes to dst, folding them into the running CRC block by block (one pass).
  void copy_to(void* dst, std::uint64_t n, const char* what) {
    std::byte const* src = take(n, what);
    flush_crc(src);
    auto* d = static_cast<std::byte*>(dst);
    std::size_t const len = static_cast<std::size_t>(n);
    for (std::size_t off = 0; off < len; off += ByteWriter::fused_block) {
      std::size_t const l = len - off < ByteWriter::fused_block ? len - off : ByteWriter::fused_block;
      std::memcpy(d + off, src + off, l);
      crc_ = crc32c_update(crc_, src + off, l);
    }
    crc_done_ = pos_;
  }
  //! Raw (uninverted) CRC-32C state over everything read so far, continuing from 'seed'.
  std::uint32_t crc_state() {
    flush_crc(s_.data() + pos_);
    return crc_;
  }
  void set_crc_seed(std::uint32_t seed) { crc_ = seed; }

  std::byte const* take(std::uint64_t n, const char* what) {
    if (n > remaining())
      throw format_error(msg("rlflow::DataProto::deserialize: truncated or corrupt input: reading ", what, " needs ", n,
                             " bytes at offset ", offset(), " but only ", remaining(),
                             " remain; the bytes were cut short or damaged, re-send or re-save them"));
    std::byte const* p = s_.data() + pos_;
    pos_ += static_cast<std::size_t>(n);
    return p;
  }
  template <class T>
  T pod(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::uint8_t u8(const char* what) { return pod<std::uint8_t>(what); }
  std::uint32_t u32(const char* what) { return pod<std::uint32_t>(what); }
  std::uint64_t u64(const char* what) { return pod<std::uint64_t>(what); }
  std::int64_t i64(const char* what) { return pod<std::int64_t>(what); }
  std::string key(const char* what) {
    std::uint32_t n = u32(what);
    auto const* p = take(n, what);
    return std::string(reinterpret_cast<char const*>(p), n);
  }
  std::string str(const char* what) {
    std::uint64_t n = u64(what);
    auto const* p = take(n, what);
    return std::string(reinterpret_cast<char const*>(p), static_cast<std::size_t>(n));
  }

 private:
  void flush_crc(std::byte const* upto) {
    std::byte const* from = s_.data() + crc_done_;
    crc_ = crc32c_update(crc_, from, static_cast<std::size_t>(upto - from));
    crc_done_ = static_cast<std::size_t>(upto - s_.data());
  }
  std::span<std::byte const> s_;
  std::size_t pos_ = 0;
  std::size_t base_ = 0;
  std::size_t crc_done_ = 0;
  std::uint32_t crc_ = ~0u;
};

}  // namespace rlflow::detail
