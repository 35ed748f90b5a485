// core::Client: the channel to one tdstored, and the dict-level calls.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <unistd.h>

#include <algorithm>

#include "client/core/src/address.h"
#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/errors.h"
#include "common/protocol_limits.h"
#include "client/core/src/handle.h"

namespace tdstore::core {
namespace {

// "host:port" and "unix:///path" are both gRPC targets already; anything
// else is most likely a typo, better caught here than as a DNS failure.
void CheckAddress(const std::string& address) {
  const bool unix_socket = address.rfind("unix:", 0) == 0 && address.size() > 5;
  const bool host_port = address.find(':') != std::string::npos &&
                         address.back() != ':' && address.front() != ':';
  if (!unix_socket && !host_port) {
    throw Error(StatusCode::kInvalidArgument,
                "bad tdstored address '" + address + "': expected host:port or unix:///path");
  }
}

void CheckOptions(const std::string& address, const ClientOptions& options) {
  // Loopback and unix-socket addresses never leave this machine.
  const bool local = IsLoopbackTcp(address) || !UnixSocketPath(address).empty();
  if (!options.token.empty() && !options.tls && !local) {
    throw Error(StatusCode::kInvalidArgument,
                "refusing to send a token in the clear to " + address +
                    ": enable TLS (ClientOptions::tls) or connect over loopback");
  }
  if (options.tls_client_cert_pem.empty() != options.tls_client_key_pem.empty()) {
    throw Error(StatusCode::kInvalidArgument,
                "tls_client_cert_pem and tls_client_key_pem go together");
  }
  if (options.retry_for.count() < 0) {
    throw Error(StatusCode::kInvalidArgument, "retry_for must not be negative");
  }
  if (options.chunk_bytes < 1 || options.chunk_bytes > kMaxChunkBytes) {
    throw Error(StatusCode::kInvalidArgument,
                "chunk_bytes must be in [1, 1 MiB], got " + std::to_string(options.chunk_bytes));
  }
  if (options.timeout.count() <= 0) {
    throw Error(StatusCode::kInvalidArgument, "timeout must be positive");
  }
}

std::shared_ptr<grpc::ChannelCredentials> MakeCredentials(const ClientOptions& options) {
  if (!options.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = options.tls_root_ca_pem;
  tls.pem_private_key = options.tls_client_key_pem;
  tls.pem_cert_chain = options.tls_client_cert_pem;
  return grpc::SslCredentials(tls);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxReceiveMessageBytes);
  args.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // A restarted daemon is found again within about a second, not gRPC's
  // default of up to two minutes of backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(address, MakeCredentials(options), args);
}

}  // namespace

Client::Impl::Impl(std::string address_in, ClientOptions options_in)
    : address(std::move(address_in)), options(options_in) {
  CheckAddress(address);
  CheckOptions(address, options);
  channel = MakeChannel(address, options);
  stub = v1::TdStore::NewStub(channel);
  // gRPC keeps the names' pointers: strings that live as long as the process.
  static const std::string* const kReadLeaves =
      new std::string(std::string("/") + v1::TdStore::service_full_name() + "/ReadLeaves");
  static const std::string* const kWriteLeaves =
      new std::string(std::string("/") + v1::TdStore::service_full_name() + "/WriteLeaves");
  static const std::string* const kWriteLeavesShared = new std::string(
      std::string("/") + v1::TdStore::service_full_name() + "/WriteLeavesShared");
  read_leaves_raw = std::make_unique<grpc::internal::RpcMethod>(
      kReadLeaves->c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel);
  write_leaves_raw = std::make_unique<grpc::internal::RpcMethod>(
      kWriteLeaves->c_str(), grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
  write_leaves_shared_raw = std::make_unique<grpc::internal::RpcMethod>(
      kWriteLeavesShared->c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  static const std::string* const kReadLeavesShared = new std::string(
      std::string("/") + v1::TdStore::service_full_name() + "/ReadLeavesShared");
  read_leaves_shared_raw = std::make_unique<grpc::internal::RpcMethod>(
      kReadLeavesShared->c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  if (options.watch_schemas) schemas = std::make_unique<SchemaCopies>(this);
}

void Client::Impl::Prepare(grpc::ClientContext* context,
                           std::chrono::system_clock::time_point deadline) const {
  context->set_deadline(deadline);
  if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
}

void Client::Impl::Fail(const grpc::Status& status) const {
  throw ErrorFromStatus(status, address);
}

void Client::Impl::AwaitConnected(const Retrier& retry) const {
  if (channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return;
  channel->WaitForConnected(retry.retry_until());
}

namespace {

// A process forked from this one inherits the Impl's memory but none of its
// threads (gRPC's pollers and timers). Destroying it there would
// join threads that do not exist and touch gRPC state the parent still
// uses (a crash, or the parent's next call hanging). So an Impl is only
// ever destroyed by the process that made it; a forked child leaks it.
std::shared_ptr<Client::Impl> MakeImpl(const std::string& address,
                                       const ClientOptions& options) {
  const pid_t owner = getpid();
  return std::shared_ptr<Client::Impl>(new Client::Impl(address, options),
                                       [owner](Client::Impl* impl) {
                                         if (getpid() == owner) delete impl;
                                       });
}

}  // namespace

Client::Client(const std::string& address, ClientOptions options)
    : impl_(MakeImpl(address, options)) {}

const std::string& Client::address() const { return impl_->address; }

const ClientOptions& Client::options() const { return impl_->options; }

namespace {

// A create or open answers with the dict's whole schema: the watched copy
// starts from it (its watch starts now), so the caller's next describe,
// batch_size or keys costs no second round trip. The rules are those of a
// describe's answer (SchemaCopies::Known).
void SeedSchemaCopy(Client::Impl& impl, const v1::DictInfo& info) {
  if (impl.schemas == nullptr) return;
  impl.schemas->Trusted(info.name(), info.id());
  impl.schemas->Known(info.name(), info.id(), FromProto(info));
}

}  // namespace

Dict Client::create(const std::string& name, const std::vector<int64_t>& batch_size,
                    const std::vector<LeafSpec>& schema, const CreateOptions& options) const {
  impl_->writes_behind.Settle();
  v1::CreateDictRequest request;
  request.set_name(name);
  request.mutable_batch_shape()->Assign(batch_size.begin(), batch_size.end());
  request.mutable_options()->set_rows_per_block(options.rows_per_block);
  request.mutable_options()->set_part_bytes(options.part_bytes);
  request.mutable_options()->set_layout(
      options.layout == Layout::kRecord ? v1::DICT_LAYOUT_RECORD : v1::DICT_LAYOUT_LEAVES);
  for (const LeafSpec& spec : schema) {
    v1::LeafSpec* leaf = request.add_leaves();
    ToProto(spec.path, leaf->mutable_path());
    leaf->set_dtype(ToProtoDType(spec.dtype, spec.path));
    leaf->mutable_element_shape()->Assign(spec.element_shape.begin(), spec.element_shape.end());
    leaf->set_kind(static_cast<v1::LeafKind>(spec.kind));
  }
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::CreateDict, request, &info, Retrier::kOnlyIfNothingApplied);
  SeedSchemaCopy(*impl_, info);
  return Dict(impl_, info.name(), info.id());
}

Dict Client::open(const std::string& name) const {
  impl_->writes_behind.Settle();
  // Describing checks that the dict exists and learns its id for handle().
  v1::DescribeDictRequest request;
  request.set_name(name);
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::DescribeDict, request, &info, Retrier::kIdempotent);
  SeedSchemaCopy(*impl_, info);
  return Dict(impl_, info.name(), info.id());
}

std::vector<std::string> Client::list() const {
  impl_->writes_behind.Settle();
  v1::ListDictsResponse response;
  impl_->Call(&v1::TdStore::Stub::ListDicts, v1::ListDictsRequest(), &response,
              Retrier::kIdempotent);
  std::vector<std::string> names(response.names().begin(), response.names().end());
  std::sort(names.begin(), names.end());
  return names;
}

ServerInfo Client::server_info() const {
  impl_->writes_behind.Settle();
  v1::ServerInfo response;
  impl_->Call(&v1::TdStore::Stub::GetServerInfo, v1::GetServerInfoRequest(), &response,
              Retrier::kIdempotent);
  return ServerInfo{response.version(), response.backend(), response.redis_masters(),
                    response.redis_ok()};
}

bool Client::shares_memory() const { return impl_->SharedMemory() != nullptr; }

void Client::settle() const { impl_->writes_behind.Settle(); }

void Client::drop(const std::string& name) const {
  impl_->writes_behind.Settle();
  v1::DeleteDictRequest request;
  request.set_name(name);
  v1::DeleteDictResponse response;
  // Whatever the outcome, copies under this name are no longer trusted.
  if (impl_->schemas != nullptr) impl_->schemas->NameEnded(name);
  impl_->Call(&v1::TdStore::Stub::DeleteDict, request, &response, Retrier::kOnlyIfNothingApplied);
}

void Client::rename(const std::string& name, const std::string& new_name) const {
  impl_->writes_behind.Settle();
  v1::RenameDictRequest request;
  request.set_name(name);
  request.set_new_name(new_name);
  v1::DictInfo info;
  if (impl_->schemas != nullptr) impl_->schemas->NameEnded(name);
  impl_->Call(&v1::TdStore::Stub::RenameDict, request, &info, Retrier::kOnlyIfNothingApplied);
}

Dict Client::open_handle(const std::string& handle, ClientOptions options) {
  const DictHandle parsed = ParseHandle(handle);
  Client client(parsed.address, options);
  // By name and id: NOT_FOUND if the dict the handle named was deleted or
  // renamed, even if another dict has its name now.
  Dict dict(client.impl_, parsed.name, parsed.id);
  (void)dict.describe();
  return dict;
}

}  // namespace tdstore::core
