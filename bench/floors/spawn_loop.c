/* The floor under per-process mode: N runs of a command, J at once, with
 * nothing but posix_spawnp and waitpid (no state, no pipes, no groups).
 *
 *   cc -O2 -o spawn_loop spawn_loop.c && ./spawn_loop 3000 4 true
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s N J COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]), j = atol(argv[2]), started = 0, running = 0;
    int failed = 0;
    while (started < n || running > 0) {
        while (started < n && running < j) {
            pid_t pid;
            if (posix_spawnp(&pid, argv[3], NULL, NULL, &argv[3], environ) != 0) {
                perror("posix_spawnp");
                return 1;
            }
            started++;
            running++;
        }
        int status;
        if (waitpid(-1, &status, 0) < 0) {
            perror("waitpid");
            return 1;
        }
        running--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
    if (failed) fprintf(stderr, "%d runs failed\n", failed);
    return failed != 0;
}
