// ONNX Runtime peer of attn's inference benchmarks: times one ONNX model on the CPU execution
// provider with graph optimizations "all", sequential execution and T intra-op threads.
//
//   node bench/peers/ort/run.mjs --model m.onnx --inputs inputs.json [--threads 2] [--iters 20]
//        [--warmup 3] [--outputs DIR]
//
// inputs.json: [{"name": "input_ids", "dtype": "int64"|"float32"|"int32", "dims": [1, 128],
// "file": "input_ids.bin"}, ...]; each file holds the tensor's elements, little-endian, row-major
// (numpy's tofile), paths relative to inputs.json. --outputs DIR writes each output as DIR/<name>.bin
// plus DIR/outputs.json (same format), so the caller can check ONNX Runtime computes what its model
// computes. Prints one JSON line: latency median / p90 / min in ms over the timed runs.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

function parseArgs(argv) {
  const a = {threads: 2, iters: 20, warmup: 3, outputs: null, model: null, inputs: null};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in a) || i + 1 >= argv.length) {
      throw new Error(`run.mjs: unknown or incomplete option '${argv[i]}' (expected --model, --inputs, ` +
                      `--threads, --iters, --warmup, --outputs)`);
    }
    a[key] = ['threads', 'iters', 'warmup'].includes(key) ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!a.model || !a.inputs) throw new Error('run.mjs: --model and --inputs are required');
  return a;
}

const typed = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array};

function loadInputs(specPath) {
  const dir = path.dirname(specPath);
  const feeds = {};
  for (const s of JSON.parse(fs.readFileSync(specPath, 'utf8'))) {
    const Type = typed[s.dtype];
    if (!Type) throw new Error(`run.mjs: input '${s.name}': dtype '${s.dtype}' is not float32, int64 or int32`);
    const bytes = fs.readFileSync(path.join(dir, s.file));
    const count = s.dims.reduce((x, y) => x * y, 1);
    if (bytes.length !== count * Type.BYTES_PER_ELEMENT) {
      throw new Error(`run.mjs: input '${s.name}': expected ${count * Type.BYTES_PER_ELEMENT} bytes for dims ` +
                      `[${s.dims}] ${s.dtype}, the file holds ${bytes.length}`);
    }
    const data = new Type(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    feeds[s.name] = new ort.Tensor(s.dtype, data, s.dims);
  }
  return feeds;
}

function writeOutputs(dir, results) {
  fs.mkdirSync(dir, {recursive: true});
  const spec = [];
  for (const [name, t] of Object.entries(results)) {
    const file = `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.bin`;
    fs.writeFileSync(path.join(dir, file), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    spec.push({name, dtype: t.type, dims: t.dims, file});
  }
  fs.writeFileSync(path.join(dir, 'outputs.json'), JSON.stringify(spec));
}

const a = parseArgs(process.argv.slice(2));
const session = await ort.InferenceSession.create(a.model, {
  executionProviders: ['cpu'], graphOptimizationLevel: 'all', executionMode: 'sequential',
  intraOpNumThreads: a.threads, interOpNumThreads: 1,
});
const feeds = loadInputs(a.inputs);
let results = null;
for (let i = 0; i < a.warmup; i++) results = await session.run(feeds);
const times = [];
for (let i = 0; i < a.iters; i++) {
  const t = process.hrtime.bigint();
  results = await session.run(feeds);
  times.push(Number(process.hrtime.bigint() - t) / 1e6);
}
if (a.outputs) writeOutputs(a.outputs, results ?? await session.run(feeds));
times.sort((x, y) => x - y);
const at = (q) => times[Math.min(times.length - 1, Math.max(0, Math.ceil(q * times.length) - 1))];
const rss = process.memoryUsage().rss;
console.log(JSON.stringify({
  peer: 'onnxruntime', onnxruntime: ort.env.versions.common, threads: a.threads, graph_optimization: 'all',
  iters: a.iters, latency_ms: {median: at(0.5), p90: at(0.9), min: times[0]}, rss_mb: rss / 2 ** 20,
}));
