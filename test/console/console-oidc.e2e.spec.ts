import { openBrowser, type TestBrowser } from '../support/browser.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { startOidcLoginServer, type OidcLoginServer } from '../support/oidc-login-server.js';

/** Signing in to the console at an OpenID provider: authorization code with PKCE, in a real Chromium. */
describe('the console signing in with OpenID', () => {
  let provider: OidcLoginServer;
  let ledger: LedgerUnderTest;
  let browser: TestBrowser;
  beforeAll(async () => {
    provider = await startOidcLoginServer({ sub: 'alice', tenant: 'acme', roles: ['reviewer'] });
    ledger = await startLedger({
      LEDGER_OIDC_ISSUER: provider.issuer,
      LEDGER_OIDC_AUDIENCE: provider.audience,
      LEDGER_CONSOLE_OIDC_CLIENT_ID: 'ledger-console',
    });
    browser = await openBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await ledger?.close();
    await provider?.close();
  });

  it('goes to the provider and back, keeps the token out of the URL, and shows the person and tenant', async () => {
    const { page } = browser;
    await page.goto(`${ledger.baseUrl}/console`);
    await page.getByRole('button', { name: 'Sign in with your organisation' }).click();
    const who = page.getByTestId('who');
    await who.getByText(`jwt:${provider.issuer}#alice`).waitFor({ timeout: 20_000 });
    expect(await who.textContent()).toContain('tenant acme');
    expect(await who.textContent()).toContain('reviewer');
    // The code left the address bar; the token never was in it.
    expect(page.url()).toBe(`${ledger.baseUrl}/console/`);
    expect(provider.log).toEqual(['code for ledger-console', 'token for alice']);
    // A reviewer without the auditor role sees the approvals, not the log.
    await page.getByRole('link', { name: /Approvals/ }).waitFor();
    expect(await page.getByRole('link', { name: 'Log' }).count()).toBe(0);
  });
});
