// serve.mjs - starting `vx serve` for the end-to-end tests: on a free port
// (--port 0, the port read from its log), with the repository's binary and
// fixtures unless VX_BIN / VX_FIXTURES say otherwise.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
export const VX = process.env.VX_BIN || path.join(repo, 'build/vx');
export const FIXTURES = process.env.VX_FIXTURES || path.resolve(repo, '../shared/fixtures');

// Spawns `vx serve ARGS` and resolves once it listens: { proc, exited (the
// exit event's promise), port, base, log() }.
export async function spawnServer(args, env = process.env) {
  const proc = spawn(VX, ['serve', ...args, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'], env });
  const exited = once(proc, 'exit');
  let log = '';
  proc.stderr.on('data', (d) => { log += d.toString(); });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 20000);
    const check = () => {
      const m = log.match(/listening on http:\/\/[^\s]*:(\d+)/);
      if (m) { clearTimeout(timer); proc.stderr.off('data', check); resolve(Number(m[1])); }
    };
    proc.stderr.on('data', check);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
  });
  return { proc, exited, port, base: `http://127.0.0.1:${port}`, log: () => log };
}
