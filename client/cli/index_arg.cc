#include "client/cli/index_arg.h"

#include <cstring>
#include <vector>

#include "client/cli/index_text.h"
#include "client/cli/npy_file.h"
#include "common/index.h"

namespace tdstore::cli {
namespace {

core::IndexTerm ToCoreTerm(const plan::IndexTerm& term) {
  switch (term.kind) {
    case plan::IndexTerm::Kind::kInt:
      return core::IndexTerm::Int(term.value);
    case plan::IndexTerm::Kind::kSlice:
      return core::IndexTerm::Of(Slice(term.start, term.stop, term.step));
    case plan::IndexTerm::Kind::kPositions:
      return core::IndexTerm::Positions(term.positions, term.positions_shape);
    case plan::IndexTerm::Kind::kMask:
      return core::IndexTerm::Mask(term.mask);
    case plan::IndexTerm::Kind::kEllipsis:
      break;
  }
  return core::IndexTerm::Of(Ellipsis{});
}

// The file's integers, widened to int64. .npy data is little-endian, as
// this machine is (npy_header.h rejects big-endian files).
template <typename T>
std::vector<int64_t> Widen(const HostTensor& tensor) {
  std::vector<int64_t> values(static_cast<size_t>(tensor.byte_size) / sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    T value;
    std::memcpy(&value, tensor.data + i * sizeof(T), sizeof(T));
    values[i] = value;
  }
  return values;
}

}  // namespace

core::Index ParseIndexArg(const std::string& text) {
  absl::StatusOr<plan::IndexSpec> spec = ParseIndexText(text);
  if (!spec.ok()) {
    throw UsageError("bad --index '" + text + "': " + std::string(spec.status().message()));
  }
  core::Index index;
  index.reserve(spec->size());
  for (const plan::IndexTerm& term : *spec) index.push_back(ToCoreTerm(term));
  return index;
}

core::Index ReadIndexFile(const std::string& path) {
  const MappedNpy file(path);
  const HostTensor& tensor = file.tensor();
  if (tensor.dtype == DType::kBool) {
    if (tensor.shape.size() != 1) {
      throw CliError(path + ": a bool mask must be 1-D, this one has " +
                     std::to_string(tensor.shape.size()) + " dims");
    }
    // NumPy's bools are one byte each, 0 or 1.
    std::vector<bool> mask(static_cast<size_t>(tensor.byte_size));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = tensor.data[i] != 0;
    return {core::IndexTerm::Mask(std::move(mask))};
  }
  std::vector<int64_t> positions;
  switch (tensor.dtype) {
    case DType::kUInt8:
      positions = Widen<uint8_t>(tensor);
      break;
    case DType::kInt8:
      positions = Widen<int8_t>(tensor);
      break;
    case DType::kInt16:
      positions = Widen<int16_t>(tensor);
      break;
    case DType::kInt32:
      positions = Widen<int32_t>(tensor);
      break;
    case DType::kInt64:
      positions = Widen<int64_t>(tensor);
      break;
    case DType::kUInt16:
      positions = Widen<uint16_t>(tensor);
      break;
    case DType::kUInt32:
      positions = Widen<uint32_t>(tensor);
      break;
    default:
      throw CliError(path + ": an index file holds integer positions or a 1-D bool mask, not " +
                     std::string(DTypeName(tensor.dtype)));
  }
  return {core::IndexTerm::Positions(std::move(positions), tensor.shape)};
}

std::optional<core::Index> IndexOption(const CommandLine& line) {
  std::optional<std::string> text = line.option("index");
  std::optional<std::string> file = line.option("index-file");
  if (text && file) throw UsageError("give --index or --index-file, not both");
  if (text) return ParseIndexArg(*text);
  if (file) return ReadIndexFile(*file);
  return std::nullopt;
}

}  // namespace tdstore::cli
