/* The model on a backend whose memory the host cannot touch (guarded_backend.h: the CPU kernels behind page
 * mappings that are PROT_NONE outside backend calls), against the same model on the CPU backend: training steps
 * (every activation policy, bf16 activations and parameters, MLP tiles, small loss chunks), forward logits and
 * the KV cache give the same losses, norms, logits and weights bit for bit (model_parity.h, exact), and no host
 * code reads or writes a backend buffer directly (that would fault: the handler names the buffer and the stack).
 * This is what lets the model run on a GPU table; the GPU itself is checked by the cuda tests. */
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>

#include "guarded_backend.h"
#include "model_parity.h"

/* The guard itself: a host write into a guarded buffer ends a child with the handler's exit code 3; the same
 * write through copy_h2d, and a read back through copy_d2h, pass. */
static void test_guard(void) {
    const lcx_backend *be = guarded_backend();
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(be, &x));
    float *d = NULL, one = 1.0f, back = 0.0f;
    CHECK_OK(be->alloc(sizeof(float), (void **)&d));
    if (!x || !d) return;
    CHECK_OK(be->copy_h2d(x, d, &one, sizeof one));
    CHECK_OK(be->copy_d2h(x, &back, d, sizeof back));
    CHECK(back == 1.0f);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2); /* the handler's report is expected */
        *(volatile float *)d = 2.0f;
        _exit(0);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 3, "a host write into a guarded buffer was not caught (status %d)",
              ws);
    be->free(d);
    lcx_exec_free(x);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_guard();
    size_t calls0 = gb_calls;
    model_parity_run(guarded_backend(), 1);
    CHECK_MSG(gb_calls > calls0 + 1000, "the models ran %zu guarded calls", gb_calls - calls0); /* really on it */
    printf("test_model_device: %zu guarded calls\n", gb_calls - calls0);
    return test_summary("test_model_device");
}
