#include "client/cli/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "client/cli/args.h"
#include "client/cli/json.h"
#include "client/cli/little_endian.h"

namespace tdstore::cli {
namespace {

// Record signatures and fixed sizes (APPNOTE 4.3).
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr int64_t kLocalHeaderBytes = 30;
constexpr int64_t kCentralHeaderBytes = 46;
constexpr int64_t kEndBytes = 22;
constexpr int64_t kZip64EndBytes = 56;
constexpr int64_t kZip64LocatorBytes = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kMax16 = 0xFFFFu;

constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagDataDescriptor = 1 << 3;
constexpr uint16_t kFlagUtf8 = 1 << 11;

// Version 4.5: the first with zip64. Upper byte of "made by": 3 = Unix.
constexpr uint16_t kVersionNeeded = 45;
constexpr uint16_t kVersionMadeBy = (3 << 8) | 45;

// The zip64 "extended information" extra field holds, in this order, the
// 8-byte values of exactly those header fields that are saturated
// (0xFFFFFFFF): uncompressed size, compressed size, local header offset.
// `fields` lists pointers to those fields; each saturated one is replaced.
// Returns false if the extra data is malformed or too short.
bool ApplyZip64Extra(std::string_view extra, const std::vector<uint64_t*>& fields) {
  size_t pos = 0;
  while (pos < extra.size()) {
    if (extra.size() - pos < 4) return false;
    const auto id = static_cast<uint16_t>(LoadLE<2>(extra.data() + pos));
    const auto size = static_cast<size_t>(LoadLE<2>(extra.data() + pos + 2));
    pos += 4;
    if (extra.size() - pos < size) return false;
    if (id == kZip64ExtraId) {
      size_t at = 0;
      for (uint64_t* field : fields) {
        if (*field != kMax32) continue;
        if (size - at < 8) return false;
        *field = LoadLE<8>(extra.data() + pos + at);
        at += 8;
      }
    }
    pos += size;
  }
  // A saturated field with no zip64 value is an error too.
  return std::none_of(fields.begin(), fields.end(), [](uint64_t* f) { return *f == kMax32; });
}

// The current local time as MS-DOS time and date fields.
void DosNow(uint16_t* time_field, uint16_t* date_field) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const int year = std::max(local.tm_year + 1900, 1980);
  *time_field = static_cast<uint16_t>((local.tm_hour << 11) | (local.tm_min << 5) | (local.tm_sec / 2));
  *date_field = static_cast<uint16_t>(((year - 1980) << 9) | ((local.tm_mon + 1) << 5) | local.tm_mday);
}

uint32_t Crc32(uint32_t crc, const char* data, size_t size) {
  // zlib answers a null buffer with the initial CRC, not `crc`; an empty
  // tensor's data pointer may be null.
  if (size == 0) return crc;
  return static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(data), size));
}

}  // namespace

// ---- Reading -----------------------------------------------------------------

void ZipReader::Fail(const std::string& what) const { throw CliError(file_.path() + ": " + what); }

