import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';

/**
 * The TTL of a TXT record, which node's resolver does not report for TXT (only for A and AAAA).
 * One query over TCP (RFC 1035 §4.2.2, RFC 7766: no truncation, so a DKIM key of any size fits)
 * to the first server that answers, recursion desired; the answer's TXT records' smallest TTL.
 * A DKIM rotation waits at least this long before switching signing to a new key.
 */

const TXT = 16;
const TIMEOUT_MS = 3000;

/** `1.2.3.4`, `1.2.3.4:5353`, `::1`, `[::1]:5353` (as Resolver.getServers() writes them). */
export function parseServer(s: string): { host: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (v6) return { host: v6[1], port: Number(v6[2] ?? 53) };
  const v4 = /^([^:]+):(\d+)$/.exec(s);
  if (v4) return { host: v4[1], port: Number(v4[2]) };
  return { host: s, port: 53 };
}

/** A TXT question for `name`, recursion desired. */
export function txtQuery(id: number, name: string): Buffer {
  const labels = name
    .replace(/\.$/, '')
    .split('.')
    .map((l) => Buffer.from(l, 'ascii'));
  if (labels.some((l) => l.length === 0 || l.length > 63)) throw new Error(`not a DNS name: ${name}`);
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0100, 2); // RD
  header.writeUInt16BE(1, 4); // QDCOUNT
  const qname = Buffer.concat([...labels.flatMap((l) => [Buffer.from([l.length]), l]), Buffer.from([0])]);
  const tail = Buffer.alloc(4);
  tail.writeUInt16BE(TXT, 0);
  tail.writeUInt16BE(1, 2); // IN
  return Buffer.concat([header, qname, tail]);
}

/** The offset after the (possibly compressed) name at `at`. */
function skipName(msg: Buffer, at: number): number {
  for (let i = at; i < msg.length;) {
    const len = msg[i];
    if (len === 0) return i + 1;
    if ((len & 0xc0) === 0xc0) return i + 2;
    i += len + 1;
  }
  throw new Error('truncated DNS name');
}

/** The smallest TTL of the answer's TXT records, or null (no answer, an error code, another id). */
export function txtTtlOf(msg: Buffer, id: number): number | null {
  if (msg.length < 12 || msg.readUInt16BE(0) !== id) return null;
  if ((msg.readUInt16BE(2) & 0x000f) !== 0) return null; // RCODE
  const qd = msg.readUInt16BE(4);
  const an = msg.readUInt16BE(6);
  let at = 12;
  for (let i = 0; i < qd; i++) at = skipName(msg, at) + 4;
  let ttl: number | null = null;
  for (let i = 0; i < an; i++) {
    at = skipName(msg, at);
    if (at + 10 > msg.length) return ttl;
    const type = msg.readUInt16BE(at);
    const rrTtl = msg.readUInt32BE(at + 4);
    at += 10 + msg.readUInt16BE(at + 8);
    if (type === TXT) ttl = ttl === null ? rrTtl : Math.min(ttl, rrTtl);
  }
  return ttl;
}

function askOne(server: { host: string; port: number }, name: string): Promise<number | null> {
  const id = randomBytes(2).readUInt16BE(0);
  const query = txtQuery(id, name);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: server.host, port: server.port });
    let got = Buffer.alloc(0);
    const done = (err: Error | null, ttl: number | null = null) => {
      socket.destroy();
      if (err) reject(err);
      else resolve(ttl);
    };
    socket.setTimeout(TIMEOUT_MS, () => done(new Error('DNS query timed out')));
    socket.on('error', (err) => done(err));
    socket.on('connect', () => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length);
      socket.write(Buffer.concat([len, query]));
    });
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        try {
          done(null, txtTtlOf(got.subarray(2, 2 + got.readUInt16BE(0)), id));
        } catch (err) {
          done(err as Error);
        }
      }
    });
    socket.on('end', () => done(new Error('DNS server closed the connection')));
  });
}

/** The TTL of the TXT record at `name`, asking each server in turn until one answers. */
export async function queryTxtTtl(servers: string[], name: string): Promise<number | null> {
  let last: unknown = new Error('no DNS server');
  for (const s of servers) {
    try {
      return await askOne(parseServer(s), name);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}
