import type { Logger } from 'pino';

/**
 * A process's parts, one list: each part is started as it is added, in the order of the code
 * that adds them, and stopped in the reverse order, once. If a part fails to start, the parts
 * already started are stopped (in reverse) before the error goes on up. A part that fails to
 * stop does not keep the parts before it running: all stop, then the first error is thrown.
 *
 *     const parts = new Parts(log);
 *     const db = await parts.add('database', openDatabase(config, log), (db) => db.close());
 *     const outbox = await parts.loop('outbox', new Outbox(db.orm));
 *     ...
 *     await parts.stop(); // the outbox, then the database
 */
export class Parts {
  private readonly started: { name: string; stop: () => unknown }[] = [];
  private stopping?: Promise<void>;

  constructor(private readonly log: Logger) {}

  /** Waits for one part's start and keeps its stop; answers what it made (for the parts after it). */
  async add<T>(name: string, starting: T | Promise<T>, stop: (made: T) => unknown): Promise<T> {
    let made: T;
    try {
      made = await starting;
    } catch (err) {
      this.log.debug({ err, part: name }, 'a part failed to start; stopping the parts started before it');
      await this.stop().catch(() => undefined);
      throw err;
    }
    if (this.stopping) {
      // Stopped while this part was starting: it stops now, since the list went by without it.
      await stop(made);
      throw new Error(`${name} started while the process was stopping`);
    }
    this.started.push({ name, stop: () => stop(made) });
    return made;
  }

  /** Starts a loop of worker/ (or a listener): its start() now, its stop() in turn. */
  loop<T extends { start(): unknown; stop(): Promise<void> }>(name: string, loop: T): Promise<T> {
    const starting = (async () => {
      await loop.start();
      return loop;
    })();
    return this.add(name, starting, (l) => l.stop());
  }

  /** The started parts' names, in start order. */
  names(): string[] {
    return this.started.map((p) => p.name);
  }

  /** Stops every started part, the last started first; later calls wait for the same stop. */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    let first: unknown;
    for (const part of [...this.started].reverse()) {
      try {
        await part.stop();
      } catch (err) {
        this.log.error({ err, part: part.name }, 'a part failed to stop');
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }
}

/**
 * A wake-up call handed out before the loop it wakes exists (the activities the engine runs wake
 * the outbox that feeds the engine): bound when the loop starts; until then, and in a process
 * without that loop, a kick does nothing (the loop's own poll picks the work up).
 */
export class WakeUp {
  private target?: () => void;

  bind(target: () => void): void {
    this.target = target;
  }

  readonly kick = (): void => this.target?.();
}
