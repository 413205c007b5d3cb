// llama.cpp's own samplers on inputs given by a test, for comparing ours with them
// (rust/engine/tests/sampling_libllama.rs builds this file against the llama.h of the
// node-llama-cpp bundle in tools/oracle and links the prebuilt libllama of the same release).
//
//   oracle mirostat VERSION SEED TAU ETA TEMP N_VOCAB STEPS LOGITS.f32
//     Chains temp(TEMP) and mirostat (VERSION 1, m = 100, or 2) and applies the chain to STEPS
//     rows of N_VOCAB little-endian f32 logits; prints one line per step: the number of
//     candidates Mirostat kept and the token it drew.
//   oracle dry MODEL MULT BASE ALLOWED LAST_N TOKENS.txt [BREAKER...]
//     Loads MODEL's vocabulary, makes llama_sampler_init_dry with the breakers, accepts the
//     whitespace-separated token ids of TOKENS.txt one by one and after each applies the sampler
//     to all-zero logits; prints one line per prefix length: "n id:penalty id:penalty ...".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) data;
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static int mirostat(char ** argv) {
    const int version = atoi(argv[0]);
    const uint32_t seed = (uint32_t) strtoul(argv[1], NULL, 10);
    const float tau = strtof(argv[2], NULL);
    const float eta = strtof(argv[3], NULL);
    const float temp = strtof(argv[4], NULL);
    const int n_vocab = atoi(argv[5]);
    const int steps = atoi(argv[6]);
    FILE * f = fopen(argv[7], "rb");
    if (!f || n_vocab <= 0 || steps <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    float * logits = malloc(sizeof(float) * (size_t) n_vocab);
    llama_token_data * data = malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    struct llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_temp(temp));
    llama_sampler_chain_add(chain, version == 1
        ? llama_sampler_init_mirostat(n_vocab, seed, tau, eta, 100)
        : llama_sampler_init_mirostat_v2(seed, tau, eta));
    for (int s = 0; s < steps; s++) {
        if (fread(logits, sizeof(float), (size_t) n_vocab, f) != (size_t) n_vocab) {
            fprintf(stderr, "short logits file\n");
            return 2;
        }
        for (int i = 0; i < n_vocab; i++) {
            data[i] = (llama_token_data) { i, logits[i], 0.0f };
        }
        llama_token_data_array cur = { data, (size_t) n_vocab, -1, false };
        llama_sampler_apply(chain, &cur);
        printf("%zu %d\n", cur.size, cur.data[cur.selected].id);
    }
    llama_sampler_free(chain);
    fclose(f);
    free(logits);
    free(data);
    return 0;
}

static int dry(char ** argv, int argc) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model * model = llama_model_load_from_file(argv[0], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[0]);
        return 2;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const float mult = strtof(argv[1], NULL);
    const float base = strtof(argv[2], NULL);
    const int allowed = atoi(argv[3]);
    const int last_n = atoi(argv[4]);
    FILE * f = fopen(argv[5], "r");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", argv[5]);
        return 2;
    }
    int cap = 1024, n = 0;
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) cap);
    int t;
    while (fscanf(f, "%d", &t) == 1) {
        if (n == cap) {
            cap *= 2;
            tokens = realloc(tokens, sizeof(llama_token) * (size_t) cap);
        }
        tokens[n++] = t;
    }
    fclose(f);
    const char ** breakers = (const char **) (argv + 6);
    const size_t n_breakers = (size_t) (argc - 6);
    llama_token_data * data = malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    struct llama_sampler * s =
        llama_sampler_init_dry(vocab, mult, base, allowed, last_n, breakers, n_breakers);
    for (int len = 1; len <= n; len++) {
        llama_sampler_accept(s, tokens[len - 1]);
        for (int i = 0; i < n_vocab; i++) {
            data[i] = (llama_token_data) { i, 0.0f, 0.0f };
        }
        llama_token_data_array cur = { data, (size_t) n_vocab, -1, false };
        llama_sampler_apply(s, &cur);
        printf("%d", len);
        for (size_t i = 0; i < cur.size; i++) {
            if (cur.data[i].logit != 0.0f) {
                printf(" %d:%.9g", cur.data[i].id, -cur.data[i].logit);
            }
        }
        printf("\n");
    }
    llama_sampler_free(s);
    free(data);
    free(tokens);
    llama_model_free(model);
    return 0;
}

int main(int argc, char ** argv) {
    llama_log_set(quiet, NULL);
    if (argc >= 10 && strcmp(argv[1], "mirostat") == 0) {
        return mirostat(argv + 2);
    }
    if (argc >= 8 && strcmp(argv[1], "dry") == 0) {
        llama_backend_init();
        return dry(argv + 2, argc - 2);
    }
    fprintf(stderr, "usage: see the comment at the top of oracle.c\n");
    return 2;
}