ZipReader::ZipReader(const MappedFile& file) : file_(file) {
  const int64_t size = file.size();
  const char* base = file.data();

  // The end record is the last thing in the file; its comment, of a length
  // it states, runs exactly to the end. Search backwards over the longest
  // comment possible.
  int64_t end_at = -1;
  for (int64_t at = size - kEndBytes; at >= 0 && at >= size - kEndBytes - kMax16; --at) {
    if (LoadLE<4>(base + at) == kEndSig &&
        at + kEndBytes + static_cast<int64_t>(LoadLE<2>(base + at + 20)) == size) {
      end_at = at;
      break;
    }
  }
  if (end_at < 0) Fail("not a zip archive (no end-of-directory record): truncated?");
  const char* end = base + end_at;
  comment_ = std::string(end + kEndBytes, LoadLE<2>(end + 20));
  uint64_t disk = LoadLE<2>(end + 4);
  uint64_t dir_disk = LoadLE<2>(end + 6);
  uint64_t entries_here = LoadLE<2>(end + 8);
  uint64_t entries = LoadLE<2>(end + 10);
  uint64_t dir_size = LoadLE<4>(end + 12);
  uint64_t dir_offset = LoadLE<4>(end + 16);
  int64_t dir_end = end_at;  // where the central directory must stop

  // Zip64: a locator right before the end record points to the zip64 end
  // record, whose 8-byte fields replace the saturated ones.
  const int64_t locator_at = end_at - kZip64LocatorBytes;
  if (locator_at >= 0 && LoadLE<4>(base + locator_at) == kZip64LocatorSig) {
    const uint64_t record_at = LoadLE<8>(base + locator_at + 8);
    if (LoadLE<4>(base + locator_at + 4) != 0 || LoadLE<4>(base + locator_at + 16) != 1) {
      Fail("multi-disk zip archives are not supported");
    }
    if (record_at > static_cast<uint64_t>(locator_at - kZip64EndBytes) ||
        locator_at < kZip64EndBytes || LoadLE<4>(base + record_at) != kZip64EndSig) {
      Fail("bad zip64 end-of-directory locator");
    }
    const char* record = base + record_at;
    const uint64_t record_size = LoadLE<8>(record + 4);
    if (record_size < kZip64EndBytes - 12 ||
        record_at + 12 + record_size != static_cast<uint64_t>(locator_at)) {
      Fail("bad zip64 end-of-directory record");
    }
    disk = LoadLE<4>(record + 16);
    dir_disk = LoadLE<4>(record + 20);
    entries_here = LoadLE<8>(record + 24);
    entries = LoadLE<8>(record + 32);
    dir_size = LoadLE<8>(record + 40);
    dir_offset = LoadLE<8>(record + 48);
    dir_end = static_cast<int64_t>(record_at);
  } else if (entries == kMax16 || dir_size == kMax32 || dir_offset == kMax32) {
    Fail("zip64 archive without its zip64 end-of-directory record: truncated?");
  }
  if (disk != 0 || dir_disk != 0 || entries_here != entries) {
    Fail("multi-disk zip archives are not supported");
  }
  if (dir_offset > static_cast<uint64_t>(dir_end) ||
      dir_size != static_cast<uint64_t>(dir_end) - dir_offset) {
    Fail("the central directory is not where the end record says: truncated or not a zip?");
  }

  // The central directory: one header per member.
  std::set<std::string> names;
  // Byte ranges members take, to find overlaps: local header -> data end.
  std::map<uint64_t, uint64_t> spans;
  int64_t at = static_cast<int64_t>(dir_offset);
  for (uint64_t i = 0; i < entries; ++i) {
    if (dir_end - at < kCentralHeaderBytes || LoadLE<4>(base + at) != kCentralHeaderSig) {
      Fail("bad central directory entry " + std::to_string(i));
    }
    const char* h = base + at;
    const auto flags = static_cast<uint16_t>(LoadLE<2>(h + 8));
    ZipMember member;
    member.method = static_cast<int>(LoadLE<2>(h + 10));
    member.crc32 = static_cast<uint32_t>(LoadLE<4>(h + 16));
    uint64_t compressed = LoadLE<4>(h + 20);
    uint64_t uncompressed = LoadLE<4>(h + 24);
    const int64_t name_len = static_cast<int64_t>(LoadLE<2>(h + 28));
    const int64_t extra_len = static_cast<int64_t>(LoadLE<2>(h + 30));
    const int64_t comment_len = static_cast<int64_t>(LoadLE<2>(h + 32));
    const uint64_t member_disk = LoadLE<2>(h + 34);
    uint64_t local_at = LoadLE<4>(h + 42);
    if (dir_end - at - kCentralHeaderBytes < name_len + extra_len + comment_len) {
      Fail("central directory entry " + std::to_string(i) + " runs past the directory");
    }
    member.name = std::string(h + kCentralHeaderBytes, static_cast<size_t>(name_len));
    const std::string where = "member '" + member.name + "': ";
    if (!ApplyZip64Extra(std::string_view(h + kCentralHeaderBytes + name_len, extra_len),
                         {&uncompressed, &compressed, &local_at})) {
      Fail(where + "bad zip64 extra field");
    }
    if (member_disk != 0 && member_disk != kMax16) Fail("multi-disk zip archives are not supported");
    if ((flags & kFlagEncrypted) != 0) Fail(where + "encrypted members are not supported");
    if (member.method != kZipStored && member.method != kZipDeflated) {
      Fail(where + "compression method " + std::to_string(member.method) +
           " is not supported (only stored and deflate)");
    }
    if (member.method == kZipStored && compressed != uncompressed) {
      Fail(where + "a stored member whose sizes differ");
    }
    if (!names.insert(member.name).second) Fail(where + "appears twice");
    at += kCentralHeaderBytes + name_len + extra_len + comment_len;

    // Its local header must agree with the directory.
    const int64_t limit = static_cast<int64_t>(dir_offset);  // data lies before the directory
    if (local_at > static_cast<uint64_t>(limit) ||
        limit - static_cast<int64_t>(local_at) < kLocalHeaderBytes ||
        LoadLE<4>(base + local_at) != kLocalHeaderSig) {
      Fail(where + "no local header where the directory says: truncated?");
    }
    const char* l = base + local_at;
    const int64_t local_name_len = static_cast<int64_t>(LoadLE<2>(l + 26));
    const int64_t local_extra_len = static_cast<int64_t>(LoadLE<2>(l + 28));
    const int64_t data_at =
        static_cast<int64_t>(local_at) + kLocalHeaderBytes + local_name_len + local_extra_len;
    if (data_at > limit ||
        std::string_view(l + kLocalHeaderBytes, local_name_len) != member.name ||
        static_cast<int>(LoadLE<2>(l + 8)) != member.method) {
      Fail(where + "the local header disagrees with the central directory");
    }
    if ((LoadLE<2>(l + 6) & kFlagDataDescriptor) == 0) {
      // Sizes and CRC are in the local header too (else they follow the
      // data, and the directory's copy is the one to trust).
      uint64_t local_compressed = LoadLE<4>(l + 18);
      uint64_t local_uncompressed = LoadLE<4>(l + 22);
      if (!ApplyZip64Extra(std::string_view(l + kLocalHeaderBytes + local_name_len,
                                            local_extra_len),
                           {&local_uncompressed, &local_compressed}) ||
          local_compressed != compressed || local_uncompressed != uncompressed ||
          LoadLE<4>(l + 14) != member.crc32) {
        Fail(where + "the local header's sizes or CRC disagree with the central directory");
      }
    }
    if (compressed > static_cast<uint64_t>(limit - data_at) || uncompressed >= static_cast<uint64_t>(INT64_MAX)) {
      Fail(where + "its data runs past the end of the member area: truncated?");
    }
    member.compressed_size = static_cast<int64_t>(compressed);
    member.size = static_cast<int64_t>(uncompressed);
    member.data_offset = data_at;
    spans[local_at] = static_cast<uint64_t>(data_at) + compressed;
    members_.push_back(std::move(member));
  }
  if (at != dir_end) Fail("unexpected bytes after the central directory");
  uint64_t previous_end = 0;
  for (const auto& [begin, span_end] : spans) {
    if (begin < previous_end) Fail("members overlap one another");
    previous_end = span_end;
  }
}

