import { useEffect, useState } from 'react';
import { get, plainWords } from '../api';
import { BlockView, MessageHead } from './BlockView';
import { messageLatencyMs, messageText, type Message, type Tree } from './model';

/** The path from a message down: it, then each selected (else first) child. */
function branchFrom(tree: Tree, startId: string): string[] {
  const byId = new Map(tree.messages.map((message) => [message.id, message]));
  const path: string[] = [];
  for (let id: string | null | undefined = startId; id;) {
    const message = byId.get(id);
    if (!message) break;
    path.push(id);
    id = message.selectedChild ?? message.children[0];
  }
  return path;
}

/** How two messages at the same depth of two branches differ, in words; undefined when they do not. */
function difference(left: Message | undefined, right: Message | undefined): string | undefined {
  if (!left || !right) return left ? 'only on the left' : 'only on the right';
  const kinds = [
    messageText(left) !== messageText(right) && 'text',
    left.model !== right.model && 'model',
    left.status !== right.status && 'status',
    left.blocks.map((block) => block.type).join() !== right.blocks.map((block) => block.type).join() && 'blocks',
  ].filter(Boolean);
  return kinds.length > 0 ? `differs: ${kinds.join(', ')}` : undefined;
}

/** Two branches under one fork point, message by message, the differing ones marked. */
export function BranchCompare({ base, at }: { base: string; at: number | undefined }) {
  const point = at === undefined ? '' : `?at=${at}`;
  const [tree, setTree] = useState<Tree>();
  const [fork, setFork] = useState('');
  const [sides, setSides] = useState<[string, string]>(['', '']);
  const [columns, setColumns] = useState<[Message[], Message[]]>([[], []]);
  const [problem, setProblem] = useState<string>();

  useEffect(() => {
    get<Tree>(`${base}/tree${point}`).then(setTree, (error: unknown) => setProblem(plainWords(error)));
  }, [base, point]);
  const forks = tree
    ? [
        ...(tree.roots.length > 1 ? [{ id: '', label: 'top-level messages', children: tree.roots }] : []),
        ...tree.messages
          .filter((message) => message.children.length > 1)
          .map((message) => ({ id: message.id, label: `after ${message.id}`, children: message.children })),
      ]
    : [];
  const chosen = forks.find((candidate) => candidate.id === fork) ?? forks[0];
  useEffect(() => {
    if (chosen) setSides([chosen.children[0], chosen.children[1]]);
  }, [chosen?.id]);

  useEffect(() => {
    if (!tree || !sides[0] || !sides[1]) return;
    const load = (start: string) =>
      Promise.all(
        branchFrom(tree, start).map((id) => get<Message>(`${base}/messages/${encodeURIComponent(id)}${point}`)),
      );
    Promise.all([load(sides[0]), load(sides[1])]).then(
      ([left, right]) => setColumns([left, right]),
      (error: unknown) => setProblem(plainWords(error)),
    );
  }, [base, point, sides, tree]);

  if (problem) return <p role="alert">{problem}</p>;
  if (!tree) return <p>Loading the tree…</p>;
  if (!chosen) return <p role="status">This session has no branches to compare.</p>;
  const depth = Math.max(columns[0].length, columns[1].length);
  return (
    <section className="compare" aria-labelledby="compare-title">
      <h2 id="compare-title">Branches side by side</h2>
      <div className="compare-controls">
        <label>
          Fork point{' '}
          <select value={chosen.id} onChange={(event) => setFork(event.target.value)}>
            {forks.map((candidate) => (
              <option key={candidate.id} value={candidate.id}>
                {candidate.label}
              </option>
            ))}
          </select>
        </label>
        {(['Left', 'Right'] as const).map((side, index) => (
          <label key={side}>
            {side}{' '}
            <select
              value={sides[index]}
              onChange={(event) => {
                const next: [string, string] = [...sides];
                next[index] = event.target.value;
                setSides(next);
              }}
            >
              {chosen.children.map((child, number) => (
                <option key={child} value={child}>
                  branch {number + 1} ({child})
                </option>
              ))}
            </select>
          </label>
        ))}
      </div>
      <table className="compare-table">
        <thead>
          <tr>
            <th scope="col">Left</th>
            <th scope="col">Right</th>
          </tr>
        </thead>
        <tbody>
          {Array.from({ length: depth }, (_, row) => {
            const [left, right] = [columns[0][row], columns[1][row]];
            const differs = difference(left, right);
            return (
              <tr key={row} className={differs ? 'differs' : ''}>
                {[left, right].map((message, side) => (
                  <td key={side}>
                    {differs && side === 0 && <p className="tag warn">{differs}</p>}
                    {message && (
                      <>
                        <MessageHead message={message} latencyMs={messageLatencyMs(message)} />
                        {message.blocks.length === 0 && <p>{message.content}</p>}
                        {message.blocks.map((block) => (
                          <BlockView key={block.id} block={block} />
                        ))}
                      </>
                    )}
                  </td>
                ))}
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
