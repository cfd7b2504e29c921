import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, get, getBlob, plainWords } from '../api';
import { useAbilities } from '../identity';
import { followLive, type LiveEvent } from '../live';
import { linkTo, navigate, useRoute } from '../router';
import { BlockView, MessageHead } from './BlockView';
import { BranchCompare } from './BranchCompare';
import { formatDuration, shortHash } from './format';
import { messageLatencyMs, type Block, type Message, type RawEvent, type Session } from './model';
import { VirtualList } from './VirtualList';

type Row =
  | { readonly kind: 'message'; readonly key: string; readonly message: Message }
  | { readonly kind: 'content'; readonly key: string; readonly message: Message }
  | { readonly kind: 'block'; readonly key: string; readonly block: Block };

/** The chat as rows: each message's head, then its blocks in display order (a user's text when it has none). */
function rowsOf(session: Session | undefined): Row[] {
  return (session?.messages ?? []).flatMap((message): Row[] => [
    { kind: 'message', key: `m:${message.id}`, message },
    ...(message.blocks.length === 0 && message.content
      ? [{ kind: 'content' as const, key: `c:${message.id}`, message }]
      : []),
    ...message.blocks.map((block) => ({ kind: 'block' as const, key: `b:${message.id}:${block.id}`, block })),
  ]);
}

/** A live `block` item applied to the session in place; false when the view must read the session again. */
function applyBlock(session: Session, data: Block & { index?: number; removed?: boolean }): Session | undefined {
  const target = session.messages.find((message) => message.id === data.messageId);
  if (!target) return undefined;
  const blocks = target.blocks.filter((block) => block.id !== data.id);
  if (!data.removed) blocks.splice(Math.min(data.index ?? blocks.length, blocks.length), 0, data);
  return {
    ...session,
    messages: session.messages.map((message) => (message === target ? { ...message, blocks } : message)),
  };
}