int64_t ZipReader::Inflate(const ZipMember& member, int64_t limit,
                           const std::function<void(const char*, size_t)>& sink,
                           bool* ended) const {
  z_stream stream{};
  // Negative window bits: raw deflate data, as zip stores it.
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) Fail("cannot start zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, inflateEnd);
  const auto* in = reinterpret_cast<const Bytef*>(file_.data() + member.data_offset);
  int64_t in_left = member.compressed_size;
  std::vector<char> buffer(1 << 20);
  int64_t produced = 0;
  *ended = false;
  while (produced < limit) {
    if (stream.avail_in == 0 && in_left > 0) {
      stream.next_in = const_cast<Bytef*>(in);
      stream.avail_in = static_cast<uInt>(std::min<int64_t>(in_left, UINT_MAX));
      in += stream.avail_in;
      in_left -= stream.avail_in;
    }
    const int64_t want = std::min<int64_t>(static_cast<int64_t>(buffer.size()), limit - produced);
    stream.next_out = reinterpret_cast<Bytef*>(buffer.data());
    stream.avail_out = static_cast<uInt>(want);
    const int status = inflate(&stream, Z_NO_FLUSH);
    const int64_t got = want - stream.avail_out;
    if (got > 0) sink(buffer.data(), static_cast<size_t>(got));
    produced += got;
    if (status == Z_STREAM_END) {
      // The stream must also use up exactly the member's compressed bytes.
      *ended = stream.avail_in == 0 && in_left == 0;
      if (!*ended) Fail("member '" + member.name + "': bytes after the end of its deflate data");
      break;
    }
    if (status != Z_OK && !(status == Z_BUF_ERROR && got > 0)) {
      Fail("member '" + member.name + "': corrupt deflate data" +
           (stream.msg != nullptr ? std::string(" (") + stream.msg + ")" : std::string()));
    }
  }
  return produced;
}

