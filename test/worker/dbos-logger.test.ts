import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { dbosLogger } from '../../worker/dbos-logger';

/** Issue 51: every restart printed DBOS warnings with stack traces for runs started again; they are expected. */
describe('worker/dbos-logger: what DBOS says, at the level it deserves', () => {
  const capture = () => {
    const lines: { level: number; msg: string; workflowId?: string }[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    return { lines, log: dbosLogger(pino({ level: 'trace' }, sink)) };
  };
  const flush = () => new Promise((r) => setImmediate(r));

  it('a run started again under its id is a debug line without a stack; other warnings stay warnings', async () => {
    const { lines, log } = capture();
    log.warn(
      'Workflow (0193b0a4-ae53-7b70-8f62-8d0e2a4c5b67) already exists in queue: svc-live-transactional, but the provided queue name is: . The queue is not updated. Error\n    at SystemDatabase.initWorkflowStatus (x.js:1:1)',
    );
    log.warn('Contention detected in queue svc-live-bulk.');
    log.info('DBOS launched');
    await flush();
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.workflowId]),
      [
        [20, 'run already started; it keeps its queue', '0193b0a4-ae53-7b70-8f62-8d0e2a4c5b67'],
        [40, 'Contention detected in queue svc-live-bulk.', undefined],
        [20, 'DBOS launched', undefined],
      ],
    );
    assert.ok(!JSON.stringify(lines).includes('initWorkflowStatus'), 'no stack');
  });
});
