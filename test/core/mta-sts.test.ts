import assert from 'node:assert/strict';
import { mxMatchesPolicy, parseStsPolicy, parseStsRecord, type StsPolicy } from '../../core/delivery/mta-sts';

const policy = (mx: string[]): StsPolicy => ({ id: 'x', mode: 'enforce', mx, maxAgeSeconds: 86400 });

describe('Core: the _mta-sts TXT record (RFC 8461 §3.1)', () => {
  it('reads the id of the one STSv1 record, ignoring other TXT records and unknown fields', () => {
    assert.deepEqual(parseStsRecord(['v=STSv1; id=20160831085700Z;']), { id: '20160831085700Z' });
    assert.deepEqual(parseStsRecord(['v=spf1 -all', 'v=STSv1;id=abc123', 'something else']), { id: 'abc123' });
    assert.deepEqual(parseStsRecord(['v=STSv1 ;\tid=a1 ; ext_x=some.value']), { id: 'a1' });
    assert.deepEqual(parseStsRecord(['v=STSv1; id=' + 'a'.repeat(32)]), { id: 'a'.repeat(32) });
  });

  it('finds no policy when there is no record or more than one', () => {
    assert.equal(parseStsRecord([]), null);
    assert.equal(parseStsRecord(['v=spf1 -all']), null);
    assert.equal(parseStsRecord(['v=STSv1; id=one', 'v=STSv1; id=two']), null);
    assert.equal(parseStsRecord(['v=STSv1; id=same', 'v=STSv1; id=same']), null);
  });

  it('ignores a record that only looks like ours, so the real one still counts', () => {
    assert.deepEqual(parseStsRecord(['v=STSv10; id=nope', 'v=STSv1; id=yes']), { id: 'yes' });
    assert.deepEqual(parseStsRecord(['V=STSV1; id=nope', 'v=STSv1; id=yes']), { id: 'yes' });
  });

  it('finds no policy when the record is malformed or its id is bad', () => {
    for (const bad of [
      'v=STSv1;',
      'v=STSv1; ext=1',
      'v=STSv1; id=',
      'v=STSv1; id=has-dash',
      'v=STSv1; id=has space',
      'v=STSv1; id=' + 'a'.repeat(33),
      'v=STSv1; id=a; id=b',
      'v=STSv1; id=a;; ext=1',
      'v=STSv1; id=a; ext=a=b',
      'v=STSv1; id=a; =value',
      'v=STSv1; id',
    ]) {
      assert.equal(parseStsRecord([bad]), null, bad);
    }
  });
});

