#pragma once
// Output safety: every file or folder fpgallm writes goes through here, so that
//  - nothing fpgallm did not write is replaced (a folder is fpgallm's only when it holds
//    fpgallm-manifest.json and its files still match it; a file when its content matches
//    the checksum fpgallm recorded beside it, else only with --force), and
//    an input of the running command is never replaced, not even with --force;
//  - the final name is either the complete new output or untouched: the work goes to a
//    temporary beside it (same folder, so the last step is one rename), fsynced first;
//  - a failure, SIGINT, SIGTERM or SIGHUP removes temporaries and the folders made for
//    them (a signal handler that unlinks registered paths, then re-raises the signal);
//    once an output is renamed into place, a later signal lets the run finish instead,
//    so an interrupted run leaves either nothing or every output;
//  - of two processes writing one output, exactly one wins (a lock taken before the
//    work, and a rename that never replaces what appeared meanwhile).
// Every refusal is an InputError naming the output path.
#include <cstdint>
#include <string>
#include <vector>

namespace fpgallm {

enum class OutputKind { file, folder };

// Process-wide policy, set once by the command line.
void set_output_force(bool force);  // --force: an existing file (never an input) may be replaced
bool output_force();

// Installs the SIGINT/SIGTERM/SIGHUP handler that removes registered temporaries; a run
// starts here (the point of no return is the first output of the run put in place).
void install_interrupt_cleanup();

// Remembers a path this process reads (files and folders); outputs may never name one.
// MappedFile and the text readers call it.
void note_input(const std::string& path);

// The checks made before the work: `path` may be written as `kind` (it names no input
// among `inputs` or those noted, holds nothing foreign; a file's folder exists and is
// writable, a folder's missing parents can be made), and that file system has
// `expected_bytes` free. Throws InputError naming path.
void check_output(const std::string& path, OutputKind kind, const std::vector<std::string>& inputs = {},
                  std::uint64_t expected_bytes = 0);

// Folders this process created on the way to an output, removed again (if still empty)
// when the output is not committed.
class CreatedParents {
 public:
  CreatedParents() = default;
  explicit CreatedParents(const std::string& path);  // makes the missing parents of path
  CreatedParents(const CreatedParents&) = delete;
  CreatedParents& operator=(const CreatedParents&) = delete;
  ~CreatedParents();
  void keep();  // the output is committed: the folders stay

 private:
  std::vector<std::string> made_;  // deepest last
  std::vector<int> slots_;
};

// An exclusive claim on an output path ("<path>.fpgallm-lock", created with O_EXCL and
// holding the owner's pid; a lock whose owner is gone is taken over).
class OutputLock {
 public:
  explicit OutputLock(const std::string& path);
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock();

 private:
  std::string lock_;
  int slot_ = -1;
};

// A file written atomically into an existing folder: bytes go to "<path>.tmp.<pid>.<n>" beside it;
// commit() records its size and checksum in an extended attribute (user.fpgallm.written),
// fsyncs it and renames it onto path (refusing an input, and an existing file unless it
// still holds what fpgallm wrote there, by that attribute, or with --force; a file that
// appeared meanwhile is not replaced). Not committed, it is removed.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  const std::string& path() const { return path_; }
  void write(const void* data, std::size_t n);  // throws InputError (e.g. disk full)
  bool ok() const { return error_ == 0; }
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;
  int error_ = 0;
  std::uint64_t bytes_ = 0, sum_ = 0xcbf29ce484222325ull;  // of what was written: see commit()
};

// A folder written atomically: files go into dir() (a temporary beside path); commit()
// writes fpgallm-manifest.json (size and FNV-1a 64 checksum of every file), fsyncs, and
// puts the folder at path: a new name, an empty folder, or an earlier fpgallm folder whose
// files still match its manifest are replaced in one rename (renameat2 RENAME_EXCHANGE);
// anything else is refused. Holds the OutputLock from construction to the end.
class OutputFolder {
 public:
  explicit OutputFolder(std::string path);
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder();

  const std::string& path() const { return path_; }
  const std::string& dir() const { return tmp_; }
  void commit();

 private:
  std::string path_, tmp_;
  CreatedParents parents_;
  OutputLock lock_;
  int slot_ = -1;
};

constexpr const char* kManifestName = "fpgallm-manifest.json";

// Why an existing folder may not be replaced ("" when it may: empty, or fpgallm's own
// with every file matching its manifest).
std::string foreign_folder_reason(const std::string& path);

// FNV-1a 64 of a byte range (the manifest's checksum).
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull);

}  // namespace fpgallm
