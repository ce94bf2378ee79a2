#include "util/output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace fpgallm {

namespace fs = std::filesystem;

// ---- Registered temporaries, removed by the signal handler -------------------------------

namespace {

enum SlotKind : int { kFile = 0, kTree = 1, kEmptyDir = 2 };

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 active
  int kind = kFile;
  char path[PATH_MAX];
};
constexpr int kSlots = 128;
Slot g_slots[kSlots];

int register_path(const std::string& path, SlotKind kind) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].kind = kind;
      g_slots[i].state.store(2);
      return i;
    }
  }
  return -1;
}

void unregister_path(int& slot) {
  if (slot >= 0) g_slots[slot].state.store(0);
  slot = -1;
}

struct LinuxDirent64 {
  std::uint64_t d_ino;
  std::int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

// Removes name (relative to dirfd) and everything under it with async-signal-safe calls
// only (openat, getdents64, unlinkat, close), so the signal handler can use it.
void remove_tree_at(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (depth > 64) return;
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[2048];
  // Removing entries while listing may hide others from the listing: list again until empty.
  for (int pass = 0; pass < 1000; ++pass) {
    bool any = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const LinuxDirent64*>(buf + off);
        off += d->d_reclen;
        if (d->d_name[0] == '.' && (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0'))) continue;
        any = true;
        remove_tree_at(fd, d->d_name, depth + 1);
      }
    }
    if (!any) break;
  }
  ::close(fd);
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

void remove_tree(const char* path) { remove_tree_at(AT_FDCWD, path, 0); }

void remove_slot(const Slot& s) {
  if (s.kind == kEmptyDir) ::rmdir(s.path);
  else if (s.kind == kTree) remove_tree(s.path);
  else ::unlink(s.path);
}

void remove_registered() {
  // Files and temporary folders first (newest first), then the folders made for them.
  for (int i = kSlots - 1; i >= 0; --i)
    if (g_slots[i].state.load() == 2 && g_slots[i].kind != kEmptyDir) remove_slot(g_slots[i]);
  for (int i = kSlots - 1; i >= 0; --i)
    if (g_slots[i].state.load() == 2 && g_slots[i].kind == kEmptyDir) remove_slot(g_slots[i]);
}

// Set once an output reaches its destination (not a file inside a temporary folder): from
// then on the run is past the point of no return, and a terminating signal lets it finish
// (every output written, normal exit) rather than leave some outputs and not others.
std::atomic<bool> g_output_committed{false};

bool inside_temporary_folder(const std::string& path) {
  for (const Slot& s : g_slots)
    if (s.state.load() == 2 && s.kind == kTree) {
      const std::size_t n = std::strlen(s.path);
      if (path.size() > n && path.compare(0, n, s.path) == 0 && path[n] == '/') return true;
    }
  return false;
}

// Terminating signals wait while an output is renamed into place and marked committed.
class SignalsDeferred {
 public:
  SignalsDeferred() {
    sigset_t set;
    ::sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalsDeferred() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsDeferred(const SignalsDeferred&) = delete;
  SignalsDeferred& operator=(const SignalsDeferred&) = delete;

 private:
  sigset_t old_;
};

void mark_committed(const std::string& path) {
  if (!inside_temporary_folder(path)) g_output_committed.store(true);
}

extern "C" void on_terminating_signal(int sig) {
  if (g_output_committed.load()) return;
  const int saved = errno;
  remove_registered();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved;
  ::raise(sig);  // delivered when the handler returns: the process ends as the signal asked
}

std::atomic<bool> g_force{true};  // library default; the command line sets it from --force

// ---- Inputs -----------------------------------------------------------------------------

struct Input {
  dev_t dev;
  ino_t ino;
};
std::mutex g_inputs_mutex;
std::vector<Input> g_inputs;

bool is_input(const struct stat& st) {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  return std::any_of(g_inputs.begin(), g_inputs.end(),
                     [&](const Input& in) { return in.dev == st.st_dev && in.ino == st.st_ino; });
}

std::string errno_text(int err) { return std::strerror(err); }

void fsync_parent(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The nearest existing ancestor of path's parent, which must be a writable folder.
std::string existing_ancestor(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  if (p.empty()) p = ".";
  while (true) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) throw InputError(path, fmt::format("{} is not a folder", p.string()));
      if (::access(p.c_str(), W_OK | X_OK) != 0)
        throw InputError(path, fmt::format("folder {} is not writable", p.string()));
      return p.string();
    }
    if (errno != ENOENT) throw InputError(path, fmt::format("{}: {}", p.string(), errno_text(errno)));
    if (!p.has_parent_path() || p.parent_path() == p) return ".";
    p = p.parent_path();
  }
}

// The folder path goes into, which must exist and be writable.
std::string existing_parent(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT) throw InputError(path, fmt::format("folder {} does not exist", parent));
    if (errno == ENOTDIR) return existing_ancestor(path);  // names the file in the way
    throw InputError(path, fmt::format("{}: {}", parent, errno_text(errno)));
  }
  return existing_ancestor(path);
}

