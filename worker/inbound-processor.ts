import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { Clock } from '../core/clock';
import type { ReturnPaths } from '../core/bounces/verp';
import { applyReturn, dmarcReportHost } from '../core/bounces/apply';
import { applyDmarcReport } from '../core/dmarc/ingest';
import { claimInbound, markInboundProcessed } from '../db/sql/inbound-messages';
import { Poller } from './poller';

/** Messages one pass applies before yielding to the loop (it runs again at once when there were more). */
const BATCH = 50;
/** A pass now and then without a kick: picks up what another process stored or a crash left. */
const INTERVAL_MS = 2000;

/**
 * The durable step after the inbound listener: each stored message is claimed (FOR UPDATE SKIP
 * LOCKED), applied (core/bounces/apply.ts) and stamped in one transaction, so a crash before the
 * commit leaves it pending for the next pass, and two processes never apply the same message.
 */
export class InboundProcessor {
  private readonly poller: Poller;

  constructor(
    private readonly orm: Orm,
    private readonly returnPaths: ReturnPaths,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.poller = new Poller({
      name: 'inbound-processor',
      intervalMs: INTERVAL_MS,
      log,
      pass: async () => ({ more: (await this.runOnce()) === BATCH }),
    });
  }

  start(): void {
    this.poller.start();
  }

  kick(): void {
    this.poller.kick();
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }

  /** Applies up to BATCH pending messages, one transaction each; answers how many. */
  async runOnce(): Promise<number> {
    let done = 0;
    while (done < BATCH) {
      const applied = await this.orm.em.fork().transactional(async (em) => {
        const message = await claimInbound(em);
        if (!message) return null;
        // A DMARC aggregate report is about the domain's mail, not a returned message: never a bounce.
        const reportHost = dmarcReportHost(message.rcptTo);
        if (reportHost !== null) {
          const report = await applyDmarcReport(em, reportHost, message.raw, this.clock.now());
          await markInboundProcessed(em, message.id, { result: report.result, emailId: null, recipientId: null });
          return { inboundId: message.id, ...report };
        }
        const result = await applyReturn(em, this.returnPaths, message, this.clock.now());
        await markInboundProcessed(em, message.id, result);
        return { inboundId: message.id, ...result };
      });
      if (!applied) break;
      if ('reason' in applied) {
        if (applied.result === 'dmarc_report' || applied.result === 'dmarc_duplicate') this.log.info(applied, 'DMARC report applied');
        else this.log.warn({ errorId: applied.result, ...applied }, 'DMARC report refused');
        done += 1;
        continue;
      }
      if (applied.result === 'forged') {
        this.log.warn(
          { errorId: 'inbound_forged_token', inboundId: applied.inboundId },
          'returned message with a forged return-path token dropped',
        );
      } else if (applied.result === 'unmatched') {
        this.log.warn({ errorId: 'inbound_unmatched', inboundId: applied.inboundId }, 'returned message names no message of ours; dropped');
      } else {
        this.log.info(applied, 'returned message applied');
      }
      if (!applied) break;
      done += 1;
    }
    return done;
  }
}
