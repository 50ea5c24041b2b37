import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { Domain } from '../db/entities';
import { domainVerification, verificationWorkflowId, type DomainVerificationInput } from '../workflows/domain-verification';
import type { Engine } from './engine';
import { Poller } from './poller';

type VerificationTiming = Omit<DomainVerificationInput, 'domainId'>;

/**
 * Starts a domain's verification loop, one per generation: a restart after the window ended gets a
 * new workflow id. Starting a loop that runs, or ran, is a no-op. Used by the API and the sweep.
 */
export function startVerificationLoop(
  engine: Engine,
  domain: Pick<Domain, 'id' | 'verificationGeneration' | 'organizationId'>,
  timing: VerificationTiming,
): Promise<void> {
  return engine.start(
    domainVerification,
    verificationWorkflowId(domain.id, domain.verificationGeneration),
    { domainId: domain.id, ...timing },
    { labels: { organizations: [domain.organizationId] } },
  );
}

/**
 * Starts the verification loop of every pending domain still within its window, at boot and then
 * every few seconds. Starting a loop that runs, or ran, is a no-op (its workflow id names the
 * domain and the loop's generation). So this starts the loops of domains that `svc domain create`
 * made, from any process, and recovers a start that failed after POST /domains committed.
 */
export class DomainVerificationSweep {
  private readonly poller: Poller;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly timing: VerificationTiming,
    private readonly log: Logger,
    intervalMs: number,
  ) {
    this.poller = new Poller({ name: 'domain-sweep', intervalMs, log, pass: async () => void (await this.runOnce()) });
  }

  start(): void {
    this.poller.start();
  }

  /** One pass; returns the ids of the domains whose loop it (re)started or found running. */
  async runOnce(): Promise<string[]> {
    const pending = await this.orm.em
      .fork()
      .find(
        Domain,
        { status: 'pending', deletedAt: null, verifyingUntil: { $gt: new Date() } },
        { fields: ['id', 'verificationGeneration', 'organizationId'], orderBy: { createdAt: 'asc' } },
      );
    const started: string[] = [];
    for (const d of pending) {
      try {
        await startVerificationLoop(this.engine, d, this.timing);
        started.push(d.id);
      } catch (err) {
        this.log.error({ err, domainId: d.id }, 'could not start domain verification; retried on the next sweep');
      }
    }
    return started;
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }
}
