import { useCallback, useEffect, useState } from 'react';
import { ApiFailure, get, plainWords } from './api';
import { completeOidcSignIn, credential, forgetCredential, type OidcSettings } from './auth';
import { MeContext, useAbilities, type Me } from './identity';
import { linkTo, useRoute } from './router';
import { ApprovalInbox, useApprovalCount } from './views/ApprovalInbox';
import { LogCheckpoint } from './views/LogCheckpoint';
import { SessionList } from './views/SessionList';
import { SessionView } from './views/SessionView';
import { RenderBoundary } from './views/RenderBoundary';
import { SignIn } from './views/SignIn';
import { ToolCallTrail } from './views/ToolCallTrail';

type Identity = { state: 'loading' } | { state: 'signed-out'; problem?: string } | { state: 'signed-in'; me: Me };

export function App() {
  const [oidc, setOidc] = useState<OidcSettings | null>(null);
  const [identity, setIdentity] = useState<Identity>({ state: 'loading' });

  const loadMe = useCallback(async () => {
    if (!credential()) return setIdentity({ state: 'signed-out' });
    try {
      setIdentity({ state: 'signed-in', me: await get<Me>('/v1/me') });
    } catch (error) {
      if (error instanceof ApiFailure && error.status === 401) forgetCredential();
      setIdentity({ state: 'signed-out', problem: plainWords(error) });
    }
  }, []);

  useEffect(() => {
    void (async () => {
      try {
        const config = await get<{ oidc: OidcSettings | null }>('/v1/console/config');
        setOidc(config.oidc);
        if (config.oidc) await completeOidcSignIn(config.oidc);
      } catch (error) {
        return setIdentity({ state: 'signed-out', problem: plainWords(error) });
      }
      await loadMe();
    })();
  }, [loadMe]);

  if (identity.state === 'loading') return <p className="loading">Loading…</p>;
  if (identity.state === 'signed-out')
    return <SignIn oidc={oidc} problem={identity.problem} onSignedIn={() => void loadMe()} />;
  const signOut = () => {
    forgetCredential();
    setIdentity({ state: 'signed-out' });
  };
  return (
    <MeContext.Provider value={identity.me}>
      <Shell onSignOut={signOut} />
    </MeContext.Provider>
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const { me, review, audit } = useAbilities();
  const { path } = useRoute();
  const waiting = useApprovalCount(review);
  const current = (prefix: string) => (path.startsWith(prefix) ? ('page' as const) : undefined);
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Block Ledger</span>
        <nav aria-label="Console">
          <a {...linkTo('/')} aria-current={path === '/' || current('/sessions')}>
            Sessions
          </a>
          {review && (
            <a {...linkTo('/approvals')} aria-current={current('/approvals')}>
              Approvals{' '}
              <span className="badge" aria-label={`${waiting ?? 0} waiting`} data-testid="approval-badge">
                {waiting ?? '…'}
              </span>
            </a>
          )}
          {audit && (
            <a {...linkTo('/log')} aria-current={current('/log')}>
              Log
            </a>
          )}
        </nav>
        <div className="who" data-testid="who">
          <span title={me?.actor}>{me?.subject}</span> · tenant <strong>{me?.tenant}</strong> ·{' '}
          <span className="roles">{me?.roles.join(', ')}</span>
          <button type="button" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <RenderBoundary key={path} what="page">
          <Page path={path} />
        </RenderBoundary>
      </main>
    </>
  );
}

function Page({ path }: { path: string }) {
  const { review, oversee, audit } = useAbilities();
  const [, section, id] = path.split('/').map(decodeURIComponent);
  if (section === 'sessions' && id) return <SessionView key={id} sessionId={id} />;
  if (section === 'approvals' && review) return <ApprovalInbox />;
  if (section === 'tool-calls' && id && oversee) return <ToolCallTrail key={id} toolCallId={id} />;
  if (section === 'log' && audit) return <LogCheckpoint />;
  return <SessionList />;
}
