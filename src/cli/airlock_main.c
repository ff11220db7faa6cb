/*
 * airlock: the command-line client (attach, run, ls, replay, probe).
 * Not built yet beyond its usage text.
 */
#include <stdio.h>
#include <string.h>

static void usage(FILE *to)
{
    fputs("usage: airlock attach|run|ls|kill|replay|probe ...\n"
          "Not built yet.\n",
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
