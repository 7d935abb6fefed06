// Runs the reference's `verify artifacts PLAN` and `verify key-links PLAN` (with and without
// --raw) in one node process for many plans (tests/plans/test_musthaves_reference.py).
//
//   node tests/musthaves_driver.cjs /path/to/gsd-tools.cjs results.jsonl < jobs.jsonl
//
// Each input line is {"cwd", "plan", "command": "artifacts" | "key-links", "raw"}; each output
// line is {"stdout", "stderr"}: the bytes the CLI would have written, or "driver: <error>" on
// stderr where the CLI would have crashed (a folder read as a file: EISDIR).
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const lib = path.join(path.dirname(process.argv[2]), 'lib');
const verify = require(path.join(lib, 'verify.cjs'));

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

const commands = { artifacts: verify.cmdVerifyArtifacts, 'key-links': verify.cmdVerifyKeyLinks };
const lines = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean);
const results = [];
for (const line of lines) {
  const job = JSON.parse(line);
  out = '';
  err = '';
  try {
    commands[job.command](job.cwd, job.plan, job.raw);
  } catch (e) {
    err += 'driver: ' + (e && e.message);
  }
  results.push(JSON.stringify({ stdout: out, stderr: err }));
}
fs.writeFileSync(process.argv[3], results.join('\n') + '\n');
