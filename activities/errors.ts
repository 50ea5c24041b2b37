/** A failure no retry can fix; engines are told not to retry errors of this name. */
export class PermanentFailure extends Error {
  readonly nonRetryable = true;
  constructor(message: string) {
    super(message);
    this.name = 'PermanentFailure';
  }
}

/** A failure worth retrying (4xx reply, connection trouble); the engine retries with backoff. */
export class TransientDeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TransientDeliveryError';
  }
}

export function isNonRetryable(err: unknown): boolean {
  return (
    !!err &&
    typeof err === 'object' &&
    ((err as { nonRetryable?: boolean }).nonRetryable === true || (err as Error).name === 'PermanentFailure')
  );
}