describe('Core: the MTA-STS policy file (RFC 8461 §3.2)', () => {
  const body = [
    'version: STSv1',
    'mode: enforce',
    'mx: mail.example.com',
    'mx: *.example.net',
    'mx: backupmx.example.com',
    'max_age: 604800',
    '',
  ];

  it('reads a policy whose lines end in CRLF or in LF alike', () => {
    const expected = {
      id: 'id1',
      mode: 'enforce',
      mx: ['mail.example.com', '*.example.net', 'backupmx.example.com'],
      maxAgeSeconds: 604800,
    };
    assert.deepEqual(parseStsPolicy('id1', body.join('\r\n')), expected);
    assert.deepEqual(parseStsPolicy('id1', body.join('\n')), expected);
    assert.deepEqual(parseStsPolicy('id1', body.slice(0, -1).join('\n')), expected);
  });

  it('ignores unknown fields, keeps the first of a repeated field, lower-cases mx and tolerates spacing', () => {
    const parsed = parseStsPolicy(
      'id2',
      '\uFEFFversion:STSv1\nmode:   testing  \nfuture_field: a=b; c\nMode: enforce\nmode: enforce\nmx: MX.Example.COM.\nmax_age: 86400\nmax_age: 1\n',
    );
    assert.deepEqual(parsed, { id: 'id2', mode: 'testing', mx: ['mx.example.com'], maxAgeSeconds: 86400 });
  });

  it('takes mode none without mx, and max_age at the limit of one year', () => {
    assert.deepEqual(parseStsPolicy('n', 'version: STSv1\r\nmode: none\r\nmax_age: 31557600\r\n'), {
      id: 'n',
      mode: 'none',
      mx: [],
      maxAgeSeconds: 31557600,
    });
  });

  it('refuses a policy missing what the RFC requires or with values out of bounds', () => {
    const cases: [string, RegExp][] = [
      ['mode: enforce\nmx: a.example.com\nmax_age: 1', /version/],
      ['version: STSv2\nmode: enforce\nmx: a.example.com\nmax_age: 1', /version/],
      ['version: STSv1\nmx: a.example.com\nmax_age: 1', /mode/],
      ['version: STSv1\nmode: Enforce\nmx: a.example.com\nmax_age: 1', /mode/],
      ['version: STSv1\nmode: enforce\nmx: a.example.com', /max_age/],
      ['version: STSv1\nmode: enforce\nmx: a.example.com\nmax_age: 31557601', /max_age/],
      ['version: STSv1\nmode: enforce\nmx: a.example.com\nmax_age: -1', /max_age/],
      ['version: STSv1\nmode: enforce\nmx: a.example.com\nmax_age: 12345678901', /max_age/],
      ['version: STSv1\nmode: enforce\nmax_age: 1', /no mx/],
      ['version: STSv1\nmode: testing\nmax_age: 1', /no mx/],
      ['version: STSv1\nmode: enforce\nmx: a.*.example.com\nmax_age: 1', /mx/],
      ['version: STSv1\nmode: enforce\nmx: *.com.\nmx: bad_host.example\nmax_age: 1', /mx "bad_host\.example"/],
      ['version: STSv1\nmode: enforce\nthis line has no colon\nmx: a.example.com\nmax_age: 1', /line 3/],
      ['<html>not found</html>', /line 1/],
    ];
    for (const [text, expected] of cases) {
      const parsed = parseStsPolicy('x', text);
      assert.ok('error' in parsed, text);
      assert.match(parsed.error, expected, text);
    }
  });
});

describe('Core: MX hosts a policy allows (RFC 8461 §4.1)', () => {
  it('matches an exact name regardless of case and a trailing dot', () => {
    const p = policy(['mail.example.com']);
    assert.equal(mxMatchesPolicy(p, 'mail.example.com'), true);
    assert.equal(mxMatchesPolicy(p, 'MAIL.Example.com.'), true);
    assert.equal(mxMatchesPolicy(policy(['Mail.Example.COM.']), 'mail.example.com'), true);
    assert.equal(mxMatchesPolicy(p, 'mail2.example.com'), false);
    assert.equal(mxMatchesPolicy(p, 'x.mail.example.com'), false);
  });

  it('lets "*." stand for exactly one label', () => {
    const p = policy(['*.example.com']);
    assert.equal(mxMatchesPolicy(p, 'mx1.example.com'), true);
    assert.equal(mxMatchesPolicy(p, 'MX1.EXAMPLE.COM.'), true);
    assert.equal(mxMatchesPolicy(p, 'example.com'), false);
    assert.equal(mxMatchesPolicy(p, 'a.b.example.com'), false);
    assert.equal(mxMatchesPolicy(p, 'mx1.notexample.com'), false);
    assert.equal(mxMatchesPolicy(p, '.example.com'), false);
  });

  it('matches any of the listed patterns, and none when the list is empty', () => {
    const p = policy(['mail.example.com', '*.backup.example.net']);
    assert.equal(mxMatchesPolicy(p, 'mx.backup.example.net'), true);
    assert.equal(mxMatchesPolicy(p, 'mail.example.com'), true);
    assert.equal(mxMatchesPolicy(p, 'mx.example.net'), false);
    assert.equal(mxMatchesPolicy({ ...p, mode: 'none', mx: [] }, 'mail.example.com'), false);
  });
});
