#!/bin/sh
# Lists the undefined symbols of the protocol core archive and fails if any
# of them is an OS service: the core (src/wire, src/proto, src/coll) must be
# sans-I/O.  Allowed: pure libc (memcpy, memset, malloc/free via dlcp_mem's
# default, math) and the sanitizer/stack-protector runtime.
set -eu
archive=$1
forbidden='^(socket|bind|connect|listen|accept4?|send|sendto|sendmsg|sendmmsg|recv|recvfrom|recvmsg|recvmmsg|read|write|readv|writev|open|open64|openat|close|fopen|fopen64|fclose|fread|fwrite|fprintf|printf|puts|fputs|perror|epoll_[a-z_]+|poll|select|clock_gettime|gettimeofday|time|nanosleep|usleep|sleep|pthread_[a-z_]+|getenv|secure_getenv|rand|srand|random|srandom|getrandom|fork|exec[a-z]*|kill|signal|sigaction|mmap|mmap64|ioctl|setsockopt|getsockopt|stderr|stdout)$'
syms=$(nm -u --format=posix "$archive" | awk '{print $1}' | sort -u)
bad=$(printf '%s\n' "$syms" | grep -E "$forbidden" || true)
if [ -n "$bad" ]; then
  echo "core_symbols: the sans-I/O core references OS services:" >&2
  printf '  %s\n' $bad >&2
  exit 1
fi
echo "core_symbols: $(printf '%s\n' "$syms" | grep -c . || true) undefined symbols, none is an OS service"
