import assert from 'node:assert/strict';
import { decide, MANAGED_COMMENT, plan, txtText, wantedRecords, zoneFor, type Wanted, type ZoneRecord } from '../../core/dns-publish/rules';
import { checkToken, ConnectionRefused } from '../../core/dns-publish/connection';
import { client, createRecord, recordsAt } from '../../core/dns-publish/cloudflare';
import type { DnsRecord } from '../../db/entities';
import { CloudflareApi } from '../support/cloudflare-api';
import { TestDns } from '../support/dns';
import { lookup } from '../../core/domains/dns';
import { createDnsResolver } from '../../core/domains/dns';

const rec = (purpose: string, type: DnsRecord['type'], name: string, value: string): DnsRecord => ({
  purpose,
  type,
  name,
  value,
  required: true,
  observed: null,
  status: 'pending',
});

let ids = 0;
const zr = (type: string, name: string, content: string, extra: Partial<ZoneRecord> = {}): ZoneRecord => ({
  id: `r${++ids}`,
  type,
  name,
  content,
  comment: null,
  ...extra,
});
const mine = { comment: MANAGED_COMMENT };

const spf: Wanted = { purpose: 'return_path_spf', type: 'TXT', name: 'bounces.ex.test', content: 'v=spf1 include:_spf.mail.svc.test ~all' };
const mx: Wanted = { purpose: 'return_path_mx', type: 'MX', name: 'bounces.ex.test', content: 'feedback-smtp.mail.svc.test', priority: 10 };
const dmarc: Wanted = { purpose: 'dmarc', type: 'TXT', name: '_dmarc.ex.test', content: 'v=DMARC1; p=none; rua=mailto:d@ex.test' };
const track: Wanted = { purpose: 'tracking', type: 'CNAME', name: 'links.ex.test', content: 'track.mail.svc.test' };

describe('Core: what publishing DNS records to Cloudflare writes (issue 41)', () => {
  it('reads the domain records as the zone holds them: MX priority and host apart, names without the trailing dot', () => {
    assert.deepEqual(
      wantedRecords([
        rec('return_path_mx', 'MX', 'Bounces.Ex.Test.', '10 feedback-smtp.mail.svc.test.'),
        rec('tracking', 'CNAME', 'links.ex.test', 'Track.Mail.Svc.Test'),
        rec('dkim', 'TXT', 's1._domainkey.ex.test', 'v=DKIM1; k=rsa; p=AAAA'),
      ]),
      [
        { purpose: 'return_path_mx', type: 'MX', name: 'bounces.ex.test', content: 'feedback-smtp.mail.svc.test', priority: 10 },
        { purpose: 'tracking', type: 'CNAME', name: 'links.ex.test', content: 'track.mail.svc.test' },
        { purpose: 'dkim', type: 'TXT', name: 's1._domainkey.ex.test', content: 'v=DKIM1; k=rsa; p=AAAA' },
      ],
    );
  });

  it('creates a record the name lacks, keeps its own when it matches, updates its own when it differs', () => {
    assert.deepEqual(decide(spf, []), { kind: 'create' });
    assert.deepEqual(decide(spf, [zr('TXT', 'other.ex.test', 'v=spf1 -all')]), { kind: 'create' });
    const same = zr('TXT', 'bounces.ex.test', spf.content, mine);
    assert.deepEqual(decide(spf, [same]), { kind: 'unchanged', id: same.id });
    const old = zr('TXT', 'bounces.ex.test', 'v=spf1 include:_spf.old.test ~all', mine);
    assert.deepEqual(decide(spf, [old]), { kind: 'update', id: old.id });
    const oldMx = zr('MX', 'bounces.ex.test', 'feedback-smtp.mail.svc.test', { ...mine, priority: 20 });
    assert.deepEqual(decide(mx, [oldMx]), { kind: 'update', id: oldMx.id });
  });

  it('never overwrites a record it did not create: a different one is a conflict, an identical one is left in place', () => {
    const theirs = zr('TXT', 'bounces.ex.test', 'v=spf1 include:_spf.google.com ~all');
    assert.equal(decide(spf, [theirs]).kind, 'conflict');
    const identical = zr('TXT', 'bounces.ex.test', `"${spf.content}"`);
    assert.deepEqual(decide(spf, [identical]), { kind: 'in_place', id: identical.id });
    // The managed marker is the exact comment; a look-alike is someone else's.
    assert.equal(decide(spf, [zr('TXT', 'bounces.ex.test', 'v=spf1 -all', { comment: 'managed by svc?' })]).kind, 'conflict');
  });

  it('never a second SPF or DMARC record: any v=spf1 / v=DMARC1 TXT at the name, whatever its case, holds the slot', () => {
    const a = decide(spf, [zr('TXT', 'bounces.ex.test', 'V=SPF1 a mx -all')]);
    assert.equal(a.kind, 'conflict');
    const b = decide(dmarc, [zr('TXT', '_dmarc.ex.test', 'v=dmarc1; p=reject')]);
    assert.equal(b.kind, 'conflict');
    // Other TXT records at the name do not stand in the way.
    assert.deepEqual(decide(spf, [zr('TXT', 'bounces.ex.test', 'google-site-verification=abc')]), { kind: 'create' });
    // Two of the service's own SPF records (a broken earlier state) are not fixed by guessing.
    assert.equal(
      decide(spf, [zr('TXT', 'bounces.ex.test', 'v=spf1 -all', mine), zr('TXT', 'bounces.ex.test', 'v=spf1 ~all', mine)]).kind,
      'conflict',
    );
  });

  it('a CNAME owns its name: anything else there is a conflict, and a foreign CNAME blocks TXT and MX too', () => {
    assert.equal(decide(track, [zr('A', 'links.ex.test', '192.0.2.1')]).kind, 'conflict');
    assert.deepEqual(decide(track, [zr('CNAME', 'links.ex.test', 'track.mail.svc.test.')]).kind, 'in_place');
    assert.equal(decide(mx, [zr('CNAME', 'bounces.ex.test', 'elsewhere.test')]).kind, 'conflict');
    assert.equal(decide(mx, [zr('MX', 'bounces.ex.test', 'mx.other.test', { priority: 10 })]).kind, 'conflict');
  });

  it('plans every record at once and reads quoted, chunked TXT content as one text', () => {
    const steps = plan([spf, mx, dmarc], [zr('TXT', '_dmarc.ex.test', 'v=DMARC1; p=none', mine)]);
    assert.deepEqual(
      steps.map((s) => s.action.kind),
      ['create', 'create', 'update'],
    );
    assert.equal(txtText('"v=DKIM1; p=AB" "CD\\"E"'), 'v=DKIM1; p=ABCD"E');
    assert.equal(txtText('plain text'), 'plain text');
  });

  it('picks the longest zone that is the name or one of its parents', () => {
    const zones = [{ name: 'ex.test' }, { name: 'mail.ex.test' }, { name: 'x.test' }];
    assert.equal(zoneFor('bounces.mail.ex.test', zones)?.name, 'mail.ex.test');
    assert.equal(zoneFor('ex.test', zones)?.name, 'ex.test');
    assert.equal(zoneFor('badex.test', zones), null);
  });
});

