import { useEffect, useState, type FormEvent } from 'react';
import { get, plainWords, routeMissing } from '../api';
import { linkTo, navigate } from '../router';
import { formatTime } from './format';

/** One row of `GET /v1/sessions`. */
interface SessionRow {
  readonly sessionId: string;
  readonly title: string | null;
  readonly model: string | null;
  readonly status: string;
  readonly createdAt: string;
  readonly lastActivityAt: string;
  readonly messageCount: number;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number; readonly totalTokens: number };
  readonly hasPendingApprovals: boolean;
  readonly hasErrors: boolean;
}

interface Filters {
  q: string;
  model: string;
  status: string;
  hasPendingApprovals: boolean;
  hasErrors: boolean;
  from: string;
  to: string;
}

const NO_FILTERS: Filters = {
  q: '',
  model: '',
  status: '',
  hasPendingApprovals: false,
  hasErrors: false,
  from: '',
  to: '',
};

function query(filters: Filters, cursor: string | undefined): string {
  const params = new URLSearchParams();
  if (filters.q) params.set('q', filters.q);
  if (filters.model) params.set('model', filters.model);
  if (filters.status) params.set('status', filters.status);
  if (filters.hasPendingApprovals) params.set('hasPendingApprovals', 'true');
  if (filters.hasErrors) params.set('hasErrors', 'true');
  if (filters.from) params.set('from', new Date(filters.from).toISOString());
  if (filters.to) params.set('to', new Date(filters.to).toISOString());
  if (cursor) params.set('cursor', cursor);
  params.set('limit', '50');
  return params.toString();
}

/** Sessions with search, filters and paging; a session can always be opened by its id. */
export function SessionList() {
  const [filters, setFilters] = useState(NO_FILTERS);
  const [applied, setApplied] = useState(NO_FILTERS);
  const [pages, setPages] = useState<(string | undefined)[]>([undefined]);
  const [rows, setRows] = useState<readonly SessionRow[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [problem, setProblem] = useState<string>();
  const [missing, setMissing] = useState(false);
  const cursor = pages[pages.length - 1];

  useEffect(() => {
    let current = true;
    get<{ sessions: SessionRow[]; nextCursor: string | null }>(`/v1/sessions?${query(applied, cursor)}`).then(
      (answer) => {
        if (!current) return;
        setRows(answer.sessions);
        setNext(answer.nextCursor);
        setProblem(undefined);
      },
      (error: unknown) => {
        if (!current) return;
        setMissing(routeMissing(error));
        setProblem(plainWords(error));
      },
    );
    return () => {
      current = false;
    };
  }, [applied, cursor]);

  const search = (event: FormEvent) => {
    event.preventDefault();
    setPages([undefined]);
    setApplied(filters);
  };
  const field = <K extends keyof Filters>(name: K, value: Filters[K]) => setFilters({ ...filters, [name]: value });

  return (
    <section aria-labelledby="sessions-title">
      <h1 id="sessions-title">Sessions</h1>
      <OpenById />
      {missing ? (
        <p className="notice" role="status">
          This service does not list sessions yet (<code>GET /v1/sessions</code> is not there): open a session by its
          id.
        </p>
      ) : (
        <>
          <form className="filters" onSubmit={search} aria-label="Search sessions">
            <label>
              Search <input type="search" value={filters.q} onChange={(e) => field('q', e.target.value)} />
            </label>
            <label>
              Model <input value={filters.model} onChange={(e) => field('model', e.target.value)} />
            </label>
            <label>
              State{' '}
              <select value={filters.status} onChange={(e) => field('status', e.target.value)}>
                <option value="">any</option>
                <option value="empty">empty</option>
                <option value="processing">processing</option>
                <option value="success">success</option>
                <option value="error">error</option>
                <option value="paused">paused</option>
              </select>
            </label>
            <label>
              <input
                type="checkbox"
                checked={filters.hasPendingApprovals}
                onChange={(e) => field('hasPendingApprovals', e.target.checked)}
              />{' '}
              waiting for approval
            </label>
            <label>
              <input
                type="checkbox"
                checked={filters.hasErrors}
                onChange={(e) => field('hasErrors', e.target.checked)}
              />{' '}
              has errors
            </label>
            <label>
              From <input type="datetime-local" value={filters.from} onChange={(e) => field('from', e.target.value)} />
            </label>
            <label>
              To <input type="datetime-local" value={filters.to} onChange={(e) => field('to', e.target.value)} />
            </label>
            <button type="submit">Search</button>
          </form>
          {problem && (
            <p role="alert" className="error">
              {problem}
            </p>
          )}
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Sessions found">
            <table className="sessions">
              <thead>
                <tr>
                  <th scope="col">Session</th>
                  <th scope="col">Last activity</th>
                  <th scope="col">Messages</th>
                  <th scope="col">Tokens</th>
                  <th scope="col">Model</th>
                  <th scope="col">State</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.sessionId}>
                    <td>
                      <a {...linkTo(`/sessions/${encodeURIComponent(row.sessionId)}`)}>{row.title ?? row.sessionId}</a>
                    </td>
                    <td>{formatTime(row.lastActivityAt)}</td>
                    <td>{row.messageCount}</td>
                    <td title={`prompt ${row.usage.promptTokens} · completion ${row.usage.completionTokens}`}>
                      {row.usage.totalTokens}
                    </td>
                    <td>{row.model ?? '—'}</td>
                    <td>
                      {row.status}
                      {row.hasPendingApprovals && <span className="tag warn">awaiting approval</span>}
                      {row.hasErrors && <span className="tag bad">errors</span>}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {rows.length === 0 && !problem && <p>No session matches.</p>}
          <div className="pager">
            <button type="button" disabled={pages.length === 1} onClick={() => setPages(pages.slice(0, -1))}>
              Previous page
            </button>
            <button type="button" disabled={!next} onClick={() => next && setPages([...pages, next])}>
              Next page
            </button>
          </div>
        </>
      )}
    </section>
  );
}

function OpenById() {
  const [id, setId] = useState('');
  return (
    <form
      className="open-by-id"
      onSubmit={(event) => {
        event.preventDefault();
        if (id.trim()) navigate(`/sessions/${encodeURIComponent(id.trim())}`);
      }}
    >
      <label htmlFor="session-id">Open session by id</label>
      <input id="session-id" value={id} onChange={(event) => setId(event.target.value)} />
      <button type="submit">Open</button>
    </form>
  );
}
