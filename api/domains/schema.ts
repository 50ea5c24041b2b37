import * as yup from 'yup';
import { bodySchema } from '../../core/validate';

/** A DNS name we can send from: labels of letters, digits and inner hyphens, a letter TLD, at most 253 chars. */
const HOSTNAME = /^(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/** Case and a trailing root dot do not make another domain. */
export const normalizeDomainName = (v: string) => v.trim().toLowerCase().replace(/\.$/, '');

export const createDomainSchema = bodySchema({
  name: yup
    .string()
    .strict()
    .required()
    .test(
      'hostname',
      'name must be a domain name such as mail.example.com',
      (v) => v === undefined || HOSTNAME.test(normalizeDomainName(v)),
    ),
  dns_provider: yup
    .string()
    .strict()
    .oneOf(['manual', 'cloudflare'] as const)
    .default('manual'),
  stream: yup
    .string()
    .strict()
    .oneOf(['transactional', 'bulk'] as const)
    .default('transactional'),
});

export type CreateDomainBody = yup.InferType<typeof createDomainSchema>;

/**
 * PATCH /domains/:id. `tracking_host`: the host of open pixels and click redirects (issue 16), by
 * the rule of a domain's name (normalized the same way); null removes it. Absent: unchanged.
 */
export const updateDomainSchema = bodySchema({
  tracking_host: yup
    .string()
    .strict()
    .nullable()
    .test(
      'hostname',
      'tracking_host must be a host name such as links.example.com',
      (v) => v === undefined || v === null || HOSTNAME.test(normalizeDomainName(v)),
    ),
});

export type UpdateDomainBody = yup.InferType<typeof updateDomainSchema>;
