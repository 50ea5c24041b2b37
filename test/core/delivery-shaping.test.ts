import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_SHAPING, parseShaping, ShapingError, siteFor, suspends, type SiteLimits } from '../../core/delivery/shaping';

const LIMITS: SiteLimits = { connections: 10, messagesPerConnection: 100, perMinute: 600, suspendMinutes: 15, suspendOn: ['rate limit'] };
const file = (o: unknown) => JSON.stringify(o);

/** The ShapingError message parseShaping throws for `text`. */
function refusal(text: string): string {
  try {
    parseShaping(text);
  } catch (e) {
    assert.ok(e instanceof ShapingError, String(e));
    return e.message;
  }
  assert.fail('accepted');
}

describe('Core: the delivery shaping file (issue 40)', () => {
  it('ships a default file that parses, with the big providers and Google at 5 connections of 50 messages', () => {
    const text = fs.readFileSync(path.resolve(__dirname, '../../core/delivery/default-shaping.json'), 'utf8');
    assert.deepEqual(parseShaping(text), DEFAULT_SHAPING);
    assert.deepEqual(
      DEFAULT_SHAPING.sites.map((s) => s.name),
      ['google', 'microsoft', 'yahoo', 'apple'],
    );
    const google = siteFor(DEFAULT_SHAPING, ['gmail-smtp-in.l.google.com']);
    assert.equal(google.key, 'google');
    assert.equal(google.limits.connections, 5);
    assert.equal(google.limits.messagesPerConnection, 50);
    assert.equal(siteFor(DEFAULT_SHAPING, ['outlook-com.olc.protection.outlook.com']).key, 'microsoft');
    assert.equal(siteFor(DEFAULT_SHAPING, ['mta5.am0.yahoodns.net.']).key, 'yahoo');
    assert.equal(siteFor(DEFAULT_SHAPING, ['mx01.mail.icloud.com']).key, 'apple');
  });

  it('fills a site’s missing limits from the default row', () => {
    const shaping = parseShaping(
      file({ default: LIMITS, sites: [{ name: 'slow', mx: ['mx.slow.test'], connections: 2, suspendOn: ['busy'] }] }),
    );
    assert.deepEqual(shaping.sites[0], {
      name: 'slow',
      mx: ['mx.slow.test'],
      connections: 2,
      messagesPerConnection: 100,
      perMinute: 600,
      suspendMinutes: 15,
      suspendOn: ['busy'],
    });
    assert.deepEqual(parseShaping(file({ default: LIMITS })).sites, []);
  });

  it('refuses a bad file with the field at fault named', () => {
    const cases: [unknown, RegExp][] = [
      [{ default: { ...LIMITS, connections: 0 } }, /^default\.connections: /],
      [{ default: { ...LIMITS, perMinute: 1.5 } }, /^default\.perMinute: /],
      [{ default: { ...LIMITS, suspendMinutes: '15' } }, /^default\.suspendMinutes: /],
      [{ default: { ...LIMITS, messagesPerConnection: undefined } }, /^default\.messagesPerConnection: missing/],
      [{ default: { ...LIMITS, suspendOn: ['ok', ''] } }, /^default\.suspendOn\[1\]: /],
      [{ default: { ...LIMITS, conections: 3 } }, /^default\.conections: unknown field/],
      [{ sites: [] }, /^default: /],
      [{ default: LIMITS, sites: {} }, /^sites: /],
      [{ default: LIMITS, sites: [{ mx: ['a.test'] }] }, /^sites\[0\]\.name: /],
      [{ default: LIMITS, sites: [{ name: 'a', mx: [] }] }, /^sites\[0\]\.mx: /],
      [{ default: LIMITS, sites: [{ name: 'a' }] }, /^sites\[0\]\.mx: /],
      [{ default: LIMITS, sites: [{ name: 'a', mx: ['ok.test', 'bad host'] }] }, /^sites\[0\]\.mx\[1\]: /],
      [{ default: LIMITS, sites: [{ name: 'a', mx: ['*.*.test'] }] }, /^sites\[0\]\.mx\[0\]: /],
      [
        {
          default: LIMITS,
          sites: [
            { name: 'a', mx: ['a.test'] },
            { name: 'b', mx: ['b.test'], connections: -1 },
          ],
        },
        /^sites\[1\]\.connections: /,
      ],
      [
        {
          default: LIMITS,
          sites: [
            { name: 'a', mx: ['a.test'] },
            { name: 'a', mx: ['b.test'] },
          ],
        },
        /^sites\[1\]\.name: .*another site/,
      ],
      [{ default: LIMITS, sites: [{ name: 'a', mx: ['a.test'], source: 3 }] }, /^sites\[0\]\.source: /],
      [[], /^\(file\): /],
    ];
    for (const [value, expected] of cases) assert.match(refusal(file(value)), expected, file(value));
    assert.match(refusal('{"default": '), /^\(file\): not JSON/);
  });

  it('takes source and comment notes on any row, and lower-cases host patterns', () => {
    const shaping = parseShaping(
      file({ comment: 'ours', default: { ...LIMITS, source: 'x' }, sites: [{ name: 'a', mx: ['*.MX.Example.TEST.'], comment: 'y' }] }),
    );
    assert.deepEqual(shaping.sites[0].mx, ['*.mx.example.test']);
    assert.equal(siteFor(shaping, ['In1.MX.example.test']).key, 'a');
  });
});

