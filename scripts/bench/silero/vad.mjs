#!/usr/bin/env node
// vad.mjs DIR — run the Silero VAD v5 ONNX model over every DIR/*.wav and
// write DIR/NAME.silero.json next to each. A benchmark's reference peer;
// never part of the body. See README.md.
//
// The per-chunk call mirrors snakers4/silero-vad src/silero_vad/utils_vad.py,
// class OnnxWrapper (v5.1.x and later): 512-sample chunks at 16 kHz, the last
// 64 samples of the previous model input prepended (zeros before the first
// chunk) so the input is [1, 576], the `state` tensor [2, 1, 128] (zeros at
// the start) carried from each call's `stateN` to the next, `sr` an int64
// scalar 16000, a last partial chunk zero-padded to 512.

import { readdirSync, readFileSync, writeFileSync, statSync } from 'node:fs';
import { join, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const RATE = 16000;
const CHUNK = 512;
const CONTEXT = 64;
const STATE_DIMS = [2, 1, 128];

const MODEL = process.env.SILERO_VAD_MODEL ||
  fileURLToPath(new URL('./node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx', import.meta.url));

function die(msg, code = 1) {
  process.stderr.write(`vad.mjs: ${msg}\n`);
  process.exit(code);
}

// parseWav returns the samples of a 16 kHz mono s16le RIFF/WAVE file as
// float32 in [-1, 1) (int16 / 32768), or throws naming what is wrong.
function parseWav(buf) {
  if (buf.length < 12) throw new Error(`too short for a RIFF header (${buf.length} bytes)`);
  if (buf.toString('latin1', 0, 4) !== 'RIFF') throw new Error(`not a RIFF file (starts with ${JSON.stringify(buf.toString('latin1', 0, 4))})`);
  if (buf.toString('latin1', 8, 12) !== 'WAVE') throw new Error(`RIFF form is ${JSON.stringify(buf.toString('latin1', 8, 12))}, not WAVE`);
  let fmt = null;
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('latin1', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + size > buf.length) throw new Error(`fmt chunk has bad size ${size}`);
      let format = buf.readUInt16LE(body);
      if (format === 0xfffe) { // WAVE_FORMAT_EXTENSIBLE: the real format is the sub-format GUID's first two bytes
        if (size < 40) throw new Error(`extensible fmt chunk too short (${size} bytes)`);
        const guidTail = buf.subarray(body + 26, body + 40).toString('hex');
        if (guidTail !== '000000001000800000aa00389b71') throw new Error('extensible fmt chunk has an unknown sub-format GUID');
        format = buf.readUInt16LE(body + 24);
      }
      fmt = {
        format,
        channels: buf.readUInt16LE(body + 2),
        rate: buf.readUInt32LE(body + 4),
        blockAlign: buf.readUInt16LE(body + 12),
        bits: buf.readUInt16LE(body + 14),
      };
      if (fmt.format !== 1) throw new Error(`audio format ${fmt.format} is not integer PCM (1)`);
      if (fmt.channels !== 1) throw new Error(`${fmt.channels} channels, need mono`);
      if (fmt.rate !== RATE) throw new Error(`sample rate ${fmt.rate} Hz, need ${RATE}`);
      if (fmt.bits !== 16 || fmt.blockAlign !== 2) throw new Error(`${fmt.bits}-bit samples (block align ${fmt.blockAlign}), need signed 16-bit`);
    } else if (id === 'data') {
      if (!fmt) throw new Error('data chunk before fmt chunk');
      if (body + size > buf.length) throw new Error(`data chunk claims ${size} bytes but only ${buf.length - body} follow (truncated or streamed file)`);
      if (size % 2) throw new Error(`data chunk size ${size} is odd, not whole 16-bit samples`);
      const n = size / 2;
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = buf.readInt16LE(body + 2 * i) / 32768;
      return out;
    }
    off = body + size + (size & 1); // chunks are padded to even length
  }
  throw new Error(fmt ? 'no data chunk' : 'no fmt chunk');
}

