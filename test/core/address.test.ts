import assert from 'node:assert/strict';
import { parseMailbox } from '../../core/emails/address';

describe('Core: the one address parser (exactly one mailbox)', () => {
  it('reads a bare address, a named one and a quoted name, whatever the script', () => {
    assert.deepEqual(parseMailbox('  Ann@Example.com '), {
      name: null,
      address: 'Ann@Example.com',
      normalized: 'ann@example.com',
      domain: 'example.com',
    });
    assert.deepEqual(parseMailbox('Ann Lee <ann@example.com>'), {
      name: 'Ann Lee',
      address: 'ann@example.com',
      normalized: 'ann@example.com',
      domain: 'example.com',
    });
    assert.equal(parseMailbox('"Lee, Ann" <ann@example.com>')?.name, 'Lee, Ann');
    assert.equal(parseMailbox('"Ann \\"The Boss\\" Lee" <ann@example.com>')?.name, 'Ann "The Boss" Lee');
    assert.equal(
      parseMailbox('"ceo@bank.example" <ann@example.com>')?.address,
      'ann@example.com',
      'a quoted name may hold @: it is still one mailbox',
    );
    assert.equal(parseMailbox('José Ñúñez <jose@example.com>')?.name, 'José Ñúñez');
    assert.equal(parseMailbox('J. R. Lee <jr@example.com>')?.name, 'J. R. Lee');
    assert.equal(parseMailbox('<ann@example.com>')?.name, null);
    assert.equal(parseMailbox("o'brien+tag@example.com")?.address, "o'brien+tag@example.com");
  });

  it('refuses anything that is not exactly one mailbox', () => {
    for (const s of [
      'ceo@bank.example, Evil <probe@sandbox.test>',
      'a@example.com, b@example.com',
      'a@example.com b@example.com',
      'Ann <a@example.com>, Bob <b@example.com>',
      'Ann <a@example.com> <b@example.com>',
      'Ann <a@example.com>>',
      '<<a@example.com>>',
      'ceo@bank.example <probe@sandbox.test>',
      'Team: a@example.com, b@example.com;',
      'Team:;',
      'a@example.com (the boss)',
      'Ann (boss) <a@example.com>',
      '"unterminated <a@example.com>',
      '"Ann" "Lee" <a@example.com>',
      '"Ann" Lee <a@example.com>',
      'Ann\r\nBcc: victim@example.com <a@example.com>',
      'Ann\n<a@example.com>',
      'Ann <a@example.com>\u0000',
      '<@relay.example:a@example.com>',
      'a@[127.0.0.1]',
      '"quoted local"@example.com',
      'a..b@example.com',
      '.a@example.com',
      'a@example',
      'a@-example.com',
      '@example.com',
      'a@',
      '',
      'Ann <>',
      'Ann < a@example.com >',
    ]) {
      assert.equal(parseMailbox(s), null, JSON.stringify(s));
    }
  });
});
