// Key: a leaf path, and how it is shown to people.
#include "tdstore/core.h"

namespace tdstore {

std::string Key::str() const {
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i > 0) out += '/';
    out += parts_[i];
  }
  return out;
}

}  // namespace tdstore