function feeds(ort, input, state) {
  return {
    input: new ort.Tensor('float32', input, [1, CONTEXT + CHUNK]),
    state,
    sr: new ort.Tensor('int64', BigInt64Array.of(BigInt(RATE)), []),
  };
}

// runSilero returns the speech probability of each 512-sample chunk.
async function runSilero(ort, session, samples) {
  let state = new ort.Tensor('float32', new Float32Array(2 * 1 * 128), STATE_DIMS);
  let context = new Float32Array(CONTEXT);
  const probs = [];
  for (let start = 0; start < samples.length; start += CHUNK) {
    const input = new Float32Array(CONTEXT + CHUNK); // zero-filled: pads a last partial chunk
    input.set(context, 0);
    input.set(samples.subarray(start, start + CHUNK), CONTEXT);
    const out = await session.run(feeds(ort, input, state));
    probs.push(out.output.data[0]);
    state = out.stateN;
    context = input.slice(CONTEXT + CHUNK - CONTEXT);
  }
  return probs;
}

async function main() {
  const dir = process.argv[2];
  if (!dir || process.argv.length > 3) die('usage: node vad.mjs DIR   (runs Silero VAD v5 over DIR/*.wav)', 2);
  let names;
  try {
    if (!statSync(dir).isDirectory()) die(`${dir} is not a directory`);
    names = readdirSync(dir).filter((f) => /\.wav$/i.test(f)).sort();
  } catch (e) {
    die(`cannot read directory ${dir}: ${e.message}`);
  }
  if (names.length === 0) die(`no .wav files in ${dir}`);

  let ort;
  try {
    ort = (await import('onnxruntime-node')).default;
  } catch (e) {
    die(`cannot load onnxruntime-node (run "ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund" in ${fileURLToPath(new URL('.', import.meta.url))}): ${e.message}`);
  }
  let session;
  try {
    session = await ort.InferenceSession.create(MODEL, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
  } catch (e) {
    die(`cannot load the Silero VAD model ${MODEL}: ${e.message}`);
  }
  for (const want of ['input', 'state', 'sr']) {
    if (!session.inputNames.includes(want)) die(`model ${MODEL} has inputs ${session.inputNames.join(', ')}, expected input, state, sr`);
  }
  for (const want of ['output', 'stateN']) {
    if (!session.outputNames.includes(want)) die(`model ${MODEL} has outputs ${session.outputNames.join(', ')}, expected output, stateN`);
  }
  // One untimed warm-up call on silence with a throwaway state, so the first
  // file's timing does not carry the session's one-off first-run cost.
  await session.run(feeds(ort, new Float32Array(CONTEXT + CHUNK),
    new ort.Tensor('float32', new Float32Array(2 * 1 * 128), STATE_DIMS)));

  let failed = 0;
  for (const file of names) {
    const path = join(dir, file);
    const name = basename(file).replace(/\.wav$/i, '');
    let samples;
    try {
      samples = parseWav(readFileSync(path));
    } catch (e) {
      process.stderr.write(`vad.mjs: ${path}: ${e.message}\n`);
      failed++;
      continue;
    }
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const probs = await runSilero(ort, session, samples);
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuS = (cpu.user + cpu.system) / 1e6;
    const audioS = samples.length / RATE;
    const result = {
      rate: RATE,
      chunk: CHUNK,
      probs: probs.map((p) => Math.round(p * 1e4) / 1e4),
      audio_s: audioS,
      cpu_s: cpuS,
      wall_s: wall,
    };
    writeFileSync(join(dir, `${name}.silero.json`), JSON.stringify(result) + '\n');
    const perSec = audioS > 0 ? (cpuS * 1000 / audioS).toFixed(2) : 'n/a';
    process.stdout.write(`${name}: ${probs.length} chunks, ${audioS.toFixed(3)} s of audio, ${perSec} ms CPU per second of audio\n`);
  }
  await session.release();
  if (failed) die(`${failed} of ${names.length} file(s) refused`);
}

main().catch((e) => die(e.stack || String(e)));
