#!/usr/bin/env node
// llama.cpp oracle for our tests, through node-llama-cpp (pinned in package.json).
//
// Reads one JSON request from stdin and prints one JSON object to stdout.
// Errors: prints {"error": "..."} and exits with status 1.
//
// Requests:
//
//   {"cmd": "generate", "model": PATH,
//    "prompts": [{"text": "...", "special": false} | {"tokens": [ids]}],
//    "n_predict": 64, "context_size": 512}
//     For each prompt, evaluates it from an empty KV cache and decodes greedily
//     (temperature 0, no top-k/top-p/min-p, no penalties). A text prompt is
//     tokenized like llama.cpp does for `add_special = true`: BOS is prepended
//     when the model asks for it (tokenizer.ggml.add_bos_token / vocab default)
//     and EOS appended when it asks for that; `special` says whether special
//     token texts in the prompt are parsed as special tokens. Token prompts are
//     fed exactly as given. Generation stops at n_predict tokens or at the
//     first end-of-generation token (which is included in `tokens`).
//     Response: {"model": {...}, "results": [{"prompt_tokens": [...],
//       "tokens": [...], "stop": "eog" | "n_predict", "text": "...",
//       "text_special": "..."}]}
//     `text` detokenizes the generated tokens without special-token texts,
//     `text_special` with them.
//
//   {"cmd": "logits", "model": PATH, "tokens": [ids], "positions": [i, ...],
//    "top_k": 5, "context_size": 512}
//     Evaluates `tokens` from an empty cache and, for each position i (an index
//     into `tokens`), reports the top_k candidates for the token that follows
//     tokens[0..=i]. llama.cpp does not expose raw logits here, so each entry
//     gives `logit_delta` = logit - (top logit), computed from the sampler's
//     softmax over the top_k candidates (temperature 1), which is exact for
//     differences. With "full_softmax": true the softmax covers the whole
//     vocabulary and each entry also has `logprob`, llama.cpp's log-probability
//     of that token. Response: {"model": {...}, "positions": [{"position": i,
//       "top": [{"id": t, "logit_delta": d, "logprob": l}, ...]}]}
//
//   {"cmd": "infill", "model": PATH, "infills": [{"prefix": "...", "suffix": "..."}],
//    "n_predict": 32, "context_size": 512}
//     Fill-in-the-middle through node-llama-cpp's LlamaCompletion.generateInfillCompletion,
//     greedy (temperature 0, no top-k/top-p/min-p, no repeat penalty). Response:
//     {"model": {...}, "fim": {"prefix": id|null, "suffix": id|null, "middle": id|null},
//      "results": [{"text": "...", "tokens": [ids]}]}
//
//   {"cmd": "info", "model": PATH}
//     Response: {"model": {...}} only.
//
//   {"cmd": "check"}
//     Loads llama.cpp without a model. Response: {"ok": true, "build_type":
//     "prebuilt", "llama_cpp": {"repo": ..., "release": ...}}.
//
// The "model" object in every response: {"bos": id|null, "eos": id|null,
// "eot": id|null, "add_bos": bool, "add_eos": bool, "n_vocab": n}.
//
// Everything runs on the CPU with one thread, so results are deterministic.

import process from "node:process";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

async function readStdin() {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    return Buffer.concat(chunks).toString("utf8");
}

function fail(message) {
    process.stdout.write(JSON.stringify({ error: String(message) }) + "\n");
    process.exit(1);
}

function checkTokens(tokens, nVocab, what) {
    if (!Array.isArray(tokens) || tokens.length === 0)
        throw new Error(`${what}: expected a non-empty array of token ids`);
    for (const t of tokens)
        if (!Number.isInteger(t) || t < 0 || t >= nVocab)
            throw new Error(`${what}: token id ${t} is not in [0, ${nVocab})`);
}

function modelInfo(model, nVocab) {
    return {
        bos: model.tokens.bos,
        eos: model.tokens.eos,
        eot: model.tokens.eot,
        add_bos: model.tokens.shouldPrependBosToken,
        add_eos: model.tokens.shouldAppendEosToken,
        n_vocab: nVocab,
    };
}

function vocabSize(model) {
    const n = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (!Number.isInteger(n)) throw new Error("model has no tokenizer.ggml.tokens");
    return n;
}

function promptTokens(model, prompt, nVocab, index) {
    if (Array.isArray(prompt.tokens)) {
        checkTokens(prompt.tokens, nVocab, `prompts[${index}].tokens`);
        return prompt.tokens.slice();
    }
    if (typeof prompt.text !== "string")
        throw new Error(`prompts[${index}] needs "text" (string) or "tokens" (array)`);
    const tokens = [];
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) tokens.push(model.tokens.bos);
    tokens.push(...model.tokenize(prompt.text, prompt.special === true));
    if (model.tokens.shouldAppendEosToken && model.tokens.eos != null) tokens.push(model.tokens.eos);
    if (tokens.length === 0) throw new Error(`prompts[${index}] tokenizes to nothing`);
    return tokens;
}

