import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { closeBrowser, launchBrowser, type BrowserContext, type Page } from '../support/browser';
import { liveTemporal } from '../support/temporal-server';
import { startLiveStack, type LiveStack } from '../support/temporal-live';
import { skipBecause } from '../support/skips';
import { waitFor } from '../support/wait';
import { CLOSE_UNCONFIRMED_SIGNAL } from '../../workflows/send-email';

/** Where the operator procedure's screenshots live (docs/temporal.md); written only with UPDATE_SCREENSHOTS=1. */
const SHOTS = path.resolve(__dirname, '../../docs/temporal');

/**
 * The operator procedure of docs/temporal.md in the Temporal Web UI (2.42, served by the project's
 * `temporal server start-dev` on loopback), driven in a headless Chromium: find a `sent` message's
 * workflow by a search attribute, open it, send `close-unconfirmed` from its actions menu, and the
 * API then reports the message `unconfirmed`. With UPDATE_SCREENSHOTS=1 each step is saved as a
 * PNG into docs/temporal/; otherwise the run writes nothing into the repository.
 */
describe('Temporal UI, in a browser: an operator closes a sent message as unconfirmed', function () {
  this.timeout(180_000);
  let stack: LiveStack;
  let context: BrowserContext;
  let page: Page;
  let uiUrl: string;

  before(async function () {
    const { server } = await liveTemporal(this);
    if (!server) skipBecause(this, 'TEMPORAL_ADDRESS names a server of your own: the UI tested here is the project’s');
    uiUrl = server.uiUrl;
    // A confirmation window: the message's SendEmail run (workflow id = email id) waits at `sent`.
    stack = await startLiveStack(this, { name: 'ui', confirmationWindowHours: 1 });
    context = await (await launchBrowser()).newContext({ viewport: { width: 1400, height: 900 } });
    // Everything the UI loads comes from the dev server on loopback; anything else would hang offline.
    await context.route(
      (url) => url.hostname !== '127.0.0.1',
      (route) => route.abort(),
    );
    page = await context.newPage();
  });

  after(async () => {
    await context?.close();
    await closeBrowser();
    await stack?.stop();
  });

  async function shot(name: string): Promise<void> {
    if (process.env.UPDATE_SCREENSHOTS !== '1') return;
    fs.mkdirSync(SHOTS, { recursive: true });
    // Transitions (a closing listbox, a button turning enabled) finished, as a reader would see the page.
    await page.screenshot({ path: path.join(SHOTS, name), animations: 'disabled' });
  }

  /** The UI renders a mobile and a desktop copy of some controls: the one on screen. */
  const visible = (testId: string) => page.getByTestId(testId).filter({ visible: true }).first();

  const status = async (id: string) => ((await stack.call('GET', `/api/v1/emails/${id}`)).body as { last_event: string }).last_event;
  const settled = (id: string, want: string, timeoutMs = 60_000) =>
    waitFor(async () => (await status(id)) === want, `email ${id} to be ${want}`, timeoutMs);

  /** The workflow list filtered by `query` until it shows `id` (visibility is eventually consistent). */
  async function listed(query: string, id: string): Promise<void> {
    const link = page.getByRole('link', { name: id, exact: true });
    await waitFor(
      async () => {
        await page.goto(`${uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
        return link
          .first()
          .waitFor({ timeout: 3000 })
          .then(() => true)
          .catch(() => false);
      },
      `the workflow list filtered by ${query} to show ${id}`,
      30_000,
      0,
    );
  }

  it('finds the workflow by SvcOrganization, sends close-unconfirmed from its actions menu, and the message is unconfirmed', async () => {
    const res = await stack.call('POST', '/api/v1/emails', {
      body: { from: `Shop <shop@${stack.domain}>`, to: `ui-${Date.now()}@example.com`, subject: 'Order 1042 shipped', text: 'On its way.' },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = (res.body as { id: string }).id;
    await settled(id, 'sent');
    // Its SendEmail run now waits at `sent` for a delivery event or this signal.

    // 1. The workflow list filtered by the organization's search attribute (visibility is eventually consistent).
    await listed(`SvcOrganization="${stack.orgId}"`, id);
    const link = page.getByRole('link', { name: id, exact: true });
    assert.equal(await link.count(), 1, 'listed once');
    await page.getByText('Running', { exact: true }).first().waitFor();
    await shot('ui-1-filter.png');

    // 2. The message's workflow (workflow id = email id), waiting.
    await link.click();
    await page.waitForURL(new RegExp(`/workflows/${id}/[^/]+/history`));
    await visible('workflow-id-heading').waitFor();
    assert.match(await visible('workflow-id-heading').innerText(), new RegExp(id));
    const heading = page.locator('header, main').filter({ hasText: id }).first();
    await heading.getByText('Running', { exact: true }).first().waitFor();
    await page.getByText('WorkflowExecutionStarted').or(page.getByText('Workflow Execution Started')).first().waitFor();
    await shot('ui-2-workflow.png');

    // 3. More Actions → Send a Signal, name close-unconfirmed (it needs no input).
    await page.getByRole('button', { name: 'More Actions' }).filter({ visible: true }).first().click();
    await visible('signal-button').click();
    const dialog = page.getByTestId('signal-confirmation-modal').filter({ visible: true }).first();
    await dialog.getByRole('heading', { name: 'Send a Signal' }).waitFor();
    // With a worker up, the UI asks the run for its signals (the SDK's workflow metadata query) and
    // offers them in a select; without an answer it falls back to a free-text name.
    const select = dialog.getByTestId('signal-select-button');
    const name = dialog.getByTestId('signal-name');
    await select.or(name).first().waitFor();
    if (await select.isVisible()) {
      await select.click();
      await dialog.getByRole('option', { name: CLOSE_UNCONFIRMED_SIGNAL, exact: true }).click();
      assert.equal(await dialog.getByTestId('signal-select').inputValue(), CLOSE_UNCONFIRMED_SIGNAL);
    } else {
      await name.fill(CLOSE_UNCONFIRMED_SIGNAL);
    }
    const submit = dialog.getByTestId('confirm-modal-button');
    await waitFor(async () => await submit.isEnabled(), 'Submit to be enabled');
    await dialog.getByRole('listbox').waitFor({ state: 'hidden' });
    await shot('ui-3-signal.png');
    await submit.click();
    await dialog.waitFor({ state: 'hidden' });

    // 4. The workflow closed the message and completed; the API says unconfirmed.
    await settled(id, 'unconfirmed', 30_000);
    await waitFor(
      async () => {
        await page.reload();
        return heading
          .getByText('Completed', { exact: true })
          .first()
          .waitFor({ timeout: 3000 })
          .then(() => true)
          .catch(() => false);
      },
      'the workflow page to show Completed',
      30_000,
      0,
    );
    // The signal in its history (the timeline labels it by name).
    await page.getByText(CLOSE_UNCONFIRMED_SIGNAL, { exact: true }).filter({ visible: true }).first().waitFor();
    await shot('ui-4-result.png');
  });
  it('a scheduled message and a canceled one: each run says what it delivers, and the canceled one says how it ended', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const send = async (subject: string) => {
      const res = await stack.call('POST', '/api/v1/emails', {
        body: { from: `Shop <shop@${stack.domain}>`, to: `ui-${Date.now()}@example.com`, subject, text: 'Later.', scheduled_at: at },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (res.body as { id: string }).id;
    };
    const scheduled = await send('Your trial ends tomorrow');
    const canceled = await send('Weekly digest');
    // Each waits on its run's timer; one is canceled through the API, which the run settles.
    assert.equal((await stack.call('POST', `/api/v1/emails/${canceled}/cancel`)).status, 200);
    await settled(canceled, 'canceled');
    await stack.run(canceled, ['COMPLETED']);

    // The scheduled one: running, its summary on its page, its timer pending.
    await listed(`SvcOrganization="${stack.orgId}" AND ExecutionStatus="Running"`, scheduled);
    await page.getByRole('link', { name: scheduled, exact: true }).first().click();
    await page.waitForURL(new RegExp(`/workflows/${scheduled}/[^/]+/history`));
    const summary = (subject: string) => `1 live transactional message · organization ${stack.orgId} · “${subject}”`;
    await page.getByText(summary('Your trial ends tomorrow')).first().waitFor();
    await page.getByText('Running', { exact: true }).first().waitFor();
    await page
      .getByText(/Timer ?Started/)
      .first()
      .waitFor();
    await shot('ui-5-scheduled.png');

    // The canceled one: found by how it ended, not only "Completed".
    await listed(`SvcOrganization="${stack.orgId}" AND SvcOutcome="canceled"`, canceled);
    assert.equal(await page.getByRole('link', { name: scheduled, exact: true }).count(), 0, 'the scheduled run is not listed as canceled');
    await page.getByRole('link', { name: canceled, exact: true }).first().click();
    await page.waitForURL(new RegExp(`/workflows/${canceled}/[^/]+/history`));
    await page.getByText(summary('Weekly digest')).first().waitFor();
    await page.getByText('Completed', { exact: true }).first().waitFor();
    await shot('ui-6-canceled.png');
  });
});
