import type { Logger } from 'pino';
import type { Clock } from '../core/clock';

/**
 * Whether this process last found the relay refusing mail for now, so an outage is logged once
 * when it starts and once when it ends, not once per message and attempt (issue 51: messages waited
 * `sending` through the relay's retries with nothing said at warn level). `refusals` counts every
 * refusal since the process started, for the metrics endpoint to export.
 */
export class RelayOutage {
  private since: number | null = null;
  private during = 0;
  refusals = 0;

  constructor(
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  /** The relay refused `messages` for now, the first with `reply` (a 4xx, or why the connection failed). */
  refused(messages: number, reply: string): void {
    this.refusals += messages;
    this.during += messages;
    if (this.since !== null) return;
    this.since = this.clock.now().getTime();
    this.log.warn(
      { errorId: 'relay_refusing', messages, reply },
      'the SMTP relay refuses mail for now; messages wait for their retries (GET /emails/:id shows waiting.reason relay_retry)',
    );
  }

  /** The relay took a message: an outage, if one was on, is over. */
  accepted(): void {
    if (this.since === null) return;
    this.log.info({ refusals: this.during, forMs: this.clock.now().getTime() - this.since }, 'the SMTP relay accepts mail again');
    this.since = null;
    this.during = 0;
  }
}
