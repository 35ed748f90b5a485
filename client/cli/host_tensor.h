// A tensor as the CLI holds it between a file and the store: a dtype, a
// shape and its contiguous C-order little-endian bytes, which are either
// viewed in place (in a mapped file) or owned.
//
// The CLI never links libtorch: the core (tdstore/core.h) moves bytes, and
// this is all the CLI needs to name them. put/import send a HostTensor's
// bytes in place (LeafOf); export/cp receive into HostTensors allocated
// once at their final size (HostTensorSink).
//
// One thread at a time per object.
#ifndef TDSTORE_CLIENT_CLI_HOST_TENSOR_H_
#define TDSTORE_CLIENT_CLI_HOST_TENSOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/dtype.h"
#include "common/shape.h"
#include "tdstore/core.h"

namespace tdstore::cli {

struct HostTensor {
  DType dtype = DType::kUnspecified;
  Shape shape;
  // byte_size bytes (element count × dtype size): owned's, or memory of a
  // mapped file that must outlive this.
  const char* data = nullptr;
  int64_t byte_size = 0;
  // Set when this tensor owns its bytes; null for a view.
  std::unique_ptr<char[]> owned;

  // A view of `byte_size` bytes at `data` (the caller has checked the size).
  static HostTensor View(DType dtype, Shape shape, const char* data, int64_t byte_size);
  // Owned, uninitialized bytes for `byte_size`. CliError naming `what` if
  // they cannot be allocated.
  static HostTensor Allocate(DType dtype, Shape shape, int64_t byte_size,
                             const std::string& what);

  // The owned bytes, to fill; null for a view.
  char* mutable_data() { return owned.get(); }
};

// The core's description of `tensor` as leaf `path`: its bytes are sent in
// place and must stay valid until the write returns.
core::LeafData LeafOf(const Key& path, const HostTensor& tensor);

// A read's destination: each leaf into a HostTensor of its own, allocated
// once at its final size. A retried read starts over with none.
class HostTensorSink : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) override;
  void* Leaf(const core::LeafMeta& leaf) override;

  // What the read received, by path; the caller may move tensors out.
  std::map<Key, HostTensor>& leaves() { return leaves_; }

 private:
  std::map<Key, HostTensor> leaves_;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_HOST_TENSOR_H_