describe('Core: a Cloudflare token checked through the official SDK against a local API', function () {
  this.timeout(30_000);
  const dns = new TestDns();
  const cf = new CloudflareApi(dns);
  let settings: { baseURL: string };

  before(async () => {
    await dns.start();
    settings = { baseURL: await cf.start() };
    cf.addZone('zone.test');
  });
  after(async () => {
    await cf.stop();
    await dns.stop();
  });

  it('accepts an active token with Zone Read and DNS Edit, naming the zones it may publish in', async () => {
    const token = cf.addToken();
    const checked = await checkToken(token, settings);
    assert.deepEqual(checked.zones, ['zone.test']);
    assert.equal(checked.tokenId, cf.tokens.get(token)!.id);
    assert.ok(cf.requests.some((r) => r.path === '/client/v4/user/tokens/verify' && r.token === token));
  });

  it('refuses an unknown, disabled, read-only or zone-less token', async () => {
    const refused = async (token: string, words: RegExp) => {
      await assert.rejects(checkToken(token, settings), (err: Error) => err instanceof ConnectionRefused && words.test(err.message));
    };
    await refused('x'.repeat(40), /Cloudflare refused the token \(token verify: 401 Authentication error\)/);
    await refused(cf.addToken(undefined, 'disabled'), /token is disabled/);
    await refused(cf.addToken(['#zone:read', '#dns_records:read']), /DNS Edit/);
    await refused(cf.addToken(['#dns_records:edit']), /Zone Read/);
    await refused('short', /not a Cloudflare API token/);
  });

  it("writes through the SDK land in the local zone and in DNS, marked as the service's", async () => {
    const token = cf.addToken();
    const sdk = client(token, settings);
    const zoneId = cf.zoneNamed('zone.test')!.id;
    await createRecord(sdk, zoneId, { purpose: 'return_path_mx', type: 'MX', name: 'b.zone.test', content: 'fb.mail.test', priority: 10 });
    const held = await recordsAt(sdk, zoneId, 'b.zone.test');
    assert.deepEqual(
      held.map((r) => [r.type, r.content, r.priority, r.comment]),
      [['MX', 'fb.mail.test', 10, MANAGED_COMMENT]],
    );
    const answer = await lookup(
      createDnsResolver([`127.0.0.1:${dns.port}`]),
      rec('return_path_mx', 'MX', 'b.zone.test', '10 fb.mail.test'),
    );
    assert.deepEqual(answer, { mx: [{ exchange: 'fb.mail.test', priority: 10 }] });
  });
});
