// core::Dict: the dict's size, lock, attributes and counters.
#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/schema_copies.h"

#include <functional>

namespace tdstore::core {

namespace {

// A lock or attribute change moves the schema version. tdstored answers it
// with the schema after it, which the watched copy takes (read-your-writes);
// a call that failed may have changed it anyway, and then the copy is not
// trusted until the watch reports a newer version.
DictInfo ChangeSchema(Client::Impl& impl, const std::string& name, const std::string& id,
                      const std::function<void(v1::DictInfo*)>& call) {
  v1::DictInfo info;
  try {
    call(&info);
  } catch (const Error&) {
    if (impl.schemas != nullptr) impl.schemas->Unsure(name, id);
    throw;
  }
  DictInfo out = FromProto(info);
  if (impl.schemas != nullptr) impl.schemas->Known(name, id, out);
  return out;
}

}  // namespace

DictInfo Dict::resize(int64_t rows) const {
  impl_->writes_behind.Settle();
  v1::ResizeDictRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_rows(rows);
  // Resizing to the size asked for again leaves the same result.
  return ChangeSchema(*impl_, name_, id_, [&](v1::DictInfo* info) {
    impl_->Call(&v1::TdStore::Stub::ResizeDict, request, info, Retrier::kIdempotent);
  });
}

DictInfo Dict::set_locked(bool locked) const {
  impl_->writes_behind.Settle();
  v1::SetLockedRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_locked(locked);
  return ChangeSchema(*impl_, name_, id_, [&](v1::DictInfo* info) {
    impl_->Call(&v1::TdStore::Stub::SetLocked, request, info, Retrier::kIdempotent);
  });
}

DictInfo Dict::update_attrs(const std::map<std::string, std::string>& set,
                            const std::vector<std::string>& remove) const {
  impl_->writes_behind.Settle();
  v1::UpdateAttrsRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.mutable_set()->insert(set.begin(), set.end());
  for (const std::string& name : remove) request.add_remove(name);
  // Setting and removing the same names again leaves the same result.
  return ChangeSchema(*impl_, name_, id_, [&](v1::DictInfo* info) {
    impl_->Call(&v1::TdStore::Stub::UpdateAttrs, request, info, Retrier::kIdempotent);
  });
}

int64_t Dict::counter_add(const std::string& name, int64_t delta) const {
  impl_->writes_behind.Settle();
  v1::CounterRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_name(name);
  request.set_add(delta);
  v1::CounterResponse response;
  impl_->Call(&v1::TdStore::Stub::Counter, request, &response,
              Retrier::kOnlyIfNothingApplied);
  return response.value();
}

int64_t Dict::counter_get(const std::string& name) const {
  impl_->writes_behind.Settle();
  v1::CounterRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_name(name);
  request.set_get(true);
  v1::CounterResponse response;
  impl_->Call(&v1::TdStore::Stub::Counter, request, &response, Retrier::kIdempotent);
  return response.value();
}

bool Dict::counter_cas(const std::string& name, int64_t expected, int64_t new_value,
                       int64_t* current) const {
  impl_->writes_behind.Settle();
  v1::CounterRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_name(name);
  request.mutable_cas()->set_expected(expected);
  request.mutable_cas()->set_new_value(new_value);
  v1::CounterResponse response;
  impl_->Call(&v1::TdStore::Stub::Counter, request, &response,
              Retrier::kOnlyIfNothingApplied);
  if (current != nullptr) *current = response.value();
  return response.swapped();
}

}  // namespace tdstore::core
