/**
 * What the sends phase (bench/sends.ts) sends with templates: two typical transactional templates,
 * the data each request renders them with, and the first one's rendering sent plain.
 */
import { createKey } from '../core/provisioning';
import { compileTemplate, renderTemplate } from '../core/templates/render';
import { parseVariables } from '../core/templates/variables';
import type { Orm } from '../db/orm';
import { MESSAGE } from './phase';

/** What the template phases send: a typical transactional template, with its own text part and without one (text made from the html). */
const TEMPLATE_HTML =
  '<h1>Welcome, {{user.first_name}}!</h1><p>Your order <b>{{order.id}}</b> of {{order.total}} is confirmed.</p>' +
  '{{#if vip}}<p>As a VIP you get free shipping.</p>{{else}}<p>Shipping: standard.</p>{{/if}}' +
  '<p><a href="https://shop.example/orders/{{order.id}}">See your order</a></p>';
const TEMPLATE_VARIABLES = [
  { key: 'user.first_name', type: 'string', fallback: 'there' },
  { key: 'order.id', type: 'string' },
  { key: 'order.total', type: 'number' },
  { key: 'vip', type: 'boolean', fallback: false },
];
export const TEMPLATES = [
  {
    label: 'html and text parts',
    name: 'Bench order',
    slug: 'bench-order',
    subject: 'Order {{order.id}} confirmed, {{user.first_name}}',
    html: TEMPLATE_HTML,
    text: 'Welcome, {{user.first_name}}! Order {{order.id}} of {{order.total}} is confirmed. https://shop.example/orders/{{order.id}}',
    variables: TEMPLATE_VARIABLES,
  },
  {
    label: 'html only, text made from it',
    name: 'Bench order html',
    slug: 'bench-order-html',
    subject: 'Order {{order.id}} confirmed, {{user.first_name}}',
    html: TEMPLATE_HTML,
    variables: TEMPLATE_VARIABLES,
  },
];
/** `__SEQ__` becomes a unique number per request (bench/load.ts). */
export const TEMPLATE_DATA = { 'user.first_name': 'Ann', order: { id: 'A-__SEQ__', total: 42.5 }, vip: true };
/** What the first template renders to with TEMPLATE_DATA, rendered by the service's own code and sent plain: the cost of the content alone. */
export const RENDERED = {
  from: 'Bench <bench@bench.test>',
  to: 'someone@example.com',
  ...renderTemplate(
    compileTemplate({
      subject: TEMPLATES[0].subject,
      html: TEMPLATES[0].html,
      text: TEMPLATES[0].text ?? null,
      variables: parseVariables(TEMPLATE_VARIABLES),
    }),
    TEMPLATE_DATA,
    'refuse',
  ),
};

/** Publishes the templates the template phases send with, through the API. */
export async function publishTemplates(url: string, orgId: string, orm: Orm): Promise<void> {
  const admin = (await createKey(orm, orgId, { name: 'bench-admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const call = async (p: string, body?: unknown) => {
    const res = await fetch(`${url}/api/v1${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
  };
  for (const { label: _label, ...t } of TEMPLATES) {
    await call('/templates', t);
    await call(`/templates/${t.slug}/publish`);
  }
}

/** The bodies the template comparison sends in turn: plain, the rendering sent plain, then each template. */
export const TEMPLATE_BODIES: unknown[] = [
  MESSAGE,
  RENDERED,
  ...TEMPLATES.map((t) => ({ from: MESSAGE.from, to: MESSAGE.to, template: { slug: t.slug, data: TEMPLATE_DATA } })),
];
