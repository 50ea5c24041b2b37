import { randomFillSync } from 'node:crypto';

let lastMs = 0;
let seq = 0;

/**
 * Random bytes are drawn from the CSPRNG a pool at a time, as Node's randomUUID does: one call
 * per id was the largest single cost of accepting a broadcast page in the service's own CPU
 * (three ids a message).
 */
const pool = Buffer.alloc(8192);
let poolAt = pool.length;

/**
 * UUIDv7: time-ordered, so new rows land at the right edge of the primary-key index. Within one
 * millisecond a 12-bit counter keeps ids of this process strictly increasing, so items of one
 * batch list in the order they were sent.
 */
export function uuidv7(nowMs = Date.now()): string {
  if (nowMs <= lastMs) {
    seq += 1;
    if (seq > 0xfff) {
      lastMs += 1;
      seq = 0;
    }
    nowMs = lastMs;
  } else {
    lastMs = nowMs;
    seq = 0;
  }
  const b = Buffer.allocUnsafe(16);
  if (poolAt + 8 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  pool.copy(b, 8, poolAt, poolAt + 8);
  poolAt += 8;
  b.writeUIntBE(nowMs, 0, 6);
  b[6] = 0x70 | (seq >> 8);
  b[7] = seq & 0xff;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
