// The differential corpus's own run of ONNX Runtime Web (tests/corpus/truth.py, `_on_ort_web`):
// `node ort_web_truth.cjs DIR` reads DIR/model.onnx and DIR/inputs.json ([{name, type, dims,
// values}], int64 values as strings), runs the model on the wasm backend and writes
// DIR/result.json: {error, step} or {outputs: [{type, dims, values}]}, a non-finite number as
// the string "NaN", "Infinity" or "-Infinity". Written apart from onnxlens's own runner
// (exporter/pipeline/ort_web_run.cjs) so that the judge shares no code with what it judges.
"use strict";
const fs = require("fs");
const path = require("path");

const TYPED = { float32: Float32Array, float64: Float64Array, int32: Int32Array,
                int64: BigInt64Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };

function plain(value) {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
}

async function main(dir) {
  const write = (result) => fs.writeFileSync(path.join(dir, "result.json"), JSON.stringify(result));
  const ort = require("onnxruntime-web");
  ort.env.wasm.numThreads = 1;
  let session;
  try {
    session = await ort.InferenceSession.create(path.join(dir, "model.onnx"),
                                                { executionProviders: ["wasm"] });
  } catch (error) {
    return write({ step: "load", error: String(error.message || error) });
  }
  const feeds = {};
  for (const input of JSON.parse(fs.readFileSync(path.join(dir, "inputs.json"), "utf8"))) {
    const values = input.type === "int64" ? input.values.map(BigInt) : input.values;
    feeds[input.name] = new ort.Tensor(input.type, TYPED[input.type].from(values), input.dims);
  }
  let results;
  try {
    results = await session.run(feeds);
  } catch (error) {
    return write({ step: "run", error: String(error.message || error) });
  }
  write({ outputs: session.outputNames.map((name) => ({
    type: results[name].type, dims: results[name].dims,
    values: Array.from(results[name].data, plain) })) });
}

main(process.argv[2]);
