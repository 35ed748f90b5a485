// Client (libtorch): the dict-level calls, over core::Client.
#include "client/torch/src/tensor_bytes.h"
#include "tdstore/client.h"

namespace tdstore {

Client::Client(const std::string& address, ClientOptions options) : core_(address, options) {}

const std::string& Client::address() const { return core_.address(); }

Dict Client::create(const std::string& name, std::vector<int64_t> batch_size,
                    CreateOptions options) {
  return Dict(core_.create(name, batch_size, {}, options));
}

Dict Client::create(const std::string& name, std::vector<int64_t> batch_size,
                    const std::vector<LeafSpec>& schema, CreateOptions options) {
  std::vector<core::LeafSpec> specs;
  specs.reserve(schema.size());
  for (const LeafSpec& spec : schema) {
    specs.push_back({spec.path, DTypeOf(spec.dtype, spec.path), spec.element_shape});
  }
  return Dict(core_.create(name, batch_size, specs, options));
}

Dict Client::open(const std::string& name) { return Dict(core_.open(name)); }

std::vector<std::string> Client::list() { return core_.list(); }

Client::ServerInfo Client::server_info() { return core_.server_info(); }

void Client::drop(const std::string& name) { core_.drop(name); }

void Client::rename(const std::string& name, const std::string& new_name) {
  core_.rename(name, new_name);
}

Dict Client::open_handle(const std::string& handle, ClientOptions options) {
  return Dict(core::Client::open_handle(handle, options));
}

}  // namespace tdstore