void ZipReader::Extract(const ZipMember& member,
                        const std::function<void(const char*, size_t)>& sink) const {
  uint32_t crc = 0;
  int64_t produced = 0;
  auto checked_sink = [&](const char* data, size_t size) {
    crc = Crc32(crc, data, size);
    sink(data, size);
  };
  if (member.method == kZipStored) {
    // In pieces, so a huge member is never touched all at once.
    constexpr int64_t kPiece = 64 << 20;
    for (int64_t at = 0; at < member.size; at += kPiece) {
      const int64_t n = std::min(kPiece, member.size - at);
      checked_sink(file_.data() + member.data_offset + at, static_cast<size_t>(n));
    }
    produced = member.size;
  } else {
    bool ended = false;
    // One byte past the size: a stream that would go on is caught.
    produced = Inflate(member, member.size + 1, checked_sink, &ended);
    if (produced != member.size || !ended) {
      Fail("member '" + member.name + "': its deflate data " +
           (produced > member.size ? "holds more" : "ends early, at " + std::to_string(produced)) +
           " than the " + std::to_string(member.size) + " bytes the directory says");
    }
  }
  if (crc != member.crc32) {
    Fail("member '" + member.name + "': CRC-32 mismatch (the data is corrupt)");
  }
}

std::string ZipReader::ReadPrefix(const ZipMember& member, size_t max_bytes) const {
  const int64_t limit = std::min<int64_t>(static_cast<int64_t>(max_bytes), member.size);
  if (member.method == kZipStored) {
    return std::string(file_.data() + member.data_offset, static_cast<size_t>(limit));
  }
  std::string prefix;
  bool ended = false;
  Inflate(member, limit, [&](const char* data, size_t size) { prefix.append(data, size); },
          &ended);
  return prefix;
}

// ---- Writing -----------------------------------------------------------------

ZipWriter::ZipWriter(OutputFile* out, uint64_t zip64_from) : out_(out), zip64_from_(zip64_from) {
  DosNow(&dos_time_, &dos_date_);
}

void ZipWriter::AddStored(const std::string& name, const std::vector<std::string_view>& pieces) {
  if (name.size() > kMax16) throw CliError("zip member name longer than 65535 bytes: " + name);
  if (!IsValidUtf8(name)) throw CliError("zip member name is not UTF-8: " + name);
  const bool ascii =
      std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  uint32_t crc = 0;
  uint64_t size = 0;
  for (std::string_view piece : pieces) {
    crc = Crc32(crc, piece.data(), piece.size());
    size += piece.size();
  }
  const uint64_t offset = static_cast<uint64_t>(out_->offset());
  const bool zip64 = size >= zip64_from_;

  std::string header;
  AppendLE<4>(kLocalHeaderSig, &header);
  AppendLE<2>(kVersionNeeded, &header);
  AppendLE<2>(ascii ? 0 : kFlagUtf8, &header);
  AppendLE<2>(kZipStored, &header);
  AppendLE<2>(dos_time_, &header);
  AppendLE<2>(dos_date_, &header);
  AppendLE<4>(crc, &header);
  AppendLE<4>(zip64 ? kMax32 : size, &header);  // compressed
  AppendLE<4>(zip64 ? kMax32 : size, &header);  // uncompressed
  AppendLE<2>(name.size(), &header);
  AppendLE<2>(zip64 ? 20 : 0, &header);
  header += name;
  if (zip64) {
    // In a local header the zip64 field holds both sizes, always.
    AppendLE<2>(kZip64ExtraId, &header);
    AppendLE<2>(16, &header);
    AppendLE<8>(size, &header);
    AppendLE<8>(size, &header);
  }
  out_->Write(header);
  for (std::string_view piece : pieces) out_->Write(piece);
  written_.push_back({name, crc, size, offset});
}

