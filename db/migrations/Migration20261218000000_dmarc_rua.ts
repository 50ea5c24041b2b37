import { Migration } from '@mikro-orm/migrations';

/**
 * A domain's suggested DMARC record named `rua=mailto:dmarc@<domain>`, where nobody reads reports;
 * the inbound listener takes them at `dmarc-reports@<return-path host>` (issue 51). Records still
 * suggesting the old address get the new one; a record an operator changed is left alone.
 */
const OLD = `'v=DMARC1; p=none; rua=mailto:dmarc@' || d.name`;
const NEW = `'v=DMARC1; p=none; rua=mailto:dmarc-reports@' || d.return_path_host`;
/** The records as an array whatever the row holds (a scalar would stop the whole statement). */
const RECORDS = `jsonb_array_elements(case jsonb_typeof(d.records) when 'array' then d.records else '[]' end)`;

/** The statement, apart so test/db/dmarc-rua-migration.test.ts runs it over rows made the old way. */
export const DMARC_RUA_UPDATE = `
update domains d
   set records = (select jsonb_agg(case when r ->> 'purpose' = 'dmarc' and r ->> 'value' = ${OLD}
                                        then r || jsonb_build_object('value', ${NEW}) else r end order by i)
                    from ${RECORDS} with ordinality as x(r, i))
 where d.return_path_host is not null
   and exists (select 1 from ${RECORDS} r where r ->> 'purpose' = 'dmarc' and r ->> 'value' = ${OLD});`;

export class Migration20261218000000_dmarc_rua extends Migration {
  override async up(): Promise<void> {
    this.addSql(DMARC_RUA_UPDATE);
  }

  override async down(): Promise<void> {
    // The old address received nothing: going back would only hide the reports again.
  }
}
