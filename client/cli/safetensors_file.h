// The .safetensors format (https://huggingface.co/docs/safetensors):
//
//   u64 little-endian N | N bytes of JSON header | data buffer
//
// The header is an object: tensor name -> {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]} with offsets relative to the data buffer,
// plus an optional "__metadata__" object of string -> string. Names are leaf
// paths joined with '.' (leaf_names.h); dtypes BOOL U8 I8 I16 I32 I64 F16
// BF16 F32 F64 map to tdstore's; tdstore records the dict's batch size in
// the metadata under kBatchSizeKey.
//
// The reader is strict: header length at most 100 MB and inside the file,
// strict JSON (json.h) with exactly those fields, every byte range the size
// its dtype and shape say, and the ranges together tiling the data buffer
// with no gap, overlap or trailing bytes.
#ifndef TDSTORE_CLIENT_CLI_SAFETENSORS_FILE_H_
#define TDSTORE_CLIENT_CLI_SAFETENSORS_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "client/cli/tensor_file.h"

namespace tdstore::cli {

// See tensor_file.h for the contracts.
std::unique_ptr<TensorFileReader> OpenSafetensors(const std::string& path);
std::unique_ptr<TensorFileWriter> CreateSafetensors(const std::string& path,
                                                    std::vector<TensorEntry> entries,
                                                    const Shape& batch_size);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_SAFETENSORS_FILE_H_
