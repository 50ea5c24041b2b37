import type { Orm } from '../db/orm';
import { readPassDomains } from '../db/sql/delivery-pass';
import type { Secrets } from '../core/secrets';
import type { OutgoingMessage } from './mailer';
import type { Transport } from '../db/entities';

/** What a sender domain puts on the mail it sends: signature, return path, tracking host, the bulk footer's sender. */
export interface Identity {
  /** Why the domain's identity could not be read (its DKIM key did not open): its messages fail alone, not the batch. */
  error?: unknown;
  dkim?: OutgoingMessage['dkim'];
  returnPathHost?: string;
  trackingHost?: string;
  /** The organization's name and postal address, for the bulk footer; null without a postal address. */
  sender?: { name: string; postalAddress: string } | null;
  /** How its live mail leaves: the relay (SMTP_URL) or straight to each recipient's MX. */
  transport?: Transport;
}

/**
 * Each sender domain's identity, by domain id, read in one query for a whole pass: its DKIM key
 * opened once per domain (domains created without keys, or a worker without `secrets`, send
 * unsigned), its return-path and tracking hosts, its organization's postal address.
 */
export async function loadSenderIdentities(orm: Orm, secrets: Secrets | undefined, domainIds: string[]): Promise<Map<string, Identity>> {
  const identities = new Map<string, Identity>();
  for (const d of await readPassDomains(orm, domainIds)) {
    try {
      identities.set(d.id, {
        ...(d.dkim_selector && d.dkim_private_key_enc && secrets
          ? {
              dkim: {
                domainName: d.name,
                keySelector: d.dkim_selector,
                privateKey: secrets.decrypt(d.dkim_private_key_enc),
                // Only an active key: its record resolved before the rotation switched to it.
                ...(d.dkim_ed25519_selector && d.dkim_ed25519_private_key_enc
                  ? { ed25519: { keySelector: d.dkim_ed25519_selector, privateKey: secrets.decrypt(d.dkim_ed25519_private_key_enc) } }
                  : {}),
              },
            }
          : {}),
        ...(d.return_path_host ? { returnPathHost: d.return_path_host } : {}),
        ...(d.tracking_host ? { trackingHost: d.tracking_host } : {}),
        sender: d.postal_address ? { name: d.organization_name, postalAddress: d.postal_address } : null,
        transport: d.transport,
      });
    } catch (error) {
      identities.set(d.id, { error });
    }
  }
  return identities;
}
