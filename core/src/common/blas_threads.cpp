#include "common/blas_threads.h"

#include <cblas.h>

#include <mutex>

namespace gkq {

namespace {
std::mutex g_mutex;
int g_users = 0;
int g_saved = 1;
}  // namespace

SingleThreadedBlas::SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_users++ == 0) {
        g_saved = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
}

SingleThreadedBlas::~SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (--g_users == 0) openblas_set_num_threads(g_saved);
}

}  // namespace gkq
