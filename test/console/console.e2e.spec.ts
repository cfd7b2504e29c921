import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ConsoleMessage, Page } from 'playwright-core';
import { accessibilityViolations, openBrowser, type TestBrowser } from '../support/browser.js';
import {
  call,
  governanceFixture,
  requestTool,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * The reviewer console in a real Chromium against the real service: a producer streams and
 * governed tool calls wait for people while a reviewer signs in and watches, switches branches,
 * replays, approves and denies. Every view is checked with axe and photographed for docs/console.md.
 */
/** docs/console.md shows these; a run refreshes them with LEDGER_CONSOLE_SCREENSHOTS=1 (else they go to a temp folder). */
const SCREENSHOTS = process.env.LEDGER_CONSOLE_SCREENSHOTS
  ? path.resolve('docs/console')
  : path.join(tmpdir(), 'ledger-console-screenshots');
const REVIEWER = 'console-reviewer';
const PRODUCER = 'producer-1';
const SESSION = 'console-demo';
const BOUND = { timeout: 20_000 };

describe('the reviewer console', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let browser: TestBrowser;
  let page: Page;
  const scriptErrors: string[] = [];
  const producer = (method: string, route: string, body?: unknown) =>
    call(ledger.baseUrl, method, route, body, PRODUCER);
  const chunks = (messageId: string, list: object[]) =>
    producer('POST', `/v1/sessions/${SESSION}/messages/${messageId}/chunks`, list);

  async function snapshot(name: string) {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
    expect({ view: name, violations: await accessibilityViolations(page) }).toEqual({ view: name, violations: [] });
  }

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
    browser = await openBrowser();
    page = browser.page;
    page.on('pageerror', (error) => scriptErrors.push(error.message));
    // The producer's session lets the reviewer select branches in it (a writer); the reviewer requested none of its calls.
    const opened = await producer('POST', '/v1/sessions', {
      id: SESSION,
      title: 'Console demo',
      writers: [`subject:${REVIEWER}`],
    });
    expect(opened.status).toBe(201);
  });
  afterAll(async () => {
    // Every view ran without an uncaught script error.
    expect(scriptErrors).toEqual([]);
    await browser?.close();
    await ledger?.close();
    await fixture?.close();
  });

  it('signs in with an API key kept out of the URL, and shows who and which tenant', async () => {
    await page.goto(`${ledger.baseUrl}/console`);
    await page.getByLabel('API key').waitFor(BOUND);
    await snapshot('sign-in');
    await page.getByLabel('API key').fill(await ledger.credentials.key(REVIEWER));
    await page.keyboard.press('Enter');
    await page.getByTestId('who').getByText(`subject:${REVIEWER}`).waitFor(BOUND);
    expect(await page.getByTestId('who').textContent()).toContain('tenant default');
    expect(page.url()).not.toContain('blk_');
    await page.getByRole('heading', { name: 'Sessions' }).waitFor(BOUND);
    await snapshot('sessions');
  });

  it('watches a session while a producer streams into it: the text grows in place', async () => {
    const messages = `/v1/sessions/${SESSION}/messages`;
    expect((await producer('POST', messages, { id: 'u1', role: 'user', content: 'Write a haiku' })).status).toBe(201);
    expect((await producer('POST', messages, { id: 'a1', role: 'assistant', model: 'demo-model' })).status).toBe(201);
    await chunks('a1', [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'thinking.start' },
      { seq: 3, type: 'thinking.complete', text: 'Five, seven, five.', thinking_millsec: 1200 },
      { seq: 4, type: 'text.start' },
    ]);
    // Found by its message text in the sessions list (once the projection has it), then opened.
    await page.getByLabel('Search', { exact: true }).fill('haiku');
    const row = page.getByRole('link', { name: 'Console demo' });
    for (let attempt = 0; attempt < 40 && !(await row.isVisible()); attempt++) {
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await row.waitFor({ timeout: 500 }).catch(() => undefined);
    }
    await snapshot('sessions-search');
    await row.click();
    await page.getByText('live', { exact: true }).waitFor(BOUND);
    const chat = page.getByRole('region', { name: 'Conversation' });
    let text = '';
    for (const [index, word] of ['Ledger', 'keeps', 'every', 'word'].entries()) {
      text += `${index ? ' ' : ''}${word}`;
      await chunks('a1', [{ seq: 5 + index, type: 'text.delta', text }]);
      await chat.getByText(text, { exact: true }).waitFor(BOUND);
    }
    await chunks('a1', [
      { seq: 9, type: 'text.complete', text },
      { seq: 10, type: 'block_complete' },
    ]);
    await chat.locator('[data-block-type="main_text"][data-status="success"]').waitFor(BOUND);
    await snapshot('session-live');
  });

  it('switches branches through the API with the arrows', async () => {
    const regenerated = await producer('POST', `/v1/sessions/${SESSION}/messages`, {
      id: 'a2',
      role: 'assistant',
      parentId: 'u1',
      model: 'demo-model',
    });
    expect(regenerated.status).toBe(201);
    await chunks('a2', [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.complete', text: 'A second answer' },
      { seq: 4, type: 'block_complete' },
    ]);
    const chat = page.getByRole('region', { name: 'Conversation' });
    await chat.getByText('A second answer').waitFor(BOUND);
    await chat.getByTestId('branch-index').getByText('2/2').waitFor(BOUND);
    await chat.getByRole('button', { name: 'Previous branch' }).click();
    await chat.getByText('Ledger keeps every word').waitFor(BOUND);
    await chat.getByTestId('branch-index').getByText('1/2').waitFor(BOUND);
    const tree = await producer('GET', `/v1/sessions/${SESSION}/tree`);
    expect(tree.body.messages.find((message: { id: string }) => message.id === 'u1').selectedChild).toBe('a1');
  });

  it('slides the replay back to an earlier position and shows the earlier blocks', async () => {
    const chat = page.getByRole('region', { name: 'Conversation' });
    const slider = page.getByRole('slider', { name: 'Replay' });
    await slider.focus();
    await page.keyboard.press('Home');
    await page.waitForURL(/\?at=\d+/, BOUND);
    await page.getByText(/replaying at position \d+/).waitFor(BOUND);
    await chat.getByText('Ledger keeps every word').waitFor({ state: 'detached', ...BOUND });
    // Step forward until the answer was half written: the earlier text, not the final one.
    for (let step = 0; step < 40; step++) {
      if (await chat.getByText('Ledger keeps', { exact: true }).isVisible()) break;
      const before = page.url();
      await page.getByRole('button', { name: 'Step forward' }).click();
      await page.waitForURL((url) => url.toString() !== before, BOUND);
      // The read at the new position is on screen before the next look.
      const at = new URL(page.url()).searchParams.get('at')!;
      await page.getByTestId('read-position').getByText(at, { exact: true }).waitFor(BOUND);
    }
    await chat.getByText('Ledger keeps', { exact: true }).waitFor(BOUND);
    await page.getByRole('region', { name: 'Raw events' }).getByText('session.opened').waitFor(BOUND);
    await snapshot('session-replay');
    await page.getByRole('button', { name: 'Compare branches' }).click();
    await page.getByRole('button', { name: 'Back to live' }).click();
    const compare = page.getByRole('region', { name: 'Branches side by side' });
    await compare.getByText('A second answer').waitFor(BOUND);
    await compare.getByText('differs: text').waitFor(BOUND);
    await snapshot('branches-compared');
  });

  it('keeps a past position on screen when a read of the head it asked for before comes back after', async () => {
    await page.goto(`${ledger.baseUrl}/console/sessions/${SESSION}`);
    await page.getByText('live', { exact: true }).waitFor(BOUND);
    // The read of the head a new message makes the view ask for is held back until the reviewer has slid to the start.
    const headRead = (url: URL) => url.pathname === `/v1/sessions/${SESSION}` && url.searchParams.has('minPosition');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    await page.route(headRead, async (route) => {
      await released;
      await route.continue();
    });
    try {
      const asked = page.waitForRequest((request) => headRead(new URL(request.url())));
      const question = 'Asked while the reviewer replays';
      expect(
        (await producer('POST', `/v1/sessions/${SESSION}/messages`, { role: 'user', content: question })).status,
      ).toBe(201);
      await asked;
      await page.getByRole('slider', { name: 'Replay' }).focus();
      await page.keyboard.press('Home');
      await page.getByText(/replaying at position \d+/).waitFor(BOUND);
      const answered = page.waitForResponse((response) => headRead(new URL(response.url())));
      release();
      await answered;
      const chat = page.getByRole('region', { name: 'Conversation' });
      const shown = await chat
        .getByText(question)
        .waitFor({ timeout: 1_000 })
        .then(
          () => 'the head',
          () => 'the past position',
        );
      expect(shown).toBe('the past position');
      await page.getByText(/replaying at position \d+/).waitFor(BOUND);
    } finally {
      await page.unroute(headRead);
    }
  });

  it('shows a session whose recorded values have shapes it does not expect, and keeps the page', async () => {
    const odd = 'odd-shapes';
    expect((await producer('POST', '/v1/sessions', { id: odd, title: 'Odd shapes' })).status).toBe(201);
    const messages = `/v1/sessions/${odd}/messages`;
    expect((await producer('POST', messages, { id: 'u1', role: 'user', content: 'Search' })).status).toBe(201);
    expect((await producer('POST', messages, { id: 'a1', role: 'assistant' })).status).toBe(201);
    const results = [null, { title: { nested: true } }];
    // A text whose Markdown would take the parser minutes (its time grows with the square of such a text's length).
    const slowMarkdown = '![x]('.repeat(40_000);
    const posted = await producer('POST', `${messages}/a1/chunks`, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.complete', text: 'Before the sources' },
      { seq: 4, type: 'llm_websearch_in_progress' },
      { seq: 5, type: 'llm_websearch_complete', llm_web_search: { source: 'web', results } },
      { seq: 6, type: 'text.start' },
      { seq: 7, type: 'text.complete', text: slowMarkdown },
    ]);
    expect(posted.status).toBe(200);
    await page.goto(`${ledger.baseUrl}/console/sessions/${odd}`);
    const chat = page.getByRole('region', { name: 'Conversation' });
    await chat.getByText('Before the sources').waitFor(BOUND);
    // The sources are shown as the JSON they are; the header and the rest of the page stay.
    await chat.getByText('"nested": true', { exact: false }).waitFor(BOUND);
    await chat.getByText(slowMarkdown.slice(0, 30), { exact: false }).waitFor(BOUND);
    await page.getByTestId('who').waitFor(BOUND);
  });

  it('approves a governed write (the file appears), denies another, and refuses a reviewer its own call', async () => {
    const target = path.join(fixture.workspace, 'approved.txt');
    const approved = await requestTool(
      ledger.baseUrl,
      SESSION,
      'call_write_ok',
      { server: 'filesystem', name: 'write_file' },
      {
        path: target,
        content: 'approved in the console',
      },
    );
    const denied = await requestTool(
      ledger.baseUrl,
      SESSION,
      'call_write_no',
      { server: 'filesystem', name: 'write_file' },
      {
        path: path.join(fixture.workspace, 'denied.txt'),
        // Padding and a right-to-left override, to hide the end off-screen or show it reversed.
        content: `never written${' '.repeat(400)}\u202Ehs | lru\u3164`,
      },
    );
    const own = 'reviewers-own';
    expect((await call(ledger.baseUrl, 'POST', '/v1/sessions', { id: own }, REVIEWER)).status).toBe(201);
    const mine = await requestTool(
      ledger.baseUrl,
      own,
      'call_mine',
      { server: 'filesystem', name: 'write_file' },
      {
        path: path.join(fixture.workspace, 'mine.txt'),
        content: 'self-approved?',
      },
      REVIEWER,
    );
    for (const id of [approved.toolCallId, denied.toolCallId, mine.toolCallId])
      await waitForToolCall(ledger.baseUrl, id, (toolCall) => toolCall.status === 'awaiting_approval');

    await page.getByTestId('approval-badge').getByText('3').waitFor(BOUND);
    await page.getByRole('link', { name: /Approvals/ }).click();
    const approvedCard = page.locator('article').filter({ hasText: 'approved.txt' });
    await approvedCard.waitFor(BOUND);
    await snapshot('approvals');

    await approvedCard.getByTestId('hash-check').getByText('matches the arguments shown').waitFor(BOUND);
    await approvedCard.getByLabel('Comment').fill('looks right');
    await approvedCard.getByRole('button', { name: 'Approve' }).click();
    await waitForToolCall(ledger.baseUrl, approved.toolCallId, (toolCall) => toolCall.status === 'completed');
    expect(readFileSync(target, 'utf8')).toBe('approved in the console');

    const deniedCard = page.locator('article').filter({ hasText: 'denied.txt' });
    // All of the arguments are on screen: long lines wrap in the card, the override is shown as its escape.
    expect(await deniedCard.getByLabel('Arguments').textContent()).toContain('\\u202ehs | lru\\u3164');
    const overflow = await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    // With the keyboard alone: the comment, then Tab past Approve to Deny.
    await deniedCard.getByLabel('Comment').focus();
    await page.keyboard.type('not this one');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    const deniedCall = await waitForToolCall(
      ledger.baseUrl,
      denied.toolCallId,
      (toolCall) => toolCall.status === 'completed',
    );
    expect(deniedCall.outcome).toBe('denied');
    const denial = deniedCall.events.find((event: { type: string }) => event.type === 'toolcall.denied');
    expect(denial).toMatchObject({ actor: expect.stringContaining(REVIEWER), data: { comment: 'not this one' } });
    expect(existsSync(path.join(fixture.workspace, 'denied.txt'))).toBe(false);

    const mineCard = page.locator('article').filter({ hasText: 'mine.txt' });
    await mineCard.getByRole('button', { name: 'Approve' }).click();
    await mineCard
      .getByRole('alert')
      .getByText(/separation of duties/)
      .waitFor(BOUND);
    await page.getByTestId('approval-badge').getByText('1').waitFor(BOUND);
    await snapshot('approval-refused');
  });

  it('shows a tool call trail with its verification, and the log checkpoint', async () => {
    const pending = page.locator('article').filter({ hasText: 'mine.txt' });
    await pending.getByRole('link', { name: 'Full trail' }).click();
    await page.getByRole('heading', { name: /Tool call filesystem\/write_file/ }).waitFor(BOUND);
    await page.getByText('toolcall.approval_requested').waitFor(BOUND);
    await page.getByRole('button', { name: 'Verify' }).click();
    await page
      .getByRole('status')
      .getByText(/Verified: \d+ events/)
      .waitFor(BOUND);
    await snapshot('tool-call-trail');
    await page.getByRole('link', { name: 'Log' }).click();
    await page.getByTestId('tree-size').waitFor(BOUND);
    await snapshot('log');
  });

  it('serves the API docs on its origin under their own policy (the UI runs, nothing frames them), and answers uncached', async () => {
    const violations: string[] = [];
    const listen = (message: ConsoleMessage) => {
      if (/Content.Security.Policy/i.test(message.text())) violations.push(message.text());
    };
    page.on('console', listen);
    const docs = await page.goto(`${ledger.baseUrl}/docs`);
    expect(docs?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.getByText('/v1/sessions/{sid}/messages', { exact: false }).first().waitFor(BOUND);
    page.off('console', listen);
    expect(violations).toEqual([]);
    // What the API answers is kept by no cache, and read as nothing but its type.
    const answer = await fetch(`${ledger.baseUrl}/v1/console/config`);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('stays usable at phone width, with the keyboard alone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${ledger.baseUrl}/console/sessions/${SESSION}`);
    await page.getByText('live', { exact: true }).waitFor(BOUND);
    // A page wider than the screen scrolls sideways: nothing may stick out.
    const overflow = await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    // Keyboard only: the skip link first, then on into the page.
    const focused = () => page.evaluate('document.activeElement?.textContent?.trim()');
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to content');
    await snapshot('session-phone');
  });
});
