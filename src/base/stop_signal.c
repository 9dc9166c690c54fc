/*
 * stop_signal.c - SIGTERM and SIGUSR1 taken by one thread with sigwait;
 * see stop_signal.h.
 */
#include "stop_signal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static atomic_int received;

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

void stop_signals_block(void)
{
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *take_signals(void *unused)
{
    (void)unused;
    sigset_t set;
    stop_set(&set);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) == 0) {
            int none = 0;
            atomic_compare_exchange_strong(&received, &none, sig);
        }
    }
    return NULL;
}

int stop_signals_take(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, take_signals, NULL) != 0)
        return 1;
    pthread_detach(thread);
    return 0;
}

void stop_signals_default(void)
{
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int stop_signal_received(void)
{
    return atomic_load(&received);
}

const char *stop_signal_name(void)
{
    switch (stop_signal_received()) {
    case SIGTERM:
        return "SIGTERM";
    case SIGUSR1:
        return "SIGUSR1";
    default:
        return "another rank's signal";
    }
}
