#pragma once
// An advisory lock on a file (flock(2)), torch-free: processes that share one GPU take turns
// through it, so that the forwards one of them times run with the GPU to themselves. Exclusive
// for work on the GPU; shared for CUDA calls that run nothing there (a capture, freeing memory),
// which may overlap each other but not another process's exclusive holding. flock locks belong
// to an open file, so two FileLocks on one path exclude each other within one process too.
#include <string>

namespace torchutil {

class FileLock {
 public:
  // Opens (creating it, mode 0666 less the umask) the file at path; throws std::invalid_argument
  // naming the path and the system's reason when it cannot.
  explicit FileLock(std::string path);
  ~FileLock();  // unlocks and closes
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  enum class Mode { None, Shared, Exclusive };
  // Waits until the lock is ours in `mode` (no-op when held so already). Changing a held lock's
  // mode is not atomic (flock(2)): another process may take it in between.
  void lock(Mode mode = Mode::Exclusive);
  // Takes the lock in `mode` if no other holder excludes it; false otherwise.
  bool tryLock(Mode mode = Mode::Exclusive);
  void unlock();  // no-op when not held
  bool held() const { return mode_ != Mode::None; }
  Mode mode() const { return mode_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  Mode mode_ = Mode::None;
};

}  // namespace torchutil
