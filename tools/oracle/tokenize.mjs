// Tokenizer oracle: llama.cpp (through node-llama-cpp) tokenizes and detokenizes on request.
//
// Reads one JSON request on stdin (or from the file named by the first argument):
//   {
//     "model": "/path/to/model.gguf",
//     "texts": ["...", ...],            // each is tokenized once per entry of "special"
//     "special": [false, true],         // parse_special values to use (default [false])
//     "decode": [{"ids": [..], "special": bool}, ...],   // extra detokenize calls (optional)
//     "pieces": false,                  // if true: detokenize([id]) for every id, special=false and true
//     "info": false                     // if true: BOS/EOS/EOT, add flags, EOG and control id lists
//   }
// Prints one JSON object on stdout:
//   {
//     "tokenized": [{"text": i, "special": b, "ids": [..], "detok": "..."}],   // detok = detokenize(ids, special)
//     "decoded": ["...", ...],
//     "pieces": {"normal": [...], "special": [...]},
//     "info": {"n_vocab", "bos", "eos", "eot", "add_bos", "add_eos", "eog": [..], "control": [..]}
//   }
// Tokenization never adds BOS/EOS: node-llama-cpp's model.tokenize calls llama.cpp with add_special=false.
import fs from "node:fs";
import { getLlama } from "node-llama-cpp";

function readRequest() {
    const src = process.argv[2] ? fs.readFileSync(process.argv[2], "utf8") : fs.readFileSync(0, "utf8");
    return JSON.parse(src);
}

const req = readRequest();
const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1, logLevel: "error" });
const model = await llama.loadModel({ modelPath: req.model, gpuLayers: 0, vocabOnly: true });

const out = { tokenized: [], decoded: [] };
const modes = req.special ?? [false];
(req.texts ?? []).forEach((text, i) => {
    for (const special of modes) {
        const ids = model.tokenize(text, special);
        out.tokenized.push({ text: i, special, ids, detok: model.detokenize(ids, special) });
    }
});
for (const d of req.decode ?? []) {
    out.decoded.push(model.detokenize(d.ids, Boolean(d.special)));
}

const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 0;
if (req.pieces) {
    const normal = [];
    const special = [];
    for (let id = 0; id < nVocab; id++) {
        normal.push(model.detokenize([id], false));
        special.push(model.detokenize([id], true));
    }
    out.pieces = { normal, special };
}
if (req.info) {
    const eog = [];
    const control = [];
    for (let id = 0; id < nVocab; id++) {
        if (model._model.isEogToken(id)) eog.push(id);
        if (model.getTokenAttributes(id).control) control.push(id);
    }
    const t = model.tokens;
    out.info = {
        n_vocab: nVocab,
        bos: t.bos,
        eos: t.eos,
        eot: t.eot,
        add_bos: t.shouldPrependBosToken,
        add_eos: t.shouldAppendEosToken,
        eog,
        control,
    };
}

await model.dispose();
await llama.dispose();
process.stdout.write(JSON.stringify(out));
