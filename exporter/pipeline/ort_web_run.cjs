// Runs an ONNX model in ONNX Runtime Web's WebAssembly backend under Node.js, for onnxlens's
// deploy stage (exporter/pipeline/ort_web_runner.py): `node ort_web_run.cjs DIR`. DIR holds
// model.onnx and request.json ({"inputs": [{"name", "type", "dims", "file"}], "externalData":
// [the files of the model's external data]}, each input's raw bytes in its file); the answer
// is DIR/answer.json: {"step": "load" | "run", "message"} on a failure, else
// {"outputs": [...]} as the inputs are, their bytes written beside it.
// onnxruntime-web is found through NODE_PATH (the caller sets it).
"use strict";
const fs = require("fs");
const path = require("path");

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array, float16: Uint16Array,
};

function answer(dir, value) {
  fs.writeFileSync(path.join(dir, "answer.json"), JSON.stringify(value));
}

async function main(dir) {
  const ort = require("onnxruntime-web");
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = "fatal";
  const request = JSON.parse(fs.readFileSync(path.join(dir, "request.json"), "utf8"));
  let session;
  try {
    const externalData = (request.externalData || []).map(
      (file) => ({ path: file, data: fs.readFileSync(path.join(dir, file)) }));
    session = await ort.InferenceSession.create(fs.readFileSync(path.join(dir, "model.onnx")),
                                                { executionProviders: ["wasm"], externalData });
  } catch (error) {
    return answer(dir, { step: "load", message: String(error && error.message || error) });
  }
  const feeds = {};
  for (const input of request.inputs) {
    const bytes = fs.readFileSync(path.join(dir, input.file));
    const Kind = ARRAYS[input.type];
    const copy = new Uint8Array(bytes.length);  // aligned for the typed array
    copy.set(bytes);
    feeds[input.name] = new ort.Tensor(input.type, new Kind(copy.buffer, 0,
                                       bytes.length / Kind.BYTES_PER_ELEMENT), input.dims);
  }
  let results;
  try {
    results = await session.run(feeds);
  } catch (error) {
    return answer(dir, { step: "run", message: String(error && error.message || error) });
  }
  const outputs = session.outputNames.map((name, index) => {
    const tensor = results[name];
    const file = `output${index}.bin`;
    const data = tensor.data;
    fs.writeFileSync(path.join(dir, file), Buffer.from(data.buffer, data.byteOffset,
                                                       data.byteLength));
    return { name, type: tensor.type, dims: tensor.dims, file };
  });
  answer(dir, { outputs });
}

main(process.argv[2]).catch((error) => {
  answer(process.argv[2], { step: "load", message: String(error && error.stack || error) });
});
