import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Issue 51: npm runs a script through `sh -c`; without `exec` the shell stays between a signal
 * sent to the script's pid and the process it started, so `kill -INT <pid>` (what a supervisor
 * or an operator's script does) left `npm run temporal`'s Temporal server running. Every script
 * that starts a long-lived svc process replaces the shell with it.
 */
describe('package.json: long-running scripts exec their process', () => {
  it('start, worker, temporal and temporal:cluster replace npm’s shell with the svc process', () => {
    const { scripts } = JSON.parse(fs.readFileSync(path.join(__dirname, '../../package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    const longRunning = Object.entries(scripts).filter(([, command]) => /cli\/svc\.ts (start|worker|temporal)\b/.test(command));
    assert.deepEqual(longRunning.map(([name]) => name).sort(), ['start', 'temporal', 'temporal:cluster', 'worker']);
    for (const [name, command] of longRunning) assert.match(command, /^exec /, `npm run ${name}: ${command}`);
  });
});
