// The .npz format of NumPy's np.savez / np.savez_compressed: a zip archive
// (zip_archive.h) with one .npy file (npy_header.h) per array, the member
// "KEY.npy" holding the array np.load(...)["KEY"] returns.
//
// Keys are leaf paths joined with '/' (leaf_names.h): member "next/obs.npy"
// <-> leaf next/obs. Members may be stored or deflated (np.savez_compressed)
// and are written stored. tdstore records the dict's batch size in the
// archive comment as "tdstore.batch_size=100,4", where NumPy does not look.
#ifndef TDSTORE_CLIENT_CLI_NPZ_FILE_H_
#define TDSTORE_CLIENT_CLI_NPZ_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "client/cli/tensor_file.h"

namespace tdstore::cli {

// See tensor_file.h for the contracts.
std::unique_ptr<TensorFileReader> OpenNpz(const std::string& path);
std::unique_ptr<TensorFileWriter> CreateNpz(const std::string& path,
                                            std::vector<TensorEntry> entries,
                                            const Shape& batch_size);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_NPZ_FILE_H_
