import { useEffect, useState } from 'react';
import { get, plainWords } from '../api';
import { useAbilities } from '../identity';
import { linkTo } from '../router';
import { formatTime, shortHash, visibleJson } from './format';
import type { ToolCall, TrailEvent } from './toolcall';

/** A tool call's full trail: every event of its stream, who recorded it, when, and its hash link. */
export function ToolCallTrail({ toolCallId }: { toolCallId: string }) {
  const { audit } = useAbilities();
  const [call, setCall] = useState<ToolCall & { events: TrailEvent[] }>();
  const [problem, setProblem] = useState<string>();
  const [verified, setVerified] = useState<string>();
  const path = `/v1/tool-calls/${encodeURIComponent(toolCallId)}`;
  useEffect(() => {
    get<ToolCall & { events: TrailEvent[] }>(path).then(setCall, (error: unknown) => setProblem(plainWords(error)));
  }, [path]);
  const verify = async () => {
    try {
      const answer = await get<{ ok: boolean; checkedEvents: number; firstBroken?: { reason: string } }>(
        `${path}/verify`,
      );
      setVerified(answer.ok ? `Verified: ${answer.checkedEvents} events.` : `Broken: ${answer.firstBroken?.reason}`);
    } catch (error) {
      setVerified(plainWords(error));
    }
  };
  return (
    <section aria-labelledby="trail-title">
      <h1 id="trail-title">Tool call {call ? `${call.tool.server}/${call.tool.name}` : toolCallId}</h1>
      {problem && (
        <p role="alert" className="error">
          {problem}
        </p>
      )}
      {call && (
        <>
          <p>
            {call.status}
            {call.outcome ? ` · ${call.outcome}` : ''} · requested by {call.requestedBy} in session{' '}
            <a {...linkTo(`/sessions/${encodeURIComponent(call.sessionId)}`)}>{call.sessionId}</a>
          </p>
          {audit && (
            <p>
              <button type="button" onClick={() => void verify()}>
                Verify
              </button>{' '}
              {verified && <span role="status">{verified}</span>}
            </p>
          )}
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Trail">
            <table className="trail">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Event</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Recorded</th>
                  <th scope="col">Hash link</th>
                  <th scope="col">Data</th>
                </tr>
              </thead>
              <tbody>
                {call.events.map((event) => (
                  <tr key={event.id}>
                    <td>{event.position}</td>
                    <td>
                      <code>{event.type}</code>
                    </td>
                    <td>{event.actor}</td>
                    <td>{formatTime(event.recordedAt)}</td>
                    <td title={`${event.prevHash} → ${event.hash}`}>
                      {shortHash(event.prevHash)} → {shortHash(event.hash)}
                    </td>
                    <td>
                      <details>
                        <summary>data</summary>
                        <pre className="wrap">{visibleJson(event.data)}</pre>
                      </details>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}
