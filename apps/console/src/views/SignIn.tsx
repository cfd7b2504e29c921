import { useState, type FormEvent } from 'react';
import { ApiFailure, get, plainWords } from '../api';
import { beginOidcSignIn, forgetCredential, keepCredential, type OidcSettings } from '../auth';

/** Sign-in with an API key (kept in this tab's session storage), or at the OpenID provider when configured. */
export function SignIn({
  oidc,
  problem,
  onSignedIn,
}: {
  oidc: OidcSettings | null;
  problem?: string;
  onSignedIn: () => void;
}) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(problem);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    keepCredential(key.trim());
    try {
      await get('/v1/me');
      onSignedIn();
    } catch (failure) {
      forgetCredential();
      setError(
        failure instanceof ApiFailure && failure.status === 401
          ? 'This key was not accepted: it may be mistyped, expired or revoked.'
          : plainWords(failure),
      );
    }
  };
  return (
    <main id="main" className="sign-in">
      <h1>Block Ledger console</h1>
      <form onSubmit={(event) => void submit(event)}>
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={key}
          onChange={(event) => setKey(event.target.value)}
          placeholder="blk_…"
          required
        />
        <button type="submit">Sign in</button>
        <p className="hint">The key stays in this browser tab only and is forgotten when the tab closes.</p>
      </form>
      {oidc && (
        <button type="button" onClick={() => void beginOidcSignIn(oidc).catch((e: unknown) => setError(plainWords(e)))}>
          Sign in with your organisation
        </button>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </main>
  );
}
