import assert from 'node:assert/strict';
import { feedbackId } from '../../core/emails/feedback-id';
import { foldableHeaderValue } from '../../core/emails/header-lines';
import { wireBodies } from '../../core/emails/wire-bodies';

/** How a stored message's parts and headers are put on the wire (issue 50); the whole message is judged in test/deliverability/. */
describe('core: the wire form of a message (text alternative, html document, header lines, Feedback-ID)', () => {
  it('gives html without text the text its reader sees, links with their address and no images', () => {
    const { html, text } = wireBodies(
      '<p>Hello <b>Ann</b>,</p><p><a href="https://x.example/a">your order</a><img src="https://x.example/p.png"></p>',
      null,
    );
    assert.equal(text, 'Hello Ann,\n\nyour order [https://x.example/a]');
    assert.equal(
      html,
      '<html><body><p>Hello <b>Ann</b>,</p><p><a href="https://x.example/a">your order</a><img src="https://x.example/p.png"></p></body></html>',
    );
  });

  it('keeps a given text part, a text-only message, and an html document as they are', () => {
    assert.deepEqual(wireBodies('<html><body><p>Hi</p></body></html>', 'Hi there'), {
      html: '<html><body><p>Hi</p></body></html>',
      text: 'Hi there',
    });
    assert.deepEqual(wireBodies(null, 'Only text'), { html: null, text: 'Only text' });
    assert.deepEqual(wireBodies('<HTML lang="en"><p>Hi</p></HTML>', 'Hi').html, '<HTML lang="en"><p>Hi</p></HTML>');
    // A body without its html element gains only that.
    assert.equal(wireBodies('<body><p>Hi</p></body>', 'Hi').html, '<html><body><p>Hi</p></body></html>');
    // `<htmlfoo>` is not an html element.
    assert.equal(wireBodies('<htmlish>x</htmlish>', 'x').html, '<html><body><htmlish>x</htmlish></body></html>');
  });

  it('writes a header value too long to fold as encoded-words that decode to it, and leaves others alone', () => {
    const decode = (v: string) => v.replace(/=\?UTF-8\?B\?([^?]*)\?=\s*/g, (_, b: string) => Buffer.from(b, 'base64').toString('utf8'));
    assert.equal(foldableHeaderValue('X-Ref', 'order 1042'), 'order 1042');
    const words = 'word '.repeat(199).trim();
    assert.equal(foldableHeaderValue('X-Words', words), words, 'whitespace lets it fold');
    const fits = 'x'.repeat(998 - 'X-A: '.length);
    assert.equal(foldableHeaderValue('X-A', fits), fits, 'exactly 998 octets with its name');
    assert.match(foldableHeaderValue('X-A', `${fits}x`), /^=\?UTF-8\?B\?/, 'one more is encoded');
    for (const long of ['x'.repeat(1000), `${'é'.repeat(400)}${'z'.repeat(300)}`, `short ${'y'.repeat(995)}`]) {
      const encoded = foldableHeaderValue('X-Long', long);
      assert.match(encoded, /^=\?UTF-8\?B\?/);
      assert.ok(
        encoded.split(' ').every((w) => w.length <= 75),
        'each encoded-word at most 75 characters (RFC 2047)',
      );
      assert.equal(decode(encoded), long);
    }
  });

  it('makes a Feedback-ID of four fields, the sender id last, a colon in the kind made a dot', () => {
    const org = '0195a1b2-0000-7000-8000-000000000001';
    assert.equal(feedbackId('bulk.newsletter', 'bulk', org), `bulk.newsletter:bulk:${org}:svcmail`);
    const fields = feedbackId('digest:weekly', 'bulk', org).split(':');
    assert.deepEqual(fields, ['digest.weekly', 'bulk', org, 'svcmail']);
  });
});
