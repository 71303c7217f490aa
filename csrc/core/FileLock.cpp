#include "core/FileLock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace torchutil {
namespace {

std::string reason(const std::string& what, const std::string& path, int error) {
  return "torchutil: cannot " + what + " the lock file '" + path + "': " + std::strerror(error);
}

}  // namespace

FileLock::FileLock(std::string path) : path_(std::move(path)) {
  if (path_.empty()) {
    throw std::invalid_argument("torchutil: gpu_lock must be a file path, got ''");
  }
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    throw std::invalid_argument(reason("open", path_, errno));
  }
}

FileLock::~FileLock() {
  unlock();
  ::close(fd_);
}

void FileLock::lock(Mode mode) {
  if (mode == Mode::None) {
    unlock();
    return;
  }
  if (mode_ == mode) {
    return;
  }
  while (::flock(fd_, mode == Mode::Shared ? LOCK_SH : LOCK_EX) != 0) {
    if (errno != EINTR) {
      throw std::invalid_argument(reason("lock", path_, errno));
    }
  }
  mode_ = mode;
}

bool FileLock::tryLock(Mode mode) {
  if (mode == Mode::None || mode_ == mode) {
    return mode_ == mode;
  }
  if (::flock(fd_, (mode == Mode::Shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0) {
    mode_ = mode;
    return true;
  }
  if (errno != EWOULDBLOCK) {
    throw std::invalid_argument(reason("lock", path_, errno));
  }
  return false;
}

void FileLock::unlock() {
  if (mode_ != Mode::None) {
    ::flock(fd_, LOCK_UN);
    mode_ = Mode::None;
  }
}

}  // namespace torchutil
