import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122000000_initial } from './Migration20261122000000_initial';
import { Migration20261122010000_management } from './Migration20261122010000_management';
import { Migration20261122020000_domain_identity } from './Migration20261122020000_domain_identity';
import { Migration20261122030000_outbox_indexes } from './Migration20261122030000_outbox_indexes';
import { Migration20261123000000_tokens_and_workers } from './Migration20261123000000_tokens_and_workers';
import { Migration20261124000000_audience } from './Migration20261124000000_audience';
import { Migration20261125000000_templates } from './Migration20261125000000_templates';
import { Migration20261126000000_webhooks } from './Migration20261126000000_webhooks';
import { Migration20261127000000_email_source } from './Migration20261127000000_email_source';
import { Migration20261128000000_bounces } from './Migration20261128000000_bounces';
import { Migration20261129000000_send_caps } from './Migration20261129000000_send_caps';
import { Migration20261130000000_webhook_batches } from './Migration20261130000000_webhook_batches';
import { Migration20261201000000_bulk_recipients } from './Migration20261201000000_bulk_recipients';
import { Migration20261202000000_broadcasts } from './Migration20261202000000_broadcasts';
import { Migration20261203000000_automations } from './Migration20261203000000_automations';
import { Migration20261204000000_batched_delivery } from './Migration20261204000000_batched_delivery';
import { Migration20261205000000_store_foreign_keys } from './Migration20261205000000_store_foreign_keys';
import { Migration20261206000000_fan_out_foreign_keys } from './Migration20261206000000_fan_out_foreign_keys';
import { Migration20261207000000_scheduled_timers } from './Migration20261207000000_scheduled_timers';
import { Migration20261208000000_webhook_payloads } from './Migration20261208000000_webhook_payloads';

/** Listed explicitly so migrations run the same from TypeScript sources and from any bundle. */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261122010000_management', class: Migration20261122010000_management },
  { name: 'Migration20261122020000_domain_identity', class: Migration20261122020000_domain_identity },
  { name: 'Migration20261122030000_outbox_indexes', class: Migration20261122030000_outbox_indexes },
  { name: 'Migration20261123000000_tokens_and_workers', class: Migration20261123000000_tokens_and_workers },
  { name: 'Migration20261124000000_audience', class: Migration20261124000000_audience },
  { name: 'Migration20261125000000_templates', class: Migration20261125000000_templates },
  { name: 'Migration20261126000000_webhooks', class: Migration20261126000000_webhooks },
  { name: 'Migration20261127000000_email_source', class: Migration20261127000000_email_source },
  { name: 'Migration20261128000000_bounces', class: Migration20261128000000_bounces },
  { name: 'Migration20261129000000_send_caps', class: Migration20261129000000_send_caps },
  { name: 'Migration20261130000000_webhook_batches', class: Migration20261130000000_webhook_batches },
  { name: 'Migration20261201000000_bulk_recipients', class: Migration20261201000000_bulk_recipients },
  { name: 'Migration20261202000000_broadcasts', class: Migration20261202000000_broadcasts },
  { name: 'Migration20261203000000_automations', class: Migration20261203000000_automations },
  { name: 'Migration20261204000000_batched_delivery', class: Migration20261204000000_batched_delivery },
  { name: 'Migration20261205000000_store_foreign_keys', class: Migration20261205000000_store_foreign_keys },
  { name: 'Migration20261206000000_fan_out_foreign_keys', class: Migration20261206000000_fan_out_foreign_keys },
  { name: 'Migration20261207000000_scheduled_timers', class: Migration20261207000000_scheduled_timers },
  { name: 'Migration20261208000000_webhook_payloads', class: Migration20261208000000_webhook_payloads },
];
