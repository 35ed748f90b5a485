// Built alone into libtdstore_index_text (see index_text.h): must never
// include tdstore/client.h.
#include "client/cli/index_text.h"

#include <exception>
#include <utility>

#include "common/index.h"

namespace tdstore::cli {
namespace {

IndexTextItem Convert(const plan::IndexTerm& term) {
  IndexTextItem item;
  switch (term.kind) {
    case plan::IndexTerm::Kind::kInt:
      item.kind = IndexTextItem::Kind::kInt;
      item.value = term.value;
      break;
    case plan::IndexTerm::Kind::kSlice:
      item.kind = IndexTextItem::Kind::kSlice;
      item.start = term.start;
      item.stop = term.stop;
      item.step = term.step;
      break;
    case plan::IndexTerm::Kind::kPositions:
      item.kind = IndexTextItem::Kind::kPositions;
      item.positions = term.positions;
      item.shape.assign(term.positions_shape.begin(), term.positions_shape.end());
      break;
    case plan::IndexTerm::Kind::kMask:
      item.kind = IndexTextItem::Kind::kMask;
      item.mask = term.mask;
      break;
    case plan::IndexTerm::Kind::kEllipsis:
      item.kind = IndexTextItem::Kind::kEllipsis;
      break;
  }
  return item;
}

}  // namespace

IndexText ParseIndexArgText(const std::string& text) noexcept {
  IndexText out;
  try {
    absl::StatusOr<plan::IndexSpec> spec = plan::ParseIndexText(text);
    if (!spec.ok()) {
      out.error = std::string(spec.status().message());
      return out;
    }
    out.items.reserve(spec->size());
    for (const plan::IndexTerm& term : *spec) out.items.push_back(Convert(term));
    out.ok = true;
  } catch (const std::exception& e) {
    out = IndexText();
    out.error = e.what();
  }
  return out;
}

}  // namespace tdstore::cli