/** A session as a chat: live while at the head, or as it was at a log position (`?at=`). */
export function SessionView({ sessionId }: { sessionId: string }) {
  const { query } = useRoute();
  const atParam = query.get('at');
  const at = atParam === null ? undefined : Number(atParam);
  const { write, audit, oversee } = useAbilities();
  const base = `/v1/sessions/${encodeURIComponent(sessionId)}`;
  const [session, setSession] = useState<Session>();
  const [problem, setProblem] = useState<string>();
  const [connected, setConnected] = useState(false);
  const [showCompare, setShowCompare] = useState(false);
  // Positions heard on the live feed since the replay's positions were read: the slider reaches them too.
  const [livePositions, setLivePositions] = useState<readonly number[]>([]);
  // For readers who may not read raw events: the positions the reads at the head have shown.
  const [readPositions, setReadPositions] = useState<readonly number[]>([]);

  // Only the latest read is shown: a read of the head still out when the reviewer slides back to a past position
  // (or the other way) must not replace, when it comes, the session the later read showed.
  const latestRead = useRef(0);
  const read = useCallback(
    async (minPosition?: number) => {
      const point = at !== undefined ? `?at=${at}` : minPosition ? `?minPosition=${minPosition}` : '';
      const ticket = ++latestRead.current;
      try {
        const answer = await get<Session>(`${base}${point}`);
        if (ticket !== latestRead.current) return undefined;
        setSession(answer);
        if (at === undefined) setReadPositions((known) => [...known, ...positionsShown(answer)]);
        setProblem(undefined);
        return answer;
      } catch (error) {
        if (ticket === latestRead.current) setProblem(plainWords(error));
        return undefined;
      }
    },
    [base, at],
  );

  // Live at the head: read once, then follow the feed from that read's position.
  const [startedAt, setStartedAt] = useState<number>();
  useEffect(() => {
    setStartedAt(undefined);
    void read().then((answer) => answer && setStartedAt(answer.position));
  }, [read]);
  const reread = useRef<number | undefined>(undefined);
  useEffect(() => {
    if (at !== undefined || startedAt === undefined) return;
    const stop = new AbortController();
    const onEvent = ({ event, id, data }: LiveEvent) => {
      const position = id === undefined ? undefined : Number(id);
      if (position !== undefined) setLivePositions((heard) => [...heard, position]);
      if (event === 'block') {
        setSession((current) => {
          const patched = current && applyBlock(current, data as Block);
          if (!patched) reread.current = position ?? reread.current ?? 0;
          return patched ?? current;
        });
      } else if (event === 'message' || event === 'selection') {
        reread.current = position ?? reread.current ?? 0;
      }
      // A structural change (new message, branch switched) is read once its position is complete.
      if (position !== undefined && reread.current !== undefined) {
        reread.current = undefined;
        void read(position);
      }
    };
    void followLive(`${base}/live?from=${startedAt}`, onEvent, setConnected, stop.signal);
    return () => stop.abort();
  }, [at, base, read, startedAt]);

  // Opened at a past position: the head is read once, for the slider's positions beyond it.
  const openedAt = useRef(at);
  useEffect(() => {
    if (audit || openedAt.current === undefined) return;
    get<Session>(base).then(
      (head) => setReadPositions(positionsShown(head)),
      () => undefined,
    );
  }, [audit, base]);
  const events = useSessionEvents(base, audit, livePositions.at(-1) ?? 0);
  const positions = useMemo(
    () =>
      [...new Set([...(audit ? events.map((event) => event.position) : readPositions), ...livePositions])].sort(
        (a, b) => a - b,
      ),
    [audit, events, readPositions, livePositions],
  );

  const rows = useMemo(() => rowsOf(session), [session]);
  const totalMs = (session?.messages ?? []).reduce((sum, message) => sum + (messageLatencyMs(message) ?? 0), 0);

  const select = async (message: Message, childId: string) => {
    const route =
      message.parentId === null
        ? `${base}/selection`
        : `${base}/messages/${encodeURIComponent(message.parentId)}/selection`;
    try {
      const answer = await api<{ position: number }>('PUT', route, { childId });
      await read(answer.position);
    } catch (error) {
      setProblem(plainWords(error));
    }
  };

  const renderRow = (row: Row) => {
    if (row.kind === 'block') return <BlockView block={row.block} />;
    if (row.kind === 'content') return <div className="block user-text">{row.message.content}</div>;
    const { message } = row;
    const siblings = message.siblings;
    return (
      <div className="message-row">
        <MessageHead message={message} latencyMs={messageLatencyMs(message)} />
        {siblings && siblings.count > 1 && (
          <div className="branches" role="group" aria-label={`Branches of this ${message.role} message`}>
            {write && at === undefined && (
              <button
                type="button"
                aria-label="Previous branch"
                disabled={siblings.index === 0}
                onClick={() => void select(message, siblings.ids[siblings.index - 1])}
              >
                ‹
              </button>
            )}
            <span data-testid="branch-index">
              {siblings.index + 1}/{siblings.count}
            </span>
            {write && at === undefined && (
              <button
                type="button"
                aria-label="Next branch"
                disabled={siblings.index === siblings.count - 1}
                onClick={() => void select(message, siblings.ids[siblings.index + 1])}
              >
                ›
              </button>
            )}
          </div>
        )}
      </div>
    );
  };

  return (
    <section className="session" aria-labelledby="session-title">
      <h1 id="session-title">{session?.title ?? sessionId}</h1>
      <p className="session-facts">
        <span>{at === undefined ? (connected ? 'live' : 'connecting…') : `replaying at position ${at}`}</span> ·{' '}
        {session?.messages.length ?? 0} messages on this path · answers took {formatDuration(totalMs)} · position{' '}
        <span data-testid="read-position">{session?.position ?? '…'}</span>
        <span className="hint"> (token usage per message is not in the read API yet)</span>
      </p>
      {problem && (
        <p role="alert" className="error">
          {problem}
        </p>
      )}
      <Replay sessionId={sessionId} at={at} positions={positions} />
      <div className={audit ? 'session-panes' : ''}>
        <VirtualList
          items={rows}
          itemKey={(row) => row.key}
          render={renderRow}
          label="Conversation"
          followEnd={at === undefined}
          className="chat"
        />
        {audit && <RawEvents events={events} at={at} sessionId={sessionId} />}
      </div>
      <div className="session-actions">
        <button type="button" aria-expanded={showCompare} onClick={() => setShowCompare(!showCompare)}>
          Compare branches
        </button>
        {audit && <SessionAudit base={base} sessionId={sessionId} />}
      </div>
      {showCompare && <BranchCompare base={base} at={at} />}
      {oversee && <SessionToolCalls sessionId={sessionId} />}
    </section>
  );
}

