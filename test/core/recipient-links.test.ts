import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRecipientLinks } from '../../core/recipient-links';
import { rewriteLinks } from '../../core/tracking/rewrite';
import { recipientParts } from '../../core/emails/recipient-parts';

const ORG = '0190f5c2-3b4a-7c6d-8e9f-0a1b2c3d4e5f';
const EMAIL = '0190f5c2-3b4a-7c6d-8e9f-0a1b2c3d4e60';
const TOPIC = '0190f5c2-3b4a-7c6d-8e9f-0a1b2c3d4e61';

describe('core: recipient links and parts', () => {
  const links = createRecipientLinks(randomBytes(32), 'https://mail.example.com/');
  const tokenOf = (url: string) => new URL(url).pathname.split('/').pop()!;

  it('unsubscribe tokens name organization, message, topic and address, and read back only unaltered', () => {
    for (const topicId of [TOPIC, null]) {
      const target = { organizationId: ORG, emailId: EMAIL, topicId, address: 'ünï@example.com' };
      const url = links.unsubscribeUrl(target);
      assert.ok(url.startsWith('https://mail.example.com/u/'), url);
      assert.deepEqual(links.readUnsubscribe(tokenOf(url)), target);
      const token = tokenOf(url);
      for (let i = 0; i < token.length; i += 7) {
        const altered = token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
        assert.equal(links.readUnsubscribe(altered), null, `altered at ${i}`);
      }
    }
    // Another deployment's key (or another purpose's) does not read them.
    const other = createRecipientLinks(randomBytes(32), 'https://mail.example.com');
    const url = links.unsubscribeUrl({ organizationId: ORG, emailId: EMAIL, topicId: null, address: 'a@b.c' });
    assert.equal(other.readUnsubscribe(tokenOf(url)), null);
    assert.equal(links.readPixel(tokenOf(url)), null);
    assert.equal(links.readClick(tokenOf(url)), null);
    for (const junk of ['', '!', 'a'.repeat(9000), '%00', '__proto__']) assert.equal(links.readUnsubscribe(junk), null);
  });

  it('pixel and click tokens live under the tracking host, and a click carries exactly its signed URL', () => {
    const pixel = links.pixelUrl('links.example.com', EMAIL);
    assert.ok(pixel.startsWith('https://links.example.com/t/o/'));
    assert.deepEqual(links.readPixel(tokenOf(pixel)), { emailId: EMAIL });
    assert.equal(links.readClick(tokenOf(pixel)), null, 'a pixel token is no click token');
    const click = links.clickUrl('links.example.com', EMAIL, 'https://shop.example/p?a=1&b=2#top');
    assert.deepEqual(links.readClick(tokenOf(click)), { emailId: EMAIL, url: 'https://shop.example/p?a=1&b=2#top' });
  });

  it('rewrites http(s) hrefs of <a> and <area> (any quoting, entities decoded), nothing else', () => {
    const html =
      `<a href="https://a.example/x?p=1&amp;q=2">A</a> <A class=x HREF='http://b.example/'>B</A> <a href=https://c.example/c>C</a>` +
      `<a href="mailto:x@y.z">M</a><a href="#top">T</a><a href="/relative">R</a><abbr href="https://no.example">N</abbr>` +
      `<area shape=rect href="https://d.example/">` +
      `<img src="https://img.example/i.png"><link href="https://css.example/s.css">`;
    const seen: string[] = [];
    const out = rewriteLinks(html, (u) => {
      seen.push(u);
      return `https://t.example/c/${seen.length}`;
    });
    assert.deepEqual(seen, ['https://a.example/x?p=1&q=2', 'http://b.example/', 'https://c.example/c', 'https://d.example/']);
    assert.ok(out.includes('href="https://t.example/c/1"') && out.includes('HREF="https://t.example/c/2"'));
    for (const kept of [
      'mailto:x@y.z',
      '#top',
      '/relative',
      'https://no.example',
      'https://img.example/i.png',
      'https://css.example/s.css',
    ])
      assert.ok(out.includes(kept), kept);
  });

  it('adds headers to every bulk message, the footer only with a postal address, and the pixel last', () => {
    const base = { html: '<html><body><p>Hi <a href="https://x.example/">x</a></p></body></html>', text: 'Hi' };
    const sender = { name: 'Acme & Co', postalAddress: '1 Main St\n  Springfield  ' };
    const full = recipientParts({
      ...base,
      unsubscribeUrl: 'https://mail.example.com/u/T',
      sender,
      pixelUrl: 'https://l.example/t/o/P',
      clickUrl: (u) => `https://l.example/t/c/${encodeURIComponent(u)}`,
    });
    assert.deepEqual(full.headers, {
      'List-Unsubscribe': '<https://mail.example.com/u/T>',
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    });
    assert.ok(full.html!.includes('Acme &amp; Co<br>1 Main St<br>Springfield<br>'));
    assert.ok(full.html!.includes('href="https://mail.example.com/u/T"'), 'the unsubscribe link is not tracked');
    assert.ok(full.html!.includes('href="https://l.example/t/c/https%3A%2F%2Fx.example%2F"'));
    assert.ok(full.html!.indexOf('/t/o/P') > full.html!.indexOf('Springfield') && full.html!.endsWith('</body></html>'));
    assert.equal(full.text, 'Hi\n\n-- \nAcme & Co\n1 Main St\nSpringfield\nUnsubscribe: https://mail.example.com/u/T\n');

    const noAddress = recipientParts({
      ...base,
      unsubscribeUrl: 'https://mail.example.com/u/T',
      sender: null,
      pixelUrl: null,
      clickUrl: null,
    });
    assert.equal(noAddress.html, base.html);
    assert.equal(noAddress.text, base.text);
    assert.equal(Object.keys(noAddress.headers).length, 2);

    const transactional = recipientParts({ ...base, unsubscribeUrl: null, sender, pixelUrl: null, clickUrl: null });
    assert.deepEqual(transactional, { ...base, headers: {} });
  });
});