async function generate(model, context, req, nVocab) {
    const nPredict = req.n_predict ?? 64;
    if (!Number.isInteger(nPredict) || nPredict < 0) throw new Error("n_predict must be a non-negative integer");
    if (!Array.isArray(req.prompts)) throw new Error('"prompts" must be an array');
    const sequence = context.getSequence();
    const results = [];
    for (const [i, prompt] of req.prompts.entries()) {
        const input = promptTokens(model, prompt, nVocab, i);
        if (input.length + nPredict > context.contextSize)
            throw new Error(`prompts[${i}]: ${input.length} + n_predict ${nPredict} exceeds context ${context.contextSize}`);
        await sequence.clearHistory();
        const generated = [];
        let stop = "n_predict";
        if (nPredict > 0) {
            const options = { temperature: 0, topK: 0, topP: 1, minP: 0, yieldEogToken: true };
            for await (const token of sequence.evaluate(input, options)) {
                generated.push(token);
                if (model.isEogToken(token)) {
                    stop = "eog";
                    break;
                }
                if (generated.length >= nPredict) break;
            }
        }
        results.push({
            prompt_tokens: input,
            tokens: generated,
            stop,
            text: model.detokenize(generated, false),
            text_special: model.detokenize(generated, true),
        });
    }
    return { results };
}

async function infill(model, context, req) {
    const nPredict = req.n_predict ?? 32;
    if (!Number.isInteger(nPredict) || nPredict < 1) throw new Error("n_predict must be a positive integer");
    if (!Array.isArray(req.infills)) throw new Error('"infills" must be an array');
    const { LlamaCompletion } = await import("node-llama-cpp");
    const fim = model.tokens.infill;
    const results = [];
    for (const [i, item] of req.infills.entries()) {
        if (typeof item.prefix !== "string" || typeof item.suffix !== "string")
            throw new Error(`infills[${i}] needs "prefix" and "suffix" strings`);
        const sequence = context.getSequence();
        const completion = new LlamaCompletion({ contextSequence: sequence });
        const tokens = [];
        const text = await completion.generateInfillCompletion(item.prefix, item.suffix, {
            onToken: (chunk) => tokens.push(...chunk),
            maxTokens: nPredict,
            temperature: 0,
            topK: 0,
            topP: 1,
            minP: 0,
            repeatPenalty: false,
        });
        results.push({ text, tokens });
        completion.dispose();
        sequence.dispose();
    }
    return { fim: { prefix: fim.prefix ?? null, suffix: fim.suffix ?? null, middle: fim.middle ?? null }, results };
}

async function logits(model, context, req, nVocab) {
    checkTokens(req.tokens, nVocab, "tokens");
    const topK = req.top_k ?? 5;
    if (!Number.isInteger(topK) || topK < 1) throw new Error("top_k must be a positive integer");
    if (!Array.isArray(req.positions) || req.positions.length === 0)
        throw new Error('"positions" must be a non-empty array');
    const wanted = new Set();
    for (const p of req.positions) {
        if (!Number.isInteger(p) || p < 0 || p >= req.tokens.length)
            throw new Error(`position ${p} is not an index into tokens`);
        wanted.add(p);
    }
    if (req.tokens.length > context.contextSize)
        throw new Error(`${req.tokens.length} tokens exceed context ${context.contextSize}`);
    const sequence = context.getSequence();
    // With "full_softmax", llama.cpp keeps the whole vocabulary in the softmax, so each entry
    // also carries its exact log-probability (`logprob`).
    const full = req.full_softmax === true;
    const options = { temperature: 1, topK: full ? nVocab : topK, topP: 1, minP: 0 };
    const input = req.tokens.map((t, i) =>
        wanted.has(i) ? [t, { generateNext: { probabilities: true, options } }] : t);
    const output = await sequence.controlledEvaluate(input);
    const positions = [];
    for (const p of req.positions) {
        const probs = output[p]?.next?.probabilities;
        if (probs == null) throw new Error(`no probabilities returned for position ${p}`);
        const entries = [...probs.entries()].sort((a, b) => b[1] - a[1]).slice(0, topK);
        const top = Math.log(entries[0][1]);
        positions.push({
            position: p,
            top: entries.map(([id, prob]) => ({
                id,
                logit_delta: Math.log(prob) - top,
                ...(full ? { logprob: Math.log(prob) } : {}),
            })),
        });
    }
    return { positions };
}

async function main() {
    let req;
    try {
        req = JSON.parse(await readStdin());
    } catch (e) {
        fail(`request is not valid JSON: ${e.message}`);
    }
    if (req == null || typeof req !== "object") fail("request must be a JSON object");
    const cmd = req.cmd;
    if (!["generate", "logits", "infill", "info", "check"].includes(cmd)) fail(`unknown cmd ${JSON.stringify(cmd)}`);
    if (cmd !== "check" && typeof req.model !== "string") fail('"model" (path to a GGUF file) is required');

    const llama = await getLlama({
        gpu: false,
        build: "never",
        maxThreads: 1,
        logLevel: LlamaLogLevel.error,
        progressLogs: false,
    });
    if (cmd === "check") {
        const out = { ok: true, build_type: llama.buildType, llama_cpp: llama.llamaCppRelease };
        await llama.dispose();
        process.stdout.write(JSON.stringify(out) + "\n");
        return;
    }
    const model = await llama.loadModel({ modelPath: req.model, gpuLayers: 0 });
    const nVocab = vocabSize(model);
    const info = modelInfo(model, nVocab);
    let body = {};
    if (cmd !== "info") {
        const contextSize = req.context_size ?? 512;
        if (!Number.isInteger(contextSize) || contextSize < 1) fail("context_size must be a positive integer");
        const context = await model.createContext({
            contextSize,
            sequences: 1,
            threads: { ideal: 1, min: 1 },
            flashAttention: false,
        });
        if (cmd === "generate") body = await generate(model, context, req, nVocab);
        else if (cmd === "infill") body = await infill(model, context, req);
        else body = await logits(model, context, req, nVocab);
        await context.dispose();
    }
    await model.dispose();
    await llama.dispose();
    process.stdout.write(JSON.stringify({ model: info, ...body }) + "\n");
}

main().catch((e) => fail(e?.stack ?? e));
