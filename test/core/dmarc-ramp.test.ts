import assert from 'node:assert/strict';
import {
  DMARC_GATE,
  dmarcAlignmentFallen,
  dmarcGate,
  dmarcRecordName,
  dmarcRecordValue,
  nextDmarcStep,
  previousDmarcStep,
  type GateStats,
} from '../../core/dmarc/ramp';

describe('DMARC ramp: steps, records, gate', () => {
  const good: GateStats = {
    days: 14,
    oursTotal: 10_000,
    oursAligned: 9_990,
    sources: [
      { sourceIp: '192.0.2.1', count: 10_000, aligned: 9_990, ours: true, unauthorized: false },
      { sourceIp: '198.51.100.7', count: 50, aligned: 0, ours: false, unauthorized: false },
    ],
  };

  it('steps none → quarantine → reject, and back', () => {
    assert.equal(nextDmarcStep('none'), 'quarantine');
    assert.equal(nextDmarcStep('quarantine'), 'reject');
    assert.equal(nextDmarcStep('reject'), null);
    assert.equal(previousDmarcStep('reject'), 'quarantine');
    assert.equal(previousDmarcStep('none'), null);
  });

  it('writes the record the same for RFC 7489 and DMARCbis receivers: no pct, no t=y, rua at the return-path host', () => {
    assert.equal(dmarcRecordName('example.com'), '_dmarc.example.com');
    for (const step of ['none', 'quarantine', 'reject'] as const) {
      const v = dmarcRecordValue(step, 'rp.example.com');
      assert.equal(v, `v=DMARC1; p=${step}; rua=mailto:dmarc-reports@rp.example.com`);
      assert.doesNotMatch(v, /pct=|t=y/);
    }
  });

  it('holds with 14 days, ≥ 99.5% of ours aligned, small failing sources ignored, no rotation', () => {
    const v = dmarcGate('none', good, false);
    assert.deepEqual(v.reasons, []);
    assert.equal(v.holds, true);
  });

  it('refuses with each unmet condition stated', () => {
    assert.match(dmarcGate('none', { ...good, days: 13 }, false).reasons.join(), /13 of 14 days/);
    assert.match(dmarcGate('none', { ...good, oursAligned: 9_940 }, false).reasons.join(), /99\.4% aligned/);
    assert.match(dmarcGate('none', { ...good, oursTotal: 0, oursAligned: 0 }, false).reasons.join(), /No report shows/);
    assert.match(dmarcGate('none', good, true).reasons.join(), /DKIM key rotation/);
    assert.match(dmarcGate('reject', good, false).reasons.join(), /last step/);
    // A source above 1% of the volume failing, unless marked unauthorized.
    const big = {
      ...good,
      sources: [...good.sources, { sourceIp: '203.0.113.9', count: 500, aligned: 400, ours: false, unauthorized: false }],
    };
    const v = dmarcGate('quarantine', big, false);
    assert.equal(v.holds, false);
    assert.deepEqual(v.failingSources, ['203.0.113.9']);
    big.sources[2]!.unauthorized = true;
    assert.equal(dmarcGate('quarantine', big, false).holds, true);
    // Mostly passing (≥ 99%) is passing: forwarders break a few.
    const fwd = {
      ...good,
      sources: [...good.sources, { sourceIp: '203.0.113.10', count: 1000, aligned: 990, ours: false, unauthorized: false }],
    };
    assert.equal(dmarcGate('quarantine', fwd, false).holds, true);
    assert.equal(DMARC_GATE.sourcePasses, 0.99);
  });

  it('says alignment fell only past none, with some of our mail reported', () => {
    const fell = { ...good, oursAligned: 9_000 };
    assert.equal(dmarcAlignmentFallen('quarantine', fell), true);
    assert.equal(dmarcAlignmentFallen('none', fell), false);
    assert.equal(dmarcAlignmentFallen('reject', { ...good, oursTotal: 0, oursAligned: 0 }), false);
    assert.equal(dmarcAlignmentFallen('reject', good), false);
  });
});
