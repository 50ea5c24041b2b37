import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { createDomainSchema, updateDomainSchema } from './schema';

/** OpenAPI operations of /domains (api/domains/routes.ts); responses as api/domains/present.ts answers them. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableDateTime: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const nullableCount: JsonSchema = { type: ['integer', 'null'], minimum: 0 };

export const schemas: Record<string, JsonSchema> = {
  DnsRecord: {
    type: 'object',
    description: 'A DNS record to publish, and what the last check saw at its name.',
    properties: {
      purpose: {
        type: 'string',
        enum: ['dkim', 'return_path_mx', 'return_path_spf', 'dmarc', 'tracking', 'mta_sts_host', 'mta_sts', 'tls_rpt'],
      },
      type: { type: 'string', enum: ['TXT', 'MX', 'CNAME'] },
      name: { type: 'string' },
      value: { type: 'string', description: 'What to publish.' },
      required: { type: 'boolean', description: 'Needed for `verified` (DMARC and tracking are not).' },
      status: { type: 'string', enum: ['pending', 'verified', 'missing', 'mismatch'], description: '`pending`: never checked.' },
      observed: { type: ['string', 'null'], description: 'What the last check resolved at `name`; null when nothing.' },
    },
    required: ['purpose', 'type', 'name', 'value', 'required', 'status', 'observed'],
    additionalProperties: false,
  },
  DomainWarmup: {
    type: 'object',
    description:
      'The warm-up stage (null: warm-up off), today’s limit from it (null: no domain cap) and the recipients reserved today (UTC).',
    properties: {
      stage: { type: ['integer', 'null'], minimum: 1 },
      daily_limit: nullableCount,
      sent_today: { type: 'integer', minimum: 0 },
    },
    required: ['stage', 'daily_limit', 'sent_today'],
    additionalProperties: false,
  },
  Domain: {
    type: 'object',
    properties: {
      object: { const: 'domain' },
      id: { type: 'string', format: 'uuid' },
      name: { type: 'string' },
      status: { type: 'string', enum: ['pending', 'verified'] },
      stream: { type: 'string', enum: ['transactional', 'bulk'] },
      dns_provider: { type: 'string', enum: ['manual', 'cloudflare'] },
      dkim_selector: { type: ['string', 'null'] },
      return_path: { type: ['string', 'null'], description: 'The return-path (bounce) host.' },
      tracking_host: { type: ['string', 'null'], description: 'The host of open pixels and click redirects; null when none.' },
      warmup: ref('DomainWarmup'),
      records: { type: 'array', items: ref('DnsRecord') },
      created_at: dateTime,
      last_checked_at: nullableDateTime,
      verified_at: nullableDateTime,
    },
    required: [
      'object',
      'id',
      'name',
      'status',
      'stream',
      'dns_provider',
      'dkim_selector',
      'return_path',
      'tracking_host',
      'warmup',
      'records',
      'created_at',
      'last_checked_at',
      'verified_at',
    ],
    additionalProperties: false,
  },
  DeletedDomain: {
    type: 'object',
    properties: { object: { const: 'domain' }, id: { type: 'string', format: 'uuid' }, name: { type: 'string' }, deleted: { const: true } },
    required: ['object', 'id', 'name', 'deleted'],
    additionalProperties: false,
  },
};

const domainParam = { id: { description: 'The domain id.', schema: { type: 'string', format: 'uuid' } as JsonSchema } };

const example = {
  object: 'domain',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  name: 'mail.example.com',
  status: 'pending',
  stream: 'transactional',
  dns_provider: 'manual',
  dkim_selector: 's1',
  return_path: 'bounces.mail.example.com',
  tracking_host: null,
  warmup: { stage: 1, daily_limit: 200, sent_today: 0 },
  records: [
    {
      purpose: 'return_path_mx',
      type: 'MX',
      name: 'bounces.mail.example.com',
      value: '10 feedback-smtp.platform.example',
      required: true,
      status: 'pending',
      observed: null,
    },
  ],
  created_at: '2025-01-01T00:00:00.000Z',
  last_checked_at: null,
  verified_at: null,
};

const domainLinks = {
  GetDomain: { operationId: 'getDomain', parameters: { id: '$response.body#/id' } },
  UpdateDomain: { operationId: 'updateDomain', parameters: { id: '$response.body#/id' } },
  VerifyDomain: { operationId: 'verifyDomain', parameters: { id: '$response.body#/id' } },
  DeleteDomain: { operationId: 'deleteDomain', parameters: { id: '$response.body#/id' } },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/domains',
    operationId: 'createDomain',
    tag: 'Domains',
    summary: 'Add a sending domain',
    description:
      'Generates its DKIM key pair, computes the DNS records to publish and starts verifying them. `dns_provider: cloudflare` is for internal organizations only (422 here). ' +
      'A domain-restricted key cannot add a domain (403 `forbidden_domain`).',
    permission: 'admin',
    body: createDomainSchema,
    requestExample: { name: 'mail.example.com', stream: 'transactional' },
    responses: { 201: { description: 'The domain, with its records.', schema: ref('Domain'), example } },
    errors: ['forbidden_domain', 'domain_exists'],
    links: { 201: domainLinks },
  },
  {
    method: 'get',
    path: '/domains',
    operationId: 'listDomains',
    tag: 'Domains',
    summary: 'List domains',
    description: 'The organization’s domains (a domain-restricted key: its own), newest first.',
    permission: 'admin',
    responses: {
      200: { description: 'The domains (one page: no cursor).', schema: listOf('Domain'), example: { object: 'list', data: [example] } },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/domains/{id}',
    operationId: 'getDomain',
    tag: 'Domains',
    summary: 'Retrieve a domain',
    permission: 'admin',
    params: domainParam,
    responses: {
      200: { description: 'The domain: status and records, each with `value` and `observed`.', schema: ref('Domain'), example },
    },
    errors: ['not_found'],
  },
  {
    method: 'patch',
    path: '/domains/{id}',
    operationId: 'updateDomain',
    tag: 'Domains',
    summary: 'Set or remove the tracking host',
    description:
      '`tracking_host`: a host under the domain other than its return-path host (e.g. `links.<domain>`); null removes it; absent changes nothing. ' +
      'Its CNAME record replaces any earlier one and the records are checked at once.',
    permission: 'admin',
    params: domainParam,
    body: updateDomainSchema,
    requestExample: { tracking_host: 'links.mail.example.com' },
    responses: { 200: { description: 'The domain.', schema: ref('Domain'), example } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/domains/{id}/verify',
    operationId: 'verifyDomain',
    tag: 'Domains',
    summary: 'Verify now',
    description: 'Checks the records at once and answers the result; restarts the verification loop if it had ended.',
    permission: 'admin',
    params: domainParam,
    responses: { 200: { description: 'The domain as checked.', schema: ref('Domain'), example } },
    errors: ['not_found'],
  },
  {
    method: 'delete',
    path: '/domains/{id}',
    operationId: 'deleteDomain',
    tag: 'Domains',
    summary: 'Delete a domain',
    description:
      'Soft delete: it can no longer send, its name is free again, its messages keep their history. Not for a domain-restricted key.',
    permission: 'admin',
    params: domainParam,
    responses: {
      200: {
        description: 'Deleted.',
        schema: ref('DeletedDomain'),
        example: { object: 'domain', id: example.id, name: example.name, deleted: true },
      },
    },
    errors: ['forbidden_domain', 'not_found'],
  },
];