bool holds_what_fpgallm_wrote(const std::string& path);

// Refuses replacing what exists at path (InputError naming it); returns whether something
// does (and may be replaced).
bool check_existing(const std::string& path, OutputKind kind) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;  // existing_ancestor() names a file in the way
    throw InputError(path, errno_text(errno));
  }
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0 && is_input(target))
    throw InputError(path, "is an input of this command; choose another output");
  if (S_ISLNK(st.st_mode)) throw InputError(path, "is a symbolic link; fpgallm does not replace it");
  if (kind == OutputKind::file) {
    if (S_ISDIR(st.st_mode)) throw InputError(path, "is a folder; expected a file name");
    if (!S_ISREG(st.st_mode)) throw InputError(path, "exists and is not a regular file; fpgallm does not replace it");
    if (!output_force() && !holds_what_fpgallm_wrote(path))
      throw InputError(path, "exists and is not a file fpgallm wrote (or it changed since); fpgallm replaces it only with --force");
    return true;
  }
  if (!S_ISDIR(st.st_mode)) throw InputError(path, "exists and is not a folder; fpgallm does not replace it");
  if (auto why = foreign_folder_reason(path); !why.empty()) throw InputError(path, why);
  return true;
}

std::atomic<unsigned> g_counter{0};

std::string temp_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return fmt::format("{}.tmp.{}.{}", p, ::getpid(), g_counter.fetch_add(1));
}

// The file fpgallm puts in each temporary folder it makes, holding its pid: what tells a
// temporary folder a killed fpgallm left from anything else with a similar name.
constexpr const char* kTempMarker = ".fpgallm-temporary";

// Whether name is "<base>.tmp.<pid>.<n>" (temp_name's pattern); its pid when it is.
std::optional<long> temp_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const auto dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size() || dot > 10) return std::nullopt;
  if (rest.find_first_not_of("0123456789.") != std::string::npos || rest.find('.', dot + 1) != std::string::npos)
    return std::nullopt;
  const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
  return pid > 0 ? std::optional<long>(pid) : std::nullopt;
}

bool process_gone(long pid) { return pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// Removes the temporaries that earlier runs of fpgallm, killed (SIGKILL) before they could
// clean up, left beside path: entries named by temp_name's pattern for this very path whose
// owning process is gone; a folder only when it holds kTempMarker with that pid, a file only
// when it is a regular file of this user. Anything else is left alone.
void remove_stale_temporaries(const std::string& path) {
  const fs::path p(path);
  const std::string base = p.filename().string();
  if (base.empty()) return;
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto owner = temp_owner(name, base);
    if (!owner || !process_gone(*owner)) continue;
    struct stat st {};
    const std::string full = it->path().string();
    if (::lstat(full.c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (S_ISREG(st.st_mode)) {
      ::unlink(full.c_str());
    } else if (S_ISDIR(st.st_mode)) {
      const std::string marker = full + "/" + kTempMarker;
      const int fd = ::open(marker.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
      if (fd < 0) continue;
      char buf[32] = {};
      const ssize_t n = ::read(fd, buf, sizeof buf - 1);
      ::close(fd);
      if (n > 0 && std::strtol(buf, nullptr, 10) == *owner) remove_tree(full.c_str());
    }
  }
}

std::string strip_slash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Moves from onto to when nothing is at to; false (errno EEXIST) when something is.
bool rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  // A file system without RENAME_NOREPLACE: link() never replaces either (files only).
  if (::link(from.c_str(), to.c_str()) != 0) return false;
  ::unlink(from.c_str());
  return true;
}

}  // namespace

void set_output_force(bool force) { g_force = force; }
bool output_force() { return g_force; }

void install_interrupt_cleanup() {
  g_output_committed.store(false);  // a run starts: nothing of it is in place yet
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // e.g. nohup
    struct sigaction sa {};
    sa.sa_handler = on_terminating_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

void note_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  g_inputs.push_back({st.st_dev, st.st_ino});
}

std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

// Size and checksum of a file (fsynced on the way, when asked).
std::pair<std::uint64_t, std::uint64_t> file_sum(const std::string& path, bool sync) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw InputError(path, errno_text(errno));
  std::vector<char> buf(1 << 20);
  std::uint64_t h = 0xcbf29ce484222325ull, bytes = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path, errno_text(err));
    }
    if (n == 0) break;
    h = fnv1a64(buf.data(), static_cast<std::size_t>(n), h);
    bytes += static_cast<std::uint64_t>(n);
  }
  if (sync) ::fsync(fd);
  ::close(fd);
  return {bytes, h};
}

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

