import { useCallback, useEffect, useState } from 'react';
import { canonicalJson } from '../../../../libs/core/src/hashing/canonical-json';
import { api, get, plainWords } from '../api';
import { linkTo } from '../router';
import { formatDuration, visibleJson } from './format';
import type { ToolCall } from './toolcall';

const QUEUE = '/v1/tool-calls?state=awaiting_approval&limit=1000';
/** Reviewers have no live feed of the queue in the public API (the raw feed is for auditors): it is read this often. */
const QUEUE_REFRESH_MS = 2_000;

function useQueue(enabled: boolean): [readonly ToolCall[] | undefined, () => Promise<void>] {
  const [calls, setCalls] = useState<readonly ToolCall[]>();
  const refresh = useCallback(async () => {
    try {
      setCalls((await get<{ toolCalls: ToolCall[] }>(QUEUE)).toolCalls);
    } catch {
      setCalls(undefined);
    }
  }, []);
  useEffect(() => {
    if (!enabled) return;
    void refresh();
    const timer = setInterval(() => void refresh(), QUEUE_REFRESH_MS);
    return () => clearInterval(timer);
  }, [enabled, refresh]);
  return [calls, refresh];
}

/** The number of calls waiting for a person, for the navigation's badge. */
export function useApprovalCount(enabled: boolean): number | undefined {
  return useQueue(enabled)[0]?.length;
}

/**
 * The SHA-256 of the arguments as this page shows them, in the ledger's canonical JSON: the
 * decision names this hash, so the ledger refuses it if what was shown is not what would run.
 * Undefined where the browser offers no WebCrypto (a page not served over https or from localhost).
 */
function useShownHash(shown: unknown): string | undefined {
  const [hash, setHash] = useState<string>();
  useEffect(() => {
    if (!crypto.subtle) return;
    void crypto.subtle
      .digest('SHA-256', new TextEncoder().encode(canonicalJson(shown)))
      .then((digest) =>
        setHash([...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, '0')).join('')),
      );
  }, [shown]);
  return hash;
}

function useNow(): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

/** The calls awaiting approval, each with what a reviewer must see before deciding. */
export function ApprovalInbox() {
  const [calls, refresh] = useQueue(true);
  return (
    <section aria-labelledby="approvals-title">
      <h1 id="approvals-title">Approvals</h1>
      {calls === undefined ? (
        <p>Loading…</p>
      ) : calls.length === 0 ? (
        <p role="status">No call is waiting for approval.</p>
      ) : (
        <ul className="approvals">
          {calls.map((call) => (
            <li key={call.id}>
              <PendingCall call={call} onDecided={refresh} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function PendingCall({ call, onDecided }: { call: ToolCall; onDecided: () => Promise<void> }) {
  const now = useNow();
  const [comment, setComment] = useState('');
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string }>();
  const left = call.approval ? Date.parse(call.approval.deadline) - now : undefined;
  const shownHash = useShownHash(call.arguments);
  const mismatch = shownHash !== undefined && shownHash !== call.argumentsSha256;
  const decide = async (verdict: 'approve' | 'deny') => {
    try {
      await api('POST', `/v1/tool-calls/${encodeURIComponent(call.id)}/${verdict}`, {
        argumentsSha256: shownHash ?? call.argumentsSha256,
        ...(comment ? { comment } : {}),
      });
      setOutcome({ ok: true, text: verdict === 'approve' ? 'Approved.' : 'Denied.' });
      await onDecided();
    } catch (error) {
      setOutcome({ ok: false, text: plainWords(error) });
    }
  };
  const headingId = `call-${call.id}`;
  return (
    <article className="pending-call" aria-labelledby={headingId}>
      <h2 id={headingId}>
        {call.tool.server}/{call.tool.name}
      </h2>
      <dl>
        <dt>Requested by</dt>
        <dd>{call.requestedBy}</dd>
        <dt>Session</dt>
        <dd>
          <a {...linkTo(`/sessions/${encodeURIComponent(call.sessionId)}`)}>{call.sessionId}</a>
        </dd>
        <dt>Firewall</dt>
        <dd>
          {call.firewall
            ? `${call.firewall.verdict} by rule ${call.firewall.rule} (policy ${call.firewall.policyVersion})`
            : '—'}
        </dd>
        <dt>Guardian</dt>
        <dd>{call.guardian ? `${call.guardian.risk} risk: ${call.guardian.rationale}` : '—'}</dd>
        <dt>Why a person</dt>
        <dd>
          {call.approval?.reason ?? '—'}
          {call.approval?.required && call.approval.required > 1
            ? ` · ${call.approval.approvals?.length ?? 0} of ${call.approval.required} approvals`
            : ''}
        </dd>
        <dt>Deadline</dt>
        <dd data-testid="deadline">
          {left === undefined ? '—' : left > 0 ? `${formatDuration(left)} left` : 'expired'}
        </dd>
        <dt>Arguments SHA-256</dt>
        <dd>
          <code className="sha">{call.argumentsSha256}</code>{' '}
          <span data-testid="hash-check" className={mismatch ? 'error' : 'ok'}>
            {shownHash === undefined
              ? '(not checked here: this page is not served over https)'
              : mismatch
                ? 'does NOT match the arguments shown: do not approve'
                : 'matches the arguments shown'}
          </span>
        </dd>
      </dl>
      <pre className="arguments wrap" aria-label="Arguments">
        {visibleJson(call.arguments)}
      </pre>
      <label htmlFor={`comment-${call.id}`}>Comment</label>
      <textarea
        id={`comment-${call.id}`}
        value={comment}
        onChange={(event) => setComment(event.target.value)}
        rows={2}
      />
      <div className="decide">
        <button type="button" className="approve" disabled={mismatch} onClick={() => void decide('approve')}>
          Approve
        </button>
        <button type="button" className="deny" onClick={() => void decide('deny')}>
          Deny
        </button>
        <a {...linkTo(`/tool-calls/${encodeURIComponent(call.id)}`)}>Full trail</a>
      </div>
      {outcome && (
        <p role={outcome.ok ? 'status' : 'alert'} className={outcome.ok ? 'ok' : 'error'}>
          {outcome.text}
        </p>
      )}
    </article>
  );
}