void ZipWriter::Finish(const std::string& comment) {
  if (comment.size() > kMax16) throw CliError("zip comment longer than 65535 bytes");
  const uint64_t dir_offset = static_cast<uint64_t>(out_->offset());
  for (const Written& w : written_) {
    const bool big = w.size >= zip64_from_;
    const bool far = w.offset >= zip64_from_;
    std::string extra;
    if (big || far) {
      AppendLE<2>(kZip64ExtraId, &extra);
      AppendLE<2>((big ? 16 : 0) + (far ? 8 : 0), &extra);
      if (big) {
        AppendLE<8>(w.size, &extra);  // uncompressed
        AppendLE<8>(w.size, &extra);  // compressed
      }
      if (far) AppendLE<8>(w.offset, &extra);
    }
    const bool ascii = std::all_of(w.name.begin(), w.name.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    std::string h;
    AppendLE<4>(kCentralHeaderSig, &h);
    AppendLE<2>(kVersionMadeBy, &h);
    AppendLE<2>(kVersionNeeded, &h);
    AppendLE<2>(ascii ? 0 : kFlagUtf8, &h);
    AppendLE<2>(kZipStored, &h);
    AppendLE<2>(dos_time_, &h);
    AppendLE<2>(dos_date_, &h);
    AppendLE<4>(w.crc32, &h);
    AppendLE<4>(big ? kMax32 : w.size, &h);
    AppendLE<4>(big ? kMax32 : w.size, &h);
    AppendLE<2>(w.name.size(), &h);
    AppendLE<2>(extra.size(), &h);
    AppendLE<2>(0, &h);                    // comment length
    AppendLE<2>(0, &h);                    // disk
    AppendLE<2>(0, &h);                    // internal attributes
    AppendLE<4>(uint64_t{0100644} << 16, &h);  // external: a regular file, rw-r--r--
    AppendLE<4>(far ? kMax32 : w.offset, &h);
    h += w.name;
    h += extra;
    out_->Write(h);
  }
  const uint64_t dir_end = static_cast<uint64_t>(out_->offset());
  const uint64_t dir_size = dir_end - dir_offset;
  const uint64_t count = written_.size();
  const bool zip64 = count >= kMax16 || dir_size >= zip64_from_ || dir_offset >= zip64_from_;

  std::string tail;
  if (zip64) {
    AppendLE<4>(kZip64EndSig, &tail);
    AppendLE<8>(kZip64EndBytes - 12, &tail);  // size of the rest of this record
    AppendLE<2>(kVersionMadeBy, &tail);
    AppendLE<2>(kVersionNeeded, &tail);
    AppendLE<4>(0, &tail);  // this disk
    AppendLE<4>(0, &tail);  // disk of the directory
    AppendLE<8>(count, &tail);
    AppendLE<8>(count, &tail);
    AppendLE<8>(dir_size, &tail);
    AppendLE<8>(dir_offset, &tail);
    AppendLE<4>(kZip64LocatorSig, &tail);
    AppendLE<4>(0, &tail);  // disk of the zip64 end record
    AppendLE<8>(dir_end, &tail);
    AppendLE<4>(1, &tail);  // disks in all
  }
  AppendLE<4>(kEndSig, &tail);
  AppendLE<2>(0, &tail);
  AppendLE<2>(0, &tail);
  AppendLE<2>(zip64 ? kMax16 : count, &tail);
  AppendLE<2>(zip64 ? kMax16 : count, &tail);
  AppendLE<4>(zip64 ? kMax32 : dir_size, &tail);
  AppendLE<4>(zip64 ? kMax32 : dir_offset, &tail);
  AppendLE<2>(comment.size(), &tail);
  tail += comment;
  out_->Write(tail);
}

}  // namespace tdstore::cli
