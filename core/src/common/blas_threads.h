// SingleThreadedBlas: while alive, OpenBLAS runs every call on its caller's thread.
// OpenBLAS threads are a process-wide setting: when several of our workers each run BLAS/LAPACK, two levels of
// threads on a few cores only fight. Counted across the whole process, so overlapping users (an analysis and a
// quantization at once) restore the saved setting exactly once, when the last one ends.
#pragma once

namespace gkq {

class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
};

}  // namespace gkq