// The attribute OutputFile sets on every file it writes: "<bytes> <FNV-1a 64>" of the
// content. A file whose content still matches it is one fpgallm wrote and nobody changed.
constexpr const char* kWrittenAttr = "user.fpgallm.written";

std::string written_attr_value(std::uint64_t bytes, std::uint64_t sum) { return fmt::format("{} {}", bytes, hex64(sum)); }

bool holds_what_fpgallm_wrote(const std::string& path) {
  char value[64] = {};
  const ssize_t n = ::lgetxattr(path.c_str(), kWrittenAttr, value, sizeof value - 1);
  if (n <= 0) return false;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::string recorded(value, static_cast<std::size_t>(n));
  if (recorded.compare(0, recorded.find(' '), std::to_string(st.st_size)) != 0) return false;  // cheap: size first
  const auto [bytes, sum] = file_sum(path, false);
  return recorded == written_attr_value(bytes, sum);
}

}  // namespace

std::string foreign_folder_reason(const std::string& path) {
  std::error_code ec;
  if (fs::is_empty(path, ec) && !ec) return "";
  const fs::path manifest_path = fs::path(path) / kManifestName;
  struct stat mst {};
  if (::lstat(manifest_path.c_str(), &mst) != 0 || !S_ISREG(mst.st_mode))
    return std::string("is a folder fpgallm did not write (it has no ") + kManifestName +
           "); remove it or choose another output";
  nlohmann::json manifest;
  try {
    const auto [bytes, sum] = file_sum(manifest_path.string(), false);
    (void)sum;
    if (bytes > (64u << 20)) return std::string("has an implausibly large ") + kManifestName;
    std::string text(bytes, '\0');
    const int fd = ::open(manifest_path.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t got = fd >= 0 ? ::read(fd, text.data(), text.size()) : -1;
    if (fd >= 0) ::close(fd);
    if (got != static_cast<ssize_t>(bytes)) return std::string("cannot read its ") + kManifestName;
    manifest = nlohmann::json::parse(text);
    if (!manifest.is_object() || manifest.value("written_by", "") != "fpgallm" || !manifest["files"].is_object())
      return std::string("has a ") + kManifestName + " that fpgallm did not write";
  } catch (const std::exception&) {
    return std::string("has a malformed ") + kManifestName + "; remove the folder or choose another output";
  }
  const auto& files = manifest["files"];
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), path, ec);
    const std::string name = rel.generic_string();
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) return fmt::format("cannot inspect {}", name);
    if (is_input(st)) return fmt::format("holds {}, an input of this command; choose another output", name);
    if (S_ISDIR(st.st_mode)) continue;
    if (name == kManifestName) continue;
    if (!S_ISREG(st.st_mode) || !files.contains(name))
      return fmt::format("holds {}, which fpgallm did not write; remove it or choose another output", name);
    const auto& rec = files[name];
    try {
      const auto [bytes, sum] = file_sum(it->path().string(), false);
      if (rec.at("bytes").get<std::uint64_t>() != bytes || rec.at("fnv1a64").get<std::string>() != hex64(sum))
        return fmt::format("holds {}, changed since fpgallm wrote it; remove it or choose another output", name);
    } catch (const std::exception&) {
      return fmt::format("holds {}, which does not match {}", name, kManifestName);
    }
  }
  if (ec) return "cannot list it: " + ec.message();
  return "";
}

