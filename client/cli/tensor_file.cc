#include "client/cli/tensor_file.h"

#include "client/cli/args.h"
#include "client/cli/npz_file.h"
#include "client/cli/safetensors_file.h"

namespace tdstore::cli {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string TensorFileFormat(const std::string& path) {
  if (EndsWith(path, ".safetensors")) return "safetensors";
  if (EndsWith(path, ".npz")) return "npz";
  throw CliError("'" + path + "': the file name must end in .safetensors or .npz");
}

std::unique_ptr<TensorFileReader> OpenTensorFile(const std::string& path) {
  return TensorFileFormat(path) == "npz" ? OpenNpz(path) : OpenSafetensors(path);
}

std::unique_ptr<TensorFileWriter> CreateTensorFile(const std::string& path,
                                                   std::vector<TensorEntry> entries,
                                                   const Shape& batch_size) {
  return TensorFileFormat(path) == "npz" ? CreateNpz(path, std::move(entries), batch_size)
                                         : CreateSafetensors(path, std::move(entries), batch_size);
}

void CheckMatchesEntry(const HostTensor& tensor, const TensorEntry& entry) {
  if (tensor.dtype != entry.dtype || tensor.shape != entry.shape) {
    throw CliError("leaf '" + entry.path.str() +
                   "' was replaced while it was being read (its dtype or shape changed); "
                   "try again");
  }
}

}  // namespace tdstore::cli