const positionsShown = (session: Session) => [...session.messages.map((message) => message.position), session.position];

/**
 * The session's raw events for auditors (the replay's positions and the raw-events panel), read on
 * from the last one held whenever the live feed reaches a new `head`: never the whole log again.
 */
function useSessionEvents(base: string, enabled: boolean, head: number): readonly RawEvent[] {
  const [events, setEvents] = useState<readonly RawEvent[]>([]);
  const held = useRef<readonly RawEvent[]>([]);
  useEffect(() => {
    if (!enabled) return;
    let current = true;
    const last = () => held.current.at(-1)?.position ?? 0;
    allEvents(base, last()).then(
      (more) => {
        const fresh = more.filter((event) => event.position > last());
        if (!current || fresh.length === 0) return;
        held.current = [...held.current, ...fresh];
        setEvents(held.current);
      },
      () => undefined,
    );
    return () => {
      current = false;
    };
  }, [base, enabled, head]);
  return events;
}

async function allEvents(base: string, after = 0): Promise<RawEvent[]> {
  const events: RawEvent[] = [];
  let from: number | null = after;
  // Bounded: a session of more than 20,000 events shows its first 20,000 here.
  for (let page = 0; from !== null && page < 20; page++) {
    const answer: { events: RawEvent[]; next: number | null } = await get(`${base}/events?from=${from}&limit=1000`);
    events.push(...answer.events);
    from = answer.next;
  }
  return events;
}

function Replay({
  sessionId,
  at,
  positions,
}: {
  sessionId: string;
  at: number | undefined;
  positions: readonly number[];
}) {
  const [playing, setPlaying] = useState(false);
  const index =
    at === undefined
      ? positions.length - 1
      : Math.max(
          0,
          positions.findIndex((position) => position >= at),
        );
  const goTo = useCallback(
    (next: number) => {
      const position = positions[Math.max(0, Math.min(next, positions.length - 1))];
      if (position !== undefined) navigate(`/sessions/${encodeURIComponent(sessionId)}?at=${position}`, true);
    },
    [positions, sessionId],
  );
  useEffect(() => {
    if (!playing) return;
    if (index >= positions.length - 1) return setPlaying(false);
    const timer = setTimeout(() => goTo(index + 1), 600);
    return () => clearTimeout(timer);
  }, [goTo, index, playing, positions.length]);
  if (positions.length === 0) return null;
  return (
    <div className="replay" role="group" aria-label="Replay">
      <label htmlFor="replay-slider">Replay</label>
      <input
        id="replay-slider"
        type="range"
        min={0}
        max={positions.length - 1}
        value={index}
        aria-valuetext={`log position ${positions[index]}`}
        onChange={(event) => goTo(Number(event.target.value))}
      />
      <button type="button" onClick={() => goTo(index - 1)} disabled={index <= 0}>
        Step back
      </button>
      <button type="button" onClick={() => setPlaying(!playing)}>
        {playing ? 'Pause' : 'Play'}
      </button>
      <button type="button" onClick={() => goTo(index + 1)} disabled={index >= positions.length - 1}>
        Step forward
      </button>
      <button
        type="button"
        disabled={at === undefined}
        onClick={() => navigate(`/sessions/${encodeURIComponent(sessionId)}`, true)}
      >
        Back to live
      </button>
      <output htmlFor="replay-slider">position {positions[index]}</output>
    </div>
  );
}

