// Zip archives (PKWARE APPNOTE 6.3), as far as .npz files need them.
//
// Reading: the central directory is the index of the archive; each member's
// local header is checked against it. Members may be stored or deflated,
// with zip64 sizes and offsets; encrypted or otherwise compressed members,
// multi-disk archives and bytes before or after the archive are rejected.
// Extract() checks each member's size and CRC-32.
//
// Writing: members are stored (not compressed), each written whole with its
// CRC-32 known up front, so no data descriptors; zip64 fields are added for
// members and offsets at or past 4 GiB, as the format requires.
//
// One thread at a time per reader or writer.
#ifndef TDSTORE_CLIENT_CLI_ZIP_ARCHIVE_H_
#define TDSTORE_CLIENT_CLI_ZIP_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli/mapped_file.h"
#include "client/cli/output_file.h"

namespace tdstore::cli {

struct ZipMember {
  std::string name;
  int method = 0;  // kZipStored or kZipDeflated
  uint32_t crc32 = 0;
  int64_t compressed_size = 0;
  int64_t size = 0;         // uncompressed
  int64_t data_offset = 0;  // of the (compressed) bytes in the archive
};

inline constexpr int kZipStored = 0;
inline constexpr int kZipDeflated = 8;

class ZipReader {
 public:
  // Reads the directory of the archive `file` (which must outlive this).
  // Throws CliError ("<path>: ...") for anything malformed or unsupported.
  explicit ZipReader(const MappedFile& file);

  const std::vector<ZipMember>& members() const { return members_; }
  // The archive's comment (tdstore keeps the batch size there).
  const std::string& comment() const { return comment_; }

  // Calls sink with the member's uncompressed bytes in order, in pieces,
  // then checks their count and CRC-32. CliError on corrupt data: the sink
  // may have seen bytes by then and must discard them.
  void Extract(const ZipMember& member,
               const std::function<void(const char* data, size_t size)>& sink) const;
  // The first min(max_bytes, size) uncompressed bytes, unchecked (for
  // reading a member's own header before extracting it).
  std::string ReadPrefix(const ZipMember& member, size_t max_bytes) const;

 private:
  // Inflates member bytes into sink until `limit` bytes came out; returns
  // how many did and whether the deflate stream ended exactly there.
  int64_t Inflate(const ZipMember& member, int64_t limit,
                  const std::function<void(const char*, size_t)>& sink, bool* ended) const;
  [[noreturn]] void Fail(const std::string& what) const;

  const MappedFile& file_;
  std::vector<ZipMember> members_;
  std::string comment_;
};

class ZipWriter {
 public:
  // Writes to `out` (which must outlive this). `zip64_from`: sizes and
  // offsets at or past it get zip64 fields; the format's limit 0xFFFFFFFF
  // unless a test wants zip64 on small archives.
  explicit ZipWriter(OutputFile* out, uint64_t zip64_from = 0xFFFFFFFFu);

  // Appends a stored member whose bytes are the pieces concatenated.
  // CliError for a name that is not UTF-8 or longer than 65535 bytes.
  void AddStored(const std::string& name, const std::vector<std::string_view>& pieces);
  // Writes the central directory and end records with `comment` (at most
  // 65535 bytes). The caller then commits the OutputFile.
  void Finish(const std::string& comment);

 private:
  struct Written {
    std::string name;
    uint32_t crc32;
    uint64_t size;
    uint64_t offset;  // of the local header
  };
  OutputFile* out_;
  uint64_t zip64_from_;
  uint16_t dos_time_ = 0, dos_date_ = 0;
  std::vector<Written> written_;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_ZIP_ARCHIVE_H_