void check_output(const std::string& path, OutputKind kind, const std::vector<std::string>& inputs,
                  std::uint64_t expected_bytes) {
  if (path.empty()) throw InputError("-o", "the output path is empty");
  for (const auto& in : inputs)
    if (!in.empty()) note_input(in);
  const std::string p = strip_slash(path);
  check_existing(p, kind);
  // A file goes into an existing folder; a folder's missing parents are made (and removed
  // again when it is not committed).
  const std::string folder = kind == OutputKind::file ? existing_parent(p) : existing_ancestor(p);
  struct statvfs vfs {};
  if (expected_bytes > 0 && ::statvfs(folder.c_str(), &vfs) == 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < expected_bytes)
      throw InputError(path, fmt::format("needs about {:.2f} GB, the file system of {} has {:.2f} GB free",
                                         expected_bytes / 1e9, folder, free_bytes / 1e9));
  }
}

// ---- CreatedParents -----------------------------------------------------------------------

CreatedParents::CreatedParents(const std::string& path) {
  const fs::path parent = fs::path(strip_slash(path)).parent_path();
  if (parent.empty()) return;
  std::vector<fs::path> missing;
  for (fs::path p = parent; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) break;
    missing.push_back(p);
    if (p.parent_path() == p) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const int slot = register_path(it->string(), kEmptyDir);
    if (::mkdir(it->c_str(), 0777) != 0) {
      const int err = errno;
      int s = slot;
      unregister_path(s);
      if (err == EEXIST) continue;  // made by someone else meanwhile: not ours
      for (std::size_t i = made_.size(); i-- > 0;) ::rmdir(made_[i].c_str());
      for (int& m : slots_) unregister_path(m);
      throw InputError(path, fmt::format("cannot create folder {}: {}", it->string(), errno_text(err)));
    }
    made_.push_back(it->string());
    slots_.push_back(slot);
  }
}

CreatedParents::~CreatedParents() {
  for (std::size_t i = made_.size(); i-- > 0;) ::rmdir(made_[i].c_str());
  for (int& s : slots_) unregister_path(s);
}

void CreatedParents::keep() {
  for (int& s : slots_) unregister_path(s);
  slots_.clear();
  made_.clear();
}

// ---- OutputLock ---------------------------------------------------------------------------

OutputLock::OutputLock(const std::string& path) : lock_(strip_slash(path) + ".fpgallm-lock") {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(lock_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      slot_ = register_path(lock_, kFile);
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::write(fd, pid.data(), pid.size()) < 0) { /* the pid only helps to detect a stale lock */ }
      ::close(fd);
      return;
    }
    if (errno != EEXIST) throw InputError(path, fmt::format("cannot create {}: {}", lock_, errno_text(errno)));
    long owner = 0;
    if (const int rfd = ::open(lock_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); rfd >= 0) {
      char buf[32] = {};
      const ssize_t n = ::read(rfd, buf, sizeof buf - 1);
      ::close(rfd);
      if (n > 0) owner = std::strtol(buf, nullptr, 10);
    }
    const bool stale = owner > 0 && ::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH;
    if (!stale)
      throw InputError(path, owner > 0 ? fmt::format("another fpgallm (pid {}) is writing it; try again when it is done", owner)
                                       : fmt::format("is locked by {}; another fpgallm is writing it", lock_));
    ::unlink(lock_.c_str());
  }
  throw InputError(path, fmt::format("cannot take the lock {}", lock_));
}

OutputLock::~OutputLock() {
  if (slot_ >= 0) ::unlink(lock_.c_str());
  unregister_path(slot_);
}

// ---- OutputFile ---------------------------------------------------------------------------

OutputFile::OutputFile(std::string path) : path_(strip_slash(std::move(path))) {
  remove_stale_temporaries(path_);
  tmp_ = temp_name(path_);
  slot_ = register_path(tmp_, kFile);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    unregister_path(slot_);
    throw InputError(path_, "cannot write: " + errno_text(err));
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (slot_ >= 0) ::unlink(tmp_.c_str());
  unregister_path(slot_);
}

