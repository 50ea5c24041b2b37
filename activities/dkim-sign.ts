import nodemailer, { type Transporter } from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer';
import { dkimSign } from 'mailauth/lib/dkim/sign';
import type { OutgoingMessage } from './mailer';

/**
 * Signing with two keys (RFC 8463 §3: an Ed25519 signature beside the RSA one, which verifiers
 * without Ed25519 support still check). nodemailer's signer makes `rsa-sha256` only, so a domain
 * with an active Ed25519 key has its message composed by nodemailer exactly as it would send it
 * (same options, same plugins, no signature), signed by mailauth with both keys (relaxed/relaxed,
 * the same header list), and sent as those bytes. RSA-only domains never come here: nodemailer
 * signs while it sends, as before.
 */

/**
 * A transport answering the bytes nodemailer's pipeline (data images, headers, MIME, DKIM when the
 * options ask) would send, as the SMTP transport streams them: nodemailer's stream transport would
 * keep the Bcc header (keepBcc), which must never reach a recipient. Also the direct mailer's.
 */
export function byteCapture(name: string): Transporter<Buffer> {
  return nodemailer.createTransport<Buffer>(
    {
      name,
      version: '1',
      send(mail, done) {
        const chunks: Buffer[] = [];
        const stream = mail.message.createReadStream();
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('error', (e: Error) => done(e));
        stream.on('end', () => done(null, Buffer.concat(chunks)));
      },
    },
    { disableFileAccess: true, disableUrlAccess: true },
  );
}

let capture: Transporter<Buffer> | null = null;
function composeUnsigned(unsigned: Mail.Options): Promise<Buffer> {
  capture ??= byteCapture('dkim-compose');
  return capture.sendMail(unsigned);
}

export type DualDkim = NonNullable<OutgoingMessage['dkim']> & { ed25519: NonNullable<NonNullable<OutgoingMessage['dkim']>['ed25519']> };

/**
 * The message signed with the RSA and the Ed25519 key: options nodemailer sends as they are (`raw`,
 * the SMTP envelope kept). `unsigned` is the message's options without `dkim`; `headers`, the
 * colon-separated fields to sign. A key that fails to sign throws: never sent half signed.
 */
export async function signTwice(unsigned: Mail.Options, dkim: DualDkim, headers: string): Promise<Mail.Options> {
  const raw = await composeUnsigned(unsigned);
  const both = { signingDomain: dkim.domainName, canonicalization: 'relaxed/relaxed' };
  const signed = await dkimSign(raw, {
    canonicalization: 'relaxed/relaxed',
    // mailauth reads the list as a colon-separated string (its typings say an array).
    headerList: headers as unknown as string[],
    signatureData: [
      { ...both, selector: dkim.keySelector, privateKey: dkim.privateKey, algorithm: 'rsa-sha256' },
      { ...both, selector: dkim.ed25519.keySelector, privateKey: dkim.ed25519.privateKey, algorithm: 'ed25519-sha256' },
    ],
  } as Parameters<typeof dkimSign>[1]);
  if (signed.errors?.length) {
    const [first] = signed.errors as unknown as { err?: Error; selector?: string }[];
    throw new Error(`DKIM signing failed (selector ${first.selector ?? '?'}): ${first.err?.message ?? 'unknown error'}`);
  }
  return {
    envelope: unsigned.envelope,
    raw: Buffer.concat([Buffer.from(signed.signatures), raw]),
    disableFileAccess: true,
    disableUrlAccess: true,
  };
}
