// Wake-up floors on this machine (`gcc -O2 -pthread bench/probes/hops.c -o /tmp/hops &&
// /tmp/hops [round trips] [µs between them]`): a round trip through 2 hops (thread mode's shape:
// main -> worker thread -> main) and through 4 hops across two processes (process mode's
// shape: main -> [socket] child reader thread -> [eventfd] child worker thread -> [socket]
// parent reader thread -> [eventfd] main). Round trips are spaced (sleep between them),
// as the bench's trivial runs are 3 ms apart. Prints p50 and p90 in µs.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static void sig(int fd) { uint64_t one = 1; if (write(fd, &one, 8) != 8) exit(1); }
static void wait_ev(int fd) { uint64_t v; if (read(fd, &v, 8) != 8) exit(1); }
static void sock_send(int fd) { char c = 1; if (send(fd, &c, 1, 0) != 1) exit(1); }
static void sock_recv(int fd) { char c; if (recv(fd, &c, 1, 0) != 1) exit(0); }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

static int to_worker, to_main, child_in, child_out;
static void *echo_thread(void *arg) { (void)arg; for (;;) { wait_ev(to_worker); sig(to_main); } return NULL; }
// Child process: reader thread gets the socket byte, wakes the worker via eventfd; the
// worker writes the answer on the socket.
static int c_sock, c_ev;
static void *child_worker(void *arg) { (void)arg; for (;;) { wait_ev(c_ev); sock_send(c_sock); } return NULL; }
// Parent reader thread: socket -> eventfd to main.
static int p_sock, p_ev;
static void *parent_reader(void *arg) { (void)arg; for (;;) { sock_recv(p_sock); sig(p_ev); } return NULL; }

static void report(const char *name, double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  printf("%-44s p50 %7.1f us  p90 %7.1f us\n", name, v[n / 2], v[n * 9 / 10]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 500;
  int gap_us = argc > 2 ? atoi(argv[2]) : 3000;
  double *v = calloc(n, sizeof *v);
  // 2 hops, threads of one process.
  to_worker = eventfd(0, 0); to_main = eventfd(0, 0);
  pthread_t t; pthread_create(&t, NULL, echo_thread, NULL);
  for (int i = 0; i < n; i++) { usleep(gap_us); double a = now_us(); sig(to_worker); wait_ev(to_main); v[i] = now_us() - a; }
  report("2 hops (main -> thread -> main)", v, n);
  // 2 hops across processes: main -> child (socket) -> main.
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t pid = fork();
  if (pid == 0) { for (;;) { sock_recv(sv[1]); sock_send(sv[1]); } }
  for (int i = 0; i < n; i++) { usleep(gap_us); double a = now_us(); sock_send(sv[0]); sock_recv(sv[0]); v[i] = now_us() - a; }
  report("2 hops (main -> child process -> main)", v, n);
  kill(pid, 9); waitpid(pid, NULL, 0);
  // 4 hops: main -> child reader -> child worker -> parent reader -> main.
  int sv2[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv2);
  pid = fork();
  if (pid == 0) {
    c_sock = sv2[1]; c_ev = eventfd(0, 0);
    pthread_t w; pthread_create(&w, NULL, child_worker, NULL);
    for (;;) { sock_recv(c_sock); sig(c_ev); }
  }
  p_sock = sv2[0]; p_ev = eventfd(0, 0);
  int p_out = dup(sv2[0]);
  pthread_t r; pthread_create(&r, NULL, parent_reader, NULL);
  for (int i = 0; i < n; i++) { usleep(gap_us); double a = now_us(); sock_send(p_out); wait_ev(p_ev); v[i] = now_us() - a; }
  report("4 hops (process mode's shape)", v, n);
  kill(pid, 9); waitpid(pid, NULL, 0);
  return 0;
}
