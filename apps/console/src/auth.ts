/**
 * Sign-in. The credential (an API key, or an OpenID provider's access token) lives in this tab's
 * session storage only: never in the URL, never in local storage, gone when the tab closes.
 * OpenID sign-in is the authorization code flow with PKCE, as a public client (no secret).
 */
const CREDENTIAL = 'ledger.credential';
const PKCE = 'ledger.pkce';

export const credential = () => sessionStorage.getItem(CREDENTIAL);
export const keepCredential = (value: string) => sessionStorage.setItem(CREDENTIAL, value);
export const forgetCredential = () => sessionStorage.removeItem(CREDENTIAL);

export interface OidcSettings {
  readonly issuer: string;
  readonly clientId: string;
}

interface ProviderEndpoints {
  readonly authorization_endpoint: string;
  readonly token_endpoint: string;
}

const redirectUri = () => `${location.origin}/console/`;

function base64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

const randomToken = () => base64Url(crypto.getRandomValues(new Uint8Array(32)));

async function endpoints(issuer: string): Promise<ProviderEndpoints> {
  const response = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`the identity provider's configuration could not be read (${response.status})`);
  return (await response.json()) as ProviderEndpoints;
}

/** Sends the browser to the provider; it comes back to /console/ with `code` and `state`. */
export async function beginOidcSignIn(settings: OidcSettings): Promise<void> {
  const { authorization_endpoint } = await endpoints(settings.issuer);
  const verifier = randomToken();
  const state = randomToken();
  const challenge = base64Url(
    new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))),
  );
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
  const url = new URL(authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: settings.clientId,
    redirect_uri: redirectUri(),
    scope: 'openid',
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  location.assign(url.toString());
}

/**
 * On return from the provider: trades the code for tokens (with the verifier only this tab holds)
 * and keeps the access token. The code leaves the address bar at once. Returns false when the URL
 * carries no sign-in answer.
 */
export async function completeOidcSignIn(settings: OidcSettings): Promise<boolean> {
  const query = new URLSearchParams(location.search);
  const code = query.get('code');
  if (!code) return false;
  history.replaceState(null, '', '/console/');
  const pending = JSON.parse(sessionStorage.getItem(PKCE) ?? 'null') as { verifier: string; state: string } | null;
  sessionStorage.removeItem(PKCE);
  if (!pending || pending.state !== query.get('state')) throw new Error('the sign-in answer does not match this tab');
  const { token_endpoint } = await endpoints(settings.issuer);
  const response = await fetch(token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri(),
      client_id: settings.clientId,
      code_verifier: pending.verifier,
    }),
  });
  if (!response.ok) throw new Error(`the identity provider refused the sign-in (${response.status})`);
  const tokens = (await response.json()) as { access_token?: string };
  if (!tokens.access_token) throw new Error('the identity provider returned no access token');
  keepCredential(tokens.access_token);
  return true;
}
