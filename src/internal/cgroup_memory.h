// The memory limits of the process's cgroups, for the CPU block cache's size (Note [cpu block
// cache] in src/core/storage.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace sinter::detail {

// The lowest memory limit of the cgroups that `self_cgroup` (the text of /proc/self/cgroup) names
// and of their ancestors, read under `root` (/sys/fs/cgroup): v2's memory.max, v1's
// memory/memory.limit_in_bytes. 0 where none is set or readable. Inside a container with its own
// cgroup namespace the path is "/", the container's limit at the mount's root.
size_t cgroup_memory_limit(const std::string& self_cgroup, const std::string& root);

}  // namespace sinter::detail
