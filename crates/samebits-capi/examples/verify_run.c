/* The samebits C API from C: compiles an ONNX model, runs it on a deterministic float32 input
 * of the shape given on the command line and writes the run's receipt, verifies that receipt,
 * and, given a language model, generates greedily with a generation receipt and verifies it.
 * scripts/test_capi.sh builds this with cc against libsamebits and checks its receipts with the
 * `samebits` command.
 *
 * usage: verify_run MODEL.onnx INPUT_NAME D0,D1,... RUN_RECEIPT [MODEL.gguf PROMPT GEN_RECEIPT] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "samebits.h"

static int fail(const char *what, char *error) {
    fprintf(stderr, "%s: %s\n", what, error ? error : "(no message)");
    samebits_string_free(error);
    return 1;
}

static int verify(const char *receipt) {
    char *message = NULL;
    int status = samebits_verify(receipt, NULL, &message);
    printf("verify %s: %d %s\n", receipt, status, message ? message : "");
    samebits_string_free(message);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 8) {
        fprintf(stderr, "usage: %s MODEL.onnx INPUT_NAME D0,D1,... RUN_RECEIPT "
                        "[MODEL.gguf PROMPT GEN_RECEIPT]\n", argv[0]);
        return 2;
    }
    size_t shape[8], rank = 0, count = 1;
    for (char *dim = strtok(argv[3], ","); dim && rank < 8; dim = strtok(NULL, ",")) {
        shape[rank] = (size_t)strtoul(dim, NULL, 10);
        count *= shape[rank++];
    }
    float *data = malloc(count * sizeof(float));
    uint32_t state = 12345u; /* a fixed LCG: the same input on every machine */
    for (size_t i = 0; i < count; i++) {
        state = state * 1664525u + 1013904223u;
        data[i] = (float)(state >> 8) / 16777216.0f - 0.5f;
    }

    char *error = NULL;
    SamebitsModel *model = samebits_compile(argv[1], NULL, NULL, &error);
    if (!model) return fail("compile", error);
    SamebitsTensorView input = {argv[2], "f32", shape, rank, data, count * sizeof(float)};
    SamebitsOutputs *outputs = samebits_run(model, &input, 1, argv[4], &error);
    if (!outputs) return fail("run", error);
    for (size_t i = 0; i < samebits_outputs_count(outputs); i++) {
        size_t out_rank = 0, size = 0;
        const size_t *dims = samebits_outputs_shape(outputs, i, &out_rank);
        const float *values = samebits_outputs_data(outputs, i, &size);
        printf("output %s %s [", samebits_outputs_name(outputs, i),
               samebits_outputs_dtype(outputs, i));
        for (size_t d = 0; d < out_rank; d++) printf(d ? ",%zu" : "%zu", dims[d]);
        printf("] %zu bytes, first value %.9g\n", size, size >= 4 ? values[0] : 0.0);
    }
    samebits_outputs_free(outputs);

    /* A wrong input name is an error message, not a crash. */
    SamebitsTensorView wrong = {"no_such_input", "f32", shape, rank, data, count * sizeof(float)};
    if (samebits_run(model, &wrong, 1, NULL, &error) != NULL) return 1;
    printf("wrong input: %s\n", error);
    samebits_string_free(error);
    samebits_model_free(model);
    free(data);
    if (verify(argv[4]) != 0) return 1;

    if (argc == 8) {
        char *text = samebits_generate(argv[5], argv[6], 8, 0.0f, 0, 1.0f, 0, false, NULL,
                                       argv[7], &error);
        if (!text) return fail("generate", error);
        printf("generated: %s\n", text);
        samebits_string_free(text);
        if (samebits_generate(argv[5], argv[6], 8, -1.0f, 0, 1.0f, 0, false, NULL, NULL,
                              &error) != NULL) return 1;
        printf("bad temperature: %s\n", error);
        samebits_string_free(error);
        if (verify(argv[7]) != 0) return 1;
    }
    return 0;
}
