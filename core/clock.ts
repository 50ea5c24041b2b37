/** Time as activities and rules see it; tests pass a fixed or stepped clock. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
