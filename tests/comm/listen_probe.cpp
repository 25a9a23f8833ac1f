// listen_probe: run on several ranks, rank 0 lists every TCP socket that any rank listens on
// (after MPI_Init and a collective, when Open MPI's transports are up) and prints one line each,
// "listening <rank> <address>:<port>", then "listeners <n> outside loopback". The ranks' sockets
// are found through /proc: each rank's socket inodes (/proc/<pid>/fd) matched against the LISTEN
// entries of /proc/net/tcp and tcp6. Exit 1 when a rank listens beyond 127.0.0.1 or ::1.
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::set<std::string> socket_inodes(int pid) {
  std::set<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char target[256] = {};
      const std::string link = dir + "/" + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? n : 0);
      if (t.rfind("socket:[", 0) == 0) out.insert(t.substr(8, t.size() - 9));
    }
    closedir(d);
  }
  return out;
}

struct Listener {
  std::string address;  // as /proc/net prints it: hex, then the port
  bool loopback;
  std::string inode;
};

// LISTEN (state 0A) entries of /proc/net/tcp or tcp6.
std::vector<Listener> listeners(const std::string& table, bool v6) {
  std::vector<Listener> out;
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (state != "0A") continue;
    const std::string host = local.substr(0, local.find(':'));
    // 127.0.0.0/8 is stored little-endian: the last byte is 7F; ::1 as four 32-bit words.
    const bool loopback = v6 ? host == "00000000000000000000000001000000" : host.size() == 8 && host.substr(6) == "7F";
    out.push_back({local, loopback, inode});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int pid = getpid();
  std::vector<int> pids(size);
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int outside = 0;
  if (rank == 0) {
    std::vector<Listener> all = listeners("/proc/net/tcp", false);
    for (auto& l : listeners("/proc/net/tcp6", true)) all.push_back(l);
    for (int r = 0; r < size; ++r) {
      const auto inodes = socket_inodes(pids[r]);
      for (const auto& l : all)
        if (inodes.count(l.inode)) {
          std::printf("listening %d %s%s\n", r, l.address.c_str(), l.loopback ? " (loopback)" : "");
          outside += !l.loopback;
        }
    }
    std::printf("listeners %d outside loopback\n", outside);
  }
  MPI_Bcast(&outside, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return outside ? 1 : 0;
}
