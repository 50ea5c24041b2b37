import assert from 'node:assert/strict';
import { axeViolations, describeViolations } from '../support/axe';
import { closeBrowser, launchBrowser, type BrowserContext, type Page } from '../support/browser';
import { newOperator, type OperatorLogin } from '../support/console';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';

/**
 * The organization page's Transport and Cloudflare forms in real Chromium, as a platform operator
 * uses them: the transport set, the organization marked internal, a Cloudflare token attached
 * against the local Cloudflare-compatible API (CLOUDFLARE_API_BASE_URL) and detached; each state of
 * the page clean under axe-core.
 */
describe('console in a browser: the organization page’s transport and Cloudflare forms', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let context: BrowserContext;
  let page: Page;
  let orgPage: string;

  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const audit = async (action: string) =>
    (await t.call('GET', `/api/v1/audit-log?action=${action}`, { as: 'admin' })).body.data as { actor: string; details: any }[];
  const status = async () => (await page.getByRole('status').innerText()).trim();

  async function axeClean(label: string) {
    const found = await axeViolations(page);
    assert.equal(found.length, 0, `${label}: axe-core found serious or critical violations:\n${describeViolations(found)}`);
  }

  before(async function () {
    this.timeout(120_000);
    env = await sharedService();
    [t, platform] = await Promise.all([newTenant(env), newOperator(env, null)]);
    orgPage = `/console/organizations/${t.orgId}`;
    context = await (await launchBrowser()).newContext({ baseURL: env.url, viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    await page.goto('/console/sign-in');
    await page.getByLabel('Email').fill(platform.email);
    await page.getByLabel('Password').fill(platform.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/console/overview');
  });

  after(async () => {
    await context?.close();
    await closeBrowser();
  });

  it('sets the transport with its labelled select, audited as the operator', async () => {
    await page.goto(orgPage);
    await page.getByRole('heading', { name: 'Transport' }).waitFor();
    await axeClean('organization');
    const select = page.getByLabel('How live mail leaves');
    assert.equal(await select.inputValue(), 'relay');
    await select.selectOption('direct');
    await page.getByRole('button', { name: 'Set transport' }).click();
    await page.waitForURL(`**${orgPage}?done=transport_set`);
    assert.equal(await status(), 'The transport was set.');
    assert.equal(await page.getByLabel('How live mail leaves').inputValue(), 'direct');
    const [row] = await sql(`select transport from organizations where id = ?`, [t.orgId]);
    assert.equal(row.transport, 'direct');
    assert.equal((await audit('organization.transport_set'))[0]?.actor, `console:${platform.email}`);
    await axeClean('organization after the transport');
  });

  it('marks the organization internal, then attaches a Cloudflare token checked by the API and never shows it', async () => {
    const zone = `org-browser-${Date.now()}.example.test`;
    env.cloudflare.addZone(zone);
    const token = env.cloudflare.addToken();
    await page.goto(orgPage);
    assert.equal(await page.getByText('Only an internal organization may attach a Cloudflare token.').count(), 1);
    assert.equal(await page.getByLabel(/Cloudflare API token/).count(), 0, 'no token field before it is internal');
    await page.getByLabel(/^Internal/).selectOption('yes');
    await page.getByRole('button', { name: 'Set internal' }).click();
    await page.waitForURL(`**${orgPage}?done=internal_set`);
    assert.equal(await page.getByLabel(/^Internal/).inputValue(), 'yes');
    await axeClean('organization, internal');

    // A token without DNS Edit is refused with Cloudflare's verdict in words, and not kept.
    const readOnly = env.cloudflare.addToken(['#zone:read', '#dns_records:read']);
    await page.getByLabel(/Cloudflare API token/).fill(readOnly);
    await page.getByRole('button', { name: 'Attach the token' }).click();
    await page.waitForLoadState();
    assert.match((await page.getByRole('alert').innerText()).trim(), /needs DNS Edit/);
    assert.ok(!(await page.content()).includes(readOnly));
    await axeClean('the refused token');

    await page.goto(orgPage);
    const field = page.getByLabel(/Cloudflare API token/);
    assert.equal(await field.getAttribute('type'), 'password');
    await field.fill(token);
    await page.getByRole('button', { name: 'Attach the token' }).click();
    await page.waitForURL(`**${orgPage}?done=cloudflare_attached`);
    const id = env.cloudflare.tokens.get(token)!.id;
    await page.getByText(`Cloudflare token ${id} attached`).waitFor();
    assert.ok(!(await page.content()).includes(token), 'the token is never shown');
    assert.equal(await page.getByRole('button', { name: 'Replace the token' }).count(), 1);
    assert.ok(env.cloudflare.requests.some((r) => r.path.endsWith('/user/tokens/verify') && r.token === token));
    const [attached] = await audit('organization.cloudflare_attached');
    assert.equal(attached?.actor, `console:${platform.email}`);
    assert.ok(attached!.details.zones.includes(zone));
    await axeClean('organization with a token');

    await page.getByRole('button', { name: 'Detach the token' }).click();
    await page.waitForURL(`**${orgPage}?done=cloudflare_detached`);
    assert.equal(await page.getByText('No Cloudflare token attached.').count(), 1);
    assert.equal((await audit('organization.cloudflare_detached'))[0]?.actor, `console:${platform.email}`);
    await axeClean('organization, token detached');
  });
});
