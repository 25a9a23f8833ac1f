#include "runtime/run/control_plane.hpp"

#include <mpi.h>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace recmix::runtime::run {
namespace {
constexpr int kToExecutor = 1;
constexpr int kToScheduler = 2;

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw CommError(std::string("control plane: ") + what + " failed: " + std::string(text, len));
  }
}
}  // namespace

struct ControlPlane::Impl {
  MPI_Comm comm = MPI_COMM_NULL;

  void send(int to, int tag, const Message& m) {
    nlohmann::json j = {{"kind", m.kind}, {"job", m.job}, {"body", m.body}};
    const std::string text = j.dump();
    check(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, comm), "MPI_Send");
  }

  std::optional<Message> poll(int tag) {
    int found = 0;
    MPI_Message handle = MPI_MESSAGE_NULL;
    MPI_Status status;
    // Matched probe: the message is taken by this thread alone even when others probe too.
    check(MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &found, &handle, &status), "MPI_Improbe");
    if (!found) return std::nullopt;
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string text(static_cast<std::size_t>(count), '\0');
    check(MPI_Mrecv(text.data(), count, MPI_CHAR, &handle, MPI_STATUS_IGNORE), "MPI_Mrecv");
    const auto j = nlohmann::json::parse(text);
    Message m;
    m.kind = j.at("kind").get<std::string>();
    m.job = j.at("job").get<std::int64_t>();
    m.body = j.at("body");
    m.from = status.MPI_SOURCE;
    return m;
  }
};

ControlPlane::ControlPlane() : impl_(std::make_unique<Impl>()) {
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  job_parent_ = comm::make_mpi_world_communicator();
}

ControlPlane::~ControlPlane() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

void ControlPlane::send_to_executor(int rank, const Message& message) { impl_->send(rank, kToExecutor, message); }
void ControlPlane::send_to_scheduler(const Message& message) { impl_->send(0, kToScheduler, message); }
std::optional<Message> ControlPlane::poll_executor() { return impl_->poll(kToExecutor); }
std::optional<Message> ControlPlane::poll_scheduler() { return impl_->poll(kToScheduler); }

}  // namespace recmix::runtime::run
