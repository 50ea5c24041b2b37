import { isUuid } from '../../db/ids';
import { notFound } from '../errors';
import { parseAddrSpec } from '../emails/address';

/** How a path names a contact (spec: GET /contacts/:id): its id, or its URL-encoded email address. */
export interface ContactRef {
  id: string | null;
  email: string | null;
}

/** Anything else names no contact: 404, as an unknown one. */
export function contactRef(param: string): ContactRef {
  if (isUuid(param)) return { id: param.toLowerCase(), email: null };
  const mailbox = parseAddrSpec(param);
  if (!mailbox) throw notFound('contact');
  return { id: null, email: mailbox.normalized };
}
