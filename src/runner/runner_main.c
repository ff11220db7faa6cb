/*
 * airlock-runner: the sandbox side. It links src/common only, so it holds
 * and can hold no signing code (tests/integration/boundary.sh checks).
 * Serving terminals arrives with the runner issue; today it verifies tokens.
 */
#include <stdio.h>
#include <string.h>

static void usage(FILE *to)
{
    fputs("usage: airlock-runner --listen HOST:PORT --identifier ID --jwks FILE\n"
          "       airlock-runner --connect URL --identifier ID --jwks FILE --token-file FILE\n"
          "\n"
          "The runner serves agents' terminals over one airlock.v1 WebSocket.\n"
          "Not built yet: this binary only proves the link boundary.\n",
          to);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
