// Runs the reference's `loop render-hooks` (or `resolve-model`) in one node process for many
// jobs (the differential tests call it once per batch instead of starting node thousands of
// times).
//
//   node tests/reference_driver.cjs /path/to/gsd-tools.cjs results.jsonl < jobs.jsonl
//
// Each input line is {"cwd", "point", "activeCap"?} or {"cwd", "resolveModel": AGENT}; each
// output line is {"stdout", "stderr"} with exactly the bytes the CLI would have written
// (`@file:` payloads read back inline).
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const lib = path.join(path.dirname(process.argv[2]), 'lib');
const { cmdLoopRenderHooks } = require(path.join(lib, 'loop-resolver.cjs'));

let out = '';
let err = '';
const realWriteSync = fs.writeSync;
fs.writeSync = function (fd, buf, offset, length, ...rest) {
  if (fd === 1 || fd === 2) {
    const b = Buffer.isBuffer(buf) ? buf : Buffer.from(String(buf));
    const start = typeof offset === 'number' ? offset : 0;
    const end = typeof length === 'number' ? start + length : b.length;
    const text = b.subarray(start, end).toString('utf8');
    if (fd === 1) out += text; else err += text;
    return end - start;
  }
  return realWriteSync.call(fs, fd, buf, offset, length, ...rest);
};
process.stderr.write = (chunk) => { err += String(chunk); return true; };
process.stdout.write = (chunk) => { out += String(chunk); return true; };
process.exit = (code) => { throw new Error('exit ' + code); };

const lines = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean);
const results = [];
for (const line of lines) {
  const job = JSON.parse(line);
  out = '';
  err = '';
  try {
    if (job.resolveModel !== undefined) {
      // what `gsd-tools resolve-model AGENT` calls (its router: routeResolveModel)
      require(path.join(lib, 'commands.cjs')).cmdResolveModel(job.cwd, job.resolveModel, false);
    } else {
      const options = job.activeCap ? { activeCap: job.activeCap } : {};
      cmdLoopRenderHooks(job.cwd, job.point, true, options);
    }
  } catch (e) {
    err += 'driver: ' + (e && e.message);
  }
  if (out.startsWith('@file:')) {
    const file = out.slice('@file:'.length).trim();
    out = fs.readFileSync(file, 'utf8');
    fs.unlinkSync(file);
  }
  results.push(JSON.stringify({ stdout: out, stderr: err }));
}
fs.writeFileSync(process.argv[3], results.join('\n') + '\n');
