"""Platform facts and system calls: the only modules with ctypes, syscall numbers and /proc or statfs facts."""
