// at::ScalarType <-> tdstore::DType (common/dtype.h).
//
// tdstore::DType numbers equal the wire's tdstore.v1.DType, so this one table
// serves both the gRPC conversion (convert.h) and the CLI's .npy files. Kept
// free of gRPC and protobuf so the CLI can include it.
#ifndef TDSTORE_CLIENT_TORCH_SRC_SCALAR_TYPE_H_
#define TDSTORE_CLIENT_TORCH_SRC_SCALAR_TYPE_H_

#include <c10/core/ScalarType.h>

#include <optional>

#include "common/dtype.h"

namespace tdstore {

// nullopt for a torch dtype tdstore cannot store (quantized, bits, ...).
std::optional<DType> DTypeFromScalarType(at::ScalarType type);

// nullopt for kUnspecified or a number this client does not know.
std::optional<at::ScalarType> ScalarTypeFromDType(DType dtype);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_TORCH_SRC_SCALAR_TYPE_H_