describe('Core: the site a destination belongs to (issue 40)', () => {
  const shaping = parseShaping(
    file({
      default: LIMITS,
      sites: [
        { name: 'google', mx: ['*.google.com'], connections: 5 },
        { name: 'exact', mx: ['mx.exact.test'], connections: 1 },
      ],
    }),
  );

  it('matches "*." patterns at any depth under the suffix, but not the suffix itself nor a look-alike', () => {
    assert.equal(siteFor(shaping, ['aspmx.l.google.com']).key, 'google');
    assert.equal(siteFor(shaping, ['alt1.aspmx.l.google.com']).key, 'google');
    assert.equal(siteFor(shaping, ['x.google.com']).key, 'google');
    assert.equal(siteFor(shaping, ['google.com']).key, 'google.com');
    assert.equal(siteFor(shaping, ['mx.notgoogle.com']).key, 'mx.notgoogle.com');
    assert.equal(siteFor(shaping, ['google.com.evil.test']).key, 'google.com.evil.test');
  });

  it('matches exact patterns exactly, ignoring case and a trailing dot', () => {
    assert.equal(siteFor(shaping, ['MX.Exact.Test.']).key, 'exact');
    assert.equal(siteFor(shaping, ['mx.exact.test']).limits.connections, 1);
    assert.equal(siteFor(shaping, ['a.mx.exact.test']).key, 'a.mx.exact.test');
  });

  it('decides by the most-preferred MX host only', () => {
    assert.equal(siteFor(shaping, ['mx.own.test', 'aspmx.l.google.com']).key, 'aspmx.l.google.com,mx.own.test');
    const named = siteFor(shaping, ['aspmx.l.google.com', 'mx.own.test']);
    assert.equal(named.key, 'google');
    assert.equal(named.limits.connections, 5);
    assert.equal(named.limits.perMinute, 600);
  });

  it('otherwise keys the site by its MX set, whatever the order, case or repetition, with the default limits', () => {
    const a = siteFor(shaping, ['MX2.example.test.', 'mx1.example.test', 'mx2.example.test']);
    const b = siteFor(shaping, ['mx1.example.test', 'mx2.example.test']);
    assert.equal(a.key, 'mx1.example.test,mx2.example.test');
    assert.equal(b.key, a.key);
    assert.deepEqual(a.limits, LIMITS);
    assert.notEqual(siteFor(shaping, ['mx1.example.test']).key, a.key);
  });
});

describe('Core: replies that suspend a site (issue 40)', () => {
  const limits = { ...LIMITS, suspendOn: ['4.7.28', 'Rate Limited', 'TSS04'] };

  it('suspends on any 421, whatever its text', () => {
    assert.equal(suspends(limits, 421, '421 4.3.2 Service shutting down'), true);
    assert.equal(suspends({ ...limits, suspendOn: [] }, 421, ''), true);
  });

  it('suspends on another 4xx only when its text names throttling, case-insensitively', () => {
    assert.equal(suspends(limits, 451, '451 4.7.28 [1.2.3.4] Our system has detected an unusual rate of unsolicited mail'), true);
    assert.equal(suspends(limits, 450, '450 you have been RATE LIMITED'), true);
    assert.equal(suspends(limits, 451, '451 [tss04] Messages from 1.2.3.4 temporarily deferred'), true);
    assert.equal(suspends(limits, 451, '451 4.3.0 Temporary local problem'), false);
    assert.equal(suspends(limits, 452, '452 4.2.2 Mailbox full'), false);
  });

  it('never suspends on success, a permanent refusal, or no reply', () => {
    assert.equal(suspends(limits, 250, '250 rate limited'), false);
    assert.equal(suspends(limits, 550, '550 5.7.1 rate limited due to poor reputation'), false);
    assert.equal(suspends(limits, 554, '554 4.7.28'), false);
    assert.equal(suspends(limits, null, 'connect ECONNRESET rate limited'), false);
  });
});
