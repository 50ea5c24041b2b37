import { EntitySchema } from '@mikro-orm/core';
import type { Transport } from './organization';

export type Stream = 'transactional' | 'bulk';
export type DomainStatus = 'pending' | 'verified';

/** One DNS record to publish, and what the last verification saw at its name. */
export interface DnsRecord {
  /** dkim, return_path_mx, return_path_spf, dmarc, tracking */
  purpose: string;
  type: 'TXT' | 'MX' | 'CNAME';
  name: string;
  value: string;
  /** Needed for `verified`; the DMARC record is a suggestion. */
  required: boolean;
  /** What the last check resolved at `name` (all answers, joined), null when nothing was there. */
  observed: string | null;
  /** pending (never checked), verified, missing, mismatch */
  status: 'pending' | 'verified' | 'missing' | 'mismatch';
}

export class Domain {
  id!: string;
  organizationId!: string;
  name!: string;
  stream: Stream = 'transactional';
  status: DomainStatus = 'pending';
  dnsProvider = 'manual';
  dkimSelector: string | null = null;
  dkimPublicKey: string | null = null;
  /** AES-256-GCM with SECRETS_KEY; the private key never leaves the server in clear. */
  dkimPrivateKeyEnc: string | null = null;
  /** Envelope sender host (bounces), covered by the SPF and MX records. */
  returnPathHost: string | null = null;
  /** Host of open pixels and click redirects (issue 16); its CNAME is the record with purpose `tracking`. */
  trackingHost: string | null = null;
  records: DnsRecord[] = [];
  /** Warm-up stage (1 to 7, core/limits/caps.ts); null: warm-up off, no domain cap. */
  warmupStage: number | null = null;
  /** The UTC day the advance rule last ran for this domain (once a day). */
  warmupCheckedOn: string | null = null;
  /** Overrides its organization's transport when set (a platform operator's choice). */
  transport: Transport | null = null;
  verificationGeneration = 0;
  verifyingUntil: Date | null = null;
  lastCheckedAt: Date | null = null;
  verifiedAt: Date | null = null;
  deletedAt: Date | null = null;
  createdAt: Date = new Date();
}

export const DomainSchema = new EntitySchema<Domain>({
  class: Domain,
  tableName: 'domains',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    stream: { type: 'text' },
    status: { type: 'text' },
    dnsProvider: { type: 'text' },
    dkimSelector: { type: 'text', nullable: true },
    dkimPublicKey: { type: 'text', nullable: true },
    dkimPrivateKeyEnc: { type: 'text', nullable: true, lazy: true },
    returnPathHost: { type: 'text', nullable: true },
    trackingHost: { type: 'text', nullable: true },
    records: { type: 'json' },
    warmupStage: { type: 'integer', nullable: true },
    warmupCheckedOn: { type: 'string', columnType: 'date', nullable: true },
    transport: { type: 'text', nullable: true },
    verificationGeneration: { type: 'integer' },
    verifyingUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    lastCheckedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    verifiedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    deletedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