void OutputFile::write(const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0 && error_ == 0) {
    const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, 1 << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      error_ = errno;
      break;
    }
    sum_ = fnv1a64(p, static_cast<std::size_t>(w), sum_);
    bytes_ += static_cast<std::uint64_t>(w);
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  if (error_ != 0) throw InputError(path_, "write failed: " + errno_text(error_));
}

void OutputFile::commit() {
  if (error_ != 0) throw InputError(path_, "write failed: " + errno_text(error_));
  // Where the file system keeps no user attributes, a later run needs --force to replace it.
  const std::string written = written_attr_value(bytes_, sum_);
  (void)::fsetxattr(fd_, kWrittenAttr, written.data(), written.size(), 0);
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    const int err = errno;
    fd_ = -1;
    throw InputError(path_, "write failed: " + errno_text(err));
  }
  fd_ = -1;
  const bool exists = check_existing(path_, OutputKind::file);
  const SignalsDeferred deferred;
  if (exists) {
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) throw InputError(path_, "cannot write: " + errno_text(errno));
  } else if (!rename_noreplace(tmp_, path_)) {
    if (errno == EEXIST) throw InputError(path_, "was created by another process meanwhile; left as it is");
    throw InputError(path_, "cannot write: " + errno_text(errno));
  }
  unregister_path(slot_);
  mark_committed(path_);
  fsync_parent(path_);
}

// ---- OutputFolder -------------------------------------------------------------------------

OutputFolder::OutputFolder(std::string path)
    : path_(strip_slash(std::move(path))), parents_(path_), lock_(path_) {
  tmp_ = temp_name(path_);
  slot_ = register_path(tmp_, kTree);
  if (::mkdir(tmp_.c_str(), 0777) != 0) {
    const int err = errno;
    unregister_path(slot_);
    throw InputError(path_, "cannot create the output folder: " + errno_text(err));
  }
  // Under the lock: no other fpgallm writes this output now, so what is stale stays stale.
  remove_stale_temporaries(path_);
  const std::string marker = tmp_ + "/" + kTempMarker;
  if (const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); fd >= 0) {
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::write(fd, pid.data(), pid.size()) < 0) { /* without it a killed run's folder is only left, never removed */ }
    ::close(fd);
  }
}

OutputFolder::~OutputFolder() {
  if (slot_ >= 0) remove_tree(tmp_.c_str());
  unregister_path(slot_);
}

void OutputFolder::commit() {
  ::unlink((tmp_ + "/" + kTempMarker).c_str());  // the marker of a temporary is no output
  nlohmann::json files = nlohmann::json::object();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tmp_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = fs::relative(it->path(), tmp_).generic_string();
    if (name == kManifestName) continue;
    const auto [bytes, sum] = file_sum(it->path().string(), true);
    files[name] = {{"bytes", bytes}, {"fnv1a64", hex64(sum)}};
  }
  if (ec) throw InputError(path_, "cannot list the folder written: " + ec.message());
  const nlohmann::json manifest = {{"written_by", "fpgallm"},
                                   {"about", "what fpgallm wrote here; fpgallm replaces this folder only while "
                                             "every file matches"},
                                   {"files", files}};
  {
    OutputFile m((fs::path(tmp_) / kManifestName).string());
    const std::string text = manifest.dump(2) + "\n";
    m.write(text.data(), text.size());
    m.commit();
  }
  fsync_parent(tmp_ + "/.");
  const bool exists = check_existing(path_, OutputKind::folder);
  const SignalsDeferred deferred;
  if (!exists) {
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY)
        throw InputError(path_, "was created by another process meanwhile; left as it is");
      if (errno != EINVAL || ::rename(tmp_.c_str(), path_.c_str()) != 0)
        throw InputError(path_, "cannot write: " + errno_text(errno));
    }
    unregister_path(slot_);
  } else {
    // One rename swaps the new folder in; the earlier one is now at the temporary name.
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
      const int err = errno;
      if (err != EINVAL && err != ENOSYS) throw InputError(path_, "cannot replace: " + errno_text(err));
      if (::rename(tmp_.c_str(), path_.c_str()) != 0)  // an empty earlier folder is replaced by rename(2)
        throw InputError(path_, "cannot replace: " + errno_text(errno));
      unregister_path(slot_);
    } else {
      remove_tree(tmp_.c_str());
      unregister_path(slot_);
    }
  }
  parents_.keep();
  mark_committed(path_);
  fsync_parent(path_);
}

}  // namespace fpgallm