function RawEvents({
  events,
  at,
  sessionId,
}: {
  events: readonly RawEvent[];
  at: number | undefined;
  sessionId: string;
}) {
  return (
    <VirtualList
      items={events}
      itemKey={(event) => event.id}
      label="Raw events"
      estimate={44}
      className="raw-events"
      render={(event) => (
        <div className={`raw-event${at !== undefined && event.position > at ? ' after' : ''}`}>
          <button
            type="button"
            className="link"
            onClick={() => navigate(`/sessions/${encodeURIComponent(sessionId)}?at=${event.position}`, true)}
            aria-label={`Replay to position ${event.position}`}
          >
            #{event.position}
          </button>{' '}
          <code>{event.type}</code> <span className="actor">{event.metadata.actor}</span>{' '}
          <span
            className="hash"
            title={`hash ${event.metadata.hash ?? ''} · previous ${event.metadata.prevHash ?? ''}`}
          >
            {shortHash(event.metadata.prevHash)} → {shortHash(event.metadata.hash)}
          </span>
        </div>
      )}
    />
  );
}

interface Verification {
  readonly ok: boolean;
  readonly checkedEvents: number;
  readonly streams?: unknown;
  readonly checkpoint?: { readonly treeSize?: string | number } | null;
  readonly firstBroken?: { stream: string; revision: number; position: number; reason: string };
}

/** Verify the session's chains against the signed log, and download its export bundle. */
function SessionAudit({ base, sessionId }: { base: string; sessionId: string }) {
  const [result, setResult] = useState<string>();
  const verify = async () => {
    setResult('verifying…');
    try {
      const answer = await get<Verification>(`${base}/verify`);
      setResult(
        answer.ok
          ? `Verified: ${answer.checkedEvents} events, every hash link and log inclusion holds.`
          : `Broken at ${answer.firstBroken?.stream} revision ${answer.firstBroken?.revision}: ${answer.firstBroken?.reason}`,
      );
    } catch (error) {
      setResult(plainWords(error));
    }
  };
  const exportBundle = async () => {
    try {
      const blob = await getBlob(`${base}/export`);
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = `${sessionId}.ndjson`;
      link.click();
      URL.revokeObjectURL(link.href);
      setResult('Export downloaded (verify it offline with npm run verify).');
    } catch (error) {
      setResult(plainWords(error));
    }
  };
  return (
    <>
      <button type="button" onClick={() => void verify()}>
        Verify
      </button>
      <button type="button" onClick={() => void exportBundle()}>
        Export
      </button>
      {result && (
        <p role="status" className="verify-result">
          {result}
        </p>
      )}
    </>
  );
}

function SessionToolCalls({ sessionId }: { sessionId: string }) {
  const [calls, setCalls] = useState<readonly { id: string; tool: { server: string; name: string }; status: string }[]>(
    [],
  );
  useEffect(() => {
    void get<{ toolCalls: typeof calls }>(`/v1/tool-calls?sessionId=${encodeURIComponent(sessionId)}`).then(
      (answer) => setCalls(answer.toolCalls),
      () => setCalls([]),
    );
  }, [sessionId]);
  if (calls.length === 0) return null;
  return (
    <section aria-labelledby="session-tool-calls">
      <h2 id="session-tool-calls">Governed tool calls</h2>
      <ul>
        {calls.map((call) => (
          <li key={call.id}>
            <a {...linkTo(`/tool-calls/${encodeURIComponent(call.id)}`)}>
              {call.tool.server}/{call.tool.name}
            </a>{' '}
            <span className="tag">{call.status}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
