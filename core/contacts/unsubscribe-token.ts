import { unsealToken, sealToken, uuidBytes, uuidOf } from '../signed-token';

/** What a one-click unsubscribe link acts on: one recipient of one message, and the message's topic if it had one. */
export interface UnsubscribeTarget {
  organizationId: string;
  emailId: string;
  /** With a topic the link leaves that topic only; without, all bulk mail of the organization. */
  topicId: string | null;
  /** The recipient, lower-cased. */
  address: string;
}

const VERSION = 1;

/**
 * Self-contained on purpose: the link must keep working after the message is gone (retention),
 * since a recipient may unsubscribe from mail read months later.
 * Layout: version, organization (16), message (16), topic flag, topic (16 when set), address.
 */
export function unsubscribeToken(key: Buffer, t: UnsubscribeTarget): string {
  const topic = t.topicId === null ? [Buffer.from([0])] : [Buffer.from([1]), uuidBytes(t.topicId)];
  return sealToken(
    key,
    Buffer.concat([Buffer.from([VERSION]), uuidBytes(t.organizationId), uuidBytes(t.emailId), ...topic, Buffer.from(t.address, 'utf8')]),
  );
}

export function readUnsubscribeToken(key: Buffer, token: string): UnsubscribeTarget | null {
  const p = unsealToken(key, token);
  if (p === null || p.length < 35 || p[0] !== VERSION) return null;
  const hasTopic = p[33] === 1;
  const addressAt = hasTopic ? 50 : 34;
  if (p.length <= addressAt) return null;
  return {
    organizationId: uuidOf(p.subarray(1, 17)),
    emailId: uuidOf(p.subarray(17, 33)),
    topicId: hasTopic ? uuidOf(p.subarray(34, 50)) : null,
    address: p.subarray(addressAt).toString('utf8'),
  };
}
