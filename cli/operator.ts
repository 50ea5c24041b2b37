import { linkBaseUrl, readConfig } from '../server/config';
import { createOperator } from '../core/console/operators';
import { isUuid } from '../db/ids';
import { UsageError, operatorUsage, required, withDb } from './shared';

// svc operator create (docs/operations.md, "Operator accounts").

/**
 * A console operator: a platform operator, or with `--org` an administrator of that organization.
 * No password is ever given on the command line: the answer holds a one-time link (24 hours) where
 * the operator sets one. The link's base is PUBLIC_URL, else this machine's API port.
 */
export async function operatorCreateCommand(opts: { email: string | undefined; org: string | undefined }, out: (v: unknown) => void) {
  const email = required('email', opts.email);
  if (opts.org !== undefined && !isUuid(opts.org)) throw new UsageError('--org must be an organization id');
  const config = readConfig();
  await withDb(async (db) => {
    const created = await createOperator(db.orm, { email, organizationId: opts.org ?? null }, linkBaseUrl(config, config.port)).catch(
      operatorUsage,
    );
    out({ id: created.id, email: created.email, set_password_url: created.set_password_url });
  });
}
