import assert from 'node:assert/strict';
import { SmtpSink } from '../support/sink';
import { crashTestSvc, runSvc, svcJson, waitHealthy, type Child } from '../support/child';
import { CrashDrain } from '../support/crash-drain';

/**
 * Issue 43 on the embedded engine: `svc start` draining 5,000 messages, killed with SIGKILL three
 * times at random moments and started again each time. Each message's outcome commits as the
 * relay answers it (group-committed), before its send slot is free, so a crash sends again at most
 * what held a slot: 2 × WORKER_CONCURRENCY. With WORKER_CONCURRENCY 2, passes of up to 100 each:
 * at most 4 per crash, where a pass recording its outcomes at its end resent up to 200.
 */
describe('Engine: a drain of 5,000 killed with SIGKILL three times resends at most 2 × WORKER_CONCURRENCY per crash', function () {
  this.timeout(300_000);
  const CONCURRENCY = 2;
  const MESSAGES = 5000;
  const KILLS = 3;
  let sink: SmtpSink;
  let child: Child | undefined;

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await sink.stop();
  });

  it('none lost, no recipient with another message, resends per crash within the bound', async () => {
    const { env, base } = await crashTestSvc('crash_resends', sink.port);
    Object.assign(env, { WORKER_CONCURRENCY: String(CONCURRENCY), SEND_RATE_PER_SECOND: '1000', DOMAIN_WARMUP: 'off' });
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const org = await svcJson(['org', 'create', '--name', 'Resends Co', '--plan', 'standard'], env);
    const domain = 'resends.example.test';
    await svcJson(['domain', 'create', '--org', org.id, '--name', domain, '--verified'], env);
    // Five keys at 1,000 a second each: the backlog is in before much of it has left.
    const keys = await Promise.all(
      [1, 2, 3, 4, 5].map((k) =>
        svcJson(['key', 'create', '--org', org.id, '--name', `k${k}`, '--permission', 'send', '--mode', 'live', '--rate', '1000'], env),
      ),
    );

    const drain = new CrashDrain(sink, domain);
    await drain.post(
      base,
      keys.map((k) => k.token),
      MESSAGES,
    );
    for (const target of drain.targets(KILLS, drain.distinct())) {
      await drain.killAt(child, target);
      child = runSvc(['start'], env);
      await waitHealthy(base, child);
    }
    await drain.allSent(env.DATABASE_URL, 180_000);
    const perKill = drain.check(2 * CONCURRENCY);
    if (process.env.TEST_REPORT)
      process.stdout.write(`      (resent per kill: ${perKill.join(', ')}; kills after ${drain.marks.join(', ')} arrivals)\n`);
    assert.equal(perKill.length, KILLS);

    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0, 'Ctrl-C shuts down cleanly');
  });
});
