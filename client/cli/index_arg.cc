#include "client/cli/index_arg.h"

#include <ATen/ATen.h>

#include <vector>

#include "client/cli/index_text.h"
#include "client/cli/npy_file.h"

namespace tdstore::cli {
namespace {

IndexTerm ToTerm(const IndexTextItem& item) {
  switch (item.kind) {
    case IndexTextItem::Kind::kInt:
      return IndexTerm(item.value);
    case IndexTextItem::Kind::kSlice:
      return IndexTerm(Slice(item.start, item.stop, item.step));
    case IndexTextItem::Kind::kPositions: {
      at::Tensor positions = at::tensor(at::ArrayRef<int64_t>(item.positions),
                                        at::TensorOptions().dtype(at::kLong));
      return IndexTerm(positions.reshape(item.shape));
    }
    case IndexTextItem::Kind::kMask: {
      at::Tensor mask = at::empty({static_cast<int64_t>(item.mask.size())},
                                  at::TensorOptions().dtype(at::kBool));
      bool* data = mask.data_ptr<bool>();
      for (size_t i = 0; i < item.mask.size(); ++i) data[i] = item.mask[i];
      return IndexTerm(mask);
    }
    case IndexTextItem::Kind::kEllipsis:
      break;
  }
  return IndexTerm(Ellipsis{});
}

}  // namespace

Index ParseIndexArg(const std::string& text) {
  IndexText parsed = ParseIndexArgText(text);
  if (!parsed.ok) throw UsageError("bad --index '" + text + "': " + parsed.error);
  std::vector<IndexTerm> terms;
  terms.reserve(parsed.items.size());
  for (const IndexTextItem& item : parsed.items) terms.push_back(ToTerm(item));
  return Index(std::move(terms));
}

Index ReadIndexFile(const std::string& path) {
  const MappedNpy file(path);
  const at::Tensor& tensor = file.tensor();
  const at::ScalarType type = tensor.scalar_type();
  if (type != at::kBool && !at::isIntegralType(type, /*includeBool=*/false)) {
    throw CliError(path + ": an index file holds integer positions or a 1-D bool mask, not " +
                   std::string(c10::toString(type)));
  }
  if (type == at::kBool && tensor.dim() != 1) {
    throw CliError(path + ": a bool mask must be 1-D, this one has " +
                   std::to_string(tensor.dim()) + " dims");
  }
  // A copy: the mapping ends with `file`.
  return Index(IndexTerm(tensor.clone()));
}

std::optional<Index> IndexOption(const CommandLine& line) {
  std::optional<std::string> text = line.option("index");
  std::optional<std::string> file = line.option("index-file");
  if (text && file) throw UsageError("give --index or --index-file, not both");
  if (text) return ParseIndexArg(*text);
  if (file) return ReadIndexFile(*file);
  return std::nullopt;
}

}  // namespace tdstore::cli
